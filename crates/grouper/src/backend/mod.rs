//! The backends a [`crate::exec::GroupByExec`] runs on, and how one execution picks its route.
//!
//! - [`cpu`]: grouper's CPU strategies, streaming every partition through workers.
//! - `gpu` (feature `gpu`): the GPU alone, streamed from a file scan or over collected input.
//! - `hybrid` (feature `gpu`): co-processing, GPU and CPU workers taking chunks from one queue.
//! - `pages` (feature `gpu`): Parquet files to the GPU as their pages, decoded there.
//!
//! [`Route::choose`] decides per execution; [`run`] runs the route and falls back to the CPU
//! where `auto` allows ([`Attempt::FallBack`]), so a GPU failure never fails an `auto` query.

pub mod cpu;
pub(crate) mod fused_scan;
mod fusion;
#[cfg(feature = "gpu")]
pub mod gpu;
#[cfg(feature = "gpu")]
pub mod hybrid;
mod mapped;
#[cfg(feature = "gpu")]
pub mod pages;
mod pooled_pages;
mod pooled_scan;
mod pruning;
mod row_group_morsels;
pub mod spill;

use std::fmt;
use std::sync::Arc;

use arrow::array::ArrayRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::metrics::BaselineMetrics;
use datafusion::physical_plan::ExecutionPlan;
use grouper_core::planner::Decision;
#[cfg(feature = "gpu")]
use grouper_gpu::{GpuQuery, GpuReport};

use crate::config::{Backend, Engine};
use crate::group_by::GroupByPlan;

/// Where one execution of a `GroupByExec` runs.
#[derive(Debug)]
pub(crate) enum Route {
    /// grouper's CPU strategies; with why, where a GPU was asked for or available and not used.
    Cpu(Option<NotOnGpu>),
    /// The GPU alone, over the fused source (`fused`) or the evaluated keys and arguments.
    #[cfg(feature = "gpu")]
    Gpu { query: GpuQuery, fused: bool },
    /// Co-processing over the fused source.
    #[cfg(feature = "gpu")]
    Hybrid { query: GpuQuery },
}

/// Rows from which `auto` co-processes an in-memory table (see [`Route::choose`]).
pub const HYBRID_MIN_ROWS: usize = 1 << 24;

/// The widest key domain a sample of an in-memory table's rows may show for `auto` to
/// co-process it. Wider, the GPU's share (a direct or hash table of millions of groups, read
/// back and merged with the CPU's) lost to the CPU alone: `bench cpu-sweep`, 2^25 rows on the
/// H100 host's 16 threads, co-processing 0.16-0.92 s at 2^22 and 2^24 uniform keys and 0.18-0.69
/// s at 2^22 and 2^24 zipf keys, the CPU 0.11-0.40 s, DataFusion 0.13-0.28 s
/// (`bench/results/cpu-sweep-h100-16t-*.json`); at 2^20 uniform keys co-processing still won
/// (0.05 s against 0.12).
pub const HYBRID_MAX_DOMAIN: u128 = 1 << 20;

