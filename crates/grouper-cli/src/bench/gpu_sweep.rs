//! `grouper bench gpu-sweep`: the GPU strategies on device-resident data against the device's
//! copy rate and PyTorch, and TPC-H Q1 on the GPU (resident and batched) against DuckDB.
//!
//! Query: `SELECT k, SUM(v), COUNT(*) GROUP BY k`, f32 values, two key kinds over the same draws
//! `r` (uniform u32): dense u32 keys `r % G`, and scattered 64-bit keys `(r % G + 1) *
//! 0x79E3779B9` (G distinct values over the whole positive range: no perfect hash applies).
//! Kernel time by CUDA events, median of `--reps` after a warm-up; every result's group count
//! is checked against the keys drawn, and its sums and counts against the input's totals.
// Benchmark harness, not a query path: its indexing is into serde_json values (a missing key
// reads as Null, never panics) and vectors of sweep points it built itself.
#![allow(clippy::indexing_slicing)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::{
    ArrayRef, Float32Array, Float64Array, Int64Array, RecordBatch, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema};
use clap::Args;
use datafusion::catalog::MemTable;
use grouper::{Backend, GrouperConfig};
use grouper_core::agg::{AggKind, AggregateSpec};
use grouper_core::expr::Expr;
use grouper_core::GrouperError;
use grouper_gpu::{Gpu, GpuOptions, GpuQuery, GpuStrategy, Prepared};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::bench::common::{duckdb, git_commit, q1_lineitem, run_peer, time_sql, turn, write_json};
use crate::synthetic::{Dist, Sampler};

#[derive(Args, Debug)]
pub struct GpuSweepArgs {
    /// log2 of the rows.
    #[arg(long, default_value_t = 28)]
    rows_log2: u32,
    /// log2 of the largest group count (steps of 2^2).
    #[arg(long, default_value_t = 28)]
    max_groups_log2: u32,
    /// log2 of the smallest group count.
    #[arg(long, default_value_t = 0)]
    min_groups_log2: u32,
    /// Timed runs per point (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Python with torch for the PyTorch peers (skipped if it fails).
    #[arg(long, default_value = "python3")]
    torch_python: PathBuf,
    /// Python with duckdb for the Q1 peer (skipped if missing).
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
    /// TPC-H scale factors for Q1 on the GPU (comma-separated; empty for none).
    #[arg(long, default_value = "10", value_delimiter = ',', num_args = 0..)]
    tpch_sf: Vec<f64>,
    /// Where to write the JSON result.
    #[arg(long, default_value = "bench/results/gpu-sweep.json")]
    out: PathBuf,
    /// Only these strategies (comma-separated GPU strategy names and/or `auto`; default all),
    /// e.g. to profile one kernel.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    strategies: Vec<String>,
    /// Key distribution of the groups (uniform, zipf[:S], heavy_hitter[:F], sequential,
    /// exponential, weibull[:A], normal; `random` is uniform with the scattered keys both
    /// kinds already give). The PyTorch peers run on uniform keys only.
    #[arg(long, default_value = "uniform")]
    dist: Dist,
    /// Hash tables' fill factor (default the planner's), to weigh a sizing rule.
    #[arg(long)]
    fill_factor: Option<f64>,
    /// Threads per block (default the planner's choice), to weigh a sizing rule.
    #[arg(long)]
    threads_per_block: Option<u32>,
    /// Key ranges of the partitioned strategies' fold (default the planner's), to weigh its
    /// rule.
    #[arg(long)]
    key_ranges: Option<u32>,
    /// log2 of the rows a launch takes (default 2^26, the least a resident input launches), to
    /// weigh the chunking: a partitioned fold flushes each group it holds once a chunk, so at
    /// 2^26 groups and up fewer, larger chunks flush fewer times.
    #[arg(long, value_parser = clap::value_parser!(u32).range(10..=31))]
    launch_rows_log2: Option<u32>,
}

impl GpuSweepArgs {
    fn wants(&self, name: &str) -> bool {
        self.strategies.is_empty() || self.strategies.iter().any(|s| s == name)
    }
}

