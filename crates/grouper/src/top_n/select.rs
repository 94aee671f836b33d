//! One partition's top-N rows per group: each group keeps its best `n` rows so far (by the
//! window's `ORDER BY`, as [`OrderWords`]) in `n` fixed slots, best first; a row that beats
//! the group's worst slot replaces it. One pass over the input, O(1) work a row for small `n`,
//! no sort of the input.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use arrow::array::RecordBatch;
use arrow::compute::interleave_record_batch;
use arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::PhysicalSortExpr;

use super::groups::GroupIds;
use super::order::{before, converter, evaluate, OrderWords};

/// Retained input rows past which the live candidates are copied out and the batches they
/// came from dropped: at most this many rows above the candidates themselves (tests compact
/// every few batches).
const COMPACT_SLACK_ROWS: usize = if cfg!(test) { 1 << 12 } else { 1 << 20 };

/// The top `n` rows of each group of one partition.
pub(crate) struct Selection {
    /// The partition keys (`PARTITION BY`), as the window's input sort orders them.
    keys: Vec<PhysicalSortExpr>,
    n: usize,
    groups: GroupIds,
    /// The window's `ORDER BY`, as words.
    order: OrderWords,
    /// The current batch's order words.
    words: Vec<u128>,
    /// Candidates held per group (at most `n`).
    filled: Vec<u32>,
    /// Candidates held in all (the sum of `filled`).
    live: usize,
    /// `n` slots a group: the candidates' order words, best first.
    slots: Vec<u128>,
    /// `n` slots a group: (batch, row) of each candidate in `batches`.
    refs: Vec<(usize, usize)>,
    batches: Vec<RecordBatch>,
    retained_rows: usize,
    gids: Vec<usize>,
    /// The current batch's rows that may become candidates.
    candidates: Vec<usize>,
}