impl Route {
    /// The route for `plan` under `engine`'s backend: the GPU when asked for (its absence is an
    /// error); hybrid likewise. `auto` sends a query the GPU fuses over a Parquet scan it reads
    /// as pages to the GPU alone from [`pages::PAGES_MIN_VALUES`] values; co-processes (hybrid) a
    /// query the GPU fuses over an in-memory table of at least [`HYBRID_MIN_ROWS`] rows, where
    /// the GPU's share outruns its set-up (compile, encode; the encoded input is cached for the
    /// next query), unless a sample of its rows shows keys wider than [`HYBRID_MAX_DOMAIN`];
    /// and otherwise stays on the CPU, saying why. `auto` with a GPU strategy asked for runs on the GPU when
    /// it can. Without the `gpu` feature every route is the CPU's, and the GPU backends are an
    /// error.
    pub(crate) fn choose(engine: &Engine, plan: &GroupByPlan) -> Result<Route> {
        #[cfg(feature = "gpu")]
        {
            // The GPU starts (`open`) only for a route that runs on it: a fresh process pays
            // about 0.35 s for it, which `auto` must not spend on a query the CPU runs.
            let gpu_query = || {
                let q = gpu::gpu_query(plan, &engine.gpu)?;
                crate::device_facts::open()?;
                Ok::<_, grouper_core::GrouperError>(q)
            };
            Ok(match engine.backend {
                Backend::Gpu => {
                    let (query, fused) = gpu_query().map_err(external)?;
                    Route::Gpu { query, fused }
                }
                Backend::Hybrid => {
                    let (query, fused) = gpu_query().map_err(external)?;
                    match fused {
                        true => Route::Hybrid { query },
                        false => Route::Gpu { query, fused },
                    }
                }
                Backend::Auto if engine.gpu.strategy.is_some() => match gpu_query() {
                    Ok((query, fused)) => Route::Gpu { query, fused },
                    Err(e) => Route::Cpu(Some(NotOnGpu::Said(format!("{e}; ran on the CPU")))),
                },
                Backend::Auto => match auto_gpu(engine, plan) {
                    // The GPU starts as the pages run, beside the files' footers and the first
                    // pages' reads (`pages::run_pages`); if it cannot, the CPU runs the query.
                    AutoGpu::Pages { query, fused } => Route::Gpu { query, fused },
                    AutoGpu::Hybrid { query } => match crate::device_facts::open() {
                        Ok(_) => Route::Hybrid { query },
                        Err(e) => Route::Cpu(Some(NotOnGpu::Said(e.to_string()))),
                    },
                    AutoGpu::No(why) => Route::Cpu(Some(NotOnGpu::Auto(why))),
                },
                Backend::Cpu | Backend::DataFusion => Route::Cpu(None),
            })
        }
        #[cfg(not(feature = "gpu"))]
        {
            let _ = plan;
            match engine.backend {
                Backend::Gpu | Backend::Hybrid => Err(DataFusionError::Plan(format!(
                    "--backend {}: {NO_GPU_FEATURE}",
                    engine.backend
                ))),
                Backend::Auto => Ok(Route::Cpu(Some(NotOnGpu::Said(NO_GPU_FEATURE.into())))),
                Backend::Cpu | Backend::DataFusion => Ok(Route::Cpu(None)),
            }
        }
    }
}

/// What `auto` does with the GPU for a plan, decided from facts that cost microseconds (the
/// fused form, row counts from statistics, then the driver's presence): nothing here starts the
/// GPU, and an input too small for it does not even load the driver library.
#[cfg(feature = "gpu")]
pub(crate) enum AutoGpu {
    /// The GPU alone, reading a Parquet scan (of at least [`pages::PAGES_MIN_VALUES`] values)
    /// as pages.
    Pages { query: GpuQuery, fused: bool },
    /// Co-processing over an in-memory table.
    Hybrid { query: GpuQuery },
    /// The CPU ([`NoGpu::reason`] says why).
    No(NoGpu),
}

#[cfg(feature = "gpu")]
impl AutoGpu {
    /// Starts what the route will need as soon as `auto` has chosen it while planning: for the
    /// pages, the GPU and the page decoder ([`pages::start_early`]); nothing for the others.
    pub(crate) fn start_early(&self) {
        if matches!(self, AutoGpu::Pages { .. }) {
            pages::start_early();
        }
    }
}

/// Why a query grouper's CPU runs did not run on a GPU, as `--explain` says it; `auto`'s own
/// reasons are put in words only when shown ([`NoGpu::reason`] loads the CUDA driver library).
/// Worded at once, every query `auto` ran on the CPU of a GPU machine paid for that load: TPC-H
/// Q1 from Parquet at SF 0.5 and 1 on the H200 host's 16 threads took 4-8 ms longer under
/// `auto` than under `--backend cpu`, the same plan.
#[derive(Debug, Clone)]
pub(crate) enum NotOnGpu {
    /// Said as it is.
    Said(String),
    /// `auto`'s reason.
    #[cfg(feature = "gpu")]
    Auto(NoGpu),
}

