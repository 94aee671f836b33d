//! `CORR(x, y)`: Pearson's correlation coefficient of two Float64 arguments, as DataFusion's
//! grouped accumulator computes it (`CorrelationGroupsAccumulator`). The state is six sums
//! (`n`, `Σx`, `Σy`, `Σxy`, `Σx²`, `Σy²`), each combined by addition: merge is their sum, and on
//! the GPU every field is one atomic add, so the coefficient runs in every strategy. A row
//! counts only where both arguments are non-NULL.
//!
//! The argument is one value per row, a *pair* ([`pair_type`]): the rule hands the two
//! arguments over as a struct of two Float64 columns, NULL where either is (the fused IR's
//! [`crate::expr::Expr::Tuple`]), so the algebra keeps its one input per aggregate.
//!
//! `finalize` follows DataFusion: NULL for fewer than two rows, for a zero denominator (a
//! constant argument), and where one argument's sum is NaN; NaN where both are.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, StructArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Float64Type};

use super::columns::{nth, StateValue};
use super::words::{FieldWords, Input, Op};
use super::{downcast_input, for_each_valid, Aggregate, GroupAccumulator, Groups};
use crate::error::{GrouperError, Result};

/// The argument type of `CORR`: a tuple of two Float64 values
/// ([`crate::expr::tuple_type`]).
pub fn pair_type() -> DataType {
    crate::expr::tuple_type(&[DataType::Float64, DataType::Float64])
}

/// Per-group state of a CORR: the row count and five sums.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CorrState {
    /// Rows where both arguments are non-NULL.
    pub n: u64,
    /// Σx (the first argument).
    pub sx: f64,
    /// Σy (the second argument).
    pub sy: f64,
    /// Σxy.
    pub sxy: f64,
    /// Σx².
    pub sxx: f64,
    /// Σy².
    pub syy: f64,
}

impl CorrState {
    /// Folds one row in.
    #[inline(always)]
    pub fn update(&mut self, x: f64, y: f64) {
        self.n += 1;
        self.sx += x;
        self.sy += y;
        self.sxy += x * y;
        self.sxx += x * x;
        self.syy += y * y;
    }

    /// The coefficient, or `None` (SQL NULL) as DataFusion decides.
    pub fn coefficient(&self) -> Option<f64> {
        if self.sx.is_nan() && self.sy.is_nan() {
            return Some(f64::NAN);
        }
        if self.n < 2 || self.sx.is_nan() || self.sy.is_nan() {
            return None;
        }
        let n = self.n as f64;
        let (mean_x, mean_y) = (self.sx / n, self.sy / n);
        let numerator = self.sxy - self.sx * mean_y;
        let denominator = ((self.sxx - self.sx * mean_x) * (self.syy - self.sy * mean_y)).sqrt();
        (denominator != 0.0).then(|| numerator / denominator)
    }
}

/// `CORR(x, y)` over Float64 pairs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Corr;

/// The pair's two columns and the rows where both are valid.
pub(crate) fn pair(input: Option<&ArrayRef>) -> Result<(&[f64], &[f64], Option<NullBuffer>)> {
    let s = downcast_input::<StructArray>(input, "corr")?;
    let arg = |i: usize| -> Result<&Float64Array> {
        s.columns()
            .get(i)
            .and_then(|c| c.as_primitive_opt::<Float64Type>())
            .ok_or_else(|| {
                GrouperError::InvalidInput(format!(
                    "corr takes two Float64 arguments, got {}",
                    s.data_type()
                ))
            })
    };
    let (x, y) = (arg(0)?, arg(1)?);
    let nulls = NullBuffer::union(s.nulls(), NullBuffer::union(x.nulls(), y.nulls()).as_ref());
    Ok((x.values(), y.values(), nulls))
}

