//! Order-preserving integer images ("ordinals") of primitive key values.
//!
//! Every primitive key type maps to an `i128` ordinal so that one code path computes min/max,
//! packs codes and decodes them back: integers and dates are themselves, decimals their unscaled
//! value, floats their IEEE bits flipped into total order (so `-0.0` and `0.0`, and NaNs with
//! different payloads, are distinct keys, as in DataFusion's hash grouping).

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::{ArrowNativeType, ArrowPrimitiveType};

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

/// The hot loop of the common case (integer keys): one tight pass per column.
#[inline]
pub(super) fn encode_ordinal<T: ArrowPrimitiveType>(
    words: &mut [u64],
    array: &ArrayRef,
    min: i128,
    span: u128,
    off: u64,
    mult: u64,
    nulls: Option<&arrow::buffer::NullBuffer>,
) -> bool
where
    T::Native: Ordinal,
{
    let values = array.as_primitive::<T>().values();
    let narrow = T::Native::min_ordinal() >= i128::from(i64::MIN)
        && T::Native::max_ordinal() <= i128::from(i64::MAX);
    let bounds = (
        i64::try_from(min),
        i64::try_from(min.saturating_add(i128::try_from(span).unwrap_or(i128::MAX))),
    );
    if let (true, (Ok(lo), Ok(hi))) = (narrow, bounds) {
        return encode_ordinal64(words, values, (lo, hi), off, mult, nulls);
    }
    let mut outside = false;
    match nulls {
        Some(n) if n.null_count() > 0 => {
            for (r, (w, v)) in words.iter_mut().zip(values.iter()).enumerate() {
                if n.is_valid(r) {
                    let c = (v.to_ord() - min) as u128;
                    outside |= c > span;
                    *w = w.wrapping_add((c as u64).wrapping_add(off).wrapping_mul(mult));
                }
            }
        }
        _ => {
            for (w, v) in words.iter_mut().zip(values.iter()) {
                let c = (v.to_ord() - min) as u128;
                outside |= c > span;
                *w = w.wrapping_add((c as u64).wrapping_add(off).wrapping_mul(mult));
            }
        }
    }
    !outside
}

/// [`encode_ordinal`] in 64-bit arithmetic, for types whose ordinals fit an `i64` (all but
/// `u64`) and codes within `lo..=hi`: the general path's 128-bit subtraction and compare do
/// not vectorise, and a single key (`mult` 1) needs no multiply.
fn encode_ordinal64<N: Ordinal>(
    words: &mut [u64],
    values: &[N],
    (lo, hi): (i64, i64),
    off: u64,
    mult: u64,
    nulls: Option<&arrow::buffer::NullBuffer>,
) -> bool {
    let code = |v: N| {
        let o = v.to_ord() as i64;
        (
            (o.wrapping_sub(lo) as u64).wrapping_add(off),
            (o < lo) | (o > hi),
        )
    };
    let mut outside = false;
    match nulls {
        Some(n) if n.null_count() > 0 => {
            for (r, (w, &v)) in words.iter_mut().zip(values).enumerate() {
                if n.is_valid(r) {
                    let (c, out) = code(v);
                    outside |= out;
                    *w = w.wrapping_add(c.wrapping_mul(mult));
                }
            }
        }
        _ if mult == 1 => {
            for (w, &v) in words.iter_mut().zip(values) {
                let (c, out) = code(v);
                outside |= out;
                *w = w.wrapping_add(c);
            }
        }
        _ => {
            for (w, &v) in words.iter_mut().zip(values) {
                let (c, out) = code(v);
                outside |= out;
                *w = w.wrapping_add(c.wrapping_mul(mult));
            }
        }
    }
    !outside
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

    proptest::proptest! {
        /// The 64-bit ordinal path codes and bounds-checks exactly as the 128-bit one, at the
        /// edges of `i64` too.
        #[test]
        fn narrow_ordinal_codes_equal_the_general_ones(
            values in proptest::collection::vec(
                proptest::prop_oneof![-50i64..50, proptest::prelude::Just(i64::MIN), proptest::prelude::Just(i64::MAX)],
                0..64,
            ),
            lo in -60i64..40,
            span in 0u64..80,
            mult in 1u64..5,
            nulls in proptest::collection::vec(proptest::prelude::any::<bool>(), 64),
        ) {
            use arrow::array::Int64Array;
            let n = values.len();
            let array: ArrayRef = std::sync::Arc::new(Int64Array::from(values.clone()));
            let nb = arrow::buffer::NullBuffer::from(nulls[..n].to_vec());
            for nb in [None, Some(&nb)] {
                let mut general = vec![7u64; n];
                let mut narrow = vec![7u64; n];
                // The general path, forced by calling it on the 128-bit route's inputs.
                let mut outside = false;
                for (r, (w, &v)) in general.iter_mut().zip(&values).enumerate() {
                    if nb.is_none_or(|b| b.is_valid(r)) {
                        let c = (v as i128 - lo as i128) as u128;
                        outside |= c > span as u128;
                        *w = w.wrapping_add((c as u64).wrapping_add(1).wrapping_mul(mult));
                    }
                }
                let inside = encode_ordinal64(&mut narrow, array.as_primitive::<arrow::datatypes::Int64Type>().values(), (lo, lo + span as i64), 1, mult, nb);
                proptest::prop_assert_eq!(inside, !outside);
                if inside {
                    proptest::prop_assert_eq!(&narrow, &general);
                }
                let via_codec = encode_ordinal::<arrow::datatypes::Int64Type>(&mut vec![7u64; n], &array, lo as i128, span as u128, 1, mult, nb);
                proptest::prop_assert_eq!(via_codec, !outside);
            }
        }
    }
}
