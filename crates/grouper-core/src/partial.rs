//! [`PartialGroups`]: groups not yet finalized — key columns and one accumulator per aggregate
//! — so that the results of different engines over disjoint parts of one input (the GPU's
//! chunks and the CPU's, in co-processing) merge with the aggregate algebra's `merge` and are
//! finalized once (Tomé §3.6, data-parallel co-processing; Luan's intra-operator split).

use arrow::array::{new_empty_array, ArrayRef, UInt32Array};
use arrow::compute::{concat, take};
use arrow::datatypes::DataType;
use hashbrown::HashMap;

use crate::cpu::{finalize_chunk_aggs, new_accumulators, Accumulators, Chunk};
use crate::error::{GrouperError, Result};
use crate::input::QuerySpec;
use crate::keys::KeyCodec;

/// Groups with their keys and un-finalized states, `len` of each.
pub struct PartialGroups {
    /// One array per key column (none for a global aggregate).
    pub keys: Vec<ArrayRef>,
    /// One accumulator per aggregate, each holding `len` groups.
    pub accs: Accumulators,
    /// Groups.
    pub len: usize,
}

impl PartialGroups {
    /// The groups of `chunks` (result rows of a CPU strategy), keys decoded with `codec`, into
    /// fresh accumulators `accs` (one per aggregate, empty).
    pub(crate) fn from_chunks(
        chunks: Vec<Chunk>,
        codec: &KeyCodec,
        key_types: &[DataType],
        mut accs: Accumulators,
    ) -> Result<Self> {
        let len: usize = chunks.iter().map(|c| c.words.len()).sum();
        accs.iter_mut().for_each(|a| a.resize(len));
        codec.prepare_decode()?;
        let mut parts: Vec<Vec<ArrayRef>> = Vec::new();
        let mut at = 0u32;
        for mut chunk in chunks {
            let n = chunk.words.len();
            if n == 0 {
                continue;
            }
            parts.push(codec.decode(&chunk.words)?);
            let src: Vec<u32> = chunk.select.unwrap_or_else(|| (0..n as u32).collect());
            let dst: Vec<u32> = (at..at + n as u32).collect();
            for (a, c) in accs.iter_mut().zip(&mut chunk.accs) {
                a.merge_take(c.as_mut(), &src, &dst)?;
            }
            at += n as u32;
        }
        let keys = if parts.is_empty() {
            key_types.iter().map(new_empty_array).collect()
        } else {
            concat_parts(&parts)?
        };
        Ok(Self { keys, accs, len })
    }

    /// Merges `other` (the same query over other rows) into these groups.
    pub fn merge(self, other: Self, key_types: &[DataType]) -> Result<Self> {
        Self::merge_all(vec![self, other], key_types)
    }

