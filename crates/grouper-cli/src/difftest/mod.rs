//! Differential testing against DuckDB: random cases ([`gen`]), run on every grouper backend
//! and strategy that applies and on DuckDB ([`duckdb`]), compared by value ([`value`]);
//! mismatches are shrunk ([`shrink`]) and saved as regression files ([`regress`]) that CI
//! replays without DuckDB.
//!
//! Where DataFusion's semantics differ from DuckDB's, grouper takes the stricter side and the
//! comparison says so: an integer or decimal SUM whose exact result does not fit the type
//! DataFusion plans (DuckDB widens to HUGEINT) is an overflow error in grouper, accepted here
//! only when DuckDB's exact answer indeed does not fit; result types differ by design (DuckDB's
//! HUGEINT and DOUBLE averages against DataFusion's Int64 and DECIMAL), so values compare, not
//! types. The generator's module doc lists what it avoids generating, and why.

pub mod case;
pub mod duckdb;
pub mod gen;
pub mod regress;
pub mod shrink;
pub mod value;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use datafusion::catalog::MemTable;
use datafusion::prelude::SessionContext;
use grouper_core::cpu::Strategy;
use grouper_core::hash::HashFn;
use grouper_core::planner::Overrides;
use grouper_core::table::{BucketMap, Probing};
use grouper_gpu::{GpuOptions, GpuParams, GpuStrategy};

use case::{Case, Query, Table};
use duckdb::{Answer, Oracle};
use grouper::session::{session_context, GrouperConfig};
use grouper::Backend;
use value::{rows_of, sort_rows, Value};

/// The target running DataFusion's own aggregation: a baseline, not grouper.
pub const BASELINE: &str = "datafusion";

/// One engine configuration a case runs on.
pub struct Target {
    /// Short name: `cpu:shared`, `gpu:block_local/initial=1`, `datafusion`...
    pub name: String,
    /// Whether it runs on the GPU.
    pub gpu: bool,
    ctx: SessionContext,
}

