//! `grouper bench harm`: the timing twin of difftest. Random `GROUP BY` cases at sizes where
//! timing means something (1e6–1e7 rows, [`table`]; 1–6 keys of every kind, expressions,
//! filters, [`query`]) run with `auto` and with `--backend datafusion`, one fresh `grouper
//! query` process per run over Parquet files in the page cache, interleaved, answers compared.
//! A case where `auto` is more than `--tolerance` slower (and more than `--min-ms`) is measured
//! again; if it stays slower it is shrunk (simpler query, then fewer rows) and saved to
//! `--save` as a reproducer, a benchmark point `--replay` times again (not a timed test).
//!
//! The JSON (`--out`, rewritten after every case, so a killed run keeps what it measured)
//! holds every case's times and the distribution of the auto/DataFusion ratios.
// Benchmark harness, not a query path: it indexes vectors of runs and cases it built.
#![allow(clippy::indexing_slicing)]

pub mod query;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::bench::answers;
use crate::bench::common::{
    device, git_commit, grouper_query, median, run_grouper, turn, write_json,
};
use crate::difftest::case::Query;
use table::TableSpec;

#[derive(Args, Debug)]
pub struct HarmArgs {
    /// Random cases to run.
    #[arg(long, default_value_t = 100)]
    cases: u64,
    /// The first case's seed (cases are seeds `first-seed ..`; a run continues another).
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Rows of the random tables: drawn log-uniformly in MIN..MAX.
    #[arg(long, default_value = "1000000..10000000")]
    rows: String,
    /// Random tables the cases share (each case queries one).
    #[arg(long, default_value_t = 8)]
    tables: u64,
    /// Rows of the web-analytics table of the four measurements (0: skip them).
    #[arg(long, default_value_t = 2_000_000)]
    named_rows: usize,
    /// Timed runs of each case on each engine (interleaved); medians compare.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// How much slower `auto` may be than DataFusion alone before a case is harm (0.1: 10%).
    #[arg(long, default_value_t = 0.10)]
    tolerance: f64,
    /// Differences below this many milliseconds are not harm (process noise).
    #[arg(long, default_value_t = 20.0)]
    min_ms: f64,
    /// Shrinking trials per harmful case (each times both engines).
    #[arg(long, default_value_t = 12)]
    shrink_trials: usize,
    /// Threads of both engines (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Where the tables are written (and reused when present).
    #[arg(long, default_value = "target/bench-harm")]
    data: PathBuf,
    /// Where reproducers of harmful cases are saved.
    #[arg(long, default_value = "bench/harm")]
    save: PathBuf,
    /// Time the reproducers saved in this folder instead of random cases.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// The JSON result.
    #[arg(long, default_value = "bench/results/harm.json")]
    out: PathBuf,
}

/// A reproducer: the table (regenerated from its spec), the query, and what was measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reproducer {
    pub name: String,
    pub table: TableSpec,
    pub query: Query,
    /// The SQL, for reading (the query is the source).
    pub sql: String,
    pub found: String,
}

/// One case's times, in milliseconds: medians and fastest runs of `auto` and DataFusion alone,
/// and where `auto` ran its aggregations (from its `--explain`).
#[derive(Debug, Clone)]
struct Timing {
    auto: f64,
    datafusion: f64,
    auto_min: f64,
    datafusion_min: f64,
    /// The median of the runs' pairwise ratios (auto over DataFusion, each pair run back to
    /// back): robust to the machine's drift over a case.
    paired: f64,
    route: String,
}

impl Timing {
    fn ratio(&self) -> f64 {
        self.auto / self.datafusion
    }

    fn min_ratio(&self) -> f64 {
        self.auto_min / self.datafusion_min
    }
}

/// What one case came to.
enum Outcome {
    Timed(Timing),
    /// The engines' answers differ (a wrong answer: fatal for the run's verdict).
    Differ(String),
    /// Both engines failed (DataFusion's own limits, e.g. memory): not harm.
    Failed(String),
    /// `auto` failed where DataFusion alone answered: harm.
    AutoFailed(String),
}

/// The run: engines, threads, paths, thresholds.
struct Bench<'a> {
    a: &'a HarmArgs,
    threads: usize,
    work: PathBuf,
}

