//! The CPU backend: the input pulled by tasks with a [`grouper_core::Worker`] each (one a thread
//! taking a scan's morsels in turn, [`morsels`]; otherwise one a partition); keys and arguments
//! are evaluated and folded in as batches arrive
//! (nothing is materialised for `perfect` and `thread_local`), each worker's memory reserved
//! from the session's pool; then `Aggregation::finish` (or, co-processing, `finish_partial`)
//! merges them on grouper's pool. Past the pool's limit the groups spill ([`super::spill`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use datafusion::common::runtime::SpawnedTask;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::CastExpr;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::metrics::BaselineMetrics;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, PhysicalExpr};
use futures::StreamExt;
use grouper_core::agg::AggregateSpec;
use grouper_core::expr::vector::Scratch;
use grouper_core::planner::{Hints, KeyBounds};
use grouper_core::InputBatch;
use rayon::prelude::*;

use super::external;
use super::fused_scan;
use super::fusion::CpuFusion;
use super::pooled_scan;
use super::row_group_morsels;
use super::spill::{Budget, Spill, SpilledGroups};
use crate::config::Engine;
use crate::group_by::GroupByPlan;
use crate::stats::input_stats;

/// How the CPU workers' groups ended: merged in memory by `finish`, or spilled.
pub(crate) enum Finished<T> {
    /// What `finish` made of the workers.
    Merged(T),
    /// The groups are in spill files, to be merged partition by partition.
    Spilled(Box<SpilledGroups>),
}

/// Streams every partition of `input` through CPU workers and merges them (or spills them);
/// with what the workers fused (`--explain`), where they read below DataFusion's filter and
/// projections (only when `may_fuse`: the fused source must belong to `input`'s plan).
pub(crate) async fn run_cpu(
    input: Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    may_fuse: bool,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<(Finished<grouper_core::AggregateParts>, Option<String>)> {
    run_cpu_finishing(
        input,
        plan,
        may_fuse,
        engine,
        context,
        baseline,
        |agg, workers| agg.finish_parts(workers),
    )
    .await
}

/// [`run_cpu`], the workers' groups ending as `finish` makes them (finalized parts, or the
/// partial groups of a distributed plan's partial phase).
pub(crate) async fn run_cpu_finishing<T: Send + 'static>(
    input: Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    may_fuse: bool,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
    finish: impl FnOnce(&grouper_core::Aggregation, Vec<grouper_core::Worker>) -> grouper_core::Result<T>
        + Send
        + 'static,
) -> Result<(Finished<T>, Option<String>)> {
    let fusion = may_fuse
        .then(|| CpuFusion::new(plan, &input))
        .flatten()
        .map(|f| {
            let (decimals, keys) = (f.lane_only_columns(), f.key_only_columns());
            let narrowed = fused_scan::rebuilt(&f.source, &decimals, &keys, context)
                .or_else(|| fused_scan::rebuilt_narrowed(&f.source, &decimals, &keys));
            match narrowed {
                Some((scan, read)) => f.over(scan, read.to_string()),
                None => f,
            }
        });
    // Unfused, the workers read `input` itself: a scan of local Parquet files is read as they
    // use it too (files mapped, string keys of small dictionaries as dictionaries).
    let (input, fused) = match &fusion {
        Some(f) => (input, Some(f.describe())),
        None => match may_fuse
            .then(|| {
                fused_scan::unfused(&input, plan, context)
                    .or_else(|| fused_scan::rebuilt_narrowed(&input, &[], &plan.key_only_columns()))
            })
            .flatten()
        {
            Some((scan, read)) => (scan, Some(format!("read: {read}"))),
            None => (input, None),
        },
    };
    let out = run_cpu_with(input, fusion, plan, engine, context, baseline, finish).await?;
    Ok((out, fused))
}