/// Every configuration: DataFusion's own aggregation, grouper's CPU planner and each CPU
/// strategy (hash tables also started at one group, so they must grow), every CPU hashing
/// scheme, and with a GPU its planner, each GPU strategy and every GPU hashing scheme.
pub fn targets(gpu: bool, threads: usize) -> Result<Vec<Target>> {
    let mut configs: Vec<(String, bool, GrouperConfig)> = Vec::new();
    let base = GrouperConfig {
        threads: Some(threads),
        ..Default::default()
    };
    configs.push((
        BASELINE.into(),
        false,
        GrouperConfig {
            backend: Backend::DataFusion,
            ..base.clone()
        },
    ));
    let cpu = |strategy: Option<Strategy>, initial_groups: Option<usize>| GrouperConfig {
        backend: Backend::Cpu,
        overrides: Overrides {
            strategy,
            initial_groups,
            ..Default::default()
        },
        ..base.clone()
    };
    configs.push(("cpu:auto".into(), false, cpu(None, None)));
    for s in Strategy::ALL {
        configs.push((format!("cpu:{s}"), false, cpu(Some(s), None)));
    }
    for s in Strategy::ALL.into_iter().filter(|s| s.descriptor().grows) {
        configs.push((format!("cpu:{s}/initial=1"), false, cpu(Some(s), Some(1))));
    }
    // Every hashing scheme of the private tables, grown from one group, under both bucket
    // mappings between them (and a random multiply-shift multiplier for one).
    let schemes = [
        (Probing::Linear, BucketMap::Modulo, HashFn::Fnv1a),
        (Probing::Chained, BucketMap::HighBits, HashFn::Murmur3),
        (Probing::ChainedPlus, BucketMap::Modulo, HashFn::Murmur3),
        (Probing::Cuckoo2, BucketMap::HighBits, HashFn::MultiplyShift),
        (
            Probing::Cuckoo4,
            BucketMap::Modulo,
            HashFn::random_multiply_shift(threads as u64),
        ),
    ];
    for (probing, buckets, hash) in schemes {
        let mut config = cpu(Some(Strategy::ThreadLocal), Some(1));
        config.overrides.probing = Some(probing);
        config.overrides.buckets = Some(buckets);
        config.overrides.hash = Some(hash);
        configs.push((
            format!("cpu:thread_local/{probing}+{buckets}/initial=1"),
            false,
            config,
        ));
    }
    if gpu {
        let gpu = |strategy: Option<GpuStrategy>, initial_groups: Option<u64>| GrouperConfig {
            backend: Backend::Gpu,
            gpu: GpuOptions {
                strategy,
                params: GpuParams {
                    initial_groups,
                    ..Default::default()
                },
                ..Default::default()
            },
            ..base.clone()
        };
        configs.push(("gpu:auto".into(), true, gpu(None, None)));
        for s in GpuStrategy::ALL {
            configs.push((format!("gpu:{}", s.name()), true, gpu(Some(s), None)));
        }
        configs.push((
            "gpu:global/initial=1".into(),
            true,
            gpu(Some(GpuStrategy::GLOBAL), Some(1)),
        ));
        // The GPU's hashing schemes grown from one group: chained global tables under two
        // placements, cuckoo private tables (their only placement).
        for (s, probing) in [
            (GpuStrategy::GLOBAL, Probing::Chained),
            (GpuStrategy::SORTED, Probing::ChainedPlus),
            (GpuStrategy::BLOCK_LOCAL, Probing::Chained),
            (GpuStrategy::THREAD_PRIVATE, Probing::Cuckoo2),
            (GpuStrategy::THREAD_PRIVATE, Probing::Cuckoo4),
        ] {
            let mut config = gpu(Some(s), Some(1));
            config.gpu.params.probing = probing;
            configs.push((
                format!("gpu:{}/{probing}/initial=1", s.name()),
                true,
                config,
            ));
        }
        // Karnagel's modulo bucket mapping, with the hash it made spike.
        let mut config = gpu(Some(GpuStrategy::GLOBAL), Some(1));
        config.gpu.params.buckets = BucketMap::Modulo;
        config.gpu.params.hash = HashFn::Fnv1a;
        configs.push(("gpu:global/modulo+fnv1a/initial=1".into(), true, config));
    }
    configs
        .into_iter()
        .map(|(name, gpu, config)| {
            Ok(Target {
                name,
                gpu,
                ctx: session_context(&config)?,
            })
        })
        .collect()
}

/// What grouper answered: the planned result types (when planning got that far) and rows or
/// the error.
pub struct Ours {
    pub types: Option<Vec<DataType>>,
    pub result: std::result::Result<Vec<Vec<Value>>, String>,
}

/// Runs SQL on targets over one table.
pub struct Runner {
    rt: tokio::runtime::Runtime,
}

impl Runner {
    /// A runner with its own small Tokio runtime.
    pub fn new() -> Result<Self> {
        Ok(Self {
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?,
        })
    }

    /// Runs `sql` on `target` over `parts` registered as `t`. A panic is caught and reported
    /// as an error that never agrees with anything.
    pub fn run(&self, target: &Target, parts: &[Vec<RecordBatch>], sql: &str) -> Ours {
        let mut types = None;
        let res = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.rt.block_on(async {
                let schema = parts
                    .first()
                    .and_then(|p| p.first())
                    .map(|b| b.schema())
                    .ok_or("no partitions")?;
                let ctx = &target.ctx;
                let _ = ctx.deregister_table("t");
                let table = MemTable::try_new(schema, parts.to_vec()).map_err(|e| e.to_string())?;
                ctx.register_table("t", Arc::new(table))
                    .map_err(|e| e.to_string())?;
                let df = ctx.sql(sql).await.map_err(|e| e.to_string())?;
                let plan = df.create_physical_plan().await.map_err(|e| e.to_string())?;
                types = Some(
                    plan.schema()
                        .fields()
                        .iter()
                        .map(|f| f.data_type().clone())
                        .collect(),
                );
                let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx())
                    .await
                    .map_err(|e| e.to_string())?;
                let mut rows = Vec::new();
                for b in &batches {
                    rows.extend(rows_of(b.columns(), b.num_rows()));
                }
                Ok::<_, String>(rows)
            })
        }));
        let result = match res {
            Ok(r) => r,
            Err(p) => Err(format!(
                "PANIC: {}",
                p.downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("?")
            )),
        };
        Ours { types, result }
    }
}

