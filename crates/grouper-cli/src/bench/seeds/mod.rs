//! `grouper bench seeds <paper>`: a paper's key experiments rerun on this machine, as JSON, SVG
//! plots and a markdown report that puts each finding of the paper beside what grouper measured
//! here, and says whether it holds (docs/ARCHITECTURE.md, "Reproducing the papers").
//!
//! Each experiment is one function of its paper's module, writes its JSON after every point
//! (a run cut short keeps what it measured) and skips points already in the JSON of the same
//! commit and machine (`--resume`), so a paper's run spreads over device calls.
//!
//! Built: [`luan`] on the CPU (hashing schemes × load factor × distribution, hash functions,
//! data size, shared against independent tables), [`luan_gpu`] (the GPU's schemes, shared and
//! independent tables) and [`luan_coprocess`] (operator-level co-processing, with a GPU);
//! [`sort_atomics`] and [`sort_atomics_gpu`] (the five distributions across the CPU's and the
//! GPU's counterparts of the paper's variants); [`karnagel`] on the GPU (regions over the group count for every
//! placement, hash functions, fill factors, sort against hash, his rule-based optimizer).
//! [`rosenfeld`] through `bench tuner` (strategies and shapes by group count, the penalty
//! across GPUs, the tuner with s = 0 and 0.06); [`tome`] (TPC-H Q1's placements, filter
//! precomputation and co-processing; threads × blocks per placement); [`sort_atomics_micro`]
//! (the sort-based paper's atomics microbenchmark).
// Benchmark harness, not a query path: its indexing is into serde_json values (a missing key
// reads as Null, never panics) and points it built itself.
#![allow(clippy::indexing_slicing)]

pub mod gpu_time;
pub mod karnagel;
pub mod luan;
pub mod luan_coprocess;
pub mod luan_gpu;
pub mod rosenfeld;
pub mod sort_atomics;
pub mod sort_atomics_gpu;
pub mod sort_atomics_micro;
pub mod tome;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use crate::bench::common::{device, earlier_points_from, git_commit};

#[derive(Args, Debug)]
pub struct SeedsArgs {
    /// The paper whose experiments to run.
    #[arg(value_enum)]
    pub paper: Paper,
    /// A short run (2^20 rows, fewer points): minutes on a laptop, for checking the harness.
    #[arg(long)]
    pub quick: bool,
    /// Threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Timed runs per point (the median is reported), after one warm-up.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Folder of the JSON, the plots and the report.
    #[arg(long, default_value = "bench/results/seeds")]
    pub out_dir: PathBuf,
    /// Keep the points of an earlier run of the same commit and machine in the JSON and
    /// measure only the others.
    #[arg(long)]
    pub resume: bool,
    /// With --resume, also keep an earlier run's points measured at these commits on this
    /// machine (comma-separated): for a change that leaves what the paper measures as it was —
    /// its kernels' generator untouched, or their CUBINs byte-identical
    /// (`scripts/cubin-diff.sh`). Each kept point names its commit, and the report says which
    /// commits' points it kept (rosenfeld: down to a begun point's strategies).
    #[arg(long, value_delimiter = ',', requires = "resume")]
    pub resume_from: Vec<String>,
    /// Write the reports and plots again from the JSON already in --out-dir, measuring nothing
    /// (no GPU needed): after the analysis changed, or away from the machine that measured.
    /// Pass the measuring run's --quick.
    #[arg(long)]
    pub report_only: bool,
    /// Only these parts of the paper's experiments (luan: cpu, gpu, coprocess; sort-atomics:
    /// cpu, gpu, atomics; karnagel: regions, hash, fill, sort, optimizer; tome: table2, table3;
    /// rosenfeld: the key kinds scattered, dense, and his, his three strategies only; default
    /// all).
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub parts: Vec<String>,
}

/// The papers `bench seeds` reproduces so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Paper {
    /// Luan et al., "Group-by and aggregation on CPU-GPU processors": hashing schemes, load
    /// factors, hash functions, distributions, data sizes, shared and independent tables.
    Luan,
    /// Karnagel et al., "Optimizing GPU-accelerated group-by and aggregation": performance
    /// regions over the group count for every placement, hash functions, fill factors, sort
    /// against hash, his rule-based optimizer (GPU).
    Karnagel,
    /// Rosenfeld et al., "Performance analysis and automatic tuning of hash aggregation on
    /// GPUs": strategies and launch shapes by group count, the penalty of one GPU's shapes on
    /// another, the tuner's four metrics with s = 0 and s = 0.06 (GPU).
    Rosenfeld,
    /// Tomé et al., "Optimizing group-by and aggregation using GPU-CPU co-processing": TPC-H
    /// Q1 over placements × filter precomputation × co-processing (Table 2), and threads ×
    /// blocks per placement (Table 3) (GPU).
    Tome,
    /// "Sort-based aggregation with GPU atomics": the five distributions across the variants,
    /// on the CPU and the GPU.
    #[value(name = "sort-atomics")]
    SortAtomics,
}

