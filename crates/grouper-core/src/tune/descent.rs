//! Rosenfeld's Algorithm 1 as a state machine driven batch by batch: the executor asks which
//! configuration the next batch runs with ([`Tuner::next_config`]) and reports how long it took
//! ([`Tuner::record`]). The search follows the gradient from each start; neighbours whose times
//! are within `s` of the reference form a plateau and are explored too (the queue forks);
//! references slower than `p` × the fastest are pruned. Once the queue is empty the fastest
//! configuration runs every later batch.
//!
//! While the table grows (the executor reports each batch's new groups, [`Tuner::table_grew`]),
//! a candidate is timed in pairs with its reference ([`Paired`]): its time is the reference's
//! times the measured ratio.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Instant;

use super::measure::{Paired, Window};
use super::space::{Config, Space};
use super::Hyper;

/// Why a configuration is being measured.
#[derive(Debug, Clone, Copy)]
enum Role<S> {
    /// One of the starting configurations (evaluated before the loop).
    Start,
    /// A neighbour of the reference configuration at the queue's front.
    Neighbor(Config<S>),
}

/// How a configuration is being timed.
#[derive(Debug, Clone)]
enum Timing<S> {
    /// Its own batches in a row (Algorithm 1).
    Plain(Window),
    /// Its batches alternating with the reference's (batch times drift).
    Paired(Config<S>, Paired),
}

/// The measurement in progress.
#[derive(Debug, Clone)]
struct Measuring<S> {
    config: Config<S>,
    role: Role<S>,
    timing: Timing<S>,
}

/// One finished measurement, for reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step<S> {
    /// The configuration.
    pub config: Config<S>,
    /// Its time per row (ms), `INFINITY` if it could not run.
    pub time: f64,
    /// Batches it ran.
    pub batches: u32,
    /// The reference it was timed against in pairs, and the batches that reference ran
    /// meanwhile.
    pub reference: Option<(Config<S>, u32)>,
}

/// The tuner's state; it lives as long as the aggregation it tunes (and may outlive one query).
#[derive(Debug, Clone)]
pub struct Tuner<S> {
    space: Space,
    hyper: Hyper,
    starts: VecDeque<Config<S>>,
    queue: VecDeque<Config<S>>,
    times: HashMap<Config<S>, f64>,
    measuring: Option<Measuring<S>>,
    best: Option<(Config<S>, f64)>,
    /// The last batch inserted new groups for more than `v_max` of its rows: batch times
    /// drift, so the next measurement is paired.
    growing: bool,
    /// Measurements in a row that did not beat the fastest by more than the noise.
    stale: u32,
    steps: Vec<Step<S>>,
    tuning_batches: u64,
    /// Milliseconds of the batches that measured a configuration.
    search_ms: f64,
    decision_ns: u128,
}

impl<S: Copy + Eq + Hash> Tuner<S> {
    /// A tuner over `space` from `starts` (one per strategy to try; snapped onto the grid).
    pub fn new(space: Space, starts: &[Config<S>], hyper: Hyper) -> Self {
        let mut unique: Vec<Config<S>> = Vec::new();
        for s in starts.iter().map(|&s| space.snap(s)) {
            if !unique.contains(&s) {
                unique.push(s);
            }
        }
        Self {
            space,
            hyper,
            starts: unique.into(),
            queue: VecDeque::new(),
            times: HashMap::new(),
            measuring: None,
            best: None,
            growing: false,
            stale: 0,
            steps: Vec::new(),
            tuning_batches: 0,
            search_ms: 0.0,
            decision_ns: 0,
        }
    }

    /// The configuration the next batch runs with.
    pub fn next_config(&mut self) -> Option<Config<S>> {
        let t0 = Instant::now();
        let c = self.advance();
        self.decision_ns += t0.elapsed().as_nanos();
        c
    }