/// The outcome of one comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Same answer (or both refused the query).
    Agree,
    /// grouper refused where DuckDB's exact answer does not fit DataFusion's result type:
    /// the stricter, correct outcome.
    StricterOverflow,
    /// The target does not apply to this query (a forced strategy or the GPU refused it with
    /// a clear error); the reason.
    Skip(String),
    /// Different answers.
    Mismatch(String),
    /// Different from DuckDB exactly as DataFusion's own aggregation is: DataFusion's
    /// semantics (its wrapping integer SUM, float AVG of integers) or a plan grouper left to
    /// DataFusion. Reported, not failed on.
    Shared(String),
}

/// Compares grouper's answer with DuckDB's. `unfiltered` is DuckDB's answer to the query
/// without HAVING, ORDER BY and LIMIT (see [`Query::unfiltered`]), when there is one: an
/// overflow in a group that HAVING or LIMIT then drops is still an overflow of the aggregate.
pub fn judge(query: &Query, duck: &Answer, ours: &Ours, unfiltered: Option<&Answer>) -> Verdict {
    match (duck, &ours.result) {
        (_, Err(e)) if e.starts_with("PANIC") => Verdict::Mismatch(e.clone()),
        (Err(_), Err(_)) => Verdict::Agree,
        // DuckDB sums into 128 bits and fails when a running sum leaves them; grouper's wider
        // accumulators reach the exact final sum, which fits its result type.
        (Err(d), Ok(_)) if d.contains("Overflow in HUGEINT") => {
            Verdict::Skip("DuckDB: a running sum overflowed HUGEINT".into())
        }
        (Err(d), Ok(rows)) => Verdict::Mismatch(format!(
            "DuckDB raised ({d}) but grouper answered {} rows",
            rows.len()
        )),
        (Ok(want), Err(e)) => {
            let lower = e.to_ascii_lowercase();
            if lower.contains("overflow") {
                let unfit_in = |rows: &[Vec<Value>]| {
                    ours.types.as_ref().is_some_and(|types| {
                        rows.iter()
                            .any(|r| r.iter().zip(types).any(|(v, t)| !v.fits(t)))
                    })
                };
                let unfit = unfit_in(want) || matches!(unfiltered, Some(Ok(all)) if unfit_in(all));
                return if unfit {
                    Verdict::StricterOverflow
                } else {
                    Verdict::Mismatch(format!(
                        "grouper raised ({e}) but DuckDB's answer fits the result types"
                    ))
                };
            }
            if lower.contains("unsupported") || lower.contains("invalid option") {
                let reason: String = e.chars().take(120).collect();
                return Verdict::Skip(reason);
            }
            Verdict::Mismatch(format!(
                "grouper raised ({e}); DuckDB answered {} rows",
                want.len()
            ))
        }
        (Ok(want), Ok(got)) => compare_rows(want, got, query.ordered()),
    }
}

fn compare_rows(want: &[Vec<Value>], got: &[Vec<Value>], ordered: bool) -> Verdict {
    if want.len() != got.len() {
        return Verdict::Mismatch(format!(
            "DuckDB {} rows, grouper {} rows",
            want.len(),
            got.len()
        ));
    }
    let (mut w, mut g) = (want.to_vec(), got.to_vec());
    if !ordered {
        sort_rows(&mut w);
        sort_rows(&mut g);
    }
    for (i, (a, b)) in w.iter().zip(&g).enumerate() {
        if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| !x.agrees(y)) {
            let show = |r: &[Value]| {
                r.iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Verdict::Mismatch(format!(
                "row {i}: DuckDB [{}], grouper [{}]",
                show(a),
                show(b)
            ));
        }
    }
    Verdict::Agree
}

