//! Synthetic `GROUP BY` inputs: a key column `k` with a chosen number of groups and distribution,
//! and a Float64 value column `v`. Generated in parallel, reproducibly (one seeded generator per
//! chunk), for `grouper gen synthetic` and the benchmarks.

use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1, StandardNormal, Zipf};
use rayon::prelude::*;

/// How keys are drawn: the distributions of the papers' experiments (docs/ARCHITECTURE.md,
/// "Reproducing the papers"). `groups` is the key domain; a skewed distribution fills part of
/// it (the distinct count is measured, never assumed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    /// Every group equally likely.
    Uniform,
    /// Zipf-distributed group ranks with exponent `s` (Luan: 0.5 to 3).
    Zipf(f64),
    /// This fraction of the rows in group 0, the rest uniform (the sort-based paper: 0.9).
    HeavyHitter(f64),
    /// Sorted runs: row `i` is in group `i * groups / rows`.
    Sequential,
    /// Uniform over `groups` keys scattered over the key type's positive range (the
    /// sort-based paper's "random"): the same group sizes as `Uniform`, but no dense index
    /// applies.
    Random,
    /// Exponential group sizes: `Exp(1)` scaled so that the largest of `rows` draws lands near
    /// the last group (a rate only rescales, so it is no parameter here).
    Exponential,
    /// Weibull with this shape (the sort-based paper: a = 2), scaled as `Exponential`.
    Weibull(f64),
    /// Normal around the middle group, standard deviation a sixth of the groups, clamped.
    Normal,
}

/// The distributions `parse` knows, for messages.
const NAMES: &str =
    "uniform, zipf[:S], heavy_hitter[:F], sequential, random, exponential, weibull[:A] or normal";

impl Dist {
    /// The sort-based aggregation paper's five (Fig. 10), in its order.
    pub const SORT_PAPER: [Dist; 5] = [
        Dist::HeavyHitter(0.9),
        Dist::Random,
        Dist::Exponential,
        Dist::Weibull(2.0),
        Dist::Normal,
    ];

    /// Parses `name` or `name:param` (`zipf:1.1`; the names `name()` prints, `zipf1.1`, too);
    /// a bare `zipf` takes `zipf_s`.
    pub fn parse(text: &str, zipf_s: f64) -> Result<Self> {
        let split = text
            .find(|c: char| c == ':' || c.is_ascii_digit())
            .unwrap_or(text.len());
        let (name, param) = text.split_at(split);
        let param = param.trim_start_matches(':');
        let value = |default: f64| -> Result<f64> {
            if param.is_empty() {
                return Ok(default);
            }
            param
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| {
                    DataFusionError::Plan(format!(
                        "distribution '{text}': '{param}' is not a positive number"
                    ))
                })
        };
        let dist = match name {
            "uniform" => Dist::Uniform,
            "zipf" => Dist::Zipf(value(zipf_s)?),
            "heavy_hitter" => Dist::HeavyHitter(value(0.9)?),
            "sequential" => Dist::Sequential,
            "random" => Dist::Random,
            "exponential" => Dist::Exponential,
            "weibull" => Dist::Weibull(value(2.0)?),
            "normal" => Dist::Normal,
            _ => {
                return Err(DataFusionError::Plan(format!(
                    "unknown distribution '{text}' (expected {NAMES})"
                )))
            }
        };
        let parameterless = matches!(
            dist,
            Dist::Uniform | Dist::Sequential | Dist::Random | Dist::Exponential | Dist::Normal
        );
        if parameterless && !param.is_empty() {
            return Err(DataFusionError::Plan(format!(
                "distribution '{name}' takes no parameter (got '{text}')"
            )));
        }
        if matches!(dist, Dist::HeavyHitter(f) if f > 1.0) {
            return Err(DataFusionError::Plan(format!(
                "heavy_hitter's fraction must be within (0, 1], got '{param}'"
            )));
        }
        Ok(dist)
    }

    /// Name for reports (parses back with [`Dist::parse`]).
    pub fn name(&self) -> String {
        match self {
            Dist::Uniform => "uniform".into(),
            Dist::Zipf(s) => format!("zipf{s}"),
            Dist::HeavyHitter(f) => format!("heavy_hitter{f}"),
            Dist::Sequential => "sequential".into(),
            Dist::Random => "random".into(),
            Dist::Exponential => "exponential".into(),
            Dist::Weibull(a) => format!("weibull{a}"),
            Dist::Normal => "normal".into(),
        }
    }

    /// Whether few groups take most rows (the sweeps' "skewed" flag for the planner's rules).
    pub fn is_skewed(&self) -> bool {
        matches!(
            self,
            Dist::Zipf(_) | Dist::HeavyHitter(_) | Dist::Exponential | Dist::Weibull(_)
        )
    }
}