impl Aggregate for Corr {
    type State = CorrState;
    fn init(&self) -> Self::State {
        CorrState::default()
    }
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let (x, y, nulls) = pair(input)?;
        for_each_valid(nulls.as_ref(), gids, |g, row| {
            states[g].update(x[row], y[row]);
            Ok(())
        })
    }
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        state.n += other.n;
        state.sx += other.sx;
        state.sy += other.sy;
        state.sxy += other.sxy;
        state.sxx += other.sxx;
        state.syy += other.syy;
        Ok(())
    }
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        let out: Float64Array = states.iter().map(CorrState::coefficient).collect();
        Ok(Arc::new(out))
    }
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        let pick = |f: fn(&CorrState) -> f64| -> ArrayRef {
            f64::column(rows.iter().map(|&r| f(&states[r as usize])).collect())
        };
        vec![
            i64::column(rows.iter().map(|&r| states[r as usize].n as i64).collect()),
            pick(|s| s.sx),
            pick(|s| s.sy),
            pick(|s| s.sxy),
            pick(|s| s.sxx),
            pick(|s| s.syy),
        ]
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        let n = i64::read(nth(columns, 0)?)?;
        let sums = (1..6)
            .map(|i| f64::read(nth(columns, i)?))
            .collect::<Result<Vec<_>>>()?;
        if sums.iter().any(|s| s.len() != n.len()) {
            return Err(GrouperError::InvalidInput(
                "a saved aggregate state's columns differ in length".into(),
            ));
        }
        Ok((0..n.len())
            .map(|g| CorrState {
                n: n[g] as u64,
                sx: sums[0][g],
                sy: sums[1][g],
                sxy: sums[2][g],
                sxx: sums[3][g],
                syy: sums[4][g],
            })
            .collect())
    }
}

/// `CORR` in words: the count (the rows where both arguments are valid) and five double sums,
/// of `x`, `y`, `xy`, `x²` and `y²` (argument 0 is `x`, argument 1 is `y`).
pub(super) fn fields(input: &DataType) -> Option<Vec<(Op, Input)>> {
    (*input == pair_type()).then(|| {
        vec![
            (Op::AddU64, Input::One),
            (Op::AddF64, Input::Part(0)),
            (Op::AddF64, Input::Part(1)),
            (Op::AddF64, Input::Product(0, 1)),
            (Op::AddF64, Input::Product(0, 0)),
            (Op::AddF64, Input::Product(1, 1)),
        ]
    })
}

