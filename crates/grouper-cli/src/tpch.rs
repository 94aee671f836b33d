//! Built-in data: TPC-H `lineitem` generated in memory with `tpchgen-arrow`, and TPC-H Q1.

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::catalog::{MemTable, TableProvider};
use datafusion::error::{DataFusionError, Result};
use grouper::narrow_table::NarrowTable;
use rayon::prelude::*;
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;

/// TPC-H Query 1 (the pricing summary report), as the specification gives it, with the
/// substitution parameter DELTA = 90 days.
pub const Q1: &str = include_str!("bench/tpch/q01.sql");

/// Generates `lineitem` at scale factor `sf` in `parts` partitions (in parallel), calling
/// `progress(rows)` as batches complete.
pub fn lineitem(
    sf: f64,
    parts: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Vec<RecordBatch>>> {
    lineitem_columns(sf, parts, None, progress)
}

/// [`lineitem`] with only `columns` kept (each batch projected as it is generated, so a large
/// scale factor never holds the columns it does not need).
pub fn lineitem_columns(
    sf: f64,
    parts: usize,
    columns: Option<&[&str]>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Vec<RecordBatch>>> {
    check_sf(sf)?;
    let schema = LineItemArrow::schema_ref();
    let projection = columns
        .map(|cols| {
            cols.iter()
                .map(|c| schema.index_of(c))
                .collect::<std::result::Result<Vec<_>, _>>()
        })
        .transpose()?;
    let parts = parts.max(1);
    (1..=parts)
        .into_par_iter()
        .map(|p| {
            part_batches(sf, p, parts)
                .map(|b| {
                    let b = b?;
                    let b = match &projection {
                        Some(idx) => b.project(idx)?,
                        None => b,
                    };
                    progress(b.num_rows() as u64);
                    Ok(b)
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect()
}

/// An error unless `sf` is a positive, finite scale factor.
pub fn check_sf(sf: f64) -> Result<()> {
    if sf > 0.0 && sf.is_finite() {
        Ok(())
    } else {
        Err(DataFusionError::Plan(format!(
            "scale factor must be positive, got {sf}"
        )))
    }
}

/// Part `p` (from 1) of `parts` of `lineitem` at scale factor `sf`, batch by batch as it is
/// generated (`grouper gen tpch` writes each batch before the next is made).
pub fn part_batches(sf: f64, p: usize, parts: usize) -> impl Iterator<Item = Result<RecordBatch>> {
    let gen = LineItemGenerator::new(sf, p as i32, parts as i32);
    LineItemArrow::new(gen)
        .with_batch_size(1 << 16)
        .map(|b| Ok(b?))
}

/// `lineitem` as an in-memory table: stored narrowed (`narrow`: decimals as 64-bit, flags as
/// dictionaries; [`grouper::narrow_table`]) for grouper's CPU workers, else as `tpchgen-arrow`
/// makes it (a `MemTable`, whose arrays the GPU's prepared-input cache knows again).
pub fn lineitem_table(
    sf: f64,
    parts: usize,
    narrow: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Arc<dyn TableProvider>> {
    let data = lineitem(sf, parts, progress)?;
    let schema = LineItemArrow::schema_ref();
    Ok(match narrow {
        true => Arc::new(NarrowTable::try_new(schema, data)?),
        false => Arc::new(MemTable::try_new(schema, data)?),
    })
}

/// Approximate `lineitem` rows at scale factor `sf` (for progress bars).
pub fn lineitem_rows(sf: f64) -> u64 {
    (6_001_215.0 * sf) as u64
}
