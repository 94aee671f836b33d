//! What the engine is asked: the query's shape ([`QuerySpec`]) and its input ([`InputBatch`]).

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Decimal128Type, Decimal64Type};

use crate::agg::AggregateSpec;
use crate::error::{GrouperError, Result};
use crate::keys;

/// The shape of a `GROUP BY` query: key column types and aggregates.
#[derive(Debug, Clone, PartialEq)]
pub struct QuerySpec {
    /// Types of the group keys, in output order (empty for a global aggregate).
    pub key_types: Vec<DataType>,
    /// The aggregates, in output order.
    pub aggregates: Vec<AggregateSpec>,
}

impl QuerySpec {
    /// Checks that every key and aggregate is supported; returns the output column types
    /// (keys, then aggregates).
    pub fn output_types(&self) -> Result<Vec<DataType>> {
        let mut out = Vec::with_capacity(self.key_types.len() + self.aggregates.len());
        for t in &self.key_types {
            if !keys::supports(t) {
                return Err(GrouperError::UnsupportedType {
                    what: "group key",
                    data_type: t.clone(),
                });
            }
            out.push(t.clone());
        }
        for a in &self.aggregates {
            out.push(a.output_type()?);
        }
        Ok(out)
    }
}

/// One batch of input: the evaluated key columns and aggregate arguments, all of equal length.
#[derive(Debug, Clone)]
pub struct InputBatch {
    /// One array per group key.
    pub keys: Vec<ArrayRef>,
    /// One array per aggregate argument; `None` for `COUNT(*)`.
    pub args: Vec<Option<ArrayRef>>,
    rows: usize,
}

impl InputBatch {
    /// A batch of `rows` rows; fails when a column's length or type does not match `spec`.
    pub fn try_new(
        spec: &QuerySpec,
        keys: Vec<ArrayRef>,
        args: Vec<Option<ArrayRef>>,
        rows: usize,
    ) -> Result<Self> {
        if keys.len() != spec.key_types.len() || args.len() != spec.aggregates.len() {
            return Err(GrouperError::InvalidInput(format!(
                "expected {} keys and {} arguments, got {} and {}",
                spec.key_types.len(),
                spec.aggregates.len(),
                keys.len(),
                args.len()
            )));
        }
        for (k, t) in keys.iter().zip(&spec.key_types) {
            // A declared string key may come dictionary-encoded (Int32 keys), as a Parquet
            // scan reads a column of few values for the fused pipeline: the codec codes the
            // dictionary's values once; strategies that keep batches get the declared type
            // ([`InputBatch::widened`]).
            let dictionary = matches!(k.data_type(), DataType::Dictionary(..))
                && matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
                && keys::is_string_column(k);
            if !(dictionary && k.len() == rows) {
                check_column(k, t, rows, "key")?;
            }
        }
        for (a, s) in args.iter().zip(&spec.aggregates) {
            match (a, &s.input_type) {
                // A decimal SUM or AVG also reads its argument's 64-bit lanes.
                (Some(a), Some(_)) if a.len() == rows && s.accepts(a.data_type()) => {}
                (Some(a), Some(t)) => check_column(a, t, rows, "argument")?,
                (None, None) => {}
                _ => {
                    return Err(GrouperError::InvalidInput(format!(
                        "argument presence does not match {}",
                        s.kind
                    )))
                }
            }
        }
        Ok(Self { keys, args, rows })
    }

    /// The same rows with every argument in its aggregate's own type: 64-bit decimal lanes
    /// ([`crate::agg::AggregateSpec::lanes_type`]) widened to Decimal128, narrower integers
    /// ([`crate::agg::AggregateSpec::narrow_type`]) cast to their aggregate's type. Strategies that keep
    /// batches to gather them later (arrow's `interleave` and `concat` take one type per
    /// column) keep these.
    pub fn widened(&self, spec: &QuerySpec) -> Self {
        let args = self
            .args
            .iter()
            .zip(&spec.aggregates)
            .map(|(a, s)| {
                match (
                    a.as_ref()
                        .and_then(|a| a.as_primitive_opt::<Decimal64Type>()),
                    &s.input_type,
                ) {
                    // Value for value (a cast would check the declared precision, which the
                    // lanes' values never were).
                    (Some(lanes), Some(t)) => Some(Arc::new(
                        lanes
                            .unary::<_, Decimal128Type>(i128::from)
                            .with_data_type(t.clone()),
                    ) as ArrayRef),
                    // A narrower integer argument, exactly as DataFusion's cast makes it.
                    (None, Some(t)) if a.as_ref().is_some_and(|a| a.data_type() != t) => a
                        .as_ref()
                        .and_then(|a| arrow::compute::cast(a, t).ok())
                        .or_else(|| a.clone()),
                    _ => a.clone(),
                }
            })
            .collect();
        // Dictionary-encoded keys in their declared type (the cast is arrow's: one view or
        // string per row).
        let keys = keys::as_declared(&self.keys, &spec.key_types)
            .map_or_else(|_| self.keys.clone(), Cow::into_owned);
        Self {
            keys,
            args,
            rows: self.rows,
        }
    }

    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// The rows `rows` (indices into this batch), gathered.
    pub fn take(&self, rows: &[u32]) -> Result<Self> {
        let indices = arrow::array::UInt32Array::from(rows.to_vec());
        let take = |a: &ArrayRef| arrow::compute::take(a, &indices, None);
        Ok(Self {
            keys: self
                .keys
                .iter()
                .map(take)
                .collect::<std::result::Result<_, _>>()?,
            args: self
                .args
                .iter()
                .map(|a| a.as_ref().map(take).transpose())
                .collect::<std::result::Result<_, _>>()?,
            rows: rows.len(),
        })
    }

    /// Rows `offset..offset + len`, zero-copy.
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        Self {
            keys: self.keys.iter().map(|a| a.slice(offset, len)).collect(),
            args: self
                .args
                .iter()
                .map(|a| a.as_ref().map(|a| a.slice(offset, len)))
                .collect(),
            rows: len,
        }
    }
}

fn check_column(a: &ArrayRef, t: &DataType, rows: usize, what: &str) -> Result<()> {
    if a.len() != rows || a.data_type() != t {
        return Err(GrouperError::InvalidInput(format!(
            "{what} column of type {} and length {} where {t} of length {rows} was expected",
            a.data_type(),
            a.len()
        )));
    }
    Ok(())
}

/// Rows per morsel: large enough to amortise dispatch, small enough that a morsel's key words,
/// group ids and argument values stay in L1/L2 between the passes over it (Leis et al.'s
/// morsel-driven parallelism; DataFusion's default batch size too).
pub const MORSEL_ROWS: usize = 1 << 13;

/// The morsels of `rows` rows, as `(offset, length)`: consecutive runs of at most
/// [`MORSEL_ROWS`] rows covering them all (none for no rows).
pub fn morsel_ranges(rows: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..rows)
        .step_by(MORSEL_ROWS)
        .map(move |off| (off, MORSEL_ROWS.min(rows - off)))
}

/// Splits batches into morsels of at most [`MORSEL_ROWS`] rows (zero-copy), dropping empty ones.
pub fn morsels(batches: &[InputBatch]) -> Vec<InputBatch> {
    let mut out = Vec::new();
    for b in batches {
        for (off, len) in morsel_ranges(b.num_rows()) {
            out.push(if len == b.num_rows() {
                b.clone()
            } else {
                b.slice(off, len)
            });
        }
    }
    out
}
