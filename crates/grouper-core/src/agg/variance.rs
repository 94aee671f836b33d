//! `VAR` / `VAR_POP` / `STDDEV` / `STDDEV_POP` of a Float64 argument (DataFusion coerces every
//! numeric argument to it), as DataFusion's `VarianceGroupsAccumulator` and
//! `StddevGroupsAccumulator` compute them: Welford's running count, mean and sum of squared
//! deviations (`m2`) per group, partial states combined with Chan's pairwise formula. The sums
//! of `x` and `x²` would combine by addition (a GPU word form, as CORR's), but they lose every
//! digit where the mean dwarfs the spread (values near 1e9 that differ by 1); Welford's state
//! does not, so these aggregates have no word form and run on the CPU's strategies.
//!
//! `finalize`: NULL for no row, and for one row where the sample statistic divides by `n - 1`;
//! otherwise `m2 / (n - 1)` (sample) or `m2 / n` (population), and its square root for the
//! standard deviations.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array};

use super::columns::{nth, StateValue};
use super::{downcast_input, for_each_valid, Aggregate};
use crate::error::{GrouperError, Result};

/// Per-group state: Welford's count, mean and sum of squared deviations from the mean.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct VarState {
    /// Non-NULL values folded in.
    pub n: u64,
    /// Their mean.
    pub mean: f64,
    /// Σ (x − mean)².
    pub m2: f64,
}

impl VarState {
    /// Folds one value in (Welford), in DataFusion's order of operations.
    #[inline(always)]
    pub fn update(&mut self, x: f64) {
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Combines another partial state in (Chan et al.'s pairwise update).
    pub fn merge(&mut self, other: &VarState) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *other;
            return;
        }
        let n = self.n + other.n;
        let (a, b, total) = (self.n as f64, other.n as f64, n as f64);
        let delta = self.mean - other.mean;
        self.mean = self.mean * a / total + other.mean * b / total;
        self.m2 = self.m2 + other.m2 + delta * delta * a * b / total;
        self.n = n;
    }

    /// The variance (`population`: divided by `n`, else by `n - 1`), or `None` (SQL NULL).
    pub fn variance(&self, population: bool) -> Option<f64> {
        let divisor = match population {
            true => self.n,
            false => self.n.saturating_sub(1),
        };
        (divisor > 0).then(|| self.m2 / divisor as f64)
    }
}

/// One of the four statistics over the same state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variance {
    /// Divide by `n` (`VAR_POP`, `STDDEV_POP`) instead of `n - 1`.
    pub population: bool,
    /// Return the square root (the standard deviations).
    pub root: bool,
}