    /// Records that a batch of `rows` rows ran with `c` in `ms` milliseconds.
    pub fn record(&mut self, c: Config<S>, rows: u64, ms: f64) {
        let t0 = Instant::now();
        let per_row = ms / rows.max(1) as f64;
        let (v_max, b_max) = (self.hyper.v_max, self.hyper.b_max);
        let mut done = None;
        if let Some(m) = &mut self.measuring {
            let ours = match &mut m.timing {
                Timing::Plain(window) if c == m.config => {
                    if let Some(t) = window.push(per_row, v_max, b_max) {
                        done = Some((t, window.batches(), None));
                    }
                    true
                }
                Timing::Paired(reference, pairs) if c == *reference => {
                    if let Some(ratio) = pairs.push_reference(per_row, v_max, b_max) {
                        let (own, theirs) = pairs.batches();
                        let t = self.times.get(reference).copied().unwrap_or(f64::INFINITY);
                        done = Some((t * ratio, own, Some((*reference, theirs))));
                    }
                    true
                }
                Timing::Paired(_, pairs) if c == m.config => {
                    pairs.push_candidate(per_row);
                    true
                }
                _ => false,
            };
            if ours {
                self.tuning_batches += 1;
                self.search_ms += ms;
            }
        }
        if let Some((t, batches, reference)) = done {
            if let Some(m) = self.measuring.take() {
                self.finish(m.config, m.role, t, batches, reference);
            }
        }
        self.decision_ns += t0.elapsed().as_nanos();
    }

    /// Records that `c` cannot run (it does not fit the device or the memory limit): it counts
    /// as infinitely slow.
    pub fn fail(&mut self, c: Config<S>) {
        let Some(m) = &mut self.measuring else {
            return;
        };
        if m.config == c {
            let (config, role) = (m.config, m.role);
            self.measuring = None;
            self.finish(config, role, f64::INFINITY, 0, None);
        } else if matches!(m.timing, Timing::Paired(reference, _) if reference == c) {
            // The reference no longer runs (a memory limit): time the candidate alone.
            m.timing = Timing::Plain(Window::default());
        }
    }

    /// Whether the search is over (every later batch runs [`Tuner::best`]).
    pub fn converged(&self) -> bool {
        self.measuring.is_none() && self.starts.is_empty() && self.queue.is_empty()
    }

    /// The fastest configuration measured, and its time per row.
    pub fn best(&self) -> Option<(Config<S>, f64)> {
        self.best
    }

    /// Reports that a batch of `rows` rows inserted `new_groups` groups into the table. A
    /// table that still grows by more than `v_max` of a batch's rows makes batch times drift
    /// by about as much (inserting costs more than finding), beyond what windows sit out.
    pub fn table_grew(&mut self, rows: u64, new_groups: u64) {
        self.growing = new_groups as f64 > self.hyper.v_max * rows as f64;
    }

    /// Whether some configuration was timed in pairs with its reference (the table grew): a
    /// finished measurement that has a reference, or the one under way.
    pub fn paired(&self) -> bool {
        self.steps.iter().any(|s| s.reference.is_some())
            || self
                .measuring
                .as_ref()
                .is_some_and(|m| matches!(m.timing, Timing::Paired(..)))
    }

    /// Every finished measurement, in order.
    pub fn steps(&self) -> &[Step<S>] {
        &self.steps
    }

    /// Batches that measured a configuration.
    pub fn search_batches(&self) -> u64 {
        self.tuning_batches
    }

    /// Time the batches that measured a configuration took, ms (what the search cost, with
    /// [`Tuner::decision_ms`]).
    pub fn search_ms(&self) -> f64 {
        self.search_ms
    }

    /// Time spent deciding (in [`Tuner::next_config`], [`Tuner::record`]), ms.
    pub fn decision_ms(&self) -> f64 {
        self.decision_ns as f64 / 1e6
    }

    /// The space searched.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// Starts measuring `c`: in pairs with its reference (the neighbour's origin, a start's
    /// fastest so far) while the table grows.
    fn begin(&mut self, c: Config<S>, role: Role<S>) -> Option<Config<S>> {
        let reference = match role {
            Role::Neighbor(ci) => Some(ci),
            Role::Start => self.best.map(|b| b.0),
        }
        .filter(|r| self.growing && self.time(r).is_finite());
        let timing = match reference {
            Some(r) => Timing::Paired(r, Paired::default()),
            None => Timing::Plain(Window::default()),
        };
        self.measuring = Some(Measuring {
            config: c,
            role,
            timing,
        });
        self.issue()
    }

    /// The configuration the measurement in progress runs next (none: no measurement).
    fn issue(&mut self) -> Option<Config<S>> {
        let m = self.measuring.as_mut()?;
        Some(match &mut m.timing {
            Timing::Paired(reference, pairs) => match pairs.issue() {
                true => *reference,
                false => m.config,
            },
            Timing::Plain(_) => m.config,
        })
    }

