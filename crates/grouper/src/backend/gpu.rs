//! The GPU backend inside DataFusion: the query in the GPU's form ([`gpu_query`]), the GPU
//! alone ([`run`]: streamed from a file scan as it decodes, or over the collected input), and
//! what `--explain` shows of it ([`summary`]). When the rule could translate the filter and
//! projections below into the IR ([`crate::fuse::Fused`]), the batches come straight from the
//! scan and the kernel evaluates those expressions itself.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::metrics::BaselineMetrics;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use futures::StreamExt;
use grouper_core::expr::Expr;
use grouper_core::QuerySpec;
use grouper_gpu::{ColumnBounds, GpuOptions, GpuQuery, GpuReport, Prepared};

use super::cpu::evaluate;
use super::{external, in_memory_rows, over_budget, Attempt, Ran};
use crate::config::{Backend, Engine};
use crate::group_by::GroupByPlan;
use crate::narrow_table::{widened_batch, WidenExec};

/// The GPU form of `plan`'s query and whether its batches come from the fused source, or why
/// the GPU cannot run it (an unsupported type or expression). It does not start the GPU: the
/// route does, once it runs there ([`crate::device_facts::open`]).
pub(crate) fn gpu_query(
    plan: &GroupByPlan,
    opts: &GpuOptions,
) -> grouper_core::Result<(GpuQuery, bool)> {
    let (query, fused) = match &plan.fused {
        Some(f) => (
            GpuQuery {
                columns: f.columns.clone(),
                filter: f.filter.clone(),
                keys: f.keys.clone(),
                aggregates: plan
                    .spec
                    .aggregates
                    .iter()
                    .cloned()
                    .zip(f.args.clone())
                    .collect(),
            },
            true,
        ),
        None => (evaluated_query(&plan.spec), false),
    };
    query.check(opts)?;
    Ok((query, fused))
}

/// The GPU query over batches of evaluated keys and arguments (keys first, then each
/// aggregate's argument; a tuple's parts as columns of their own, [`evaluated_batch`]).
fn evaluated_query(spec: &QuerySpec) -> GpuQuery {
    let mut columns = spec.key_types.clone();
    let mut aggregates = Vec::with_capacity(spec.aggregates.len());
    let mut column = |t: DataType| {
        columns.push(t.clone());
        Expr::column(columns.len() - 1, t)
    };
    for a in &spec.aggregates {
        let arg = a
            .input_type
            .clone()
            .filter(|_| a.kind != grouper_core::agg::AggKind::CountStar);
        aggregates.push((
            a.clone(),
            arg.map(|t| match t {
                DataType::Struct(parts) => Expr::Tuple(
                    parts
                        .iter()
                        .map(|p| column(p.data_type().clone()))
                        .collect(),
                ),
                t => column(t),
            }),
        ));
    }
    GpuQuery {
        columns,
        filter: None,
        keys: (0..spec.key_types.len()).collect(),
        aggregates,
    }
}

