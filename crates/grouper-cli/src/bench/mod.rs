//! `grouper bench`: sweeps that time grouper against DataFusion's own aggregation and DuckDB on
//! the same data, the same threads and the same machine, in one run. Results: a table of ratios
//! on stdout and JSON (device, commit, command) under `bench/results/`.
//!
//! - [`cpu_sweep`], [`gpu_sweep`], [`q1`]: the engines side by side; [`radix_sort`]: the GPU
//!   sort under sort-based aggregation, against PyTorch's;
//! - [`regret`] (and [`strategy_sweep`], the per-point timing it and calibration share): `auto`
//!   against every fixed strategy;
//! - [`tuner`]: the runtime tuner against the exhaustive search;
//! - [`check`]: the regression guard against the committed baseline of this machine;
//! - [`files`]: whole queries over Parquet files, a fresh process each, as users run them
//!   ([`answers`] compares their results with DuckDB's); [`harm`]: random cases, `auto` against
//!   DataFusion alone in fresh processes (the timing twin of difftest);
//! - [`seeds`]: a paper's experiments and a report of its findings beside ours;
//! - [`common`]: timing, DuckDB, data and JSON helpers the sweeps share; [`plots`]: SVG.
//!
//! Method (docs/ARCHITECTURE.md, "Measuring"): data generated once per point and held in memory
//! by every engine; one warm-up, then the median of `--reps` wall-clock runs of the whole query.

pub mod answers;
pub mod check;
pub mod common;
pub mod cpu_sweep;
pub mod files;
pub mod gpu_sweep;
pub mod groupby;
pub mod harm;
pub mod plots;
pub mod q1;
pub mod radix_sort;
pub mod regret;
pub mod seeds;
pub mod strategy_sweep;
pub mod tuner;
pub mod tuner_injected;

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// SUM+COUNT by key over 2^0..2^24 groups, uniform and zipf; TPC-H Q1.
    CpuSweep(cpu_sweep::SweepArgs),
    /// GPU strategies on resident data vs the copy rate and PyTorch; Q1 on the GPU vs DuckDB.
    GpuSweep(gpu_sweep::GpuSweepArgs),
    /// The GPU's radix sort of (u32 key, row id) pairs against PyTorch's sort.
    RadixSort(radix_sort::RadixSortArgs),
    /// TPC-H Q1 from host RAM (SF 10, 100): every GPU transfer mode, hybrid, CPU and DuckDB;
    /// the streaming rate against the pinned host-to-device bandwidth.
    Q1(q1::Q1Args),
    /// The runtime tuner (Rosenfeld's Algorithm 1) against the exhaustive search over launch
    /// shapes, per strategy, group count and key kind: quality, cost, overhead, effort.
    Tuner(tuner::TunerArgs),
    /// auto against the best fixed strategy at every sweep point (CPU or GPU, uniform and
    /// zipf, dense and hashed keys): the regret, JSON and SVG plots of the regions.
    Regret(regret::RegretArgs),
    /// The regression guard: a short fixed set (GPU and CPU points from 1 to 2^24 groups,
    /// TPC-H Q1 in memory and from Parquet) against this machine's committed baseline; fails
    /// when a figure is more than 10% slower.
    Check(check::CheckArgs),
    /// SQL over Parquet files as users run it: TPC-H's 22 queries (and Q1 at larger scale
    /// factors), one fresh `grouper query` process each, against `--backend datafusion` and
    /// DuckDB on the same files and threads, answers compared; JSON and an SVG per scale factor.
    Files(files::FilesArgs),
    /// The timing twin of difftest: random GROUP BY cases at 1e6-1e7 rows, `auto` against
    /// `--backend datafusion` in fresh processes; cases where auto is slower are confirmed,
    /// shrunk and saved as benchmark points; JSON with the distribution of the ratios.
    Harm(harm::HarmArgs),
    /// The db-benchmark group-by questions (q1-q10) on its G1 data in memory: auto, cpu and
    /// DataFusion alone against DuckDB, in-process timings, answers checked against DuckDB's.
    Groupby(groupby::GroupbyArgs),
    /// A paper's key experiments on this machine: JSON, SVG plots and a report that puts each
    /// of its findings beside what grouper measured here (bench/results/seeds/).
    Seeds(seeds::SeedsArgs),
}

pub async fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::CpuSweep(a) => cpu_sweep::cpu_sweep(a).await,
        BenchCommand::GpuSweep(a) => gpu_sweep::gpu_sweep(a).await,
        BenchCommand::Q1(a) => q1::q1(a).await,
        BenchCommand::RadixSort(a) => radix_sort::radix_sort(a).await,
        BenchCommand::Tuner(a) => tuner::tuner(a).await,
        BenchCommand::Regret(a) => regret::regret(a).await,
        BenchCommand::Check(a) => check::check(a).await,
        BenchCommand::Files(a) => files::files(a).await,
        BenchCommand::Harm(a) => harm::harm(a).await,
        BenchCommand::Groupby(a) => groupby::groupby(a).await,
        BenchCommand::Seeds(a) => seeds::seeds(a).await,
    }
}
