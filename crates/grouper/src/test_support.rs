//! Helpers the crate's tests share.

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

/// A session of `auto` that takes every aggregation grouper handles (`--grouper-only`), over
/// table `t`: `batch` written to the Parquet file `path` (with the writer's `props`, or its
/// defaults). Tests of the plan-time rules of the GPU routes read grouper's plans over a
/// Parquet scan.
#[cfg(feature = "gpu")]
pub(crate) async fn grouper_over_parquet(
    path: &std::path::Path,
    batch: &RecordBatch,
    props: Option<datafusion::parquet::file::properties::WriterProperties>,
) -> SessionContext {
    let file = std::fs::File::create(path).unwrap();
    let mut w =
        datafusion::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), props).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    let ctx = crate::session_context(&crate::GrouperConfig {
        backend: crate::Backend::Auto,
        grouper_only: true,
        ..Default::default()
    })
    .unwrap();
    ctx.register_parquet(
        "t",
        path.to_string_lossy().as_ref(),
        datafusion::prelude::ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    ctx
}

/// The physical plan of `sql` in `ctx`.
pub(crate) async fn physical_plan(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    ctx.sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap()
}

/// The batches' rows as pretty-printed lines, sorted unless `ordered` (answers whose row order
/// is not fixed compare as sets of lines).
pub(crate) fn answer_lines(batches: &[RecordBatch], ordered: bool) -> Vec<String> {
    let mut lines: Vec<String> = arrow::util::pretty::pretty_format_batches(batches)
        .unwrap()
        .to_string()
        .lines()
        .map(str::to_string)
        .collect();
    if !ordered {
        lines.sort();
    }
    lines
}
