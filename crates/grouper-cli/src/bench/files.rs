//! `grouper bench files`: SQL over Parquet files the way users run it — one fresh `grouper query`
//! process per query, wall time of the whole process, files in the OS page cache — against the
//! same binary with `--backend datafusion` (DataFusion's own aggregation) and DuckDB on the same
//! files and threads, in one run, with every answer compared to DuckDB's.
//!
//! TPC-H's 22 queries ([`QUERIES`]) at `--sf`, and Q1 alone at `--q1-sf` (lineitem only), over
//! the files tpchgen-cli writes (`--tpchgen` writes a missing scale factor). JSON under
//! `bench/results/`, written after every query (a killed run keeps what it measured), and an
//! SVG of the times per scale factor.
// Benchmark harness, not a query path: it indexes serde_json values and vectors it built.
#![allow(clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};

use crate::bench::answers;
use crate::bench::common::{device, git_commit, median, run_grouper, turn, write_json};

/// TPC-H's 22 queries (the specification's texts with its validation parameters; Q15's view as
/// a common table expression, so that each query is one statement).
pub const QUERIES: [&str; 22] = [
    include_str!("tpch/q01.sql"),
    include_str!("tpch/q02.sql"),
    include_str!("tpch/q03.sql"),
    include_str!("tpch/q04.sql"),
    include_str!("tpch/q05.sql"),
    include_str!("tpch/q06.sql"),
    include_str!("tpch/q07.sql"),
    include_str!("tpch/q08.sql"),
    include_str!("tpch/q09.sql"),
    include_str!("tpch/q10.sql"),
    include_str!("tpch/q11.sql"),
    include_str!("tpch/q12.sql"),
    include_str!("tpch/q13.sql"),
    include_str!("tpch/q14.sql"),
    include_str!("tpch/q15.sql"),
    include_str!("tpch/q16.sql"),
    include_str!("tpch/q17.sql"),
    include_str!("tpch/q18.sql"),
    include_str!("tpch/q19.sql"),
    include_str!("tpch/q20.sql"),
    include_str!("tpch/q21.sql"),
    include_str!("tpch/q22.sql"),
];

#[derive(Args, Debug)]
pub struct FilesArgs {
    /// Folder of the TPC-H Parquet files, one subfolder per scale factor (`sf10/`), each with
    /// `<table>.parquet` (tpchgen-cli's layout) or `<table>/*.parquet`.
    #[arg(long, default_value = "data/tpch")]
    data: PathBuf,
    /// Scale factors at which TPC-H's queries run (comma-separated).
    #[arg(long, default_value = "1", value_delimiter = ',')]
    sf: Vec<f64>,
    /// Which of the 22 queries run at --sf (comma-separated numbers; default all).
    #[arg(long, value_delimiter = ',')]
    queries: Vec<usize>,
    /// Scale factors at which Q1 alone runs (only lineitem is needed there).
    #[arg(long, value_delimiter = ',')]
    q1_sf: Vec<f64>,
    /// Threads of every engine (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Timed runs of each query on each engine; the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// More grouper engines, NAME=FLAGS (flags of `grouper query`, separated by spaces or
    /// commas), e.g. `cpu=--backend=cpu` or `gpu=--backend=gpu,--no-gpu-pages`. `auto` and
    /// `datafusion` always run.
    #[arg(long)]
    engine: Vec<String>,
    /// tpchgen-cli, to write a scale factor whose files are missing (else that is an error).
    #[arg(long)]
    tpchgen: Option<PathBuf>,
    /// Python with duckdb (scripts/setup-venv.sh); DuckDB is skipped if it is missing.
    #[arg(long, default_value = ".venv/bin/python")]
    python: PathBuf,
    /// Where to write the JSON result (the SVGs go beside it).
    #[arg(long, default_value = "bench/results/files.json")]
    out: PathBuf,
}

/// A grouper engine of the run: its name and the extra flags of its `grouper query` processes.
struct Engine {
    name: String,
    flags: Vec<String>,
}

fn engines(extra: &[String]) -> Result<Vec<Engine>> {
    let mut out = vec![
        Engine {
            name: "auto".into(),
            flags: vec![],
        },
        Engine {
            name: "datafusion".into(),
            flags: vec!["--backend".into(), "datafusion".into()],
        },
    ];
    for e in extra {
        let Some((name, flags)) = e.split_once('=') else {
            bail!("--engine expects NAME=FLAGS, got '{e}'");
        };
        out.push(Engine {
            name: name.into(),
            flags: flags
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect(),
        });
    }
    Ok(out)
}

