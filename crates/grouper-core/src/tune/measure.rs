//! `ProcessBlocksWith` of Rosenfeld's Algorithm 1: how many batches one configuration runs
//! before its time counts. Outliers cluster at the start of a measurement (Rosenfeld §3.6), so
//! a configuration runs three batches; if their normalised range (max − min) / mean exceeds
//! `v_max`, the oldest is dropped and another batch runs, up to `b_max` batches.

use std::collections::VecDeque;

/// Batches in the measuring window.
pub const WINDOW: usize = 3;

/// The measurement of one configuration in progress.
#[derive(Debug, Clone, Default)]
pub struct Window {
    times: VecDeque<f64>,
    batches: u32,
}

impl Window {
    /// Adds one batch's time (per row). Returns the configuration's time once the window is
    /// steady, or when `b_max` batches have run (then the mean of the last window: the
    /// outliers this cannot drop are the variation itself).
    pub fn push(&mut self, t: f64, v_max: f64, b_max: u32) -> Option<f64> {
        self.batches += 1;
        self.times.push_back(t);
        if self.times.len() > WINDOW {
            self.times.pop_front();
        }
        if self.times.len() < WINDOW && self.batches < b_max {
            return None;
        }
        let n = self.times.len() as f64;
        let mean = self.times.iter().sum::<f64>() / n;
        let (lo, hi) = self
            .times
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        let steady = mean > 0.0 && (hi - lo) / mean <= v_max;
        (steady || self.batches >= b_max).then_some(mean)
    }

    /// Batches run so far.
    pub fn batches(&self) -> u32 {
        self.batches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_configuration_takes_three_batches() {
        let mut w = Window::default();
        assert_eq!(w.push(1.0, 0.019, 10), None);
        assert_eq!(w.push(1.01, 0.019, 10), None);
        assert_eq!(w.push(1.0, 0.019, 10), Some(3.01 / 3.0));
    }

    #[test]
    fn a_first_outlier_is_dropped() {
        let mut w = Window::default();
        assert_eq!(w.push(5.0, 0.019, 10), None);
        assert_eq!(w.push(1.0, 0.019, 10), None);
        assert_eq!(w.push(1.0, 0.019, 10), None);
        assert_eq!(w.push(1.0, 0.019, 10), Some(1.0));
        assert_eq!(w.batches(), 4);
    }

    #[test]
    fn noise_stops_at_b_max() {
        let mut w = Window::default();
        let mut out = None;
        for i in 0..10 {
            out = w.push(if i % 2 == 0 { 1.0 } else { 2.0 }, 0.019, 10);
            assert_eq!(out.is_some(), i == 9, "batch {i}");
        }
        assert!((out.unwrap() - 5.0 / 3.0).abs() < 1e-12);
        // b_max below the window ends the measurement early.
        let mut w = Window::default();
        assert_eq!(w.push(2.0, 0.019, 1), Some(2.0));
    }
}
