//! `grouper bench check`: the regression guard. A short fixed set of figures, measured on the
//! machine at hand and compared with the committed baseline for that machine
//! (`bench/results/baseline-<machine>.json`); every figure more than `--tolerance` slower is
//! printed and the command fails.
//!
//! Why: ratios between grouper's own strategies (the regret benchmark) hide a regression that
//! hits all of them. Resident dense keys at 16 groups once fell from 134 to 5 Grows/s under
//! `auto` with nothing noticing, because every check compared strategies at one commit.
//!
//! The set:
//! - GPU (when there is one): `SELECT k, SUM(v), COUNT(*) GROUP BY k` on resident data at 1,
//!   16, 2^10, 2^16, 2^20 and 2^24 groups, dense u32 and scattered u64 keys, every strategy
//!   that applies and `auto` (kernel time, the gpu-sweep's draws and method);
//! - CPU: the same points through DataFusion sessions, `auto` (rules only, no stored profile,
//!   so the figure does not depend on a calibration) and every CPU strategy;
//! - TPC-H Q1 at `--sf`: in memory and from Parquet files, on grouper's CPU backend,
//!   DataFusion's own aggregation, and (with a GPU) the GPU backend.
//!
//! Host figures are compared through a yardstick. A shared host's speed drifts: on the H100
//! machine's 16 cores the very same CPU figures ran 10–29% slower in one pass than ten minutes
//! before, every strategy at a point together. So each CPU point also times DataFusion's own
//! aggregation on the same data, and Q1 its DataFusion backend on the same input, in the same
//! measurement; a host figure is compared as its ratio to that yardstick (which is not
//! grouper's code, so a regression of grouper's cannot hide in it). The yardsticks' own figures
//! are printed as the host's drift and never fail the check. GPU kernel times need none.
//!
//! Figures are milliseconds (lower is better): kernel-time medians on the GPU, the fastest of
//! interleaved runs on the CPU (`strategy_sweep::cpu_point`), medians for Q1; each figure is the
//! fastest of its measurements (a baseline takes two; a check measures a point again, up to
//! twice, while one of its figures is beyond the tolerance: a regression persists, noise does
//! not).
// Benchmark harness, not a query path: it indexes serde_json values (a missing key reads as
// Null) and vectors it built itself.
#![allow(clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::{ArrayRef, Float32Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use clap::Args;
use datafusion::catalog::MemTable;
use datafusion::prelude::ParquetReadOptions;
use grouper::{Backend, GrouperConfig};
use grouper_core::profile::KeyKind;
use grouper_gpu::{Gpu, GpuOptions};
use serde_json::{json, Map, Value};

use crate::bench::common::{git_commit, q1_lineitem, time_sql, write_json, write_parquet};
use crate::bench::gpu_sweep::{dense_keys, draws, sweep_batch, time_strategies};
use crate::bench::strategy_sweep::{cpu_point, PointSpec};
use crate::synthetic::Dist;

/// Group counts of the set (log2).
const GROUPS_LOG2: [u32; 6] = [0, 4, 10, 16, 20, 24];

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// log2 of the rows of each GPU point.
    #[arg(long, default_value_t = 26)]
    gpu_rows_log2: u32,
    /// log2 of the rows of each CPU point.
    #[arg(long, default_value_t = 22)]
    cpu_rows_log2: u32,
    /// Timed runs per figure.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// TPC-H scale factor of the Q1 figures (0: none).
    #[arg(long, default_value_t = 10.0)]
    sf: f64,
    /// Where Q1's Parquet files are written (and reused when present).
    #[arg(long, default_value = "target/bench-check")]
    data: PathBuf,
    /// Threads for every CPU engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Which parts to run (comma-separated: gpu, cpu, q1; default all that this machine has).
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    only: Vec<String>,
    /// The baseline (default: `bench/results/baseline-<machine>.json`).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Write the figures into the baseline instead of comparing (figures of parts not run
    /// now are kept).
    #[arg(long)]
    record: bool,
    /// How much slower than the baseline a figure may be (0.10: 10%).
    #[arg(long, default_value_t = 0.10)]
    tolerance: f64,
    /// Where to write this run's figures and comparison (JSON).
    #[arg(long)]
    out: Option<PathBuf>,
}