impl Bench<'_> {
    /// The Parquet file of `table`, written on first use (it is asked for again by every case
    /// and shrinking trial over the table).
    fn file(&self, table: &TableSpec) -> Result<PathBuf> {
        let key = serde_json::to_string(table)?;
        let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let path = self.a.data.join(format!("t-{h:016x}.parquet"));
        if !path.exists() {
            let t = std::time::Instant::now();
            table.write(&path)?;
            println!(
                "  wrote {} rows to {} in {:.1} s",
                table.rows,
                path.display(),
                t.elapsed().as_secs_f64()
            );
        }
        // No read into the page cache here: each case's untimed runs read the columns it needs.
        Ok(path)
    }

    /// An untimed run of each engine (answers compared, `auto`'s route read from its
    /// `--explain`), then `runs` timed runs of each, interleaved, alternating which goes first.
    fn time(&self, table: &Path, query: &Query, runs: usize) -> Result<Outcome> {
        let sql = query.sql();
        let tables = vec!["--table".to_string(), format!("t={}", table.display())];
        let flags: [Vec<String>; 2] = [vec![], vec!["--backend".into(), "datafusion".into()]];
        let csv = |e: usize| self.work.join(format!("e{e}.csv"));
        let route = explain(&tables, self.threads, &sql, &csv(0))?;
        let alone = run_grouper(&flags[1], &tables, self.threads, &sql, &csv(1))?;
        let route = match (route, alone) {
            (Ok(r), Ok(_)) => r,
            (Err(a), Err(d)) => {
                return Ok(Outcome::Failed(format!("auto: {a}; datafusion: {d}")));
            }
            (Err(a), Ok(_)) => return Ok(Outcome::AutoFailed(a)),
            (Ok(_), Err(d)) => return Ok(Outcome::Failed(format!("datafusion: {d}"))),
        };
        let (a, b) = (answers::read(&csv(0), true)?, answers::read(&csv(1), true)?);
        if let Some(d) = answers::differ(&a, &b) {
            return Ok(Outcome::Differ(d));
        }
        let mut times: [Vec<f64>; 2] = [vec![], vec![]];
        for r in 0..runs.max(1) {
            for e in turn(2, r) {
                match run_grouper(&flags[e], &tables, self.threads, &sql, &csv(e))? {
                    Ok(ms) => times[e].push(ms),
                    Err(err) if e == 0 => return Ok(Outcome::AutoFailed(err)),
                    Err(err) => return Ok(Outcome::Failed(format!("datafusion: {err}"))),
                }
            }
        }
        let min = |t: &[f64]| t.iter().copied().fold(f64::INFINITY, f64::min);
        let pairs: Vec<f64> = times[0].iter().zip(&times[1]).map(|(a, d)| a / d).collect();
        Ok(Outcome::Timed(Timing {
            auto: median(&times[0]),
            datafusion: median(&times[1]),
            auto_min: min(&times[0]),
            datafusion_min: min(&times[1]),
            paired: median(&pairs),
            route,
        }))
    }

    /// Whether `t` is harm: `auto` slower by more than the tolerance in its median, its pairs'
    /// median and its fastest run (a process's wall time is noisy upwards only), and by more
    /// than the noise floor.
    fn harmful(&self, t: &Timing) -> bool {
        let over = 1.0 + self.a.tolerance;
        t.ratio() > over
            && t.paired > over
            && t.min_ratio() > over
            && t.auto - t.datafusion > self.a.min_ms
    }

    /// Times again with twice the runs (at least 6): the new timing, and whether it is still
    /// harm.
    fn confirm(&self, table: &Path, query: &Query) -> Result<Option<(Timing, bool)>> {
        match self.time(table, query, (self.a.runs * 2).max(6))? {
            Outcome::Timed(t) => {
                let harm = self.harmful(&t);
                Ok(Some((t, harm)))
            }
            _ => Ok(None),
        }
    }

    /// Whether a shrinking candidate is still harm.
    fn still_harmful(&self, table: &Path, query: &Query) -> Result<bool> {
        Ok(self.confirm(table, query)?.is_some_and(|(_, harm)| harm))
    }

    /// A smaller case still harmful: simpler queries first, then halves of the rows.
    fn shrink(&self, table: &TableSpec, query: &Query) -> Result<(TableSpec, Query)> {
        let mut best = (table.clone(), query.clone());
        let mut left = self.a.shrink_trials;
        'query: while left > 0 {
            let path = self.file(&best.0)?;
            for cand in best.1.simpler() {
                if left == 0 {
                    break 'query;
                }
                left -= 1;
                if self.still_harmful(&path, &cand)? {
                    println!("    shrunk to: {}", cand.sql());
                    best.1 = cand;
                    continue 'query;
                }
            }
            break;
        }
        while left > 0 && best.0.rows >= 2 << 18 {
            left -= 1;
            let smaller = TableSpec {
                rows: best.0.rows / 2,
                ..best.0.clone()
            };
            if !self.still_harmful(&self.file(&smaller)?, &best.1)? {
                break;
            }
            println!("    shrunk to {} rows", smaller.rows);
            best.0 = smaller;
        }
        Ok(best)
    }

    fn save(&self, r: &Reproducer) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.a.save)?;
        let path = self.a.save.join(format!("{}.json", r.name));
        std::fs::write(&path, serde_json::to_string_pretty(r)? + "\n")?;
        Ok(path)
    }
}

