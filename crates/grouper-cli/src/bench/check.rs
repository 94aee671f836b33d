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
//! Figures are milliseconds (lower is better): kernel-time medians on the GPU, the fastest of
//! interleaved runs on the CPU (`strategy_sweep::cpu_point`), medians for Q1.
// Benchmark harness, not a query path: it indexes serde_json values (a missing key reads as
// Null) and vectors it built itself.
#![allow(clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::{ArrayRef, Float32Array};
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
    /// Write the figures as the new baseline instead of comparing.
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
        true => None,
        false => Some(read_figures(&baseline_path).with_context(|| {
            format!(
                "no baseline for this machine at {} (record one with --record)",
                baseline_path.display()
            )
        })?),
    };
    println!(
        "machine {machine}: {}, {threads} threads{}",
        cpu_model(),
        gpu.as_ref()
            .map_or(String::new(), |g| format!(", {}", g.info.name))
    );
    let mut figures = Map::new();
    let mut report = |name: String, ms: f64, note: String| {
        let base = baseline
            .as_ref()
            .and_then(|b| b.get(&name))
            .and_then(|f| f["ms"].as_f64());
        let vs = match base {
            Some(b) => format!("{:>+7.1}% vs {b:.3}", 100.0 * (ms / b - 1.0)),
            None => "    (no baseline)".into(),
        };
        println!("{name:<40} {ms:>10.3} ms {vs} {note}");
        figures.insert(name, json!({ "ms": ms, "note": note }));
    };
    if gpu.is_some() && a.wants("gpu") {
        gpu_figures(&a, &mut report)?;
    }
    if a.wants("cpu") {
        cpu_figures(&a, threads, &mut report).await?;
    }
    if a.sf > 0.0 && a.wants("q1") {
        q1_figures(&a, threads, gpu.is_some(), &mut report).await?;
    }
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
        write_json(&baseline_path, &result)?;
        println!("baseline recorded: {}", baseline_path.display());
        return Ok(());
    }
    let base = baseline.unwrap_or_default();
    let (slower, missing) = compare(&figures, &base, a.tolerance);
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

/// The figures of a baseline file.
fn read_figures(path: &Path) -> Result<Map<String, Value>> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    v["figures"]
        .as_object()
        .cloned()
        .context("a baseline has an object \"figures\"")
}

/// Figures more than `tolerance` slower than their baseline (as lines to print), and the names
/// of figures the baseline does not have.
fn compare(
    now: &Map<String, Value>,
    base: &Map<String, Value>,
    tolerance: f64,
) -> (Vec<String>, Vec<String>) {
    let mut slower = Vec::new();
    let mut missing = Vec::new();
    for (name, f) in now {
        let (Some(ms), Some(b)) = (
            f["ms"].as_f64(),
            base.get(name).and_then(|b| b["ms"].as_f64()),
        ) else {
            missing.push(name.clone());
            continue;
        };
        if ms > b * (1.0 + tolerance) {
            slower.push(format!(
                "{name}: {ms:.3} ms, baseline {b:.3} ms ({:+.1}%)",
                100.0 * (ms / b - 1.0)
            ));
        }
    }
    (slower, missing)
}

/// GPU: every strategy and `auto` at each point, kernel time on resident data.
fn gpu_figures(a: &CheckArgs, report: &mut impl FnMut(String, f64, String)) -> Result<()> {
    let rows = 1usize << a.gpu_rows_log2;
    let (r, v) = draws(rows);
    let values: ArrayRef = Arc::new(Float32Array::from(v));
    for &g in &GROUPS_LOG2 {
        let (dense, distinct) = dense_keys(&r, 1u64 << g);
        for scattered in [false, true] {
            let (batch, kind) = sweep_batch(&dense, scattered, &values)?;
            let opts = GpuOptions {
                resident: true,
                ..Default::default()
            };
            let (chosen, ms) = time_strategies(batch, distinct, &opts, a.reps, |_| true)?;
            for (name, t) in &ms {
                let t = t.as_f64().unwrap_or(f64::NAN);
                let note = format!(
                    "{:.1} Grows/s{}",
                    rows as f64 / (t * 1e-3) / 1e9,
                    if name == "auto" {
                        format!(" ({chosen})")
                    } else {
                        String::new()
                    }
                );
                report(format!("gpu/{kind}/2^{g}/{name}"), t, note);
            }
        }
    }
    Ok(())
}