pub async fn files(a: FilesArgs) -> Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let engines = engines(&a.engine)?;
    let mut plan: Vec<(f64, Vec<usize>)> = Vec::new();
    let all: Vec<usize> = (1..=22).collect();
    for &sf in &a.sf {
        plan.push((
            sf,
            if a.queries.is_empty() {
                all.clone()
            } else {
                a.queries.clone()
            },
        ));
    }
    for &sf in &a.q1_sf {
        plan.push((sf, vec![1]));
    }
    if let Some(q) = plan
        .iter()
        .flat_map(|(_, q)| q)
        .find(|q| !(1..=22).contains(*q))
    {
        bail!("TPC-H has queries 1 to 22, not {q}");
    }
    let mut result = json!({
        "benchmark": "files",
        "device": device(threads),
        "commit": git_commit(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "threads": threads,
        "runs": a.runs,
        "method": "one fresh `grouper query` process per query and run, wall time of the process \
                   (start, planning, scan, output to a CSV file); files read once before timing \
                   so they sit in the OS page cache; engines interleaved run by run, each run \
                   (a query's first too) starting at the next engine; DuckDB: views over the \
                   same files, each query timed inside one DuckDB process (its start not \
                   counted); answers compared with DuckDB's",
        "scale_factors": [],
    });
    for (sf, queries) in &plan {
        let dir = a.data.join(format!("sf{sf}"));
        ensure_data(&dir, *sf, queries, a.tpchgen.as_deref())?;
        let at = run_scale(&a, &dir, *sf, queries, &engines, threads, &mut result)?;
        plot(&a.out, *sf, &result["scale_factors"][at])?;
    }
    println!("wrote {}", a.out.display());
    Ok(())
}

/// The tables of a scale factor's folder, as `--table NAME=PATH` arguments.
fn table_args(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let table = if p.is_dir() {
            name
        } else if let Some(t) = name.strip_suffix(".parquet") {
            t
        } else {
            continue;
        };
        out.push("--table".into());
        out.push(format!("{table}={}", p.display()));
    }
    Ok(out)
}

/// Whether `queries` read tables besides lineitem (Q1 and Q6 read only lineitem).
fn needs_all_tables(queries: &[usize]) -> bool {
    queries.iter().any(|&q| q != 1 && q != 6)
}

/// Makes sure `dir` has the tables `queries` read, writing them with tpchgen-cli if allowed.
fn ensure_data(dir: &Path, sf: f64, queries: &[usize], tpchgen: Option<&Path>) -> Result<()> {
    let has = |t: &str| dir.join(format!("{t}.parquet")).exists() || dir.join(t).is_dir();
    let all = needs_all_tables(queries);
    let tables: &[&str] = if all {
        &[
            "lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region",
        ]
    } else {
        &["lineitem"]
    };
    if tables.iter().all(|t| has(t)) {
        return Ok(());
    }
    let Some(gen) = tpchgen else {
        bail!(
            "{} lacks TPC-H tables at SF {sf}: write them with tpchgen-cli (`tpchgen-cli parquet -s {sf} --output-dir {}`) or pass --tpchgen",
            dir.display(),
            dir.display()
        );
    };
    std::fs::create_dir_all(dir)?;
    let t = Instant::now();
    let mut cmd = Command::new(gen);
    cmd.args(["parquet", "--quiet", "-s"])
        .arg(sf.to_string())
        .arg("--output-dir")
        .arg(dir);
    if !all {
        cmd.args(["--tables", "lineitem"]);
    }
    let status = cmd.status().context("cannot run tpchgen-cli")?;
    if !status.success() {
        bail!("tpchgen-cli failed at SF {sf} ({status})");
    }
    println!(
        "wrote TPC-H SF {sf} to {} in {:.1} s",
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Reads every file under `dir` once, so that the timed runs find them in the page cache.
fn warm_page_cache(dir: &Path) -> Result<u64> {
    let mut bytes = 0;
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            bytes += warm_page_cache(&p)?;
        } else {
            bytes += std::io::copy(&mut std::fs::File::open(&p)?, &mut std::io::sink())?;
        }
    }
    Ok(bytes)
}

/// What DuckDB measured: per query name, its times and error; and its version.
struct Duck {
    version: String,
    runs: BTreeMap<String, (Vec<f64>, Option<String>)>,
}

