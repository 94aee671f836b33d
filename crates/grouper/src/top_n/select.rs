//! One partition's top-N rows per group: each group keeps its best `n` rows so far (by the
//! window's `ORDER BY`, as byte-comparable rows of Arrow's row format) in `n` fixed slots,
//! best first; a row that beats the group's worst slot replaces it. One pass over the input,
//! O(1) work a row for small `n`, no sort of the input.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::interleave_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::EmitTo;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;

/// Retained input rows past which the live candidates are copied out and the batches they
/// came from dropped: at most this many rows above the candidates themselves (tests compact
/// every few batches).
const COMPACT_SLACK_ROWS: usize = if cfg!(test) { 1 << 12 } else { 1 << 20 };

/// The top `n` rows of each group of one partition.
pub(crate) struct Selection {
    /// The partition keys (`PARTITION BY`), as the window's input sort orders them.
    keys: Vec<PhysicalSortExpr>,
    /// The window's `ORDER BY`.
    order: Vec<PhysicalSortExpr>,
    n: usize,
    groups: Box<dyn GroupValues>,
    order_rows: RowConverter,
    /// Bytes of one row of `order_rows` (fixed: the order columns are fixed-width).
    width: Option<usize>,
    /// Candidates held per group (at most `n`).
    filled: Vec<u32>,
    /// `n` slots a group: the candidates' order bytes, best first.
    slots: Vec<u8>,
    /// `n` slots a group: (batch, row) of each candidate in `batches`.
    refs: Vec<(usize, usize)>,
    batches: Vec<RecordBatch>,
    retained_rows: usize,
    gids: Vec<usize>,
}

impl Selection {
    /// An empty selection of the best `n` rows by `order` within each group of `keys`.
    pub(crate) fn new(
        schema: &SchemaRef,
        keys: &[PhysicalSortExpr],
        order: &[PhysicalSortExpr],
        n: usize,
    ) -> Result<Self> {
        let key_fields: Vec<arrow::datatypes::Field> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                Ok(arrow::datatypes::Field::new(
                    format!("k{i}"),
                    k.expr.data_type(schema)?,
                    true,
                ))
            })
            .collect::<Result<_>>()?;
        let groups = new_group_values(
            std::sync::Arc::new(arrow::datatypes::Schema::new(key_fields)),
            &GroupOrdering::None,
        )?;
        Ok(Self {
            keys: keys.to_vec(),
            order: order.to_vec(),
            n,
            groups,
            order_rows: converter(order, schema)?,
            width: None,
            filled: Vec::new(),
            slots: Vec::new(),
            refs: Vec::new(),
            batches: Vec::new(),
            retained_rows: 0,
            gids: Vec::new(),
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
        let order = self
            .order_rows
            .convert_columns(&evaluate(&self.order, &batch)?)?;
        let width = *self.width.get_or_insert(order.row(0).as_ref().len());
        let (n, groups) = (self.n, self.groups.len());
        self.filled.resize(groups, 0);
        self.slots.resize(groups * n * width, 0);
        self.refs.resize(groups * n, (0, 0));
        let b = self.batches.len();
        let mut kept = false;
        let gids = std::mem::take(&mut self.gids);
        for (row, &g) in gids.iter().enumerate() {
            kept |= self.offer(g, order_bytes(&order, row, width)?, (b, row))?;
        }
        self.gids = gids;
        if kept {
            self.batches.push(batch);
            self.retained_rows += rows;
            let live: usize = self.filled.iter().map(|&f| f as usize).sum();
            if self.retained_rows > live.saturating_mul(2) + COMPACT_SLACK_ROWS {
                self.compact()?;
            }
        }
        // Otherwise no row of it is a candidate: nothing refers to it (its index is reused).
        Ok(())
    }

    /// Offers one row to group `g`: true when it became a candidate.
    fn offer(&mut self, g: usize, bytes: &[u8], at: (usize, usize)) -> Result<bool> {
        let (n, width) = (self.n, bytes.len());
        let filled = self.filled.get(g).copied().unwrap_or(0) as usize;
        let base = g * n;
        let slot = |s: usize| (base + s) * width..(base + s + 1) * width;
        // The first slot whose candidate the row beats (ties keep the earlier row).
        let mut pos = filled;
        while pos > 0 {
            let prev = self.slots.get(slot(pos - 1)).ok_or_else(out_of_range)?;
            if before(bytes, prev) {
                pos -= 1;
            } else {
                break;
            }
        }
        if pos >= n {
            return Ok(false);
        }
        let last = filled.min(n - 1);
        // Shift the worse candidates down one slot (the worst falls off when full).
        self.slots.copy_within(
            (base + pos) * width..(base + last) * width,
            (base + pos + 1) * width,
        );
        self.refs
            .copy_within(base + pos..base + last, base + pos + 1);
        self.slots
            .get_mut(slot(pos))
            .ok_or_else(out_of_range)?
            .copy_from_slice(bytes);
        *self.refs.get_mut(base + pos).ok_or_else(out_of_range)? = at;
        if let Some(f) = self.filled.get_mut(g) {
            *f = (filled + 1).min(n) as u32;
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
        if self.groups.is_empty() {
            return Ok(empty());
        }
        let key_values = self.groups.emit(EmitTo::All)?;
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
            + self.slots.capacity()
            + self.refs.capacity() * std::mem::size_of::<(usize, usize)>()
            + self.filled.capacity() * 4
            + self.groups.size()
            + self.order_rows.size()
    }
}

/// A row converter over the sort expressions' columns, with their sort options (so that the
/// byte order of its rows is the sort order).
fn converter(exprs: &[PhysicalSortExpr], schema: &SchemaRef) -> Result<RowConverter> {
    let fields = exprs
        .iter()
        .map(|e| {
            Ok(SortField::new_with_options(
                e.expr.data_type(schema)?,
                e.options,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RowConverter::new(fields)?)
}

/// The sort expressions evaluated over `batch`.
fn evaluate(exprs: &[PhysicalSortExpr], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    exprs
        .iter()
        .map(|e| e.expr.evaluate(batch)?.into_array(batch.num_rows()))
        .collect()
}

/// Whether order row `a` sorts before `b` (rows of equal width), compared eight bytes at a time
/// as big-endian words: the same order as comparing the slices, without a `memcmp` call per
/// offered row (db-benchmark q8 offers 1e7 rows of 9 bytes).
pub(super) fn before(a: &[u8], b: &[u8]) -> bool {
    let word = |c: &[u8]| <[u8; 8]>::try_from(c).map_or(0, u64::from_be_bytes);
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut wa).zip(&mut wb) {
        let (x, y) = (word(x), word(y));
        if x != y {
            return x < y;
        }
    }
    for (x, y) in wa.remainder().iter().zip(wb.remainder()) {
        if x != y {
            return x < y;
        }
    }
    false
}

/// Row `row` of `rows`, which must be `width` bytes like every row of fixed-width columns.
fn order_bytes(rows: &Rows, row: usize, width: usize) -> Result<&[u8]> {
    let bytes = rows.row(row).data();
    if bytes.len() == width {
        Ok(bytes)
    } else {
        Err(DataFusionError::Internal(format!(
            "top-N per group: order rows of {} and {width} bytes (the order columns must be fixed-width)",
            bytes.len()
        )))
    }
}

fn out_of_range() -> DataFusionError {
    DataFusionError::Internal("top-N per group: a candidate slot out of range".into())
}
