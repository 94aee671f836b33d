//! `grouper bench q1`: TPC-H Q1 from host RAM at several scale factors (lineitem generated in
//! memory with tpchgen), every way grouper can run it, and DuckDB on the same host with all
//! cores, in one run; plus the raw streaming rate of a simple `SUM(v) GROUP BY k` against the
//! measured pinned host-to-device bandwidth. Every mode's answer is checked against the CPU's
//! and DuckDB's. JSON (device, commit, command) under `bench/results/`.
// Benchmark harness, not a query path: its indexing is into serde_json values (a missing key
// reads as Null, never panics) and vectors it built itself.
#![allow(clippy::indexing_slicing)]

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::{ArrayRef, Float32Array, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::util::display::array_value_to_string;
use clap::Args;
use datafusion::catalog::MemTable;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use grouper::Split;
use grouper::{Backend, GrouperConfig};
use grouper_gpu::{Gpu, GpuOptions, GpuReport, Prepared};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::bench::common::{
    duckdb_files, git_commit, gpu_report_of, q1_lineitem, run_once, time_sql, write_json,
    write_parquet,
};

#[derive(Args, Debug)]
pub struct Q1Args {
    /// TPC-H scale factors (comma-separated).
    #[arg(long, default_value = "10,100", value_delimiter = ',')]
    sf: Vec<f64>,
    /// Timed runs per mode (the median is reported), after one warm-up.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Python with duckdb (scripts/setup-venv.sh); DuckDB is skipped if it is missing.
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
    /// Largest scale factor DuckDB runs at (its data travels as Parquet files).
    #[arg(long, default_value_t = 100.0)]
    duckdb_max_sf: f64,
    /// log2 of the rows of the streaming-rate query.
    #[arg(long, default_value_t = 28)]
    stream_rows_log2: u32,
    /// Only these modes (comma-separated; default all).
    #[arg(long, value_delimiter = ',')]
    modes: Vec<String>,
    /// Also co-process with these static CPU shares of the chunks (comma-separated fractions),
    /// and report the measured split (`hybrid`) against the best of them.
    #[arg(long, value_delimiter = ',', value_parser = <Split as std::str::FromStr>::from_str)]
    hybrid_splits: Vec<Split>,
    /// Where to write the JSON result.
    #[arg(long, default_value = "bench/results/q1.json")]
    out: PathBuf,
}

/// The ways grouper runs Q1: name, backend and GPU options.
fn modes() -> Vec<(&'static str, Backend, GpuOptions)> {
    let gpu = GpuOptions::default();
    vec![
        ("cpu", Backend::Cpu, gpu.clone()),
        (
            "gpu_stream_raw",
            Backend::Gpu,
            GpuOptions {
                compress: false,
                ..gpu.clone()
            },
        ),
        ("gpu_stream_compressed", Backend::Gpu, gpu.clone()),
        (
            "gpu_cpu_filter",
            Backend::Gpu,
            GpuOptions {
                cpu_filter: true,
                ..gpu.clone()
            },
        ),
        (
            "gpu_zero_copy",
            Backend::Gpu,
            GpuOptions {
                zero_copy: true,
                ..gpu.clone()
            },
        ),
        ("hybrid", Backend::Hybrid, gpu.clone()),
        (
            "gpu_resident",
            Backend::Gpu,
            GpuOptions {
                resident: true,
                ..gpu
            },
        ),
    ]
}

/// The ways grouper runs Q1 over Parquet files (the GPU streams from the scan as it decodes).
fn parquet_modes() -> Vec<(&'static str, Backend, GpuOptions)> {
    let gpu = GpuOptions::default();
    vec![
        ("parquet_cpu", Backend::Cpu, gpu.clone()),
        ("parquet_gpu_stream", Backend::Gpu, gpu.clone()),
        (
            "parquet_gpu_stream_cpu_filter",
            Backend::Gpu,
            GpuOptions {
                cpu_filter: true,
                ..gpu.clone()
            },
        ),
        (
            "parquet_gpu_stream_raw",
            Backend::Gpu,
            GpuOptions {
                compress: false,
                ..gpu
            },
        ),
    ]
}

/// Result rows as strings.
fn rows_of(batches: &[RecordBatch]) -> Result<Vec<Vec<String>>> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .map(|c| array_value_to_string(c, r))
                    .collect::<std::result::Result<_, _>>()?,
            );
        }
    }
    Ok(out)
}

