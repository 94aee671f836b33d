//! `grouper bench tuner`: the runtime tuner against the exhaustive search, with Rosenfeld's four
//! metrics (§4.2):
//!
//! * quality: the exhaustive time of the configuration the tuner settled on / the best;
//! * cost: batches the search could have processed more had it known the best beforehand
//!   (its batches' time in best-batch units, minus their number);
//! * overhead: deciding time per batch / the time of a batch;
//! * effort: the search's time (its batches and its decisions) / a full evaluation (every
//!   configuration over the whole input).
//!
//! Query and data as in `bench gpu-sweep` (`SELECT k, SUM(v), COUNT(*) GROUP BY k`, dense u32
//! or scattered u64 keys, uniform), resident on the device in batches of `2^batch_rows_log2`
//! rows. Per (group count, key kind): every strategy that applies is searched exhaustively and
//! tuned from the planner's shape; then `auto` tunes from every strategy of the planned table
//! kind at once. Kernel times by CUDA events; compile time is reported apart.
// Benchmark harness, not a query path: it indexes vectors of sweep points it built itself.
#![allow(clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use arrow::array::{ArrayRef, Float32Array};
use clap::Args;
use grouper_core::tune::{Hyper, Space};
use grouper_core::GrouperError;
use grouper_gpu::{Gpu, GpuConfig, GpuOptions, GpuQuery, GpuStrategy, Prepared, TuneReport};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::bench::common::{earlier_points_from, git_commit, write_json};
use crate::bench::gpu_sweep::{dense_keys, draws, median, sweep_batch, sweep_query};

#[derive(Args, Debug)]
pub struct TunerArgs {
    /// log2 of the rows.
    #[arg(long, default_value_t = 26)]
    rows_log2: u32,
    /// log2 of the rows per batch (the unit the tuner measures).
    #[arg(long, default_value_t = 21)]
    batch_rows_log2: u32,
    /// log2 of the group counts (comma-separated).
    #[arg(long, default_value = "0,4,8,12,16,20,24", value_delimiter = ',')]
    groups_log2: Vec<u32>,
    /// Timed passes per configuration in the exhaustive search (the median counts).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Similarity s (plateaus). Several (e.g. 0.06,0: Rosenfeld's two scenarios) tune and
    /// judge each from the same exhaustive search; the summary is the first's.
    #[arg(long, default_value = "0.06", value_delimiter = ',', num_args = 1..)]
    similarity: Vec<f64>,
    /// Pruning factor p.
    #[arg(long, default_value_t = 1.07)]
    prune: f64,
    /// Variation threshold v_max.
    #[arg(long, default_value_t = 0.019)]
    v_max: f64,
    /// Most batches per measurement b_max.
    #[arg(long, default_value_t = 10)]
    b_max: u32,
    /// Patience: measurements without a gain beyond v_max before the search ends (0: never,
    /// Algorithm 1 as published).
    #[arg(long, default_value_t = 8)]
    patience: u32,
    /// Most passes over the input the tuner gets to converge.
    #[arg(long, default_value_t = 40)]
    max_passes: usize,
    /// Only these key kinds (comma-separated: dense, scattered; default both).
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1..)]
    pub(crate) keys: Vec<TunerKeys>,
    /// Only these strategies (comma-separated GPU strategy names; default all).
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub(crate) strategies: Vec<String>,
    /// Where to write the JSON result.
    #[arg(long, default_value = "bench/results/tuner.json")]
    pub(crate) out: PathBuf,
    /// Folder of the SVG plots of each exhaustive search (Rosenfeld's Fig. 2).
    #[arg(long, default_value = "bench/results/plots")]
    plots: PathBuf,
    /// Keep the points of an earlier run in --out of the same commit and device and measure
    /// only the others: a long sweep spread over several device calls. The JSON is written as
    /// each strategy's search ends, so a point cut off keeps the strategies it finished.
    #[arg(long)]
    resume: bool,
    /// With --resume, also keep the points an earlier run measured at these commits
    /// (comma-separated; a prefix matches): for a change that leaves the kernels as they were
    /// (`scripts/cubin-diff.sh`), so a GPU's sweep outlasts a session's commits. Each kept
    /// point names its commit (a point begun there, `begun_at`), and the JSON lists them.
    #[arg(long, value_delimiter = ',', requires = "resume")]
    resume_from: Vec<String>,
}

