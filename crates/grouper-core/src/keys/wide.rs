//! Two-word keys: a composite key whose mixed-radix domain passes 2^64 but whose columns split
//! into two runs each within 2^64 (db-benchmark q10's six columns at 1e8 rows: about 2^68)
//! is interned as the 16 bytes of two packed words, not as its `arrow-row` bytes. Both words
//! come from the packed codec's column encoders, so a row costs two fixed-width passes over
//! the columns instead of a variable-length row conversion, and the dictionary hashes, compares
//! and stores 16 bytes a key instead of about 54 (three strings and three integers).
//!
//! The words' codecs are planned over every key of the input ([`KeyCodec::plan_open`]) and
//! never widen: a key's bytes must stay the same for as long as its code lives.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::DataType;
use arrow::row::Rows;

use super::{ColumnPlan, KeyCodec, Layout};
use crate::error::{GrouperError, Result};

/// Bytes of a two-word key.
pub const WIDTH: usize = 16;

/// The two packed codecs of a two-word key: `lo` over the key columns before `split`, `hi`
/// over the rest.
#[derive(Debug)]
pub struct Halves {
    lo: KeyCodec,
    hi: KeyCodec,
    split: usize,
}

impl Halves {
    /// The split of `cols` (packed plans of every key column) into two runs that each pack
    /// into 64 bits, or `None` when there is none.
    pub(super) fn split(key_types: &[DataType], cols: &[ColumnPlan]) -> Result<Option<Self>> {
        let fits = |cols: &[ColumnPlan]| {
            cols.iter()
                .try_fold(1u128, |d, c| d.checked_mul(c.range))
                .is_some_and(|d| d <= 1u128 << 64)
        };
        let Some(split) = (1..cols.len()).find(|&k| fits(&cols[..k]) && fits(&cols[k..])) else {
            return Ok(None);
        };
        let half = |range: std::ops::Range<usize>| {
            KeyCodec::pack(&key_types[range.clone()], cols[range].to_vec())
        };
        let (lo, hi) = (half(0..split)?, half(split..cols.len())?);
        let packed = |c: &KeyCodec| matches!(c.layout, Layout::Packed(_));
        Ok((packed(&lo) && packed(&hi)).then_some(Self { lo, hi, split }))
    }

    /// Each row's two words as 16 bytes (low word first).
    pub(super) fn rows(&self, keys: &[ArrayRef], rows: usize) -> Result<Vec<u8>> {
        let outside = || {
            GrouperError::InvalidInput(
                "a key outside the two-word codec planned over all input".into(),
            )
        };
        let lo = self
            .lo
            .encode(&keys[..self.split], rows)?
            .ok_or_else(outside)?;
        let hi = self
            .hi
            .encode(&keys[self.split..], rows)?
            .ok_or_else(outside)?;
        let mut out = Vec::with_capacity(rows * WIDTH);
        for (l, h) in lo.into_iter().zip(hi) {
            out.extend_from_slice(&l.to_le_bytes());
            out.extend_from_slice(&h.to_le_bytes());
        }
        Ok(out)
    }

    /// Readies both words' string columns for decoding ([`KeyCodec::prepare_decode`]).
    pub(super) fn prepare_decode(&self) -> Result<()> {
        self.lo.prepare_decode()?;
        self.hi.prepare_decode()
    }

    /// The key columns of two-word keys' bytes.
    pub(super) fn decode(&self, values: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        let word = |v: &[u8], at: usize| -> Result<u64> {
            v.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| {
                    GrouperError::InvalidInput("a two-word key of the wrong size".into())
                })
        };
        let lo: Vec<u64> = values.iter().map(|v| word(v, 0)).collect::<Result<_>>()?;
        let hi: Vec<u64> = values.iter().map(|v| word(v, 8)).collect::<Result<_>>()?;
        let mut cols = self.lo.decode(&lo)?;
        cols.extend(self.hi.decode(&hi)?);
        Ok(cols)
    }
}

/// Keys' bytes as an interned layout interns them: `arrow-row` rows, or two-word keys.
pub enum KeyRows {
    /// `arrow-row` rows.
    Arrow(Rows),
    /// [`WIDTH`] bytes a row.
    Fixed(Vec<u8>),
}

impl KeyRows {
    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        match self {
            KeyRows::Arrow(r) => r.num_rows(),
            KeyRows::Fixed(b) => b.len() / WIDTH,
        }
    }

    /// Row `i`'s bytes.
    pub fn row(&self, i: usize) -> &[u8] {
        match self {
            KeyRows::Arrow(r) => r.row(i).data(),
            KeyRows::Fixed(b) => &b[i * WIDTH..(i + 1) * WIDTH],
        }
    }

    /// Bytes of all rows (about, for `arrow-row`: with its offsets).
    pub fn bytes(&self) -> usize {
        match self {
            KeyRows::Arrow(r) => r.size(),
            KeyRows::Fixed(b) => b.len(),
        }
    }
}

/// The halves of an open codec's layout, if it is interned and they exist.
pub(super) fn halves_of(codec: &KeyCodec) -> Option<&Arc<Halves>> {
    match &codec.layout {
        Layout::Interned { halves, .. } => halves.as_ref(),
        Layout::Packed(_) => None,
    }
}