impl CheckArgs {
    fn wants(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == part)
    }
}

/// The machine's name in a file name: the GPU's when there is one (its host's CPU figures are
/// in the same file), else the CPU model and threads.
fn machine(gpu: Option<&Gpu>, threads: usize) -> String {
    let name = match gpu {
        Some(g) => g.info.name.clone(),
        None => format!("cpu {} {threads}t", cpu_model()),
    };
    let mut slug = String::new();
    for c in name.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.trim_matches('-').to_string()
}

/// The CPU's model name (Linux), or "unknown".
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.replace("(R)", "").replace("(TM)", "").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// One measurement that gives several figures: a GPU or CPU point (every strategy and `auto`
/// at one group count and key kind), or TPC-H Q1 (every backend, in memory and from Parquet).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Gpu { groups_log2: u32, scattered: bool },
    Cpu { groups_log2: u32, kind: KeyKind },
    Q1,
}

/// A figure as measured once: its name, milliseconds, the yardstick's milliseconds in the same
/// measurement (host figures), and a note for people.
struct Figure {
    name: String,
    ms: f64,
    yardstick: Option<f64>,
    note: String,
}

/// Every measurement of a figure.
#[derive(Default)]
struct Runs {
    ms: Vec<f64>,
    /// Per run, ms over the yardstick's ms (host figures).
    ratios: Vec<f64>,
    note: String,
}

impl Runs {
    /// The figure as stored: the fastest run (interference only ever adds time), and the
    /// smallest ratio to the yardstick.
    fn value(&self) -> Value {
        let min = |xs: &[f64]| xs.iter().copied().fold(f64::INFINITY, f64::min);
        let mut v = json!({ "ms": min(&self.ms), "runs": self.ms, "note": self.note });
        if !self.ratios.is_empty() {
            v["per_yardstick"] = json!(min(&self.ratios));
        }
        v
    }
}

/// Runs of a unit again, at most, while one of its figures stays beyond the tolerance: a
/// regression persists, a noisy run does not.
const RETRIES: usize = 2;

/// What the units need, made once: the GPU sweep's draws, Q1's data.
struct Inputs {
    gpu_rows: usize,
    draws: Option<(Vec<u32>, ArrayRef)>,
    q1: Option<(Vec<Vec<RecordBatch>>, SchemaRef, PathBuf)>,
}

/// Whether a figure is a yardstick (DataFusion's own aggregation): the host's speed.
fn is_yardstick(name: &str) -> bool {
    name.split('/').any(|p| p == "datafusion")
}

/// How much slower `now` is than `base` (0.1: 10%): by their ratios to the yardstick where
/// both have one, else by their milliseconds; `None` when either lacks a figure.
fn slowdown(now: &Value, base: &Value) -> Option<f64> {
    let key = match (now.get("per_yardstick"), base.get("per_yardstick")) {
        (Some(_), Some(_)) => "per_yardstick",
        _ => "ms",
    };
    Some(now[key].as_f64()? / base[key].as_f64()? - 1.0)
}