impl FromStr for Dist {
    type Err = DataFusionError;
    /// [`Dist::parse`] with Zipf's exponent 1.1 for a bare `zipf`.
    fn from_str(s: &str) -> Result<Self> {
        Dist::parse(s, 1.1)
    }
}

/// Draws group numbers in `0..groups` by a [`Dist`]: the distribution's objects built once.
pub struct Sampler {
    dist: Dist,
    groups: u64,
    rows: usize,
    zipf: Option<Zipf<f64>>,
    /// `Exponential`, `Weibull`: draws are multiplied by this to span the groups.
    scale: f64,
}

impl Sampler {
    /// A sampler of `groups` groups for an input of `rows` rows.
    pub fn new(dist: Dist, groups: u64, rows: usize) -> Result<Self> {
        if groups == 0 {
            return Err(DataFusionError::Plan("groups must be at least 1".into()));
        }
        let zipf = match dist {
            Dist::Zipf(s) => Some(
                Zipf::new(groups as f64, s)
                    .map_err(|e| DataFusionError::Plan(format!("zipf: {e}")))?,
            ),
            _ => None,
        };
        // The largest of n draws of Exp(1) is about ln n, of Weibull(a) about (ln n)^(1/a).
        let ln_n = (rows.max(2) as f64).ln();
        let scale = match dist {
            Dist::Exponential => groups as f64 / ln_n,
            Dist::Weibull(a) => groups as f64 / ln_n.powf(1.0 / a),
            _ => 1.0,
        };
        Ok(Self {
            dist,
            groups,
            rows,
            zipf,
            scale,
        })
    }

    /// The group of row `i`.
    pub fn group<R: Rng + ?Sized>(&self, rng: &mut R, i: usize) -> u64 {
        let g = self.groups;
        let last = (g - 1) as f64;
        match self.dist {
            Dist::Uniform | Dist::Random => rng.random_range(0..g),
            Dist::Zipf(_) => self.zipf.as_ref().map_or(0, |z| z.sample(rng) as u64 - 1),
            Dist::HeavyHitter(f) => {
                if rng.random_bool(f.min(1.0)) {
                    0
                } else {
                    rng.random_range(0..g)
                }
            }
            Dist::Sequential => (i as u128 * g as u128 / self.rows.max(1) as u128) as u64,
            // `as` from f64 saturates, and the min keeps the tail in the last group.
            Dist::Exponential => {
                let x: f64 = Exp1.sample(rng);
                ((x * self.scale) as u64).min(g - 1)
            }
            Dist::Weibull(a) => {
                let x: f64 = Exp1.sample(rng);
                ((x.powf(1.0 / a) * self.scale) as u64).min(g - 1)
            }
            Dist::Normal => {
                let z: f64 = StandardNormal.sample(rng);
                (last / 2.0 + z * g as f64 / 6.0).round().clamp(0.0, last) as u64
            }
        }
    }
}

/// `Random`'s key for group `k`: a bijection of the key type's positive range (multiplying by
/// an odd constant modulo 2^31 or 2^63), so `groups` groups stay `groups` distinct keys.
pub(crate) fn scatter(k: u64, key_type: KeyType) -> u64 {
    match key_type {
        KeyType::I32 => k.wrapping_mul(0x9e37_79b1) & 0x7fff_ffff,
        KeyType::I64 | KeyType::Str => k.wrapping_mul(0x9e37_79b9_7f4a_7c15) & (i64::MAX as u64),
    }
}

/// Type of the key column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// Int32 keys `0..groups`.
    I32,
    /// Int64 keys `0..groups`.
    I64,
    /// Strings `key-<n>`.
    Str,
}