/// What `input`'s statistics (DataFusion's, from Parquet footers or in-memory tables) say of
/// the rows, the distinct keys (the product of the key columns' distinct counts) and the keys'
/// ranges.
fn statistics_hints(
    input: &Arc<dyn ExecutionPlan>,
    plan: &GroupByPlan,
) -> (Hints, Option<KeyBounds>) {
    let Some(stats) = input_stats(input, plan) else {
        return (Hints::default(), None);
    };
    let bounds = KeyBounds {
        ranges: stats.keys.iter().map(|k| k.range).collect(),
        may_null: stats.keys.iter().map(|k| k.may_null).collect(),
    };
    (
        Hints {
            rows: stats.rows,
            distinct: stats.distinct,
        },
        Some(bounds),
    )
}

/// Streams every partition of `input` (of `fusion`'s source, where there is one) through CPU
/// workers; `finish` merges them, unless their groups outgrew the memory pool and spilled.
/// A worker over its reservation (or the shared dictionaries over theirs) starts a new
/// generation, evicts and spills; the others evict at their next batch.
pub(crate) async fn run_cpu_with<T: Send + 'static>(
    input: Arc<dyn ExecutionPlan>,
    fusion: Option<CpuFusion>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
    finish: impl FnOnce(&grouper_core::Aggregation, Vec<grouper_core::Worker>) -> grouper_core::Result<T>
        + Send
        + 'static,
) -> Result<Finished<T>> {
    let (hints, bounds) = statistics_hints(&input, plan);
    let pool = engine.pool.get().map_err(external)?;
    // Made inside grouper's pool: the planner's bounds on direct-index arrays count its
    // threads (the query's workers), not the process's global pool (all cores). Outside it,
    // `--threads 16` on 2 cores planned 16 arrays of TPC-H Q18's 6M-value domain at SF 1 as if
    // for 2 workers (3.3 GB; 0.54-4.0 s against DataFusion's 0.18-0.50 s).
    let agg = pool
        .install(|| {
            grouper_core::Aggregation::bounded(
                plan.spec.clone(),
                engine.overrides,
                hints,
                bounds,
                engine.cpu_profile.clone(),
            )
        })
        .map_err(external)?;
    let fusion = fusion.map(Arc::new);
    let source = fusion
        .as_ref()
        .map_or_else(|| Arc::clone(&input), |f| Arc::clone(&f.source));
    let threads = pool.current_num_threads();
    // Files holding the key in order give each worker a run of keys from its own byte range,
    // and workers whose ranges do not overlap skip the merge: morsels taken in turns would
    // interleave the ranges (TPC-H Q18 at SF 1 on 2 threads, `--backend cpu`: 491 ms with one
    // range a worker, 565 with morsels; 20 alternating runs each). Asked last, as it reads the
    // files' footers.
    let in_order = || {
        let cache = context
            .runtime_env()
            .cache_manager
            .get_file_metadata_cache();
        crate::harm::key_in_file_order(&input, plan, Some(cache.as_ref()))
    };
    let (source, parts, tasks_n) = morsels(source, in_order, threads, MIN_MORSEL_ROWS, context)?;
    grouper_core::trace::event(|| format!("cpu: {tasks_n} workers start on {parts} partitions"));
    let spill = Spill::new(context);
    let dictionaries = Arc::new(
        MemoryConsumer::new("GroupByExec (key dictionaries)").register(context.memory_pool()),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(tasks_n);
    for t in 0..tasks_n {
        let source = Arc::clone(&source);
        let context = Arc::clone(context);
        let next = Arc::clone(&next);
        let fusion = fusion.clone();
        let mut scratch = Scratch::default();
        let plan = Arc::clone(plan);
        let agg = Arc::clone(&agg);
        let mut worker = agg.worker();
        let compute = baseline.elapsed_compute().clone();
        let mut budget = Budget::new(
            context.memory_pool().memory_limit(),
            MemoryConsumer::new(format!("GroupByExec[{t}]"))
                .with_can_spill(spill.is_some())
                .register(context.memory_pool()),
            Arc::clone(&dictionaries),
            spill.clone(),
            Arc::clone(&pool),
            tasks_n,
        );
        // A SpawnedTask aborts its worker when dropped: a statement cancelled (its stream
        // dropped, Ctrl-C in the shell) stops reading, where a detached tokio task read its
        // input to the end (two cores busy for the rest of a long scan).
        tasks.push(SpawnedTask::spawn(async move {
            // `GROUPER_TRACE`: when each worker ends, and how its time divides between waiting
            // on its input streams (the scan's decoding) and grouper's work.
            // The clock is read per batch only when tracing.
            let tracing = grouper_core::trace::enabled();
            let started = std::time::Instant::now();
            let (mut waited, mut rows, mut taken) = (std::time::Duration::ZERO, 0usize, 0usize);
            // Morsel-driven: the worker takes the next untaken partition whenever it finishes
            // one, so a slow thread or a partition of more row groups holds no one else up.
            while let Some(p) = claim(&next, parts) {
                taken += 1;
                let mut stream = source.execute(p, Arc::clone(&context))?;
                loop {
                    let asked = tracing.then(std::time::Instant::now);
                    let Some(batch) = stream.next().await else {
                        break;
                    };
                    waited += asked.map_or(std::time::Duration::ZERO, |a| a.elapsed());
                    let batch = batch?;
                    rows += batch.num_rows();
                    // The fused program runs a morsel at a time: over a large in-memory batch
                    // (2^16 rows of built-in TPC-H) its nodes' values would leave the cache,
                    // and each batch's lanes, half a megabyte each, would be fresh pages from
                    // the kernel (their faults were 1-3% of Q1's CPU time in memory here).
                    let pieces = match fusion.is_some() {
                        true => morsel_slices(&batch),
                        false => vec![batch],
                    };
                    for piece in pieces {
                        let (batch, kept) = match &fusion {
                            None => (evaluate(&piece, &plan)?, None),
                            Some(f) => {
                                let _timer = compute.timer();
                                let in_place = worker.reads_kept_in_place();
                                match f.evaluate(&mut scratch, &piece, in_place)? {
                                    Some(e) => (e.batch, e.kept),
                                    None => continue,
                                }
                            }
                        };
                        let _timer = compute.timer();
                        match &kept {
                            None => worker.push(&batch),
                            Some(kept) => worker.push_selected(&batch, kept),
                        }
                        .map_err(external)?;
                        budget.after_batch(&agg, &mut worker)?;
                    }
                }
            }
            grouper_core::trace::event(|| {
                let total = started.elapsed().as_secs_f64() * 1e3;
                let waited = waited.as_secs_f64() * 1e3;
                format!(
                    "cpu worker {t}: {taken} of {parts} partitions, {rows} rows; {total:.1} ms, of which {waited:.1} waiting on input, {:.1} grouper's",
                    total - waited
                )
            });
            Ok::<_, DataFusionError>((worker, budget))
        }));
    }
    let mut workers = Vec::with_capacity(tasks_n);
    let mut reservations = Vec::with_capacity(tasks_n);
    for t in tasks {
        let (w, r) = t.join().await.map_err(external)??;
        workers.push(w);
        reservations.push(r);
    }
    let timer = baseline.elapsed_compute().timer();
    let out = match spill.filter(|s| s.spilled()) {
        Some(spill) => {
            let (agg, spec, merge_pool) = (Arc::clone(&agg), plan.spec.clone(), Arc::clone(&pool));
            // The workers' last groups follow the spilled ones, each worker on a thread.
            let spilled = tokio::task::spawn_blocking(move || {
                pool.install(|| {
                    workers.into_par_iter().try_for_each(|mut w| {
                        let groups = w.evict().map_err(external)?;
                        drop(w);
                        spill.write(groups)
                    })
                })?;
                Ok::<_, DataFusionError>(spill)
            })
            .await
            .map_err(external)??;
            drop(reservations);
            Finished::Spilled(Box::new(SpilledGroups::new(
                spilled,
                spec,
                agg.planned(),
                merge_pool,
                context,
            )))
        }
        None => Finished::Merged(
            tokio::task::spawn_blocking(move || pool.install(|| finish(&agg, workers)))
                .await
                .map_err(external)?
                .map_err(external)?,
        ),
    };
    timer.done();
    Ok(out)
}

/// Partitions per worker thread a scan is split into, at most: the query ends when its last
/// worker does, about half a morsel after the average one, and threads run at unequal speeds.
/// TPC-H Q1 at SF 10 in memory on the H200 host's 16 threads, 128 morsels of 470k rows (~25 ms
/// each): the workers finished 164-188 ms after the start, their average 176; with 512, within
/// 3 ms of each other (Q1 184-207 -> 179-189 ms, 4 rounds in turns). From Parquet likewise:
/// 131 morsels of SF 10's `lineitem` left workers ending 225-254 ms (the H200 host, per-thread
/// speeds 1.4x apart), 524 (a row group each) within 7 ms; a morsel of whole row groups costs
/// the pooled scan nothing more than its row groups do ([`super::pooled_scan`]).
const MORSELS_PER_THREAD: usize = 32;

/// Rows a morsel of memory or of Parquet row groups holds at least: each partition costs a
/// stream of its own (for a file, an open and a dictionary page per column), which a small
/// input's few batches would not repay. Local Parquet files cut a row group into parts only
/// past this many rows, and make morsels of whole row groups down to a quarter of it
/// ([`row_group_morsels::cut_scan`]): a whole row group decodes its dictionary pages once.
const MIN_MORSEL_ROWS: usize = 1 << 18;

/// In-memory morsels hold at least [`MIN_MORSEL_ROWS`] over this many rows (2^16), so that a
/// table of a few million rows still gives each thread several.
const MEMORY_MIN_ROWS_DIVISOR: usize = 4;

/// Bytes of files a morsel covers at least (a byte range holds the row groups that start in it).
const MIN_MORSEL_BYTES: u64 = 8 << 20;

/// `scan`'s in-memory batches and their rows, when it reads batches from memory.
fn in_memory(scan: &DataSourceExec) -> Option<(&MemorySourceConfig, usize)> {
    let source = scan.data_source().as_ref() as &dyn std::any::Any;
    let memory = source.downcast_ref::<MemorySourceConfig>()?;
    let rows = memory
        .partitions()
        .iter()
        .flatten()
        .map(RecordBatch::num_rows)
        .sum();
    Some((memory, rows))
}

/// How many morsels `scan` is worth: its in-memory rows over `min_rows`, or its files' bytes
/// over [`MIN_MORSEL_BYTES`]; `None` for other sources.
fn worth(scan: &DataSourceExec, min_rows: usize) -> Option<usize> {
    if let Some((_, rows)) = in_memory(scan) {
        return Some(rows / min_rows.max(1));
    }
    let source = scan.data_source().as_ref() as &dyn std::any::Any;
    let files = source.downcast_ref::<FileScanConfig>()?;
    let bytes: u64 = files
        .file_groups
        .iter()
        .flat_map(|g| g.iter())
        .map(|f| {
            f.range
                .as_ref()
                .map_or(f.object_meta.size, |r| (r.end - r.start).unsigned_abs())
        })
        .sum();
    usize::try_from(bytes / MIN_MORSEL_BYTES).ok()
}

/// The source the workers read, its partition count and how many worker tasks read it. A scan
/// (`DataSourceExec`: files or in-memory batches) is split into up to [`MORSELS_PER_THREAD`]
/// times `threads` partitions, a multiple of `threads`, none under about `min_rows` rows
/// ([`MIN_MORSEL_ROWS`]) or [`MIN_MORSEL_BYTES`] of files ([`worth`]), where it can be (whole
/// local Parquet files by rows, row groups cut where larger: [`row_group_morsels`]; other
/// files by DataFusion's byte ranges), and `threads` workers take them one after another. Any other input, a scan with a row limit
/// (each piece would apply it; DataFusion's in-memory split drops it) or one `keep_whole` asks
/// to keep keeps one worker per partition, all started at once (a repartition's outputs must
/// all be drained together).
fn morsels(
    source: Arc<dyn ExecutionPlan>,
    keep_whole: impl FnOnce() -> bool,
    threads: usize,
    min_rows: usize,
    context: &TaskContext,
) -> Result<(Arc<dyn ExecutionPlan>, usize, usize)> {
    // A narrowed table's scan is split below its widening, which then widens each morsel.
    if let Some(w) = source.downcast_ref::<crate::narrow_table::WidenExec>() {
        let (inner, parts, workers) = morsels(
            Arc::clone(w.input()),
            keep_whole,
            threads,
            min_rows,
            context,
        )?;
        let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
        return Ok((
            source.replace_children(vec![inner], options)?,
            parts,
            workers,
        ));
    }
    let scan = source.downcast_ref::<DataSourceExec>();
    let Some(scan) = scan.filter(|_| source.fetch().is_none() && !keep_whole()) else {
        let parts = source.output_partitioning().partition_count();
        return Ok((source, parts, parts));
    };
    let threads = threads.max(1);
    let min_rows = match in_memory(scan) {
        Some(_) => min_rows / MEMORY_MIN_ROWS_DIVISOR,
        None => min_rows,
    };
    let most = threads.saturating_mul(MORSELS_PER_THREAD);
    // A whole number of morsels a worker: 38 equal morsels (db-benchmark's 1e7 rows over
    // 2^18) on 16 threads left six workers a third more rows than the rest, whose wait set the
    // query's time (q4: workers of three morsels 8.9-9.7 ms, of two 5.8-6.8).
    let target = worth(scan, min_rows).map_or(most, |n| {
        n.clamp(threads, most).next_multiple_of(threads).min(most)
    });
    let finer = match sliced(scan, target)? {
        Some(sliced) => sliced,
        None => {
            let cut = row_group_morsels::cut_scan(&source, target, min_rows, context)
                .and_then(|cut| pooled_scan::over(&cut, context).or_else(|| cut.scan()));
            match cut {
                Some(scan) => scan,
                None => source
                    .repartitioned(target, context.session_config().options())?
                    .unwrap_or(source),
            }
        }
    };
    let parts = finer.output_partitioning().partition_count();
    Ok((finer, parts, parts.min(threads)))
}

/// An in-memory scan of fewer batches than `target`, cut into `target` partitions of
/// zero-copy slices of about equal rows; `None` for any other scan (DataFusion's split serves
/// it), or an ordered one. DataFusion splits in-memory data between batches only, never within
/// one, and not at all when there are fewer batches than partitions: 32 batches of 2^20 rows
/// (`bench cpu-sweep` at 2^25 rows) on 16 threads stayed 16 partitions of two batches, one a
/// worker, however unequal the threads' speeds.
fn sliced(scan: &DataSourceExec, target: usize) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some((memory, rows)) = in_memory(scan) else {
        return Ok(None);
    };
    let batches = || memory.partitions().iter().flatten();
    if batches().count() >= target || !memory.sort_information().is_empty() || rows == 0 {
        return Ok(None);
    }
    let piece = rows.div_ceil(target);
    let mut parts = vec![Vec::new(); target];
    let mut start = 0;
    for batch in batches() {
        for offset in (0..batch.num_rows()).step_by(piece) {
            let slice = batch.slice(offset, piece.min(batch.num_rows() - offset));
            // Each slice in the partition where its first row falls, rows in their order.
            let p = (start * target / rows).min(target - 1);
            start += slice.num_rows();
            if let Some(part) = parts.get_mut(p) {
                part.push(slice);
            }
        }
    }
    parts.retain(|p| !p.is_empty());
    let config = MemorySourceConfig::try_new(
        &parts,
        memory.original_schema(),
        memory.projection().clone(),
    )?
    .with_show_sizes(memory.show_sizes());
    Ok(Some(DataSourceExec::from_data_source(config)))
}

