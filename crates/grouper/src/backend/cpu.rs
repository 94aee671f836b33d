//! The CPU backend: every partition of the input pulled by its own task with a
//! [`grouper_core::Worker`]; keys and arguments are evaluated and folded in as batches arrive
//! (nothing is materialised for `perfect` and `thread_local`), each worker's memory reserved
//! from the session's pool; then `Aggregation::finish` (or, co-processing, `finish_partial`)
//! merges them on grouper's pool. Past the pool's limit the groups spill ([`super::spill`]).

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::BaselineMetrics;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use futures::StreamExt;
use grouper_core::expr::vector::Scratch;
use grouper_core::planner::{Hints, KeyBounds};
use grouper_core::InputBatch;
use rayon::prelude::*;

use super::external;
use super::fusion::CpuFusion;
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
    let fusion = may_fuse.then(|| CpuFusion::new(plan, &input)).flatten();
    let fused = fusion.as_ref().map(CpuFusion::describe);
    let out = run_cpu_with(
        input,
        fusion,
        plan,
        engine,
        context,
        baseline,
        |agg, workers| agg.finish_parts(workers),
    )
    .await?;
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
    let parts = source.output_partitioning().partition_count();
    let spill = Spill::new(context);
    let dictionaries = Arc::new(
        MemoryConsumer::new("GroupByExec (key dictionaries)").register(context.memory_pool()),
    );
    let mut tasks = Vec::with_capacity(parts);
    for p in 0..parts {
        let mut stream = source.execute(p, Arc::clone(context))?;
        let fusion = fusion.clone();
        let mut scratch = Scratch::default();
        let plan = Arc::clone(plan);
        let agg = Arc::clone(&agg);
        let mut worker = agg.worker();
        let compute = baseline.elapsed_compute().clone();
        let mut budget = Budget::new(
            context.memory_pool().memory_limit(),
            MemoryConsumer::new(format!("GroupByExec[{p}]"))
                .with_can_spill(spill.is_some())
                .register(context.memory_pool()),
            Arc::clone(&dictionaries),
            spill.clone(),
            Arc::clone(&pool),
            parts,
        );
        tasks.push(tokio::spawn(async move {
            while let Some(batch) = stream.next().await {
                let batch = match &fusion {
                    None => evaluate(&batch?, &plan)?,
                    Some(f) => {
                        let _timer = compute.timer();
                        match f.evaluate(&mut scratch, &batch?)? {
                            Some(b) => b,
                            None => continue,
                        }
                    }
                };
                let _timer = compute.timer();
                worker.push(&batch).map_err(external)?;
                budget.after_batch(&agg, &mut worker)?;
            }
            Ok::<_, DataFusionError>((worker, budget))
        }));
    }
    let mut workers = Vec::with_capacity(parts);
    let mut reservations = Vec::with_capacity(parts);
    for t in tasks {
        let (w, r) = t.await.map_err(external)??;
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

/// Evaluates the key and argument expressions of one input batch.
pub(crate) fn evaluate(batch: &RecordBatch, plan: &GroupByPlan) -> Result<InputBatch> {
    let rows = batch.num_rows();
    let keys = plan
        .keys
        .iter()
        .map(|(e, _)| e.evaluate(batch)?.into_array(rows))
        .collect::<Result<Vec<_>>>()?;
    let args = plan
        .args
        .iter()
        .map(|a| {
            a.as_ref()
                .map(|e| e.evaluate(batch)?.into_array(rows))
                .transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    InputBatch::try_new(&plan.spec, keys, args, rows)
        .map_err(|e| DataFusionError::External(Box::new(e)))
}
