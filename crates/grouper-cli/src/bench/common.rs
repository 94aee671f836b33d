//! What the benchmarks share: timing SQL through sessions, the engines compared, DuckDB through
//! the project's venv, Parquet and TPC-H data, the commit and JSON output.
// Benchmark harness, not a query path: its indexing is into serde_json values (a missing key
// reads as Null, never panics) and vectors of sweep points it built itself.
#![allow(clippy::indexing_slicing)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use grouper::{Backend, GrouperConfig};
use grouper_core::cpu::Strategy;
use grouper_core::planner::Overrides;
use serde_json::Value;

pub(crate) const SWEEP_SQL: &str = "SELECT k, sum(v), count(*) FROM t GROUP BY k";

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

/// Median wall-clock milliseconds of `sql` on each of `ctxs`, which take turns run by run
/// after a warm-up each (an engine's error is its entry). Timed one engine after another, the
/// first, on freshly generated data, read up to 2x slower than the last on the same plan
/// (`bench cpu-sweep` at 2^18 groups: `auto` on DataFusion's plan 492-815 ms against
/// DataFusion's 318-390; level when interleaved).
pub(crate) async fn time_interleaved(
    ctxs: &[&SessionContext],
    sql: &str,
    reps: usize,
) -> Vec<Result<f64>> {
    let mut runs = Vec::with_capacity(ctxs.len());
    for ctx in ctxs {
        runs.push(time_sql_once(ctx, sql).await.map(|_| Vec::new()));
    }
    for _ in 0..reps.max(1) {
        for (ctx, r) in ctxs.iter().zip(&mut runs) {
            if let Ok(times) = r {
                match time_sql_once(ctx, sql).await {
                    Ok(t) => times.push(t),
                    Err(e) => *r = Err(e),
                }
            }
        }
    }
    runs.into_iter()
        .map(|r| r.map(|times| median(&times)))
        .collect()
}

/// Wall-clock milliseconds of one run of `sql` on `ctx` (planning excluded).
pub(crate) async fn time_sql_once(ctx: &SessionContext, sql: &str) -> Result<f64> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let t = Instant::now();
    grouper_core::trace::event(|| "bench: timed run starts".into());
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
    // The CPU planner's own choice: `auto` takes the GPU where there is one.
    out.push((
        "cpu".to_string(),
        GrouperConfig {
            backend: Backend::Cpu,
            threads: Some(threads),
            ..Default::default()
        },
    ));
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

/// Runs `sql` once more: its result, and its GroupByExec if the plan has one (whose last run
/// was this one: its report goes with this answer).
pub(crate) async fn run_once(
    ctx: &SessionContext,
    sql: &str,
) -> Result<(
    Vec<arrow::array::RecordBatch>,
    Option<Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
)> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    let mut stack = vec![plan];
    while let Some(p) = stack.pop() {
        if p.downcast_ref::<grouper::exec::GroupByExec>().is_some() {
            return Ok((batches, Some(p)));
        }
        stack.extend(p.children().into_iter().cloned());
    }
    Ok((batches, None))
}

