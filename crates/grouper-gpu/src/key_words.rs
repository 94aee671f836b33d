//! The keys as the kernel sees them: 64-bit key words. Keys whose exact ranges pack into one
//! word share it (mixed-radix, [`KeyCodec`]); a key too wide for that is split into 63-bit
//! parts ([`Split`]) and the parts spread over as few words as their ranges allow. The group
//! estimate is taken over the words of the first rows, as the planner sees them.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::concat;
use arrow::datatypes::DataType;

use crate::query::GpuQuery;
use crate::wide_keys::Split;
use grouper_core::error::{GrouperError, Result};
use grouper_core::hash::murmur3;
use grouper_core::keys::KeyCodec;
use grouper_core::planner;

/// One key word: which keys it packs and the codec that packs them.
pub(crate) struct KeyWord {
    /// Positions, among the kernel's keys, of the keys this word packs.
    pub(crate) positions: Vec<usize>,
    /// How they pack.
    pub(crate) codec: KeyCodec,
}

/// Words of a packed key must leave the two sentinels (EMPTY, BUSY) free.
const MAX_WORD_DOMAIN: u64 = u64::MAX - 2;

pub(crate) fn packed_ok(codec: &KeyCodec) -> bool {
    codec.packed_columns().is_some() && codec.domain() <= MAX_WORD_DOMAIN
}

/// The exact codec of columns `cols` (indices into each input batch's columns, of `types`).
fn plan_columns(types: &[DataType], inputs: &[Vec<ArrayRef>], cols: &[usize]) -> Result<KeyCodec> {
    let types: Vec<DataType> = cols.iter().map(|&c| types[c].clone()).collect();
    let arrays: Vec<Vec<ArrayRef>> = inputs
        .iter()
        .map(|b| cols.iter().map(|&c| Arc::clone(&b[c])).collect())
        .collect();
    let refs: Vec<&[ArrayRef]> = arrays.iter().map(Vec::as_slice).collect();
    KeyCodec::plan_exact(&types, &refs)
}

/// Splits keys that do not pack into one word (checked by [`split_wide_keys`]) into as few
/// 64-bit words as their exact ranges allow, greedily in key order.
pub(crate) fn plan_keys(key_types: &[DataType], chunks: &[Vec<ArrayRef>]) -> Result<Vec<KeyWord>> {
    let plan = |pos: &[usize]| plan_columns(key_types, chunks, pos);
    let mut words = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut current_codec: Option<KeyCodec> = None;
    for (p, t) in key_types.iter().enumerate() {
        let mut candidate = current.clone();
        candidate.push(p);
        let c = plan(&candidate)?;
        if packed_ok(&c) {
            current = candidate;
            current_codec = Some(c);
            continue;
        }
        if let Some(done) = current_codec.take() {
            words.push(KeyWord {
                positions: std::mem::take(&mut current),
                codec: done,
            });
        }
        let single = plan(&[p])?;
        if !packed_ok(&single) {
            return Err(GrouperError::Unsupported(format!(
                "GPU group key of type {t} spans all 2^64 values"
            )));
        }
        current = vec![p];
        current_codec = Some(single);
    }
    if let Some(done) = current_codec {
        words.push(KeyWord {
            positions: current,
            codec: done,
        });
    }
    Ok(words)
}

/// Where an output key comes from: one key of the kernel, or the parts of a split one.
pub(crate) enum KeyOut {
    Direct(usize),
    Split(Split, Vec<usize>),
}

/// The kernel's key columns: each query key as is, or, when its exact range needs more than one
/// word, its 63-bit parts appended to every chunk as new columns (see [`Split`]).
pub(crate) fn split_wide_keys(
    query: &GpuQuery,
    chunks: &mut [Vec<ArrayRef>],
    columns: &mut Vec<DataType>,
) -> Result<(Vec<usize>, Vec<KeyOut>, Option<KeyCodec>)> {
    if query.keys.is_empty() {
        return Ok((vec![], vec![], None));
    }
    // The common case first: all keys pack into one word, nothing to split.
    let joint = plan_columns(&query.columns, chunks, &query.keys)?;
    if packed_ok(&joint) {
        let direct = (0..query.keys.len()).map(KeyOut::Direct).collect();
        return Ok((query.keys.clone(), direct, Some(joint)));
    }
    let mut ext = Vec::new();
    let mut out = Vec::new();
    for &k in &query.keys {
        let t = query.columns[k].clone();
        if packed_ok(&plan_columns(&query.columns, chunks, &[k])?) {
            out.push(KeyOut::Direct(ext.len()));
            ext.push(k);
            continue;
        }
        let arrays: Vec<ArrayRef> = chunks.iter().map(|c| Arc::clone(&c[k])).collect();
        let split = Split::plan(&t, &arrays).ok_or_else(|| {
            GrouperError::Unsupported(format!("GPU group key of type {t} wider than 64 bits"))
        })?;
        let mut positions = Vec::with_capacity(split.parts);
        for _ in 0..split.parts {
            positions.push(ext.len());
            ext.push(columns.len());
            columns.push(DataType::Int64);
        }
        for c in chunks.iter_mut() {
            let parts = split.parts(&c[k])?;
            c.extend(parts);
        }
        out.push(KeyOut::Split(split, positions));
    }
    Ok((ext, out, None))
}

/// The group-count estimate (`planner::estimate`) over the key words of the first batches,
/// up to [`planner::SKETCH_ROWS`] rows, for `total` input rows; keys of several words are
/// hashed into one (their domain is then unbounded).
pub(crate) fn estimate_groups(
    words: &[KeyWord],
    inputs: &[Vec<ArrayRef>],
    domain: u64,
    total: u64,
) -> Result<planner::Estimate> {
    let hints = planner::Hints {
        rows: Some(total),
        distinct: None,
    };
    if words.is_empty() || inputs.is_empty() {
        return Ok(planner::estimate(&[vec![0]], 1, hints));
    }
    let mut taken = 0;
    let mut sample: Vec<&Vec<ArrayRef>> = Vec::new();
    for b in inputs {
        if taken >= planner::SKETCH_ROWS {
            break;
        }
        taken += b.first().map_or(0, |a| a.len());
        sample.push(b);
    }
    let mut combined: Vec<u64> = Vec::with_capacity(taken);
    let keys_of = |kw: &KeyWord, p: usize| -> Result<ArrayRef> {
        let parts: Vec<&dyn arrow::array::Array> =
            sample.iter().map(|b| b[kw.positions[p]].as_ref()).collect();
        Ok(concat(&parts)?)
    };
    for (i, kw) in words.iter().enumerate() {
        let keys = (0..kw.positions.len())
            .map(|p| keys_of(kw, p))
            .collect::<Result<Vec<_>>>()?;
        let w = kw.codec.encode(&keys, taken)?.unwrap_or_default();
        if i == 0 {
            combined = w;
        } else {
            for (c, x) in combined.iter_mut().zip(w) {
                *c = murmur3(*c ^ x);
            }
        }
    }
    let domain = if words.len() == 1 { domain } else { u64::MAX };
    let mut est = planner::estimate(&[combined], domain, hints);
    est.groups = est.groups.max(1);
    Ok(est)
}
