//! `grouper bench regret`: the end-to-end regret of `auto` — its time over the best fixed
//! strategy's, minus one — at every sweep point, on the CPU or the GPU, uniform and zipf keys,
//! dense and hashed. Target: ≤ 10% everywhere. JSON to `bench/results/regret-<backend>.json`
//! after every point, and SVG plots of the performance regions (Karnagel Fig. 5) with `auto`'s
//! choices marked.
// Benchmark harness, not a query path: it indexes serde_json values it built itself.
#![allow(clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::synthetic::Dist;
use anyhow::Result;
use clap::{Args, ValueEnum};
use grouper_core::profile::KeyKind;
use serde_json::{json, Value};

use crate::bench::common::{git_commit, write_json};
use crate::bench::strategy_sweep::{cpu_point, gpu_point, Measured, PointSpec};
use grouper::profile_store;

/// Where a sweep runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SweepDevice {
    /// grouper's CPU strategies.
    Cpu,
    /// grouper's GPU strategies (resident input, kernel time).
    Gpu,
}

impl SweepDevice {
    /// Name in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            SweepDevice::Cpu => "cpu",
            SweepDevice::Gpu => "gpu",
        }
    }

    /// Default rows (log2): the GPU needs many to be measurable, the CPU few to be quick.
    pub fn rows_log2(self) -> u32 {
        match self {
            SweepDevice::Cpu => 22,
            SweepDevice::Gpu => 26,
        }
    }

    /// The key under which this device's profile is stored: GPU name and driver, or CPU model
    /// and `threads`.
    pub fn profile_key(self, threads: usize) -> Result<String> {
        Ok(match self {
            SweepDevice::Gpu => profile_store::gpu_key(&grouper::device_facts::open()?.info),
            SweepDevice::Cpu => profile_store::cpu_key(threads),
        })
    }
}

/// How large a sweep is: what `grouper calibrate` and `bench regret` share.
#[derive(Args, Debug)]
pub struct SweepSize {
    /// log2 of the rows per point (default: 22 on the CPU, 26 on the GPU).
    #[arg(long)]
    rows_log2: Option<u32>,
    /// log2 of the largest group count (default: the rows' log2).
    #[arg(long)]
    max_groups_log2: Option<u32>,
    /// Timed runs per strategy and point (GPU: their median counts; CPU: the fastest).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// CPU worker threads (default: all cores); CPU profiles are keyed by it.
    #[arg(long)]
    threads: Option<usize>,
}

impl SweepSize {
    /// CPU worker threads.
    pub fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// (log2 rows, log2 of the largest group count) on `device`.
    pub fn extent(&self, device: SweepDevice) -> (u32, u32) {
        let rows_log2 = self.rows_log2.unwrap_or(device.rows_log2());
        (rows_log2, self.max_groups_log2.unwrap_or(rows_log2))
    }
}

#[derive(Args, Debug)]
pub struct RegretArgs {
    /// Which strategies: the CPU's or the GPU's.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: SweepDevice,
    #[command(flatten)]
    size: SweepSize,
    /// log2 of the smallest group count (the sweep steps by 2^2).
    #[arg(long, default_value_t = 0)]
    min_groups_log2: u32,
    /// Score `auto` planned from the rules alone, ignoring a stored device profile.
    #[arg(long)]
    no_profile: bool,
    /// Where to write the JSON result (default: bench/results/regret-<backend>.json).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Folder of the SVG plots.
    #[arg(long, default_value = "bench/results/plots")]
    plots: PathBuf,
    /// Key distributions (comma-separated: uniform, zipf[:S], heavy_hitter[:F], sequential,
    /// random, exponential, weibull[:A], normal; default uniform and zipf 1.1, the ones
    /// `calibrate` measures).
    #[arg(long, value_delimiter = ',', num_args = 1.., default_value = "uniform,zipf1.1")]
    dists: Vec<Dist>,
}

/// The distributions `calibrate` measures and `bench regret` scores by default.
pub const DISTS: [Dist; 2] = [Dist::Uniform, Dist::Zipf(1.1)];

