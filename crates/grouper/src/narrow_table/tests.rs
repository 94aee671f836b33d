//! The narrowed table against the same batches as a `MemTable`: every answer equal, on grouper's
//! CPU backend (fused and not) and on DataFusion's own aggregation, and the columns stored as
//! their values allow.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Decimal128Array, Int32Array, Int64Array, RecordBatch, StringArray, StringViewArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::MemTable;
use datafusion::physical_plan::{collect, displayable};
use datafusion::prelude::SessionContext;

use super::{NarrowTable, SMALL_DICTIONARY};
use crate::test_support::{answer_lines, physical_plan};
use crate::{session_context, Backend, GrouperConfig};

fn decimals(values: impl Iterator<Item = Option<i128>>, p: u8) -> ArrayRef {
    Arc::new(
        values
            .collect::<Decimal128Array>()
            .with_precision_and_scale(p, 2)
            .unwrap(),
    )
}

/// Three partitions of batches of 1,000 rows: flags of few values (one a view, one with NULLs),
/// decimals of at most 18 digits (with NULLs, whose slots hold values past 64 bits), one of 18
/// digits holding a value past 64 bits (an unvalidated array), one of 25 digits, strings of many
/// values.
fn batches(schema: &SchemaRef) -> Vec<Vec<RecordBatch>> {
    let flags = ["A", "N", "R"];
    let batch = |b: i64| {
        let rows = (b * 1000)..(b * 1000 + 1000);
        let garbage_under_nulls = |i: i64, v: i128| match i % 7 == 3 {
            true => None,
            false => Some(v),
        };
        let price: ArrayRef = {
            // The NULL slots keep a value no 64-bit integer holds.
            let values: Vec<i128> = rows
                .clone()
                .map(|i| match i % 7 == 3 {
                    true => i128::MAX,
                    false => 90_000 + (i * 1_234_567 % 10_000_000) as i128,
                })
                .collect();
            let nulls: arrow::buffer::NullBuffer =
                rows.clone().map(|i| i % 7 != 3).collect::<Vec<_>>().into();
            Arc::new(
                Decimal128Array::new(values.into(), Some(nulls))
                    .with_precision_and_scale(15, 2)
                    .unwrap(),
            )
        };
        RecordBatch::try_new(
            Arc::clone(schema),
            vec![
                Arc::new(StringArray::from_iter(
                    rows.clone()
                        .map(|i| (i % 17 != 0).then_some(flags[(i * 7 % 3) as usize])),
                )),
                Arc::new(StringViewArray::from_iter_values(
                    rows.clone().map(|i| ["F", "O"][(i % 2) as usize]),
                )),
                Arc::new(Int32Array::from_iter_values(
                    rows.clone().map(|i| (i % 100) as i32),
                )),
                price,
                decimals(
                    rows.clone()
                        .map(|i| garbage_under_nulls(i, (i % 11) as i128)),
                    15,
                ),
                decimals(rows.clone().map(|i| Some(100 * (i % 50) as i128)), 9),
                decimals(
                    rows.clone().map(|i| match i == 1500 {
                        true => Some(i128::from(i64::MAX) + 1),
                        false => Some(i as i128),
                    }),
                    18,
                ),
                decimals(rows.clone().map(|i| Some(i as i128 * 10_i128.pow(20))), 25),
                Arc::new(StringArray::from_iter_values(
                    rows.clone().map(|i| format!("customer-name-{i:08}")),
                )),
                Arc::new(Int64Array::from_iter_values(rows.clone())),
            ],
        )
        .unwrap()
    };
    (0..3)
        .map(|p| (0..2).map(|b| batch(p * 2 + b)).collect())
        .collect()
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("flag", DataType::Utf8, true),
        Field::new("status", DataType::Utf8View, false),
        Field::new("ship", DataType::Int32, false),
        Field::new("price", DataType::Decimal128(15, 2), true),
        Field::new("disc", DataType::Decimal128(15, 2), true),
        Field::new("qty", DataType::Decimal128(9, 2), false),
        Field::new("big", DataType::Decimal128(18, 2), false),
        Field::new("wide", DataType::Decimal128(25, 2), false),
        Field::new("name", DataType::Utf8, false),
        Field::new("id", DataType::Int64, false),
    ]))
}

#[test]
fn columns_are_stored_as_their_values_allow() {
    let table = NarrowTable::try_new(schema(), batches(&schema())).unwrap();
    let stored = table.stored_schema();
    let t = |c: &str| stored.field_with_name(c).unwrap().data_type().clone();
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    assert_eq!(t("flag"), dict);
    assert_eq!(t("status"), dict);
    assert_eq!(t("ship"), DataType::Int32);
    // NULL slots holding values past 64 bits do not keep a column wide.
    assert_eq!(t("price"), DataType::Decimal64(15, 2));
    assert_eq!(t("disc"), DataType::Decimal64(15, 2));
    assert_eq!(t("qty"), DataType::Decimal64(9, 2));
    // One value past 64 bits in one batch keeps the whole column wide.
    assert_eq!(t("big"), DataType::Decimal128(18, 2));
    assert_eq!(t("wide"), DataType::Decimal128(25, 2));
    // 1,000 distinct names a batch pass SMALL_DICTIONARY.
    assert!(1000 * "customer-name-00000000".len() > SMALL_DICTIONARY);
    assert_eq!(t("name"), DataType::Utf8);
    assert_eq!(t("id"), DataType::Int64);
}