impl FromStr for KeyType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "i32" => Ok(KeyType::I32),
            "i64" => Ok(KeyType::I64),
            "str" => Ok(KeyType::Str),
            _ => Err(format!("unknown key type '{s}' (expected i32, i64 or str)")),
        }
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Rows.
    pub rows: usize,
    /// Distinct groups the keys are drawn from.
    pub groups: u64,
    /// Key distribution.
    pub dist: Dist,
    /// Key column type.
    pub key_type: KeyType,
    /// Fraction of NULL keys and (independently) NULL values.
    pub null_frac: f64,
    /// Seed.
    pub seed: u64,
}

const CHUNK: usize = 1 << 20;

/// The schema of generated data.
pub fn schema(key_type: KeyType) -> SchemaRef {
    let kt = match key_type {
        KeyType::I32 => DataType::Int32,
        KeyType::I64 => DataType::Int64,
        KeyType::Str => DataType::Utf8,
    };
    Arc::new(Schema::new(vec![
        Field::new("k", kt, true),
        Field::new("v", DataType::Float64, true),
    ]))
}

/// Generates the data as batches of up to 2^20 rows.
pub fn generate(spec: &Spec) -> Result<Vec<RecordBatch>> {
    if spec.groups == 0 || !(0.0..=1.0).contains(&spec.null_frac) {
        return Err(DataFusionError::Plan(
            "groups must be at least 1 and the NULL fraction within [0, 1]".into(),
        ));
    }
    let sampler = Sampler::new(spec.dist, spec.groups, spec.rows)?;
    let schema = schema(spec.key_type);
    (0..spec.rows.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut rng =
                SmallRng::seed_from_u64(spec.seed ^ (c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let lo = c * CHUNK;
            let n = CHUNK.min(spec.rows - lo);
            let mut keys = Vec::with_capacity(n);
            let mut vals = Vec::with_capacity(n);
            for i in lo..lo + n {
                let k = sampler.group(&mut rng, i);
                let k = if spec.dist == Dist::Random {
                    scatter(k, spec.key_type)
                } else {
                    k
                };
                let null_key = spec.null_frac > 0.0 && rng.random_bool(spec.null_frac);
                let null_val = spec.null_frac > 0.0 && rng.random_bool(spec.null_frac);
                keys.push((!null_key).then_some(k));
                vals.push((!null_val).then(|| rng.random_range(-1000.0..1000.0f64).round() / 4.0));
            }
            let k: ArrayRef = match spec.key_type {
                KeyType::I32 => Arc::new(
                    keys.iter()
                        .map(|k| k.map(|k| k as i32))
                        .collect::<Int32Array>(),
                ),
                KeyType::I64 => Arc::new(
                    keys.iter()
                        .map(|k| k.map(|k| k as i64))
                        .collect::<Int64Array>(),
                ),
                KeyType::Str => Arc::new(
                    keys.iter()
                        .map(|k| k.map(|k| format!("key-{k}")))
                        .collect::<StringArray>(),
                ),
            };
            let v: ArrayRef = Arc::new(Float64Array::from(vals));
            Ok(RecordBatch::try_new(Arc::clone(&schema), vec![k, v])?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    const ALL: [Dist; 8] = [
        Dist::Uniform,
        Dist::Zipf(1.1),
        Dist::HeavyHitter(0.9),
        Dist::Sequential,
        Dist::Random,
        Dist::Exponential,
        Dist::Weibull(2.0),
        Dist::Normal,
    ];

    #[test]
    fn names_parse_back_and_bad_names_are_one_clear_error() {
        for d in ALL {
            assert_eq!(d.name().parse::<Dist>().unwrap(), d, "{}", d.name());
        }
        assert_eq!(Dist::parse("zipf", 3.0).unwrap(), Dist::Zipf(3.0));
        assert_eq!(Dist::parse("zipf:0.5", 3.0).unwrap(), Dist::Zipf(0.5));
        assert_eq!(
            "heavy_hitter".parse::<Dist>().unwrap(),
            Dist::HeavyHitter(0.9)
        );
        assert_eq!(
            "heavy_hitter:0.5".parse::<Dist>().unwrap(),
            Dist::HeavyHitter(0.5)
        );
        for bad in [
            "pareto",
            "zipf:x",
            "zipf:-1",
            "heavy_hitter:2",
            "normal:3",
            "weibull:0",
        ] {
            let e = bad.parse::<Dist>().unwrap_err().to_string();
            assert!(e.contains(bad.split(':').next().unwrap()), "{bad}: {e}");
        }
    }

    /// Group sizes of `rows` draws over `groups` groups.
    fn sizes(dist: Dist, groups: u64, rows: usize) -> Vec<usize> {
        let s = Sampler::new(dist, groups, rows).unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        let mut n = vec![0usize; groups as usize];
        for i in 0..rows {
            n[s.group(&mut rng, i) as usize] += 1;
        }
        n
    }

    #[test]
    fn each_distribution_has_its_shape() {
        let (g, rows) = (1000u64, 200_000usize);
        let tenth = |n: &[usize], d: usize| -> usize { n[d * 100..(d + 1) * 100].iter().sum() };
        let hh = sizes(Dist::HeavyHitter(0.9), g, rows);
        assert!((hh[0] as f64 / rows as f64 - 0.9).abs() < 0.01, "{}", hh[0]);
        let ex = sizes(Dist::Exponential, g, rows);
        assert!(tenth(&ex, 0) > 4 * tenth(&ex, 3), "exponential decays");
        assert!(
            ex.iter().filter(|&&c| c > 0).count() > 500,
            "and spans the groups"
        );
        let wb = sizes(Dist::Weibull(2.0), g, rows);
        let peak = (0..10).max_by_key(|&d| tenth(&wb, d)).unwrap();
        assert!(
            (1..5).contains(&peak),
            "weibull(2) rises, then falls: peak {peak}"
        );
        let no = sizes(Dist::Normal, g, rows);
        assert!(tenth(&no, 4) + tenth(&no, 5) > 10 * (tenth(&no, 0) + tenth(&no, 9)));
        let un = sizes(Dist::Uniform, g, rows);
        assert!(un.iter().all(|&c| c > 100 && c < 300), "uniform");
        let sq = sizes(Dist::Sequential, g, rows);
        assert!(sq.iter().all(|&c| c == 200), "sequential: equal runs");
    }

    /// The planner's estimate tells how many rows sit on hot keys, not only how hot the
    /// hottest is: the normal distribution's clamped tails (±3σ, ~0.13% of the rows on each
    /// end key) are hotter than an H100's hot-key share, 1/(8·132), but take few rows between
    /// them; zipf(1.1)'s head and the heavy hitter take most.
    #[test]
    fn the_estimate_weighs_hot_keys_by_their_rows() {
        use grouper_core::planner::{estimate, Hints};
        let (g, rows) = (1u64 << 24, 1usize << 20);
        let hot = |dist| {
            let s = Sampler::new(dist, g, rows).unwrap();
            let mut rng = SmallRng::seed_from_u64(7);
            let keys: Vec<u64> = (0..rows).map(|i| s.group(&mut rng, i)).collect();
            let e = estimate(&[keys], g, Hints::default());
            (e.top_share(), e.hot_share(1.0 / (8.0 * 132.0)))
        };
        let (top, share) = hot(Dist::Normal);
        assert!(top > 1.0 / 1056.0 && share < 0.005, "normal: {top} {share}");
        let (top, share) = hot(Dist::Zipf(1.1));
        assert!(top > 0.05 && share > 0.3, "zipf: {top} {share}");
        let (_, share) = hot(Dist::HeavyHitter(0.9));
        assert!(share > 0.85, "heavy hitter: {share}");
        let (_, share) = hot(Dist::Uniform);
        assert_eq!(share, 0.0, "uniform");
    }

    #[test]
    fn random_keys_are_as_many_as_uniform_groups_and_scattered() {
        for key_type in [KeyType::I32, KeyType::I64] {
            let spec = |dist| Spec {
                rows: 50_000,
                groups: 5000,
                dist,
                key_type,
                null_frac: 0.0,
                seed: 3,
            };
            let keys = |dist| -> Vec<i64> {
                let batches = generate(&spec(dist)).unwrap();
                let c = arrow::compute::cast(batches[0].column(0), &DataType::Int64).unwrap();
                c.as_primitive::<Int64Type>().values().to_vec()
            };
            let distinct = |v: &[i64]| v.iter().collect::<std::collections::HashSet<_>>().len();
            let (u, r) = (keys(Dist::Uniform), keys(Dist::Random));
            assert_eq!(distinct(&u), distinct(&r), "{key_type:?}");
            assert!(r.iter().all(|&k| k >= 0));
            let max = *r.iter().max().unwrap();
            let range = if key_type == KeyType::I32 {
                1i64 << 28
            } else {
                1i64 << 60
            };
            assert!(max > range, "{key_type:?}: random keys reach {max}");
        }
    }
}