/// The draws `r` and the values `v`, generated in parallel from a fixed seed.
pub(crate) fn draws(rows: usize) -> (Vec<u32>, Vec<f32>) {
    const CHUNK: usize = 1 << 20;
    let mut r = vec![0u32; rows];
    let mut v = vec![0f32; rows];
    r.par_chunks_mut(CHUNK)
        .zip(v.par_chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(i, (r, v))| {
            let mut rng = SmallRng::seed_from_u64(0x5eed ^ i as u64);
            for (x, y) in r.iter_mut().zip(v.iter_mut()) {
                *x = rng.random();
                *y = ((*x >> 8) % 1000) as f32 * 0.25;
            }
        });
    (r, v)
}

/// The sweep's keys at `g` groups from the draws `r`: `r % g` as u32, and how many distinct.
pub(crate) fn dense_keys(r: &[u32], g: u64) -> (Vec<u32>, usize) {
    let dense: Vec<u32> = r.par_iter().map(|&x| (x as u64 % g) as u32).collect();
    let distinct = distinct_below(dense.iter().map(|&d| d as usize), g);
    (dense, distinct)
}

/// How many distinct values `keys`, all below `g`, hold.
pub(crate) fn distinct_below(keys: impl Iterator<Item = usize>, g: u64) -> usize {
    let mut seen = vec![false; g as usize];
    keys.for_each(|k| seen[k] = true);
    seen.iter().filter(|&&s| s).count()
}

/// Keys of `rows` rows over `g` groups drawn by `dist` (u32), and how many distinct.
pub(crate) fn drawn_keys(dist: Dist, g: u64, rows: usize) -> Result<(Vec<u32>, usize)> {
    const CHUNK: usize = 1 << 20;
    let sampler = Sampler::new(dist, g, rows)?;
    let mut keys = vec![0u32; rows];
    keys.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut rng = SmallRng::seed_from_u64(0x5eed ^ c as u64);
            for (j, k) in chunk.iter_mut().enumerate() {
                *k = sampler.group(&mut rng, c * CHUNK + j) as u32;
            }
        });
    let distinct = distinct_below(keys.iter().map(|&k| k as usize), g);
    Ok((keys, distinct))
}

/// The sweep's input for one key kind, and the kind's name: the dense keys as they are (u32),
/// or scattered over the positive 64-bit range (`(d + 1) * 0x79E3779B9`, no perfect hash).
pub(crate) fn sweep_batch(
    dense: &[u32],
    scattered: bool,
    values: &ArrayRef,
) -> Result<(RecordBatch, &'static str)> {
    let keys: ArrayRef = if scattered {
        Arc::new(UInt64Array::from(
            dense
                .par_iter()
                .map(|&d| (d as u64 + 1) * 0x7_9E37_79B9)
                .collect::<Vec<_>>(),
        ))
    } else {
        Arc::new(UInt32Array::from(dense.to_vec()))
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", keys.data_type().clone(), false),
        Field::new("v", DataType::Float32, false),
    ]));
    let kind = if scattered {
        "scattered_u64"
    } else {
        "dense_u32"
    };
    Ok((
        RecordBatch::try_new(schema, vec![keys, Arc::clone(values)])?,
        kind,
    ))
}

/// Little-endian bytes for numpy.fromfile.
fn write_raw(path: &std::path::Path, bytes: impl Iterator<Item = [u8; 4]>) -> Result<()> {
    std::fs::write(path, bytes.flatten().collect::<Vec<u8>>())?;
    Ok(())
}

/// PyTorch's times per group count, or why they are missing.
fn torch_points(a: &GpuSweepArgs, r: &[u32], v: &[f32], groups: &[u64]) -> Result<Value> {
    let dir = std::env::temp_dir();
    let (rf, vf) = (
        dir.join("grouper-sweep-r.bin"),
        dir.join("grouper-sweep-v.bin"),
    );
    write_raw(&rf, r.iter().map(|x| x.to_le_bytes()))?;
    write_raw(&vf, v.iter().map(|x| x.to_le_bytes()))?;
    let mut args: Vec<std::ffi::OsString> = vec![
        rf.clone().into(),
        vf.clone().into(),
        r.len().to_string().into(),
        a.reps.to_string().into(),
    ];
    args.extend(groups.iter().map(|g| g.to_string().into()));
    let out = run_peer(&a.torch_python, "torch_sweep.py", args, "PyTorch peer");
    let _ = std::fs::remove_file(&rf);
    let _ = std::fs::remove_file(&vf);
    out
}

