//! `grouper bench`: sweeps that time grouper against DataFusion's own aggregation and DuckDB on
//! the same data, the same threads and the same machine, in one run. Results: a table of ratios
//! on stdout and JSON (device, commit, command) under `bench/results/`.
//!
//! Method (DESIGN §7): data generated once per point and held in memory by every engine; one
//! warm-up, then the median of `--reps` wall-clock runs of the whole query.
// Benchmark harness, not a query path: its indexing is into serde_json values (a missing key
// reads as Null, never panics) and vectors of sweep points it built itself.
#![allow(clippy::indexing_slicing)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use crate::synthetic::{self, Dist, KeyType, Spec};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use datafusion::catalog::MemTable;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use grouper::{Backend, GrouperConfig};
use grouper_core::cpu::Strategy;
use grouper_core::planner::Overrides;
use serde_json::{json, Value};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// SUM+COUNT by key over 2^0..2^24 groups, uniform and zipf; TPC-H Q1.
    CpuSweep(SweepArgs),
    /// GPU strategies on resident data vs the copy rate and PyTorch; Q1 on the GPU vs DuckDB.
    GpuSweep(crate::gpu_bench::GpuSweepArgs),
    /// TPC-H Q1 from host RAM (SF 10, 100): every GPU transfer mode, hybrid, CPU and DuckDB;
    /// the streaming rate against the pinned host-to-device bandwidth.
    Q1(crate::q1_bench::Q1Args),
    /// The runtime tuner (Rosenfeld's Algorithm 1) against the exhaustive search over launch
    /// shapes, per strategy, group count and key kind: quality, cost, overhead, effort.
    Tuner(crate::tuner_bench::TunerArgs),
    /// auto against the best fixed strategy at every sweep point (CPU or GPU, uniform and
    /// zipf, dense and hashed keys): the regret, JSON and SVG plots of the regions.
    Regret(crate::regret::RegretArgs),
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// log2 of the rows per point.
    #[arg(long, default_value_t = 25)]
    rows_log2: u32,
    /// log2 of the largest group count (steps of 2^2).
    #[arg(long, default_value_t = 24)]
    max_groups_log2: u32,
    /// Timed runs per engine and point (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Threads for every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// TPC-H scale factors for Q1 (comma-separated; empty for none).
    #[arg(long, default_value = "1,10", value_delimiter = ',', num_args = 0..)]
    tpch_sf: Vec<f64>,
    /// Python with duckdb (from scripts/setup-venv.sh); DuckDB is skipped if it is missing.
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
    /// Also time every strategy, not just auto.
    #[arg(long, default_value_t = true)]
    strategies: bool,
    /// Where to write the JSON result.
    #[arg(long, default_value = "bench/results/cpu-sweep.json")]
    out: PathBuf,
}

pub async fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::CpuSweep(a) => cpu_sweep(a).await,
        BenchCommand::GpuSweep(a) => crate::gpu_bench::gpu_sweep(a).await,
        BenchCommand::Q1(a) => crate::q1_bench::q1(a).await,
        BenchCommand::Tuner(a) => crate::tuner_bench::tuner(a).await,
        BenchCommand::Regret(a) => crate::regret::regret(a).await,
    }
}

const SWEEP_SQL: &str = "SELECT k, sum(v), count(*) FROM t GROUP BY k";

/// Writes a benchmark's result as pretty JSON to `path`, making its folder.
pub(crate) fn write_json(path: &std::path::Path, result: &serde_json::Value) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(result)?)?;
    Ok(())
}

/// Median wall-clock milliseconds of `sql` on `ctx` (after one warm-up run).
pub(crate) async fn time_sql(ctx: &SessionContext, sql: &str, reps: usize) -> Result<f64> {
    let runs = time_sql_runs(ctx, sql, reps).await?;
    Ok(runs[runs.len() / 2])
}

/// Wall-clock milliseconds of `reps` runs of `sql` on `ctx` (after one warm-up run), sorted.
pub(crate) async fn time_sql_runs(
    ctx: &SessionContext,
    sql: &str,
    reps: usize,
) -> Result<Vec<f64>> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    let mut runs = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        runs.push(time_sql_once(ctx, sql).await?);
    }
    runs.sort_by(f64::total_cmp);
    Ok(runs)
}