/// The GPU alone: a file scan streams into the GPU as it is decoded, planned from its
/// statistics, and where the data leaves that plan the query reruns on the collected input;
/// other sources are collected first (the fused source's columns, or the evaluated keys and
/// arguments). Under `auto` a failure of the GPU engine hands the query back to
/// the CPU; errors of the input's own operators end the query either way.
pub(crate) async fn run(
    query: GpuQuery,
    fused: bool,
    input: &Arc<dyn ExecutionPlan>,
    plan: &Arc<GroupByPlan>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
    baseline: &BaselineMetrics,
) -> Result<Attempt> {
    let fallback = engine.backend == Backend::Auto;
    let mut source = match (&plan.fused, fused) {
        (Some(f), true) => Arc::clone(&f.source),
        _ => Arc::clone(input),
    };
    let bounds = match fused && !engine.gpu.resident {
        true => stream_bounds(&source, &query),
        false => None,
    };
    let mut streamed = None;
    let mut abandoned = None;
    let mut not_paged = None;
    let pages = match (&bounds, engine.gpu.pages) {
        (Some(_), true) => super::pages::page_source(&source, engine.footers.as_ref()),
        _ => None,
    };
    if let (Some(pages), Some((bounds, rows))) = (pages, bounds.as_ref()) {
        let timer = baseline.elapsed_compute().timer();
        let out = super::pages::run_pages(
            query.clone(),
            &source,
            pages,
            bounds.clone(),
            *rows,
            engine,
            context,
        )
        .await?;
        timer.done();
        match out {
            Err(
                grouper_core::GrouperError::OutsidePlan(why)
                | grouper_core::GrouperError::Unsupported(why),
            ) => {
                not_paged = Some(why);
                // Its first batch was read: the scan runs again from the start.
                source = reset_plan_states(source)?;
            }
            out => streamed = Some(out),
        }
        // `auto` chose the GPU for the pages: without them the CPU is the faster way.
        if let (Some(why), true, None) = (&not_paged, fallback, &engine.gpu.strategy) {
            return Ok(Attempt::FallBack(format!(
                "Parquet pages could not go to the GPU ({why}); ran on the CPU"
            )));
        }
    }
    if let (None, Some((bounds, rows))) = (&streamed, bounds) {
        let timer = baseline.elapsed_compute().timer();
        let out = run_streamed(query.clone(), &source, bounds, rows, engine, context).await?;
        timer.done();
        match out {
            Err(grouper_core::GrouperError::OutsidePlan(why)) => {
                abandoned = Some(why);
                source = reset_plan_states(source)?;
            }
            out => streamed = Some(out),
        }
    }
    let streamed = streamed.map(|out| {
        out.map(|mut o| {
            if let Some(why) = &not_paged {
                o.report.reason += &format!("; Parquet pages not sent to the GPU ({why})");
            }
            o
        })
    });
    let out = match streamed {
        Some(out) => out,
        None => {
            // A narrowed table's stored batches are collected as they are: the cache knows the
            // input by them, and they are widened only when it does not hold it.
            let widen = source.downcast_ref::<WidenExec>().filter(|_| fused);
            let collected = match widen {
                Some(w) => w.input(),
                None => &source,
            };
            let batches = collect(collected, context, (!fused).then(|| Arc::clone(plan))).await?;
            let widened = widen.map(|w| Arc::clone(&w.schema()));
            let timer = baseline.elapsed_compute().timer();
            let mut opts = engine.gpu_options();
            if !fused {
                // Evaluated batches are new arrays every time: nothing to reuse.
                opts.cache_bytes = 0;
            }
            let out = tokio::task::spawn_blocking(move || {
                let stored = &batches.0;
                let input = || match &widened {
                    None => Ok(stored.clone()),
                    Some(schema) => stored
                        .iter()
                        .map(|b| Ok(widened_batch(b, schema)?))
                        .collect(),
                };
                Prepared::new_known_by(&query, stored, input, &opts).and_then(|mut p| p.run())
            })
            .await
            .map_err(external)?;
            timer.done();
            out.map(|mut o| {
                if let Some(why) = abandoned {
                    o.report.reason +=
                        &format!("; streaming from the scan stopped ({why}), input collected");
                }
                o
            })
        }
    };
    match out {
        Ok(out) => Ok(Attempt::Ran(
            out.columns,
            out.num_rows,
            Box::new(Ran::Gpu(out.report, plan.fused.is_some())),
        )),
        Err(e) if fallback => Ok(Attempt::FallBack(format!(
            "GPU failed ({e}); ran on the CPU"
        ))),
        Err(e) => Err(external(e)),
    }
}

