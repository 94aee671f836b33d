//! The word layout of a query's aggregates: each aggregate declares its fields next to its
//! scalar algebra (`fields` and `from_words` in `count.rs`, `sum.rs`, `avg.rs`, `min_max.rs`),
//! and [`Layout`] numbers them after word 0, the row count. [`to_accumulator`] turns a table's
//! words back into the algebra's states, so one `finalize` produces every strategy's result.
//!
//! ```text
//!  word 0 of every table: rows (add)  — presence of a group, and COUNT(*)
//!  COUNT(x)          count (add)
//!  SUM int / uint    2-word 128-bit sum (add with carry)          + seen
//!  SUM decimal       3-word 192-bit sum (add with carry)          + seen
//!  SUM float         f64 sum (atomic add)                         + seen
//!  AVG float         f64 sum, count
//!  AVG decimal       3-word sum, count
//!  MIN/MAX           ordinal as i64 (or u64) (atomic min/max)     + seen
//!  MIN/MAX decimal   128-bit value under a latch word             + seen
//!  CORR(x, y)        count, then f64 sums of x, y, xy, x², y²
//! ```

use arrow::datatypes::DataType;

use super::words::{Field, FieldWords, Input, Op, ROWS_WORD};
use super::{
    avg, corr, count, min_max, sum, AggKind, AggregateSpec, CountStar, GroupAccumulator, Groups,
};
use crate::error::{GrouperError, Result};

/// The word layout of one aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct AggLayout {
    /// The aggregate.
    pub spec: AggregateSpec,
    /// Its fields (none for `COUNT(*)`, which reads word 0).
    pub fields: Vec<Field>,
}

/// The word layout of a whole query: word 0 counts rows, then each aggregate's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// One per aggregate, in query order.
    pub aggs: Vec<AggLayout>,
    /// Total words per group.
    pub words: usize,
}

/// Each aggregate's fields, as its module declares them; `None` where it has no word form.
fn declare(spec: &AggregateSpec, input: &DataType) -> Option<Vec<(Op, Input)>> {
    match spec.kind {
        AggKind::CountStar => Some(vec![]),
        AggKind::Count => Some(count::fields()),
        AggKind::Sum => sum::fields(input),
        AggKind::Avg => avg::fields(input),
        AggKind::Min | AggKind::Max => min_max::fields(spec.kind == AggKind::Max, input),
        AggKind::Corr => corr::fields(input),
        // Welford's state and a list of values combine by no atomic operation.
        AggKind::Var | AggKind::VarPop | AggKind::Stddev | AggKind::StddevPop | AggKind::Median => {
            None
        }
    }
}

fn no_word_form(spec: &AggregateSpec) -> GrouperError {
    GrouperError::Unsupported(format!(
        "{}({}) has no 64-bit word form (the GPU's)",
        spec.kind,
        spec.input_type
            .as_ref()
            .map_or("*".to_string(), |t| t.to_string())
    ))
}

impl Layout {
    /// The layout of `aggs`, or [`GrouperError::Unsupported`] for an aggregate without a word
    /// form (MIN/MAX of strings).
    pub fn new(aggs: &[AggregateSpec]) -> Result<Self> {
        let mut next = 1;
        let mut out = Vec::with_capacity(aggs.len());
        for spec in aggs {
            spec.output_type()?;
            let input = spec.input_type.clone().unwrap_or(DataType::Null);
            let ops = declare(spec, &input).ok_or_else(|| no_word_form(spec))?;
            let fields = ops
                .into_iter()
                .map(|(op, input)| {
                    let f = Field {
                        op,
                        input,
                        word: next,
                    };
                    next += op.width();
                    f
                })
                .collect();
            out.push(AggLayout {
                spec: spec.clone(),
                fields,
            });
        }
        Ok(Layout {
            aggs: out,
            words: next,
        })
    }

    /// The identity of every word, in word order.
    pub fn identities(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.words];
        for f in self.aggs.iter().flat_map(|a| &a.fields) {
            for w in 0..f.op.width() {
                out[f.word + w] = f.op.identity(w);
            }
        }
        out
    }
}

/// The words of a table (`cols[w][g]`, word `w` of group `g`, as read back or loaded from
/// atomics) converted into the scalar algebra's accumulator of `agg`, for all groups at once.
pub fn to_accumulator(agg: &AggLayout, cols: &[Vec<u64>]) -> Result<Box<dyn GroupAccumulator>> {
    let spec = &agg.spec;
    let words = FieldWords {
        fields: &agg.fields,
        cols,
    };
    match spec.kind {
        AggKind::CountStar => Ok(Box::new(Groups::from_states(
            CountStar,
            cols[ROWS_WORD].iter().map(|&c| c as i64).collect(),
        ))),
        AggKind::Count => Ok(count::from_words(&words)),
        AggKind::Sum => sum::from_words(spec, &words),
        AggKind::Avg => avg::from_words(spec, &words),
        AggKind::Min | AggKind::Max => min_max::from_words(spec, &words),
        AggKind::Corr => Ok(corr::from_words(&words)),
        AggKind::Var | AggKind::VarPop | AggKind::Stddev | AggKind::StddevPop | AggKind::Median => {
            Err(no_word_form(spec))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_numbers_words_after_rows() {
        let l = Layout::new(&[
            AggregateSpec::count_star(),
            AggregateSpec::new(AggKind::Sum, DataType::Decimal128(15, 2)),
            AggregateSpec::new(AggKind::Min, DataType::Float32),
        ])
        .unwrap();
        assert_eq!(l.words, 1 + 4 + 2);
        assert_eq!(l.identities()[5], i64::MAX as u64);
        assert!(Layout::new(&[AggregateSpec::new(AggKind::Max, DataType::Utf8)]).is_err());
        let wide = Layout::new(&[AggregateSpec::new(
            AggKind::Min,
            DataType::Decimal128(38, 2),
        )])
        .unwrap();
        assert_eq!(wide.words, 1 + 3 + 1);
        assert_eq!(wide.identities()[1..4], [u64::MAX, i64::MAX as u64, 0]);
    }
}
