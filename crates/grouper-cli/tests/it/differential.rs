//! grouper inside DataFusion against DataFusion's own aggregation: random queries over random
//! typed data (proptest), plan shape (our node where we handle the query, DataFusion's where we
//! do not), TPC-H Q1, errors, and the CLI end to end.

use std::process::Command;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array,
    RecordBatch, StringArray,
};
use arrow::compute::concat_batches;
use datafusion::catalog::MemTable;
use datafusion::physical_plan::displayable;
use datafusion::prelude::SessionContext;
use grouper::{Backend, GrouperConfig};
use grouper_core::compare::same_groups;
use grouper_core::cpu::Strategy;
use grouper_core::planner::Overrides;
use proptest::prelude::*;

/// A table of every supported type, with NULLs, from a seed.
fn table(rows: usize, groups: u64, seed: u64) -> RecordBatch {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut col = |nullable: bool| -> Vec<Option<u64>> {
        (0..rows)
            .map(|_| {
                let r = next();
                (!(nullable && r % 11 == 0)).then_some((r >> 8) % groups)
            })
            .collect()
    };
    let (g1, g2, g3, g4, g5, g6) = (
        col(true),
        col(true),
        col(false),
        col(true),
        col(true),
        col(false),
    );
    let (v1, v2, v3, v4, v5) = (col(true), col(true), col(true), col(true), col(true));
    let cols: Vec<(&str, ArrayRef)> = vec![
        (
            "k_i32",
            Arc::new(
                g1.iter()
                    .map(|v| v.map(|v| v as i32 - 3))
                    .collect::<Int32Array>(),
            ),
        ),
        (
            "k_i64",
            Arc::new(
                g2.iter()
                    .map(|v| v.map(|v| v as i64 * 1_000_000_007))
                    .collect::<Int64Array>(),
            ),
        ),
        (
            "k_str",
            Arc::new(
                g3.iter()
                    .map(|v| v.map(|v| format!("g{v}")))
                    .collect::<StringArray>(),
            ),
        ),
        (
            "k_date",
            Arc::new(
                g4.iter()
                    .map(|v| v.map(|v| 9000 + v as i32))
                    .collect::<Date32Array>(),
            ),
        ),
        (
            "k_bool",
            Arc::new(
                g5.iter()
                    .map(|v| v.map(|v| v % 2 == 0))
                    .collect::<BooleanArray>(),
            ),
        ),
        (
            "k_dec",
            Arc::new(
                g6.iter()
                    .map(|v| v.map(|v| v as i128 * 25))
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(12, 2)
                    .unwrap(),
            ),
        ),
        (
            "v_i64",
            Arc::new(
                v1.iter()
                    .map(|v| v.map(|v| v as i64 * 977 - 5000))
                    .collect::<Int64Array>(),
            ),
        ),
        (
            "v_i32",
            Arc::new(
                v2.iter()
                    .map(|v| v.map(|v| v as i32 - 100))
                    .collect::<Int32Array>(),
            ),
        ),
        (
            "v_f64",
            Arc::new(
                v3.iter()
                    .map(|v| v.map(|v| v as f64 * 0.25 - 10.0))
                    .collect::<Float64Array>(),
            ),
        ),
        (
            "v_dec",
            Arc::new(
                v4.iter()
                    .map(|v| v.map(|v| v as i128 * 1234 - 77))
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(15, 2)
                    .unwrap(),
            ),
        ),
        (
            "v_str",
            Arc::new(
                v5.iter()
                    .map(|v| v.map(|v| format!("s{}", v * 7 % 13)))
                    .collect::<StringArray>(),
            ),
        ),
    ];
    RecordBatch::try_from_iter(cols).unwrap()
}

fn context(config: &GrouperConfig, batch: &RecordBatch) -> SessionContext {
    let ctx = grouper::session_context(config).unwrap();
    // Three partitions, so DataFusion plans Partial + Final aggregation.
    let n = batch.num_rows();
    let parts: Vec<Vec<RecordBatch>> = (0..3)
        .map(|i| vec![batch.slice(n * i / 3, n * (i + 1) / 3 - n * i / 3)])
        .collect();
    ctx.register_table(
        "t",
        Arc::new(MemTable::try_new(batch.schema(), parts).unwrap()),
    )
    .unwrap();
    ctx
}

