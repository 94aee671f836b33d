//! `COUNT(*)` and `COUNT(x)`: state = a 64-bit row count, init 0, update +1, merge +, finalize as is.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};

use super::columns::{nth, StateValue};
use super::words::{FieldWords, Input, Op};
use super::{Aggregate, Runs};
use super::{GroupAccumulator, Groups};
use crate::error::{GrouperError, Result};

/// `COUNT(*)`: counts every row of the group.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountStar;

/// `COUNT(x)`: counts the non-NULL values of `x`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Count;

/// Scalar update shared by both counts.
#[inline(always)]
pub fn count_update(state: &mut i64) {
    *state += 1;
}

/// Each run's rows added to its group's count.
fn count_runs(states: &mut [i64], runs: &Runs<'_>) {
    for (g, rows) in runs.groups() {
        states[g] += rows.len() as i64;
    }
}

fn finalize_counts(states: Vec<i64>) -> Result<ArrayRef> {
    Ok(Arc::new(Int64Array::from(states)))
}

fn save_counts(states: &[i64], rows: &[u32]) -> Vec<ArrayRef> {
    vec![i64::column(
        rows.iter().map(|&r| states[r as usize]).collect(),
    )]
}

impl Aggregate for CountStar {
    type State = i64;
    fn init(&self) -> i64 {
        0
    }
    fn update_batch(&self, states: &mut [i64], gids: &[u32], _: Option<&ArrayRef>) -> Result<()> {
        for &g in gids {
            count_update(&mut states[g as usize]);
        }
        Ok(())
    }
    fn update_one(&self, state: &mut i64, rows: usize, _: Option<&ArrayRef>) -> Result<()> {
        *state += rows as i64;
        Ok(())
    }
    fn update_runs(
        &self,
        states: &mut [i64],
        runs: &Runs<'_>,
        _: Option<&ArrayRef>,
    ) -> Result<bool> {
        count_runs(states, runs);
        Ok(true)
    }
    fn merge(&self, state: &mut i64, other: &i64) -> Result<()> {
        *state += *other;
        Ok(())
    }
    fn finalize(&self, states: Vec<i64>) -> Result<ArrayRef> {
        finalize_counts(states)
    }
    fn save(&self, states: &[i64], rows: &[u32]) -> Vec<ArrayRef> {
        save_counts(states, rows)
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<i64>> {
        i64::read(nth(columns, 0)?)
    }
}

impl Aggregate for Count {
    type State = i64;
    fn init(&self) -> i64 {
        0
    }
    fn update_batch(
        &self,
        states: &mut [i64],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let input =
            input.ok_or_else(|| GrouperError::InvalidInput("count(x) needs input".into()))?;
        super::for_each_valid(input.logical_nulls().as_ref(), gids, |g, _| {
            count_update(&mut states[g]);
            Ok(())
        })
    }
    fn update_one(&self, state: &mut i64, _: usize, input: Option<&ArrayRef>) -> Result<()> {
        let input =
            input.ok_or_else(|| GrouperError::InvalidInput("count(x) needs input".into()))?;
        *state += (input.len() - input.logical_null_count()) as i64;
        Ok(())
    }
    fn update_runs(
        &self,
        states: &mut [i64],
        runs: &Runs<'_>,
        input: Option<&ArrayRef>,
    ) -> Result<bool> {
        let input =
            input.ok_or_else(|| GrouperError::InvalidInput("count(x) needs input".into()))?;
        if input.logical_null_count() > 0 {
            return Ok(false);
        }
        count_runs(states, runs);
        Ok(true)
    }
    fn merge(&self, state: &mut i64, other: &i64) -> Result<()> {
        *state += *other;
        Ok(())
    }
    fn finalize(&self, states: Vec<i64>) -> Result<ArrayRef> {
        finalize_counts(states)
    }
    fn save(&self, states: &[i64], rows: &[u32]) -> Vec<ArrayRef> {
        save_counts(states, rows)
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<i64>> {
        i64::read(nth(columns, 0)?)
    }
}

/// `COUNT(x)` in words: one count, one more per non-NULL value (`COUNT(*)` has no field of its
/// own: it reads the table's row count).
pub(super) fn fields() -> Vec<(Op, Input)> {
    vec![(Op::AddU64, Input::One)]
}

/// `COUNT(x)`'s states from its words.
pub(super) fn from_words(words: &FieldWords) -> Box<dyn GroupAccumulator> {
    Box::new(Groups::from_states(
        Count,
        words.word(0).iter().map(|&c| c as i64).collect(),
    ))
}
