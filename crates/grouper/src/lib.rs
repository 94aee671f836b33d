//! # grouper
//!
//! grouper's `GROUP BY` operator inside Apache DataFusion. The `grouper` command-line tool is the
//! `grouper-cli` crate.
//!
//! A DataFusion user adopts grouper in one line:
//!
//! ```no_run
//! let ctx = grouper::session::grouper_context();
//! // ctx.sql("SELECT k, sum(v) FROM t GROUP BY k") now aggregates with grouper.
//! ```
//!
//! [`rule::GrouperRule`] replaces DataFusion's aggregation with [`exec::GroupByExec`] wherever
//! grouper handles every key and aggregate, and leaves the plan alone elsewhere.

// No panics on user input: outside tests, no `unwrap`, `expect` or `panic!` (clippy, in CI);
// the modules that take user input first (plans, the rule, sessions) deny indexing as well.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod backend;
pub mod codec;
pub mod config;
pub mod coprocess;
#[cfg(feature = "gpu")]
pub mod device_facts;
pub mod exec;
pub mod fuse;
pub mod group_by;
pub mod harm;
pub mod merge;
pub mod narrow_table;
mod parquet_files;
pub mod profile_store;
pub mod rule;
pub mod session;
mod stats;
#[cfg(test)]
mod test_support;
pub mod top_n;
pub mod tuple_expr;

pub use config::{Backend, Split};
pub use session::{grouper_context, session_context, worker_pool, GrouperConfig};