/// `batch` cut into zero-copy slices of at most [`grouper_core::input::MORSEL_ROWS`] rows
/// ([`grouper_core::input::morsel_ranges`]; the batch itself when it is no larger).
fn morsel_slices(batch: &RecordBatch) -> Vec<RecordBatch> {
    if batch.num_rows() <= grouper_core::input::MORSEL_ROWS {
        return vec![batch.clone()];
    }
    grouper_core::input::morsel_ranges(batch.num_rows())
        .map(|(off, len)| batch.slice(off, len))
        .collect()
}

/// The next partition no worker has taken yet, if any.
fn claim(next: &AtomicUsize, parts: usize) -> Option<usize> {
    let p = next.fetch_add(1, Ordering::Relaxed);
    (p < parts).then_some(p)
}

/// `arg` without the cast DataFusion put over it, where `spec` reads the uncast values as they
/// are ([`AggregateSpec::narrow_type`]: `SUM(CAST(v AS BIGINT))` and `AVG(CAST(v AS DOUBLE))`
/// of an Int32 `v`), so no cast array is written per batch.
fn uncast<'a>(
    arg: &'a Arc<dyn PhysicalExpr>,
    spec: &AggregateSpec,
    schema: &Schema,
) -> Result<&'a Arc<dyn PhysicalExpr>> {
    let Some(cast) = arg.downcast_ref::<CastExpr>() else {
        return Ok(arg);
    };
    let inner = cast.expr();
    Ok(match spec.narrow_type() {
        Some(t) if inner.data_type(schema)? == t => inner,
        _ => arg,
    })
}

