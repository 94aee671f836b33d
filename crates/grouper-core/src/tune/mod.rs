//! The runtime tuner (Rosenfeld 2019, Algorithm 1): the best launch shape of an aggregation
//! kernel depends on the GPU, the query and the data (a shape tuned on one GPU ran up to 21×
//! slower on another), so it is searched for while the query runs. Batches keep aggregating
//! into the same table whatever shape processed them, so exploring costs only the time of the
//! slower shapes it tries, never work thrown away.
//!
//! * [`space`]: the grid of blocks per multiprocessor × threads per block × items per thread,
//!   bounded by the device's properties;
//! * [`measure`]: how many batches a configuration runs before its time counts (outliers);
//! * [`descent`]: the search itself, gradient descent with plateaus and pruning, from several
//!   starting strategies at once.
//!
//! Nothing here touches a device: the GPU executor drives a [`Tuner`] with the times of its
//! batches, the benchmark with the times an exhaustive sweep measured.

pub mod descent;
pub mod measure;
pub mod space;

pub use descent::{Step, Tuner};
pub use space::{Config, Space};

/// The hyper-parameters of Algorithm 1 (Rosenfeld's Table 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hyper {
    /// Similarity `s`: times within `(1 ± s)` of the reference form a plateau (0: strict
    /// gradient descent).
    pub similarity: f64,
    /// Pruning factor `p > 1`: references slower than `p` × the fastest are dropped.
    pub prune: f64,
    /// `v_max`: a window of three batches whose (max − min) / mean is at most this is steady.
    pub v_max: f64,
    /// `b_max`: most batches one configuration runs while being measured.
    pub b_max: u32,
    /// Beyond the paper: the search ends after this many measurements in a row that did not
    /// beat the fastest by more than `v_max` (the noise). A flat plateau otherwise has its
    /// every member measured (Rosenfeld's outliers of >20% effort); `u32::MAX`: Algorithm 1
    /// as published.
    pub patience: u32,
}

impl Default for Hyper {
    /// Rosenfeld's plateau-detecting setting (s = 0.06, p = 1.07, v_max = 0.019, b_max = 10),
    /// with a patience of 8 measurements (about one configuration's neighbourhood).
    fn default() -> Self {
        Self {
            similarity: 0.06,
            prune: 1.07,
            v_max: 0.019,
            b_max: 10,
            patience: 8,
        }
    }
}