#[test]
fn a_batch_of_another_schema_is_an_error() {
    let other = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(other, vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
    assert!(NarrowTable::try_new(schema(), vec![vec![batch]]).is_err());
}

/// Sessions of `backend` over table `t`: `parts` as a `MemTable`, and as a narrowed table.
fn sessions(
    backend: Backend,
    schema: &SchemaRef,
    parts: &[Vec<RecordBatch>],
) -> (SessionContext, SessionContext) {
    let config = GrouperConfig {
        backend,
        threads: Some(3),
        ..Default::default()
    };
    let plain = session_context(&config).unwrap();
    let table = MemTable::try_new(Arc::clone(schema), parts.to_vec()).unwrap();
    plain.register_table("t", Arc::new(table)).unwrap();
    let narrow = session_context(&config).unwrap();
    let table = NarrowTable::try_new(Arc::clone(schema), parts.to_vec()).unwrap();
    narrow.register_table("t", Arc::new(table)).unwrap();
    (plain, narrow)
}

async fn answers(ctx: &SessionContext, sql: &str) -> (Vec<String>, String) {
    let plan = physical_plan(ctx, sql).await;
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    let shown = displayable(plan.as_ref()).indent(true).to_string();
    (answer_lines(&batches, false), shown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrowed_table_answers_as_its_memtable() {
    let schema = schema();
    let parts = batches(&schema);
    let queries = [
        // Fused: a filter, decimal arithmetic in lanes, two flags as keys (both stay narrow).
        (
            "SELECT flag, status, sum(price * (1 - disc)), sum(qty), avg(price), count(*) \
             FROM t WHERE ship < 70 GROUP BY flag, status",
            Some("(3 decimal columns read as 64-bit, 2 keys as dictionaries)"),
        ),
        // The filter reads a narrowed decimal: widened for it, the other kept narrow.
        (
            "SELECT status, sum(price), count(*) FROM t WHERE disc > 0.05 GROUP BY status",
            Some("(1 decimal columns read as 64-bit, 1 keys as dictionaries)"),
        ),
        // Not fused: keys and arguments read directly.
        ("SELECT flag, count(*), sum(id) FROM t GROUP BY flag", None),
        // A narrowed decimal as a key, a flag as an argument.
        (
            "SELECT qty, count(*), max(flag), min(price) FROM t GROUP BY qty",
            None,
        ),
        ("SELECT big, wide, count(*) FROM t GROUP BY big, wide", None),
        ("SELECT count(DISTINCT flag), sum(big) FROM t", None),
        // No aggregation: the widened columns as DataFusion reads them.
        (
            "SELECT flag, status, price, disc FROM t WHERE price IS NOT NULL \
             ORDER BY price DESC, id LIMIT 7",
            None,
        ),
    ];
    for backend in [Backend::Cpu, Backend::DataFusion] {
        let (plain, narrow) = sessions(backend, &schema, &parts);
        for (sql, read) in queries {
            let (want, _) = answers(&plain, sql).await;
            let (got, shown) = answers(&narrow, sql).await;
            assert_eq!(got, want, "{backend}: {sql}");
            assert!(got.len() > 4, "{sql}: {got:?}");
            if let (Backend::Cpu, Some(read)) = (backend, read) {
                assert!(shown.contains(read), "{sql}: {shown}");
            }
        }
    }
}

/// On the GPU (where there is one; `GROUPER_REQUIRE_GPU=1` makes its absence a failure): the
/// same answers, and the second run of a fused query finds its prepared input in the cache,
/// which knows it by the stored batches (the widened ones are new arrays each run).
#[cfg(feature = "gpu")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_gpu_a_narrowed_table_answers_as_its_memtable_and_is_cached() {
    if grouper_gpu::Gpu::get().is_err() {
        assert!(
            !grouper_gpu::gpu_required(),
            "GROUPER_REQUIRE_GPU is set and no GPU started"
        );
        return;
    }
    let schema = schema();
    let parts = batches(&schema);
    let (plain, narrow) = sessions(Backend::Gpu, &schema, &parts);
    let sql = "SELECT flag, status, sum(price * (1 - disc)), sum(qty), count(*) \
               FROM t WHERE ship < 70 GROUP BY flag, status";
    let (want, _) = answers(&plain, sql).await;
    let (first, shown) = answers(&narrow, sql).await;
    assert!(shown.contains("device="), "{shown}");
    let (second, shown) = answers(&narrow, sql).await;
    assert_eq!(first, want);
    assert_eq!(second, want);
    assert!(shown.contains("(cached)"), "{shown}");
}
