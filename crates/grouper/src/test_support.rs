//! Helpers the crate's tests share.

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

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
