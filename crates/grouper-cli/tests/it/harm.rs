//! Do no harm: under `auto`, an aggregation grouper's CPU would not win stays DataFusion's
//! `AggregateExec` (and `take_kept` says why); one it wins becomes a `GroupByExec`; the answers
//! are DataFusion's either way; `--grouper-only` and `--backend cpu` always take grouper's.

use std::sync::Arc;

use arrow::array::{Decimal128Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::physical_plan::{collect, displayable};
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use grouper::{Backend, GrouperConfig};

/// A Parquet file of `rows` rows: `small` (0..100, sorted: the first batch sees a sliver of
/// it), `wide` (ids spread over 2^40), `s` (37 strings), `v`, `mid` (0..500,000), `ord` (4 ×
/// the row number: sorted over a domain wider than a direct table, row group after row group),
/// `flag` (3 one-letter strings, as TPC-H's flags), `price` (a decimal), `name` (1,000 strings).
fn parquet(rows: usize, name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("grouper-harm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let schema = Arc::new(Schema::new(vec![
        Field::new("small", DataType::Int32, false),
        Field::new("wide", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
        Field::new("mid", DataType::Int32, false),
        Field::new("ord", DataType::Int64, false),
        Field::new("flag", DataType::Utf8, false),
        Field::new("price", DataType::Decimal128(12, 2), false),
        Field::new("name", DataType::Utf8, false),
    ]));
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        Arc::clone(&schema),
        None,
    )
    .unwrap();
    let step = 1 << 16;
    for start in (0..rows).step_by(step) {
        let n = step.min(rows - start);
        let i = || (start..start + n).map(|r| r as i64);
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int32Array::from_iter_values(
                    i().map(|r| (r * 100 / rows as i64) as i32),
                )),
                Arc::new(Int64Array::from_iter_values(i().map(|r| {
                    r.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64) & ((1 << 40) - 1)
                }))),
                Arc::new(StringArray::from_iter_values(
                    i().map(|r| format!("s{}", r % 37)),
                )),
                Arc::new(Int64Array::from_iter(
                    i().map(|r| (r % 11 != 0).then_some(r % 1000)),
                )),
                Arc::new(Int32Array::from_iter_values(
                    i().map(|r| (r % 500_000) as i32),
                )),
                Arc::new(Int64Array::from_iter_values(i().map(|r| r * 4))),
                Arc::new(StringArray::from_iter_values(
                    i().map(|r| ["A", "N", "R"][(r % 3) as usize]),
                )),
                Arc::new(
                    Decimal128Array::from_iter_values(i().map(|r| i128::from(r % 100_000)))
                        .with_precision_and_scale(12, 2)
                        .unwrap(),
                ),
                Arc::new(StringArray::from_iter_values(
                    i().map(|r| format!("name{}", r % 1000)),
                )),
            ],
        )
        .unwrap();
        w.write(&batch).unwrap();
    }
    w.close().unwrap();
    path
}

fn config(backend: Backend, grouper_only: bool) -> GrouperConfig {
    GrouperConfig {
        backend,
        threads: Some(2),
        grouper_only,
        ..Default::default()
    }
}

/// An answer's rows, each its values as Arrow displays them joined by `|`, sorted: equal for
/// equal answers whatever the batches. (Arrow's pretty table took most of this file's time on
/// the answers of 2^20 groups.)
fn sorted_rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default();
    let mut rows = Vec::new();
    for b in batches {
        let columns: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            let values: Vec<String> = columns.iter().map(|f| f.value(r).to_string()).collect();
            rows.push(values.join("|"));
        }
    }
    rows.sort_unstable();
    rows
}