impl TunerArgs {
    /// The defaults, over `rows_log2` rows, the group counts `groups_log2` and the key kinds
    /// `keys` (empty: both), tuned with each of `similarity`, writing `out` and plots under
    /// `plots`, resuming an earlier run there when `resume` (of this commit or one of
    /// `resume_from`: `bench seeds rosenfeld`).
    pub(crate) fn for_seeds(
        rows_log2: u32,
        (groups_log2, keys): (Vec<u32>, Vec<TunerKeys>),
        similarity: Vec<f64>,
        (out, plots): (PathBuf, PathBuf),
        (resume, resume_from): (bool, Vec<String>),
    ) -> Self {
        TunerArgs {
            rows_log2,
            batch_rows_log2: rows_log2.saturating_sub(5).max(16),
            groups_log2,
            reps: 3,
            similarity,
            prune: 1.07,
            v_max: 0.019,
            b_max: 10,
            patience: 8,
            max_passes: 40,
            keys,
            strategies: Vec::new(),
            out,
            plots,
            resume,
            resume_from,
        }
    }
}

/// The sweep's key kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TunerKeys {
    /// u32 keys 0..groups: direct tables apply.
    Dense,
    /// u64 keys spread over the 64-bit range: hash tables only.
    Scattered,
}

/// A tuned run's quality, cost, overhead and effort.
type Metrics = (f64, f64, f64, f64);

/// One tuned run judged against the exhaustive times of the configurations it could pick.
pub(crate) struct Judged {
    quality: f64,
    cost: f64,
    overhead: f64,
    effort: f64,
    pub(crate) json: Value,
}

/// Options of a run over the benchmark's resident input.
fn options(a: &TunerArgs) -> GpuOptions {
    GpuOptions {
        resident: true,
        batch_rows: 1 << a.batch_rows_log2,
        ..Default::default()
    }
}

/// Options the benchmark's input is prepared with: tuned, so that the resident input is cut
/// into `2^batch_rows_log2`-row chunks, the unit the tuner measures (a resident input
/// prepared untuned launches whole, 4d5ca23). Every run retargeted from it, the exhaustive
/// search's and the tuner's, keeps the prepared input's chunks. Prepared untuned, the tuner
/// saw one chunk a pass and measured one shape a pass: a fifth of a full evaluation spent
/// searching (H100 at 2732164, `seeds/rosenfeld-h100-aae3391/`), where 6c932ce's chunks took
/// under 1%.
fn prepared_options(a: &TunerArgs) -> GpuOptions {
    GpuOptions {
        tune: Some(Hyper::default()),
        ..options(a)
    }
}

fn shaped(base: &GpuOptions, c: &GpuConfig) -> GpuOptions {
    let mut o = base.clone();
    o.strategy = Some(c.strategy);
    o.params.blocks_per_sm = Some(c.blocks_per_sm);
    o.params.threads_per_block = Some(c.threads);
    o.params.items_per_thread = c.items;
    o
}