impl fmt::Display for NotOnGpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotOnGpu::Said(why) => f.write_str(why),
            #[cfg(feature = "gpu")]
            NotOnGpu::Auto(why) => f.write_str(&why.reason()),
        }
    }
}

/// Why `auto` keeps a plan off the GPU, told only when asked: telling it loads the CUDA driver
/// library (is there a GPU at all?), which costs a fresh process on a GPU machine ~4 ms, and the
/// plans DataFusion keeps ([`crate::harm`]) never ask.
#[cfg(feature = "gpu")]
#[derive(Debug, Clone)]
pub(crate) enum NoGpu {
    /// No CUDA driver library is installed.
    NoDriver,
    /// The GPU cannot run the plan.
    Unfit(String),
    /// The input is too small for the GPU to pay: in-memory rows, or Parquet pages' rows and
    /// values (rows × columns).
    Small {
        rows: Option<usize>,
        pages: Option<(u64, u64)>,
    },
    /// An in-memory table whose sampled key domain is wider than [`HYBRID_MAX_DOMAIN`].
    Wide(u128),
    /// A Parquet scan large enough for its pages to go to the GPU, with this string key's values
    /// not listed by its dictionary pages ([`pages::PAGES_MAX_STRINGS`]).
    Strings(String),
}

#[cfg(feature = "gpu")]
impl NoGpu {
    /// One sentence for `--explain`; no GPU at all comes first.
    pub(crate) fn reason(&self) -> String {
        let no_driver = || {
            grouper_core::GrouperError::GpuUnavailable(grouper_gpu::NO_DRIVER.into()).to_string()
        };
        if grouper_gpu::installed_driver().is_none() {
            return no_driver();
        }
        match self {
            NoGpu::NoDriver => no_driver(),
            NoGpu::Unfit(why) => why.clone(),
            NoGpu::Wide(domain) => format!(
                "the in-memory table's keys span at least {domain} values in a sample of its rows, over {HYBRID_MAX_DOMAIN}: co-processing that many groups lost to the CPU alone"
            ),
            NoGpu::Strings(key) => format!(
                "the Parquet files' dictionary pages do not list the values of string key `{key}` (at most {}): the GPU's page decoder codes only values its plan's dictionary holds",
                pages::PAGES_MAX_STRINGS
            ),
            NoGpu::Small { rows, pages } => format!(
                "the GPU{} was not started: co-processing pays only for a fused query over an in-memory table of at least {HYBRID_MIN_ROWS} rows, the GPU alone for a Parquet scan it reads as pages of at least {} values, rows times columns (input: {})",
                crate::device_facts::known().map(|i| format!(" ({})", i.name)).unwrap_or_default(),
                pages::PAGES_MIN_VALUES,
                match (rows, pages) {
                    (Some(r), _) => format!("an in-memory table of {r} rows"),
                    (None, Some((r, v))) => format!("Parquet pages of {r} rows, {v} values"),
                    (None, None) => "neither".to_string(),
                }
            ),
        }
    }
}