/// A `grouper query --explain` run of `auto` (output written to `csv`): where it ran its
/// aggregations — grouper's operator with its backend and strategy, or DataFusion's.
fn explain(
    tables: &[String],
    threads: usize,
    sql: &str,
    csv: &Path,
) -> Result<std::result::Result<String, String>> {
    let plan = match grouper_query(&["--explain".into()], tables, threads, sql, csv)? {
        Ok((_, plan)) => plan,
        Err(e) => return Ok(Err(e)),
    };
    let ours: Vec<String> = plan
        .lines()
        .filter_map(|l| l.split_once("GroupByExec:").map(|(_, r)| r))
        .map(|r| {
            let field = |k: &str| {
                r.split(&format!("{k}="))
                    .nth(1)
                    .and_then(|v| v.split([' ', ',']).next())
                    .unwrap_or("?")
                    .to_string()
            };
            format!("grouper {} {}", field("backend"), field("strategy"))
        })
        .collect();
    Ok(Ok(if ours.is_empty() {
        "datafusion".into()
    } else {
        ours.join("; ")
    }))
}

/// `MIN..MAX` as a pair.
fn rows_range(s: &str) -> Result<(usize, usize)> {
    let (lo, hi) = s
        .split_once("..")
        .with_context(|| format!("--rows expects MIN..MAX, got '{s}'"))?;
    let (lo, hi): (usize, usize) = (lo.trim().parse()?, hi.trim().parse()?);
    if lo == 0 || hi < lo {
        bail!("--rows: MIN must be at least 1 and at most MAX, got '{s}'");
    }
    Ok((lo, hi))
}

/// The case list: (name, table, query).
fn cases(a: &HarmArgs) -> Result<Vec<(String, TableSpec, Query)>> {
    if let Some(dir) = &a.replay {
        let mut out = Vec::new();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for p in paths {
            let r: Reproducer = serde_json::from_str(&std::fs::read_to_string(&p)?)
                .with_context(|| format!("cannot read reproducer {}", p.display()))?;
            out.push((r.name, r.table, r.query));
        }
        return Ok(out);
    }
    let mut out = Vec::new();
    if a.named_rows > 0 {
        let (table, queries) = query::named(a.named_rows);
        for (name, q) in queries {
            out.push((format!("named: {name}"), table.clone(), q));
        }
    }
    let (lo, hi) = rows_range(&a.rows)?;
    let tables: Vec<TableSpec> = (0..a.tables.max(1))
        .map(|i| {
            // Log-uniform rows in lo..=hi, from the table's seed.
            let f = (table::mix_unit(i) * ((hi as f64).ln() - (lo as f64).ln())).exp();
            TableSpec::random(i, ((lo as f64 * f) as usize).clamp(lo, hi))
        })
        .collect();
    for seed in a.first_seed..a.first_seed + a.cases {
        let t = &tables[(seed % tables.len() as u64) as usize];
        out.push((format!("case {seed}"), t.clone(), query::random(seed, t)));
    }
    Ok(out)
}