/// Wall-clock milliseconds of one run of `sql` on `ctx` (planning excluded).
pub(crate) async fn time_sql_once(ctx: &SessionContext, sql: &str) -> Result<f64> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let t = Instant::now();
    collect(plan, ctx.task_ctx()).await?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// The engines of a sweep: name and session config.
pub(crate) fn engines(threads: usize, strategies: bool) -> Vec<(String, GrouperConfig)> {
    let mut out = vec![(
        "auto".to_string(),
        GrouperConfig {
            threads: Some(threads),
            ..Default::default()
        },
    )];
    if strategies {
        for s in Strategy::ALL {
            out.push((
                s.name().to_string(),
                GrouperConfig {
                    backend: Backend::Cpu,
                    overrides: Overrides {
                        strategy: Some(s),
                        ..Default::default()
                    },
                    threads: Some(threads),
                    ..Default::default()
                },
            ));
        }
    }
    out.push((
        "datafusion".to_string(),
        GrouperConfig {
            backend: Backend::DataFusion,
            threads: Some(threads),
            ..Default::default()
        },
    ));
    out
}

/// Runs `sql` once more and returns its GroupByExec, if the plan has one.
async fn last_group_by(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Option<Arc<dyn datafusion::physical_plan::ExecutionPlan>>> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    let mut stack = vec![plan];
    while let Some(p) = stack.pop() {
        if p.downcast_ref::<grouper::exec::GroupByExec>().is_some() {
            return Ok(Some(p));
        }
        stack.extend(p.children().into_iter().cloned());
    }
    Ok(None)
}

/// Runs `sql` once more and returns the GPU report of its GroupByExec, if it ran on the GPU.
pub(crate) async fn last_gpu_report(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Option<grouper_gpu::GpuReport>> {
    Ok(last_group_by(ctx, sql).await?.and_then(|p| {
        p.downcast_ref::<grouper::exec::GroupByExec>()
            .and_then(|g| g.last_gpu_report())
    }))
}

/// Runs `sql` once more and returns the CPU strategy its GroupByExec ran, if on the CPU.
pub(crate) async fn last_cpu_strategy(ctx: &SessionContext, sql: &str) -> Result<Option<String>> {
    Ok(last_group_by(ctx, sql).await?.and_then(|p| {
        p.downcast_ref::<grouper::exec::GroupByExec>()
            .and_then(|g| g.last_decision())
            .map(|d| d.strategy.name().to_string())
    }))
}

/// Runs DuckDB on `batches` (written to a temporary Parquet file, loaded into memory there).
pub(crate) fn duckdb(
    python: &PathBuf,
    batches: &[arrow::array::RecordBatch],
    table: &str,
    threads: usize,
    reps: usize,
    sqls: &[&str],
) -> Result<Option<(String, Vec<f64>)>> {
    Ok(
        duckdb_parts(python, &[batches.to_vec()], table, threads, reps, sqls)?
            .map(|d| (d.version, d.ms)),
    )
}

/// What DuckDB did: its version, each query's median ms and result rows (as strings).
pub(crate) struct DuckRun {
    pub version: String,
    pub ms: Vec<f64>,
    pub rows: Vec<Vec<Vec<String>>>,
}

/// Runs DuckDB on `parts` (one Parquet file each, written in parallel, loaded into memory).
pub(crate) fn duckdb_parts(
    python: &PathBuf,
    parts: &[Vec<arrow::array::RecordBatch>],
    table: &str,
    threads: usize,
    reps: usize,
    sqls: &[&str],
) -> Result<Option<DuckRun>> {
    if python_missing(python) {
        return Ok(None);
    }
    let dir = std::env::temp_dir().join(format!("grouper-bench-{}", std::process::id()));
    let run = write_parquet(parts, &dir).and_then(|files| match files {
        0 => Ok(None),
        _ => duckdb_files(python, &dir, table, threads, reps, sqls),
    });
    let _ = std::fs::remove_dir_all(&dir);
    run
}

/// Whether `python` is a path that does not exist (a bare name such as "python3" is looked up
/// on PATH when run).
fn python_missing(python: &std::path::Path) -> bool {
    python.components().count() > 1 && !python.exists()
}

/// Writes `parts` as `dir/part-N.parquet`, one file per non-empty part, in parallel; the
/// number of files.
pub(crate) fn write_parquet(
    parts: &[Vec<arrow::array::RecordBatch>],
    dir: &std::path::Path,
) -> Result<usize> {
    use rayon::prelude::*;
    std::fs::create_dir_all(dir)?;
    let written = parts
        .par_iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(i, p)| -> Result<()> {
            let file = std::fs::File::create(dir.join(format!("part-{i}.parquet")))?;
            let Some(first) = p.first() else {
                return Ok(());
            };
            let mut w = ArrowWriter::try_new(file, first.schema(), None)?;
            for b in p {
                w.write(b)?;
            }
            w.close()?;
            Ok(())
        })
        .collect::<Result<Vec<()>>>()?;
    Ok(written.len())
}