/// Evaluates the key and argument expressions of one input batch.
pub(crate) fn evaluate(batch: &RecordBatch, plan: &GroupByPlan) -> Result<InputBatch> {
    let rows = batch.num_rows();
    let keys = plan
        .keys
        .iter()
        .map(|(e, _)| e.evaluate(batch)?.into_array(rows))
        .collect::<Result<Vec<_>>>()?;
    let schema = batch.schema();
    let args = plan
        .args
        .iter()
        .zip(&plan.spec.aggregates)
        .map(|(a, spec)| {
            a.as_ref()
                .map(|e| {
                    let e = uncast(e, spec, &schema)?;
                    e.evaluate(batch)?.into_array(rows)
                })
                .transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    InputBatch::try_new(&plan.spec, keys, args, rows)
        .map_err(|e| DataFusionError::External(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use datafusion::catalog::MemTable;
    use datafusion::physical_plan::{collect, collect_partitioned, ExecutionPlanProperties};

    use super::{claim, morsel_slices, morsels, PhysicalExpr, MORSELS_PER_THREAD};
    use crate::config::Backend;
    use crate::test_support::physical_plan;
    use crate::GrouperConfig;

    /// The schema of [`kv_rows`].
    fn kv_schema() -> Arc<Schema> {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ]))
    }

    /// A batch of `rows`: `k` = row % 7, `v` = row.
    fn kv_rows(rows: std::ops::Range<i64>) -> RecordBatch {
        RecordBatch::try_new(
            kv_schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.clone().map(|r| r % 7))),
                Arc::new(Int64Array::from_iter_values(rows)),
            ],
        )
        .unwrap()
    }

    /// 3 partitions of 20 batches of 100 rows ([`kv_rows`]).
    fn table() -> Arc<MemTable> {
        let parts = (0..3i64)
            .map(|p| {
                (0..20i64)
                    .map(|b| kv_rows((p * 2_000 + b * 100)..(p * 2_000 + (b + 1) * 100)))
                    .collect()
            })
            .collect();
        Arc::new(MemTable::try_new(kv_schema(), parts).unwrap())
    }

    /// The cast DataFusion puts over an Int32 argument of SUM (to Int64) or AVG (to Float64) is
    /// skipped; any other cast, or one under another aggregate, stays.
    #[test]
    fn only_casts_of_int32_under_sum_and_avg_are_skipped() {
        use datafusion::physical_expr::expressions::{cast, col};
        use grouper_core::agg::{AggKind, AggregateSpec};
        let schema = Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("l", DataType::Int64, true),
        ]);
        let cast_of = |c: &str, t: DataType| cast(col(c, &schema).unwrap(), &schema, t).unwrap();
        let skipped = |arg: &Arc<dyn PhysicalExpr>, kind, t| {
            let spec = AggregateSpec::new(kind, t);
            !Arc::ptr_eq(super::uncast(arg, &spec, &schema).unwrap(), arg)
        };
        let (sum_i, avg_i) = (
            cast_of("i", DataType::Int64),
            cast_of("i", DataType::Float64),
        );
        assert!(skipped(&sum_i, AggKind::Sum, DataType::Int64));
        assert!(skipped(&avg_i, AggKind::Avg, DataType::Float64));
        assert!(!skipped(&sum_i, AggKind::Min, DataType::Int64));
        assert!(!skipped(&avg_i, AggKind::Sum, DataType::Float64));
        let avg_l = cast_of("l", DataType::Float64);
        assert!(
            !skipped(&avg_l, AggKind::Avg, DataType::Float64),
            "Int64 is no narrower type"
        );
        let plain = col("l", &schema).unwrap();
        assert!(!skipped(&plain, AggKind::Sum, DataType::Int64), "no cast");
    }

    #[test]
    fn claims_hand_out_each_partition_once() {
        let next = AtomicUsize::new(0);
        let got: Vec<_> = std::iter::from_fn(|| claim(&next, 5)).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!(claim(&next, 5), None, "nothing after the last");
    }

    #[tokio::test]
    async fn a_scan_with_a_row_limit_is_not_split() {
        // One partition of 80 batches of 8,192 rows (two morsels' worth): DataFusion puts the
        // limit into the scan itself, and its in-memory split would drop it.
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let batches = (0..80i64)
            .map(|b| {
                let rows = (b * 8_192)..((b + 1) * 8_192);
                let k = Arc::new(Int64Array::from_iter_values(rows.map(|r| r % 7)));
                RecordBatch::try_new(Arc::clone(&schema), vec![k]).unwrap()
            })
            .collect();
        let one = Arc::new(MemTable::try_new(schema, vec![batches]).unwrap());
        let cpu = crate::session_context(&GrouperConfig {
            backend: Backend::Cpu,
            threads: Some(1),
            ..Default::default()
        })
        .unwrap();
        cpu.register_table("t", one as _).unwrap();
        let scan = physical_plan(&cpu, "SELECT * FROM t LIMIT 1000").await;
        let (_, parts, _) = morsels(scan, || false, 1, 100, &cpu.task_ctx()).unwrap();
        assert_eq!(parts, 1, "a limited scan stays whole");
        let sql = "SELECT k, count(*) AS n FROM (SELECT * FROM t LIMIT 1000) s GROUP BY k";
        let got = collect(physical_plan(&cpu, sql).await, cpu.task_ctx())
            .await
            .unwrap();
        let counted: i64 = got
            .iter()
            .map(|b| {
                let n = b.column(1).as_primitive::<Int64Type>();
                n.iter().flatten().sum::<i64>()
            })
            .sum();
        assert_eq!(counted, 1000, "the limit's rows, once");
    }

    #[test]
    fn a_large_batch_is_cut_into_morsels_in_order() {
        let most = grouper_core::input::MORSEL_ROWS;
        for rows in [0, 1, most - 1, most, most + 1, 3 * most + 5] {
            let batch = kv_rows(0..rows as i64);
            let pieces = morsel_slices(&batch);
            assert!(pieces.iter().all(|p| p.num_rows() <= most), "{rows} rows");
            assert_eq!(pieces.len(), rows.div_ceil(most).max(1), "{rows} rows");
            let seen: Vec<i64> = pieces
                .iter()
                .flat_map(|p| p.column(1).as_primitive::<Int64Type>().values().to_vec())
                .collect();
            assert_eq!(seen, (0..rows as i64).collect::<Vec<_>>(), "{rows} rows");
        }
    }

    #[tokio::test]
    async fn batches_fewer_than_the_morsels_are_sliced() {
        // 2 partitions of 2 batches of 1,000 rows: 4 batches for 16 morsels.
        let batch = |b: i64| kv_rows((b * 1_000)..((b + 1) * 1_000));
        let parts = vec![vec![batch(0), batch(1)], vec![batch(2), batch(3)]];
        let ctx = datafusion::prelude::SessionContext::new();
        ctx.register_table(
            "t",
            Arc::new(MemTable::try_new(kv_schema(), parts).unwrap()),
        )
        .unwrap();
        // The projection (v alone) is kept.
        let scan = physical_plan(&ctx, "SELECT v FROM t").await;
        // In memory, morsels of a quarter of `min_rows` rows: 4,000 over 250.
        let (finer, parts, tasks) = morsels(scan, || false, 2, 1_000, &ctx.task_ctx()).unwrap();
        assert_eq!((parts, tasks), (16, 2), "sliced to morsels");
        let mut seen = Vec::new();
        let partitions = collect_partitioned(finer, ctx.task_ctx()).await.unwrap();
        for (p, got) in partitions.iter().enumerate() {
            let rows: usize = got.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(rows, 250, "partition {p}: equal shares");
            for b in got {
                assert_eq!(b.num_columns(), 1);
                seen.extend(
                    b.column(0)
                        .as_primitive::<Int64Type>()
                        .values()
                        .iter()
                        .copied(),
                );
            }
        }
        assert_eq!(
            seen,
            (0..4_000).collect::<Vec<i64>>(),
            "every row once, in order"
        );
    }

    #[tokio::test]
    async fn a_scan_split_finer_than_the_workers_is_read_whole() {
        let ctx = datafusion::prelude::SessionContext::new();
        ctx.register_table("t", table() as _).unwrap();
        let scan = physical_plan(&ctx, "SELECT k, v FROM t").await;
        assert_eq!(scan.output_partitioning().partition_count(), 3);
        let (finer, parts, tasks) =
            morsels(Arc::clone(&scan), || false, 2, 100, &ctx.task_ctx()).unwrap();
        assert_eq!(parts, 2 * MORSELS_PER_THREAD, "split to morsels");
        assert_eq!(finer.output_partitioning().partition_count(), parts);
        assert_eq!(tasks, 2, "one worker a thread");
        // In memory, no morsel under a quarter of `min_rows`.
        let (_, parts, tasks) =
            morsels(Arc::clone(&scan), || false, 2, 4_000, &ctx.task_ctx()).unwrap();
        assert_eq!((parts, tasks), (6, 2), "no morsel under 1,000 rows");
        let (_, parts, tasks) =
            morsels(Arc::clone(&scan), || false, 4, 4_000, &ctx.task_ctx()).unwrap();
        assert_eq!(
            (parts, tasks),
            (8, 4),
            "two morsels a worker, not one or two"
        );
        let (_, parts, tasks) =
            morsels(Arc::clone(&scan), || false, 2, 1 << 20, &ctx.task_ctx()).unwrap();
        assert_eq!((parts, tasks), (3, 2), "a small scan as it was");
        let (_, parts, tasks) = morsels(scan, || true, 2, 100, &ctx.task_ctx()).unwrap();
        assert_eq!((parts, tasks), (3, 3), "not split: a worker a partition");

        // Two workers take the 3 partitions between them: every row counted once.
        let sql = "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k";
        let cpu = crate::session_context(&GrouperConfig {
            backend: Backend::Cpu,
            threads: Some(2),
            ..Default::default()
        })
        .unwrap();
        cpu.register_table("t", table() as _).unwrap();
        let got = collect(physical_plan(&cpu, sql).await, cpu.task_ctx())
            .await
            .unwrap();
        let mut rows: Vec<(i64, i64, i64)> = got
            .iter()
            .flat_map(|b| {
                let col = |i: usize| b.column(i).as_primitive::<Int64Type>().clone();
                let (k, n, s) = (col(0), col(1), col(2));
                (0..b.num_rows())
                    .map(|r| (k.value(r), n.value(r), s.value(r)))
                    .collect::<Vec<_>>()
            })
            .collect();
        rows.sort_unstable();
        let want: Vec<(i64, i64, i64)> = (0..7i64)
            .map(|k| {
                let of_k = (0..6_000i64).filter(|r| r % 7 == k);
                (k, of_k.clone().count() as i64, of_k.sum())
            })
            .collect();
        assert_eq!(rows, want);
    }
}