pub async fn check(a: CheckArgs) -> Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let gpu = Gpu::get().ok();
    let machine = machine(gpu.as_deref(), threads);
    let baseline_path = a
        .baseline
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("bench/results/baseline-{machine}.json")));
    let baseline = match a.record {
        true => Map::new(),
        false => read_figures(&baseline_path).with_context(|| {
            format!(
                "no baseline for this machine at {} (record one with --record)",
                baseline_path.display()
            )
        })?,
    };
    println!(
        "machine {machine}: {}, {threads} threads{}",
        cpu_model(),
        gpu.as_ref()
            .map_or(String::new(), |g| format!(", {}", g.info.name))
    );
    let mut units = Vec::new();
    if gpu.is_some() && a.wants("gpu") {
        for groups_log2 in GROUPS_LOG2 {
            for scattered in [false, true] {
                units.push(Unit::Gpu {
                    groups_log2,
                    scattered,
                });
            }
        }
    }
    if a.wants("cpu") {
        for groups_log2 in GROUPS_LOG2 {
            for kind in [KeyKind::Dense, KeyKind::Hashed] {
                units.push(Unit::Cpu { groups_log2, kind });
            }
        }
    }
    if a.sf > 0.0 && a.wants("q1") {
        units.push(Unit::Q1);
    }
    let mut inputs = Inputs {
        gpu_rows: 1 << a.gpu_rows_log2,
        draws: None,
        q1: None,
    };
    let with_gpu = gpu.is_some();
    // A baseline is recorded from two passes; a check measures a unit again while a figure of
    // it stays beyond the tolerance, up to RETRIES times.
    let mut runs: BTreeMap<String, Runs> = BTreeMap::new();
    for unit in &units {
        let passes = if a.record { 2 } else { 1 + RETRIES };
        let mut names = Vec::new();
        for pass in 0..passes {
            for f in measure(&a, *unit, threads, with_gpu, &mut inputs).await? {
                let r = runs.entry(f.name.clone()).or_default();
                r.ms.push(f.ms);
                r.ratios.extend(f.yardstick.map(|y| f.ms / y));
                r.note = f.note;
                if pass == 0 {
                    names.push(f.name);
                }
            }
            let beyond = names.iter().any(|n| {
                !is_yardstick(n)
                    && baseline
                        .get(n)
                        .zip(runs.get(n))
                        .and_then(|(b, r)| slowdown(&r.value(), b))
                        .is_some_and(|d| d > a.tolerance)
            });
            if a.record {
                continue;
            }
            if !beyond {
                break;
            }
            if pass + 1 < passes {
                println!("  {unit:?}: a figure is beyond the tolerance, measuring again");
            }
        }
        for n in &names {
            let Some(r) = runs.get(n) else { continue };
            let v = r.value();
            let vs = match baseline.get(n).and_then(|b| Some((slowdown(&v, b)?, b))) {
                Some((d, b)) => format!(
                    "{:>+7.1}% vs {:.3}{}",
                    100.0 * d,
                    b["ms"].as_f64().unwrap_or(f64::NAN),
                    if v.get("per_yardstick").is_some() && b.get("per_yardstick").is_some() {
                        " (per yardstick)"
                    } else {
                        ""
                    }
                ),
                None => "    (no baseline)".into(),
            };
            let ms = v["ms"].as_f64().unwrap_or(f64::NAN);
            println!("{n:<40} {ms:>10.3} ms {vs} {}", r.note);
        }
    }
    let figures: Map<String, Value> = runs.iter().map(|(n, r)| (n.clone(), r.value())).collect();
    let command: Vec<String> = std::env::args().collect();
    let mut result = json!({
        "machine": machine,
        "cpu": cpu_model(),
        "threads": threads,
        "gpu": gpu.as_ref().map(|g| g.info.name.clone()),
        "commit": git_commit(),
        "command": command.join(" "),
        "figures": figures,
    });
    if a.record {
        // Parts measured now replace theirs; a baseline's other figures stay (`--only q1
        // --record` re-records Q1 alone).
        let mut all = read_figures(&baseline_path).unwrap_or_default();
        all.extend(figures.clone());
        result["figures"] = json!(all);
        write_json(&baseline_path, &result)?;
        println!("baseline recorded: {}", baseline_path.display());
        return Ok(());
    }
    let (slower, missing) = compare(&figures, &baseline, a.tolerance);
    result["baseline"] = json!(baseline_path.display().to_string());
    result["slower"] = json!(slower);
    if let Some(out) = &a.out {
        write_json(out, &result)?;
    }
    println!(
        "{} of {} figures compared with {}; {} slower by more than {:.0}%",
        figures.len() - missing.len(),
        figures.len(),
        baseline_path.display(),
        slower.len(),
        100.0 * a.tolerance
    );
    if !missing.is_empty() {
        println!("not in the baseline: {}", missing.join(", "));
    }
    for (name, f) in figures.iter().filter(|(n, _)| is_yardstick(n)) {
        if let Some(d) = baseline.get(name).and_then(|b| slowdown(f, b)) {
            println!("host drift (yardstick {name}): {:+.1}%", 100.0 * d);
        }
    }
    for s in &slower {
        println!("SLOWER {s}");
    }
    anyhow::ensure!(
        slower.is_empty(),
        "{} figures more than {:.0}% slower than the baseline",
        slower.len(),
        100.0 * a.tolerance
    );
    Ok(())
}

