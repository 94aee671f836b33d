//! # grouper-cli
//!
//! The `grouper` command-line tool over the [`grouper`] library: queries over files
//! (`grouper query`), the built-in demo, benchmarks and the regression check (`grouper bench`),
//! device calibration, data generation (TPC-H, synthetic) and the differential tester against
//! DuckDB. Everything here exists for people and CI running grouper, not for a DataFusion user
//! embedding it: that user depends on `grouper` alone, which carries none of these dependencies
//! (clap, plotters, indicatif, tpchgen, rand).
//!
//! No `unwrap`, `expect` or `panic!` outside tests (clippy, in CI); the modules that read the
//! command line and report deny unchecked indexing as well.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

#[cfg_attr(not(test), deny(clippy::indexing_slicing))]
pub mod bench;
#[cfg_attr(not(test), deny(clippy::indexing_slicing))]
pub mod calibrate;
#[cfg_attr(not(test), deny(clippy::indexing_slicing))]
pub mod cli;
pub mod difftest;
pub mod groupby_data;
pub mod synthetic;
pub mod tpch;
