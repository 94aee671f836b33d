//! The db-benchmark group-by questions (`grouper bench groupby`) through grouper's CPU backend,
//! every aggregation taken (`--grouper-only`), against DataFusion alone on the suite's G1 data
//! with NULLs: string and integer keys, composite keys of six columns, SUM/AVG/MIN/MAX/COUNT,
//! MEDIAN and STDDEV (question 6) and CORR (question 9).

use std::sync::Arc;

use arrow::compute::concat_batches;
use datafusion::catalog::MemTable;
use grouper::{Backend, GrouperConfig};
use grouper_cli::bench::groupby::QUESTIONS;
use grouper_cli::groupby_data::{generate, schema, Spec};
use grouper_core::compare::same_groups;

/// Key columns of each question's answer (question 8's rows are not unique per key: all of
/// its columns sort it).
const KEYS: [usize; 10] = [1, 2, 1, 1, 1, 2, 1, 2, 2, 6];

#[test]
fn every_question_answers_as_datafusion_does() {
    let spec = Spec {
        rows: 30_000,
        k: 12,
        nas: 5,
        seed: 7,
    };
    let batches = generate(&spec).unwrap();
    let parts: Vec<Vec<_>> = (0..2)
        .map(|p| {
            batches
                .iter()
                .flat_map(|b| {
                    (0..b.num_rows())
                        .step_by(4096)
                        .map(|o| b.slice(o, 4096.min(b.num_rows() - o)))
                        .collect::<Vec<_>>()
                })
                .enumerate()
                .filter(|(i, _)| i % 2 == p)
                .map(|(_, b)| b)
                .collect()
        })
        .collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let run = |backend, sql: &str| {
        let config = GrouperConfig {
            backend,
            threads: Some(2),
            grouper_only: true,
            ..Default::default()
        };
        rt.block_on(async {
            let ctx = grouper::session_context(&config).unwrap();
            ctx.register_table(
                "x",
                Arc::new(MemTable::try_new(schema(), parts.clone()).unwrap()),
            )
            .unwrap();
            let out = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            let s = out.first().map_or_else(
                || Arc::new(arrow::datatypes::Schema::empty()),
                |b| b.schema(),
            );
            concat_batches(&s, &out).unwrap()
        })
    };
    for (q, ((sql, _), keys)) in QUESTIONS.iter().zip(KEYS).enumerate() {
        let want = run(Backend::DataFusion, sql);
        let got = run(Backend::Cpu, sql);
        assert!(want.num_rows() > 0, "q{}: no rows", q + 1);
        if let Err(e) = same_groups(want.columns(), got.columns(), keys) {
            panic!("q{}: {e}\n{sql}", q + 1);
        }
    }
}
