//! Inter-operator co-processing (Luan §5.4): a batch of queries where the CPU and the GPU run
//! different queries at the same time, against running them one after another.
//!
//! Each query's cost is estimated as the rows its scans read (their statistics: exact for
//! Parquet footers and in-memory tables), and the batch becomes one queue in order of cost.
//! Two workers drain it concurrently: the GPU takes the largest query left, the CPU the
//! smallest, each taking the next as soon as it finishes. The estimate only orders the queue:
//! which side runs how many queries follows the sides' real speeds, as a list scheduler's does,
//! and the GPU gets the heavy queries, where Luan and Karnagel found it ahead (a light query's
//! transfer and launch costs outweigh the GPU's advantage). A query fails the batch as it
//! would fail a script.
//!
//! Results come back in the batch's order, each with the side that ran it and its time.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::{collect, ExecutionPlan, StatisticsArgs, StatisticsContext};
use datafusion::prelude::SessionContext;

/// Which side ran a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// grouper's CPU strategies (the session with `--backend cpu`).
    Cpu,
    /// The GPU (the session with `--backend gpu`).
    Gpu,
}

impl Side {
    /// "cpu" or "gpu".
    pub fn name(self) -> &'static str {
        match self {
            Side::Cpu => "cpu",
            Side::Gpu => "gpu",
        }
    }
}

/// One query of a batch, run.
pub struct Ran {
    /// The side that ran it.
    pub side: Side,
    /// Its physical plan (for `--explain`).
    pub plan: Arc<dyn ExecutionPlan>,
    /// Its result: at least one batch, empty where there are no rows.
    pub batches: Vec<RecordBatch>,
    /// Its estimated cost (rows scanned).
    pub cost: u64,
    /// Planning and running it.
    pub time: Duration,
    /// Why the GPU's session did not run it, when the GPU took it and the CPU ran it instead.
    pub declined: Option<String>,
}

/// The rows `plan`'s scans read, from their statistics (a leaf without row statistics counts
/// its bytes over 8, one without either nothing).
pub fn scanned_rows(plan: &Arc<dyn ExecutionPlan>) -> u64 {
    if plan.children().is_empty() {
        let Ok(stats) = StatisticsContext::new().compute(plan.as_ref(), &StatisticsArgs::new())
        else {
            return 0;
        };
        let value = |p: &Precision<usize>| p.get_value().copied();
        return value(&stats.num_rows)
            .or_else(|| value(&stats.total_byte_size).map(|b| b / 8))
            .unwrap_or(0) as u64;
    }
    plan.children().into_iter().map(scanned_rows).sum()
}

/// Drains the queries `0..costs.len()` with two workers: `run(side, query)` runs a query on a
/// side. The GPU worker takes the costliest query left, the CPU worker the cheapest; with no
/// GPU (`gpu` false) the CPU runs them all in order of cost. Returns each query's outcome in
/// the batch's order.
pub async fn drain<T, F, Fut>(costs: &[u64], gpu: bool, run: F) -> Result<Vec<T>>
where
    F: Fn(Side, usize) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by_key(|&i| (costs.get(i).copied().unwrap_or(0), i));
    let queue = Mutex::new(VecDeque::from(order));
    let take = |side: Side| -> Option<usize> {
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        match side {
            Side::Gpu => q.pop_back(),
            Side::Cpu => q.pop_front(),
        }
    };
    let worker = |side: Side| {
        let (take, run) = (&take, &run);
        async move {
            let mut done = Vec::new();
            while let Some(i) = take(side) {
                done.push((i, run(side, i).await?));
            }
            Ok::<_, DataFusionError>(done)
        }
    };
    // The GPU's worker is polled first, so the costliest query is its first.
    let (gpu, cpu) = if gpu {
        tokio::try_join!(worker(Side::Gpu), worker(Side::Cpu))?
    } else {
        (Vec::new(), worker(Side::Cpu).await?)
    };
    let mut out: Vec<Option<T>> = (0..costs.len()).map(|_| None).collect();
    for (i, t) in cpu.into_iter().chain(gpu) {
        if let Some(slot) = out.get_mut(i) {
            *slot = Some(t);
        }
    }
    out.into_iter()
        .map(|t| {
            t.ok_or_else(|| DataFusionError::Internal("a query of the batch did not run".into()))
        })
        .collect()
}