/// Runs `bench/duckdb_files.py` over `dir` for `queries`, printing each as it finishes.
fn run_duckdb(
    python: &Path,
    dir: &Path,
    threads: usize,
    runs: usize,
    queries: &[usize],
    work: &Path,
) -> Result<Option<Duck>> {
    if python.components().count() > 1 && !python.exists() {
        println!(
            "DuckDB skipped: {} not found (scripts/setup-venv.sh)",
            python.display()
        );
        return Ok(None);
    }
    let mut args = Vec::new();
    for &q in queries {
        let file = work.join(format!("q{q:02}.sql"));
        std::fs::write(&file, QUERIES[q - 1])?;
        args.push(format!("q{q:02}={}", file.display()));
    }
    let mut child = Command::new(python)
        .arg("bench/duckdb_files.py")
        .arg(dir)
        .arg(threads.to_string())
        .arg(runs.to_string())
        .arg(work.join("duckdb"))
        .args(&args)
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run bench/duckdb_files.py")?;
    let mut duck = Duck {
        version: "?".into(),
        runs: BTreeMap::new(),
    };
    let stdout = child.stdout.take().context("no DuckDB output")?;
    for line in BufReader::new(stdout).lines() {
        let v: Value = serde_json::from_str(&line?)?;
        if let Some(ver) = v["version"].as_str() {
            duck.version = ver.into();
            continue;
        }
        let times: Vec<f64> = v["runs_ms"]
            .as_array()
            .map(|t| t.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        let name = v["name"].as_str().unwrap_or("?").to_string();
        println!("  duckdb {name}: {:.1} ms", median(&times));
        duck.runs
            .insert(name, (times, v["error"].as_str().map(str::to_string)));
    }
    if !child.wait()?.success() {
        bail!("bench/duckdb_files.py failed");
    }
    Ok(Some(duck))
}

/// Runs `queries` at one scale factor on every engine; appends its entry to `result` and
/// returns its index there.
fn run_scale(
    a: &FilesArgs,
    dir: &Path,
    sf: f64,
    queries: &[usize],
    engines: &[Engine],
    threads: usize,
    result: &mut Value,
) -> Result<usize> {
    let gb = warm_page_cache(dir)? as f64 / 1e9;
    println!("SF {sf}: {:.2} GB of Parquet in {}", gb, dir.display());
    let tables = table_args(dir)?;
    let work = std::env::temp_dir().join(format!("grouper-bench-files-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let duck = run_duckdb(&a.python, dir, threads, a.runs, queries, &work)?;
    let scales = result["scale_factors"]
        .as_array_mut()
        .context("result has no scale factors")?;
    scales.push(json!({
        "sf": sf,
        "parquet_gb": gb,
        "duckdb_version": duck.as_ref().map(|d| d.version.clone()),
        "queries": [],
    }));
    let at = scales.len() - 1;
    // Each run starts at the next engine, and each query's first run at the next after the
    // previous query's: a process inherits what came before it, and a fixed order gave `auto`
    // every run's first slot, a query's first one after the previous query's answer checks (on
    // this 2-core VM, Q18 at SF 1 after 3 s idle took 1.0-1.3 s under every engine, 0.33-0.5 s
    // back to back).
    for (first, &q) in queries.iter().enumerate() {
        let sql = QUERIES[q - 1];
        let name = format!("q{q:02}");
        let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut errors: BTreeMap<&str, String> = BTreeMap::new();
        for run in 0..a.runs.max(1) {
            for e in turn(engines.len(), first + run).map(|i| &engines[i]) {
                let csv = work.join(format!("{name}-{}.csv", e.name));
                match run_grouper(&e.flags, &tables, threads, sql, &csv)? {
                    Ok(ms) => times.entry(&e.name).or_default().push(ms),
                    Err(err) => {
                        errors.insert(&e.name, err);
                    }
                }
            }
        }
        let theirs = duck
            .as_ref()
            .map(|_| answers::read(&work.join("duckdb").join(format!("{name}.csv")), false))
            .transpose()?;
        let mut entry = json!({ "query": q, "ms": {}, "runs_ms": {}, "answers": {} });
        let mut line = format!("SF {sf} {name}:");
        for e in engines {
            let n = e.name.as_str();
            if let Some(err) = errors.get(n) {
                entry["answers"][n] = json!(format!("error: {err}"));
                line += &format!(" {n} error ({err});");
                continue;
            }
            let ms = median(&times[n]);
            entry["ms"][n] = json!(ms);
            entry["runs_ms"][n] = json!(times[n]);
            let verdict = match &theirs {
                Some(t) => {
                    let ours = answers::read(&work.join(format!("{name}-{n}.csv")), true)?;
                    answers::differ(&ours, t)
                        .map_or("equal".to_string(), |d| format!("differ: {d}"))
                }
                None => "not compared (no DuckDB)".into(),
            };
            line += &format!(" {n} {ms:.1} ms ({verdict});");
            entry["answers"][n] = json!(verdict);
        }
        if let Some((runs, err)) = duck.as_ref().and_then(|d| d.runs.get(&name)) {
            match err {
                Some(e) => entry["duckdb_error"] = json!(e),
                None => {
                    entry["ms"]["duckdb"] = json!(median(runs));
                    entry["runs_ms"]["duckdb"] = json!(runs);
                }
            }
        }
        let ms = entry["ms"].clone();
        let ratio = |of: &str| ms[of].as_f64().zip(ms["auto"].as_f64()).map(|(o, m)| o / m);
        let (vs_df, vs_duck) = (ratio("datafusion"), ratio("duckdb"));
        entry["auto_speedup_vs_datafusion"] = json!(vs_df);
        entry["auto_speedup_vs_duckdb"] = json!(vs_duck);
        println!(
            "{line} auto vs DataFusion {:.2}x, vs DuckDB {:.2}x",
            vs_df.unwrap_or(f64::NAN),
            vs_duck.unwrap_or(f64::NAN)
        );
        result["scale_factors"][at]["queries"]
            .as_array_mut()
            .context("no queries")?
            .push(entry);
        summarise(&mut result["scale_factors"][at], engines);
        write_json(&a.out, result)?;
    }
    let _ = std::fs::remove_dir_all(&work);
    println!(
        "SF {sf} summary: {}",
        result["scale_factors"][at]["summary"]
    );
    Ok(at)
}

/// Totals and geometric means of one scale factor's queries, over the queries every engine
/// (DuckDB included, when it ran) answered.
fn summarise(scale: &mut Value, engines: &[Engine]) {
    let names: Vec<&str> = engines
        .iter()
        .map(|e| e.name.as_str())
        .chain(std::iter::once("duckdb"))
        .collect();
    let queries = scale["queries"].as_array().cloned().unwrap_or_default();
    let mut summary = json!({});
    for n in &names {
        let ms: Vec<f64> = queries.iter().filter_map(|q| q["ms"][n].as_f64()).collect();
        summary[n] = json!({ "queries": ms.len(), "total_ms": ms.iter().sum::<f64>() });
    }
    for (key, of) in [("datafusion", "datafusion"), ("duckdb", "duckdb")] {
        let ratios: Vec<f64> = queries
            .iter()
            .filter_map(|q| q[format!("auto_speedup_vs_{key}")].as_f64())
            .collect();
        if ratios.is_empty() {
            continue;
        }
        let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let worst = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        summary[format!("auto_vs_{of}")] = json!({
            "geomean_speedup": geo,
            "worst_speedup": worst,
            "queries_slower": ratios.iter().filter(|r| **r < 1.0).count(),
        });
    }
    let unequal = queries
        .iter()
        .filter(|q| {
            q["answers"]
                .as_object()
                .is_some_and(|m| m.values().any(|v| v.as_str() != Some("equal")))
        })
        .count();
    summary["queries_with_an_answer_not_equal_to_duckdb"] = json!(unequal);
    scale["summary"] = summary;
}

/// An SVG beside the JSON: each query's time on every engine (bars, log scale).
fn plot(out: &Path, sf: f64, scale: &Value) -> Result<()> {
    let queries = scale["queries"].as_array().cloned().unwrap_or_default();
    let labels: Vec<String> = queries
        .iter()
        .map(|q| format!("Q{}", q["query"].as_u64().unwrap_or(0)))
        .collect();
    let mut series: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, q) in queries.iter().enumerate() {
        if let Some(ms) = q["ms"].as_object() {
            for (engine, v) in ms {
                let s = series
                    .entry(engine.clone())
                    .or_insert_with(|| vec![f64::NAN; queries.len()]);
                s[i] = v.as_f64().unwrap_or(f64::NAN);
            }
        }
    }
    let stem = out.file_stem().and_then(|s| s.to_str()).unwrap_or("files");
    let path = out.with_file_name(format!("{stem}-sf{sf}.svg"));
    crate::bench::plots::bars(
        &path,
        &format!("TPC-H SF {sf} from Parquet: wall time per query (ms, fresh process)"),
        &labels,
        &series,
    )?;
    println!("wrote {}", path.display());
    Ok(())
}