    /// Lines 4–25 of Algorithm 1 up to the next measurement (or the end of the search).
    fn advance(&mut self) -> Option<Config<S>> {
        if self.measuring.is_some() {
            return self.issue();
        }
        // Several starting configurations: each is evaluated and queued before the loop.
        while let Some(s) = self.starts.pop_front() {
            if !self.times.contains_key(&s) {
                return self.begin(s, Role::Start);
            }
        }
        if self.stale >= self.hyper.patience {
            self.queue.clear(); // no real gain for a while: a plateau, or the minimum
        }
        let fastest = self.best.map_or(f64::INFINITY, |b| b.1);
        while let Some(&ci) = self.queue.front() {
            let ti = self.time(&ci);
            if ti > self.hyper.prune * fastest {
                self.queue.pop_front(); // prune a slow reference
                continue;
            }
            let untested = self
                .space
                .neighbors(&ci)
                .into_iter()
                .find(|n| !self.times.contains_key(n));
            match untested {
                Some(cj) => return self.begin(cj, Role::Neighbor(ci)),
                None => {
                    self.queue.pop_front(); // a local minimum: backtrack
                }
            }
        }
        self.best.map(|b| b.0)
    }

    fn time(&self, c: &Config<S>) -> f64 {
        self.times.get(c).copied().unwrap_or(f64::INFINITY)
    }