/// The name every figure of `unit` starts with.
fn prefix(unit: Unit) -> String {
    match unit {
        Unit::Gpu {
            groups_log2,
            scattered,
        } => format!(
            "gpu/{}/2^{groups_log2}/",
            if scattered {
                "scattered_u64"
            } else {
                "dense_u32"
            }
        ),
        Unit::Cpu { groups_log2, kind } => format!(
            "cpu/{}/2^{groups_log2}/",
            match kind {
                KeyKind::Dense => "dense_i64",
                KeyKind::Hashed => "scattered_i64",
            }
        ),
        Unit::Q1 => "q1/".into(),
    }
}

/// Measures `unit` once.
async fn measure(
    a: &CheckArgs,
    unit: Unit,
    threads: usize,
    with_gpu: bool,
    inputs: &mut Inputs,
) -> Result<Vec<Figure>> {
    let at = prefix(unit);
    let mut out = Vec::new();
    match unit {
        Unit::Gpu {
            groups_log2,
            scattered,
        } => {
            let rows = inputs.gpu_rows;
            let (r, values) = inputs.draws.get_or_insert_with(|| {
                let (r, v) = draws(rows);
                (r, Arc::new(Float32Array::from(v)) as ArrayRef)
            });
            let (dense, distinct) = dense_keys(r, 1u64 << groups_log2);
            let (batch, _) = sweep_batch(&dense, scattered, values)?;
            let opts = GpuOptions {
                resident: true,
                ..Default::default()
            };
            let (chosen, ms) = time_strategies(batch, distinct, &opts, a.reps, |_| true)?;
            for (name, t) in &ms {
                let t = t.as_f64().unwrap_or(f64::NAN);
                let mut note = format!("{:.1} Grows/s", rows as f64 / (t * 1e-3) / 1e9);
                if name == "auto" {
                    note += &format!(" ({chosen})");
                }
                out.push(Figure {
                    name: format!("{at}{name}"),
                    ms: t,
                    yardstick: None,
                    note,
                });
            }
        }
        Unit::Cpu { groups_log2, kind } => {
            let p = PointSpec {
                dist: Dist::Uniform,
                kind,
                groups_log2,
                rows: 1 << a.cpu_rows_log2,
            };
            let m = cpu_point(&p, a.reps, threads, true, true).await?;
            let yardstick = m.ms.get("datafusion").and_then(Value::as_f64);
            for (name, t) in &m.ms {
                let Some(t) = t.as_f64() else { continue };
                let note = match name.as_str() {
                    "auto" => format!("({})", m.chosen),
                    "datafusion" => "(yardstick)".into(),
                    _ => String::new(),
                };
                out.push(Figure {
                    name: format!("{at}{name}"),
                    ms: t,
                    yardstick: yardstick.filter(|_| name != "datafusion"),
                    note,
                });
            }
        }
        Unit::Q1 => {
            let (parts, schema, dir) = match &inputs.q1 {
                Some(q1) => q1,
                None => {
                    let t = Instant::now();
                    let (parts, schema) = q1_lineitem(a.sf, threads)?;
                    let dir = a.data.join(format!("lineitem-q1-sf{}-{threads}", a.sf));
                    if !dir.join("part-0.parquet").exists() {
                        write_parquet(&parts, &dir)?;
                    }
                    println!(
                        "Q1 data at SF {} ready in {:.1} s ({})",
                        a.sf,
                        t.elapsed().as_secs_f64(),
                        dir.display()
                    );
                    inputs.q1.insert((parts, schema, dir))
                }
            };
            let mut backends = vec![Backend::DataFusion, Backend::Cpu];
            if with_gpu {
                backends.push(Backend::Gpu);
            }
            for source in ["memory", "parquet"] {
                let mut yardstick = None;
                for &backend in &backends {
                    let config = GrouperConfig {
                        backend,
                        threads: Some(threads),
                        no_profile: true,
                        ..Default::default()
                    };
                    let ctx = grouper::session_context(&config)?;
                    match source {
                        "memory" => {
                            let table = MemTable::try_new(Arc::clone(schema), parts.clone())?;
                            ctx.register_table("lineitem", Arc::new(table))?;
                        }
                        _ => {
                            let path = dir.to_string_lossy();
                            let options = ParquetReadOptions::default();
                            ctx.register_parquet("lineitem", path.as_ref(), options)
                                .await?;
                        }
                    }
                    let ms = time_sql(&ctx, crate::tpch::Q1, a.reps).await?;
                    let is_yardstick = backend == Backend::DataFusion;
                    out.push(Figure {
                        name: format!("{at}{backend}/sf{}/{source}", a.sf),
                        ms,
                        yardstick: yardstick.filter(|_| !is_yardstick),
                        note: if is_yardstick {
                            "(yardstick)".into()
                        } else {
                            String::new()
                        },
                    });
                    if is_yardstick {
                        yardstick = Some(ms);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The figures of a baseline file.
fn read_figures(path: &Path) -> Result<Map<String, Value>> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    v["figures"]
        .as_object()
        .cloned()
        .context("a baseline has an object \"figures\"")
}

/// Figures more than `tolerance` slower than their baseline (as lines to print; yardsticks
/// never are), and the names of figures the baseline does not have.
fn compare(
    now: &Map<String, Value>,
    base: &Map<String, Value>,
    tolerance: f64,
) -> (Vec<String>, Vec<String>) {
    let mut slower = Vec::new();
    let mut missing = Vec::new();
    for (name, f) in now {
        let Some(d) = base.get(name).and_then(|b| slowdown(f, b)) else {
            missing.push(name.clone());
            continue;
        };
        if d > tolerance && !is_yardstick(name) {
            let b = base.get(name).and_then(|b| b["ms"].as_f64());
            slower.push(format!(
                "{name}: {:.3} ms, baseline {:.3} ms ({:+.1}%{})",
                f["ms"].as_f64().unwrap_or(f64::NAN),
                b.unwrap_or(f64::NAN),
                100.0 * d,
                if f.get("per_yardstick").is_some() {
                    " per yardstick"
                } else {
                    ""
                }
            ));
        }
    }
    (slower, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(pairs: &[(&str, f64, Option<f64>)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(n, ms, ratio)| {
                let mut v = json!({ "ms": ms });
                if let Some(r) = ratio {
                    v["per_yardstick"] = json!(r);
                }
                (n.to_string(), v)
            })
            .collect()
    }

    /// Only figures beyond the tolerance are slower; figures the baseline lacks are named.
    #[test]
    fn slower_means_beyond_the_tolerance() {
        let base = figures(&[("a", 10.0, None), ("b", 10.0, None), ("c", 10.0, None)]);
        let now = figures(&[
            ("a", 10.9, None),
            ("b", 11.1, None),
            ("c", 5.0, None),
            ("d", 1.0, None),
        ]);
        let (slower, missing) = compare(&now, &base, 0.10);
        assert_eq!(slower.len(), 1, "{slower:?}");
        assert!(slower[0].starts_with("b: 11.100 ms, baseline 10.000 ms (+11.0%)"));
        assert_eq!(missing, vec!["d".to_string()]);
    }

    /// A host that slowed down by 25% all over is no regression: figures are compared by their
    /// ratio to the yardstick, which the drift moved too; the yardstick itself never fails.
    /// A figure that slowed down against its yardstick is.
    #[test]
    fn host_figures_compare_by_their_yardstick() {
        let base = figures(&[
            ("cpu/x/2^4/auto", 10.0, Some(0.5)),
            ("cpu/x/2^4/sort", 30.0, Some(1.5)),
            ("cpu/x/2^4/datafusion", 20.0, None),
        ]);
        let now = figures(&[
            ("cpu/x/2^4/auto", 12.5, Some(0.5)),
            ("cpu/x/2^4/sort", 45.0, Some(1.8)),
            ("cpu/x/2^4/datafusion", 25.0, None),
        ]);
        let (slower, missing) = compare(&now, &base, 0.10);
        assert!(missing.is_empty());
        assert_eq!(slower.len(), 1, "{slower:?}");
        assert!(slower[0].starts_with("cpu/x/2^4/sort"), "{slower:?}");
        assert!(slower[0].ends_with("(+20.0% per yardstick)"), "{slower:?}");
    }

    #[test]
    fn machines_have_file_names() {
        assert_eq!(machine(None, 2).split('-').next(), Some("cpu"));
        assert!(machine(None, 16).ends_with("-16t"));
        assert!(!machine(None, 2).contains(' '));
    }
}