/// `auto`'s GPU decision for `plan` (see [`Route::choose`]).
#[cfg(feature = "gpu")]
pub(crate) fn auto_gpu(engine: &Engine, plan: &GroupByPlan) -> AutoGpu {
    let (query, fused) = match gpu::gpu_query(plan, &engine.gpu) {
        Ok(q) => q,
        Err(e) => return AutoGpu::No(NoGpu::Unfit(e.to_string())),
    };
    let rows = match (&plan.fused, fused) {
        (Some(f), true) => in_memory_rows(&f.source),
        _ => None,
    };
    let source = match (&plan.fused, fused) {
        (Some(f), true) if engine.gpu.pages && !engine.gpu.resident => {
            pages::page_source(&f.source, engine.footers.as_ref())
                .and_then(|p| Some((p, gpu::stream_bounds(&f.source, &query)?.1?)))
        }
        _ => None,
    };
    let pages = source
        .as_ref()
        .map(|(p, rows)| (pages::page_rows(p, *rows), pages::page_values(p, *rows)));
    let route = if let Some((source, _)) =
        source.filter(|_| pages.is_some_and(|(_, values)| values >= pages::PAGES_MIN_VALUES))
    {
        if let Some(key) = pages::unlisted_string_key(plan, &source) {
            return AutoGpu::No(NoGpu::Strings(key));
        }
        AutoGpu::Pages { query, fused }
    } else if rows.is_some_and(|r| r >= HYBRID_MIN_ROWS) {
        match plan.fused.as_ref().and_then(sampled_domain) {
            Some(domain) if domain > HYBRID_MAX_DOMAIN => return AutoGpu::No(NoGpu::Wide(domain)),
            _ => AutoGpu::Hybrid { query },
        }
    } else {
        return AutoGpu::No(NoGpu::Small { rows, pages });
    };
    match grouper_gpu::installed_driver() {
        Some(_) => route,
        None => AutoGpu::No(NoGpu::NoDriver),
    }
}

/// Why a build without the `gpu` feature runs on the CPU.
#[cfg(not(feature = "gpu"))]
pub(crate) const NO_GPU_FEATURE: &str = "grouper was built without its `gpu` feature";

/// What ran, for `--explain`.
#[derive(Debug, Clone)]
pub(crate) enum Ran {
    /// The CPU: its planner's decision, why not a GPU where one was in question, what its
    /// workers fused, and what they spilled.
    Cpu(
        Option<Decision>,
        Option<NotOnGpu>,
        Option<String>,
        Option<spill::SpillReport>,
    ),
    /// The GPU: its report, and whether the query had a fused form.
    #[cfg(feature = "gpu")]
    Gpu(GpuReport, bool),
    /// Co-processing: the GPU's report, the CPU's (rows, chunks) and decision, all chunks.
    /// (The report boxed: with the CPU's decision beside it, this variant outgrew the others.)
    #[cfg(feature = "gpu")]
    Hybrid(Box<GpuReport>, (u64, usize), Option<Decision>, usize),
}