fn cfg(backend: Backend, strategy: Option<Strategy>) -> GrouperConfig {
    GrouperConfig {
        backend,
        overrides: Overrides {
            strategy,
            ..Default::default()
        },
        threads: Some(3),
        ..Default::default()
    }
}

/// `backend` where `auto` never leaves an aggregation to DataFusion (see `harm`).
pub(crate) fn grouper_only(backend: Backend) -> GrouperConfig {
    GrouperConfig {
        grouper_only: true,
        ..cfg(backend, None)
    }
}

async fn run(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<(RecordBatch, String)> {
    let df = ctx.sql(sql).await?;
    let plan = df.create_physical_plan().await?;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx()).await?;
    let schema = batches.first().map_or_else(
        || Arc::new(arrow::datatypes::Schema::empty()),
        |b| b.schema(),
    );
    Ok((concat_batches(&schema, &batches)?, text))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `sql` on grouper (with `strategy`) and on DataFusion; asserts equal results and that
/// grouper's node is in the plan.
fn check(batch: &RecordBatch, sql: &str, keys: usize, strategy: Option<Strategy>) {
    rt().block_on(async {
        let (expected, df_plan) = run(&context(&cfg(Backend::DataFusion, None), batch), sql)
            .await
            .unwrap();
        let (actual, plan) = run(&context(&cfg(Backend::Cpu, strategy), batch), sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        // Where DataFusion aggregates at all (it answers some global counts from statistics),
        // grouper must have taken over.
        if df_plan.contains("AggregateExec") {
            assert!(
                plan.contains("GroupByExec") && !plan.contains("AggregateExec"),
                "{sql}\n{plan}"
            );
        }
        assert_eq!(expected.schema(), actual.schema(), "{sql}");
        if let Err(e) = same_groups(expected.columns(), actual.columns(), keys) {
            panic!("{sql} ({strategy:?}): {e}");
        }
    });
}

const KEYS: &[&str] = &[
    "k_i32",
    "k_i64",
    "k_str",
    "k_date",
    "k_bool",
    "k_dec",
    "k_i64 % 7",
    "k_str || 'x'",
];
const AGGS: &[&str] = &[
    "count(*)",
    "count(v_i64)",
    "count(v_str)",
    "sum(v_i64)",
    "sum(v_i32)",
    "sum(v_f64)",
    "sum(v_dec)",
    "sum(v_dec * (1 - v_dec))",
    "min(v_i64)",
    "max(v_i32)",
    "min(v_f64)",
    "max(v_dec)",
    "min(v_str)",
    "max(v_str)",
    "avg(v_f64)",
    "avg(v_dec)",
    "avg(v_i32)",
    "max(k_bool)",
    "min(k_date)",
    "sum(v_i64 * 2 + 1)",
    "corr(v_f64, v_i32)",
    "corr(v_i64 * 2, v_f64)",
    "median(v_f64)",
    "median(v_i64)",
    "median(v_dec)",
    "stddev(v_f64)",
    "var_pop(v_i32)",
    "stddev_pop(v_dec * 2)",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_queries_match_datafusion(
        keys in prop::sample::subsequence(KEYS, 0..4),
        aggs in prop::sample::subsequence(AGGS, 1..6),
        rows in 0usize..3000,
        groups in 1u64..400,
        seed in any::<u64>(),
        filter in prop::option::of(-5000i64..400_000),
        strategy in prop::option::of(prop::sample::select(&[Strategy::ThreadLocal, Strategy::Shared, Strategy::Sort, Strategy::Partitioned][..])),
    ) {
        let batch = table(rows, groups, seed);
        let select: Vec<String> = keys.iter().map(|k| k.to_string()).chain(aggs.iter().map(|a| a.to_string())).collect();
        let mut sql = format!("SELECT {} FROM t", select.join(", "));
        if let Some(f) = filter {
            sql += &format!(" WHERE v_i64 > {f} OR v_i64 IS NULL");
        }
        if !keys.is_empty() {
            sql += &format!(" GROUP BY {}", keys.join(", "));
        }
        check(&batch, &sql, keys.len(), strategy);
    }
}

#[test]
fn tpch_q1_equals_datafusion_exactly() {
    let parts = grouper_cli::tpch::lineitem(0.05, 3, &|_| {}).unwrap();
    rt().block_on(async {
        let mut results = Vec::new();
        for backend in [Backend::DataFusion, Backend::Cpu] {
            let ctx = grouper::session_context(&cfg(backend, None)).unwrap();
            let table =
                MemTable::try_new(tpchgen_arrow::LineItemArrow::schema_ref(), parts.clone())
                    .unwrap();
            ctx.register_table("lineitem", Arc::new(table)).unwrap();
            results.push(run(&ctx, grouper_cli::tpch::Q1).await.unwrap());
        }
        assert!(results[1].1.contains("GroupByExec"));
        assert!(!results[0].1.contains("GroupByExec"));
        assert_eq!(results[0].0.num_rows(), 4);
        // Same rows in the same (ORDER BY) order, exactly: decimals to the last digit.
        assert_eq!(results[0].0, results[1].0);
    });
}

#[test]
fn unsupported_aggregates_stay_in_datafusion() {
    let batch = table(500, 20, 3);
    rt().block_on(async {
        let ctx = context(&cfg(Backend::Cpu, None), &batch);
        for sql in [
            "SELECT k_i32, bit_and(v_i64) FROM t GROUP BY k_i32",
            "SELECT k_i32, sum(v_i64) FILTER (WHERE v_i32 > 0) FROM t GROUP BY k_i32",
            "SELECT k_i32, k_str, sum(v_i64) FROM t GROUP BY ROLLUP (k_i32, k_str)",
        ] {
            let (got, plan) = run(&ctx, sql).await.unwrap();
            assert!(!plan.contains("GroupByExec"), "{sql}\n{plan}");
            let (want, _) = run(&context(&cfg(Backend::DataFusion, None), &batch), sql)
                .await
                .unwrap();
            assert_eq!(got.num_rows(), want.num_rows(), "{sql}");
        }
    });
}

#[test]
fn count_distinct_runs_as_two_grouper_aggregations() {
    // DataFusion rewrites COUNT(DISTINCT x) GROUP BY k into GROUP BY k, x then COUNT: both ours.
    let batch = table(3000, 40, 5);
    let sql = "SELECT k_str, count(DISTINCT v_i64), sum(v_i64) FROM t GROUP BY k_str";
    check(&batch, sql, 1, None);
    let sql = "SELECT k_str, count(DISTINCT v_i64) FROM t GROUP BY k_str";
    check(&batch, sql, 1, None);
    rt().block_on(async {
        let (_, plan) = run(&context(&cfg(Backend::Cpu, None), &batch), sql)
            .await
            .unwrap();
        assert_eq!(plan.matches("GroupByExec").count(), 2, "{plan}");
        assert!(!plan.contains("Hash([k_str@0, alias1@1]"), "{plan}");
    });
}

#[test]
fn joins_over_our_aggregate_stay_correct() {
    let batch = table(2000, 50, 4);
    let sql = "SELECT a.k_i32, a.s, b.c FROM (SELECT k_i32, sum(v_i64) s FROM t GROUP BY k_i32) a \
               JOIN (SELECT k_i32, count(*) c FROM t GROUP BY k_i32) b ON a.k_i32 = b.k_i32";
    check(&batch, sql, 1, None);
}

#[test]
fn an_aggregate_over_a_limited_subquery_counts_the_limits_rows() {
    // The limit may sit in the scan itself, which the workers must then not split into morsels.
    // Which 700 rows is not fixed; that there are 700 is.
    let batch = table(3000, 40, 5);
    let sql = "SELECT sum(c) FROM (SELECT k_i32, count(*) AS c FROM (SELECT * FROM t LIMIT 700) s \
               GROUP BY k_i32) x";
    check(&batch, sql, 0, None);
}

#[test]
fn integer_sum_overflow_is_a_clear_error() {
    let k: ArrayRef = Arc::new(Int32Array::from(vec![1, 1]));
    let v: ArrayRef = Arc::new(Int64Array::from(vec![i64::MAX, 1]));
    let batch = RecordBatch::try_from_iter(vec![("k", k), ("v", v)]).unwrap();
    rt().block_on(async {
        let ctx = grouper::session_context(&cfg(Backend::Cpu, None)).unwrap();
        ctx.register_batch("t", batch).unwrap();
        let err = run(&ctx, "SELECT k, sum(v) FROM t GROUP BY k")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("arithmetic overflow in sum"), "{err}");
    });
}

#[test]
fn gpu_backend_fails_clearly_without_a_gpu() {
    if grouper_gpu::Gpu::get().is_ok() {
        eprintln!("a GPU is present: nothing to check here");
        return;
    }
    let Err(err) = grouper::session_context(&cfg(Backend::Gpu, None)) else {
        panic!("the gpu backend must fail without a GPU");
    };
    assert!(err.to_string().contains("no GPU available"), "{err}");
    // auto runs on the CPU and says why
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ctx = context(&grouper_only(Backend::Auto), &table(2_000, 10, 7));
        let plan = ctx
            .sql("SELECT k_i32, sum(v_i64) FROM t GROUP BY k_i32")
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
            .await
            .unwrap();
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(text.contains("backend=cpu (no GPU available"), "{text}");
    });
}