/// Runs `sql` once more and returns its GroupByExec, if the plan has one.
async fn last_group_by(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Option<Arc<dyn datafusion::physical_plan::ExecutionPlan>>> {
    Ok(run_once(ctx, sql).await?.1)
}

/// The GPU report of the last run of `plan`, a GroupByExec, if it ran on the GPU.
pub(crate) fn gpu_report_of(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> Option<grouper_gpu::GpuReport> {
    plan.downcast_ref::<grouper::exec::GroupByExec>()
        .and_then(|g| g.last_gpu_report())
}

/// Runs `sql` once more and returns the GPU report of its GroupByExec, if it ran on the GPU.
pub(crate) async fn last_gpu_report(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Option<grouper_gpu::GpuReport>> {
    Ok(last_group_by(ctx, sql)
        .await?
        .as_ref()
        .and_then(gpu_report_of))
}

/// Runs `sql` once more and says what ran it: the CPU planner's strategy and reason, the
/// GPU's strategy, both under co-processing, or DataFusion's plan (no GroupByExec).
pub(crate) async fn what_ran(ctx: &SessionContext, sql: &str) -> Result<String> {
    let Some(p) = last_group_by(ctx, sql).await? else {
        return Ok("DataFusion's plan".into());
    };
    let Some(g) = p.downcast_ref::<grouper::exec::GroupByExec>() else {
        return Ok("DataFusion's plan".into());
    };
    Ok(match (g.last_decision(), g.last_gpu_report()) {
        // Both sides ran: co-processing.
        (Some(d), Some(r)) => format!(
            "hybrid (gpu {} on {} of {} rows; cpu {}): {}",
            r.strategy, r.rows_run, r.rows, d.strategy, d.reason
        ),
        (Some(d), None) => format!("{}: {}", d.strategy, d.reason),
        (None, Some(r)) => format!("gpu {}: {}", r.strategy, r.reason),
        (None, None) => "grouper (no report)".into(),
    })
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
    python: &Path,
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
    python: &Path,
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

/// Runs the peer script `script` (under `bench/`) with `python` and `args`, and parses the one
/// JSON object it prints; `peer` names it in the errors.
pub(crate) fn run_peer<I, S>(python: &Path, script: &str, args: I, peer: &str) -> Result<Value>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(python)
        .arg(Path::new("bench").join(script))
        .args(args)
        .output()
        .with_context(|| format!("cannot run the {peer}"))?;
    if !out.status.success() {
        bail!("{peer} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Runs DuckDB on the Parquet files in `dir` (loaded into an in-memory table `table`).
pub(crate) fn duckdb_files(
    python: &Path,
    dir: &std::path::Path,
    table: &str,
    threads: usize,
    reps: usize,
    sqls: &[&str],
) -> Result<Option<DuckRun>> {
    if python_missing(python) {
        return Ok(None);
    }
    let pattern = dir.join("*.parquet").into_os_string();
    let args = [
        pattern,
        table.into(),
        threads.to_string().into(),
        reps.to_string().into(),
    ];
    let sqls = sqls.iter().map(std::ffi::OsString::from);
    let v = run_peer(
        python,
        "duckdb_runner.py",
        args.into_iter().chain(sqls),
        "DuckDB runner",
    )?;
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

/// The machine: the GPU (asked of the driver: the harness is not a query whose start-up is
/// measured) and the CPU model and threads.
pub(crate) fn device(threads: usize) -> String {
    let cpu = format!(
        "{} ({threads} threads)",
        grouper::profile_store::cpu_model()
    );
    match grouper_gpu::device::list()
        .ok()
        .and_then(|l| l.into_iter().next())
    {
        Some(g) => format!("{}; {cpu}", g.name),
        None => format!("no GPU; {cpu}"),
    }
}

/// One timed `grouper query` process writing its answer to `csv`: wall milliseconds and what it
/// printed on stdout (the plan, with `--explain`), or its error's last line.
pub(crate) fn grouper_query(
    flags: &[String],
    tables: &[String],
    threads: usize,
    sql: &str,
    csv: &Path,
) -> Result<std::result::Result<(f64, String), String>> {
    let exe = std::env::current_exe().context("cannot find the grouper binary")?;
    let t = Instant::now();
    let out = Command::new(exe)
        .arg("query")
        .args(["--threads", &threads.to_string()])
        .args(flags)
        .args(tables)
        .args(["--format", "csv", "--output"])
        .arg(csv)
        .arg(sql)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .context("cannot start grouper query")?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if out.status.success() {
        Ok(Ok((ms, String::from_utf8_lossy(&out.stdout).into_owned())))
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let mut lines = err.lines().map(str::trim).filter(|l| !l.is_empty());
        Ok(Err(match out.status.code() {
            // An error: the CLI's one line, last.
            Some(_) => lines.next_back().unwrap_or("failed").to_string(),
            // Killed by a signal (an abort's first line says why, e.g. "memory allocation of
            // ... failed"; 9 without a word is the kernel's out-of-memory killer).
            None => format!("{} ({})", lines.next().unwrap_or("no message"), out.status),
        }))
    }
}

/// One timed `grouper query` process: wall milliseconds, or its error's last line.
pub(crate) fn run_grouper(
    flags: &[String],
    tables: &[String],
    threads: usize,
    sql: &str,
    csv: &Path,
) -> Result<std::result::Result<f64, String>> {
    Ok(grouper_query(flags, tables, threads, sql, csv)?.map(|(ms, _)| ms))
}

/// The order of turn `rep` over `len` runs: all of them, starting at `rep` (mod `len`). Timed
/// runs taking turns this way leave what the first of a turn inherits (clocks, caches, the
/// previous process's freed memory) to each in turn, not always to the first.
pub(crate) fn turn(len: usize, rep: usize) -> impl Iterator<Item = usize> {
    (0..len).map(move |i| (i + rep) % len)
}

/// The median of `runs`: the middle one, or the mean of the middle two (NaN when there are
/// none).
pub(crate) fn median(runs: &[f64]) -> f64 {
    let mut r = runs.to_vec();
    r.sort_by(f64::total_cmp);
    let n = r.len();
    match (r.get(n / 2), n % 2) {
        (Some(&hi), 0) => r.get(n / 2 - 1).map_or(f64::NAN, |&lo| (lo + hi) / 2.0),
        (Some(&mid), _) => mid,
        (None, _) => f64::NAN,
    }
}

/// The points of an earlier run in `path` on this machine to keep: all of them when it was of
/// this commit, or of one of the commits `from` (each such point then stamped with the commit
/// that measured it, where it names none); and the commits whose points were kept, the earlier
/// run's own list included. A commit matches by its prefix (short and long hashes). A run of
/// other rows than `meta` names (a `--quick` one, say) is never kept.
pub fn earlier_points_from(
    path: &Path,
    meta: &Value,
    from: &[String],
) -> (Vec<Value>, Vec<String>) {
    let Some(old) = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
    else {
        return (Vec::new(), Vec::new());
    };
    let commit = old["commit"].as_str().unwrap_or_default();
    let same = old["commit"] == meta["commit"];
    let named = !commit.is_empty()
        && from
            .iter()
            .any(|c| c.starts_with(commit) || commit.starts_with(c.as_str()));
    let rows_differ = !meta["rows"].is_null() && old["rows"] != meta["rows"];
    if old["device"] != meta["device"] || rows_differ || !(same || named) {
        return (Vec::new(), Vec::new());
    }
    let mut kept: Vec<String> = old["resumed_from"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(String::from))
        .collect();
    let mut points = old["points"].as_array().cloned().unwrap_or_default();
    if !same {
        for p in points.iter_mut().filter(|p| p["commit"].is_null()) {
            p["commit"] = Value::from(commit);
        }
        if !kept.iter().any(|k| k == commit) {
            kept.push(commit.to_string());
        }
    }
    (points, kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every turn runs each once, and none starts every turn.
    #[test]
    fn turns_start_at_each_in_turn() {
        for len in 1..6 {
            let firsts: Vec<usize> = (0..len)
                .map(|rep| {
                    let order: Vec<usize> = turn(len, rep).collect();
                    let mut sorted = order.clone();
                    sorted.sort_unstable();
                    assert_eq!(
                        sorted,
                        (0..len).collect::<Vec<_>>(),
                        "{len}, {rep}: {order:?}"
                    );
                    order[0]
                })
                .collect();
            assert_eq!(firsts, (0..len).collect::<Vec<_>>(), "{len}");
        }
        assert_eq!(turn(0, 3).count(), 0);
    }

    /// An earlier run is kept for its own commit, or for one `from` names (its points then
    /// stamped with it), and never for another machine or other rows.
    #[test]
    fn earlier_points_keep_only_the_runs_they_may() {
        let path =
            std::env::temp_dir().join(format!("grouper-earlier-{}.json", std::process::id()));
        let old = json!({ "commit": "abc1234", "device": "d", "rows": 16,
            "points": [{ "ms": 1.0 }, { "ms": 2.0, "commit": "0000000" }] });
        std::fs::write(&path, old.to_string()).unwrap();
        let meta = |commit: &str, device: &str, rows: u64| json!({ "commit": commit, "device": device, "rows": rows });
        let from = ["abc1234567".to_string()];
        let earlier_points = |meta: Value| earlier_points_from(&path, &meta, &[]).0;
        assert_eq!(earlier_points(meta("abc1234", "d", 16)).len(), 2);
        assert!(earlier_points(meta("def5678", "d", 16)).is_empty());
        assert!(earlier_points(meta("abc1234", "e", 16)).is_empty());
        assert!(earlier_points(meta("abc1234", "d", 32)).is_empty());
        let (points, kept) = earlier_points_from(&path, &meta("def5678", "d", 16), &from);
        assert_eq!(kept, vec!["abc1234".to_string()]);
        assert_eq!(points[0]["commit"], "abc1234");
        assert_eq!(points[1]["commit"], "0000000", "a stamp is kept");
        let (points, _) = earlier_points_from(&path, &meta("def5678", "d", 32), &from);
        assert!(points.is_empty(), "other rows are never kept");
        let _ = std::fs::remove_file(&path);
    }
}
