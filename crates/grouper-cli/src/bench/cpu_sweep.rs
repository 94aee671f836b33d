//! `grouper bench cpu-sweep`: grouper (auto and every strategy), DataFusion's aggregation and
//! DuckDB on the same data and threads, SUM+COUNT by key from one group to 2^24, over the key
//! distributions asked for (uniform and zipf by default), and TPC-H Q1.

use std::path::PathBuf;

use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use datafusion::catalog::MemTable;
use serde_json::{json, Value};

use crate::bench::common::{
    duckdb, engines, git_commit, q1_lineitem, time_interleaved, time_sql, what_ran, write_json,
    SWEEP_SQL,
};
use crate::synthetic::{self, Dist, KeyType, Spec};

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// log2 of the rows per point.
    #[arg(long, default_value_t = 25)]
    rows_log2: u32,
    /// log2 of the smallest group count (steps of 2^2 from there).
    #[arg(long, default_value_t = 0)]
    min_groups_log2: u32,
    /// log2 of the largest group count.
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
    /// Key distributions (comma-separated: uniform, zipf[:S], heavy_hitter[:F], sequential,
    /// random, exponential, weibull[:A], normal).
    #[arg(long, value_delimiter = ',', num_args = 1.., default_value = "uniform,zipf1.1")]
    dists: Vec<Dist>,
    /// Also time every strategy, not just auto.
    #[arg(long)]
    strategies: bool,
    /// Where to write the JSON result.
    #[arg(long, default_value = "bench/results/cpu-sweep.json")]
    out: PathBuf,
}

pub(crate) async fn cpu_sweep(a: SweepArgs) -> Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let rows = 1usize << a.rows_log2;
    let engines = engines(threads, a.strategies);
    let mut points = Vec::new();
    let mut duck_version = String::from("not run");
    println!(
        "{:<12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}  best strategy; auto ran; cpu ran",
        "dist",
        "groups",
        "auto ms",
        "cpu ms",
        "DF ms",
        "DuckDB ms",
        "vs DF",
        "vs DuckDB",
        "cpu/DF",
        "cpu/DuckDB"
    );
    for &dist in &a.dists {
        for g_log2 in (a.min_groups_log2..=a.max_groups_log2).step_by(2) {
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
            let mut contexts = Vec::new();
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
                contexts.push((name.clone(), ctx));
            }
            let ctxs: Vec<_> = contexts.iter().map(|(_, c)| c).collect();
            let times = time_interleaved(&ctxs, SWEEP_SQL, a.reps).await;
            // What `auto` and `cpu` ran: a CPU strategy, the GPU, or DataFusion's plan, and why.
            let ran = |engine: &str| contexts.iter().find(|(n, _)| n == engine);
            let auto_plan = match ran("auto") {
                Some((_, ctx)) => what_ran(ctx, SWEEP_SQL).await?,
                None => String::new(),
            };
            let cpu_plan = match ran("cpu") {
                Some((_, ctx)) => what_ran(ctx, SWEEP_SQL).await?,
                None => String::new(),
            };
            for ((name, _), t) in contexts.iter().zip(times) {
                match t {
                    Ok(t) => ms.insert(name.clone(), json!(t)),
                    Err(e) => ms.insert(name.clone(), json!(format!("error: {e}"))),
                };
            }
            if let Some((v, t)) = duckdb(&a.python, &batches, "t", threads, a.reps, &[SWEEP_SQL])? {
                duck_version = v;
                ms.insert("duckdb".into(), json!(t.first()));
            }
            let get = |k: &str| ms.get(k).and_then(Value::as_f64);
            let best = engines
                .iter()
                .filter(|(n, _)| !matches!(n.as_str(), "auto" | "cpu" | "datafusion"))
                .filter_map(|(n, _)| get(n).map(|t| (n.clone(), t)))
                .min_by(|x, y| x.1.total_cmp(&y.1))
                .map_or_else(|| "-".to_string(), |(n, t)| format!("{n} ({t:.1} ms)"));
            let (auto, cpu) = (get("auto"), get("cpu"));
            let (df, duck) = (get("datafusion"), get("duckdb"));
            let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => format!("{:.2}x", x / y),
                _ => "-".into(),
            };
            let f = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.1}"));
            let named = |plan: &str| plan.split(':').next().unwrap_or_default().to_string();
            println!(
                "{:<12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}  {best}; {}; {}",
                dist.name(),
                groups,
                f(auto),
                f(cpu),
                f(df),
                f(duck),
                ratio(df, auto),
                ratio(duck, auto),
                ratio(df, cpu),
                ratio(duck, cpu),
                named(&auto_plan),
                named(&cpu_plan)
            );
            points.push(json!({ "dist": dist.name(), "groups": groups, "rows": rows, "ms": ms, "auto_plan": auto_plan, "cpu_plan": cpu_plan }));
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
            ms.insert("duckdb".into(), json!(t.first()));
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