/// `CORR`'s states from its words.
pub(super) fn from_words(words: &FieldWords) -> Box<dyn GroupAccumulator> {
    let f = |i: usize, g: usize| f64::from_bits(words.word(i)[g]);
    let states = (0..words.groups())
        .map(|g| CorrState {
            n: words.word(0)[g],
            sx: f(1, g),
            sy: f(2, g),
            sxy: f(3, g),
            sxx: f(4, g),
            syy: f(5, g),
        })
        .collect();
    Box::new(Groups::from_states(Corr, states))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(Option<f64>, Option<f64>)]) -> ArrayRef {
        let x: Float64Array = v.iter().map(|p| p.0).collect();
        let y: Float64Array = v.iter().map(|p| p.1).collect();
        crate::expr::tuple(vec![Arc::new(x) as ArrayRef, Arc::new(y)], v.len()).unwrap()
    }

    fn corr(v: &[(Option<f64>, Option<f64>)]) -> Option<f64> {
        let mut s = [CorrState::default()];
        Corr.update_batch(&mut s, &vec![0; v.len()], Some(&pairs(v)))
            .unwrap();
        s[0].coefficient()
    }

    #[test]
    fn coefficient_and_its_nulls_follow_datafusion() {
        let line = [
            (Some(2.0), Some(1.0)),
            (Some(4.0), Some(2.0)),
            (Some(6.0), Some(3.0)),
        ];
        assert!((corr(&line).unwrap() - 1.0).abs() < 1e-12);
        let anti = [
            (Some(3.0), Some(1.0)),
            (Some(2.0), Some(2.0)),
            (Some(1.0), Some(3.0)),
        ];
        assert!((corr(&anti).unwrap() + 1.0).abs() < 1e-12);
        // A row with a NULL argument does not count, on either side.
        let holes = [
            (Some(2.0), Some(1.0)),
            (None, Some(100.0)),
            (Some(-50.0), None),
            (Some(4.0), Some(2.0)),
        ];
        assert!(
            (corr(&holes).unwrap() - 1.0).abs() < 1e-12,
            "the NULL rows' values unread"
        );
        assert_eq!(
            corr(&holes[..3]),
            None,
            "one pair left after NULLs: fewer than two"
        );
        assert_eq!(corr(&[]), None);
        assert_eq!(corr(&[(Some(1.0), Some(1.0))]), None, "one row");
        let constant = [(Some(1.0), Some(5.0)), (Some(2.0), Some(5.0))];
        assert_eq!(corr(&constant), None, "zero denominator");
        let nan = [(Some(f64::NAN), Some(1.0)), (Some(2.0), Some(2.0))];
        assert_eq!(corr(&nan), None, "one argument NaN");
        let both = [(Some(f64::NAN), Some(f64::NAN)), (Some(2.0), Some(2.0))];
        assert!(corr(&both).unwrap().is_nan(), "both NaN");
    }

    proptest::proptest! {
        /// The six sums give the coefficient the two-pass textbook formula gives (means
        /// first, then the centred products), rows with a NULL on either side skipped, split
        /// into any two partial states and merged.
        #[test]
        fn coefficient_equals_the_two_pass_formula(
            rows in proptest::collection::vec(
                (proptest::option::weighted(0.9, -1000i32..1000), proptest::option::weighted(0.9, -1000i32..1000)),
                0..200,
            ),
            split in 0usize..200,
        ) {
            let v: Vec<(Option<f64>, Option<f64>)> = rows
                .iter()
                .map(|&(x, y)| (x.map(|x| f64::from(x) / 8.0), y.map(|y| f64::from(y) * 3.0 + 7.0)))
                .collect();
            let both: Vec<(f64, f64)> = v.iter().filter_map(|&(x, y)| Some((x?, y?))).collect();
            let n = both.len() as f64;
            let (mx, my) = (
                both.iter().map(|p| p.0).sum::<f64>() / n,
                both.iter().map(|p| p.1).sum::<f64>() / n,
            );
            let cov: f64 = both.iter().map(|&(x, y)| (x - mx) * (y - my)).sum();
            let vx: f64 = both.iter().map(|&(x, _)| (x - mx) * (x - mx)).sum();
            let vy: f64 = both.iter().map(|&(_, y)| (y - my) * (y - my)).sum();
            let expected = (both.len() >= 2 && vx * vy > 0.0).then(|| cov / (vx * vy).sqrt());
            let split = split.min(v.len());
            let gids: Vec<u32> = (0..v.len()).map(|i| u32::from(i >= split)).collect();
            let mut parts = [CorrState::default(); 2];
            Corr.update_batch(&mut parts, &gids, Some(&pairs(&v))).unwrap();
            let mut merged = parts[0];
            Corr.merge(&mut merged, &parts[1]).unwrap();
            proptest::prop_assert_eq!(merged.n as usize, both.len());
            match (merged.coefficient(), expected) {
                (Some(a), Some(b)) => proptest::prop_assert!((a - b).abs() < 1e-9, "{} vs {}", a, b),
                // A constant side: the sums' denominator may round to a tiny non-zero.
                (Some(a), None) => proptest::prop_assert!(vx * vy == 0.0 && a.abs() <= 1.0 + 1e-6 || a.is_nan(), "{}", a),
                (a, b) => proptest::prop_assert_eq!(a, b),
            }
        }
    }

    #[test]
    fn merged_halves_and_saved_states_equal_one_pass() {
        let v: Vec<(Option<f64>, Option<f64>)> = (0..40)
            .map(|i| {
                let x = f64::from(i);
                (Some(x * 0.5 + f64::from(i % 7)), (i % 5 != 0).then_some(x))
            })
            .collect();
        let mut whole = [CorrState::default()];
        Corr.update_batch(&mut whole, &[0; 40], Some(&pairs(&v)))
            .unwrap();
        let mut halves = [CorrState::default(), CorrState::default()];
        let gids: Vec<u32> = (0..40).map(|i| u32::from(i >= 20)).collect();
        Corr.update_batch(&mut halves, &gids, Some(&pairs(&v)))
            .unwrap();
        let back = Corr.load(&Corr.save(&halves, &[0, 1])).unwrap();
        assert_eq!(back, halves);
        let mut merged = back[0];
        Corr.merge(&mut merged, &back[1]).unwrap();
        assert_eq!(merged.n, whole[0].n);
        let (a, b) = (
            merged.coefficient().unwrap(),
            whole[0].coefficient().unwrap(),
        );
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}
