//! The key words of buffered morsels ([`KeyWords`]), encoded on demand.

use rayon::prelude::*;

use crate::error::{GrouperError, Result};
use crate::input::InputBatch;
use crate::keys::KeyCodec;
use crate::trace;

/// The key words of buffered morsels, encoded by the codec planned over all of them when a
/// strategy asks: `shared` and `sort` take all at once, `partitioned` a block's just before it
/// scatters them, so they are read from cache rather than written to memory and read back
/// (268 MB each way at 2^25 rows).
pub struct KeyWords<'a> {
    pub(super) codec: &'a KeyCodec,
    pub(super) morsels: &'a [InputBatch],
}

impl KeyWords<'_> {
    /// The words of morsel `m`.
    pub fn of(&self, m: usize) -> Result<Vec<u64>> {
        let morsel = self
            .morsels
            .get(m)
            .ok_or_else(|| GrouperError::InvalidInput(format!("no morsel {m}")))?;
        self.codec
            .encode(&morsel.keys, morsel.num_rows())?
            .ok_or_else(|| {
                GrouperError::InvalidInput("a codec planned over all input misses a key".into())
            })
    }

    /// The words of every morsel, in order.
    pub fn all(&self) -> Result<Vec<Vec<u64>>> {
        let words = (0..self.morsels.len())
            .into_par_iter()
            .map(|m| self.of(m))
            .collect::<Result<Vec<_>>>()?;
        trace::event(|| "buffered: key words encoded".into());
        Ok(words)
    }
}
