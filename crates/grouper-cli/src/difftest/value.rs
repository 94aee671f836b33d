//! Canonical values: one form for the generator's data, grouper's Arrow results and DuckDB's
//! Python results, so that two engines with different result types (DuckDB sums integers into
//! HUGEINT and averages decimals into DOUBLE; DataFusion keeps Int64 and DECIMAL) compare by
//! value: exactly for integers and decimals, within a stated tolerance where a float is involved.

use std::cmp::Ordering;
use std::fmt;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use serde::{Deserialize, Serialize};

/// Relative tolerance where a float is compared: sums of floats depend on the order of
/// additions (threads, atomics), and DuckDB averages decimals in DOUBLE.
pub const FLOAT_TOLERANCE: f64 = 1e-9;

/// One SQL value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer of any width (DuckDB's HUGEINT included).
    Int(i128),
    /// A decimal: unscaled value and scale.
    Dec(i128, i8),
    /// A float, kept as its shortest round-trip text so NaN and infinities survive JSON.
    Float(#[serde(with = "float_text")] f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// A date as days since 1970-01-01.
    Date(i32),
}

mod float_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:?}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        let t = String::deserialize(d)?;
        super::parse_float(&t).map_err(serde::de::Error::custom)
    }
}

/// Parses Rust's or Python's float text (`nan`, `inf`, `-inf` included).
pub fn parse_float(t: &str) -> Result<f64, String> {
    match t.to_ascii_lowercase().as_str() {
        "nan" => Ok(f64::NAN),
        "inf" | "infinity" => Ok(f64::INFINITY),
        "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
        _ => t.parse().map_err(|_| format!("not a float: {t}")),
    }
}

/// Parses a plain decimal text (`-12.340`) into unscaled value and scale.
pub fn parse_decimal(t: &str) -> Result<Value, String> {
    let bad = || format!("not a decimal: {t}");
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let scale = i8::try_from(frac.len()).map_err(|_| bad())?;
    let digits = format!("{int}{frac}");
    let v: i128 = digits.parse().map_err(|_| bad())?;
    Ok(Value::Dec(v, scale))
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Dec(v, s) => {
                let s = usize::try_from(*s).unwrap_or(0);
                let digits = v.unsigned_abs().to_string();
                let digits = format!("{digits:0>width$}", width = s + 1);
                let (i, fr) = digits.split_at(digits.len() - s);
                let sign = if *v < 0 { "-" } else { "" };
                if s == 0 {
                    write!(f, "{sign}{i}")
                } else {
                    write!(f, "{sign}{i}.{fr}")
                }
            }
            Value::Float(v) => write!(f, "{v:?}"),
            Value::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Date(d) => write!(f, "date:{d}"),
        }
    }
}

/// A numeric value as an exact rational `m / 10^s` or a float.
enum Num {
    Exact(i128, i8),
    Float(f64),
}

impl Value {
    fn num(&self) -> Option<Num> {
        match *self {
            Value::Int(v) => Some(Num::Exact(v, 0)),
            Value::Dec(v, s) => Some(Num::Exact(v, s)),
            Value::Float(f) => Some(Num::Float(f)),
            _ => None,
        }
    }

    /// The value as f64 (numeric values only).
    pub fn as_f64(&self) -> Option<f64> {
        match self.num()? {
            Num::Exact(v, s) => Some(v as f64 / 10f64.powi(i32::from(s))),
            Num::Float(f) => Some(f),
        }
    }

