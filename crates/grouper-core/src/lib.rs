//! # grouper-core
//!
//! The aggregation engine of grouper, free of any query-engine dependency: it takes Arrow arrays
//! of group keys and aggregate arguments and returns one Arrow array per key and per aggregate.
//!
//! ```text
//!  input batches ──▶ keys: normalize to u64 words ──▶ planner: estimate, choose strategy
//!                    (mixed-radix packing, string          │
//!                     dictionaries, row interning)        ▼
//!                          cpu::{perfect, thread_local, shared, sort, partitioned} (GPU: grouper-gpu)
//!                                          │ group ids → agg algebra (init/update/merge/finalize)
//!                                          ▼
//!                    keys decoded back to Arrow + finalized aggregates
//! ```
//!
//! [`reference`] is a deliberately simple single-threaded executor used as the test oracle.
//! The expression IR ([`expr`]), the planner and the tuner ([`tune`]) serve the GPU backend as
//! well; docs/ARCHITECTURE.md maps the whole workspace.
//!
//! No panics on user input: outside tests the crate denies `unwrap`, `expect` and `panic!`
//! (clippy, in CI). Input is validated where it enters ([`InputBatch::try_new`]: lengths and
//! types against the [`QuerySpec`]); indexing below that boundary is over group ids and row
//! positions the engine produced itself for arrays it sized, which is its proof.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod agg;
pub mod compare;
pub mod cpu;
pub mod error;
pub mod executor;
pub mod expr;
pub mod hash;
pub mod input;
pub mod keys;
pub mod partial;
pub mod planner;
pub mod profile;
pub mod reference;
pub mod spill;
mod strings;
pub mod table;
pub mod trace;
pub mod tune;

pub use error::{GrouperError, Result};
pub use executor::{aggregate, AggregateOutput, AggregateParts, Aggregation, Options, Worker};
pub use input::{InputBatch, QuerySpec};