/// Runs `sql` over `path` as table `t`: the sorted rows, the plan, what `auto` left to
/// DataFusion.
async fn run(
    config: &GrouperConfig,
    path: &std::path::Path,
    sql: &str,
) -> (Vec<String>, String, Vec<String>) {
    let ctx: SessionContext = grouper::session_context(config).unwrap();
    ctx.register_parquet("t", path.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    let rows = sorted_rows(&batches);
    let text = displayable(plan.as_ref()).indent(true).to_string();
    (rows, text, grouper::harm::take_kept(&ctx))
}

#[test]
fn auto_leaves_datafusion_what_grouper_would_not_win() {
    let big = parquet((1 << 20) + 4096, "big.parquet");
    let small = parquet(5000, "small.parquet");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // (query, file, grouper takes it under auto, why DataFusion keeps it otherwise)
        let cases: [(&str, &std::path::Path, Option<&str>); 17] = [
            (
                "SELECT small, sum(v), count(*) FROM t GROUP BY small",
                &big,
                None,
            ),
            // A 4M-value domain, but the file's row groups hold the key in order: tables in
            // key order (the `wide` ids below, in no order, stay DataFusion's).
            (
                "SELECT ord, sum(v), count(*) FROM t GROUP BY ord",
                &big,
                None,
            ),
            // Strings: 3 values (the files' dictionary pages list them) with decimal arithmetic
            // to fuse are grouper's; so are 3 or 37 values the scan reads as dictionaries (plain
            // key columns no argument or fused filter reads); 1,000 values, a key an argument
            // reads too, or strings under a filter the CPU does not fuse are DataFusion's.
            (
                "SELECT flag, sum(price * (1 - price)), count(*) FROM t GROUP BY flag",
                &big,
                None,
            ),
            (
                "SELECT flag, sum(v), count(*) FROM t GROUP BY flag",
                &big,
                None,
            ),
            ("SELECT s, sum(v) FROM t GROUP BY s", &big, None),
            (
                "SELECT name, sum(v) FROM t GROUP BY name",
                &big,
                Some("key `name` is"),
            ),
            (
                "SELECT s, max(s), sum(v) FROM t GROUP BY s",
                &big,
                Some("key `s` is"),
            ),
            // (A filter the statistics show keeps every row: the file is just over MIN_ROWS.)
            (
                "SELECT s, sum(v) FROM t WHERE v >= 0 GROUP BY s",
                &big,
                None,
            ),
            (
                "SELECT s, sum(v) FROM t WHERE v % 2 = 0 GROUP BY s",
                &big,
                Some("key `s` is"),
            ),
            (
                "SELECT flag, s, sum(price * (1 - price)) FROM t GROUP BY flag, s",
                &big,
                None,
            ),
            (
                "SELECT wide, count(v) FROM t GROUP BY wide",
                &big,
                Some("wider than a direct-index table"),
            ),
            (
                "SELECT small + 1 AS k, sum(v) FROM t GROUP BY small + 1",
                &big,
                Some("is an expression"),
            ),
            ("SELECT sum(v), min(v) FROM t", &big, Some("no keys")),
            // A global aggregate of decimal arithmetic straight over the files (TPC-H Q6's
            // shape) is grouper's, given the rows.
            (
                "SELECT sum(price * (1 - price)), count(*) FROM t WHERE v >= 0",
                &big,
                None,
            ),
            (
                "SELECT sum(price * (1 - price)) FROM t",
                &small,
                Some("input rows, too few"),
            ),
            (
                "SELECT small, sum(v) FROM t GROUP BY small",
                &small,
                Some("input rows, too few"),
            ),
            // 2^20 rows into 2 workers' tables of 500,000 slots each: merging them costs more.
            (
                "SELECT mid, count(*) FROM t GROUP BY mid",
                &big,
                Some("merging them costs more"),
            ),
        ];
        for (sql, path, kept) in cases {
            let (want, _, _) = run(&config(Backend::DataFusion, false), path, sql).await;
            let (got, plan, why) = run(&config(Backend::Auto, false), path, sql).await;
            assert_eq!(got, want, "{sql}: auto's answer differs from DataFusion's");
            match kept {
                None => {
                    assert!(
                        plan.contains("GroupByExec"),
                        "{sql}: grouper must take it\n{plan}"
                    );
                    assert!(why.is_empty(), "{sql}: {why:?}");
                }
                Some(reason) => {
                    assert!(
                        !plan.contains("GroupByExec"),
                        "{sql}: DataFusion must keep it\n{plan}"
                    );
                    assert!(
                        why.len() == 1 && why[0].contains(reason),
                        "{sql}: expected one entry saying '{reason}', got {why:?}"
                    );
                }
            }
            for backend in [Backend::Cpu, Backend::Auto] {
                let (got, plan, why) = run(&config(backend, true), path, sql).await;
                assert_eq!(got, want, "{sql} ({backend}, grouper only)");
                assert!(
                    plan.contains("GroupByExec") && why.is_empty(),
                    "{sql} ({backend}, grouper only)\n{plan}"
                );
            }
        }
    });
}

/// Runs `sql` over `path` under `config` and checks that `auto` left it to DataFusion for one
/// reason, which says `says`, with the answer `want`.
async fn kept_by_datafusion(
    config: &GrouperConfig,
    path: &std::path::Path,
    sql: &str,
    want: &[String],
    says: &str,
) {
    let (got, plan, why) = run(config, path, sql).await;
    assert_eq!(got, want);
    assert!(!plan.contains("GroupByExec"), "{plan}");
    assert!(why.len() == 1 && why[0].contains(says), "{why:?}");
}

