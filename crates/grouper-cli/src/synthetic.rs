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
use rand_distr::{Distribution, Zipf};
use rayon::prelude::*;

/// How keys are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    /// Every group equally likely.
    Uniform,
    /// Zipf-distributed group ranks with exponent `s`.
    Zipf(f64),
    /// Half the rows in one group, the rest uniform.
    HeavyHitter,
    /// Sorted runs: row `i` is in group `i * groups / rows`.
    Sequential,
}

impl Dist {
    /// Parses a distribution name; `zipf_s` is the Zipf exponent.
    pub fn parse(name: &str, zipf_s: f64) -> Result<Self> {
        Ok(match name {
            "uniform" => Dist::Uniform,
            "zipf" => Dist::Zipf(zipf_s),
            "heavy_hitter" => Dist::HeavyHitter,
            "sequential" => Dist::Sequential,
            _ => {
                return Err(DataFusionError::Plan(format!(
                    "unknown distribution '{name}' (expected uniform, zipf, heavy_hitter or sequential)"
                )))
            }
        })
    }

    /// Name for reports.
    pub fn name(&self) -> String {
        match self {
            Dist::Uniform => "uniform".into(),
            Dist::Zipf(s) => format!("zipf{s}"),
            Dist::HeavyHitter => "heavy_hitter".into(),
            Dist::Sequential => "sequential".into(),
        }
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
    let zipf = match spec.dist {
        Dist::Zipf(s) => Some(
            Zipf::new(spec.groups as f64, s)
                .map_err(|e| DataFusionError::Plan(format!("zipf: {e}")))?,
        ),
        _ => None,
    };
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
                let k = match spec.dist {
                    Dist::Uniform => rng.random_range(0..spec.groups),
                    Dist::Zipf(_) => zipf.as_ref().map_or(0, |z| z.sample(&mut rng) as u64 - 1),
                    Dist::HeavyHitter => {
                        if rng.random_bool(0.5) {
                            0
                        } else {
                            rng.random_range(0..spec.groups)
                        }
                    }
                    Dist::Sequential => {
                        (i as u128 * spec.groups as u128 / spec.rows as u128) as u64
                    }
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