/// CPU: `auto` (rules only) and every CPU strategy at each point, through DataFusion.
async fn cpu_figures(
    a: &CheckArgs,
    threads: usize,
    report: &mut impl FnMut(String, f64, String),
) -> Result<()> {
    for &g in &GROUPS_LOG2 {
        for kind in [KeyKind::Dense, KeyKind::Hashed] {
            let p = PointSpec {
                dist: Dist::Uniform,
                kind,
                groups_log2: g,
                rows: 1 << a.cpu_rows_log2,
            };
            let m = cpu_point(&p, a.reps, threads, true).await?;
            let kind = match kind {
                KeyKind::Dense => "dense_i64",
                KeyKind::Hashed => "scattered_i64",
            };
            for (name, t) in &m.ms {
                let Some(t) = t.as_f64() else { continue };
                let note = match name.as_str() {
                    "auto" => format!("({})", m.chosen),
                    _ => String::new(),
                };
                report(format!("cpu/{kind}/2^{g}/{name}"), t, note);
            }
        }
    }
    Ok(())
}

/// TPC-H Q1 in memory and from Parquet files (written once under `--data`), on grouper's CPU
/// backend, DataFusion's own aggregation and, with a GPU, the GPU backend.
async fn q1_figures(
    a: &CheckArgs,
    threads: usize,
    gpu: bool,
    report: &mut impl FnMut(String, f64, String),
) -> Result<()> {
    let t = Instant::now();
    let (parts, schema) = q1_lineitem(a.sf, threads)?;
    let sf = format!("sf{}", a.sf);
    let dir = a.data.join(format!("lineitem-q1-{sf}-{threads}"));
    if !dir.join("part-0.parquet").exists() {
        write_parquet(&parts, &dir)?;
    }
    println!(
        "Q1 data at SF {} ready in {:.1} s ({})",
        a.sf,
        t.elapsed().as_secs_f64(),
        dir.display()
    );
    let mut backends = vec![("cpu", Backend::Cpu), ("datafusion", Backend::DataFusion)];
    if gpu {
        backends.push(("gpu", Backend::Gpu));
    }
    for (name, backend) in backends {
        let config = GrouperConfig {
            backend,
            threads: Some(threads),
            no_profile: true,
            ..Default::default()
        };
        let memory = grouper::session_context(&config)?;
        memory.register_table(
            "lineitem",
            Arc::new(MemTable::try_new(Arc::clone(&schema), parts.clone())?),
        )?;
        let ms = time_sql(&memory, crate::tpch::Q1, a.reps).await?;
        report(format!("q1/{sf}/memory/{name}"), ms, String::new());
        let files = grouper::session_context(&config)?;
        files
            .register_parquet(
                "lineitem",
                dir.to_string_lossy().as_ref(),
                ParquetReadOptions::default(),
            )
            .await?;
        let ms = time_sql(&files, crate::tpch::Q1, a.reps).await?;
        report(format!("q1/{sf}/parquet/{name}"), ms, String::new());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(pairs: &[(&str, f64)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(n, ms)| (n.to_string(), json!({ "ms": ms })))
            .collect()
    }

    /// Only figures beyond the tolerance are slower; figures the baseline lacks are named.
    #[test]
    fn slower_means_beyond_the_tolerance() {
        let base = figures(&[("a", 10.0), ("b", 10.0), ("c", 10.0)]);
        let now = figures(&[("a", 10.9), ("b", 11.1), ("c", 5.0), ("d", 1.0)]);
        let (slower, missing) = compare(&now, &base, 0.10);
        assert_eq!(slower.len(), 1, "{slower:?}");
        assert!(slower[0].starts_with("b: 11.100 ms, baseline 10.000 ms (+11.0%)"));
        assert_eq!(missing, vec!["d".to_string()]);
    }

    #[test]
    fn machines_have_file_names() {
        assert_eq!(machine(None, 2).split('-').next(), Some("cpu"));
        assert!(machine(None, 16).ends_with("-16t"));
        assert!(!machine(None, 2).contains(' '));
    }
}