/// Runs `queries` co-processed: `cpu` and `gpu` are sessions over the same tables, the first
/// aggregating on the CPU, the second on the GPU (`None`: no GPU, the CPU runs them all).
/// Each query is planned on the CPU's session for its cost, and again on the GPU's if the GPU
/// takes it; a query the GPU's session fails (an aggregate it lacks, device memory) runs on
/// the CPU's plan in its place, and fails the batch only if that fails too.
pub async fn run_batch(
    cpu: &SessionContext,
    gpu: Option<&SessionContext>,
    queries: &[String],
) -> Result<Vec<Ran>> {
    let mut planned = Vec::with_capacity(queries.len());
    let mut costs = Vec::with_capacity(queries.len());
    for sql in queries {
        let t = Instant::now();
        let plan = cpu.sql(sql).await?.create_physical_plan().await?;
        costs.push(scanned_rows(&plan));
        planned.push(Mutex::new(Some((plan, t.elapsed()))));
    }
    let run = |side: Side, i: usize| {
        let cpu_plan = planned
            .get(i)
            .and_then(|p| p.lock().unwrap_or_else(|e| e.into_inner()).take());
        let cost = costs.get(i).copied().unwrap_or(0);
        let sql = queries.get(i).map_or("", String::as_str);
        async move {
            let t = Instant::now();
            let (cpu_plan, planning) = cpu_plan.ok_or_else(|| {
                DataFusionError::Internal("a query of the batch ran twice".into())
            })?;
            let mut declined = None;
            if let (Side::Gpu, Some(g)) = (side, gpu) {
                match run_on(g, sql).await {
                    Ok((plan, batches)) => {
                        return Ok(Ran {
                            side,
                            plan,
                            batches,
                            cost,
                            time: t.elapsed(),
                            declined,
                        })
                    }
                    Err(e) => declined = Some(e.to_string()),
                }
            }
            let batches = collect_all(&cpu_plan, cpu).await?;
            Ok(Ran {
                side: Side::Cpu,
                plan: cpu_plan,
                batches,
                cost,
                time: t.elapsed() + planning,
                declined,
            })
        }
    };
    drain(&costs, gpu.is_some(), run).await
}

/// Plans and runs `sql` on `ctx`: its plan and its result (at least one batch).
async fn run_on(
    ctx: &SessionContext,
    sql: &str,
) -> Result<(Arc<dyn ExecutionPlan>, Vec<RecordBatch>)> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let batches = collect_all(&plan, ctx).await?;
    Ok((plan, batches))
}

