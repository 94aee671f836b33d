//! Differential tests against DuckDB: a time-boxed batch of random cases with a fixed seed on
//! every CPU target (and GPU targets when a GPU is present), the saved regression cases, and
//! queries grouper leaves to DataFusion (joins, windows, MEDIAN, COUNT DISTINCT).
//!
//! DuckDB comes from the project's venv (`scripts/setup-venv.sh`, run here when the venv is
//! missing) or `$GROUPER_PYTHON`. `GROUPER_DIFFTEST_SECS` sets the batch's time box (default
//! 150 s); `grouper difftest` runs open-ended batches.

use std::time::Duration;

use grouper_cli::difftest::{self, case, duckdb::Oracle, regress, BatchOptions, Runner, Verdict};

use crate::venv::root;

/// The oracle; sets up the venv first when it lacks DuckDB (a fresh clone, CI).
fn oracle() -> Oracle {
    let python = crate::venv::python(&["duckdb"]);
    Oracle::start(&python, &root()).expect("DuckDB oracle")
}

fn gpu() -> bool {
    let present = grouper_gpu::Gpu::get().is_ok();
    if std::env::var("GROUPER_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        assert!(
            present,
            "GROUPER_REQUIRE_GPU=1 but no GPU: {:?}",
            grouper_gpu::Gpu::get().err()
        );
    }
    present
}

#[test]
fn random_cases_agree_with_duckdb() {
    let secs = std::env::var("GROUPER_DIFFTEST_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let mut oracle = oracle();
    let targets = difftest::targets(gpu(), 2).unwrap();
    let runner = Runner::new().unwrap();
    let save = std::env::temp_dir().join("grouper-difftest-failures");
    let opts = BatchOptions {
        seed: 0x0067_726f_7570_6572,
        cases: None,
        time: Some(Duration::from_secs(secs)),
        save: Some(save.clone()),
    };
    let s = difftest::run_batch(&opts, &targets, &runner, &mut oracle, |_| {}).unwrap();
    println!(
        "difftest: {} cases, {} CPU runs, {} GPU runs, {} agreed, {} strict overflow errors, skipped {:?}, shared with DataFusion {:?}, DataFusion's own aggregation differed {} times",
        s.cases, s.cpu_runs, s.gpu_runs, s.agreed, s.stricter_overflow, s.skipped, s.shared_with_datafusion, s.datafusion_differs
    );
    // A batch that ran nothing proves nothing.
    assert!(s.cases >= 40, "only {} cases ran in {secs} s", s.cases);
    assert!(s.agreed > s.cases, "too few agreements: {s:?}");
    let found: Vec<String> = s
        .mismatches
        .iter()
        .map(|m| {
            format!(
                "seed {:#x} on {}: {} | {} (saved {:?})",
                m.seed, m.target, m.message, m.sql, m.saved
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "{} mismatches (shrunk cases in {}; move them to crates/grouper-cli/tests/it/regressions/ once fixed):\n{}",
        found.len(),
        save.display(),
        found.join("\n")
    );
}

#[test]
fn regression_cases_still_agree() {
    let dir = root().join("crates/grouper-cli/tests/it/regressions");
    let cases = regress::load_all(&dir).unwrap();
    assert!(
        !cases.is_empty(),
        "no regression files in {}",
        dir.display()
    );
    let targets = difftest::targets(gpu(), 2).unwrap();
    let runner = Runner::new().unwrap();
    for (path, r) in cases {
        for (target, v) in
            difftest::replay(&r.case.table, &r.case.query, &r.expected, &targets, &runner).unwrap()
        {
            assert!(
                !matches!(v, Verdict::Mismatch(_)) || target == difftest::BASELINE,
                "{} on {target}: {v:?}\n{}",
                path.display(),
                r.case.query.sql()
            );
        }
    }
}

/// A fixed table for the queries grouper does not accelerate.
fn fixed_table() -> case::Table {
    use case::{ColType, Column, Table};
    use difftest::value::Value;
    let n = 500;
    let col = |name: &str, ty, f: &dyn Fn(i64) -> Value| Column {
        name: name.into(),
        ty,
        small: true,
        values: (0..n).map(f).collect(),
    };
    Table {
        columns: vec![
            col("k0", ColType::I32, &|i| {
                if i % 17 == 0 {
                    Value::Null
                } else {
                    Value::Int((i % 7).into())
                }
            }),
            col("k1", ColType::Str, &|i| Value::Str(format!("s{}", i % 3))),
            col("v0", ColType::I64, &|i| {
                Value::Int((i * 37 % 101 - 50).into())
            }),
            col("v1", ColType::Dec(12, 2), &|i| {
                if i % 5 == 0 {
                    Value::Null
                } else {
                    Value::Dec((i * 13 % 997).into(), 2)
                }
            }),
        ],
        partitions: 3,
    }
}

#[test]
fn queries_left_to_datafusion_agree_with_duckdb() {
    let mut oracle = oracle();
    let targets = difftest::targets(gpu(), 2).unwrap();
    let runner = Runner::new().unwrap();
    let table = fixed_table();
    let queries = [
        // joins over aggregates
        "SELECT a.k0, a.s, b.c FROM (SELECT k0, sum(v0) AS s FROM t GROUP BY k0) a JOIN (SELECT k0, count(*) AS c FROM t GROUP BY k0) b ON a.k0 = b.k0",
        // windows over an aggregate
        "SELECT k0, sum(v0) AS s, rank() OVER (ORDER BY sum(v0) DESC, k0 NULLS FIRST) AS r FROM t GROUP BY k0",
        // MEDIAN over a decimal (exact in both), COUNT DISTINCT alone and with other aggregates
        "SELECT k1, median(v1) FROM t GROUP BY k1",
        "SELECT k1, count(DISTINCT v0) FROM t GROUP BY k1",
        "SELECT k0, count(DISTINCT v0), sum(v0), count(*) FROM t GROUP BY k0",
        // FILTER, grouping sets
        "SELECT k1, sum(v0) FILTER (WHERE v0 > 0) FROM t GROUP BY k1",
        "SELECT k0, k1, sum(v0) FROM t GROUP BY ROLLUP (k0, k1)",
    ];
    let path = oracle.load(&table).unwrap();
    for sql in queries {
        let q = case::Query {
            keys: vec![],
            aggs: vec![],
            filter: None,
            having: None,
            order: None,
            ordinals: false,
        };
        let duck = oracle.query(&path, sql).unwrap();
        assert!(duck.is_ok(), "{sql}: DuckDB failed: {duck:?}");
        let parts = table.partitioned().unwrap();
        for t in &targets {
            let ours = runner.run(t, &parts, sql);
            let v = difftest::judge(&q, &duck, &ours, None);
            assert_eq!(v, Verdict::Agree, "{sql} on {}", t.name);
        }
    }
}
