//! CPU strategies (docs/ARCHITECTURE.md, "Seams"). Each maps rows to dense group ids in its own way and folds values
//! with the shared aggregate algebra:
//!
//! | strategy       | where states live                         | wins when                       |
//! |----------------|-------------------------------------------|---------------------------------|
//! | `perfect`      | per-thread arrays indexed by the key word  | key domain small (Tomé §3.3)    |
//! | `thread_local` | per-thread linear-probing tables, then a   | general default (DuckDB's plan) |
//! |                | radix-partitioned parallel merge           |                                 |
//! | `shared`       | one concurrent table, atomic updates       | many groups, little skew (Luan) |
//! | `sort`         | sort (key, row) pairs, runs become groups  | very many groups, sorted input  |
//!
//! All of them run morsel-driven on the current rayon pool ([`morsel`]).

pub mod dense;
pub mod local;
pub mod morsel;
pub mod shared;
pub mod sort;
pub mod thread_local;

use std::fmt;
use std::str::FromStr;

use arrow::array::ArrayRef;

use crate::agg::{new_accumulator, GroupAccumulator};
use crate::error::{GrouperError, Result};
use crate::hash::HashFn;
use crate::input::{InputBatch, QuerySpec};

/// A CPU aggregation strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Direct-index arrays per thread.
    Perfect,
    /// Per-thread hash tables merged by radix partition.
    ThreadLocal,
    /// One concurrent hash table with atomic aggregate updates.
    Shared,
    /// Sort-based grouping.
    Sort,
}

impl Strategy {
    /// Every CPU strategy.
    pub const ALL: [Strategy; 4] = [
        Strategy::Perfect,
        Strategy::ThreadLocal,
        Strategy::Shared,
        Strategy::Sort,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Perfect => "perfect",
            Strategy::ThreadLocal => "thread_local",
            Strategy::Shared => "shared",
            Strategy::Sort => "sort",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = GrouperError;
    fn from_str(s: &str) -> Result<Self> {
        Strategy::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                GrouperError::InvalidOption(format!(
                    "unknown CPU strategy '{s}' (expected perfect, thread_local, shared or sort)"
                ))
            })
    }
}

/// Parameters a strategy runs with (chosen by the planner, overridable by the user).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Hash function for the hash-based strategies.
    pub hash: HashFn,
    /// Target load of hash tables.
    pub fill_factor: f64,
    /// Groups a table of all workers (`shared`) is first sized for: the estimate (tests force
    /// tiny values).
    pub initial_groups: usize,
    /// Groups each worker's private table (`thread_local`) is first sized for: what the first
    /// rows showed, since a worker sees a share of them (see
    /// [`crate::planner::Estimate::private_table_groups`]); the table grows.
    pub private_groups: usize,
}

/// A run of result groups: per-aggregate states by group id, the group ids that are results
/// (`select`; all of them when `None`), and the key word of each result row.
pub struct Chunk {
    /// The key word of each result row, in result order.
    pub words: Vec<u64>,
    /// One accumulator per aggregate.
    pub accs: Accumulators,
    /// When set, only these group ids are results (in this order).
    pub select: Option<Vec<u32>>,
}

/// One accumulator per aggregate of a query.
pub type Accumulators = Vec<Box<dyn GroupAccumulator>>;

/// Fresh accumulators for every aggregate of `spec`.
pub fn new_accumulators(spec: &QuerySpec) -> Result<Accumulators> {
    spec.aggregates.iter().map(new_accumulator).collect()
}

/// Folds one morsel into `accs` given each row's group id.
pub fn update_all(
    accs: &mut [Box<dyn GroupAccumulator>],
    gids: &[u32],
    morsel: &InputBatch,
    groups: usize,
) -> Result<()> {
    for (acc, arg) in accs.iter_mut().zip(&morsel.args) {
        acc.resize(groups);
        acc.update(gids, arg.as_ref())?;
    }
    Ok(())
}

impl Strategy {
    /// Whether the strategy folds batches in as they arrive (`perfect`, `thread_local`) rather
    /// than needing the whole input first (`shared` sizes one table for all; `sort` sorts all).
    pub fn is_streaming(self) -> bool {
        matches!(self, Strategy::Perfect | Strategy::ThreadLocal)
    }
}

/// Runs a non-streaming strategy over all morsels and their key words.
pub fn run_buffered(
    strategy: Strategy,
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &[Vec<u64>],
    params: &Params,
) -> Result<Vec<Chunk>> {
    match strategy {
        Strategy::Shared => shared::run(spec, morsels, words, params),
        Strategy::Sort => sort::run(spec, morsels, words),
        s => Err(GrouperError::InvalidOption(format!(
            "{s} streams; it does not run on buffered input"
        ))),
    }
}

/// Arrays of one chunk's finalized aggregates.
pub(crate) fn finalize_chunk_aggs(
    accs: Accumulators,
    select: Option<&[u32]>,
) -> Result<Vec<ArrayRef>> {
    accs.into_iter().map(|a| a.finalize(select)).collect()
}