impl Aggregate for Variance {
    type State = VarState;
    fn init(&self) -> Self::State {
        VarState::default()
    }
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let values = downcast_input::<Float64Array>(input, "var")?;
        let v = values.values();
        for_each_valid(values.nulls(), gids, |g, row| {
            states[g].update(v[row]);
            Ok(())
        })
    }
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        state.merge(other);
        Ok(())
    }
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        let out: Float64Array = states
            .iter()
            .map(|s| {
                let v = s.variance(self.population)?;
                Some(if self.root { v.sqrt() } else { v })
            })
            .collect();
        Ok(Arc::new(out))
    }
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        let pick = |f: fn(&VarState) -> f64| -> ArrayRef {
            f64::column(rows.iter().map(|&r| f(&states[r as usize])).collect())
        };
        vec![
            i64::column(rows.iter().map(|&r| states[r as usize].n as i64).collect()),
            pick(|s| s.mean),
            pick(|s| s.m2),
        ]
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        let n = i64::read(nth(columns, 0)?)?;
        let mean = f64::read(nth(columns, 1)?)?;
        let m2 = f64::read(nth(columns, 2)?)?;
        if mean.len() != n.len() || m2.len() != n.len() {
            return Err(GrouperError::InvalidInput(
                "a saved aggregate state's columns differ in length".into(),
            ));
        }
        Ok((0..n.len())
            .map(|g| VarState {
                n: n[g] as u64,
                mean: mean[g],
                m2: m2[g],
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: Variance = Variance {
        population: false,
        root: false,
    };

    fn state(v: &[Option<f64>]) -> VarState {
        let mut s = [VarState::default()];
        let input: ArrayRef = Arc::new(v.iter().copied().collect::<Float64Array>());
        SAMPLE
            .update_batch(&mut s, &vec![0; v.len()], Some(&input))
            .unwrap();
        s[0]
    }

    fn result(agg: Variance, v: &[Option<f64>]) -> Option<f64> {
        let out = agg.finalize(vec![state(v)]).unwrap();
        let out = out.as_any().downcast_ref::<Float64Array>().unwrap();
        out.is_valid(0).then(|| out.value(0))
    }

    #[test]
    fn the_four_statistics_and_their_nulls_follow_datafusion() {
        let v = [Some(2.0), Some(4.0), None, Some(4.0), Some(6.0)];
        let pop = |root| Variance {
            population: true,
            root,
        };
        let samp = |root| Variance {
            population: false,
            root,
        };
        // Mean 4, squared deviations 4 + 0 + 0 + 4 = 8 over the four non-NULL values.
        assert!((result(samp(false), &v).unwrap() - 8.0 / 3.0).abs() < 1e-12);
        assert!((result(pop(false), &v).unwrap() - 2.0).abs() < 1e-12);
        assert!((result(samp(true), &v).unwrap() - (8.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((result(pop(true), &v).unwrap() - 2f64.sqrt()).abs() < 1e-12);
        for agg in [samp(false), samp(true), pop(false), pop(true)] {
            assert_eq!(result(agg, &[]), None, "no row");
            assert_eq!(result(agg, &[None, None]), None, "only NULLs");
        }
        assert_eq!(result(samp(false), &[Some(3.0)]), None, "one row, sample");
        assert_eq!(result(samp(true), &[Some(3.0)]), None);
        assert_eq!(
            result(pop(false), &[Some(3.0)]),
            Some(0.0),
            "one row, population"
        );
        assert_eq!(result(pop(true), &[Some(3.0)]), Some(0.0));
    }

    #[test]
    fn welford_keeps_the_digits_that_sums_of_squares_lose() {
        // Values near 1e9 that differ by 1: Σx² - (Σx)²/n cancels to noise in doubles.
        let v: Vec<Option<f64>> = (0..1000).map(|i| Some(1e9 + f64::from(i % 2))).collect();
        let got = result(SAMPLE, &v).unwrap();
        let exact = 0.25 * 1000.0 / 999.0;
        assert!((got - exact).abs() < 1e-9, "{got} vs {exact}");
    }

    proptest::proptest! {
        /// Any split into two partial states, merged (either way round, and through save and
        /// load), gives the two-pass variance of all the values.
        #[test]
        fn merged_partials_equal_the_two_pass_formula(
            values in proptest::collection::vec(
                proptest::option::weighted(0.9, -1_000_000i32..1_000_000), 0..300),
            split in 0usize..300,
        ) {
            let v: Vec<Option<f64>> = values.iter().map(|x| x.map(|x| f64::from(x) / 16.0)).collect();
            let valid: Vec<f64> = v.iter().flatten().copied().collect();
            let n = valid.len() as f64;
            let mean = valid.iter().sum::<f64>() / n;
            let m2: f64 = valid.iter().map(|x| (x - mean) * (x - mean)).sum();
            let split = split.min(v.len());
            let (a, b) = (state(&v[..split]), state(&v[split..]));
            let saved = SAMPLE.load(&SAMPLE.save(&[a, b], &[0, 1])).unwrap();
            proptest::prop_assert_eq!(&saved, &vec![a, b]);
            for (mut x, y) in [(a, b), (b, a)] {
                SAMPLE.merge(&mut x, &y).unwrap();
                proptest::prop_assert_eq!(x.n as usize, valid.len());
                match (x.variance(false), valid.len()) {
                    (None, len) => proptest::prop_assert!(len < 2),
                    (Some(got), _) => {
                        let want = m2 / (n - 1.0);
                        proptest::prop_assert!(
                            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                            "{} vs {}", got, want
                        );
                    }
                }
            }
        }
    }
}