impl fmt::Display for Ran {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "gpu")]
            Ran::Gpu(r, fused) => write!(f, "backend=gpu, {}", gpu::summary(r, *fused)),
            #[cfg(feature = "gpu")]
            Ran::Hybrid(r, (cpu_rows, cpu_chunks), d, chunks) => {
                let total = (r.rows_run + cpu_rows).max(1) as f64;
                write!(
                    f,
                    "backend=hybrid (split: GPU {} rows in {} chunks = {:.1}%, CPU {} rows in {} chunks = {:.1}%), gpu: {}",
                    r.rows_run, chunks - cpu_chunks, 100.0 * r.rows_run as f64 / total,
                    cpu_rows, cpu_chunks, 100.0 * *cpu_rows as f64 / total,
                    gpu::summary(r, true)
                )?;
                match d {
                    Some(d) => write!(f, ", cpu: {d}"),
                    None => Ok(()),
                }
            }
            Ran::Cpu(d, why, fused, spilled) => {
                write!(f, "backend=cpu")?;
                if let Some(w) = why {
                    write!(f, " ({w})")?;
                }
                if let Some(fu) = fused {
                    write!(f, ", {fu}")?;
                }
                if let Some(s) = spilled {
                    write!(f, ", {s}")?;
                }
                match d {
                    Some(d) => write!(f, ", {d}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// How an attempt on the GPU ended.
#[cfg(feature = "gpu")]
#[derive(Debug)]
pub(crate) enum Attempt {
    /// It ran: result columns (keys, then aggregates), result rows, what ran.
    Ran(Vec<ArrayRef>, usize, Box<Ran>),
    /// It failed under `auto`: the CPU runs the query instead, for this reason.
    FallBack(String),
}

/// A result: in memory (keys then aggregates, and the rows), or spilled and produced partition
/// by partition.
pub(crate) enum Output {
    /// Result columns in parts (each with every column), and rows over all parts.
    Parts(Vec<Vec<ArrayRef>>, usize),
    /// Spilled groups.
    Spilled(Box<spill::SpilledGroups>),
}

/// Runs `route` over `input`: the result and what ran. A GPU attempt that
/// falls back consumed the input once (a repartition's channels do not replay), so the CPU
/// then runs on a fresh copy of the input plan.
pub(crate) async fn run(
    route: Route,
    input: Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<(Output, Ran)> {
    #[cfg(feature = "gpu")]
    let fallback = engine.backend == Backend::Auto;
    let (reason, attempted) = match route {
        Route::Cpu(reason) => (reason, false),
        #[cfg(feature = "gpu")]
        Route::Gpu { query, fused } => {
            match gpu::run(query, fused, &input, plan, engine, context, baseline).await? {
                Attempt::Ran(columns, rows, ran) => {
                    return Ok((Output::Parts(vec![columns], rows), *ran))
                }
                Attempt::FallBack(why) => (Some(NotOnGpu::Said(why)), true),
            }
        }
        #[cfg(feature = "gpu")]
        Route::Hybrid { query } => {
            match hybrid::run(query, &input, plan, engine, context, baseline).await {
                Ok((columns, rows, ran)) => return Ok((Output::Parts(vec![columns], rows), ran)),
                Err(e) if fallback => (
                    Some(NotOnGpu::Said(format!(
                        "co-processing failed ({e}); ran on the CPU"
                    ))),
                    true,
                ),
                Err(e) => return Err(e),
            }
        }
    };
    // After a GPU attempt the CPU reads a fresh copy of the input, and not the fused source:
    // that node belongs to the consumed plan.
    let input = match attempted {
        true => reset_plan_states(input)?,
        false => input,
    };
    let (out, fused) = cpu::run_cpu(input, plan, !attempted, engine, context, baseline).await?;
    Ok(match out {
        cpu::Finished::Merged(out) => (
            Output::Parts(out.parts, out.num_rows),
            Ran::Cpu(out.decision, reason, fused, None),
        ),
        cpu::Finished::Spilled(s) => {
            let ran = Ran::Cpu(s.decision.clone(), reason, fused, Some(s.report));
            (Output::Spilled(s), ran)
        }
    })
}

/// A distributed plan's partial phase ([`crate::exec::Phase::Partial`]): `route`'s groups
/// over `input`, not finalized, as one part of columns (keys, then each aggregate's state).
/// The GPU's share runs as co-processing over the fused source (CPU workers may take chunks
/// too); a GPU route over evaluated keys has no partial groups and runs on the CPU.
pub(crate) async fn run_partial(
    route: Route,
    input: Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<(Output, Ran)> {
    let (reason, attempted) = match route {
        Route::Cpu(reason) => (reason, false),
        #[cfg(feature = "gpu")]
        Route::Gpu { query, fused: true } | Route::Hybrid { query } => {
            match hybrid::run_partial(query, &input, plan, engine, context, baseline).await {
                Ok((groups, ran)) => return Ok((partial_output(groups)?, ran)),
                Err(e) if engine.backend == Backend::Auto => (
                    Some(NotOnGpu::Said(format!(
                        "co-processing failed ({e}); ran on the CPU"
                    ))),
                    true,
                ),
                Err(e) => return Err(e),
            }
        }
        #[cfg(feature = "gpu")]
        Route::Gpu { fused: false, .. } => (
            Some(NotOnGpu::Said(
                "a partial phase over evaluated keys runs on the CPU".into(),
            )),
            false,
        ),
    };
    let input = match attempted {
        true => reset_plan_states(input)?,
        false => input,
    };
    let (out, fused) = cpu::run_cpu_finishing(
        input,
        plan,
        !attempted,
        engine,
        context,
        baseline,
        |agg, workers| agg.finish_partial(workers),
    )
    .await?;
    match out {
        cpu::Finished::Merged((groups, decision)) => Ok((
            partial_output(groups)?,
            Ran::Cpu(decision, reason, fused, None),
        )),
        cpu::Finished::Spilled(_) => Err(over_budget(DataFusionError::ResourcesExhausted(
            "a partial phase's groups do not spill".into(),
        ))),
    }
}

/// Partial groups as the one part of a partial phase's output, in the types they cross a
/// network in ([`crate::group_by::wire_type`]).
fn partial_output(groups: grouper_core::partial::PartialGroups) -> Result<Output> {
    let rows = groups.len;
    let columns = groups.into_columns();
    let types: Vec<_> = columns
        .iter()
        .map(|c| crate::group_by::wire_type(c.data_type()))
        .collect();
    Ok(Output::Parts(
        vec![crate::group_by::cast_to(&columns, &types)?],
        rows,
    ))
}

pub(crate) fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// The error for a memory reservation the session's pool refused.
pub(crate) fn over_budget(e: DataFusionError) -> DataFusionError {
    DataFusionError::ResourcesExhausted(format!(
        "memory limit exceeded: grouper's aggregation state outgrew the session's memory budget (raise --memory-limit): {e}"
    ))
}

/// The key domain a sample of an in-memory source's rows shows at the least: the product of the
/// ordinal keys' sampled ranges, a key without one (strings, floats) counted as one value;
/// `None` when no key has a range. Strings once made it `None` and `auto` co-processed any table
/// with a string key: db-benchmark q10 at 1e8 rows (three string keys beside integers spanning
/// 1e10 values) took ~141 s in its first run, DataFusion alone ~2 s
/// (`q10-1e8-memory-trace-h100.json`).
#[cfg(feature = "gpu")]
fn sampled_domain(fused: &crate::fuse::Fused) -> Option<u128> {
    fused
        .keys
        .iter()
        .filter_map(|&k| crate::stats::sampled_range(&fused.source, k))
        .fold(None, |d: Option<u128>, (lo, hi)| {
            Some(d.unwrap_or(1).saturating_mul((hi - lo) as u128 + 1))
        })
}

/// Rows of `source` when it is an in-memory table.
#[cfg(feature = "gpu")]
pub(crate) fn in_memory_rows(source: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    let mem = crate::stats::memory_source(source)?;
    Some(
        mem.partitions()
            .iter()
            .flatten()
            .map(|b| b.num_rows())
            .sum(),
    )
}

#[cfg(all(test, feature = "gpu"))]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::prelude::SessionContext;

    use super::sampled_domain;
    use crate::fuse::Fused;

    #[tokio::test]
    async fn an_in_memory_tables_sampled_domain_is_the_product_of_its_keys_ranges() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(10..20)),
                Arc::new(Int64Array::from_iter_values((0..10).map(|r| r * 100))),
                Arc::new(StringArray::from_iter_values(
                    (0..10).map(|r| format!("s{r}")),
                )),
            ],
        )
        .unwrap();
        let ctx = SessionContext::new();
        let table = datafusion::catalog::MemTable::try_new(schema, vec![vec![batch]]).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        let source = crate::test_support::physical_plan(&ctx, "SELECT a, b, s FROM t").await;
        let fused = |keys: Vec<usize>| Fused {
            source: Arc::clone(&source),
            filter: None,
            keys,
            args: vec![],
            columns: vec![DataType::Int64, DataType::Int64, DataType::Utf8],
        };
        assert_eq!(sampled_domain(&fused(vec![0])), Some(10));
        assert_eq!(sampled_domain(&fused(vec![1])), Some(901));
        assert_eq!(sampled_domain(&fused(vec![0, 1])), Some(9010));
        assert_eq!(sampled_domain(&fused(vec![3])), None, "no such column");
        // A string key counts one value: the domain is at least the integers'.
        assert_eq!(sampled_domain(&fused(vec![2])), None, "only a string key");
        assert_eq!(sampled_domain(&fused(vec![2, 1])), Some(901));
        assert_eq!(sampled_domain(&fused(vec![0, 2, 1])), Some(9010));
    }
}