/// What one batch of cases found.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Cases generated and run.
    pub cases: u64,
    /// Runs on CPU targets (DataFusion's included) and on GPU targets.
    pub cpu_runs: u64,
    pub gpu_runs: u64,
    /// Comparisons that agreed (both refusing included), and strict overflow refusals.
    pub agreed: u64,
    pub stricter_overflow: u64,
    /// Skips by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Mismatches found (after shrinking, when it ran).
    pub mismatches: Vec<Found>,
    /// Where DataFusion's own aggregation (the `datafusion` target, not grouper) differed from
    /// DuckDB: its integer SUM wraps on overflow. Reported, not failed on.
    pub datafusion_differs: u64,
    /// grouper targets that differed from DuckDB exactly as DataFusion's own aggregation did
    /// (DataFusion's semantics or a plan grouper left to DataFusion), by first message.
    pub shared_with_datafusion: BTreeMap<String, u64>,
    /// DuckDB's version.
    pub duckdb: String,
}

/// A mismatch.
#[derive(Debug, Clone)]
pub struct Found {
    pub seed: u64,
    pub target: String,
    pub message: String,
    pub sql: String,
    pub rows: usize,
    /// The regression file written, if any.
    pub saved: Option<PathBuf>,
}

/// How a batch runs.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// Cases are `case_seed(seed, 0..)`.
    pub seed: u64,
    /// Stop after this many cases...
    pub cases: Option<u64>,
    /// ...or after this long, whichever comes first.
    pub time: Option<Duration>,
    /// Shrink mismatches and save them as regression files here.
    pub save: Option<PathBuf>,
}

