//! `AVG(x)`: state = (sum, count); finalize divides. DataFusion casts integer arguments to Float64
//! before AVG, so the inputs are Float64 or Decimal128 (or an Int32 column whose cast the CPU
//! skips, [`super::AggregateSpec::narrow_type`]: each value becomes its double as it is added).
//! The decimal result has scale
//! `min(38, s + 4)` and is `sum * 10^(scale - s) / count`, truncated, as DataFusion computes it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Decimal128Array, Float64Array};
use arrow::datatypes::{DataType, Decimal128Type, DecimalType, Float64Type};

use super::columns::{load_pairs, save_pairs};
use super::sum::Dense;
use super::words::{overflow, FieldWords, Input, Op};
use super::{
    decimal_lanes, downcast_input, fold_runs, fold_valid, for_each_valid, narrow_ints,
    update_one_by_ids, Aggregate, Runs,
};
use super::{AggregateSpec, GroupAccumulator, Groups};
use crate::error::{GrouperError, Result};

/// Per-group state of an AVG. Packed to 8-byte alignment as [`super::sum::SumState`] is: a
/// decimal's 128-bit sum and its count take 24 bytes, not 32.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C, packed(8))]
pub struct AvgState<N> {
    /// Sum of the non-NULL values.
    pub sum: N,
    /// Number of non-NULL values.
    pub count: i64,
}

/// `AVG` of Float64.
#[derive(Debug, Clone, Copy, Default)]
pub struct Avg;

impl Avg {
    /// Scalar update.
    #[inline(always)]
    pub fn update(state: &mut AvgState<f64>, value: f64) {
        state.sum += value;
        state.count += 1;
    }
}

impl Aggregate for Avg {
    type State = AvgState<f64>;
    fn init(&self) -> Self::State {
        AvgState::default()
    }
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        if let Some(narrow) = narrow_ints(input) {
            let values = narrow.values();
            return for_each_valid(narrow.nulls(), gids, |g, row| {
                Avg::update(&mut states[g], f64::from(values[row]));
                Ok(())
            });
        }
        let array = downcast_input::<Float64Array>(input, "avg")?;
        let values = array.values();
        for_each_valid(array.nulls(), gids, |g, row| {
            Avg::update(&mut states[g], values[row]);
            Ok(())
        })
    }
    fn update_one(
        &self,
        state: &mut Self::State,
        rows: usize,
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        // In row order, as the row loop adds (`f64`'s `add_all`, `add_narrow`).
        let Some(values) = Dense::of::<Float64Type>(input, "avg")? else {
            return update_one_by_ids(self, state, rows, input);
        };
        state.sum = values.add_all(state.sum).0;
        state.count += rows as i64;
        Ok(())
    }
    fn update_runs(
        &self,
        states: &mut [Self::State],
        runs: &Runs<'_>,
        input: Option<&ArrayRef>,
    ) -> Result<bool> {
        let Some(values) = Dense::of::<Float64Type>(input, "avg")? else {
            return Ok(false);
        };
        for (g, rows) in runs.groups() {
            let s = &mut states[g];
            s.sum = values.add_at(s.sum, rows).0;
            s.count += rows.len() as i64;
        }
        Ok(true)
    }
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        state.sum += other.sum;
        state.count += other.count;
        Ok(())
    }
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        let out: Float64Array = states
            .into_iter()
            .map(|s| (s.count > 0).then(|| s.sum / s.count as f64))
            .collect();
        Ok(Arc::new(out))
    }
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        save_pairs(states, rows, |s| (s.sum, s.count))
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        load_pairs(columns, |sum, count| AvgState { sum, count })
    }
}

/// `AVG` of Decimal128(p, s), exact.
#[derive(Debug, Clone)]
pub struct AvgDecimal {
    input_scale: i8,
    output_precision: u8,
    output_scale: i8,
}

impl AvgDecimal {
    /// An AVG over Decimal128 values with scale `input_scale` producing `output_type`.
    pub fn new(input_scale: i8, output_type: &DataType) -> Result<Self> {
        match output_type {
            DataType::Decimal128(p, s) if *s >= input_scale => Ok(Self {
                input_scale,
                output_precision: *p,
                output_scale: *s,
            }),
            t => Err(GrouperError::UnsupportedType {
                what: "avg result",
                data_type: t.clone(),
            }),
        }
    }

    fn overflow(&self) -> GrouperError {
        GrouperError::Overflow {
            aggregate: "avg",
            data_type: DataType::Decimal128(self.output_precision, self.output_scale),
        }
    }

    /// Scalar update; false when the sum overflowed (the batch then fails: no early exit in
    /// the loop).
    #[inline(always)]
    pub fn update(&self, state: &mut AvgState<i128>, value: i128) -> bool {
        let (sum, overflow) = state.sum.overflowing_add(value);
        state.sum = sum;
        state.count += 1;
        !overflow
    }

