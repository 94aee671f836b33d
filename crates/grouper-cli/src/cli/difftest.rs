//! `grouper difftest`: an open-ended differential batch against DuckDB.

use std::path::PathBuf;
use std::time::Duration;

use crate::difftest::{self, duckdb::Oracle, BatchOptions, Runner};
use anyhow::{bail, Result};
use clap::Args;

/// Options of `grouper difftest`.
#[derive(Args, Debug)]
pub struct DifftestArgs {
    /// Seed of the batch (case i uses a seed derived from it and i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop after this many cases (default: no limit, stop on --minutes).
    #[arg(long)]
    pub cases: Option<u64>,
    /// Stop after this many minutes.
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Python with the duckdb package (default: $GROUPER_PYTHON, else .venv/bin/python).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Shrink mismatches and save them as regression files in this directory.
    #[arg(long, default_value = "crates/grouper-cli/tests/it/regressions")]
    pub save: PathBuf,
    /// Run only on the CPU even when a GPU is present.
    #[arg(long)]
    pub no_gpu: bool,
    /// Worker threads of each engine.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Write the summary as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(a: DifftestArgs) -> Result<()> {
    let root = std::env::current_dir()?;
    let python = a.python.unwrap_or_else(|| difftest::duckdb::python(&root));
    let mut oracle = Oracle::start(&python, &root)?;
    let gpu = !a.no_gpu && grouper_gpu::Gpu::get().is_ok();
    let targets = difftest::targets(gpu, a.threads)?;
    let runner = Runner::new()?;
    let opts = BatchOptions {
        seed: a.seed,
        cases: a.cases,
        time: Some(Duration::from_secs_f64(a.minutes.max(0.0) * 60.0)),
        save: Some(a.save.clone()),
    };
    eprintln!(
        "difftest: seed {}, DuckDB {}, targets: {}",
        a.seed,
        oracle.version,
        targets
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let bar = grouper_shell::progress::spinner("differential cases");
    let s = difftest::run_batch(&opts, &targets, &runner, &mut oracle, |s| {
        bar.set_message(format!(
            "{} cases, {} runs, {} mismatches",
            s.cases,
            s.cpu_runs + s.gpu_runs,
            s.mismatches.len()
        ));
    })?;
    bar.finish_and_clear();
    println!(
        "difftest: {} cases, {} runs ({} CPU, {} GPU), {} agreed, {} strict overflow errors, {} skipped, {} mismatches (and {} where DataFusion's own aggregation differed)",
        s.cases,
        s.cpu_runs + s.gpu_runs,
        s.cpu_runs,
        s.gpu_runs,
        s.agreed,
        s.stricter_overflow,
        s.skipped.values().sum::<u64>(),
        s.mismatches.len(),
        s.datafusion_differs
    );
    for (why, n) in &s.shared_with_datafusion {
        println!("  as DataFusion's own aggregation {n}x: {why}");
    }
    for (why, n) in &s.skipped {
        println!("  skipped {n}x {why}");
    }
    for m in &s.mismatches {
        println!(
            "  MISMATCH seed {:#x} on {}: {} | {} rows | {}{}",
            m.seed,
            m.target,
            m.message,
            m.rows,
            m.sql,
            m.saved
                .as_ref()
                .map(|p| format!(" | saved {}", p.display()))
                .unwrap_or_default()
        );
    }
    if let Some(path) = &a.json {
        let v = serde_json::json!({
            "seed": a.seed,
            "duckdb": s.duckdb,
            "gpu": gpu,
            "device": grouper_gpu::Gpu::get().map(|g| g.info.name.clone()).unwrap_or_else(|_| "cpu only".into()),
            "commit": std::env::var("GROUPER_COMMIT").unwrap_or_default(),
            "cases": s.cases,
            "cpu_runs": s.cpu_runs,
            "gpu_runs": s.gpu_runs,
            "agreed": s.agreed,
            "stricter_overflow": s.stricter_overflow,
            "datafusion_differs": s.datafusion_differs,
            "shared_with_datafusion": s.shared_with_datafusion,
            "skipped": s.skipped,
            "mismatches": s.mismatches.iter().map(|m| serde_json::json!({
                "seed": m.seed, "target": m.target, "message": m.message, "sql": m.sql,
                "rows": m.rows, "saved": m.saved,
            })).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&v)?)?;
    }
    if !s.mismatches.is_empty() {
        bail!("difftest found {} mismatches", s.mismatches.len());
    }
    Ok(())
}