fn grouper_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_grouper"))
}

#[test]
fn cli_queries_files_by_glob_and_reports_errors() {
    let dir = std::env::temp_dir().join(format!("grouper-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..2 {
        let out = grouper_bin()
            .args([
                "gen",
                "synthetic",
                "--rows",
                "5000",
                "--groups",
                "10",
                "--key-type",
                "i32",
                "--seed",
            ])
            .arg(i.to_string())
            .arg("-o")
            .arg(dir.join(format!("part{i}.parquet")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let glob = format!("{}/*.parquet", dir.display());
    let out = grouper_bin()
        .args([
            "query",
            &format!("SELECT count(*) AS n FROM '{glob}'"),
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n\n10000\n");
    let out = grouper_bin()
        .args(["query", "SELECT k, count(*) FROM t GROUP BY k", "--table"])
        .arg(format!("t={glob}"))
        .args(["--explain", "--strategy", "shared"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("GroupByExec") && text.contains("strategy=shared"),
        "{text}"
    );
    for (args, want) in [
        (vec!["query", "SELEC nonsense"], "error: "),
        (
            vec!["query", "SELECT * FROM 'no/such/file.parquet'"],
            "error: ",
        ),
        (
            vec!["query", "SELECT 1", "--strategy", "bogus"],
            "unknown strategy",
        ),
    ] {
        let out = grouper_bin().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(want) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The fused form the rule builds for the GPU (filter and arguments translated into the IR over
/// the scan's columns) computes what the CPU path computes: each query's GroupByExec output
/// (CPU, DataFusion's expressions) is compared with the reference executor over the source
/// batches as the IR interpreter filters and evaluates them. Returns whether it was fused.
async fn fused_matches_cpu(ctx: &SessionContext, sql: &str) -> bool {
    use datafusion::physical_plan::{collect, ExecutionPlan};
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let mut stack: Vec<Arc<dyn ExecutionPlan>> = vec![plan];
    let node = loop {
        let p = stack
            .pop()
            .unwrap_or_else(|| panic!("{sql}: no GroupByExec"));
        if p.downcast_ref::<grouper::exec::GroupByExec>().is_some() {
            break p;
        }
        stack.extend(p.children().into_iter().cloned());
    };
    let g = node.downcast_ref::<grouper::exec::GroupByExec>().unwrap();
    let Some(fused) = g.group_by().fused.clone() else {
        return false;
    };
    let spec = g.group_by().spec.clone();
    let out = collect(Arc::clone(&node), ctx.task_ctx()).await.unwrap();
    let expected = concat_batches(&node.schema(), &out).unwrap();
    let source = collect(Arc::clone(&fused.source), ctx.task_ctx())
        .await
        .unwrap();
    let mut inputs = Vec::new();
    for b in &source {
        let rows = b.num_rows();
        let cols = b.columns();
        let mask: arrow::array::BooleanArray = match &fused.filter {
            None => (0..rows).map(|_| Some(true)).collect(),
            Some(f) => {
                let m = f.evaluate(cols, rows).unwrap();
                let m = m
                    .as_any()
                    .downcast_ref::<arrow::array::BooleanArray>()
                    .unwrap();
                m.iter().map(|x| Some(x == Some(true))).collect()
            }
        };
        let keep = |a: &arrow::array::ArrayRef| arrow::compute::filter(a.as_ref(), &mask).unwrap();
        let keys = fused.keys.iter().map(|&k| keep(&cols[k])).collect();
        let args = fused
            .args
            .iter()
            .map(|a| a.as_ref().map(|e| keep(&e.evaluate(cols, rows).unwrap())))
            .collect();
        inputs
            .push(grouper_core::InputBatch::try_new(&spec, keys, args, mask.true_count()).unwrap());
    }
    let actual = grouper_core::reference::aggregate(&spec, &inputs).unwrap();
    if let Err(e) = same_groups(expected.columns(), &actual, spec.key_types.len()) {
        panic!("{sql}: fused form differs from the CPU path: {e}");
    }
    true
}

#[test]
fn fused_translation_matches_the_cpu_path() {
    rt().block_on(async {
        let batch = table(20_000, 50, 11);
        let ctx = context(&grouper_only(Backend::Auto), &batch);
        for sql in [
            "SELECT k_i32, sum(v_i64), count(*) FROM t WHERE v_i32 > 10 GROUP BY k_i32",
            "SELECT k_str, avg(v_f64), min(v_dec), max(v_f64) FROM t WHERE v_f64 < 20.5 OR v_i64 IS NULL GROUP BY k_str",
            "SELECT k_bool, k_dec, sum(v_dec * (1 - v_dec)), max(v_i32 + 1) FROM t WHERE NOT k_bool OR v_i64 > 3 GROUP BY k_bool, k_dec",
            "SELECT k_i64, sum(CASE WHEN v_i32 > 5 THEN v_i64 ELSE -v_i64 END), count(v_f64) FROM t GROUP BY k_i64",
            "SELECT k_date, sum(CAST(v_i32 AS DOUBLE) * 2.5), count(*) FROM t WHERE v_dec > 10 GROUP BY k_date",
            "SELECT k_i32, k_str, sum(v_i64 / 3), avg(v_dec) FROM t WHERE v_i64 IS NOT NULL AND k_i32 <> 4 GROUP BY k_i32, k_str",
            "SELECT k_dec, min(k_date), max(v_i64 - v_i32) FROM t WHERE k_date >= DATE '1970-01-20' GROUP BY k_dec",
            "SELECT k_str, corr(v_f64, v_i32), corr(v_i64 * 2, v_f64 + 1) FROM t WHERE v_i32 > 3 GROUP BY k_str",
            "SELECT k_i32, median(v_f64), median(v_i64 - 1), stddev(v_i64 * 2), var(v_dec) FROM t WHERE v_i32 > 3 GROUP BY k_i32",
        ] {
            assert!(fused_matches_cpu(&ctx, sql).await, "{sql}: expected the rule to fuse it");
        }
        // TPC-H Q1: filter on a date, decimal arithmetic capped at DECIMAL(38), string keys.
        let ctx = grouper::session_context(&grouper_only(Backend::Auto)).unwrap();
        ctx.register_table("lineitem", grouper_cli::tpch::lineitem_table(0.01, 2, false, &|_| {}).unwrap())
            .unwrap();
        assert!(fused_matches_cpu(&ctx, grouper_cli::tpch::Q1).await, "Q1 must fuse");
    });
}