impl SeedsArgs {
    /// Whether the part `name` runs.
    pub fn wants(&self, name: &str) -> bool {
        self.parts.is_empty() || self.parts.iter().any(|p| p == name)
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The points to keep from the earlier run in `path` (none without `--resume`), by
    /// [`earlier_points_from`]; notes in `meta` the commits whose points were kept.
    pub fn earlier(&self, path: &Path, meta: &mut Value) -> Vec<Value> {
        if !self.resume {
            return Vec::new();
        }
        let (points, kept) = earlier_points_from(path, meta, &self.resume_from);
        if !kept.is_empty() {
            meta["resumed_from"] = json!(kept);
        }
        points
    }

    /// The pool of [`SeedsArgs::threads`] workers the engine's runs are timed on.
    pub fn pool(&self) -> Result<rayon::ThreadPool> {
        Ok(rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads())
            .build()?)
    }
}

pub async fn seeds(a: SeedsArgs) -> Result<()> {
    match a.paper {
        Paper::Luan => {
            if a.wants("cpu") {
                luan::run(&a)?;
            }
            if a.wants("gpu") {
                luan_gpu::run(&a)?;
            }
            if a.wants("coprocess") {
                luan_coprocess::run(&a).await?;
            }
            Ok(())
        }
        Paper::SortAtomics => {
            if a.wants("cpu") {
                sort_atomics::run(&a)?;
            }
            if a.wants("gpu") {
                sort_atomics_gpu::run(&a)?;
            }
            if a.wants("atomics") {
                sort_atomics_micro::run(&a)?;
            }
            Ok(())
        }
        Paper::Karnagel => karnagel::run(&a),
        Paper::Rosenfeld => rosenfeld::run(&a).await,
        Paper::Tome => tome::run(&a).await,
    }
}

/// This machine's GPU, or `None` after saying that `what` measures nothing without one.
pub fn gpu_here(what: &str) -> Option<std::sync::Arc<grouper_gpu::Gpu>> {
    match grouper_gpu::Gpu::get() {
        Ok(g) => Some(g),
        Err(e) => {
            println!("{what}: no GPU here ({e}); nothing measured");
            None
        }
    }
}

/// The head of an experiment's JSON: the benchmark, the machine, commit and command, the
/// threads and rows, and where the JSON is (the report names it).
pub fn meta(benchmark: &str, threads: usize, rows: Value, json_path: &Path) -> Value {
    json!({
        "benchmark": benchmark,
        "device": device(threads),
        "commit": git_commit(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "threads": threads,
        "rows": rows,
        "json": json_path.display().to_string(),
    })
}

/// One of a paper's findings beside what this machine showed.
pub struct Finding {
    /// The figure or table it comes from.
    pub figure: &'static str,
    /// What the paper found.
    pub paper: &'static str,
    /// What grouper measured here, in numbers.
    pub here: String,
    /// Whether the finding holds here (`None`: not measured in this run).
    pub holds: Option<bool>,
    /// Why it may differ here, printed where it does not hold: what differs between the
    /// paper's implementation or machine and grouper's.
    pub why: &'static str,
}

/// The report: a header naming machine, commit and command, then each finding and the plots.
pub fn write_report(
    path: &Path,
    title: &str,
    meta: &Value,
    findings: &[Finding],
    plots: &[(String, String)],
) -> Result<()> {
    let mut md = format!(
        "# {title}\n\nMachine: {}. Commit: {}{}. Command: `{}`. Rows per point: {}. Threads: {}.\n\n\
         Generated by `grouper bench seeds`; the numbers are in `{}`.\n\n## Findings\n\n\
         | figure | the paper | here | holds | where it differs, and why |\n|---|---|---|---|---|\n",
        meta["device"].as_str().unwrap_or("?"),
        meta["commit"].as_str().unwrap_or("?"),
        kept_note(meta),
        meta["command"].as_str().unwrap_or("?"),
        plain(&meta["rows"]),
        plain(&meta["threads"]),
        // The file's name: it lies beside the report wherever the run measured.
        meta["json"]
            .as_str()
            .and_then(|j| Path::new(j).file_name())
            .map_or("?".into(), |f| f.to_string_lossy()),
    );
    for f in findings {
        let holds = match f.holds {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "not measured",
        };
        let why = match (f.holds, f.why) {
            (Some(false), "") => "not analysed yet",
            (Some(false), why) => why,
            _ => "",
        };
        md.push_str(&format!(
            "| {} | {} | {} | {holds} | {why} |\n",
            f.figure, f.paper, f.here
        ));
    }
    md.push_str("\n## Plots\n\n");
    for (caption, file) in plots {
        md.push_str(&format!("### {caption}\n\n![{caption}]({file})\n\n"));
    }
    std::fs::write(path, md)?;
    Ok(())
}

/// For `--report-only`: the JSON an earlier run wrote at `path`, whose head names the machine,
/// commit and command that measured, and its points.
pub fn stored(path: &Path) -> Result<(Value, Vec<Value>)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--report-only: no {} to report from", path.display()))?;
    let mut r: Value = serde_json::from_str(&text)
        .with_context(|| format!("--report-only: {} is not JSON", path.display()))?;
    r["json"] = json!(path.display().to_string()); // where it is now, not where it was written
    let points = r["points"].as_array().cloned().unwrap_or_default();
    Ok((r, points))
}

/// A JSON value as the report shows it: a string without its quotes.
fn plain(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// The header's note of points an earlier commit measured (`--resume-from`), or nothing.
fn kept_note(meta: &Value) -> String {
    let kept: Vec<&str> = meta["resumed_from"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if kept.is_empty() {
        String::new()
    } else {
        format!(
            " (with the points of {} kept by `--resume-from`: what they measure did not change since; each names its commit in the JSON)",
            kept.join(", ")
        )
    }
}
