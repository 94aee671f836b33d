//! Dense ids (first seen, first numbered) of the window's partition keys.
//!
//! One integer key whose values span a small range (db-benchmark q8's `id6`: 1e5 values) is
//! indexed directly by value, Karnagel's perfect hashing: one load a row instead of a probe of
//! DataFusion's hash table (q8 at 1e7 rows on 2 threads: its `intern` was ~12 ns a row, a third
//! of the selection). Any other key, or one whose range passes [`MAX_DIRECT_RANGE`], is
//! interned by DataFusion's `GroupValues`; a direct index that outgrows its range hands its
//! keys over in id order, so every id stays what it was.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::EmitTo;
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;

/// The widest value range indexed directly (4 MiB of ids).
const MAX_DIRECT_RANGE: u64 = if cfg!(test) { 1 << 12 } else { 1 << 20 };

/// No id yet at a direct index's slot.
const NONE: u32 = u32::MAX;

/// Group ids of one partition's keys.
pub(super) enum GroupIds {
    Direct(Direct),
    Hashed(Box<dyn GroupValues>),
}

/// One integer key's ids by value.
pub(super) struct Direct {
    /// The key's type (emitted as such).
    data_type: DataType,
    /// The value at slot 0.
    base: i64,
    /// Id of each value from `base` on (`NONE`: not seen).
    index: Vec<u32>,
    /// Each id's value (`None`: the NULL key), in id order.
    keys: Vec<Option<i64>>,
    /// The NULL key's id (`NONE`: not seen).
    null_id: u32,
}

impl GroupIds {
    /// Ids for keys of `types`.
    pub(super) fn new(types: &[DataType]) -> Result<Self> {
        match types {
            [t] if t.is_integer() && t != &DataType::UInt64 => Ok(Self::Direct(Direct {
                data_type: t.clone(),
                base: 0,
                index: Vec::new(),
                keys: Vec::new(),
                null_id: NONE,
            })),
            _ => Ok(Self::Hashed(hashed(types)?)),
        }
    }

    /// Each row's id in `gids`, new keys numbered after the last.
    pub(super) fn intern(&mut self, keys: &[ArrayRef], gids: &mut Vec<usize>) -> Result<()> {
        if let Self::Direct(d) = self {
            let [key] = keys else {
                return Err(DataFusionError::Internal(
                    "top-N per group: a direct index of one key".into(),
                ));
            };
            let key = arrow::compute::cast(key, &DataType::Int64)?;
            let key = key.as_primitive::<Int64Type>();
            if d.covers(key) {
                return d.intern(key, gids);
            }
            let mut values = hashed(std::slice::from_ref(&d.data_type))?;
            if !d.keys.is_empty() {
                let seen: ArrayRef = Arc::new(d.keys.iter().copied().collect::<Int64Array>());
                values.intern(&[arrow::compute::cast(&seen, &d.data_type)?], gids)?;
            }
            *self = Self::Hashed(values);
        }
        match self {
            Self::Hashed(values) => values.intern(keys, gids),
            Self::Direct(_) => Ok(()),
        }
    }

    /// Groups so far.
    pub(super) fn len(&self) -> usize {
        match self {
            Self::Direct(d) => d.keys.len(),
            Self::Hashed(values) => values.len(),
        }
    }

    /// Every group's key, in id order.
    pub(super) fn emit(&mut self) -> Result<Vec<ArrayRef>> {
        match self {
            Self::Direct(d) => {
                let keys: ArrayRef = Arc::new(d.keys.iter().copied().collect::<Int64Array>());
                Ok(vec![arrow::compute::cast(&keys, &d.data_type)?])
            }
            Self::Hashed(values) => values.emit(EmitTo::All),
        }
    }

    /// Bytes held.
    pub(super) fn size(&self) -> usize {
        match self {
            Self::Direct(d) => d.index.capacity() * 4 + d.keys.capacity() * 16,
            Self::Hashed(values) => values.size(),
        }
    }
}

impl Direct {
    /// Whether the index's range, widened (and re-based) to take `key`'s values, stays
    /// within [`MAX_DIRECT_RANGE`]; if so it is widened.
    fn covers(&mut self, key: &Int64Array) -> bool {
        let (Some(lo), Some(hi)) = (arrow::compute::min(key), arrow::compute::max(key)) else {
            return true; // all NULL
        };
        let (lo, hi) = if self.index.is_empty() {
            (lo, hi)
        } else {
            let top = self.base + self.index.len() as i64 - 1;
            (lo.min(self.base), hi.max(top))
        };
        let span = (i128::from(hi) - i128::from(lo)) as u128 + 1;
        if span > u128::from(MAX_DIRECT_RANGE) {
            return false;
        }
        let span = span as usize;
        if self.index.is_empty() {
            self.base = lo;
            self.index = vec![NONE; span];
        } else if lo < self.base || span > self.index.len() {
            let mut index = vec![NONE; span];
            let shift = (self.base - lo) as usize;
            if let Some(to) = index.get_mut(shift..shift + self.index.len()) {
                to.copy_from_slice(&self.index);
            }
            self.base = lo;
            self.index = index;
        }
        true
    }

    /// Each row's id (`covers` held: the index covers every value).
    fn intern(&mut self, key: &Int64Array, gids: &mut Vec<usize>) -> Result<()> {
        gids.clear();
        gids.reserve(key.len());
        let nulls = key.nulls().filter(|n| n.null_count() > 0);
        for (row, &v) in key.values().iter().enumerate() {
            let valid = nulls.is_none_or(|n| n.is_valid(row));
            let id = match valid {
                true => self.index.get_mut(v.wrapping_sub(self.base) as usize),
                false => Some(&mut self.null_id),
            };
            let Some(id) = id else {
                return Err(DataFusionError::Internal(format!(
                    "top-N per group: key {v} outside the direct index"
                )));
            };
            if *id == NONE {
                *id = self.keys.len() as u32;
                self.keys.push(valid.then_some(v));
            }
            gids.push(*id as usize);
        }
        Ok(())
    }
}

/// DataFusion's group values over keys of `types`.
fn hashed(types: &[DataType]) -> Result<Box<dyn GroupValues>> {
    let fields: Vec<Field> = types
        .iter()
        .enumerate()
        .map(|(i, t)| Field::new(format!("k{i}"), t.clone(), true))
        .collect();
    new_group_values(Arc::new(Schema::new(fields)), &GroupOrdering::None)
}