/// Kernel ms of one pass over the input per configuration of `s` (those that can run), and
/// the seconds compiling took.
fn exhaustive(
    planned: &Prepared,
    a: &TunerArgs,
    space: &Space,
    s: GpuStrategy,
) -> Result<(HashMap<GpuConfig, f64>, f64)> {
    let base = options(a);
    let configs = space.all(s);
    // Kernels depend on threads and items, not on the grid: compile each once, in parallel
    // (NVRTC is CPU-bound; the host has cores to spare).
    let t = Instant::now();
    let shapes: Vec<GpuConfig> = configs
        .iter()
        .filter(|c| c.blocks_per_sm == space.blocks_per_sm[0])
        .copied()
        .collect();
    shapes.par_iter().for_each(|c| {
        let _ = planned.retarget(&shaped(&base, c));
    });
    let compile_s = t.elapsed().as_secs_f64();
    let mut table = HashMap::new();
    for c in configs {
        let mut p = match planned.retarget(&shaped(&base, &c)) {
            Ok(p) => p,
            Err(GrouperError::InvalidOption(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut times = Vec::with_capacity(a.reps + 1);
        let mut failed = None;
        for _ in 0..=a.reps.max(1) {
            match p.run_kernels() {
                Ok(r) => times.push(r.kernel_ms),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            eprintln!("  {c}: cannot run ({e})");
            continue;
        }
        // The first pass warms up (caches, table allocation); the median of the rest counts.
        table.insert(c, median(times.split_off(1)));
    }
    Ok((table, compile_s))
}

/// Tunes from `strategy`'s shape (`None`: from every strategy of the planned table kind),
/// pass after pass, until the search ends or `max_passes`; checks the result's group count.
fn tuned(
    planned: &Prepared,
    a: &TunerArgs,
    strategy: Option<GpuStrategy>,
    distinct: usize,
    similarity: f64,
) -> Result<(TuneReport, usize, usize)> {
    let opts = GpuOptions {
        strategy,
        tune: Some(Hyper {
            similarity,
            prune: a.prune,
            v_max: a.v_max,
            b_max: a.b_max,
            patience: if a.patience == 0 {
                u32::MAX
            } else {
                a.patience
            },
        }),
        ..options(a)
    };
    let mut p = planned.retarget(&opts)?;
    let mut passes = 0;
    loop {
        passes += 1;
        let r = p.run_kernels()?;
        let converged = r.tuning.as_ref().is_some_and(|t| t.converged);
        if converged || passes >= a.max_passes {
            break;
        }
    }
    let out = p.run()?;
    anyhow::ensure!(
        out.num_rows == distinct,
        "tuned {strategy:?}: {} groups, expected {distinct}",
        out.num_rows
    );
    let chunks = out.report.chunks;
    let want = (1usize << a.rows_log2).div_ceil(1 << a.batch_rows_log2);
    anyhow::ensure!(
        chunks == want,
        "tuned {strategy:?}: {chunks} chunks a pass, expected {want} (the input's chunks are not the tuner's batches)"
    );
    let t = out
        .report
        .tuning
        .ok_or_else(|| anyhow::anyhow!("the tuner did not run"))?;
    Ok((t, passes, chunks))
}

/// Tunes from `strategy` with each similarity of `a` and judges each against `table`: the
/// first one's judgement, and every one's JSON by s.
fn tuned_by_s(
    planned: &Prepared,
    a: &TunerArgs,
    strategy: Option<GpuStrategy>,
    distinct: usize,
    table: &HashMap<GpuConfig, f64>,
) -> Result<(Judged, Value)> {
    let mut by_s = serde_json::Map::new();
    let mut first = None;
    for &similarity in &a.similarity {
        let (t, passes, chunks) = tuned(planned, a, strategy, distinct, similarity)?;
        let j = judge(&t, passes, chunks, table);
        by_s.insert(similarity.to_string(), j.json.clone());
        first.get_or_insert(j);
    }
    let first = first.ok_or_else(|| anyhow::anyhow!("--similarity: none given"))?;
    Ok((first, Value::Object(by_s)))
}

/// Rosenfeld's four metrics of tuner run `t` against the exhaustive `table` (one pass of
/// `chunks` equal batches per configuration). As Rosenfeld injects the runtimes of his full
/// evaluation, every time here is the exhaustive one: a search batch of shape `c` costs
/// `table[c] / chunks`, so effort and cost compare like with like (the tuner's own window
/// times, of the aggregation kernel alone, only steer it; they are reported apart).
pub(crate) fn judge(
    t: &TuneReport,
    passes: usize,
    chunks: usize,
    table: &HashMap<GpuConfig, f64>,
) -> Judged {
    let (best_cfg, best_ms) = table
        .iter()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(c, t)| (*c, *t))
        .unwrap_or((t.starts[0], f64::NAN));
    let found = t.best.map(|b| b.0);
    let found_ms = found
        .and_then(|c| table.get(&c).copied())
        .unwrap_or(f64::NAN);
    let full_ms: f64 = table.values().sum();
    let batch_ms = best_ms / chunks.max(1) as f64;
    let (batches, searched) = t.batches;
    // A paired measurement's reference batches are search batches too.
    let pass_ms = |c: &GpuConfig, batches: u32| table.get(c).map(|ms| f64::from(batches) * ms);
    let search_ms: f64 = t
        .steps
        .iter()
        .flat_map(|s| {
            let reference = s.reference.and_then(|(r, b)| pass_ms(&r, b));
            [pass_ms(&s.config, s.batches), reference]
        })
        .flatten()
        .sum::<f64>()
        / chunks.max(1) as f64;
    let quality = found_ms / best_ms;
    let cost = search_ms / batch_ms - searched as f64;
    let per_batch_decision = t.decision_ms / batches.max(1) as f64;
    let overhead = per_batch_decision / batch_ms;
    let effort = (search_ms + t.decision_ms) / full_ms;
    let json = json!({
        "best": best_cfg.to_string(), "best_pass_ms": best_ms,
        "found": found.map(|c| c.to_string()), "found_pass_ms": found_ms,
        "starts": t.starts.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
        "quality": quality, "cost_batches": cost, "overhead": overhead,
        "decision_us_per_batch": per_batch_decision * 1e3, "effort": effort,
        "converged": t.converged, "paired": t.paired, "passes": passes, "batches": batches,
        "search_batches": searched, "search_ms": search_ms,
        "search_kernel_ms_measured": t.search_ms, "decision_ms": t.decision_ms,
        "full_evaluation_ms": full_ms, "compile_ms": t.compile_ms,
        "measured": t.steps.len(), "configurations": table.len(),
        "steps": t.steps.iter().map(|s| {
            let mut step = json!([s.config.to_string(), s.time * 1e6, s.batches]);
            if let (Some((r, b)), Some(v)) = (s.reference, step.as_array_mut()) {
                v.extend([json!(r.to_string()), json!(b)]);
            }
            step
        }).collect::<Vec<_>>(),
    });
    Judged {
        quality,
        cost,
        overhead,
        effort,
        json,
    }
}

pub async fn tuner(a: TunerArgs) -> Result<()> {
    for s in &a.strategies {
        s.parse::<GpuStrategy>()
            .map_err(|e| anyhow::anyhow!("--strategies: {e}"))?;
    }
    let wants =
        |s: GpuStrategy| a.strategies.is_empty() || a.strategies.iter().any(|x| x == s.name());
    let gpu = Gpu::get()?;
    let space = gpu.info.tuning_space();
    let rows = 1usize << a.rows_log2;
    let (r, v) = draws(rows);
    let values: ArrayRef = Arc::new(Float32Array::from(v));
    println!(
        "{}: {} shapes per strategy (blocks/SM {:?} x threads {:?} x items {:?}); 2^{} rows in batches of 2^{}",
        gpu.info.name, space.len(), space.blocks_per_sm, space.threads, space.items, a.rows_log2, a.batch_rows_log2
    );
    println!(
        "{:>5} {:>13} {:>16} {:>22} {:>22} {:>7} {:>7} {:>8} {:>7} {:>5}",
        "groups",
        "keys",
        "strategy",
        "best",
        "found",
        "quality",
        "cost",
        "overhead",
        "effort",
        "meas"
    );
    let (mut points, mut all, resumed_from) = match a.resume {
        true => earlier(&a, &gpu),
        false => Default::default(),
    };
    let write = |points: &[Value], all: &[Metrics]| {
        write_result(&a, (&gpu, &space), points, all, &resumed_from)
    };
    for &gl in &a.groups_log2 {
        let g = 1u64 << gl;
        let (dense, distinct) = dense_keys(&r, g);
        for keys in [TunerKeys::Dense, TunerKeys::Scattered] {
            if !a.keys.is_empty() && !a.keys.contains(&keys) {
                continue;
            }
            let kind = if keys == TunerKeys::Scattered {
                "scattered_u64"
            } else {
                "dense_u32"
            };
            // A point the run resumed finished is skipped; one it began keeps the strategies
            // it measured (a point's strategies can outlast a device call: five took 200 s at
            // 2^0 groups on an H100, so a point saved only whole was lost with the call).
            let earlier = points
                .iter()
                .find(|p| p["groups"] == g && p["keys"] == kind);
            if earlier.is_some_and(|p| p["partial"] != json!(true)) {
                continue;
            }
            let (mut per_strategy, mut tables) = earlier.map(begun).unwrap_or_default();
            // A point begun at a commit --resume-from named says so when finished here.
            let begun_at = earlier.map_or(Value::Null, |p| p["commit"].clone());
            let (batch, kind) = sweep_batch(&dense, keys == TunerKeys::Scattered, &values)?;
            let query: GpuQuery = sweep_query(batch.schema().field(0).data_type().clone());
            let planned = Prepared::new(&query, &[batch], &prepared_options(&a))?;
            let planned_strategy = planned.report().strategy;
            let point = |strategies: &serde_json::Map<String, Value>, auto: &Value| {
                let mut p = json!({
                    "groups": g, "distinct": distinct, "keys": kind,
                    "planned_strategy": planned_strategy.name(),
                    "strategies": strategies, "auto": auto,
                });
                if !begun_at.is_null() {
                    p["begun_at"] = begun_at.clone();
                }
                p
            };
            let row = |name: &str, j: &Judged| {
                println!(
                    "{:>5} {:>13} {:>16} {:>22} {:>22} {:>7.3} {:>7.1} {:>7.3}% {:>6.2}% {:>5}",
                    format!("2^{gl}"),
                    kind,
                    name,
                    j.json["best"].as_str().unwrap_or("-"),
                    j.json["found"].as_str().unwrap_or("-"),
                    j.quality,
                    j.cost,
                    100.0 * j.overhead,
                    100.0 * j.effort,
                    j.json["measured"]
                );
            };
            for s in GpuStrategy::ALL {
                // Private tables hold at most 64 slots: beyond 32 groups everything spills.
                if !wants(s)
                    || (s == GpuStrategy::THREAD_PRIVATE && g > 32)
                    || per_strategy.contains_key(s.name())
                {
                    continue;
                }
                let forced = GpuOptions {
                    strategy: Some(s),
                    ..options(&a)
                };
                if let Err(e) = planned.retarget(&forced) {
                    match e {
                        GrouperError::InvalidOption(_) => continue,
                        e => return Err(e.into()),
                    }
                }
                let (table, compile_s) = exhaustive(&planned, &a, &space, s)?;
                if table.is_empty() {
                    continue;
                }
                let (j, by_s) = tuned_by_s(&planned, &a, Some(s), distinct, &table)?;
                row(s.name(), &j);
                all.push((j.quality, j.cost, j.overhead, j.effort));
                let mut shapes: Vec<(&GpuConfig, &f64)> = table.iter().collect();
                shapes.sort_by(|x, y| x.1.total_cmp(y.1));
                // Rosenfeld's Fig. 2: the space at the best shape's items per thread.
                if let Some((best, _)) = shapes.first() {
                    let cells: Vec<(u32, u32, f64)> = shapes
                        .iter()
                        .filter(|(c, _)| c.items == best.items)
                        .map(|(c, ms)| (c.blocks_per_sm, c.threads, **ms))
                        .collect();
                    crate::bench::plots::shape_space(
                        &a.plots
                            .join(format!("tuner-space-{kind}-2p{gl}-{}.svg", s.name())),
                        &format!(
                            "{} on {kind} keys, 2^{gl} groups, {} items/thread: darker is faster",
                            s.name(),
                            best.items
                        ),
                        &cells,
                    )?;
                }
                per_strategy.insert(
                    s.name().into(),
                    json!({
                        "compile_s": compile_s,
                        "exhaustive": shapes.iter().map(|(c, ms)| json!([c.blocks_per_sm, c.threads, c.items, ms])).collect::<Vec<_>>(),
                        "tuner": j.json,
                        "tuner_by_s": by_s,
                    }),
                );
                tables.push((s, table));
                let mut partial = point(&per_strategy, &Value::Null);
                partial["partial"] = json!(true);
                keep(&mut points, partial);
                write(&points, &all)?;
            }
            // auto: every strategy of the planned table kind at once, judged against the best
            // of them; and how far that kind's best is from the best of all strategies.
            let family: HashMap<GpuConfig, f64> = tables
                .iter()
                .filter(|(s, _)| s.is_perfect() == planned_strategy.is_perfect())
                .flat_map(|(_, t)| t.iter().map(|(c, ms)| (*c, *ms)))
                .collect();
            let overall = tables
                .iter()
                .flat_map(|(_, t)| t.values())
                .fold(f64::INFINITY, |m, &x| m.min(x));
            let auto = if family.is_empty() || !a.strategies.is_empty() {
                Value::Null
            } else {
                let (j, by_s) = tuned_by_s(&planned, &a, None, distinct, &family)?;
                row(&format!("auto={planned_strategy}"), &j);
                all.push((j.quality, j.cost, j.overhead, j.effort));
                let mut v = j.json;
                v["found_vs_best_of_all_strategies"] =
                    json!(v["found_pass_ms"].as_f64().unwrap_or(f64::NAN) / overall);
                v["tuner_by_s"] = by_s;
                v
            };
            keep(&mut points, point(&per_strategy, &auto));
            write(&points, &all)?;
        }
    }
    let summary = write(&points, &all)?;
    println!("summary: {summary}");
    Ok(())
}

/// Each strategy's exhaustive table, by strategy.
type Tables = Vec<(GpuStrategy, HashMap<GpuConfig, f64>)>;

/// `point` in `points`, in place of the one of its group count and key kind a call began.
fn keep(points: &mut Vec<Value>, point: Value) {
    let same = |p: &&mut Value| p["groups"] == point["groups"] && p["keys"] == point["keys"];
    match points.iter_mut().find(same) {
        Some(p) => *p = point,
        None => points.push(point),
    }
}

/// What an earlier call measured of a point it did not finish (`"partial": true`): each
/// strategy's JSON, and its exhaustive table read back from it (`auto` is judged against
/// them once the rest are measured).
fn begun(point: &Value) -> (serde_json::Map<String, Value>, Tables) {
    let per_strategy = point["strategies"].as_object().cloned().unwrap_or_default();
    let tables = per_strategy
        .iter()
        .filter_map(|(name, v)| {
            let strategy: GpuStrategy = name.parse().ok()?;
            Some((strategy, exhaustive_table(strategy, &v["exhaustive"])))
        })
        .collect();
    (per_strategy, tables)
}

/// `strategy`'s exhaustive table as the JSON keeps it: rows `[blocks_per_sm, threads, items,
/// pass ms]` (a row that does not read so is left out).
pub(crate) fn exhaustive_table(strategy: GpuStrategy, rows: &Value) -> HashMap<GpuConfig, f64> {
    let shape = |r: &Value, i: usize| u32::try_from(r.get(i)?.as_u64()?).ok();
    rows.as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let config = GpuConfig {
                strategy,
                blocks_per_sm: shape(r, 0)?,
                threads: shape(r, 1)?,
                items: shape(r, 2)?,
            };
            Some((config, r.get(3)?.as_f64()?))
        })
        .collect()
}

/// An earlier run's points in `--out` when it was of this device and row count and of this
/// commit or one `--resume-from` names, the metrics of its tuned runs (for the summary), and
/// the commits whose points were kept.
fn earlier(a: &TunerArgs, gpu: &Gpu) -> (Vec<Value>, Vec<Metrics>, Vec<String>) {
    let rows = 1u64 << a.rows_log2;
    let (points, kept) = earlier_points_from(
        &a.out,
        &json!({ "commit": git_commit(), "device": gpu.info.name, "rows": rows }),
        &a.resume_from,
    );
    let metrics = |t: &Value| {
        Some((
            t["quality"].as_f64()?,
            t["cost_batches"].as_f64()?,
            t["overhead"].as_f64()?,
            t["effort"].as_f64()?,
        ))
    };
    let all = points
        .iter()
        .flat_map(|p| {
            let strategies = p["strategies"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values());
            strategies
                .filter_map(|s| metrics(&s["tuner"]))
                .chain(metrics(&p["auto"]))
                .collect::<Vec<_>>()
        })
        .collect();
    (points, all, kept)
}

/// The four metrics over every tuned run, against the targets.
fn summarize(all: &[Metrics]) -> Value {
    let n = all.len().max(1) as f64;
    let within5 = all.iter().filter(|x| x.0 <= 1.05).count() as f64 / n;
    let within1 = all.iter().filter(|x| x.0 <= 1.01).count() as f64 / n;
    let worst = all.iter().map(|x| x.0).fold(f64::NAN, f64::max);
    json!({
        "runs": all.len(),
        "quality_within_1pct": within1,
        "quality_within_5pct": within5,
        "quality_worst": worst,
        "cost_batches_median": median(all.iter().map(|x| x.1).collect()),
        "overhead_median": median(all.iter().map(|x| x.2).collect()),
        "effort_median": median(all.iter().map(|x| x.3).collect()),
        "effort_max": all.iter().map(|x| x.3).fold(f64::NAN, f64::max),
        "targets": {"within_5pct_at_least": 0.95, "worst_at_most": 1.15, "effort_at_most": 0.01},
    })
}

fn write_result(
    a: &TunerArgs,
    (gpu, space): (&Gpu, &Space),
    points: &[Value],
    all: &[Metrics],
    resumed_from: &[String],
) -> Result<Value> {
    let summary = summarize(all);
    let mut result = json!({
        "benchmark": "tuner",
        "device": gpu.info.name,
        "compute_capability": format!("{}.{}", gpu.info.compute_capability.0, gpu.info.compute_capability.1),
        "driver": gpu.info.driver_version,
        "commit": git_commit(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "query": "SELECT k, SUM(v), COUNT(*) FROM t GROUP BY k (v f32, uniform keys, resident, kernel time by CUDA events)",
        "rows": 1u64 << a.rows_log2,
        "batch_rows": 1u64 << a.batch_rows_log2,
        "space": {"blocks_per_sm": space.blocks_per_sm, "threads": space.threads, "items": space.items},
        "hyper": {"s": a.similarity, "p": a.prune, "v_max": a.v_max, "b_max": a.b_max, "patience": a.patience},
        "metrics": "every time from the exhaustive search (pass time / batches per pass per batch): quality = pass time of the found shape / best; cost = search batches' time in best-batch units - their number; overhead = deciding time per batch / best batch time; effort = (search batches' time + deciding time) / sum of every shape's pass time; search batches include a paired measurement's reference batches (steps: [shape, ns/row by the tuner, batches, and when paired the reference and its batches])",
        "summary": summary,
        "points": points,
    });
    if !resumed_from.is_empty() {
        result["resumed_from"] = json!(resumed_from);
    }
    write_json(&a.out, &result)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point begun by an earlier call gives back each strategy's JSON and exhaustive table,
    /// and the finished point replaces it rather than standing beside it.
    #[test]
    fn a_begun_point_resumes_its_strategies_and_is_replaced() {
        let point = json!({ "groups": 16, "keys": "scattered_u64", "partial": true, "auto": null,
            "strategies": {
                "global": { "exhaustive": [[1, 256, 2, 3.5], [2, 128, 1, 2.5]], "tuner": {} },
                "block_local": { "exhaustive": [[4, 64, 8, 1.0]] },
                "no_such_strategy": { "exhaustive": [[1, 1, 1, 9.0]] },
            } });
        let (per_strategy, tables) = begun(&point);
        assert_eq!(per_strategy.len(), 3, "the JSON stays as measured");
        assert_eq!(tables.len(), 2, "a name that does not parse has no table");
        let global = &tables
            .iter()
            .find(|(s, _)| *s == GpuStrategy::GLOBAL)
            .unwrap()
            .1;
        let shape = GpuConfig {
            strategy: GpuStrategy::GLOBAL,
            blocks_per_sm: 2,
            threads: 128,
            items: 1,
        };
        assert_eq!(global.len(), 2);
        assert_eq!(global.get(&shape), Some(&2.5));
        let other = json!({ "groups": 16, "keys": "dense_u32" });
        let mut points = vec![other.clone(), point];
        keep(
            &mut points,
            json!({ "groups": 16, "keys": "scattered_u64", "auto": {} }),
        );
        assert_eq!(points.len(), 2);
        assert_eq!(points[0], other);
        assert!(points[1]["partial"].is_null() && points[1]["auto"].is_object());
        keep(
            &mut points,
            json!({ "groups": 256, "keys": "scattered_u64" }),
        );
        assert_eq!(points.len(), 3);
    }
}
