//! Order-preserving integer images ("ordinals") of primitive key values.
//!
//! Every primitive key type maps to an `i128` ordinal so that one code path computes min/max,
//! packs codes and decodes them back: integers and dates are themselves, decimals their unscaled
//! value, floats their IEEE bits flipped into total order (so `-0.0` and `0.0`, and NaNs with
//! different payloads, are distinct keys, as in DataFusion's hash grouping).

use arrow::datatypes::ArrowNativeType;

/// A native value with an order-preserving, invertible image in `i128`.
pub trait Ordinal: ArrowNativeType {
    /// The ordinal of `self`.
    fn to_ord(self) -> i128;
    /// The value whose ordinal is `o`.
    fn from_ord(o: i128) -> Self;
    /// The smallest ordinal of the type.
    fn min_ordinal() -> i128;
    /// The largest ordinal of the type.
    fn max_ordinal() -> i128;
}

macro_rules! int_ordinal {
    ($($t:ty),*) => {$(
        impl Ordinal for $t {
            #[inline(always)]
            fn to_ord(self) -> i128 { self as i128 }
            #[inline(always)]
            fn from_ord(o: i128) -> Self { o as $t }
            fn min_ordinal() -> i128 { <$t>::MIN as i128 }
            fn max_ordinal() -> i128 { <$t>::MAX as i128 }
        }
    )*};
}
int_ordinal!(i8, i16, i32, i64, u8, u16, u32, u64, i128);

impl Ordinal for f32 {
    #[inline(always)]
    fn to_ord(self) -> i128 {
        let b = self.to_bits() as i32;
        (b ^ (((b >> 31) as u32) >> 1) as i32) as i128
    }
    #[inline(always)]
    fn from_ord(o: i128) -> Self {
        let b = o as i32;
        f32::from_bits((b ^ (((b >> 31) as u32) >> 1) as i32) as u32)
    }
    fn min_ordinal() -> i128 {
        i32::MIN as i128
    }
    fn max_ordinal() -> i128 {
        i32::MAX as i128
    }
}

impl Ordinal for f64 {
    #[inline(always)]
    fn to_ord(self) -> i128 {
        let b = self.to_bits() as i64;
        (b ^ (((b >> 63) as u64) >> 1) as i64) as i128
    }
    #[inline(always)]
    fn from_ord(o: i128) -> Self {
        let b = o as i64;
        f64::from_bits((b ^ (((b >> 63) as u64) >> 1) as i64) as u64)
    }
    fn min_ordinal() -> i128 {
        i64::MIN as i128
    }
    fn max_ordinal() -> i128 {
        i64::MAX as i128
    }
}

/// Runs `$body` with `$T` bound to the Arrow primitive type of `$dt`, or evaluates `$other`.
#[macro_export]
#[doc(hidden)]
macro_rules! with_ordinal_type {
    ($dt:expr, $T:ident => $body:expr, _ => $other:expr) => {{
        use arrow::datatypes::*;
        match $dt {
            DataType::Int8 => {
                type $T = Int8Type;
                $body
            }
            DataType::Int16 => {
                type $T = Int16Type;
                $body
            }
            DataType::Int32 => {
                type $T = Int32Type;
                $body
            }
            DataType::Int64 => {
                type $T = Int64Type;
                $body
            }
            DataType::UInt8 => {
                type $T = UInt8Type;
                $body
            }
            DataType::UInt16 => {
                type $T = UInt16Type;
                $body
            }
            DataType::UInt32 => {
                type $T = UInt32Type;
                $body
            }
            DataType::UInt64 => {
                type $T = UInt64Type;
                $body
            }
            DataType::Float32 => {
                type $T = Float32Type;
                $body
            }
            DataType::Float64 => {
                type $T = Float64Type;
                $body
            }
            DataType::Decimal128(_, _) => {
                type $T = Decimal128Type;
                $body
            }
            DataType::Date32 => {
                type $T = Date32Type;
                $body
            }
            DataType::Date64 => {
                type $T = Date64Type;
                $body
            }
            DataType::Timestamp(TimeUnit::Second, _) => {
                type $T = TimestampSecondType;
                $body
            }
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                type $T = TimestampMillisecondType;
                $body
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                type $T = TimestampMicrosecondType;
                $body
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                type $T = TimestampNanosecondType;
                $body
            }
            DataType::Time32(TimeUnit::Second) => {
                type $T = Time32SecondType;
                $body
            }
            DataType::Time32(TimeUnit::Millisecond) => {
                type $T = Time32MillisecondType;
                $body
            }
            DataType::Time64(TimeUnit::Microsecond) => {
                type $T = Time64MicrosecondType;
                $body
            }
            DataType::Time64(TimeUnit::Nanosecond) => {
                type $T = Time64NanosecondType;
                $body
            }
            _ => $other,
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn f64_ordinals_preserve_total_order(a: f64, b: f64) {
            prop_assert_eq!(a.total_cmp(&b), a.to_ord().cmp(&b.to_ord()));
            prop_assert_eq!(f64::from_ord(a.to_ord()).to_bits(), a.to_bits());
        }

        #[test]
        fn f32_ordinals_preserve_total_order(a: f32, b: f32) {
            prop_assert_eq!(a.total_cmp(&b), a.to_ord().cmp(&b.to_ord()));
            prop_assert_eq!(f32::from_ord(a.to_ord()).to_bits(), a.to_bits());
        }
    }
}