/// A decimal string without trailing fractional zeros.
fn canonical(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Q1 rows compared: flags and count exactly, sums as exact decimals, averages within one unit
/// of the sixth decimal (DataFusion's AVG of DECIMAL(15,2) has scale 6; DuckDB's is DOUBLE).
fn same_q1(ours: &[Vec<String>], theirs: &[Vec<String>]) -> std::result::Result<(), String> {
    if ours.len() != theirs.len() {
        return Err(format!("{} rows vs {}", ours.len(), theirs.len()));
    }
    for (o, t) in ours.iter().zip(theirs) {
        if o.len() != 10 || t.len() != 10 {
            return Err(format!("row widths {} and {}", o.len(), t.len()));
        }
        for c in [0, 1, 2, 3, 4, 5, 9] {
            if canonical(&o[c]) != canonical(&t[c]) {
                return Err(format!("column {c}: {} vs {}", o[c], t[c]));
            }
        }
        for c in 6..9 {
            let (a, b): (f64, f64) = (
                o[c].parse().map_err(|_| format!("'{}'", o[c]))?,
                t[c].parse().map_err(|_| format!("'{}'", t[c]))?,
            );
            if (a - b).abs() > 1e-6 + 1e-12 * b.abs() {
                return Err(format!("column {c}: {a} vs {b}"));
            }
        }
    }
    Ok(())
}

pub(crate) fn context(
    backend: Backend,
    gpu: GpuOptions,
    threads: usize,
    hybrid_split: Split,
) -> Result<SessionContext> {
    Ok(grouper::session_context(&GrouperConfig {
        backend,
        gpu,
        threads: Some(threads),
        hybrid_split,
        ..Default::default()
    })?)
}

/// The measured split (`hybrid`) against the static splits: the best static share, and the
/// dynamic wall time over the best static one (the target: within 10%).
fn split_summary(modes: &serde_json::Map<String, Value>, splits: &[Split]) -> Value {
    let wall = |name: &str| modes.get(name).and_then(|m| m["wall_ms"].as_f64());
    let statics: Vec<(f64, f64)> = splits
        .iter()
        .filter_map(|&s| match s {
            Split::Static(share) => wall(&static_name(share)).map(|ms| (share, ms)),
            Split::Dynamic => None,
        })
        .collect();
    let best = statics.iter().copied().min_by(|x, y| x.1.total_cmp(&y.1));
    match (wall("hybrid"), best) {
        (Some(dynamic), Some((share, ms))) => json!({
            "dynamic_ms": dynamic,
            "dynamic_cpu_share": modes.get("hybrid").and_then(|m| m["split_gpu_fraction"].as_f64()).map(|g| 1.0 - g),
            "static_ms": statics.iter().map(|(s, ms)| json!([s, ms])).collect::<Vec<_>>(),
            "best_static_cpu_share": share, "best_static_ms": ms,
            "dynamic_vs_best_static": dynamic / ms,
        }),
        _ => Value::Null,
    }
}

fn static_name(share: f64) -> String {
    format!("hybrid_static_cpu_{share}")
}

/// `SELECT k, SUM(v), COUNT(*) GROUP BY k` streamed raw and compressed: the pipeline's rate
/// against the pinned host-to-device bandwidth.
fn stream_rate(a: &Q1Args, h2d: f64) -> Result<Value> {
    let rows = 1usize << a.stream_rows_log2;
    let (k, v): (Vec<u32>, Vec<f32>) = (0..rows)
        .into_par_iter()
        .map(|i| {
            let x = grouper_core::hash::murmur3(i as u64);
            ((x % 1024) as u32, ((x >> 20) % 1000) as f32 * 0.25)
        })
        .unzip();
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::UInt32, false),
        Field::new("v", DataType::Float32, false),
    ]));
    let (k, v): (ArrayRef, ArrayRef) = (
        Arc::new(UInt32Array::from(k)),
        Arc::new(Float32Array::from(v)),
    );
    // Batches of 2^20 rows, as an in-memory table would hold them.
    let batches: Vec<RecordBatch> = (0..rows)
        .step_by(1 << 20)
        .map(|o| {
            let n = (1usize << 20).min(rows - o);
            RecordBatch::try_new(Arc::clone(&schema), vec![k.slice(o, n), v.slice(o, n)])
        })
        .collect::<std::result::Result<_, _>>()?;
    let query = crate::bench::gpu_sweep::sweep_query(DataType::UInt32);
    let mut out = serde_json::Map::new();
    for (name, compress, zero_copy) in [
        ("raw", false, false),
        ("compressed", true, false),
        ("zero_copy_raw", false, true),
    ] {
        let opts = GpuOptions {
            compress,
            zero_copy,
            ..Default::default()
        };
        let mut p = Prepared::new(&query, &batches, &opts)?;
        let first = p.run()?;
        anyhow::ensure!(first.num_rows == 1024, "{name}: {} groups", first.num_rows);
        let mut ms = Vec::new();
        for _ in 0..a.reps.max(1) {
            ms.push(p.run_kernels()?.kernel_ms);
        }
        let t = crate::bench::gpu_sweep::median(ms) * 1e-3;
        let r = p.report();
        let sent = rows as f64 * r.sent_bytes_per_row / t;
        let input = rows as f64 * r.raw_bytes_per_row / t;
        println!(
            "stream {name:>13}: {:.1} ms, {:.2} B/row sent, {:.1} GB/s sent = {:.1}% of pinned H2D, input {:.1} GB/s = {:.2}x",
            t * 1e3,
            r.sent_bytes_per_row,
            sent / 1e9,
            100.0 * sent / h2d,
            input / 1e9,
            input / h2d
        );
        out.insert(
            name.into(),
            json!({
                "ms": t * 1e3, "strategy": r.strategy.name(), "chunks": r.chunks,
                "raw_bytes_per_row": r.raw_bytes_per_row, "sent_bytes_per_row": r.sent_bytes_per_row,
                "sent_bytes_per_s": sent, "fraction_of_pinned_h2d": sent / h2d,
                "input_bytes_per_s": input, "input_vs_pinned_h2d": input / h2d,
            }),
        );
    }
    Ok(
        json!({ "rows": rows, "query": "SELECT k, SUM(v), COUNT(*) GROUP BY k (u32 k, 1024 groups; f32 v)", "modes": out }),
    )
}

