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
//! | `partitioned`  | rows scattered by key hash, one table per  | very many groups, many threads  |
//! |                | partition, no partial phase                |                                 |
//!
//! All of them run morsel-driven on the current rayon pool ([`morsel`]).
//!
//! [`DESCRIPTORS`] is the one table of them that the planner, the executor, the CLI, difftest
//! and calibration read: a strategy's name, how it takes its input (streaming into a worker's
//! [`group_index::GroupIndex`], or buffered), when `auto` may pick it, and whether its tables
//! grow. Adding a strategy is its module, an enum variant and a row here.

pub mod buffered;
pub mod dense;
pub mod group_index;
pub mod hashed_index;
mod hot_keys;
pub mod key_words;
pub mod morsel;
pub mod partitioned;
pub mod runs;
pub mod shared;
pub mod sort;
pub mod streaming;
pub mod thread_local;

use std::fmt;
use std::str::FromStr;

use arrow::array::ArrayRef;

use crate::agg::{new_accumulator, GroupAccumulator};
use crate::error::{GrouperError, Result};
use crate::hash::HashFn;
use crate::input::{InputBatch, QuerySpec};
use crate::table::{BucketMap, Probing};
use group_index::GroupIndex;

/// A CPU aggregation strategy (its properties are its row of [`DESCRIPTORS`]).
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
    /// Rows partitioned by key hash, one table per partition.
    Partitioned,
}

impl Strategy {
    /// Every CPU strategy, in the order of [`DESCRIPTORS`].
    pub const ALL: [Strategy; 5] = [
        Strategy::Perfect,
        Strategy::ThreadLocal,
        Strategy::Shared,
        Strategy::Sort,
        Strategy::Partitioned,
    ];

    /// Its row of [`DESCRIPTORS`].
    pub fn descriptor(self) -> &'static Descriptor {
        &DESCRIPTORS[self as usize]
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        self.descriptor().name
    }

    /// Whether the strategy folds batches in as they arrive rather than needing the whole input
    /// first.
    pub fn is_streaming(self) -> bool {
        matches!(self.descriptor().intake, Intake::Streaming(_))
    }
}

/// Makes a worker's group index for a key domain of `domain` values; `dense_limit` is the
/// largest domain the query keeps in direct-index arrays.
pub type NewIndex =
    fn(domain: u64, dense_limit: u64, params: &Params) -> Result<Box<dyn GroupIndex>>;

/// Runs a strategy over all morsels and their key words.
pub type RunBuffered = fn(
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &key_words::KeyWords<'_>,
    params: &Params,
) -> Result<Vec<Chunk>>;

/// How a strategy takes its input.
#[derive(Clone, Copy)]
pub enum Intake {
    /// Each worker folds batches into its own groups as they arrive ([`streaming::Partial`]
    /// over the index this makes); the workers' groups merge at the end.
    Streaming(NewIndex),
    /// The batches are kept until all have arrived, then this runs over all of them (`shared`
    /// sizes one table for all; `sort` sorts all).
    Buffered(RunBuffered),
}

/// One CPU strategy's properties: the one place the rest of the engine learns them from.
pub struct Descriptor {
    /// The strategy.
    pub strategy: Strategy,
    /// The name used on the command line, in profiles and in reports.
    pub name: &'static str,
    /// How it takes its input.
    pub intake: Intake,
    /// Whether `auto` may pick it (from a profile's ranking) for keys whose estimated domain
    /// is `domain` values, when direct-index arrays may span `perfect_limit` of them.
    pub eligible: fn(domain: u64, perfect_limit: u64) -> bool,
    /// Whether its hash tables start at [`Params::initial_groups`] or
    /// [`Params::private_groups`] and grow (difftest also runs it from tiny tables).
    pub grows: bool,
}

/// Every CPU strategy's descriptor, in the order of [`Strategy`]'s variants.
pub const DESCRIPTORS: [Descriptor; 5] = [
    Descriptor {
        strategy: Strategy::Perfect,
        name: "perfect",
        intake: Intake::Streaming(perfect_index),
        eligible: dense::fits,
        grows: false,
    },
    Descriptor {
        strategy: Strategy::ThreadLocal,
        name: "thread_local",
        intake: Intake::Streaming(private_table),
        eligible: always,
        grows: true,
    },
    Descriptor {
        strategy: Strategy::Shared,
        name: "shared",
        intake: Intake::Buffered(shared::run),
        eligible: always,
        grows: true,
    },
    Descriptor {
        strategy: Strategy::Sort,
        name: "sort",
        intake: Intake::Buffered(sort::run),
        eligible: always,
        grows: false,
    },
    Descriptor {
        strategy: Strategy::Partitioned,
        name: "partitioned",
        intake: Intake::Buffered(partitioned::run),
        eligible: always,
        grows: true,
    },
];

fn always(_: u64, _: u64) -> bool {
    true
}

/// `perfect`: a direct index while the domain fits the query's bound, else (the key range grew
/// past it) a private hash table.
fn perfect_index(domain: u64, dense_limit: u64, params: &Params) -> Result<Box<dyn GroupIndex>> {
    if domain <= dense_limit {
        Ok(Box::new(dense::DirectIndex::new(domain)?))
    } else {
        private_table(domain, dense_limit, params)
    }
}

/// `thread_local`: a private table of [`Params::probing`]'s scheme
/// ([`hashed_index::private_table`]).
fn private_table(_: u64, _: u64, params: &Params) -> Result<Box<dyn GroupIndex>> {
    Ok(hashed_index::private_table(params))
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
                let names: Vec<&str> = DESCRIPTORS.iter().map(|d| d.name).collect();
                GrouperError::InvalidOption(format!(
                    "unknown CPU strategy '{s}' (expected one of {})",
                    names.join(", ")
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
    /// Hashing scheme of the private tables ([`hashed_index::private_table`]).
    pub probing: Probing,
    /// How the private tables map hashes to buckets.
    pub buckets: BucketMap,
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

/// Arrays of one chunk's finalized aggregates.
pub(crate) fn finalize_chunk_aggs(
    accs: Accumulators,
    select: Option<&[u32]>,
) -> Result<Vec<ArrayRef>> {
    accs.into_iter().map(|a| a.finalize(select)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_follow_the_variants() {
        for (i, s) in Strategy::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i);
            assert_eq!(DESCRIPTORS[i].strategy, s);
            assert_eq!(s.name().parse::<Strategy>().unwrap(), s);
        }
        let err = "hashed".parse::<Strategy>().unwrap_err().to_string();
        assert!(
            err.contains("perfect, thread_local, shared, sort, partitioned"),
            "{err}"
        );
    }
}