pub async fn regret(a: RegretArgs) -> Result<()> {
    let threads = a.size.threads();
    let (rows_log2, max) = a.size.extent(a.backend);
    let device = a.backend.profile_key(threads)?;
    let profile = (!a.no_profile)
        .then(|| profile_store::load(&device))
        .flatten();
    println!(
        "{device}: {}",
        if profile.is_some() {
            "auto plans with the stored device profile (rules: without it)"
        } else {
            "no device profile: auto plans from the rules"
        }
    );
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| format!("bench/results/regret-{}.json", a.backend.name()).into());
    println!(
        "{:<9} {:<7} {:>6} {:>15} {:>10} {:>15} {:>10} {:>8}",
        "dist", "keys", "groups", "auto", "auto ms", "best", "best ms", "regret"
    );
    let mut points: Vec<Value> = Vec::new();
    for &dist in &a.dists {
        for kind in [KeyKind::Dense, KeyKind::Hashed] {
            for g in (a.min_groups_log2..=max).step_by(2) {
                let p = PointSpec {
                    dist,
                    kind,
                    groups_log2: g,
                    rows: 1 << rows_log2,
                };
                let m = match a.backend {
                    SweepDevice::Gpu => gpu_point(&p, a.size.reps, profile.clone())?,
                    SweepDevice::Cpu => cpu_point(&p, a.size.reps, threads, a.no_profile).await?,
                };
                print_row(&p, &m);
                points.push(point_json(&p, &m));
                write_json(&out, &result(&a, &device, rows_log2, threads, &points))?;
            }
        }
    }
    write_json(&out, &result(&a, &device, rows_log2, threads, &points))?;
    for &dist in &a.dists {
        for kind in [KeyKind::Dense, KeyKind::Hashed] {
            plot(&a, &points, dist, kind)?;
        }
    }
    println!("wrote {} and plots in {}", out.display(), a.plots.display());
    Ok(())
}

fn print_row(p: &PointSpec, m: &Measured) {
    let auto = m.ms.get("auto").and_then(Value::as_f64).unwrap_or(f64::NAN);
    let (best, best_ms) = m.best().unwrap_or(("-".into(), f64::NAN));
    println!(
        "{:<9} {:<7} {:>6} {:>15} {:>10.3} {:>15} {:>10.3} {:>7.1}%",
        p.dist.name(),
        p.kind.name(),
        format!("2^{}", p.groups_log2),
        m.chosen,
        auto,
        best,
        best_ms,
        100.0 * m.regret().unwrap_or(f64::NAN)
    );
}

fn point_json(p: &PointSpec, m: &Measured) -> Value {
    let best = m.best();
    json!({
        "dist": p.dist.name(), "keys": p.kind.name(), "groups_log2": p.groups_log2,
        "distinct": m.distinct, "auto_strategy": m.chosen, "ms": m.ms,
        "best": best.as_ref().map(|b| b.0.clone()), "best_ms": best.map(|b| b.1),
        "regret": m.regret(),
        "runs": m.runs, "paired": m.paired,
    })
}

fn result(a: &RegretArgs, device: &str, rows_log2: u32, threads: usize, points: &[Value]) -> Value {
    let regrets: Vec<f64> = points.iter().filter_map(|p| p["regret"].as_f64()).collect();
    let worst = regrets.iter().copied().fold(f64::NAN, f64::max);
    let within = regrets.iter().filter(|&&r| r <= 0.10).count();
    json!({
        "benchmark": format!("regret-{}", a.backend.name()),
        "device": device,
        "threads": threads,
        "commit": git_commit(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "query": "SELECT k, SUM(v), COUNT(*) FROM t GROUP BY k",
        "rows": 1u64 << rows_log2,
        "reps": a.size.reps,
        "profile_used": !a.no_profile,
        "summary": {
            "points": regrets.len(), "within_10pct": within, "worst_regret": worst,
            "target": "auto within 10% of the best fixed strategy at every point",
        },
        "points": points,
    })
}

/// One plot per distribution and key kind: every strategy's line, `auto` marked.
fn plot(a: &RegretArgs, points: &[Value], dist: Dist, kind: KeyKind) -> Result<()> {
    let mut series: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    let mut auto = Vec::new();
    for p in points
        .iter()
        .filter(|p| p["dist"] == dist.name() && p["keys"] == kind.name())
    {
        let g = p["groups_log2"].as_u64().unwrap_or(0) as u32;
        for (name, t) in p["ms"].as_object().into_iter().flatten() {
            let Some(t) = t.as_f64() else { continue };
            match name.as_str() {
                "auto" => auto.push((g, t)),
                "rules" => {}
                _ => series.entry(name.clone()).or_default().push((g, t)),
            }
        }
    }
    if auto.is_empty() {
        return Ok(());
    }
    let name = format!(
        "regret-{}-{}-{}.svg",
        a.backend.name(),
        dist.name(),
        kind.name()
    );
    crate::bench::plots::regions(
        &a.plots.join(name),
        &format!(
            "{} strategies, {} {} keys: ms per strategy, auto circled",
            a.backend.name().to_uppercase(),
            dist.name(),
            kind.name()
        ),
        &series,
        &auto,
    )
}
