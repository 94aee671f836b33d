//! The oracle: a deliberately simple, single-threaded executor that every strategy is tested
//! against. It shares nothing with the strategies but the aggregate algebra (whose semantics are
//! tested on their own and against DataFusion): keys are Arrow's own row format, groups live in a
//! `BTreeMap`, found one row at a time. Obviously right, and slow.

use std::collections::BTreeMap;

use arrow::array::ArrayRef;
use arrow::row::{OwnedRow, RowConverter, SortField};

use crate::agg::new_accumulator;
use crate::error::Result;
use crate::input::{InputBatch, QuerySpec};

/// Aggregates `batches`; returns key columns then aggregate columns, groups in key order.
pub fn aggregate(spec: &QuerySpec, batches: &[InputBatch]) -> Result<Vec<ArrayRef>> {
    spec.output_types()?;
    let converter = RowConverter::new(
        spec.key_types
            .iter()
            .map(|t| SortField::new(t.clone()))
            .collect(),
    )?;
    let mut accs = spec
        .aggregates
        .iter()
        .map(new_accumulator)
        .collect::<Result<Vec<_>>>()?;
    let mut groups: BTreeMap<OwnedRow, u32> = BTreeMap::new();
    for batch in batches {
        let rows = if spec.key_types.is_empty() {
            None
        } else {
            Some(
                converter
                    .convert_columns(&crate::keys::as_declared(&batch.keys, &spec.key_types)?)?,
            )
        };
        let mut gids = Vec::with_capacity(batch.num_rows());
        for r in 0..batch.num_rows() {
            let key = match &rows {
                Some(rows) => rows.row(r).owned(),
                None => no_key_row(&converter),
            };
            let next = groups.len() as u32;
            gids.push(*groups.entry(key).or_insert(next));
        }
        // Each row updates its group's state, in row order: the algebra's own update over
        // the batch (slicing a batch a row at a time had made this oracle the tests' long pole:
        // 1.5M rows took minutes).
        for (acc, arg) in accs.iter_mut().zip(&batch.args) {
            acc.resize(groups.len());
            acc.update(&gids, arg.as_ref())?;
        }
    }
    if spec.key_types.is_empty() && groups.is_empty() {
        groups.insert(no_key_row(&converter), 0);
        accs.iter_mut().for_each(|a| a.resize(1));
    }
    let order: Vec<u32> = groups.values().copied().collect();
    let mut out = if spec.key_types.is_empty() {
        Vec::new()
    } else {
        converter.convert_rows(groups.keys().map(|k| k.row()))?
    };
    for acc in accs {
        out.push(acc.finalize(Some(&order))?);
    }
    Ok(out)
}

/// The single key of a query without GROUP BY.
fn no_key_row(converter: &RowConverter) -> OwnedRow {
    let parser = converter.parser();
    parser.parse(&[]).owned()
}