/// Runs `plan` to its last batch: at least one, empty where there are no rows.
async fn collect_all(
    plan: &Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
) -> Result<Vec<RecordBatch>> {
    let mut batches = collect(Arc::clone(plan), ctx.task_ctx()).await?;
    if batches.is_empty() {
        batches.push(RecordBatch::new_empty(plan.schema()));
    }
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use super::*;

    use arrow::array::Int64Array;
    use datafusion::datasource::MemTable;

    /// The GPU takes the costliest queries from one end, the CPU the cheapest from the other,
    /// concurrently; every query runs once and results keep the batch's order.
    #[tokio::test]
    async fn the_gpu_takes_the_heavy_end_and_the_cpu_the_light_one() {
        let costs = [50u64, 10, 1000, 20, 900, 30];
        let log = Mutex::new(Vec::new());
        let t = Instant::now();
        let out = drain(&costs, true, |side, i| {
            log.lock().unwrap().push((side, i));
            async move {
                // The GPU is fast on its queries: the CPU gets through several meanwhile.
                let ms = if side == Side::Gpu { 40 } else { 15 };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok((side, i))
            }
        })
        .await
        .unwrap();
        let wall = t.elapsed();
        assert_eq!(
            out.iter().map(|o| o.1).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5]
        );
        let log = log.into_inner().unwrap();
        assert_eq!(log.len(), 6, "each once: {log:?}");
        let gpu: Vec<usize> = log
            .iter()
            .filter(|l| l.0 == Side::Gpu)
            .map(|l| l.1)
            .collect();
        let cpu: Vec<usize> = log
            .iter()
            .filter(|l| l.0 == Side::Cpu)
            .map(|l| l.1)
            .collect();
        assert_eq!(gpu.first(), Some(&2), "the costliest first: {log:?}");
        assert_eq!(cpu.first(), Some(&1), "the cheapest first: {log:?}");
        assert!(gpu.contains(&4) || cpu.contains(&4));
        assert!(!gpu.is_empty() && !cpu.is_empty());
        // Concurrent: the sum of the runs is over 100 ms.
        assert!(wall < Duration::from_millis(100), "{wall:?}");
        // Without a GPU the CPU runs all of them, cheapest first.
        let log = Mutex::new(Vec::new());
        drain(&costs, false, |side, i| {
            log.lock().unwrap().push((side, i));
            async move { Ok(()) }
        })
        .await
        .unwrap();
        let log = log.into_inner().unwrap();
        assert_eq!(
            log.iter().map(|l| l.1).collect::<Vec<_>>(),
            [1, 3, 5, 0, 4, 2]
        );
        assert!(log.iter().all(|l| l.0 == Side::Cpu));
    }

    #[tokio::test]
    async fn a_failing_query_fails_the_batch() {
        let r = drain(&[1, 2, 3], true, |_, i| async move {
            if i == 1 {
                Err(DataFusionError::Plan("no such table".into()))
            } else {
                Ok(i)
            }
        })
        .await;
        assert!(r.unwrap_err().to_string().contains("no such table"));
    }

    /// Real sessions: costs from the scans' statistics, answers equal to running alone.
    #[tokio::test]
    async fn a_batch_answers_as_its_queries_alone() {
        let batch = |n: i64| {
            RecordBatch::try_from_iter([(
                "k",
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 7))) as _,
            )])
            .unwrap()
        };
        let ctx = SessionContext::new();
        for (name, rows) in [("small", 10), ("large", 10_000)] {
            let b = batch(rows);
            let t = MemTable::try_new(b.schema(), vec![vec![b]]).unwrap();
            ctx.register_table(name, Arc::new(t)).unwrap();
        }
        let queries: Vec<String> = [
            "SELECT k, count(*) AS n FROM large GROUP BY k ORDER BY k",
            "SELECT k, count(*) AS n FROM small GROUP BY k ORDER BY k",
        ]
        .map(String::from)
        .to_vec();
        let ran = run_batch(&ctx, None, &queries).await.unwrap();
        assert_eq!(ran.len(), 2);
        assert_eq!((ran[0].cost, ran[1].cost), (10_000, 10));
        for (r, q) in ran.iter().zip(&queries) {
            let alone = ctx.sql(q).await.unwrap().collect().await.unwrap();
            assert_eq!(r.batches, alone);
            assert_eq!(r.side, Side::Cpu);
            assert!(r.declined.is_none());
        }
        // A "GPU" session that cannot run the costlier query (it lacks the table): the CPU
        // runs it in its place, and says why.
        let bare = SessionContext::new();
        let ran = run_batch(&ctx, Some(&bare), &queries).await.unwrap();
        assert_eq!(ran[0].side, Side::Cpu);
        assert!(ran[0].declined.as_deref().unwrap_or("").contains("large"));
        for (r, q) in ran.iter().zip(&queries) {
            let alone = ctx.sql(q).await.unwrap().collect().await.unwrap();
            assert_eq!(r.batches, alone);
        }
        // A query no session can run fails the batch.
        let bad = vec!["SELECT nope FROM large".to_string()];
        assert!(run_batch(&ctx, Some(&bare), &bad).await.is_err());
    }
}
