//! A fused filter's kept rows folded where they lie ([`Worker::push_selected`]): the batch's
//! keys and arguments hold every row, and only where the worker's groups fold runs do the
//! aggregates read the kept ones in place; anywhere else they are gathered first.

use super::Worker;
use crate::cpu::streaming::Partial;
use crate::error::{GrouperError, Result};
use crate::input::{InputBatch, MORSEL_ROWS};

impl Worker {
    /// Folds the rows `kept` (ascending places, some of them) of `batch`, whose keys and
    /// arguments hold every row: a fused filter's selection, left unmaterialised. Where the
    /// worker's groups fold runs of rows ([`Partial::update_selected`]) the keys are coded
    /// whole and the aggregates read the kept rows in place, with no filtered copy of any
    /// column; otherwise (no plan yet, a batch past a morsel, a strategy without runs) the kept
    /// rows are gathered and pushed as any batch.
    pub fn push_selected(&mut self, batch: &InputBatch, kept: &[u32]) -> Result<()> {
        if kept.len() == batch.num_rows() {
            return self.push(batch);
        }
        let planned = self.agg.current();
        let streaming = planned.is_some_and(|p| p.decision.strategy.is_streaming());
        if streaming && batch.num_rows() <= MORSEL_ROWS && !kept.is_empty() {
            let plan = self.sync()?;
            if let Some(partial) = self.partial.as_mut().filter(|p| p.takes_runs()) {
                if let Some(words) = plan.codec.encode(&batch.keys, batch.num_rows())? {
                    if kept.last().is_some_and(|&r| r as usize >= words.len()) {
                        return Err(GrouperError::InvalidInput("a row past the batch".into()));
                    }
                    let kept_words: Vec<u64> = kept.iter().map(|&r| words[r as usize]).collect();
                    self.rows += kept.len() as u64;
                    return partial.update_selected(&kept_words, batch, kept, &mut self.gids);
                }
            }
        }
        self.push(&batch.take(kept)?)
    }

    /// Whether [`Worker::push_selected`] would read a batch's kept rows in place (a streaming
    /// plan whose groups fold runs), so that leaving a filtered batch whole pays.
    pub fn reads_kept_in_place(&self) -> bool {
        let streaming = self.agg.current();
        streaming.is_some_and(|p| p.decision.strategy.is_streaming())
            && self.partial.as_ref().is_some_and(Partial::takes_runs)
    }
}
