//! grouper on datafusion-distributed: three `grouper worker` processes on localhost, a
//! coordinator session in this process (`grouper_distributed::coordinator`), TPC-H Q1 and the
//! db-benchmark questions (one to six keys, string and integer keys, NULLs, MEDIAN, STDDEV,
//! CORR) over Parquet, every answer equal to one process's; the plan's worker stages hold
//! grouper's partial phase and the coordinator's stage its merge.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use grouper::{Backend, GrouperConfig};
use grouper_cli::bench::groupby::QUESTIONS;
use grouper_core::compare::same_groups;

use crate::process::{interrupt, tpch_and_groupby};

/// Key columns of each question's answer (question 8's rows are not unique per key: all of
/// its columns sort it).
const KEYS: [usize; 10] = [1, 2, 1, 1, 1, 2, 1, 2, 2, 6];

/// A `grouper worker` on a free port, and its URL (from the line it prints).
fn worker() -> (Child, url::Url) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_grouper"))
        .args(["worker", "--listen", "127.0.0.1:0", "--backend", "cpu"])
        .args(["--threads", "1", "--grouper-only"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_end_matches(';');
    (child, url::Url::parse(url).unwrap())
}

async fn answer(ctx: &SessionContext, sql: &str) -> RecordBatch {
    let out = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let schema = out.first().map_or_else(
        || Arc::new(arrow::datatypes::Schema::empty()),
        |b| b.schema(),
    );
    concat_batches(&schema, &out).unwrap()
}

#[test]
fn three_workers_answer_as_one_process() {
    let dir = tpch_and_groupby("0.05", "1e5");
    let d = dir.path().to_str().unwrap();
    let x = format!("{d}/x.parquet");
    let mut workers: Vec<(Child, url::Url)> = (0..3).map(|_| worker()).collect();
    let urls: Vec<url::Url> = workers.iter().map(|(_, u)| u.clone()).collect();

    let config = GrouperConfig {
        backend: Backend::Cpu,
        threads: Some(2),
        grouper_only: true,
        ..Default::default()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let one = grouper::session_context(&config).unwrap();
        // Small scan tasks, so that these few megabytes spread over every worker.
        let state = grouper_distributed::coordinator(&config, urls, Some(64 << 10)).unwrap();
        let many = SessionContext::new_with_state(state);
        for ctx in [&one, &many] {
            ctx.register_parquet(
                "lineitem",
                &format!("{d}/lineitem/"),
                ParquetReadOptions::default(),
            )
            .await
            .unwrap();
            ctx.register_parquet("x", &x, ParquetReadOptions::default())
                .await
                .unwrap();
        }
        let q1 = include_str!("../../src/bench/tpch/q01.sql");
        let queries = std::iter::once((q1, 2)).chain(QUESTIONS.iter().map(|(q, _)| *q).zip(KEYS));
        for (sql, keys) in queries {
            let want = answer(&one, sql).await;
            let got = answer(&many, sql).await;
            assert!(want.num_rows() > 0, "no rows: {sql}");
            if let Err(e) = same_groups(want.columns(), got.columns(), keys) {
                panic!("{sql}: {e}");
            }
        }
        // The workers run grouper's partial phase; the merge follows the shuffle.
        for sql in [q1, QUESTIONS[9].0] {
            let plan = many
                .sql(sql)
                .await
                .unwrap()
                .create_physical_plan()
                .await
                .unwrap();
            let text = grouper_distributed::display_plan_ascii(plan.as_ref(), false);
            let partial = text
                .find("GroupByExec: phase=partial")
                .unwrap_or_else(|| panic!("no partial phase in\n{text}"));
            let stage = text[..partial].rfind("Stage ").expect("a stage");
            assert!(text[stage..partial].contains("tasks=3"), "{text}");
            assert!(text.contains("MergeExec"), "{text}");
            assert!(text.contains("NetworkShuffleExec"), "{text}");
        }
    });
    for (mut child, _) in workers.drain(..) {
        assert!(interrupt(&mut child, Duration::from_secs(5)).success());
    }
}
