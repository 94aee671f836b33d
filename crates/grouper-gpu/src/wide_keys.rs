//! Key columns too wide for one 64-bit word (a DECIMAL(38) key, or 64-bit keys spanning every
//! value plus NULL) are split on the host into 63-bit parts of `ordinal - min`, each an Int64
//! column that packs like any other; the table then holds several key words per group and
//! compares them all (the latched multi-word path), and decoding reassembles the column.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, PrimitiveArray};
use arrow::datatypes::{DataType, Int64Type};

use grouper_core::error::{GrouperError, Result};
use grouper_core::keys::ordinal::Ordinal;
use grouper_core::with_ordinal_type;

/// Bits per part.
const PART_BITS: u32 = 63;

/// How one wide key column was split.
#[derive(Debug, Clone)]
pub struct Split {
    /// The column's type.
    pub data_type: DataType,
    /// Smallest ordinal.
    pub min: i128,
    /// Number of parts.
    pub parts: usize,
}

impl Split {
    /// A split of `arrays` (one column over all chunks), or `None` if it has no values or is
    /// not an ordinal type.
    pub fn plan(data_type: &DataType, arrays: &[ArrayRef]) -> Option<Self> {
        let (min, max) = with_ordinal_type!(data_type, T => {
            arrays
                .iter()
                .flat_map(|a| a.as_primitive::<T>().iter().flatten().map(Ordinal::to_ord))
                .fold(None, |acc: Option<(i128, i128)>, v| {
                    Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
                })?
        }, _ => return None);
        let span = max.abs_diff(min);
        let bits = 128 - span.leading_zeros();
        Some(Self {
            data_type: data_type.clone(),
            min,
            parts: (bits.div_ceil(PART_BITS) as usize).max(1),
        })
    }

    /// The part columns of `array`.
    pub fn parts(&self, array: &ArrayRef) -> Result<Vec<ArrayRef>> {
        let offsets: Vec<u128> = with_ordinal_type!(&self.data_type, T => {
            array
                .as_primitive::<T>()
                .values()
                .iter()
                .map(|v| v.to_ord().abs_diff(self.min))
                .collect()
        }, _ => return Err(GrouperError::InvalidInput("split of a non-ordinal key".into())));
        let nulls = array.logical_nulls();
        Ok((0..self.parts)
            .map(|p| {
                let mask = (1u128 << PART_BITS) - 1;
                let values: Vec<i64> = offsets
                    .iter()
                    .map(|o| ((o >> (PART_BITS * p as u32)) & mask) as i64)
                    .collect();
                Arc::new(Int64Array::new(values.into(), nulls.clone())) as ArrayRef
            })
            .collect())
    }

    /// The column back from its decoded parts.
    pub fn join(&self, parts: &[ArrayRef]) -> Result<ArrayRef> {
        let parts: Vec<&PrimitiveArray<Int64Type>> = parts
            .iter()
            .map(|p| p.as_primitive::<Int64Type>())
            .collect();
        let rows = parts.first().map_or(0, |p| p.len());
        with_ordinal_type!(&self.data_type, T => {
            let array: PrimitiveArray<T> = (0..rows)
                .map(|r| {
                    parts[0].is_valid(r).then(|| {
                        let off = parts.iter().enumerate().fold(0u128, |acc, (i, p)| {
                            acc | ((p.value(r) as u128) << (PART_BITS * i as u32))
                        });
                        <T as ArrowPrimitiveType>::Native::from_ord(self.min.wrapping_add(off as i128))
                    })
                })
                .collect();
            Ok(Arc::new(array.with_data_type(self.data_type.clone())) as ArrayRef)
        }, _ => Err(GrouperError::InvalidInput("split of a non-ordinal key".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Decimal128Array;

    #[test]
    fn parts_round_trip() {
        let a: ArrayRef = Arc::new(
            Decimal128Array::from(vec![
                Some(-(10i128.pow(37))),
                None,
                Some(10i128.pow(37)),
                Some(5),
            ])
            .with_precision_and_scale(38, 0)
            .unwrap(),
        );
        let s = Split::plan(a.data_type(), std::slice::from_ref(&a)).unwrap();
        assert_eq!(s.parts, 2);
        let parts = s.parts(&a).unwrap();
        assert_eq!(s.join(&parts).unwrap().as_ref(), a.as_ref());
    }
}