#[test]
fn more_workers_need_more_rows_each() {
    // The query grouper takes on 2 workers (2^20 + 4096 rows, 100 keys) is DataFusion's on 4:
    // under 2^19 rows a worker; unless it computes decimal arithmetic.
    let big = parquet((1 << 20) + 4096, "big-workers.parquet");
    let sql = "SELECT small, sum(v), count(*) FROM t GROUP BY small";
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (want, _, _) = run(&config(Backend::DataFusion, false), &big, sql).await;
        let four = GrouperConfig {
            threads: Some(4),
            ..config(Backend::Auto, false)
        };
        kept_by_datafusion(&four, &big, sql, &want, "4 workers, under 524288 each").await;
        let (_, plan, why) = run(&config(Backend::Auto, false), &big, sql).await;
        assert!(plan.contains("GroupByExec") && why.is_empty(), "{plan}");
        // Decimal arithmetic the fused pipeline computes in 64 bits pays for the workers'
        // set-up at fewer rows each (MIN_ROWS_PER_WORKER_DECIMAL): grouper's on 4 workers too,
        // DataFusion's on 16 (65,792 rows each).
        let decimal = "SELECT small, sum(price * (1 - price)), count(*) FROM t GROUP BY small";
        let (want, _, _) = run(&config(Backend::DataFusion, false), &big, decimal).await;
        let (got, plan, why) = run(&four, &big, decimal).await;
        assert_eq!(got, want);
        assert!(
            plan.contains("GroupByExec") && why.is_empty(),
            "{why:?}\n{plan}"
        );
        let sixteen = GrouperConfig {
            threads: Some(16),
            ..config(Backend::Auto, false)
        };
        let why = "16 workers, under 131072 each";
        kept_by_datafusion(&sixteen, &big, decimal, &want, why).await;
    });
}

/// `rows` rows in `parts` in-memory partitions of 8192-row batches: `small` sorted over
/// 0..100 but for one row of value 7,000 that no sampled window reads (row 1,500), `wide`
/// (ids spread over 2^40), `v`, `flag` (3 strings, and a fourth, `Z`, at row 1,500), `s` (37
/// strings), `price` (a decimal), `mid` (0..32768, repeating), `h15` and `h18` (strings of 2^15
/// and 2^18 values at random rows).
fn in_memory(rows: usize, parts: usize) -> datafusion::catalog::MemTable {
    let schema = Arc::new(Schema::new(vec![
        Field::new("small", DataType::Int32, false),
        Field::new("wide", DataType::Int64, false),
        Field::new("v", DataType::Int64, true),
        Field::new("flag", DataType::Utf8, false),
        Field::new("s", DataType::Utf8, false),
        Field::new("price", DataType::Decimal128(12, 2), false),
        Field::new("mid", DataType::Int64, false),
        Field::new("h15", DataType::Utf8, false),
        Field::new("h18", DataType::Utf8, false),
    ]));
    let spread = |r: i64, bits: u32| grouper_core::hash::murmur3(r as u64) >> (64 - bits);
    let per = rows.div_ceil(parts);
    let partitions = (0..parts)
        .map(|p| {
            (p * per..rows.min((p + 1) * per))
                .step_by(8192)
                .map(|start| {
                    let end = rows.min((p + 1) * per).min(start + 8192);
                    let i = || (start..end).map(|r| r as i64);
                    RecordBatch::try_new(
                        Arc::clone(&schema),
                        vec![
                            Arc::new(Int32Array::from_iter_values(i().map(|r| {
                                if r == 1500 {
                                    7000
                                } else {
                                    (r * 100 / rows as i64) as i32
                                }
                            }))),
                            Arc::new(Int64Array::from_iter_values(i().map(|r| {
                                r.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64) & ((1 << 40) - 1)
                            }))),
                            Arc::new(Int64Array::from_iter(
                                i().map(|r| (r % 11 != 0).then_some(r % 1000)),
                            )),
                            Arc::new(StringArray::from_iter_values(i().map(|r| {
                                if r == 1500 {
                                    "Z"
                                } else {
                                    ["A", "N", "R"][(r % 3) as usize]
                                }
                            }))),
                            Arc::new(StringArray::from_iter_values(
                                i().map(|r| format!("s{}", r % 37)),
                            )),
                            Arc::new(
                                Decimal128Array::from_iter_values(
                                    i().map(|r| i128::from(r % 100_000)),
                                )
                                .with_precision_and_scale(12, 2)
                                .unwrap(),
                            ),
                            Arc::new(Int64Array::from_iter_values(i().map(|r| r % 32768))),
                            Arc::new(StringArray::from_iter_values(
                                i().map(|r| format!("id{:010}", spread(r, 15))),
                            )),
                            Arc::new(StringArray::from_iter_values(
                                i().map(|r| format!("id{:010}", spread(r, 18))),
                            )),
                        ],
                    )
                    .unwrap()
                })
                .collect()
        })
        .collect();
    datafusion::catalog::MemTable::try_new(schema, partitions).unwrap()
}

