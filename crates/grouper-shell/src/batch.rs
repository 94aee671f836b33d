//! `.coprocess on` (`grouper --coprocess`): the queries of a script that follow one another run
//! as one batch, the CPU and the GPU running different queries at the same time
//! ([`grouper::coprocess`], Luan's inter-operator co-processing). Results print in the
//! script's order; with `.timer on` each says the side that ran it, and the batch its time.
//! Statements that change the session (`CREATE TABLE`, `SET`) and dot-commands end a batch
//! and run alone, in order.

use std::time::Instant;

use anyhow::Result;
use datafusion::prelude::SessionContext;
use grouper::coprocess::{self, Side};

use crate::output::Format;
use crate::{explain, output};

/// Whether `sql` is a query (it reads and changes nothing): `SELECT`, `WITH`, `VALUES`.
pub fn is_query(sql: &str) -> bool {
    let mut text = sql.trim_start();
    // Leading comments.
    while let Some(rest) = text.strip_prefix("--") {
        text = rest.split_once('\n').map_or("", |(_, r)| r).trim_start();
    }
    let word: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(word.as_str(), "select" | "with" | "values")
}

/// Runs `queries` as one co-processed batch on `cpu` and `gpu` (`None`: no GPU) and prints
/// their results in order, as `mode`; with `timer` each query's side and time and the batch's,
/// with `explain` each plan.
pub async fn run(
    cpu: &SessionContext,
    gpu: Option<&SessionContext>,
    queries: &[String],
    mode: Format,
    timer: bool,
    explain: bool,
) -> Result<()> {
    let start = Instant::now();
    let ran = coprocess::run_batch(cpu, gpu, queries).await?;
    let wall = start.elapsed();
    let threads = cpu.state().config().target_partitions();
    for r in &ran {
        if explain {
            let ctx = match r.side {
                Side::Gpu => gpu.unwrap_or(cpu),
                Side::Cpu => cpu,
            };
            print!(
                "{}",
                explain::explain(&r.plan, &grouper::harm::take_kept(ctx))
            );
        }
        if !r.plan.schema().fields().is_empty() {
            output::write(&r.batches, mode, None, threads)?;
        }
        if timer {
            let declined = r
                .declined
                .as_deref()
                .map(|why| format!("; the GPU declined it: {why}"))
                .unwrap_or_default();
            println!(
                "Run Time: {:.3} s on the {} (estimated cost: {} rows scanned; aggregation: {}){declined}",
                r.time.as_secs_f64(),
                r.side.name(),
                r.cost,
                explain::where_it_ran(&r.plan)
            );
        }
    }
    if timer {
        let on = |s: Side| ran.iter().filter(|r| r.side == s).count();
        let own: f64 = ran.iter().map(|r| r.time.as_secs_f64()).sum();
        let split = if gpu.is_some() {
            format!(
                "{} on the CPU and {} on the GPU at the same time",
                on(Side::Cpu),
                on(Side::Gpu)
            )
        } else {
            "all on the CPU (no GPU)".to_string()
        };
        println!(
            "Batch: {} queries in {:.3} s, {split} (their own times add up to {own:.3} s)",
            ran.len(),
            wall.as_secs_f64(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_told_from_statements_that_change_the_session() {
        for q in [
            "SELECT 1",
            "  select k from t",
            "WITH a AS (SELECT 1) SELECT * FROM a",
            "-- totals\nSELECT sum(v) FROM t",
            "VALUES (1)",
        ] {
            assert!(is_query(q), "{q}");
        }
        for s in [
            "CREATE TABLE t AS SELECT 1",
            "SET datafusion.execution.batch_size = 1024",
            "INSERT INTO t VALUES (1)",
            "-- a comment only",
            "",
            "selection",
        ] {
            assert!(!is_query(s), "{s}");
        }
    }
}