/// `SELECT k, SUM(CAST(v AS DOUBLE)), COUNT(*) GROUP BY k` over columns (k, f32 v).
pub(crate) fn sweep_query(key_type: DataType) -> GpuQuery {
    GpuQuery {
        columns: vec![key_type, DataType::Float32],
        filter: None,
        keys: vec![0],
        aggregates: vec![
            (
                AggregateSpec::new(AggKind::Sum, DataType::Float64),
                Some(Expr::Cast {
                    expr: Box::new(Expr::column(1, DataType::Float32)),
                    to: DataType::Float64,
                }),
            ),
            (AggregateSpec::count_star(), None),
        ],
    }
}

/// What every answer to [`sweep_query`] over a batch must total: its rows, and the sum of its
/// values. The sweeps' values are quarters below 250 ([`draws`], and `strategy_sweep`'s), so
/// any sum of up to 2^34 of them is exact in f64 in any order: a lost, doubled or misplaced
/// row changes the totals (a lost row of value 0 only the count), where the group count alone
/// misses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Totals {
    rows: i64,
    sum: f64,
}

impl Totals {
    /// The totals of `batch` (keys, f32 values).
    pub(crate) fn of(batch: &RecordBatch) -> Result<Totals> {
        let v = batch
            .column(1)
            .as_any()
            .downcast_ref::<Float32Array>()
            .context("the sweep's values are f32")?;
        Ok(Totals {
            rows: batch.num_rows() as i64,
            sum: v.values().par_iter().map(|&x| x as f64).sum(),
        })
    }

    /// Whether an answer's columns (key, SUM, COUNT(*)) total these.
    fn check(&self, columns: &[ArrayRef]) -> Result<()> {
        let sums = columns
            .get(1)
            .and_then(|c| c.as_any().downcast_ref::<Float64Array>())
            .context("SUM is the answer's second column, f64")?;
        let counts = columns
            .get(2)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .context("COUNT(*) is the answer's third column, i64")?;
        let got = Totals {
            rows: counts.values().iter().sum(),
            sum: sums.iter().flatten().sum(),
        };
        anyhow::ensure!(got == *self, "the groups total {got:?}, the input {self:?}");
        Ok(())
    }
}

/// One full run of `p` (warming it up), checked to find `groups` groups that total `totals`;
/// the strategy it ran (what `auto` chose).
pub(crate) fn check_groups(
    p: &mut Prepared,
    groups: usize,
    totals: &Totals,
) -> Result<GpuStrategy> {
    let first = p.run()?;
    anyhow::ensure!(
        first.num_rows == groups,
        "{}: {} groups, expected {groups}",
        first.report.strategy,
        first.num_rows
    );
    totals
        .check(&first.columns)
        .with_context(|| first.report.strategy.to_string())?;
    Ok(first.report.strategy)
}