    /// Lines 12–20 of Algorithm 1 for a finished measurement.
    fn finish(
        &mut self,
        cj: Config<S>,
        role: Role<S>,
        tj: f64,
        batches: u32,
        reference: Option<(Config<S>, u32)>,
    ) {
        self.times.insert(cj, tj);
        self.steps.push(Step {
            config: cj,
            time: tj,
            batches,
            reference,
        });
        match role {
            Role::Start => self.queue.push_back(cj),
            Role::Neighbor(ci) => {
                let ti = self.time(&ci);
                let s = self.hyper.similarity;
                if tj.is_finite() && (1.0 - s) * ti <= tj && tj <= (1.0 + s) * ti {
                    self.queue.push_back(cj); // a plateau: explore from both
                } else if tj < ti {
                    if let Some(front) = self.queue.front_mut() {
                        if *front == ci {
                            *front = cj; // follow the gradient
                        }
                    }
                }
            }
        }
        let fastest = self.best.map_or(f64::INFINITY, |b| b.1);
        if tj < fastest * (1.0 - self.hyper.v_max) {
            self.stale = 0;
        } else {
            self.stale += 1;
        }
        if tj.is_finite() && tj < fastest {
            self.best = Some((cj, tj));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn space() -> Space {
        Space::for_device(32, 1024)
    }

    fn start(strategy: u8) -> Config<u8> {
        Config {
            strategy,
            blocks_per_sm: 8,
            threads: 256,
            items: 4,
        }
    }

    fn log(x: u32) -> f64 {
        (x as f64).log2()
    }

    /// Runs the tuner against `cost` (ms per batch of 1000 rows) until it converges.
    fn drive(t: &mut Tuner<u8>, cost: impl FnMut(&Config<u8>, u64) -> Option<f64>) -> u64 {
        drive_growing(t, cost, |_| 0)
    }

    /// As [`drive`], reporting that batch `b` added `new_groups(b)` groups to the table.
    fn drive_growing(
        t: &mut Tuner<u8>,
        mut cost: impl FnMut(&Config<u8>, u64) -> Option<f64>,
        mut new_groups: impl FnMut(u64) -> u64,
    ) -> u64 {
        let mut batch = 0u64;
        loop {
            let c = t.next_config().expect("a configuration");
            if t.converged() {
                break;
            }
            match cost(&c, batch) {
                Some(ms) => t.record(c, 1000, ms),
                None => t.fail(c),
            }
            t.table_grew(1000, new_groups(batch));
            batch += 1;
            assert!(batch < 100_000, "the tuner does not converge");
        }
        batch
    }

    /// A bowl with its minimum at 2 × 512 × 8 (strategy 0) and a worse copy for strategy 1.
    fn bowl(c: &Config<u8>) -> f64 {
        let d = (log(c.blocks_per_sm) - 1.0).powi(2)
            + (log(c.threads) - 9.0).powi(2)
            + 0.5 * (log(c.items) - 3.0).powi(2);
        (1.0 + 0.1 * d) * if c.strategy == 0 { 1.0 } else { 3.0 }
    }

    #[test]
    fn a_convex_space_is_descended_to_its_minimum() {
        let mut t = Tuner::new(space(), &[start(0)], Hyper::default());
        let batches = drive(&mut t, |c, _| Some(bowl(c)));
        let (best, _) = t.best().unwrap();
        assert_eq!((best.blocks_per_sm, best.threads, best.items), (2, 512, 8));
        // Far fewer evaluations than the 120 of a full search.
        assert!(t.steps().len() < 40, "{} evaluations", t.steps().len());
        assert_eq!(batches, 3 * t.steps().len() as u64);
        // After convergence every batch runs the best.
        assert_eq!(t.next_config(), Some(best));
    }

    #[test]
    fn a_slow_strategy_is_pruned() {
        let mut t = Tuner::new(space(), &[start(1), start(0)], Hyper::default());
        drive(&mut t, |c, _| Some(bowl(c)));
        assert_eq!(t.best().unwrap().0.strategy, 0);
        let slow = t.steps().iter().filter(|s| s.config.strategy == 1).count();
        assert_eq!(slow, 1, "only its start ran");
    }

    #[test]
    fn plateaus_are_crossed_when_similarity_is_allowed() {
        // A ridge of nearly equal times (within s = 6%) from the start to a deep minimum at 1
        // block of 64 threads: strict descent stops at once, plateau handling walks the ridge.
        let cost = |c: &Config<u8>| -> f64 {
            if c.items != 4 {
                return 2.0;
            }
            let steps = (log(c.blocks_per_sm) + log(c.threads) - 6.0) as i32;
            // A rim: 0.2% worse per step towards the minimum, then the minimum.
            if steps == 0 {
                0.5
            } else {
                1.0 + 0.002 * (5 - steps).abs() as f64
            }
        };
        let published = Hyper {
            patience: u32::MAX,
            ..Hyper::default()
        };
        let strict = Hyper {
            similarity: 0.0,
            ..published
        };
        let mut t = Tuner::new(space(), &[start(0)], strict);
        drive(&mut t, |c, _| Some(cost(c)));
        assert!(t.best().unwrap().1 > 0.9e-3, "{:?}", t.best());
        let mut t = Tuner::new(space(), &[start(0)], published);
        drive(&mut t, |c, _| Some(cost(c)));
        assert_eq!(t.best().unwrap().1, 0.5e-3);
    }

    #[test]
    fn patience_ends_a_flat_plateau() {
        // Every shape within the noise of every other: Algorithm 1 as published measures them
        // all; with patience the search stops after `patience` measurements without gain.
        let flat = |c: &Config<u8>| 1.0 + 0.001 * (c.threads as f64).log2();
        let published = Hyper {
            patience: u32::MAX,
            ..Hyper::default()
        };
        let mut t = Tuner::new(space(), &[start(0)], published);
        drive(&mut t, |c, _| Some(flat(c)));
        assert_eq!(t.steps().len(), space().len());
        let mut t = Tuner::new(space(), &[start(0)], Hyper::default());
        drive(&mut t, |c, _| Some(flat(c)));
        assert_eq!(t.steps().len(), 1 + 8);
        // A real gain resets it: the bowl's minimum is still found.
        let mut t = Tuner::new(space(), &[start(0)], Hyper::default());
        drive(&mut t, |c, _| Some(bowl(c)));
        let (best, _) = t.best().unwrap();
        assert_eq!((best.blocks_per_sm, best.threads, best.items), (2, 512, 8));
    }

    #[test]
    fn outliers_at_the_start_of_a_measurement_do_not_mislead() {
        // Every configuration's first batch is 3x slow (a table filling, a cold cache).
        let mut first = HashMap::new();
        let mut t = Tuner::new(space(), &[start(0)], Hyper::default());
        drive(&mut t, |c, _| {
            let seen = first.insert(*c, ()).is_some();
            Some(bowl(c) * if seen { 1.0 } else { 3.0 })
        });
        let (best, _) = t.best().unwrap();
        assert_eq!((best.blocks_per_sm, best.threads, best.items), (2, 512, 8));
        assert!(t.steps().iter().all(|s| s.batches == 4));
    }

    #[test]
    fn a_growing_table_has_shapes_compared_in_pairs() {
        // 2^24 groups over passes of 32 batches of 2^21 rows: batch k of a pass inserts
        // ~94%·e^(-k/8) of its rows as new groups, and inserting costs 1.2x finding. Windows
        // of three batches never settle, and plain means favour whatever ran late in a pass.
        let new_share = |b: u64| 0.94 * (-((b % 32) as f64) / 8.0).exp();
        let run = |report_growth: bool| {
            let mut t = Tuner::new(space(), &[start(0)], Hyper::default());
            drive_growing(
                &mut t,
                |c, b| Some(bowl(c) * (1.0 + 1.2 * new_share(b))),
                |b| match report_growth {
                    true => (1000.0 * new_share(b)) as u64,
                    false => 0,
                },
            );
            t
        };
        let t = run(true);
        assert!(t.paired());
        let (best, _) = t.best().unwrap();
        assert_eq!((best.blocks_per_sm, best.threads, best.items), (2, 512, 8));
        // Paired times are relative to the first measurement's: their ratios are the bowl's.
        let steps = t.steps();
        let first = steps[0];
        assert!(first.reference.is_none());
        for s in steps[1..].iter().filter(|s| s.reference.is_some()) {
            let want = bowl(&s.config) / bowl(&first.config);
            let got = s.time / first.time;
            assert!((got / want - 1.0).abs() < 0.05, "{s:?}: {got} vs {want}");
        }
        // Unaware of the growth, the search ends elsewhere.
        let blind = run(false);
        assert!(!blind.paired());
        assert_ne!(blind.best().unwrap().0, best);
    }

    #[test]
    fn configurations_that_cannot_run_are_stepped_around() {
        let mut t = Tuner::new(space(), &[start(0)], Hyper::default());
        drive(&mut t, |c, _| (c.threads <= 512).then(|| bowl(c)));
        let (best, _) = t.best().unwrap();
        assert_eq!((best.blocks_per_sm, best.threads, best.items), (2, 512, 8));
        assert!(t
            .steps()
            .iter()
            .any(|s| s.time.is_infinite() && s.config.threads == 1024));
    }

    proptest! {
        /// On any surface: every configuration is measured at most once and lies on the grid,
        /// the search ends within b_max batches per configuration, and the best is the fastest
        /// measured.
        #[test]
        fn any_surface_terminates(seed in any::<u64>(), noise in 0.0f64..0.5, growth in 0u64..40) {
            let value = |c: &Config<u8>, b: u64| -> f64 {
                let h = crate::hash::murmur3(
                    seed ^ ((c.blocks_per_sm as u64) << 40) ^ ((c.threads as u64) << 20) ^ c.items as u64,
                );
                let n = crate::hash::murmur3(h ^ b) as f64 / u64::MAX as f64;
                1.0 + (h % 1000) as f64 / 100.0 + noise * n
            };
            let mut t = Tuner::new(space(), &[start(0), start(1)], Hyper::default());
            // A table growing by 0-39 groups a batch of 1000 rows (paired from 20 on).
            let batches = drive(&mut t, |c, b| Some(value(c, b)));
            let mut grown = Tuner::new(space(), &[start(0), start(1)], Hyper::default());
            let b = drive_growing(&mut grown, |c, b| Some(value(c, b)), |b| (growth + b) % 40);
            prop_assert!(b <= 21 * grown.steps().len() as u64);
            prop_assert_eq!(grown.paired(), grown.steps().iter().any(|s| s.reference.is_some()));
            let steps = t.steps();
            let mut seen = std::collections::HashSet::new();
            for s in steps {
                prop_assert!(space().contains(&s.config));
                prop_assert!(seen.insert(s.config), "{:?} measured twice", s.config);
            }
            // Plain: at most b_max batches a measurement; paired: b_max of the candidate's
            // and one more of the reference's.
            prop_assert!(batches <= 21 * steps.len() as u64);
            let fastest = steps.iter().map(|s| s.time).fold(f64::INFINITY, f64::min);
            prop_assert_eq!(t.best().unwrap().1, fastest);
        }
    }
}
