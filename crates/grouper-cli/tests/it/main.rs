//! grouper-cli's integration tests, one binary (DataFusion is linked once):
//! - `differential`: grouper inside DataFusion against DataFusion's own aggregation;
//! - `difftest`: against DuckDB, with the saved regression cases in `regressions/`;
//! - `faults`: every failure a user can cause, through the `grouper` binary;
//! - `harm`: what `auto` leaves to DataFusion's own aggregation.
//! - `groupby_questions`: the db-benchmark questions through grouper against DataFusion.
//! - `shell`: the interactive shell on a terminal, and scripts.
//! - `serve`: the Flight SQL server with 32 Python ADBC clients against DuckDB's answers.
//! - `distributed`: three `grouper worker` processes and a coordinator, against one process.
//! - `python`: the Python package, built by maturin into the venv, against DuckDB's answers.
//! - `seeds`: `bench seeds luan --quick`, its JSON, plots and report.
//! - `venv`: the Python these tests drive; `process`: stopping a process with Ctrl-C.

mod differential;
mod difftest;
mod distributed;
mod faults;
mod groupby_questions;
mod harm;
mod process;
mod python;
mod seeds;
mod serve;
mod shell;
mod venv;
