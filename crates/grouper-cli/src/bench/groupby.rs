//! `grouper bench groupby`: the db-benchmark group-by questions (h2oai/db-benchmark, kept by
//! duckdblabs) on its G1 data ([`crate::groupby_data`]), in memory, in-process timings: grouper's
//! `auto` and `cpu` backends and DataFusion alone, each a session over one in-memory table of
//! `threads` partitions, against DuckDB on the same data and threads (loaded into a DuckDB table;
//! each question timed as the suite's DuckDB script runs it, `CREATE TABLE ans AS ...`).
//!
//! Every engine's answer is checked against DuckDB's through a summary of it (row count and the
//! sum of each value column: question 10's answer has nearly as many rows as the input), compared
//! as `bench files` compares answers. JSON under `bench/results/`, rewritten after each question.
// Benchmark harness, not a query path: it indexes vectors it built itself.
#![allow(clippy::indexing_slicing)]

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use clap::Args;
use datafusion::catalog::MemTable;
use datafusion::prelude::SessionContext;
use grouper::config::Backend;
use grouper::GrouperConfig;
use serde_json::{json, Map, Value};

use crate::bench::answers;
use crate::bench::common::{device, duckdb_files, git_commit, time_interleaved, write_json};
use crate::groupby_data::{Spec, CHUNK};

/// The suite's ten questions (its DuckDB script's SQL, table `x`) and the value columns whose
/// sums summarise each answer.
pub const QUESTIONS: [(&str, &[&str]); 10] = [
    ("SELECT id1, sum(v1) AS v1 FROM x GROUP BY id1", &["v1"]),
    ("SELECT id1, id2, sum(v1) AS v1 FROM x GROUP BY id1, id2", &["v1"]),
    ("SELECT id3, sum(v1) AS v1, avg(v3) AS v3 FROM x GROUP BY id3", &["v1", "v3"]),
    (
        "SELECT id4, avg(v1) AS v1, avg(v2) AS v2, avg(v3) AS v3 FROM x GROUP BY id4",
        &["v1", "v2", "v3"],
    ),
    (
        "SELECT id6, sum(v1) AS v1, sum(v2) AS v2, sum(v3) AS v3 FROM x GROUP BY id6",
        &["v1", "v2", "v3"],
    ),
    (
        "SELECT id4, id5, median(v3) AS median_v3, stddev(v3) AS sd_v3 FROM x GROUP BY id4, id5",
        &["median_v3", "sd_v3"],
    ),
    (
        "SELECT id3, max(v1) - min(v2) AS range_v1_v2 FROM x GROUP BY id3",
        &["range_v1_v2"],
    ),
    (
        "SELECT id6, v3 AS largest2_v3 FROM (SELECT id6, v3, row_number() OVER (PARTITION BY id6 ORDER BY v3 DESC) AS order_v3 FROM x WHERE v3 IS NOT NULL) sub_query WHERE order_v3 <= 2",
        &["largest2_v3"],
    ),
    (
        "SELECT id2, id4, pow(corr(v1, v2), 2) AS r2 FROM x GROUP BY id2, id4",
        &["r2"],
    ),
    (
        "SELECT id1, id2, id3, id4, id5, id6, sum(v3) AS v3, count(*) AS count FROM x GROUP BY id1, id2, id3, id4, id5, id6",
        &["v3", "count"],
    ),
];

/// The summary of question `q`'s answer: its rows and the sum of each value column.
fn summary(q: usize) -> String {
    let (sql, cols) = QUESTIONS[q];
    let sums: Vec<String> = cols.iter().map(|c| format!("sum({c})")).collect();
    format!("SELECT count(*), {} FROM ({sql}) answer", sums.join(", "))
}

#[derive(Args, Debug)]
pub struct GroupbyArgs {
    /// Rows of each data set (comma-separated; the suite runs 1e7, 1e8 and 1e9).
    #[arg(long, default_value = "1e7", value_delimiter = ',')]
    rows: Vec<f64>,
    /// Groups of the large-group keys (the suite's K).
    #[arg(long, default_value_t = 100)]
    k: u32,
    /// Percent of NULLs in each column (the suite's nas: 0 or 5).
    #[arg(long, default_value_t = 0)]
    nas: u32,
    /// Which questions (1-10, comma-separated; default all).
    #[arg(long, value_delimiter = ',')]
    questions: Vec<usize>,
    /// Threads of every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Timed runs of each question on each engine, after one warm-up; the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Python with duckdb (scripts/setup-venv.sh); DuckDB is skipped if it is missing.
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
    /// Where to write the JSON result.
    #[arg(long, default_value = "bench/results/groupby.json")]
    out: PathBuf,
}