/// Bounds of `source`'s columns from its statistics (Parquet footers), and the rows it expects,
/// when the query can stream from it: not an in-memory table (those are collected and their
/// encoded images cached), and every integer-like group key bounded (strings and booleans
/// need none).
pub(crate) fn stream_bounds(
    source: &Arc<dyn ExecutionPlan>,
    query: &GpuQuery,
) -> Option<(Vec<ColumnBounds>, Option<u64>)> {
    if in_memory_rows(source).is_some() {
        return None;
    }
    let stats = datafusion::physical_plan::StatisticsContext::new()
        .compute(
            source.as_ref(),
            &datafusion::physical_plan::StatisticsArgs::new(),
        )
        .ok()?;
    if stats.column_statistics.len() != query.columns.len() {
        return None;
    }
    let bounds: Vec<ColumnBounds> = stats
        .column_statistics
        .iter()
        .zip(&query.columns)
        .map(|(cs, t)| {
            let ordinal = |v: &ScalarValue| -> Option<i128> {
                let a = v.to_array().ok()?;
                let a = match a.data_type() == t {
                    true => a,
                    false => arrow::compute::cast(&a, t).ok()?,
                };
                grouper_core::keys::ordinal_min_max(&a).map(|r| r.0)
            };
            let range = match (cs.min_value.get_value(), cs.max_value.get_value()) {
                (Some(lo), Some(hi)) => ordinal(lo).zip(ordinal(hi)),
                _ => None,
            };
            // Inexact statistics (a pushed-down predicate prunes row groups) still bound the
            // rows read; every chunk is checked against them anyway.
            ColumnBounds {
                range,
                may_null: cs.null_count.get_value() != Some(&0),
            }
        })
        .collect();
    let bounded = query.keys.iter().all(|&k| {
        query
            .columns
            .get(k)
            .is_some_and(grouper_core::keys::coded_without_bounds)
            || bounds.get(k).is_some_and(|b| b.range.is_some())
    });
    let rows = stats.num_rows.get_value().map(|&r| r as u64);
    bounded.then_some((bounds, rows))
}

