//! Aggregate states as Arrow columns: the form in which partial groups leave memory (spilled
//! to Arrow IPC files when the aggregation outgrows its budget) and come back to be merged.
//! Each aggregate's [`super::Aggregate::save`] and [`super::Aggregate::load`] are built from the
//! column types here; a state is saved exactly (a 128-bit sum as 16 bytes, never rounded), so
//! a spilled and reloaded group merges to the same result as one that stayed in memory.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, FixedSizeBinaryArray, Float64Array, Int64Array,
};
use arrow::datatypes::{Float64Type, Int64Type};

use crate::error::{GrouperError, Result};

/// A scalar part of a state that is saved as one non-null Arrow column.
pub trait StateValue: Copy + Sized {
    /// The values as a column.
    fn column(values: Vec<Self>) -> ArrayRef;
    /// The values of a column [`StateValue::column`] wrote.
    fn read(column: &ArrayRef) -> Result<Vec<Self>>;
}

fn mismatch(column: &ArrayRef, want: &str) -> GrouperError {
    GrouperError::InvalidInput(format!(
        "a saved aggregate state of type {} where {want} was expected",
        column.data_type()
    ))
}

impl StateValue for i64 {
    fn column(values: Vec<Self>) -> ArrayRef {
        Arc::new(Int64Array::from(values))
    }
    fn read(column: &ArrayRef) -> Result<Vec<Self>> {
        let a = column
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| mismatch(column, "Int64"))?;
        Ok(a.values().to_vec())
    }
}

impl StateValue for f64 {
    fn column(values: Vec<Self>) -> ArrayRef {
        Arc::new(Float64Array::from(values))
    }
    fn read(column: &ArrayRef) -> Result<Vec<Self>> {
        let a = column
            .as_primitive_opt::<Float64Type>()
            .ok_or_else(|| mismatch(column, "Float64"))?;
        Ok(a.values().to_vec())
    }
}

impl StateValue for bool {
    fn column(values: Vec<Self>) -> ArrayRef {
        Arc::new(BooleanArray::from(values))
    }
    fn read(column: &ArrayRef) -> Result<Vec<Self>> {
        let a = column
            .as_boolean_opt()
            .ok_or_else(|| mismatch(column, "Boolean"))?;
        Ok(a.values().iter().collect())
    }
}

/// 128-bit sums as 16 little-endian bytes: Decimal128 would do, but its precision (38 digits)
/// is narrower than the accumulator's range, and a reader may validate it.
impl StateValue for i128 {
    fn column(values: Vec<Self>) -> ArrayRef {
        let bytes: Vec<[u8; 16]> = values.iter().map(|v| v.to_le_bytes()).collect();
        Arc::new(
            FixedSizeBinaryArray::try_from_iter(bytes.iter())
                .unwrap_or_else(|_| FixedSizeBinaryArray::new_null(16, 0)),
        )
    }
    fn read(column: &ArrayRef) -> Result<Vec<Self>> {
        let a = column
            .as_fixed_size_binary_opt()
            .filter(|a| a.value_length() == 16)
            .ok_or_else(|| mismatch(column, "FixedSizeBinary(16)"))?;
        (0..a.len())
            .map(|i| {
                let b: [u8; 16] = a
                    .value(i)
                    .try_into()
                    .map_err(|_| mismatch(column, "16 bytes"))?;
                Ok(i128::from_le_bytes(b))
            })
            .collect()
    }
}

/// Column `i` of a saved state, or the error that it is missing.
pub(crate) fn nth(columns: &[ArrayRef], i: usize) -> Result<&ArrayRef> {
    columns.get(i).ok_or_else(|| {
        GrouperError::InvalidInput(format!(
            "a saved aggregate state has {} columns, expected more than {i}",
            columns.len()
        ))
    })
}

/// States of two scalar parts (a sum and its flag or count) as two columns, `split` taking a
/// state apart.
pub(crate) fn save_pairs<S, A: StateValue, B: StateValue>(
    states: &[S],
    rows: &[u32],
    split: impl Fn(&S) -> (A, B),
) -> Vec<ArrayRef> {
    let (a, b): (Vec<A>, Vec<B>) = rows.iter().map(|&r| split(&states[r as usize])).unzip();
    vec![A::column(a), B::column(b)]
}

/// The states [`save_pairs`] wrote, `join` putting each back together.
pub(crate) fn load_pairs<S, A: StateValue, B: StateValue>(
    columns: &[ArrayRef],
    join: impl Fn(A, B) -> S,
) -> Result<Vec<S>> {
    let a = A::read(nth(columns, 0)?)?;
    let b = B::read(nth(columns, 1)?)?;
    if a.len() != b.len() {
        return Err(GrouperError::InvalidInput(
            "a saved aggregate state's columns differ in length".into(),
        ));
    }
    Ok(a.into_iter().zip(b).map(|(a, b)| join(a, b)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_survive_their_columns_exactly() {
        let wide = vec![i128::MIN, -1, 0, 1, i128::MAX, 1 << 100];
        assert_eq!(i128::read(&i128::column(wide.clone())).unwrap(), wide);
        let ints = vec![i64::MIN, 0, i64::MAX];
        assert_eq!(i64::read(&i64::column(ints.clone())).unwrap(), ints);
        let floats = vec![-0.0, 1.5, f64::MAX];
        assert_eq!(f64::read(&f64::column(floats.clone())).unwrap(), floats);
        let flags = vec![true, false, true];
        assert_eq!(bool::read(&bool::column(flags.clone())).unwrap(), flags);
        assert!(i64::read(&f64::column(floats)).is_err());
        assert!(i128::read(&i64::column(ints)).is_err());
    }
}