/// grouper's engines of the run, sharing one worker pool.
fn engines(threads: usize) -> Result<Vec<(&'static str, GrouperConfig)>> {
    let pool = grouper::worker_pool(threads)?;
    let config = |backend| GrouperConfig {
        backend,
        threads: Some(threads),
        pool: Some(Arc::clone(&pool)),
        ..Default::default()
    };
    Ok(vec![
        ("auto", config(Backend::Auto)),
        ("cpu", config(Backend::Cpu)),
        ("datafusion", config(Backend::DataFusion)),
    ])
}

/// The first row of `sql`'s answer as text (NULL as empty), as DuckDB's runner prints it.
async fn first_row(ctx: &SessionContext, sql: &str) -> Result<Vec<String>> {
    let batches = ctx.sql(sql).await?.collect().await?;
    let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(Vec::new());
    };
    let opts = FormatOptions::default().with_null("");
    b.columns()
        .iter()
        .map(|c| {
            Ok(ArrayFormatter::try_new(c.as_ref(), &opts)?
                .value(0)
                .to_string())
        })
        .collect()
}

/// `threads` partitions of 8192-row batches (DataFusion's batch size: every engine streams
/// the same batches).
fn partitions(batches: &[RecordBatch], threads: usize) -> Vec<Vec<RecordBatch>> {
    let n = threads.max(1);
    let mut parts = vec![Vec::new(); n];
    let mut i = 0;
    for b in batches {
        for off in (0..b.num_rows()).step_by(8192) {
            parts[i % n].push(b.slice(off, 8192.min(b.num_rows() - off)));
            i += 1;
        }
    }
    parts
}

/// Writes the G1 table of `spec` to `dir/x.parquet` through a child `grouper gen groupby` (the
/// same generator and seed; a row group a chunk of [`generate`]), so that its memory is gone
/// when the child exits; the file's path.
///
/// [`generate`]: crate::groupby_data::generate
fn write_g1(spec: &Spec, dir: &std::path::Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("x.parquet");
    let status = std::process::Command::new(std::env::current_exe()?)
        .args(["gen", "groupby", "--rows", &spec.rows.to_string()])
        .args(["--k", &spec.k.to_string(), "--nas", &spec.nas.to_string()])
        .args(["--seed", &spec.seed.to_string(), "-o"])
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .status()?;
    anyhow::ensure!(
        status.success(),
        "generating the G1 table failed ({status})"
    );
    Ok(file)
}

/// The G1 table of `file` in batches of [`CHUNK`] rows (its row groups, as [`generate`] made
/// them), in the schema the file keeps (Arrow's: strings as `Utf8`, as generated; the
/// `MemTable`s built from them check it against [`schema`]).
///
/// [`generate`]: crate::groupby_data::generate
/// [`schema`]: crate::groupby_data::schema
fn read_g1(file: &std::path::Path) -> Result<Vec<RecordBatch>> {
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file)?)?
        .with_batch_size(CHUNK)
        .build()?;
    Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
}

