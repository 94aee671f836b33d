//! Streaming from a scan into the GPU (Parquet → GPU): chunks are made as the scan's batches
//! arrive, so decoding (the scan's threads), encoding into pinned staging (this side's
//! threads), the copy and the kernel all overlap, and no query on files waits for a whole
//! read before the GPU starts.
//!
//! ```text
//!  scan partitions (DataFusion, one task each: row groups decoded in parallel)
//!     │ batches, in arrival order
//!     ▼
//!  Chunker: slices up to batch_rows rows ─▶ ColumnPrep (selection, string codes, checks)
//!     ─▶ ImageLayout::fill into a pinned staging slot (encoded from statistics)
//!     ─▶ pipeline: copy stream ─▶ kernel (table stays on the device)
//! ```
//!
//! The key codec and the transfer encodings must be fixed before the first chunk, so they come
//! from the source's statistics (Parquet row-group min/max and null counts), string keys from a
//! dictionary seeded by the first batches with room to grow. Every chunk is checked against
//! that plan; a value outside it stops the run with [`GrouperError::OutsidePlan`], and the
//! caller reruns the query on the collected input — statistics speed a query up, never change
//! its answer.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;

use crate::image::ImageLayout;
use crate::prepare::PreparedInput;
use grouper_core::error::{GrouperError, Result};

/// A scan's batches, pulled as the pipeline needs them (`None` at the end).
pub type Batches<'a> = &'a mut (dyn FnMut() -> Option<Result<RecordBatch>> + Send);

/// Cuts a stream of batches into chunks of the planned size and fills their images.
pub(crate) struct Chunker<'a, 'b> {
    input: &'a PreparedInput,
    pending: VecDeque<RecordBatch>,
    /// Rows of the front pending batch already taken.
    offset: usize,
    next: Batches<'b>,
    done: bool,
    /// Chunks made so far.
    pub(crate) chunks: usize,
}

impl<'a, 'b> Chunker<'a, 'b> {
    /// Chunks of `first` (batches already read), then of what `next` delivers.
    pub(crate) fn new(
        input: &'a PreparedInput,
        first: Vec<RecordBatch>,
        next: Batches<'b>,
    ) -> Self {
        Self {
            input,
            pending: first.into_iter().filter(|b| b.num_rows() > 0).collect(),
            offset: 0,
            next,
            done: false,
            chunks: 0,
        }
    }

    /// Up to `want` rows as slices of the pending batches, pulling more as needed.
    fn take(&mut self, want: usize) -> Result<Vec<RecordBatch>> {
        let mut slices = Vec::new();
        let mut rows = 0;
        while rows < want {
            let Some(front) = self.pending.front() else {
                if self.done {
                    break;
                }
                match (self.next)() {
                    Some(b) => {
                        let b = b?;
                        if b.num_rows() > 0 {
                            self.pending.push_back(b);
                        }
                    }
                    None => self.done = true,
                }
                continue;
            };
            let take = (want - rows).min(front.num_rows() - self.offset);
            slices.push(front.slice(self.offset, take));
            rows += take;
            self.offset += take;
            if self.offset == front.num_rows() {
                self.pending.pop_front();
                self.offset = 0;
            }
        }
        Ok(slices)
    }

    /// Fills the next chunk's image into `out`: its layout, or `None` at the end.
    pub(crate) fn produce(&mut self, out: &mut [u8]) -> Result<Option<ImageLayout>> {
        let input = self.input;
        let slices = self.take(input.batch_rows)?;
        let rows: usize = slices.iter().map(RecordBatch::num_rows).sum();
        if rows == 0 {
            return Ok(None);
        }
        let cols: Vec<Vec<ArrayRef>> = slices
            .par_iter()
            .map(|b| {
                input.prep.apply(
                    b.columns().to_vec(),
                    b.num_rows(),
                    &input.key_words,
                    Some(&input.template.nullable),
                )
            })
            .collect::<Result<_>>()?;
        let chunk: Vec<Option<Vec<ArrayRef>>> = input
            .template
            .columns
            .iter()
            .enumerate()
            .map(|(c, t)| {
                t.as_ref().map(|_| {
                    cols.iter()
                        .filter_map(|b| b.get(c).map(Arc::clone))
                        .collect()
                })
            })
            .collect();
        let layout = ImageLayout::new(rows, &input.encodings, &input.template.nullable);
        if layout.bytes > out.len() {
            return Err(GrouperError::Gpu(format!(
                "a chunk image of {} bytes does not fit its {}-byte staging buffer",
                layout.bytes,
                out.len()
            )));
        }
        layout
            .fill(&chunk, &input.encodings, out)
            .map_err(|e| match e {
                // A value the statistics' range did not cover.
                GrouperError::InvalidInput(m) => GrouperError::OutsidePlan(m),
                e => e,
            })?;
        self.chunks += 1;
        Ok(Some(layout))
    }
}
