//! The sort-based atomics paper's microbenchmark (§2.2, Fig. 3) on this machine's GPU
//! (`grouper_gpu::atomics`): additions a second into device and shared memory, atomic against
//! plain, over how many counters they spread across, 2^27 additions (the paper's input size;
//! 2^24 with `--quick`).

// Benchmark harness, not a query path: its indexing is into serde_json values (a missing key
// reads as Null, never panics).
#![allow(clippy::indexing_slicing)]

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::{json, Value};

use super::{gpu_here, meta, stored, write_report, Finding, SeedsArgs};
use crate::bench::common::write_json;
use crate::bench::plots;

/// Counters the additions spread over: one address up to more than the L2 holds.
const TARGETS: [u32; 7] = [1, 32, 1024, 8192, 32768, 1 << 20, 1 << 24];

/// Measures (unless `--report-only`) and writes JSON, a plot and the report.
pub fn run(a: &SeedsArgs) -> Result<()> {
    let json_path = a.out_dir.join("sort-atomics-micro.json");
    if a.report_only {
        let (meta, points) = stored(&json_path)?;
        return report(a, &meta, &points);
    }
    let Some(gpu) = gpu_here("seeds sort-atomics atomics") else {
        return Ok(());
    };
    let additions: u64 = if a.quick { 1 << 24 } else { 1 << 27 };
    let mut meta = meta(
        "seeds/sort-atomics-micro",
        a.threads(),
        json!(additions),
        &json_path,
    );
    let got = grouper_gpu::atomics::atomics(&gpu, additions, &TARGETS, 256, a.reps)?;
    let points: Vec<Value> = got
        .iter()
        .map(|p| {
            json!({ "memory": p.memory, "op": p.op, "targets": p.targets, "ms": p.ms,
                "adds_per_s": p.adds_per_s, "exact": p.exact })
        })
        .collect();
    for p in &points {
        println!("{p}");
    }
    meta["points"] = json!(points);
    write_json(&json_path, &meta)?;
    report(a, &meta, &points)
}

/// Additions a second of `memory` `op` at `targets` counters.
fn rate(points: &[Value], memory: &str, op: &str, targets: u64) -> Option<f64> {
    points
        .iter()
        .find(|p| p["memory"] == memory && p["op"] == op && p["targets"] == targets)
        .and_then(|p| p["adds_per_s"].as_f64())
}

fn report(a: &SeedsArgs, meta: &Value, points: &[Value]) -> Result<()> {
    let mut series: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for p in points {
        if let (Some(m), Some(o), Some(t), Some(r)) = (
            p["memory"].as_str(),
            p["op"].as_str(),
            p["targets"].as_u64(),
            p["adds_per_s"].as_f64(),
        ) {
            // Milliseconds per 2^30 additions: the plot is of times, lower is faster.
            series
                .entry(format!("{m} {o}"))
                .or_default()
                .push((t.max(1).trailing_zeros(), (1u64 << 30) as f64 / r * 1e3));
        }
    }
    let mut plot_files = Vec::new();
    if !series.is_empty() {
        let file = "sort-atomics-micro.svg".to_string();
        let title = "Sort-based atomics paper, Fig. 3: ms per 2^30 additions".to_string();
        plots::lines(
            &a.out_dir.join(&file),
            &title,
            "log2 counters",
            &series,
            None,
        )?;
        plot_files.push((title, file));
    }
    let ratio = |memory: &str, t: u64| {
        Some(rate(points, memory, "atomic", t)? / rate(points, memory, "plain", t)?)
    };
    let show = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.2}"));
    let (g1, s_many) = (ratio("global", 1), ratio("shared", 32768));
    let (few, many) = (
        rate(points, "global", "atomic", 1),
        rate(points, "global", "atomic", 1 << 20),
    );
    let findings = vec![
        Finding {
            figure: "Fig. 3",
            paper: "an atomic add costs more than a plain one on the same location (the synchronisation)",
            here: format!("global atomic adds at one counter: {} of plain adds' rate", show(g1)),
            holds: g1.map(|r| r < 1.0),
            why: "",
        },
        Finding {
            figure: "Fig. 3",
            paper: "shared-memory (local) atomics close on plain adds with each GPU generation: 2.0-2.6x slower on the commodity GPUs, nearly the same rate on the A100",
            here: format!("shared atomic over shared plain at 32,768 counters: {}", show(s_many)),
            holds: s_many.map(|r| r >= 0.9),
            why: "Above 1, the atomic is the faster: a plain add to shared memory is a load and a store, a shared atomic add one instruction the memory carries out.",
        },
        Finding {
            figure: "Fig. 1, 3",
            paper: "global atomics speed up as the groups grow (less contention)",
            here: format!(
                "global atomic adds: {} a second at one counter, {} at 2^20",
                few.map_or("-".into(), |r| format!("{:.2e}", r)),
                many.map_or("-".into(), |r| format!("{:.2e}", r))
            ),
            holds: few.zip(many).map(|(f, m)| m > f),
            why: "",
        },
    ];
    let path = a.out_dir.join("sort-atomics-micro.md");
    write_report(
        &path,
        "Sort-based aggregation with GPU atomics: the atomics microbenchmark, on this machine's GPU",
        meta,
        &findings,
        &plot_files,
    )?;
    println!("wrote {}", path.display());
    Ok(())
}
