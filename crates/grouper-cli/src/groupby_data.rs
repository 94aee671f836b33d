//! The db-benchmark group-by data ("G1", h2oai/db-benchmark's `groupby-datagen.R`, kept by
//! duckdblabs): `N` rows, `K` (default 100) groups for the large-group keys.
//!
//! | column | rule (R)                              | here                     |
//! |--------|---------------------------------------|--------------------------|
//! | id1    | `sample(sprintf("id%03d",1:K), N, TRUE)`  | Utf8 `id001`..`id100`    |
//! | id2    | `sample(sprintf("id%03d",1:K), N, TRUE)`  | Utf8                     |
//! | id3    | `sample(sprintf("id%010d",1:(N/K)), N, TRUE)` | Utf8 `id0000000001`.. |
//! | id4    | `sample(K, N, TRUE)`                  | Int32 1..=K              |
//! | id5    | `sample(K, N, TRUE)`                  | Int32 1..=K              |
//! | id6    | `sample(N/K, N, TRUE)`                | Int32 1..=N/K            |
//! | v1     | `sample(5, N, TRUE)`                  | Int32 1..=5              |
//! | v2     | `sample(15, N, TRUE)`                 | Int32 1..=15             |
//! | v3     | `round(runif(N, max=100), 6)`         | Float64                  |
//!
//! With `nas` percent > 0 the suite blanks that share of each id and value column at random
//! rows (NULLs here). Draws are uniform with replacement, as R's `sample`; the generator is
//! ours (seeded per chunk, reproducible, parallel), so the values differ from R's but follow
//! the same rules.

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Rows (`N`).
    pub rows: usize,
    /// Groups of the large-group keys (`K`).
    pub k: u32,
    /// Percent of NULLs in each id and value column (the suite's `nas`).
    pub nas: u32,
    /// Seed.
    pub seed: u64,
}

/// Rows per generated batch (and per seeded chunk).
pub const CHUNK: usize = 1 << 20;

/// The G1 schema.
pub fn schema() -> SchemaRef {
    let f = |n: &str, t: DataType| Field::new(n, t, true);
    Arc::new(Schema::new(vec![
        f("id1", DataType::Utf8),
        f("id2", DataType::Utf8),
        f("id3", DataType::Utf8),
        f("id4", DataType::Int32),
        f("id5", DataType::Int32),
        f("id6", DataType::Int32),
        f("v1", DataType::Int32),
        f("v2", DataType::Int32),
        f("v3", DataType::Float64),
    ]))
}

/// The table as batches of up to 2^20 rows.
pub fn generate(spec: &Spec) -> Result<Vec<RecordBatch>> {
    if spec.k == 0 || spec.nas > 100 || spec.rows < spec.k as usize {
        return Err(DataFusionError::Plan(
            "db-benchmark data needs K >= 1, at least K rows and nas within 0..=100".into(),
        ));
    }
    let small = (spec.rows / spec.k as usize).max(1) as u32;
    let schema = schema();
    (0..spec.rows.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut rng =
                SmallRng::seed_from_u64(spec.seed ^ (c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let n = CHUNK.min(spec.rows - c * CHUNK);
            let draw = |rng: &mut SmallRng, hi: u32| -> Option<u32> {
                let null = spec.nas > 0 && rng.random_range(0..100) < spec.nas;
                let v = rng.random_range(1..=hi);
                (!null).then_some(v)
            };
            let mut ids: [Vec<Option<u32>>; 6] = Default::default();
            let mut vs: [Vec<Option<i32>>; 2] = Default::default();
            let mut v3 = Vec::with_capacity(n);
            for _ in 0..n {
                for (col, hi) in ids
                    .iter_mut()
                    .zip([spec.k, spec.k, small, spec.k, spec.k, small])
                {
                    col.push(draw(&mut rng, hi));
                }
                vs[0].push(draw(&mut rng, 5).map(|v| v as i32));
                vs[1].push(draw(&mut rng, 15).map(|v| v as i32));
                let v = draw(&mut rng, 1);
                let x = (rng.random_range(0.0..100.0f64) * 1e6).round() / 1e6;
                v3.push(v.map(|_| x));
            }
            let strings = |col: &[Option<u32>], wide: bool| -> ArrayRef {
                Arc::new(
                    col.iter()
                        .map(|v| {
                            v.map(|v| match wide {
                                true => format!("id{v:010}"),
                                false => format!("id{v:03}"),
                            })
                        })
                        .collect::<StringArray>(),
                )
            };
            let ints = |col: &[Option<u32>]| -> ArrayRef {
                Arc::new(
                    col.iter()
                        .map(|v| v.map(|v| v as i32))
                        .collect::<Int32Array>(),
                )
            };
            let columns = vec![
                strings(&ids[0], false),
                strings(&ids[1], false),
                strings(&ids[2], true),
                ints(&ids[3]),
                ints(&ids[4]),
                ints(&ids[5]),
                Arc::new(Int32Array::from(vs[0].clone())) as ArrayRef,
                Arc::new(Int32Array::from(vs[1].clone())),
                Arc::new(Float64Array::from(v3)),
            ];
            Ok(RecordBatch::try_new(Arc::clone(&schema), columns)?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int32Type;

    use super::*;

    #[test]
    fn columns_follow_the_suites_rules() {
        let spec = Spec {
            rows: 20_000,
            k: 10,
            nas: 0,
            seed: 1,
        };
        let b = &generate(&spec).unwrap()[0];
        assert_eq!(b.num_rows(), 20_000);
        let id1 = b.column(0).as_string::<i32>();
        assert!(id1
            .iter()
            .all(|s| s.is_some_and(|s| s.len() == 5 && ("id001"..="id010").contains(&s))));
        let id3 = b.column(2).as_string::<i32>();
        assert!(id3.iter().all(|s| s.is_some_and(|s| s.len() == 12)));
        let id6 = b.column(5).as_primitive::<Int32Type>();
        assert!(id6
            .iter()
            .all(|v| v.is_some_and(|v| (1..=2000).contains(&v))));
        let v2 = b.column(7).as_primitive::<Int32Type>();
        assert!(v2.iter().all(|v| v.is_some_and(|v| (1..=15).contains(&v))));
        // Every one of the K large groups is drawn at 2,000 rows each on average.
        let distinct: std::collections::HashSet<_> = id1.iter().collect();
        assert_eq!(distinct.len(), 10);
        let with_nas = generate(&Spec { nas: 10, ..spec }).unwrap();
        let nulls = with_nas[0].column(6).null_count();
        assert!(
            (1_500..2_500).contains(&nulls),
            "{nulls} NULLs of 20,000 at 10%"
        );
    }
}