    /// Whether two results agree: exactly, except within [`FLOAT_TOLERANCE`] when either side
    /// is a float (and within one unit of the last place of a decimal compared with a float).
    pub fn agrees(&self, other: &Value) -> bool {
        match (self.num(), other.num()) {
            (Some(Num::Exact(a, sa)), Some(Num::Exact(b, sb))) => exact_eq(a, sa, b, sb),
            (Some(a), Some(b)) => {
                let ulp = |n: &Num| match n {
                    Num::Exact(_, s) => 10f64.powi(-i32::from(*s)),
                    Num::Float(_) => 0.0,
                };
                let slack = ulp(&a).max(ulp(&b));
                let (x, y) = (
                    self.as_f64().unwrap_or(f64::NAN),
                    other.as_f64().unwrap_or(f64::NAN),
                );
                (x.is_nan() && y.is_nan())
                    || x == y
                    || (x - y).abs() <= FLOAT_TOLERANCE * x.abs().max(y.abs()) + slack
            }
            _ => self == other,
        }
    }

    /// A total order for sorting result rows before an unordered comparison (NULL first,
    /// numbers by value, then by kind).
    pub fn sort_cmp(&self, other: &Value) -> Ordering {
        let rank = |v: &Value| match v {
            Value::Null => 0,
            Value::Int(_) | Value::Dec(..) | Value::Float(_) => 1,
            Value::Str(_) => 2,
            Value::Bool(_) => 3,
            Value::Date(_) => 4,
        };
        match (self, other) {
            (Value::Str(a), Value::Str(b)) => a.cmp(b),
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Date(a), Value::Date(b)) => a.cmp(b),
            (a, b) if rank(a) == 1 && rank(b) == 1 => match (a.num(), b.num()) {
                (Some(Num::Exact(x, sx)), Some(Num::Exact(y, sy))) => exact_cmp(x, sx, y, sy),
                _ => a
                    .as_f64()
                    .unwrap_or(f64::NAN)
                    .total_cmp(&b.as_f64().unwrap_or(f64::NAN)),
            },
            (a, b) => rank(a).cmp(&rank(b)),
        }
    }

    /// Whether this value fits `ty` (a planned result type), for overflow checks.
    pub fn fits(&self, ty: &DataType) -> bool {
        let (v, s) = match self.num() {
            Some(Num::Exact(v, s)) => (v, s),
            // A float answer (DuckDB's AVG) against an exact type: by magnitude.
            Some(Num::Float(f)) => {
                let limit = match ty {
                    DataType::Int64 => i64::MAX as f64,
                    DataType::UInt64 => u64::MAX as f64,
                    DataType::Decimal128(p, s) => 10f64.powi(i32::from(*p) - i32::from(*s)),
                    _ => f64::INFINITY,
                };
                return f.abs() < limit;
            }
            None => return true,
        };
        let whole = |scale: i8| rescale(v, s, scale);
        match ty {
            DataType::Int8 => whole(0).is_some_and(|w| i8::try_from(w).is_ok()),
            DataType::Int16 => whole(0).is_some_and(|w| i16::try_from(w).is_ok()),
            DataType::Int32 => whole(0).is_some_and(|w| i32::try_from(w).is_ok()),
            DataType::Int64 => whole(0).is_some_and(|w| i64::try_from(w).is_ok()),
            DataType::UInt64 => whole(0).is_some_and(|w| u64::try_from(w).is_ok()),
            DataType::Decimal128(p, ts) => whole(*ts).is_some_and(|w| {
                u32::from(*p) >= 39 || w.unsigned_abs() < 10u128.pow(u32::from(*p))
            }),
            _ => true,
        }
    }
}

/// `v / 10^from` as a multiple of `10^-to`, if exact and in range.
fn rescale(v: i128, from: i8, to: i8) -> Option<i128> {
    if to >= from {
        10i128
            .checked_pow(u32::try_from(to - from).ok()?)
            .and_then(|m| v.checked_mul(m))
    } else {
        let d = 10i128.checked_pow(u32::try_from(from - to).ok()?)?;
        (v % d == 0).then_some(v / d)
    }
}

fn exact_eq(a: i128, sa: i8, b: i128, sb: i8) -> bool {
    exact_cmp(a, sa, b, sb) == Ordering::Equal
}