#[test]
fn in_memory_tables_are_planned_from_a_sample_of_their_rows() {
    // DataFusion keeps no minimum or maximum for in-memory tables; a sample of the rows
    // (first and last rows of each partition among them) stands in for them. A value outside
    // the sample (7,000 at row 1,500) widens the key codec and the answer stays DataFusion's;
    // so does a string outside it (`Z`) in a key of few strings.
    let rows = (1 << 20) + 4096;
    // One table for every query and backend: its columns cost more to build than the queries.
    let table = Arc::new(in_memory(rows, 2));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let cases = [
            ("SELECT small, sum(v), count(*) FROM t GROUP BY small", None),
            // Ids spread over 2^40, about a row each: no direct table, grouper's hash
            // strategies (in memory they beat DataFusion's at every width the sweep measures),
            // alone or beside a narrow key.
            ("SELECT wide, count(v) FROM t GROUP BY wide", None),
            ("SELECT wide, small, sum(v) FROM t GROUP BY wide, small", None),
            (
                "SELECT flag, sum(price * (1 - price)), count(*) FROM t GROUP BY flag",
                None,
            ),
            (
                "SELECT flag, sum(v), count(*) FROM t GROUP BY flag",
                Some("key `flag` is"),
            ),
            ("SELECT s, sum(v) FROM t GROUP BY s", Some("key `s` is")),
            // Two string keys (37 and 4 values) pack into one word: grouper's (db-benchmark q2).
            ("SELECT s, flag, sum(v) FROM t GROUP BY s, flag", None),
            // A CORR pays for coding 37 strings (db-benchmark q9); rounded, since the two
            // engines add the sums in different orders.
            (
                "SELECT s, round(corr(v, mid), 9) FROM t GROUP BY s",
                None,
            ),
            // 32,768 groups, 16 rows a slot of the 2 workers' direct tables: grouper's, six
            // exact integer SUMs (24 bytes a group each) or nine AVGs and a count alike.
            // (Arguments are products: DataFusion rewrites `sum(v + 1)`.)
            (
                "SELECT mid, sum(v), sum(v * 2), sum(v * 3), sum(v * 5), sum(wide), sum(small) FROM t GROUP BY mid",
                None,
            ),
            (
                "SELECT mid, avg(v), avg(v * 2), avg(v * 3), avg(v * 5), avg(v * 7), avg(wide), avg(small), avg(mid), avg(price), count(*) FROM t GROUP BY mid",
                None,
            ),
            // One string key of many values (estimated from the sample): grouper's over 2^15
            // (16 rows a slot), DataFusion's over 2^18 (2 rows a slot).
            (
                "SELECT h15, sum(v), min(small), max(mid) FROM t GROUP BY h15",
                None,
            ),
            (
                "SELECT h18, sum(v), count(*) FROM t GROUP BY h18",
                Some("workers' tables of the key's"),
            ),
        ];
        for (sql, kept) in cases {
            let mut answers = Vec::new();
            for backend in [Backend::DataFusion, Backend::Auto] {
                let ctx = grouper::session_context(&config(backend, false)).unwrap();
                ctx.register_table("t", Arc::clone(&table) as _)
                    .unwrap();
                let plan = ctx
                    .sql(sql)
                    .await
                    .unwrap()
                    .create_physical_plan()
                    .await
                    .unwrap();
                let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
                answers.push(sorted_rows(&batches));
                if backend == Backend::Auto {
                    let text = displayable(plan.as_ref()).indent(true).to_string();
                    let why = grouper::harm::take_kept(&ctx);
                    match kept {
                        None => assert!(
                            text.contains("GroupByExec") && why.is_empty(),
                            "{sql}: grouper must take it ({why:?})\n{text}"
                        ),
                        Some(reason) => assert!(
                            !text.contains("GroupByExec")
                                && why.len() == 1
                                && why[0].contains(reason),
                            "{sql}: DataFusion must keep it saying '{reason}', got {why:?}\n{text}"
                        ),
                    }
                }
            }
            assert_eq!(answers[0], answers[1], "{sql}");
            // The value no sampled window reads, where the query groups by its column (the
            // first of each row).
            let hidden = if sql.ends_with("GROUP BY flag") {
                Some("Z|")
            } else if sql.ends_with("GROUP BY small") {
                Some("7000|")
            } else {
                None
            };
            if let (None, Some(hidden)) = (kept, hidden) {
                assert!(answers[0].iter().any(|l| l.starts_with(hidden)), "{sql}");
            }
        }
    });
}