    /// Scalar finalize of one state.
    pub fn finalize_one(&self, state: &AvgState<i128>) -> Result<Option<i128>> {
        if state.count == 0 {
            return Ok(None);
        }
        let scale_up = 10i128.pow((self.output_scale - self.input_scale) as u32);
        let avg = state
            .sum
            .checked_mul(scale_up)
            .ok_or_else(|| self.overflow())?
            / state.count as i128;
        Decimal128Type::validate_decimal_precision(avg, self.output_precision, self.output_scale)
            .map_err(|_| self.overflow())?;
        Ok(Some(avg))
    }
}

impl Aggregate for AvgDecimal {
    type State = AvgState<i128>;
    fn init(&self) -> Self::State {
        AvgState::default()
    }
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        if let Some(lanes) = decimal_lanes(input) {
            return fold_valid(
                states,
                gids,
                lanes.values(),
                lanes.nulls(),
                |s, v| self.update(s, v.into()),
                || self.overflow(),
            );
        }
        let array = downcast_input::<Decimal128Array>(input, "avg")?;
        fold_valid(
            states,
            gids,
            array.values(),
            array.nulls(),
            |s, v| self.update(s, v),
            || self.overflow(),
        )
    }
    fn update_one(
        &self,
        state: &mut Self::State,
        rows: usize,
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let Some(values) = Dense::of::<Decimal128Type>(input, "avg")? else {
            return update_one_by_ids(self, state, rows, input);
        };
        let (sum, overflow) = values.add_all(state.sum);
        state.sum = sum;
        state.count += rows as i64;
        if overflow {
            return Err(self.overflow());
        }
        Ok(())
    }
    fn update_runs(
        &self,
        states: &mut [Self::State],
        runs: &Runs<'_>,
        input: Option<&ArrayRef>,
    ) -> Result<bool> {
        let after = |s: &mut AvgState<i128>, rows: &[u32], (sum, overflow): (i128, bool)| {
            s.sum = sum;
            s.count += rows.len() as i64;
            !overflow
        };
        let Some(values) = Dense::of::<Decimal128Type>(input, "avg")? else {
            return Ok(false);
        };
        let ok = fold_runs(states, runs, |s, rows| {
            after(s, rows, values.add_at(s.sum, rows))
        });
        match ok {
            true => Ok(true),
            false => Err(self.overflow()),
        }
    }
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        state.sum = state
            .sum
            .checked_add(other.sum)
            .ok_or_else(|| self.overflow())?;
        state.count += other.count;
        Ok(())
    }
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        let out = states
            .iter()
            .map(|s| self.finalize_one(s))
            .collect::<Result<Decimal128Array>>()?
            .with_precision_and_scale(self.output_precision, self.output_scale)?;
        Ok(Arc::new(out))
    }
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        save_pairs(states, rows, |s| (s.sum, s.count))
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        load_pairs(columns, |sum, count| AvgState { sum, count })
    }
}

/// `AVG(x)` in words: the sum (f64, or a 192-bit decimal sum) and the count of values.
pub(super) fn fields(input: &DataType) -> Option<Vec<(Op, Input)>> {
    let sum = match input {
        DataType::Float64 | DataType::Decimal128(..) => super::sum::sum_op(input)?,
        _ => return None,
    };
    Some(vec![(sum, Input::Value), (Op::AddU64, Input::One)])
}

/// `AVG(x)`'s states from its words.
pub(super) fn from_words(
    spec: &AggregateSpec,
    words: &FieldWords,
) -> Result<Box<dyn GroupAccumulator>> {
    let out = spec.output_type()?;
    let n = words.groups();
    let count = |g: usize| words.word(1)[g] as i64;
    Ok(match spec.input_type {
        Some(DataType::Decimal128(_, s)) => {
            let states = (0..n)
                .map(|g| {
                    let sum = words.exact(0, g).ok_or_else(|| overflow(spec))?;
                    Ok(AvgState {
                        sum,
                        count: count(g),
                    })
                })
                .collect::<Result<_>>()?;
            Box::new(Groups::from_states(AvgDecimal::new(s, &out)?, states))
        }
        _ => Box::new(Groups::from_states(
            Avg,
            (0..n)
                .map(|g| AvgState {
                    sum: f64::from_bits(words.word(0)[g]),
                    count: count(g),
                })
                .collect(),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_avg_scales_and_truncates() {
        // avg(1.00, 2.00, 2.00) with scale 2 -> scale 6: 1.666666 (truncated, as DataFusion)
        let avg = AvgDecimal::new(2, &DataType::Decimal128(19, 6)).unwrap();
        let mut s = avg.init();
        for v in [100, 200, 200] {
            assert!(avg.update(&mut s, v));
        }
        assert_eq!(avg.finalize_one(&s).unwrap(), Some(1_666_666));
        assert_eq!(avg.finalize_one(&avg.init()).unwrap(), None);
        let neg = AvgState {
            sum: -500,
            count: 3,
        };
        assert_eq!(avg.finalize_one(&neg).unwrap(), Some(-1_666_666));
    }
}