pub async fn groupby(a: GroupbyArgs) -> Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let wanted: Vec<usize> = match a.questions.is_empty() {
        true => (0..QUESTIONS.len()).collect(),
        false => a
            .questions
            .iter()
            .filter(|&&q| (1..=QUESTIONS.len()).contains(&q))
            .map(|q| q - 1)
            .collect(),
    };
    let engines = engines(threads)?;
    let mut sets = Vec::new();
    let mut duckdb_version = Value::Null;
    for &rows in &a.rows {
        let spec = Spec {
            rows: rows as usize,
            k: a.k,
            nas: a.nas,
            seed: 42,
        };
        // DuckDB runs first, over the data written by a child process, while this one holds
        // none of it; then the same file is read into memory for grouper and DataFusion. At 1e8
        // rows the generator's peak (17 GiB here) and DuckDB's table did not fit a 24 GiB
        // machine together: the kernel killed DuckDB's runner.
        // Removed when dropped, on every path out of this set (a failed child's too).
        let dir = tempfile::Builder::new()
            .prefix("grouper-bench-g1-")
            .tempdir()?;
        let t = std::time::Instant::now();
        let file = write_g1(&spec, dir.path())?;
        eprintln!(
            "G1 {rows:e} rows (K {}, nas {}%) generated in {:.1} s",
            a.k,
            a.nas,
            t.elapsed().as_secs_f64()
        );
        // DuckDB: each question as the suite times it, then each summary.
        let mut sqls: Vec<String> = wanted
            .iter()
            .map(|&q| format!("CREATE OR REPLACE TABLE ans AS {}", QUESTIONS[q].0))
            .collect();
        sqls.extend(wanted.iter().map(|&q| summary(q)));
        let sql_refs: Vec<&str> = sqls.iter().map(String::as_str).collect();
        let duck = duckdb_files(&a.python, dir.path(), "x", threads, a.runs, &sql_refs);
        let parts = read_g1(&file).map(|batches| partitions(&batches, threads));
        drop(dir);
        let (duck, parts) = (duck?, parts?);
        let mut sessions = Vec::new();
        for (name, config) in &engines {
            let ctx = grouper::session_context(config)?;
            let schema = crate::groupby_data::schema();
            ctx.register_table("x", Arc::new(MemTable::try_new(schema, parts.clone())?))?;
            sessions.push((*name, ctx));
        }
        if let Some(d) = &duck {
            duckdb_version = json!(d.version);
        }
        let mut questions = Vec::new();
        for (i, &q) in wanted.iter().enumerate() {
            let sql = QUESTIONS[q].0;
            let mut ms = Map::new();
            let mut answers = Map::new();
            let theirs = duck
                .as_ref()
                .and_then(|d| d.rows.get(wanted.len() + i))
                .map(|r| {
                    r.iter()
                        .map(|row| {
                            row.iter()
                                .map(|c| {
                                    if c == "None" {
                                        String::new()
                                    } else {
                                        c.clone()
                                    }
                                })
                                .collect::<Vec<_>>()
                        })
                        .collect::<Vec<_>>()
                });
            let ctxs: Vec<_> = sessions.iter().map(|(_, c)| c).collect();
            let times = time_interleaved(&ctxs, sql, a.runs).await;
            for ((name, ctx), timed) in sessions.iter().zip(times) {
                match timed {
                    Ok(m) => {
                        ms.insert(name.to_string(), json!(m));
                        let ours = vec![first_row(ctx, &summary(q)).await?];
                        let verdict = match &theirs {
                            None => "no DuckDB".to_string(),
                            Some(t) => answers::differ(&ours, t).unwrap_or_else(|| "equal".into()),
                        };
                        answers.insert(name.to_string(), json!(verdict));
                    }
                    Err(e) => {
                        answers.insert(name.to_string(), json!(format!("error: {e}")));
                    }
                }
            }
            if let Some(d) = &duck {
                ms.insert("duckdb".into(), json!(d.ms.get(i)));
            }
            let ratio = |e: &str| -> Value {
                match (
                    ms.get(e).and_then(Value::as_f64),
                    ms.get("duckdb").and_then(Value::as_f64),
                ) {
                    (Some(x), Some(d)) if x > 0.0 => json!(d / x),
                    _ => Value::Null,
                }
            };
            eprintln!(
                "q{}: {}; {}",
                q + 1,
                ms.iter()
                    .map(|(k, v)| format!("{k} {:.1} ms", v.as_f64().unwrap_or(f64::NAN)))
                    .collect::<Vec<_>>()
                    .join(", "),
                answers
                    .iter()
                    .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("?")))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            questions.push(json!({
                "question": q + 1, "sql": sql, "ms": ms, "answers": answers,
                "speedup_vs_duckdb": { "auto": ratio("auto"), "cpu": ratio("cpu"), "datafusion": ratio("datafusion") },
            }));
            // After every question: a run cut short keeps what it measured.
            let mut so_far = sets.clone();
            so_far.push(json!({ "rows": rows, "questions": questions }));
            write_json(
                &a.out,
                &json!({
                    "benchmark": "db-benchmark groupby (G1 data, in memory, in-process timings)",
                    "command": std::env::args().collect::<Vec<_>>().join(" "),
                    "commit": git_commit(),
                    "device": device(threads),
                    "threads": threads,
                    "k": a.k,
                    "nas": a.nas,
                    "runs": a.runs,
                    "duckdb_version": duckdb_version,
                    "sets": so_far,
                }),
            )?;
        }
        sets.push(json!({ "rows": rows, "questions": questions }));
    }
    Ok(())
}