/// Quantiles and a histogram of the ratios.
fn distribution(ratios: &[f64]) -> Value {
    let mut r = ratios.to_vec();
    r.sort_by(f64::total_cmp);
    let q = |p: f64| {
        r.get(((r.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let edges = [0.5, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0];
    let mut hist = serde_json::Map::new();
    let mut lo = 0.0;
    for hi in edges.iter().copied().chain([f64::INFINITY]) {
        let n = r.iter().filter(|&&x| x >= lo && x < hi).count();
        hist.insert(format!("{lo}..{hi}"), json!(n));
        lo = hi;
    }
    json!({
        "cases": r.len(),
        "min": q(0.0), "p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": q(1.0),
        "geomean": (r.iter().map(|x| x.ln()).sum::<f64>() / r.len().max(1) as f64).exp(),
        "histogram_auto_over_datafusion": hist,
    })
}

pub async fn harm(a: HarmArgs) -> Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let work = a.data.join("out");
    std::fs::create_dir_all(&work)?;
    let bench = Bench {
        a: &a,
        threads,
        work,
    };
    let list = cases(&a)?;
    let machine = device(threads);
    let mut result = json!({
        "benchmark": "harm",
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "commit": git_commit(),
        "device": machine,
        "threads": threads,
        "method": "one fresh `grouper query` process per run (wall time), after one untimed run of each (answers compared, auto's --explain read); auto and --backend datafusion interleaved over the same Parquet file in the page cache, alternating which goes first; medians, the median of the pairs' ratios and the fastest runs; a case over the tolerance in all three (and by more than min_ms) is timed again with twice the runs (at least 6) before it counts",
        "tolerance": a.tolerance,
        "min_ms": a.min_ms,
        "cases": [],
    });
    let mut ratios = Vec::new();
    let (mut harmful, mut differ, mut failed) = (0usize, 0usize, 0usize);
    for (i, (name, table, q)) in list.iter().enumerate() {
        let path = bench.file(table)?;
        let sql = q.sql();
        let mut entry = json!({"name": name, "rows": table.rows, "sql": sql});
        let outcome = bench.time(&path, q, a.runs)?;
        let line = match outcome {
            Outcome::Timed(mut t) => {
                let mut verdict = "ok";
                if bench.harmful(&t) {
                    verdict = "ok (not confirmed)";
                    if let Some((again, harm)) = bench.confirm(&path, q)? {
                        t = again;
                        if harm {
                            verdict = "harm";
                            harmful += 1;
                            let (st, sq) = bench.shrink(table, q)?;
                            let r = Reproducer {
                                name: format!("{}-{}", name.replace([' ', ':'], ""), git_commit()),
                                sql: sq.sql(),
                                table: st,
                                query: sq,
                                found: format!(
                                    "{name}: auto {:.1} ms against DataFusion alone {:.1} ({:.2}x; fastest runs {:.2}x), auto's route: {}; commit {}, {machine}",
                                    t.auto,
                                    t.datafusion,
                                    t.ratio(),
                                    t.min_ratio(),
                                    t.route,
                                    git_commit(),
                                ),
                            };
                            entry["reproducer"] = json!(bench.save(&r)?.display().to_string());
                        }
                    }
                }
                ratios.push(t.ratio());
                entry["auto_ms"] = json!(t.auto);
                entry["datafusion_ms"] = json!(t.datafusion);
                entry["auto_min_ms"] = json!(t.auto_min);
                entry["datafusion_min_ms"] = json!(t.datafusion_min);
                entry["ratio"] = json!(t.ratio());
                entry["paired_ratio"] = json!(t.paired);
                entry["route"] = json!(t.route);
                entry["verdict"] = json!(verdict);
                format!(
                    "auto {:.1} ms, datafusion {:.1} ms: {:.2}x (pairs {:.2}x, fastest {:.2}x) {verdict}; {}",
                    t.auto,
                    t.datafusion,
                    t.ratio(),
                    t.paired,
                    t.min_ratio(),
                    t.route
                )
            }
            Outcome::Differ(d) => {
                differ += 1;
                entry["verdict"] = json!("answers differ");
                entry["differ"] = json!(d);
                format!("ANSWERS DIFFER: {d}")
            }
            Outcome::Failed(e) => {
                failed += 1;
                entry["verdict"] = json!("failed");
                entry["error"] = json!(e);
                format!("failed: {e}")
            }
            Outcome::AutoFailed(e) => {
                harmful += 1;
                entry["verdict"] = json!("harm: auto failed where DataFusion alone answered");
                entry["error"] = json!(e);
                format!("HARM: auto failed where DataFusion alone answered: {e}")
            }
        };
        println!(
            "[{}/{}] {name} ({} rows): {line}\n    {sql}",
            i + 1,
            list.len(),
            table.rows
        );
        if let Some(c) = result["cases"].as_array_mut() {
            c.push(entry);
        }
        result["summary"] = json!({
            "ratios": distribution(&ratios),
            "harmful": harmful,
            "answers_differ": differ,
            "failed": failed,
        });
        write_json(&a.out, &result)?;
    }
    println!("summary: {}", result["summary"]);
    println!("wrote {}", a.out.display());
    if differ > 0 {
        bail!("{differ} cases where auto's answer differs from DataFusion's");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_fall_into_one_bucket_each() {
        let d = distribution(&[0.7, 1.0, 1.02, 1.3, 3.0]);
        let hist = d["histogram_auto_over_datafusion"]
            .as_object()
            .expect("histogram");
        let total: u64 = hist.values().filter_map(Value::as_u64).sum();
        assert_eq!(total, 5);
        assert_eq!(d["p50"], json!(1.02));
        assert_eq!(d["max"], json!(3.0));
    }

    #[test]
    fn rows_ranges_parse_and_reject_nonsense() {
        assert_eq!(rows_range("10..20").ok(), Some((10, 20)));
        assert!(rows_range("20..10").is_err());
        assert!(rows_range("0..10").is_err());
        assert!(rows_range("10").is_err());
    }
}