/// The seed of case `i` of a batch (splitmix64, so neighbouring batches do not overlap).
pub fn case_seed(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs one case on every target; returns DuckDB's answer and each target's verdict. A
/// mismatch that DataFusion's own aggregation shares exactly becomes [`Verdict::Shared`].
pub fn run_case<T: std::borrow::Borrow<Target>>(
    case: &Case,
    targets: &[T],
    runner: &Runner,
    oracle: &mut Oracle,
) -> Result<(Answer, Vec<Verdict>)> {
    let path = oracle.load(&case.table)?;
    let sql = case.query.sql();
    let duck = oracle.query(&path, &sql);
    let duck = match duck {
        Ok(d) => d,
        Err(e) => {
            oracle.unload(&path);
            return Err(e);
        }
    };
    let parts = case.table.partitioned()?;
    let mut unfiltered: Option<Answer> = None;
    let mut baseline: Option<Ours> = None;
    let mut verdicts = Vec::with_capacity(targets.len());
    for t in targets {
        let t = t.borrow();
        let ours = runner.run(t, &parts, &sql);
        let mut v = judge(&case.query, &duck, &ours, unfiltered.as_ref());
        if matches!(&v, Verdict::Mismatch(m) if m.contains("fits the result types")) {
            if let Some(q) = case.query.unfiltered() {
                if unfiltered.is_none() {
                    unfiltered = Some(oracle.query(&path, &q.sql())?);
                }
                v = judge(&case.query, &duck, &ours, unfiltered.as_ref());
            }
        }
        if let (Verdict::Mismatch(m), false) = (&v, t.name == BASELINE) {
            if baseline.is_none() {
                let base = targets
                    .iter()
                    .map(|t| t.borrow())
                    .find(|t| t.name == BASELINE);
                baseline = base.map(|b| runner.run(b, &parts, &sql));
            }
            if baseline
                .as_ref()
                .is_some_and(|b| same_outcome(&case.query, b, &ours))
            {
                v = Verdict::Shared(m.clone());
            }
        }
        verdicts.push(v);
    }
    oracle.unload(&path);
    Ok((duck, verdicts))
}

/// Whether two runs gave the same rows (or both failed).
fn same_outcome(query: &Query, a: &Ours, b: &Ours) -> bool {
    match (&a.result, &b.result) {
        (Err(_), Err(_)) => true,
        (Ok(x), Ok(y)) => compare_rows(x, y, query.ordered()) == Verdict::Agree,
        _ => false,
    }
}

/// Runs a batch of random cases; `progress` sees the summary after each case.
pub fn run_batch(
    opts: &BatchOptions,
    targets: &[Target],
    runner: &Runner,
    oracle: &mut Oracle,
    mut progress: impl FnMut(&Summary),
) -> Result<Summary> {
    let start = Instant::now();
    let mut s = Summary {
        duckdb: oracle.version.clone(),
        ..Default::default()
    };
    for i in 0.. {
        if opts.cases.is_some_and(|n| i >= n) || opts.time.is_some_and(|t| start.elapsed() >= t) {
            break;
        }
        let case = gen::generate(case_seed(opts.seed, i));
        let (_, verdicts) = run_case(&case, targets, runner, oracle)?;
        s.cases += 1;
        let mut shrunk = false;
        for (t, v) in targets.iter().zip(verdicts) {
            if t.gpu {
                s.gpu_runs += 1;
            } else {
                s.cpu_runs += 1;
            }
            match v {
                Verdict::Agree => s.agreed += 1,
                Verdict::StricterOverflow => s.stricter_overflow += 1,
                Verdict::Skip(r) => *s.skipped.entry(skip_class(&t.name, &r)).or_default() += 1,
                Verdict::Mismatch(_) if t.name == BASELINE => s.datafusion_differs += 1,
                Verdict::Shared(m) => {
                    let class: String = m.chars().take(70).collect();
                    *s.shared_with_datafusion.entry(class).or_default() += 1;
                }
                Verdict::Mismatch(m) => {
                    let mut found = Found {
                        seed: case.seed,
                        target: t.name.clone(),
                        message: m,
                        sql: case.query.sql(),
                        rows: case.table.rows(),
                        saved: None,
                    };
                    // Shrink and save the first mismatch of a case; later targets of the same
                    // case are listed only.
                    if let (Some(dir), false) = (&opts.save, shrunk) {
                        shrunk = true;
                        let base = targets.iter().find(|t| t.name == BASELINE);
                        let small = shrink::shrink(&case, t, base, runner, oracle, 300)?;
                        let (duck, verdict) = run_one(&small, t, base, runner, oracle)?;
                        if let Verdict::Mismatch(m) = verdict {
                            found.message = m;
                        }
                        found.sql = small.query.sql();
                        found.rows = small.table.rows();
                        found.saved = Some(regress::save(
                            dir,
                            &regress::Regression {
                                found: format!("{}: {}", t.name, found.message),
                                duckdb: oracle.version.clone(),
                                case: small,
                                expected: duck,
                            },
                        )?);
                    }
                    s.mismatches.push(found);
                }
            }
        }
        progress(&s);
    }
    Ok(s)
}

/// The reason of a skip, without the details that differ per query.
fn skip_class(target: &str, reason: &str) -> String {
    let short: String = reason.split(':').take(2).collect::<Vec<_>>().join(":");
    format!("{target}: {short}")
}

/// Runs one case on one target (and on `baseline`, to tell differences DataFusion shares).
pub fn run_one(
    case: &Case,
    target: &Target,
    baseline: Option<&Target>,
    runner: &Runner,
    oracle: &mut Oracle,
) -> Result<(Answer, Verdict)> {
    let targets: Vec<&Target> = std::iter::once(target).chain(baseline).collect();
    let (duck, v) = run_case(case, &targets, runner, oracle)?;
    Ok((duck, v.into_iter().next().unwrap_or(Verdict::Agree)))
}

/// Replays a table and query against a stored answer on every target.
pub fn replay(
    table: &Table,
    query: &Query,
    expected: &Answer,
    targets: &[Target],
    runner: &Runner,
) -> Result<Vec<(String, Verdict)>> {
    let parts = table.partitioned()?;
    let sql = query.sql();
    Ok(targets
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                judge(query, expected, &runner.run(t, &parts, &sql), None),
            )
        })
        .collect())
}
