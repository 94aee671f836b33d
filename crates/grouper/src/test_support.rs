//! Helpers the crate's tests share.

use arrow::array::RecordBatch;

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
