//! Comparing two aggregation results regardless of group order: the check every strategy test
//! and every differential test uses. Rows are sorted by the key columns; integer, decimal, date,
//! string and boolean columns must be identical; floating-point columns must agree within a
//! relative tolerance (or an absolute one near zero), since parallel strategies add in a
//! different order than the oracle.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::{lexsort_to_indices, take, SortColumn};
use arrow::datatypes::{DataType, Float32Type, Float64Type};

/// Relative tolerance for floating-point aggregates (sums of up to millions of terms).
pub const FLOAT_REL_TOL: f64 = 1e-9;

/// Absolute tolerance for floating-point aggregates near zero: when terms cancel, what is left is
/// rounding noise of the order of the terms' ulps (terms in the tests are at most ~1e6), which
/// no relative bound on the tiny result can hold.
pub const FLOAT_ABS_TOL: f64 = 1e-9;

/// `Ok` when `actual` holds the same groups as `expected`; otherwise a description of the first
/// difference. The first `keys` columns are group keys.
pub fn same_groups(expected: &[ArrayRef], actual: &[ArrayRef], keys: usize) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!(
            "{} columns expected, {} found",
            expected.len(),
            actual.len()
        ));
    }
    let e = sorted(expected, keys)?;
    let a = sorted(actual, keys)?;
    for (c, (x, y)) in e.iter().zip(&a).enumerate() {
        if x.len() != y.len() {
            return Err(format!(
                "column {c}: {} rows expected, {} found",
                x.len(),
                y.len()
            ));
        }
        if x.data_type() != y.data_type() {
            return Err(format!(
                "column {c}: type {} expected, {} found",
                x.data_type(),
                y.data_type()
            ));
        }
        let mismatch = match x.data_type() {
            DataType::Float64 => float_mismatch(
                x.as_primitive::<Float64Type>().iter(),
                y.as_primitive::<Float64Type>().iter(),
                f64::MIN_POSITIVE,
            ),
            DataType::Float32 => float_mismatch(
                x.as_primitive::<Float32Type>()
                    .iter()
                    .map(|v| v.map(f64::from)),
                y.as_primitive::<Float32Type>()
                    .iter()
                    .map(|v| v.map(f64::from)),
                f32::MIN_POSITIVE as f64,
            ),
            _ => (x.to_data() != y.to_data()).then(|| first_diff(x, y)),
        };
        if let Some(m) = mismatch {
            return Err(format!("column {c}: {m}"));
        }
    }
    Ok(())
}

fn sorted(cols: &[ArrayRef], keys: usize) -> Result<Vec<ArrayRef>, String> {
    if keys == 0 || cols.is_empty() {
        return Ok(cols.to_vec());
    }
    let sort: Vec<SortColumn> = cols[..keys]
        .iter()
        .map(|c| SortColumn {
            values: c.clone(),
            options: None,
        })
        .collect();
    let idx = lexsort_to_indices(&sort, None).map_err(|e| e.to_string())?;
    cols.iter()
        .map(|c| take(c, &idx, None).map_err(|e| e.to_string()))
        .collect()
}

/// `min_normal`: the column type's smallest normal magnitude. Rounding noise left by terms
/// that cancel is a multiple of their ulps, never subnormal; a subnormal value is data (a MIN
/// or MAX of one, which a GPU that flushed it to zero would lose), so it gets no absolute
/// tolerance.
fn float_mismatch(
    x: impl Iterator<Item = Option<f64>>,
    y: impl Iterator<Item = Option<f64>>,
    min_normal: f64,
) -> Option<String> {
    let subnormal = |v: f64| v != 0.0 && v.abs() < min_normal;
    for (r, (a, b)) in x.zip(y).enumerate() {
        let ok = match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                (a.is_nan() && b.is_nan())
                    || a == b
                    || (a - b).abs() <= FLOAT_REL_TOL * a.abs().max(b.abs())
                    || ((a - b).abs() <= FLOAT_ABS_TOL && !subnormal(a) && !subnormal(b))
            }
            _ => false,
        };
        if !ok {
            return Some(format!("row {r}: {a:?} expected, {b:?} found"));
        }
    }
    None
}

fn first_diff(x: &ArrayRef, y: &ArrayRef) -> String {
    for r in 0..x.len() {
        let (a, b) = (x.slice(r, 1), y.slice(r, 1));
        if a.to_data() != b.to_data() {
            return format!("row {r}: {a:?} expected, {b:?} found");
        }
    }
    "arrays differ".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Float64Array};
    use std::sync::Arc;

    fn one(v: f64) -> Vec<ArrayRef> {
        vec![Arc::new(Float64Array::from(vec![v])) as ArrayRef]
    }

    #[test]
    fn rounding_noise_near_zero_is_the_same_value() {
        // A CORR that cancels to ~2.7e-7: the sort strategy and the reference differed in the
        // 9th significant digit, 1.8e-15 apart (seed 9262574530794804027 of the strategies
        // property test), which no relative bound on the tiny result holds.
        let (a, b): (f64, f64) = (-2.6619287684291974e-7, -2.661928750855219e-7);
        assert!((a - b).abs() > FLOAT_REL_TOL * a.abs());
        same_groups(&one(a), &one(b), 0).unwrap();
    }

    #[test]
    fn real_differences_are_caught() {
        for (a, b) in [
            (1.0f64, 1.0 + 1e-6),
            (0.5, 0.5000001),
            (1e12, 1e12 + 1e4),
            (0.0, 2e-9),
        ] {
            assert!(same_groups(&one(a), &one(b), 0).is_err(), "{a} vs {b}");
        }
        assert!(same_groups(&one(f64::NAN), &one(1.0), 0).is_err());
    }

    #[test]
    fn a_subnormal_is_data_not_noise() {
        // An f32 MIN of -1e-40 flushed to zero is a wrong answer, whatever the tolerance.
        let f32s = |v: f32| vec![Arc::new(Float32Array::from(vec![v])) as ArrayRef];
        assert!(same_groups(&f32s(-1e-40), &f32s(0.0), 0).is_err());
        assert!(same_groups(&f32s(0.0), &f32s(-1e-40), 0).is_err());
        same_groups(&f32s(-1e-40), &f32s(-1e-40), 0).unwrap();
        assert!(same_groups(&one(5e-324), &one(0.0), 0).is_err());
        // Noise near zero in an f32 column still passes.
        same_groups(&f32s(3e-10), &f32s(0.0), 0).unwrap();
    }
}