/// The median of `xs` (upper median when even; NaN when empty).
pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Kernel times of `auto` (as `opts` plan it) and of every GPU strategy that applies to
/// `batch` (resident), for those `wants` names; the strategy `auto` chose. Each result's
/// group count is checked against `distinct`.
pub(crate) fn time_strategies(
    batch: RecordBatch,
    distinct: usize,
    opts: &GpuOptions,
    reps: usize,
    wants: impl Fn(&str) -> bool,
) -> Result<(GpuStrategy, serde_json::Map<String, Value>)> {
    let key_type = batch.schema().field(0).data_type().clone();
    let totals = Totals::of(&batch)?;
    let auto = Prepared::new(&sweep_query(key_type), &[batch], opts)?;
    let mut runs: Vec<(String, Prepared)> = Vec::new();
    for s in GpuStrategy::ALL {
        if !wants(s.name()) || (s == GpuStrategy::THREAD_PRIVATE && distinct > 64) {
            continue; // its private tables hold at most 64 groups
        }
        let forced = GpuOptions {
            strategy: Some(s),
            profile: None,
            ..opts.clone()
        };
        match auto.retarget(&forced) {
            Ok(p) => runs.push((s.name().to_string(), p)),
            Err(GrouperError::InvalidOption(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let chosen = auto.report().strategy;
    if wants("auto") {
        runs.insert(0, ("auto".into(), auto));
    }
    // Each checked once, then timed taking turns: clocks and the machine's other load drift
    // over seconds, and `auto` runs the kernels of a fixed strategy, so turns keep them
    // comparable. Each timed run follows an untimed one of its own: otherwise a run inherits
    // the L2 and clocks the previous strategy left (`auto`, first in every turn, measured
    // 5–12% slower than the very same kernels forced, right after a contended `global`). With
    // that, `auto` still ran 5–10% slower than `perfect_global` forced, its own kernels (H100,
    // ff94266), so each turn also starts at the next strategy: whatever the first of a turn
    // inherits falls on each in turn, not always on `auto`.
    for (_, p) in runs.iter_mut() {
        check_groups(p, distinct, &totals)?;
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(reps); runs.len()];
    for rep in 0..reps.max(1) {
        for i in turn(runs.len(), rep) {
            times[i].push(timed_run(&mut runs[i].1)?);
        }
    }
    let ms = runs
        .iter()
        .zip(times)
        .map(|((name, _), t)| (name.clone(), json!(median(t))))
        .collect();
    Ok((chosen, ms))
}

/// `auto`'s kernel time over `against`'s, pair by pair: `pairs` pairs timed alone together,
/// which of the two runs first alternating, each timed run after an untimed one of its own.
/// Among a full sweep's strategies `auto` ran 5–11% behind the very kernels it had chosen,
/// forced (H100, 96f7172), and equal to them within 0.2% timed alone or as a pair
/// (`auto-vs-forced-h100-96f7172.json`): what runs around a strategy moves its time, so a
/// point where `auto` looks slower is timed again this way (as the CPU's regret does).
pub(crate) fn paired_ratios(
    batch: RecordBatch,
    opts: &GpuOptions,
    against: GpuStrategy,
    pairs: usize,
) -> Result<Vec<f64>> {
    let key_type = batch.schema().field(0).data_type().clone();
    let mut auto = Prepared::new(&sweep_query(key_type), &[batch], opts)?;
    let mut other = auto.retarget(&GpuOptions {
        strategy: Some(against),
        profile: None,
        ..opts.clone()
    })?;
    let mut ratios = Vec::with_capacity(pairs);
    for i in 0..pairs {
        let (a, o) = if i % 2 == 0 {
            let a = timed_run(&mut auto)?;
            (a, timed_run(&mut other)?)
        } else {
            let o = timed_run(&mut other)?;
            (timed_run(&mut auto)?, o)
        };
        ratios.push(a / o);
    }
    Ok(ratios)
}

/// One timed run's kernel milliseconds, after an untimed run of the same kernels (so it does
/// not inherit the L2 and clocks another strategy left).
pub(crate) fn timed_run(p: &mut Prepared) -> Result<f64> {
    p.run_kernels()?;
    Ok(p.run_kernels()?.kernel_ms)
}

pub async fn gpu_sweep(a: GpuSweepArgs) -> Result<()> {
    for s in a.strategies.iter().filter(|s| *s != "auto") {
        s.parse::<GpuStrategy>()
            .map_err(|e| anyhow::anyhow!("--strategies: {e}"))?;
    }
    let gpu = Gpu::get()?;
    let copy = gpu.copy_rate()?;
    println!(
        "{}: copy rate {:.2} TB/s (device-to-device, read + write)",
        gpu.info.name,
        copy / 1e12
    );
    let rows = 1usize << a.rows_log2;
    let t = Instant::now();
    let (r, v) = draws(rows);
    println!(
        "generated 2^{} rows in {:.1} s",
        a.rows_log2,
        t.elapsed().as_secs_f64()
    );
    let groups: Vec<u64> = (a.min_groups_log2..=a.max_groups_log2)
        .step_by(2)
        .map(|l| 1u64 << l)
        .collect();
    let uniform = matches!(a.dist, Dist::Uniform | Dist::Random);
    let torch = if uniform {
        torch_points(&a, &r, &v, &groups).unwrap_or_else(|e| {
            eprintln!("PyTorch peer skipped: {e}");
            Value::Null
        })
    } else {
        Value::Null
    };
    let values: ArrayRef = Arc::new(Float32Array::from(v));
    let mut points = Vec::new();
    // Resident input; the sizing parameters given to weigh a rule, else the planner's.
    let mut opts = GpuOptions {
        resident: true,
        ..Default::default()
    };
    opts.params.threads_per_block = a.threads_per_block;
    opts.params.key_ranges = a.key_ranges;
    if let Some(l) = a.launch_rows_log2 {
        opts.batch_rows = 1 << l;
    }
    if let Some(f) = a.fill_factor {
        opts.params.fill_factor = f;
    }
    println!(
        "{:>6} {:>9} {:>17} {:>9} {:>8} {:>7} {:>9} {:>9}",
        "groups", "keys", "strategy", "ms", "Grows/s", "%copy", "xtorchD", "xtorchG"
    );
    for &g in &groups {
        let (dense, distinct) = if uniform {
            dense_keys(&r, g)
        } else {
            drawn_keys(a.dist, g, rows)?
        };
        let tp = &torch["points"][g.to_string()];
        let (torch_dense, torch_general) = (tp["dense_ms"].as_f64(), tp["general_ms"].as_f64());
        for scattered in [false, true] {
            let (batch, kind) = sweep_batch(&dense, scattered, &values)?;
            let key_bytes = if scattered { 8 } else { 4 };
            let (chosen, ms) = time_strategies(batch, distinct, &opts, a.reps, |s| a.wants(s))?;
            let torch_ms = if scattered {
                torch_general
            } else {
                torch_dense
            };
            for (name, t) in &ms {
                let t = t.as_f64().unwrap_or(f64::NAN);
                let grows = rows as f64 / (t * 1e-3) / 1e9;
                let pct = 100.0 * rows as f64 * (key_bytes + 4) as f64 / (t * 1e-3) / copy;
                let label = if name == "auto" {
                    format!("auto={chosen}")
                } else {
                    name.clone()
                };
                println!(
                    "{:>6} {:>9} {:>17} {:>9.3} {:>8.1} {:>6.1}% {:>9} {:>9}",
                    format!("2^{}", g.trailing_zeros()),
                    kind,
                    label,
                    t,
                    grows,
                    pct,
                    torch_dense.map_or("-".into(), |d| format!("{:.2}", d / t)),
                    torch_general.map_or("-".into(), |d| format!("{:.2}", d / t)),
                );
            }
            points.push(json!({
                "groups": g, "distinct": distinct, "keys": kind, "auto_strategy": chosen.name(),
                "kernel_ms": ms, "torch_ms": torch_ms,
                "torch_dense_ms": torch_dense, "torch_general_ms": torch_general,
            }));
            // Written after every point, so a run cut short still leaves its results.
            write_result(&a, &gpu, copy, rows, &torch, &points, &[])?;
        }
    }
    let q1 = q1_gpu(&a).await?;
    write_result(&a, &gpu, copy, rows, &torch, &points, &q1)?;
    Ok(())
}

fn write_result(
    a: &GpuSweepArgs,
    gpu: &Gpu,
    copy: f64,
    rows: usize,
    torch: &Value,
    points: &[Value],
    q1: &[Value],
) -> Result<()> {
    let result = json!({
        "benchmark": "gpu-sweep",
        "dist": a.dist.name(),
        "device": gpu.info.name,
        "compute_capability": format!("{}.{}", gpu.info.compute_capability.0, gpu.info.compute_capability.1),
        "copy_rate_bytes_per_s": copy,
        "commit": git_commit(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "query": "SELECT k, SUM(v), COUNT(*) FROM t GROUP BY k (v f32, resident, kernel time by CUDA events)",
        "rows": rows,
        "reps": a.reps,
        "torch": torch.get("torch"),
        "points": points,
        "tpch_q1": q1,
    });
    write_json(&a.out, &result)?;
    Ok(())
}

/// TPC-H Q1 through DataFusion on the GPU, resident and batched, and DuckDB on all host cores.
async fn q1_gpu(a: &GpuSweepArgs) -> Result<Vec<Value>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = Vec::new();
    for &sf in &a.tpch_sf {
        let (parts, schema) = q1_lineitem(sf, threads)?;
        let mut ms = serde_json::Map::new();
        for (name, resident) in [("gpu_resident", true), ("gpu_batched", false)] {
            let mut config = GrouperConfig {
                backend: Backend::Gpu,
                threads: Some(threads),
                ..Default::default()
            };
            config.gpu.resident = resident;
            let ctx = grouper::session_context(&config)?;
            ctx.register_table(
                "lineitem",
                Arc::new(MemTable::try_new(Arc::clone(&schema), parts.clone())?),
            )?;
            let wall = time_sql(&ctx, crate::tpch::Q1, a.reps).await?;
            let report = crate::bench::common::last_gpu_report(&ctx, crate::tpch::Q1).await?;
            ms.insert(format!("{name}_wall_ms"), json!(wall));
            if let Some(r) = report {
                ms.insert(format!("{name}_kernel_ms"), json!(r.kernel_ms));
                ms.insert(format!("{name}_gpu_total_ms"), json!(r.total_ms));
                ms.insert(format!("{name}_upload_ms"), json!(r.upload_ms));
                ms.insert(format!("{name}_strategy"), json!(r.strategy.name()));
            }
        }
        let cpu = GrouperConfig {
            backend: Backend::Cpu,
            threads: Some(threads),
            ..Default::default()
        };
        let ctx = grouper::session_context(&cpu)?;
        ctx.register_table(
            "lineitem",
            Arc::new(MemTable::try_new(Arc::clone(&schema), parts.clone())?),
        )?;
        ms.insert(
            "cpu_wall_ms".into(),
            json!(time_sql(&ctx, crate::tpch::Q1, a.reps).await?),
        );
        let flat: Vec<_> = parts.iter().flatten().cloned().collect();
        match duckdb(
            &a.python,
            &flat,
            "lineitem",
            threads,
            a.reps,
            &[crate::tpch::Q1],
        ) {
            Ok(Some((version, t))) => {
                ms.insert("duckdb_ms".into(), json!(t[0]));
                ms.insert("duckdb_version".into(), json!(version));
            }
            Ok(None) => eprintln!("DuckDB skipped: {} not found", a.python.display()),
            Err(e) => eprintln!("DuckDB skipped: {e}"),
        }
        println!(
            "TPC-H Q1 SF {sf} ({threads} host threads): {}",
            Value::Object(ms.clone())
        );
        out.push(json!({ "sf": sf, "threads": threads, "ms": ms }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The totals catch a lost row, a row counted twice, and a sum in the wrong place; the
    /// right answer passes whatever order its groups come in.
    #[test]
    fn totals_catch_lost_doubled_and_misplaced_rows() {
        let (r, v) = draws(1 << 12);
        let values: ArrayRef = Arc::new(Float32Array::from(v.clone()));
        let (dense, _) = dense_keys(&r, 16);
        let (batch, _) = sweep_batch(&dense, false, &values).unwrap();
        let totals = Totals::of(&batch).unwrap();
        // The answer, computed here: per key, SUM(v) and COUNT(*), in reverse key order.
        let mut sum = [0f64; 16];
        let mut count = [0i64; 16];
        for (&k, &x) in dense.iter().zip(&v) {
            sum[k as usize] += x as f64;
            count[k as usize] += 1;
        }
        let answer = |sum: &[f64], count: &[i64]| -> Vec<ArrayRef> {
            vec![
                Arc::new(UInt32Array::from((0..16u32).rev().collect::<Vec<_>>())),
                Arc::new(Float64Array::from(
                    sum.iter().rev().copied().collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    count.iter().rev().copied().collect::<Vec<_>>(),
                )),
            ]
        };
        totals.check(&answer(&sum, &count)).unwrap();
        // A row lost: its value and its count.
        let (k, x) = (dense[7] as usize, v[7] as f64);
        let (mut s, mut c) = (sum, count);
        s[k] -= x;
        c[k] -= 1;
        assert!(totals.check(&answer(&s, &c)).is_err());
        // A group merged twice.
        let (mut s, mut c) = (sum, count);
        s[3] *= 2.0;
        c[3] *= 2;
        assert!(totals.check(&answer(&s, &c)).is_err());
        // Only the count kept: the sum went elsewhere.
        let mut s = sum;
        s[5] = 0.0;
        assert!(totals.check(&answer(&s, &count)).is_err());
    }
}