/// Runs DuckDB on the Parquet files in `dir` (loaded into an in-memory table `table`).
pub(crate) fn duckdb_files(
    python: &PathBuf,
    dir: &std::path::Path,
    table: &str,
    threads: usize,
    reps: usize,
    sqls: &[&str],
) -> Result<Option<DuckRun>> {
    if python_missing(python) {
        return Ok(None);
    }
    let out = Command::new(python)
        .arg("bench/duckdb_runner.py")
        .arg(dir.join("*.parquet"))
        .arg(table)
        .arg(threads.to_string())
        .arg(reps.to_string())
        .args(sqls)
        .output()
        .context("cannot run the DuckDB runner")?;
    if !out.status.success() {
        bail!(
            "DuckDB runner failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    let results = v["results"].as_array().cloned().unwrap_or_default();
    let rows = results
        .iter()
        .map(|r| {
            r["rows"]
                .as_array()
                .map(|rows| {
                    rows.iter()
                        .map(|row| {
                            row.as_array()
                                .map(|c| {
                                    c.iter()
                                        .map(|x| x.as_str().unwrap_or("").to_string())
                                        .collect()
                                })
                                .unwrap_or_default()
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    Ok(Some(DuckRun {
        version: v["version"].as_str().unwrap_or("?").to_string(),
        ms: results
            .iter()
            .filter_map(|x| x["median_ms"].as_f64())
            .collect(),
        rows,
    }))
}

/// TPC-H lineitem at `sf` in `threads` partitions, only the columns Q1 reads, and its schema.
pub(crate) fn q1_lineitem(
    sf: f64,
    threads: usize,
) -> Result<(
    Vec<Vec<arrow::array::RecordBatch>>,
    arrow::datatypes::SchemaRef,
)> {
    let parts = crate::tpch::lineitem_columns(sf, threads, Some(&Q1_COLUMNS), &|_| {})?;
    let schema = parts
        .iter()
        .flatten()
        .next()
        .map(|b| b.schema())
        .context("no lineitem rows")?;
    Ok((parts, schema))
}

/// The columns TPC-H Q1 reads.
const Q1_COLUMNS: [&str; 7] = [
    "l_quantity",
    "l_extendedprice",
    "l_discount",
    "l_tax",
    "l_returnflag",
    "l_linestatus",
    "l_shipdate",
];

pub(crate) fn git_commit() -> String {
    if let Ok(c) = std::env::var("GROUPER_COMMIT") {
        return c;
    }
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".into(), |s| s.trim().to_string())
}

async fn cpu_sweep(a: SweepArgs) -> Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let rows = 1usize << a.rows_log2;
    let engines = engines(threads, a.strategies);
    let mut points = Vec::new();
    let mut duck_version = String::from("not run");
    println!(
        "{:<12} {:>9} {:>10} {:>10} {:>10} {:>9} {:>9}  best strategy",
        "dist", "groups", "auto ms", "DF ms", "DuckDB ms", "vs DF", "vs DuckDB"
    );
    for dist in [Dist::Uniform, Dist::Zipf(1.1)] {
        for g_log2 in (0..=a.max_groups_log2).step_by(2) {
            let groups = 1u64 << g_log2;
            let spec = Spec {
                rows,
                groups,
                dist,
                key_type: KeyType::I64,
                null_frac: 0.0,
                seed: 7 + g_log2 as u64,
            };
            let batches = synthetic::generate(&spec)?;
            let mut ms = serde_json::Map::new();
            for (name, config) in &engines {
                let ctx = grouper::session_context(config)?;
                let table = MemTable::try_new(
                    synthetic::schema(KeyType::I64),
                    batches
                        .chunks(batches.len().div_ceil(threads).max(1))
                        .map(|c| c.to_vec())
                        .collect(),
                )?;
                ctx.register_table("t", Arc::new(table))?;
                match time_sql(&ctx, SWEEP_SQL, a.reps).await {
                    Ok(t) => ms.insert(name.clone(), json!(t)),
                    Err(e) => ms.insert(name.clone(), json!(format!("error: {e}"))),
                };
            }
            if let Some((v, t)) = duckdb(&a.python, &batches, "t", threads, a.reps, &[SWEEP_SQL])? {
                duck_version = v;
                ms.insert("duckdb".into(), json!(t[0]));
            }
            let get = |k: &str| ms.get(k).and_then(Value::as_f64);
            let best = engines
                .iter()
                .filter(|(n, _)| n != "auto" && n != "datafusion")
                .filter_map(|(n, _)| get(n).map(|t| (n.clone(), t)))
                .min_by(|x, y| x.1.total_cmp(&y.1))
                .map_or_else(|| "-".to_string(), |(n, t)| format!("{n} ({t:.1} ms)"));
            let (auto, df, duck) = (get("auto"), get("datafusion"), get("duckdb"));
            let ratio = |x: Option<f64>| match (x, auto) {
                (Some(x), Some(a)) => format!("{:.2}x", x / a),
                _ => "-".into(),
            };
            let f = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.1}"));
            println!(
                "{:<12} {:>9} {:>10} {:>10} {:>10} {:>9} {:>9}  {best}",
                dist.name(),
                groups,
                f(auto),
                f(df),
                f(duck),
                ratio(df),
                ratio(duck)
            );
            points.push(json!({ "dist": dist.name(), "groups": groups, "rows": rows, "ms": ms }));
        }
    }
    let mut q1 = Vec::new();
    for &sf in &a.tpch_sf {
        // Only the seven columns Q1 reads, for every engine: SF 10 in full would not fit
        // twice (ours and DuckDB's copy) in this machine's memory.
        let (parts, q1_schema) = q1_lineitem(sf, threads)?;
        let mut ms = serde_json::Map::new();
        for (name, config) in engines
            .iter()
            .filter(|(n, _)| n == "auto" || n == "datafusion")
        {
            let ctx = grouper::session_context(config)?;
            ctx.register_table(
                "lineitem",
                Arc::new(MemTable::try_new(Arc::clone(&q1_schema), parts.clone())?),
            )?;
            ms.insert(
                name.clone(),
                json!(time_sql(&ctx, crate::tpch::Q1, a.reps).await?),
            );
        }
        let flat: Vec<_> = parts.iter().flatten().cloned().collect();
        if let Some((v, t)) = duckdb(
            &a.python,
            &flat,
            "lineitem",
            threads,
            a.reps,
            &[crate::tpch::Q1],
        )? {
            duck_version = v;
            ms.insert("duckdb".into(), json!(t[0]));
        }
        let get = |k: &str| ms.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
        println!("TPC-H Q1 SF {sf}: auto {:.1} ms, DataFusion {:.1} ms ({:.2}x), DuckDB {:.1} ms ({:.2}x)", get("auto"), get("datafusion"), get("datafusion") / get("auto"), get("duckdb"), get("duckdb") / get("auto"));
        q1.push(json!({ "sf": sf, "ms": ms }));
    }
    let result = json!({
        "benchmark": "cpu-sweep",
        "device": format!("{} ({} threads used)", grouper::profile_store::cpu_model(), threads),
        "commit": git_commit(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "query": SWEEP_SQL,
        "duckdb_version": duck_version,
        "reps": a.reps,
        "points": points,
        "tpch_q1": q1,
    });
    write_json(&a.out, &result)?;
    println!("wrote {}", a.out.display());
    Ok(())
}