pub async fn q1(a: Q1Args) -> Result<()> {
    let gpu = Gpu::get().context("grouper bench q1 needs a GPU")?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let h2d = gpu.pinned_h2d_rate()?;
    println!(
        "{}: pinned host-to-device {:.1} GB/s; {threads} host threads",
        gpu.info.name,
        h2d / 1e9
    );
    let stream = stream_rate(&a, h2d)?;
    let mut results = Vec::new();
    for &sf in &a.sf {
        let t = std::time::Instant::now();
        let (parts, schema) = q1_lineitem(sf, threads)?;
        let rows: usize = parts.iter().flatten().map(|b| b.num_rows()).sum();
        println!(
            "TPC-H SF {sf}: {rows} lineitem rows generated in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let mut ms = serde_json::Map::new();
        let mut reference: Option<Vec<Vec<String>>> = None;
        println!(
            "{:>30} {:>10} {:>10} {:>8} {:>8} {:>7}  notes",
            "mode", "wall ms", "gpu ms", "B/row", "sent", "match"
        );
        let wanted = |name: &str| a.modes.is_empty() || a.modes.iter().any(|m| m == name);
        for (name, backend, opts) in modes() {
            if !wanted(name) && name != "cpu" {
                continue;
            }
            let ctx = context(backend, opts, threads, Split::Dynamic)?;
            ctx.register_table(
                "lineitem",
                Arc::new(MemTable::try_new(Arc::clone(&schema), parts.clone())?),
            )?;
            let entry = measure(name, backend, &ctx, a.reps, &mut reference).await?;
            ms.insert(name.into(), entry);
            // Release this mode's cached, pinned input before the next one prepares its own.
            grouper_gpu::cache::clear();
        }
        for &split in &a.hybrid_splits {
            let Split::Static(share) = split else {
                continue; // the measured split is the `hybrid` mode
            };
            let name = static_name(share);
            let ctx = context(Backend::Hybrid, GpuOptions::default(), threads, split)?;
            ctx.register_table(
                "lineitem",
                Arc::new(MemTable::try_new(Arc::clone(&schema), parts.clone())?),
            )?;
            let entry = measure(&name, Backend::Hybrid, &ctx, a.reps, &mut reference).await?;
            ms.insert(name, entry);
            grouper_gpu::cache::clear();
        }
        let split = split_summary(&ms, &a.hybrid_splits);
        if let Some(r) = split["dynamic_vs_best_static"].as_f64() {
            println!(
                "hybrid: measured split {:.1} ms vs best static (CPU share {}) {:.1} ms = {r:.3}x",
                split["dynamic_ms"].as_f64().unwrap_or(f64::NAN),
                split["best_static_cpu_share"],
                split["best_static_ms"].as_f64().unwrap_or(f64::NAN),
            );
        }
        // The same table as Parquet files (one per partition): a query on files, and DuckDB's
        // input.
        let dir = std::env::temp_dir().join(format!("grouper-q1-{}", std::process::id()));
        write_parquet(&parts, &dir)?;
        for (name, backend, opts) in parquet_modes() {
            if !wanted(name) {
                continue;
            }
            let ctx = context(backend, opts, threads, Split::Dynamic)?;
            ctx.register_parquet(
                "lineitem",
                dir.to_string_lossy().as_ref(),
                ParquetReadOptions::default(),
            )
            .await?;
            let entry = measure(name, backend, &ctx, a.reps, &mut reference).await?;
            ms.insert(name.into(), entry);
        }
        // Saved before DuckDB runs (its load of a large scale factor is the slow part).
        results.push(
            json!({ "sf": sf, "rows": rows, "threads": threads, "modes": ms,
            "hybrid_split": split, "duckdb": null }),
        );
        write(&a, &gpu, h2d, &stream, &results)?;
        let mut duck = json!(null);
        if sf <= a.duckdb_max_sf {
            match duckdb_files(
                &a.python,
                &dir,
                "lineitem",
                threads,
                a.reps,
                &[crate::tpch::Q1],
            ) {
                Ok(Some(d)) => {
                    let check = reference
                        .as_ref()
                        .map(|r| same_q1(r, d.rows.first().map_or(&[][..], |v| v.as_slice())));
                    let ok = matches!(check, Some(Ok(())));
                    println!(
                        "{:>30} {:>10.1} {:>10} {:>8} {:>8} {:>7}  {}",
                        format!("duckdb {}", d.version),
                        d.ms.first().copied().unwrap_or(f64::NAN),
                        "-",
                        "-",
                        "-",
                        if ok { "yes" } else { "NO" },
                        match &check {
                            Some(Err(e)) => format!("grouper cpu vs DuckDB: {e}"),
                            _ => String::new(),
                        }
                    );
                    duck = json!({ "version": d.version, "ms": d.ms.first(),
                        "grouper_matches_duckdb": ok,
                        "mismatch": check.and_then(|c| c.err()) });
                }
                Ok(None) => eprintln!("DuckDB skipped: {} not found", a.python.display()),
                Err(e) => eprintln!("DuckDB skipped: {e}"),
            }
        }
        if let Some(last) = results.last_mut() {
            last["duckdb"] = duck;
        }
        write(&a, &gpu, h2d, &stream, &results)?;
        let _ = std::fs::remove_dir_all(&dir);
        drop(parts);
    }
    write(&a, &gpu, h2d, &stream, &results)?;
    println!("wrote {}", a.out.display());
    Ok(())
}

/// Times Q1 on `ctx` (median of `reps` after a warm-up), checks its answer against
/// `reference` (the first mode's, which becomes the reference), prints a table row and
/// returns the mode's JSON entry.
pub(crate) async fn measure(
    name: &str,
    backend: Backend,
    ctx: &SessionContext,
    reps: usize,
    reference: &mut Option<Vec<Vec<String>>>,
) -> Result<Value> {
    let wall = time_sql(ctx, crate::tpch::Q1, reps).await?;
    // One more run gives the answer and the report that goes with it.
    let (batches, group_by) = run_once(ctx, crate::tpch::Q1).await?;
    let answer = rows_of(&batches)?;
    let report = group_by.as_ref().and_then(gpu_report_of);
    let check = match reference {
        None => {
            *reference = Some(answer.clone());
            Ok(())
        }
        Some(r) => same_q1(&answer, r),
    };
    let mut entry = json!({ "wall_ms": wall, "matches_cpu": check.is_ok() });
    let mut notes = String::new();
    if let Err(e) = &check {
        entry["mismatch"] = json!(e);
        notes = format!("MISMATCH vs cpu: {e}");
    }
    if let Some(r) = &report {
        entry["gpu"] = json!({
            "strategy": r.strategy.name(), "transfer": r.transfer,
            "kernel_ms": r.kernel_ms, "gpu_total_ms": r.total_ms, "upload_ms": r.upload_ms,
            "prepare_ms": r.prepare_ms, "cached": r.cached, "chunks": r.chunks,
            "batch_rows": r.batch_rows, "raw_bytes_per_row": r.raw_bytes_per_row,
            "sent_bytes_per_row": r.sent_bytes_per_row, "encodings": r.encodings,
            "rows_gpu": r.rows_run, "rows": r.rows, "cpu_filter": r.cpu_filter,
            "from_scan": r.from_scan, "reason": r.reason,
        });
        if backend == Backend::Hybrid {
            let split = r.rows_run as f64 / r.rows.max(1) as f64;
            entry["split_gpu_fraction"] = json!(split);
            notes += &format!(
                "split GPU {:.1}% / CPU {:.1}%",
                100.0 * split,
                100.0 * (1.0 - split)
            );
        }
        if r.from_scan {
            notes += "streamed from the scan";
        }
    }
    let cell = |f: &dyn Fn(&GpuReport) -> String| report.as_ref().map_or("-".into(), f);
    println!(
        "{name:>30} {wall:>10.1} {:>10} {:>8} {:>8} {:>7}  {notes}",
        cell(&|r| format!("{:.1}", r.kernel_ms)),
        cell(&|r| format!("{:.2}", r.raw_bytes_per_row)),
        cell(&|r| format!("{:.2}", r.sent_bytes_per_row)),
        if check.is_ok() { "yes" } else { "NO" },
    );
    Ok(entry)
}

fn write(a: &Q1Args, gpu: &Gpu, h2d: f64, stream: &Value, q1: &[Value]) -> Result<()> {
    let result = json!({
        "benchmark": "q1",
        "device": gpu.info.name,
        "driver": gpu.info.driver_version,
        "host_threads": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "pinned_h2d_bytes_per_s": h2d,
        "commit": git_commit(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "method": "wall: median of --reps runs of the whole query through DataFusion after one warm-up (the warm-up fills the prepared-input cache); gpu ms: CUDA events around the streaming pipeline (copies and kernels) of the last run",
        "stream": stream,
        "tpch_q1": q1,
    });
    write_json(&a.out, &result)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn q1_rows_compare_sums_exactly_and_averages_closely() {
        let ours = vec![row(&[
            "A",
            "F",
            "10.00",
            "2.50",
            "1.2300",
            "1.000000",
            "25.5000000",
            "1.0",
            "0.05",
            "7",
        ])];
        let duck = vec![row(&[
            "A",
            "F",
            "10.0",
            "2.5",
            "1.23",
            "1",
            "25.500000000001",
            "1.0",
            "0.05",
            "7",
        ])];
        assert_eq!(same_q1(&ours, &duck), Ok(()));
        let off = vec![row(&[
            "A", "F", "10.01", "2.5", "1.23", "1", "25.5", "1.0", "0.05", "7",
        ])];
        assert!(same_q1(&off, &duck).is_err());
        let avg = vec![row(&[
            "A",
            "F",
            "10.0",
            "2.5",
            "1.23",
            "1",
            "25.500002",
            "1.0",
            "0.05",
            "7",
        ])];
        assert!(same_q1(&avg, &duck).is_err());
    }
}