/// Runs `query` on the GPU as `source`'s partitions deliver their batches: each partition's
/// task sends its batches into one channel; the GPU side plans from `bounds` and the first
/// batch, then chunks, encodes and copies the rest as they come. The inner error is the
/// engine's ([`grouper_core::GrouperError::OutsidePlan`]: rerun on the collected input).
async fn run_streamed(
    query: GpuQuery,
    source: &Arc<dyn ExecutionPlan>,
    bounds: Vec<ColumnBounds>,
    rows: Option<u64>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
) -> Result<grouper_core::Result<grouper_gpu::GpuOutput>> {
    let parts = source.output_partitioning().partition_count();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<RecordBatch>>(4 * parts.max(1));
    // Held until the GPU side returns, and aborted with this future: a cancelled query (its
    // stream dropped) stops reading its input, the channel closes, and the GPU loop ends on
    // what it has, where detached tasks read the input to its end.
    let mut feeders = Vec::with_capacity(parts);
    for p in 0..parts {
        let mut stream = source.execute(p, Arc::clone(context))?;
        let tx = tx.clone();
        feeders.push(SpawnedTask::spawn(async move {
            while let Some(b) = stream.next().await {
                if tx.send(b).await.is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let first = match rx.recv().await {
        Some(b) => vec![b?],
        None => Vec::new(),
    };
    let opts = engine.gpu_options();
    let (out, scan_error) = tokio::task::spawn_blocking(move || {
        let mut scan_error = None;
        let mut next = || match rx.blocking_recv()? {
            Ok(b) => Some(Ok(b)),
            Err(e) => {
                let why = e.to_string();
                scan_error = Some(e);
                Some(Err(grouper_core::GrouperError::InvalidInput(why)))
            }
        };
        let out = Prepared::streaming(&query, &first, &bounds, rows, &opts)
            .and_then(|mut p| p.run_stream(first, &mut next));
        (out, scan_error)
    })
    .await
    .map_err(external)?;
    drop(feeders);
    match scan_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Every batch of every partition of `source`, with the memory they hold reserved from the
/// session's pool; with `evaluate_for`, each batch becomes the plan's evaluated keys and
/// arguments (the GPU's unfused input).
pub(crate) async fn collect(
    source: &Arc<dyn ExecutionPlan>,
    context: &Arc<TaskContext>,
    evaluate_for: Option<Arc<GroupByPlan>>,
) -> Result<(Vec<RecordBatch>, Vec<MemoryReservation>)> {
    let parts = source.output_partitioning().partition_count();
    let mut tasks = Vec::with_capacity(parts);
    for p in 0..parts {
        let mut stream = source.execute(p, Arc::clone(context))?;
        let plan = evaluate_for.clone();
        let reservation = MemoryConsumer::new(format!("GroupByExec[{p}] (GPU input)"))
            .register(context.memory_pool());
        // Aborted when dropped, as the feeders of `run_streamed` are: a cancelled query stops
        // collecting (an unbounded input would otherwise be collected to its end, or until
        // memory ran out).
        tasks.push(SpawnedTask::spawn(async move {
            let mut out = Vec::new();
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                let batch = match &plan {
                    None => batch,
                    Some(plan) => evaluated_batch(&batch, plan)?,
                };
                reservation
                    .try_grow(batch.get_array_memory_size())
                    .map_err(over_budget)?;
                out.push(batch);
            }
            Ok::<_, DataFusionError>((out, reservation))
        }));
    }
    let mut all = Vec::new();
    let mut held = Vec::with_capacity(parts);
    for t in tasks {
        let (batches, r) = t.join().await.map_err(external)??;
        all.extend(batches);
        held.push(r);
    }
    Ok((all, held))
}

/// Keys, then the arguments of aggregates that have one, as one record batch, in the types
/// [`evaluated_query`] declares: the CPU's evaluation leaves an Int32 column under
/// `AVG(CAST(v AS DOUBLE))` and `SUM(CAST(v AS BIGINT))` uncast
/// ([`grouper_core::agg::AggregateSpec::narrow_type`]), which the GPU would read as the wider
/// type's words (`AVG(ABS(v))` of an Int32 `v` answered 1.67e-319, the average's integer
/// bits, on every GPU strategy: difftest on the H100 at 907275c); such a column is cast here.
fn evaluated_batch(batch: &RecordBatch, plan: &GroupByPlan) -> Result<RecordBatch> {
    let b = evaluate(batch, plan)?;
    let mut args = Vec::with_capacity(b.args.len());
    for (a, spec) in b.args.iter().zip(&plan.spec.aggregates) {
        let Some(a) = a else { continue };
        args.push(match &spec.input_type {
            Some(t) if spec.narrow_type().as_ref() == Some(a.data_type()) => {
                arrow::compute::cast(a, t)?
            }
            _ => Arc::clone(a),
        });
    }
    let columns: Vec<arrow::array::ArrayRef> = b
        .keys
        .iter()
        .cloned()
        .chain(args.iter().flat_map(|a| match a.as_struct_opt() {
            // A tuple's parts (their own NULLs make the tuple's).
            Some(tuple) => tuple.columns().to_vec(),
            None => vec![Arc::clone(a)],
        }))
        .collect();
    let fields: Vec<arrow::datatypes::Field> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| arrow::datatypes::Field::new(format!("c{i}"), c.data_type().clone(), true))
        .collect();
    Ok(RecordBatch::try_new_with_options(
        Arc::new(arrow::datatypes::Schema::new(fields)),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// What the GPU did, for `--explain`.
pub(crate) fn summary(r: &GpuReport, fused: bool) -> String {
    format!(
        "device={}, strategy={} ({}), fused={}, key_words={}, est_groups={} [{}], groups={}, grows={}, grid={}x{}, shared={}B, compile={:.1}ms ({:?}), transfer={}{}{} ({} chunks of {} rows, {:.2} B/row before, {:.2} B/row sent: [{}]), prepare={:.1}ms{}, upload={:.1}ms, kernels={:.2}ms, gpu_total={:.1}ms",
        r.device, r.strategy, r.reason, fused && r.rows > 0, r.key_words, r.est_groups, r.estimate, r.groups,
        r.grows, r.blocks, r.threads, r.shared_bytes, r.compile_ms, r.cache, r.transfer,
        if r.from_scan { " from the scan as it decodes (planned from its statistics)" } else { "" },
        if r.cpu_filter { ", filter precomputed on the CPU (selection bitmap)" } else { "" },
        r.chunks, r.batch_rows,
        r.raw_bytes_per_row, r.sent_bytes_per_row, r.encodings.join(", "), r.prepare_ms,
        if r.cached { " (cached)" } else { "" }, r.upload_ms, r.kernel_ms, r.total_ms
    ) + &r.tuning.as_ref().map_or_else(
        || "; tuner off (the planner's launch shape; --tune searches it)".to_string(),
        |t| format!("; {t}"),
    ) + &match r.switches.as_slice() {
        [] => String::new(),
        s => format!("; re-planned as groups grew: {}", s.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Date32Array, Decimal128Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::exec::GroupByExec;

    fn find_group_by(plan: &Arc<dyn ExecutionPlan>) -> Option<&GroupByExec> {
        plan.downcast_ref::<GroupByExec>()
            .or_else(|| plan.children().into_iter().find_map(find_group_by))
    }

    /// A Parquet footer's min/max and null counts become the bounds a GPU stream is planned
    /// from: ordinals in the column's own type (unscaled decimals, day numbers), NULLs only
    /// where counted, nothing for strings.
    #[tokio::test]
    async fn parquet_statistics_become_stream_bounds() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, false),
            Field::new("s", DataType::Utf8, false),
            Field::new("d", DataType::Decimal128(15, 2), true),
            Field::new("dt", DataType::Date32, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int32Array::from(vec![7, -3, 12, 5])),
                Arc::new(StringArray::from(vec!["a", "b", "a", "c"])),
                Arc::new(
                    Decimal128Array::from(vec![Some(150), None, Some(-25), Some(9999)])
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ),
                Arc::new(Date32Array::from(vec![100, 90, 250, 180])),
            ],
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("grouper-bounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.parquet");
        // Not the CPU backend: the rule fuses only where a GPU may run (planned, not run).
        let ctx = crate::test_support::grouper_over_parquet(&path, &batch, None).await;
        let sql = "SELECT s, k, sum(d) FROM t WHERE dt <= DATE '1970-08-01' GROUP BY s, k";
        let plan = crate::test_support::physical_plan(&ctx, sql).await;
        let fused = find_group_by(&plan)
            .and_then(|g| g.group_by().fused.as_ref())
            .expect("a fused GroupByExec");
        let query = GpuQuery {
            columns: fused.columns.clone(),
            filter: fused.filter.clone(),
            keys: fused.keys.clone(),
            aggregates: vec![],
        };
        let (bounds, rows) = stream_bounds(&fused.source, &query).expect("streams");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(rows, Some(4));
        let names: Vec<String> = fused
            .source
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let of = |n: &str| &bounds[names.iter().position(|x| x == n).unwrap()];
        assert_eq!(of("k").range, Some((-3, 12)));
        assert!(!of("k").may_null);
        assert_eq!(of("s").range, None);
        assert_eq!(of("d").range, Some((-25, 9999)));
        assert!(of("d").may_null);
        assert_eq!(of("dt").range, Some((90, 250)));
    }

    /// The batches the GPU reads when nothing is fused hold the column types its query
    /// declares, also where the CPU's evaluation leaves an argument narrower than its cast.
    #[tokio::test]
    async fn evaluated_batches_hold_the_types_the_gpu_query_declares() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, false),
            Field::new("v", DataType::Int32, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 1, 2])),
                Arc::new(Int32Array::from(vec![Some(-7), Some(3), None, Some(-5)])),
            ],
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("grouper-evaluated-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.parquet");
        let ctx = crate::test_support::grouper_over_parquet(&path, &batch, None).await;
        // The GroupByExec's own input, as the GPU reads it where nothing is fused (abs() has
        // no IR form; difftest's `SELECT avg(abs(v0)) FROM t` absorbed nothing).
        let sql = "SELECT k, avg(abs(v)), sum(CAST(abs(v) AS BIGINT)), avg(v) FROM t GROUP BY k";
        let plan = crate::test_support::physical_plan(&ctx, sql).await;
        let g = find_group_by(&plan).expect("a GroupByExec");
        let group_plan = g.group_by();
        let input = Arc::clone(g.children()[0]);
        let batches = datafusion::physical_plan::collect(input, ctx.task_ctx())
            .await
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let query = evaluated_query(&group_plan.spec);
        let mut narrow = 0;
        for b in batches.iter().filter(|b| b.num_rows() > 0) {
            narrow += evaluate(b, group_plan)
                .unwrap()
                .args
                .iter()
                .flatten()
                .filter(|a| a.data_type() == &DataType::Int32)
                .count();
            let e = evaluated_batch(b, group_plan).unwrap();
            let types: Vec<DataType> = e
                .schema()
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect();
            assert_eq!(types, query.columns);
        }
        // The case the cast is for: the CPU's evaluation left some argument Int32.
        assert!(narrow > 0);
    }
}
