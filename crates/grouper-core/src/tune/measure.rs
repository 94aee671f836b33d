//! `ProcessBlocksWith` of Rosenfeld's Algorithm 1: how many batches one configuration runs
//! before its time counts. Outliers cluster at the start of a measurement (Rosenfeld §3.6), so
//! a configuration runs three batches; if their normalised range (max − min) / mean exceeds
//! `v_max`, the oldest is dropped and another batch runs, up to `b_max` batches ([`Window`]).
//!
//! Beyond the paper: while the table grows, configurations are compared in pairs
//! ([`Paired`]). A batch that inserts many new groups takes longer than one that finds its
//! groups, whatever the shape (at 2^24 groups over 2^26 rows a pass's first batches ran 2x its
//! last): Rosenfeld's windows then never settle, and a shape measured late in the filling looks
//! fast. Timed between two batches of its reference instead, a candidate's ratio to the
//! reference's mean cancels any drift that is linear over three batches.

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

/// A candidate timed against a reference whose batches alternate with its own: reference,
/// candidate, reference, candidate, … Each candidate batch counts as its ratio to the mean of
/// the reference batches on either side, and those ratios fill a [`Window`] (steady within
/// `v_max`, at most `b_max` candidate batches). The result is a ratio, to be scaled by the
/// reference's own time.
#[derive(Debug, Clone)]
pub struct Paired {
    ratios: Window,
    /// The last reference batch's time.
    before: Option<f64>,
    /// A candidate batch's time waiting for the reference batch after it.
    pending: Option<f64>,
    reference_next: bool,
    reference_batches: u32,
    candidate_batches: u32,
}

impl Default for Paired {
    fn default() -> Self {
        Self {
            ratios: Window::default(),
            before: None,
            pending: None,
            reference_next: true,
            reference_batches: 0,
            candidate_batches: 0,
        }
    }
}

impl Paired {
    /// Whether the next batch to run is the reference's (the schedule alternates, starting
    /// with the reference); advances the schedule.
    pub fn issue(&mut self) -> bool {
        let r = self.reference_next;
        self.reference_next = !r;
        r
    }

    /// A reference batch's time. Returns the candidate's ratio once the ratios are steady or
    /// `b_max` of them were taken.
    pub fn push_reference(&mut self, t: f64, v_max: f64, b_max: u32) -> Option<f64> {
        self.reference_batches += 1;
        match (self.before.replace(t), self.pending.take()) {
            (Some(before), Some(c)) if before + t > 0.0 => {
                self.ratios.push(2.0 * c / (before + t), v_max, b_max)
            }
            _ => None,
        }
    }

    /// A candidate batch's time (it counts once the next reference batch has run; one with no
    /// reference batch before it cannot be paired and is dropped).
    pub fn push_candidate(&mut self, t: f64) {
        self.candidate_batches += 1;
        if self.before.is_some() {
            self.pending = Some(t);
        }
    }

    /// Batches the candidate and the reference ran.
    pub fn batches(&self) -> (u32, u32) {
        (self.candidate_batches, self.reference_batches)
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

    #[test]
    fn pairs_cancel_a_linear_drift() {
        // Times grow 10% a batch; the candidate is 20% slower than the reference. A plain
        // window never settles; the ratio to the reference on either side is exact.
        let mut p = Paired::default();
        let mut out = None;
        let mut batch = 0;
        while out.is_none() {
            let drift = 1.0 + 0.1 * batch as f64;
            if p.issue() {
                out = p.push_reference(drift, 0.019, 10);
            } else {
                p.push_candidate(1.2 * drift);
            }
            batch += 1;
        }
        assert!((out.unwrap() - 1.2).abs() < 1e-12, "{out:?}");
        assert_eq!(p.batches(), (3, 4));
    }

    #[test]
    fn a_candidate_without_a_reference_before_it_is_dropped() {
        let mut p = Paired::default();
        p.push_candidate(5.0); // left over from before the pairing began
        assert_eq!(p.push_reference(1.0, 0.019, 10), None);
        p.push_candidate(2.0);
        p.push_reference(1.0, 0.019, 10);
        p.push_candidate(2.0);
        p.push_reference(1.0, 0.019, 10);
        p.push_candidate(2.0);
        assert_eq!(p.push_reference(1.0, 0.019, 10), Some(2.0));
    }
}