fn exact_cmp(a: i128, sa: i8, b: i128, sb: i8) -> Ordering {
    let s = sa.max(sb);
    match (rescale(a, sa, s), rescale(b, sb, s)) {
        (Some(x), Some(y)) => x.cmp(&y),
        // Out of i128 range at the common scale: compare as floats (never equal then).
        _ => (a as f64 / 10f64.powi(i32::from(sa)))
            .total_cmp(&(b as f64 / 10f64.powi(i32::from(sb)))),
    }
}

/// The canonical values of row `i` of `col`.
pub fn from_array(col: &ArrayRef, i: usize) -> Value {
    if col.is_null(i) {
        return Value::Null;
    }
    match col.data_type() {
        DataType::Int8 => Value::Int(col.as_primitive::<Int8Type>().value(i).into()),
        DataType::Int16 => Value::Int(col.as_primitive::<Int16Type>().value(i).into()),
        DataType::Int32 => Value::Int(col.as_primitive::<Int32Type>().value(i).into()),
        DataType::Int64 => Value::Int(col.as_primitive::<Int64Type>().value(i).into()),
        DataType::UInt8 => Value::Int(col.as_primitive::<UInt8Type>().value(i).into()),
        DataType::UInt16 => Value::Int(col.as_primitive::<UInt16Type>().value(i).into()),
        DataType::UInt32 => Value::Int(col.as_primitive::<UInt32Type>().value(i).into()),
        DataType::UInt64 => Value::Int(col.as_primitive::<UInt64Type>().value(i).into()),
        DataType::Decimal128(_, s) => Value::Dec(col.as_primitive::<Decimal128Type>().value(i), *s),
        DataType::Float32 => Value::Float(col.as_primitive::<Float32Type>().value(i).into()),
        DataType::Float64 => Value::Float(col.as_primitive::<Float64Type>().value(i)),
        DataType::Boolean => Value::Bool(col.as_boolean().value(i)),
        DataType::Date32 => Value::Date(col.as_primitive::<Date32Type>().value(i)),
        DataType::Utf8 => Value::Str(col.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Value::Str(col.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => Value::Str(col.as_string_view().value(i).to_string()),
        _ => Value::Str(
            arrow::util::display::array_value_to_string(col, i)
                .unwrap_or_else(|e| format!("<{e}>")),
        ),
    }
}

/// Result rows of `columns`, row-major.
pub fn rows_of(columns: &[ArrayRef], num_rows: usize) -> Vec<Vec<Value>> {
    (0..num_rows)
        .map(|i| columns.iter().map(|c| from_array(c, i)).collect())
        .collect()
}

/// Sorts rows for an unordered comparison.
pub fn sort_rows(rows: &mut [Vec<Value>]) {
    rows.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.sort_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_compare_by_value_and_floats_within_tolerance() {
        assert!(Value::Dec(12340, 3).agrees(&Value::Dec(1234, 2)));
        assert!(Value::Int(5).agrees(&Value::Dec(500, 2)));
        assert!(!Value::Int(5).agrees(&Value::Dec(501, 2)));
        assert!(Value::Dec(1_000_001, 6).agrees(&Value::Float(1.000001)));
        assert!(!Value::Float(1.0).agrees(&Value::Float(1.0001)));
        assert!(Value::Float(f64::NAN).agrees(&Value::Float(f64::NAN)));
        assert!(!Value::Null.agrees(&Value::Int(0)));
        assert_eq!(parse_decimal("-0.050"), Ok(Value::Dec(-50, 3)));
        assert_eq!(Value::Dec(-50, 3).to_string(), "-0.050");
        assert!(Value::Int(i64::MAX as i128 + 1)
            .fits(&DataType::Int64)
            .eq(&false));
        assert!(Value::Dec(99_999, 2).fits(&DataType::Decimal128(5, 2)));
        assert!(!Value::Dec(100_000, 2).fits(&DataType::Decimal128(5, 2)));
    }
}