    /// Merges groups of the same query over disjoint rows (co-processing's two sides, or the
    /// spilled runs of one partition) in one pass: the first part's groups keep their places,
    /// the others' fold into them or append.
    pub fn merge_all(parts: Vec<Self>, key_types: &[DataType]) -> Result<Self> {
        let mut parts = parts.into_iter();
        let Some(mut first) = parts.next() else {
            return Err(GrouperError::InvalidInput("no groups to merge".into()));
        };
        if key_types.is_empty() {
            // A global aggregate: one group on each side (the identity where no row came).
            for a in first.accs.iter_mut() {
                a.resize(1);
            }
            for other in parts {
                for (a, b) in first.accs.iter_mut().zip(&other.accs) {
                    if !b.is_empty() {
                        a.merge(b.as_ref(), &[0], &[0])?;
                    }
                }
            }
            first.len = 1;
            return Ok(first);
        }
        let rest: Vec<Self> = parts.filter(|p| p.len > 0).collect();
        if rest.is_empty() {
            return Ok(first);
        }
        if first.len == 0 {
            return Self::merge_all(rest, key_types);
        }
        // One codec over every part's keys (interned when they span more than 64 bits).
        let keys: Vec<&[ArrayRef]> = std::iter::once(&first)
            .chain(&rest)
            .map(|p| p.keys.as_slice())
            .collect();
        let codec = KeyCodec::plan(key_types, &keys)?;
        let missing = || GrouperError::InvalidInput("a merged key is outside its codec".into());
        let ours = codec.encode(&first.keys, first.len)?.ok_or_else(missing)?;
        let capacity = first.len + rest.iter().map(|p| p.len).sum::<usize>();
        let mut index: HashMap<u64, u32> = HashMap::with_capacity(capacity);
        index.extend(ours.iter().enumerate().map(|(g, w)| (*w, g as u32)));
        let mut groups = first.len as u32;
        let mut new_keys: Vec<Vec<ArrayRef>> = vec![Vec::new(); key_types.len()];
        for other in &rest {
            let theirs = codec.encode(&other.keys, other.len)?.ok_or_else(missing)?;
            let mut fresh: Vec<u32> = Vec::new();
            let mut dst = Vec::with_capacity(other.len);
            for (row, w) in theirs.iter().enumerate() {
                let g = *index.entry(*w).or_insert_with(|| {
                    fresh.push(row as u32);
                    groups += 1;
                    groups - 1
                });
                dst.push(g);
            }
            let src: Vec<u32> = (0..other.len as u32).collect();
            for (a, b) in first.accs.iter_mut().zip(&other.accs) {
                a.resize(groups as usize);
                a.merge(b.as_ref(), &src, &dst)?;
            }
            let picks = UInt32Array::from(fresh);
            for (c, k) in other.keys.iter().enumerate() {
                new_keys[c].push(take(k.as_ref(), &picks, None)?);
            }
        }
        let keys = first
            .keys
            .iter()
            .zip(new_keys)
            .map(|(a, more)| {
                let arrays: Vec<&dyn arrow::array::Array> = std::iter::once(a.as_ref())
                    .chain(more.iter().map(|m| m.as_ref()))
                    .collect();
                Ok(concat(&arrays)?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            keys,
            accs: first.accs,
            len: groups as usize,
        })
    }

    /// Keys then finalized aggregates, and the number of groups.
    pub fn finalize(self) -> Result<(Vec<ArrayRef>, usize)> {
        let mut columns = self.keys;
        columns.extend(finalize_chunk_aggs(self.accs, None)?);
        Ok((columns, self.len))
    }

    /// Each aggregate's state columns for all groups (the algebra's `save`), after the keys:
    /// the columns a partial aggregation sends to the node that merges (another process's).
    pub fn into_columns(self) -> Vec<ArrayRef> {
        let rows: Vec<u32> = (0..self.len as u32).collect();
        let mut columns = self.keys;
        for acc in &self.accs {
            columns.extend(acc.save(&rows));
        }
        columns
    }

    /// The groups whose columns [`Self::into_columns`] made, for a query of `spec`.
    pub fn from_columns(spec: &QuerySpec, columns: &[ArrayRef], len: usize) -> Result<Self> {
        let keys = spec.key_types.len();
        let mut at = keys;
        let mut accs = new_accumulators(spec)?;
        for acc in accs.iter_mut() {
            let width = acc.save(&[]).len();
            let cols = columns.get(at..at + width).ok_or_else(|| {
                GrouperError::InvalidInput("partial groups with too few state columns".into())
            })?;
            acc.load(cols)?;
            at += width;
        }
        Ok(Self {
            keys: columns.get(..keys).unwrap_or_default().to_vec(),
            accs,
            len,
        })
    }
}

/// The types of each aggregate's state columns, in the order [`PartialGroups::into_columns`]
/// writes them after the keys: one list per aggregate.
pub fn state_types(spec: &QuerySpec) -> Result<Vec<Vec<DataType>>> {
    Ok(new_accumulators(spec)?
        .iter()
        .map(|a| a.save(&[]).iter().map(|c| c.data_type().clone()).collect())
        .collect())
}

/// Column-wise concatenation of parts with the same columns.
fn concat_parts(parts: &[Vec<ArrayRef>]) -> Result<Vec<ArrayRef>> {
    let Some(first) = parts.first() else {
        return Ok(Vec::new());
    };
    (0..first.len())
        .map(|c| {
            let arrays: Vec<&dyn arrow::array::Array> = parts
                .iter()
                .filter_map(|p| p.get(c))
                .map(|a| a.as_ref())
                .collect();
            Ok(concat(&arrays)?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use proptest::prelude::*;

    use super::*;
    use crate::agg::{AggKind, AggregateSpec};
    use crate::compare::same_groups;
    use crate::{reference, Aggregation, InputBatch, QuerySpec};

    fn spec(keys: usize) -> QuerySpec {
        QuerySpec {
            key_types: [DataType::Int64, DataType::Utf8][..keys].to_vec(),
            aggregates: vec![
                AggregateSpec::count_star(),
                AggregateSpec::new(AggKind::Sum, DataType::Int64),
                AggregateSpec::new(AggKind::Avg, DataType::Float64),
                AggregateSpec::new(AggKind::Min, DataType::Int64),
            ],
        }
    }

    fn batch(spec: &QuerySpec, rows: &[(i64, Option<i64>)]) -> InputBatch {
        let k: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
        let s: ArrayRef = Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| format!("s{}", r.0 % 3)),
        ));
        let v: ArrayRef = Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1)));
        let f: ArrayRef = Arc::new(Float64Array::from_iter(
            rows.iter().map(|r| r.1.map(|x| x as f64 * 0.5)),
        ));
        let keys = [k, s][..spec.key_types.len()].to_vec();
        InputBatch::try_new(
            spec,
            keys,
            vec![None, Some(Arc::clone(&v)), Some(f), Some(v)],
            rows.len(),
        )
        .unwrap()
    }

    fn partial(spec: &QuerySpec, batches: &[InputBatch]) -> PartialGroups {
        let agg = Aggregation::new(spec.clone(), Default::default()).unwrap();
        let mut w = agg.worker();
        for b in batches {
            w.push(b).unwrap();
        }
        agg.finish_partial(vec![w]).unwrap().0
    }

    proptest! {
        /// Any split of the input, each side aggregated apart and merged, equals the reference
        /// over all of it (including a side with no rows, and global aggregates).
        #[test]
        fn merged_partials_equal_the_whole(
            keys in 0usize..=2,
            rows in prop::collection::vec((0i64..40, prop::option::of(-1000i64..1000)), 0..300),
            cut in 0usize..300,
        ) {
            let spec = spec(keys);
            let cut = cut.min(rows.len());
            let (a, b) = rows.split_at(cut);
            let (a, b) = (vec![batch(&spec, a)], vec![batch(&spec, b)]);
            let whole = reference::aggregate(&spec, &[a[0].clone(), b[0].clone()]).unwrap();
            let (merged, _) = partial(&spec, &a)
                .merge(partial(&spec, &b), &spec.key_types)
                .unwrap()
                .finalize()
                .unwrap();
            prop_assert_eq!(same_groups(&whole, &merged, keys), Ok(()));
        }

        /// Partial groups sent as columns (a distributed plan's partial phase) and read back
        /// on the other side merge to the reference's answer; the columns have the types
        /// `state_types` declares.
        #[test]
        fn partials_through_columns_merge_to_the_whole(
            keys in 0usize..=2,
            rows in prop::collection::vec((0i64..40, prop::option::of(-1000i64..1000)), 0..300),
            cuts in (0usize..300, 0usize..300),
        ) {
            let spec = spec(keys);
            let (lo, hi) = (cuts.0.min(cuts.1).min(rows.len()), cuts.0.max(cuts.1).min(rows.len()));
            let parts = [&rows[..lo], &rows[lo..hi], &rows[hi..]];
            let whole = reference::aggregate(&spec, &[batch(&spec, &rows)]).unwrap();
            let types: Vec<DataType> = spec.key_types.iter().cloned()
                .chain(state_types(&spec).unwrap().into_iter().flatten())
                .collect();
            let received = parts
                .iter()
                .map(|p| {
                    let sent = partial(&spec, &[batch(&spec, p)]);
                    let len = sent.len;
                    let columns = sent.into_columns();
                    let sent_types: Vec<DataType> = columns.iter().map(|c| c.data_type().clone()).collect();
                    assert_eq!(sent_types, types);
                    PartialGroups::from_columns(&spec, &columns, len).unwrap()
                })
                .collect();
            let (merged, _) = PartialGroups::merge_all(received, &spec.key_types)
                .unwrap()
                .finalize()
                .unwrap();
            prop_assert_eq!(same_groups(&whole, &merged, keys), Ok(()));
        }
    }
}