impl Selection {
    /// An empty selection of the best `n` rows by `order` within each group of `keys`.
    pub(crate) fn new(
        schema: &SchemaRef,
        keys: &[PhysicalSortExpr],
        order: &[PhysicalSortExpr],
        n: usize,
    ) -> Result<Self> {
        let types = keys
            .iter()
            .map(|k| k.expr.data_type(schema))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            keys: keys.to_vec(),
            n,
            groups: GroupIds::new(&types)?,
            order: OrderWords::new(order, schema)?,
            words: Vec::new(),
            filled: Vec::new(),
            live: 0,
            slots: Vec::new(),
            refs: Vec::new(),
            batches: Vec::new(),
            retained_rows: 0,
            gids: Vec::new(),
            candidates: Vec::new(),
        })
    }

    /// Folds one input batch in.
    pub(crate) fn push(&mut self, batch: RecordBatch) -> Result<()> {
        let rows = batch.num_rows();
        if rows == 0 || self.n == 0 {
            return Ok(());
        }
        let keys = evaluate(&self.keys, &batch)?;
        self.groups.intern(&keys, &mut self.gids)?;
        let mut words = std::mem::take(&mut self.words);
        self.order.encode(&batch, &mut words)?;
        let width = self.order.width().ok_or_else(out_of_range)?;
        let (n, groups) = (self.n, self.groups.len());
        self.filled.resize(groups, 0);
        self.slots.resize(groups * n * width, 0);
        self.refs.resize(groups * n, (0, 0));
        let b = self.batches.len();
        let mut kept = false;
        let gids = std::mem::take(&mut self.gids);
        if words.len() != rows * width {
            return Err(out_of_range());
        }
        // First the rows that beat their group's worst slot as the batch began (loads only, so
        // the misses of many rows overlap), then those rows offered one by one: a slot only
        // gets better, so a row that lost at the start loses later too. (q8: ~1 row in 10
        // passes; the offers' stores had serialised the misses.)
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.clear();
        for ((row, &g), key) in gids.iter().enumerate().zip(words.chunks_exact(width)) {
            let worst = (g * n + n - 1) * width;
            let full = self.filled.get(g).is_some_and(|&f| f as usize >= n);
            if !full
                || self
                    .slots
                    .get(worst..worst + width)
                    .is_none_or(|w| before(key, w))
            {
                candidates.push(row);
            }
        }
        for &row in &candidates {
            let (Some(&g), Some(key)) = (gids.get(row), words.get(row * width..(row + 1) * width))
            else {
                return Err(out_of_range());
            };
            kept |= self.offer(g, key, (b, row))?;
        }
        self.candidates = candidates;
        self.gids = gids;
        self.words = words;
        if kept {
            self.batches.push(batch);
            self.retained_rows += rows;
            if self.retained_rows > self.live.saturating_mul(2) + COMPACT_SLACK_ROWS {
                self.compact()?;
            }
        }
        // Otherwise no row of it is a candidate: nothing refers to it (its index is reused).
        Ok(())
    }

    /// Offers one row to group `g`: true when it became a candidate.
    fn offer(&mut self, g: usize, key: &[u128], at: (usize, usize)) -> Result<bool> {
        let (n, width) = (self.n, key.len());
        let filled = self.filled.get(g).copied().unwrap_or(0) as usize;
        let slots = self
            .slots
            .get_mut(g * n * width..(g + 1) * n * width)
            .ok_or_else(out_of_range)?;
        let refs = self
            .refs
            .get_mut(g * n..(g + 1) * n)
            .ok_or_else(out_of_range)?;
        let slot = |s: usize| s * width..(s + 1) * width;
        // The first slot whose candidate the row beats (ties keep the earlier row).
        let mut pos = filled;
        while let Some(prev) = pos.checked_sub(1).and_then(|p| slots.get(slot(p))) {
            if !before(key, prev) {
                break;
            }
            pos -= 1;
        }
        if pos >= n {
            return Ok(false);
        }
        // Shift the worse candidates down one slot (the worst falls off when full), word by
        // word: a group holds a few words, which a `memmove` call a row cost more than.
        let last = filled.min(n - 1);
        for i in (pos * width..last * width).rev() {
            if let Some(&w) = slots.get(i) {
                *slots.get_mut(i + width).ok_or_else(out_of_range)? = w;
            }
        }
        for i in (pos..last).rev() {
            if let Some(&r) = refs.get(i) {
                *refs.get_mut(i + 1).ok_or_else(out_of_range)? = r;
            }
        }
        slots
            .get_mut(slot(pos))
            .ok_or_else(out_of_range)?
            .copy_from_slice(key);
        *refs.get_mut(pos).ok_or_else(out_of_range)? = at;
        if filled < n {
            if let Some(f) = self.filled.get_mut(g) {
                *f += 1;
                self.live += 1;
            }
        }
        Ok(true)
    }

    /// Copies the live candidates into one batch and drops the batches they came from.
    pub(crate) fn compact(&mut self) -> Result<()> {
        let picks = self.live_refs();
        let batch = self.take(&picks)?;
        let mut i = 0;
        for (g, &f) in self.filled.iter().enumerate() {
            for s in 0..f as usize {
                if let Some(r) = self.refs.get_mut(g * self.n + s) {
                    *r = (0, i);
                }
                i += 1;
            }
        }
        self.retained_rows = batch.num_rows();
        self.batches = vec![batch];
        Ok(())
    }

    /// Every group's candidates, group by group in id order, best first.
    fn live_refs(&self) -> Vec<(usize, usize)> {
        self.filled
            .iter()
            .enumerate()
            .flat_map(|(g, &f)| {
                let start = g * self.n;
                self.refs
                    .get(start..start + f as usize)
                    .unwrap_or_default()
                    .iter()
                    .copied()
            })
            .collect()
    }

    /// The rows at `picks` of the retained batches.
    fn take(&self, picks: &[(usize, usize)]) -> Result<RecordBatch> {
        let batches: Vec<&RecordBatch> = self.batches.iter().collect();
        Ok(interleave_record_batch(&batches, picks)?)
    }

    /// The selected rows, groups in the order of the keys' sort expressions and each group's
    /// rows best first (the order a `ROW_NUMBER` window expects of its sorted input), with
    /// each row's number in its group (1 for a group's best).
    pub(crate) fn finish(mut self, schema: &SchemaRef) -> Result<(RecordBatch, Vec<u64>)> {
        let empty = || {
            (
                RecordBatch::new_empty(std::sync::Arc::clone(schema)),
                Vec::new(),
            )
        };
        if self.groups.len() == 0 {
            return Ok(empty());
        }
        let key_values = self.groups.emit()?;
        let key_rows = converter(&self.keys, schema)?.convert_columns(&key_values)?;
        let mut order: Vec<usize> = (0..key_rows.num_rows()).collect();
        order.sort_unstable_by(|&a, &b| key_rows.row(a).cmp(&key_rows.row(b)));
        let mut numbers = Vec::new();
        let picks: Vec<(usize, usize)> = order
            .iter()
            .flat_map(|&g| {
                let f = self.filled.get(g).copied().unwrap_or(0) as usize;
                numbers.extend(1..=f as u64);
                self.refs
                    .get(g * self.n..g * self.n + f)
                    .unwrap_or_default()
                    .iter()
                    .copied()
            })
            .collect();
        if self.batches.is_empty() {
            return Ok(empty());
        }
        Ok((self.take(&picks)?, numbers))
    }

    /// Bytes held: retained batches, candidates' slots, the groups' table.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.batches
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum::<usize>()
            + self.slots.capacity() * 16
            + self.words.capacity() * 16
            + self.refs.capacity() * std::mem::size_of::<(usize, usize)>()
            + self.filled.capacity() * 4
            + self.groups.size()
            + self.order.size()
    }
}

fn out_of_range() -> DataFusionError {
    DataFusionError::Internal("top-N per group: a candidate slot out of range".into())
}
