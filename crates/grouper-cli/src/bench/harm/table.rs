//! The timing twin's tables: columns drawn from the distributions that decide which engine wins
//! a `GROUP BY` (narrow and wide integer domains, uniform and zipf, sorted runs, random 62-bit
//! ids, short and URL-like strings, dates, decimals, floats, booleans; some with NULLs), at
//! 1e6–1e7 rows, written once as Parquet (SNAPPY, dictionary pages: what writers produce) and
//! shared by many cases.
//!
//! A table is its [`TableSpec`]: generation is deterministic per column and chunk, so a saved
//! reproducer holds the spec, not the data.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array,
    RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Rows generated (and written) per batch.
const CHUNK: usize = 1 << 16;

/// How a column's values are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Kind {
    /// 32-bit integers, `card` values from a random base, uniform.
    Int32 {
        card: u64,
    },
    /// 64-bit integers, `card` values from a random base, uniform.
    Int64 {
        card: u64,
    },
    /// 64-bit integers, `card` values, zipf with exponent `s` (a few hot keys).
    Zipf {
        card: u64,
        s: f64,
    },
    /// 64-bit integers ascending in runs of `rows / card` (an order key).
    Sorted {
        card: u64,
    },
    /// Random 62-bit ids, a pool of `card` (web analytics' user and watch ids).
    WideIds {
        card: u64,
    },
    /// Short strings (`tag17`), `card` values, uniform; `empty` of them are ''.
    Tag {
        card: u64,
        empty: f64,
    },
    /// URL-like strings of 40–70 bytes, `card` values, zipf-ish.
    Url {
        card: u64,
    },
    /// Dates over `days` consecutive days.
    Date {
        days: u32,
    },
    /// DECIMAL(15, 2), `card` values.
    Decimal {
        card: u64,
    },
    /// Float64 with `card` values.
    Float {
        card: u64,
    },
    Bool,
}

impl Kind {
    /// The Arrow type.
    pub fn arrow(self) -> DataType {
        match self {
            Kind::Int32 { .. } => DataType::Int32,
            Kind::Int64 { .. } | Kind::Zipf { .. } | Kind::Sorted { .. } | Kind::WideIds { .. } => {
                DataType::Int64
            }
            Kind::Tag { .. } | Kind::Url { .. } => DataType::Utf8,
            Kind::Date { .. } => DataType::Date32,
            Kind::Decimal { .. } => DataType::Decimal128(15, 2),
            Kind::Float { .. } => DataType::Float64,
            Kind::Bool => DataType::Boolean,
        }
    }

    /// Integers (arithmetic and ranges apply).
    pub fn is_integer(self) -> bool {
        self.arrow().is_integer()
    }
}

/// One column: name, distribution, fraction of NULLs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColSpec {
    pub name: String,
    pub kind: Kind,
    pub nulls: f64,
}

/// A table: rows, columns and the seed of its data. Key columns are named `k*`, measures `v*`
/// (`v0` Int64, `v1` DECIMAL(15, 2), `v2` Float64, every table has them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableSpec {
    pub seed: u64,
    pub rows: usize,
    pub columns: Vec<ColSpec>,
}

impl TableSpec {
    /// A random table of `rows` rows: 3–8 key columns of random kinds, and the measures.
    pub fn random(seed: u64, rows: usize) -> TableSpec {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x7ab1e);
        let n = rng.random_range(3..=8);
        let mut columns: Vec<ColSpec> = (0..n)
            .map(|i| ColSpec {
                name: format!("k{i}"),
                kind: random_kind(&mut rng, rows as u64),
                nulls: *pick(&mut rng, &[0.0, 0.0, 0.0, 0.01, 0.2]),
            })
            .collect();
        columns.extend(measures());
        TableSpec {
            seed,
            rows,
            columns,
        }
    }

    /// The key columns.
    pub fn keys(&self) -> impl Iterator<Item = &ColSpec> {
        self.columns.iter().filter(|c| c.name.starts_with('k'))
    }

    /// Writes the table to `path` as Parquet.
    pub fn write(&self, path: &Path) -> Result<()> {
        let schema = Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|c| Field::new(&c.name, c.kind.arrow(), true))
                .collect::<Vec<_>>(),
        ));
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&tmp)?, schema.clone(), Some(props))?;
        let chunks = self.rows.div_ceil(CHUNK);
        // A few chunks at a time: generated in parallel, written in order.
        for first in (0..chunks).step_by(16) {
            let batches: Vec<RecordBatch> = (first..(first + 16).min(chunks))
                .into_par_iter()
                .map(|i| self.chunk(&schema, i))
                .collect::<Result<_>>()?;
            for b in &batches {
                w.write(b)?;
            }
        }
        // On disk before any timing: writeback of a fresh file would slow the runs that follow.
        w.into_inner()?.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// Rows `i * CHUNK ..` of every column.
    fn chunk(&self, schema: &Arc<Schema>, i: usize) -> Result<RecordBatch> {
        let start = i * CHUNK;
        let len = CHUNK.min(self.rows - start);
        let arrays = self
            .columns
            .iter()
            .enumerate()
            .map(|(c, col)| {
                let mut rng = SmallRng::seed_from_u64(
                    self.seed ^ ((c as u64) << 40) ^ (i as u64).wrapping_mul(0x9e37_79b9),
                );
                column(
                    &mut rng,
                    col,
                    self.seed.wrapping_add(c as u64),
                    start,
                    len,
                    self.rows,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(schema.clone(), arrays)?)
    }
}

/// The measures every table has.
pub fn measures() -> Vec<ColSpec> {
    let m = |name: &str, kind| ColSpec {
        name: name.into(),
        kind,
        nulls: 0.0,
    };
    vec![
        m("v0", Kind::Int64 { card: 1_000_000 }),
        m("v1", Kind::Decimal { card: 10_000_000 }),
        m("v2", Kind::Float { card: 1_000_000 }),
    ]
}

fn pick<'a, T>(rng: &mut SmallRng, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

/// A key column's distribution, with cardinalities from a handful to about the rows.
fn random_kind(rng: &mut SmallRng, rows: u64) -> Kind {
    let card = |rng: &mut SmallRng| {
        let c = *pick(rng, &[2u64, 7, 100, 1_000, 30_000, 1 << 20, u64::MAX]);
        c.min(rows).max(1)
    };
    match rng.random_range(0..12) {
        0 | 1 => Kind::Int32 { card: card(rng) },
        2 => Kind::Int64 { card: card(rng) },
        3 => Kind::Zipf {
            card: card(rng),
            s: *pick(rng, &[0.8, 1.1, 1.5]),
        },
        4 => Kind::Sorted { card: card(rng) },
        5 => Kind::WideIds {
            card: *pick(rng, &[1_000, rows / 8, rows]),
        },
        6 | 7 => Kind::Tag {
            card: card(rng).min(100_000),
            empty: *pick(rng, &[0.0, 0.5]),
        },
        8 => Kind::Url {
            card: (*pick(rng, &[1_000, rows / 20, rows / 2])).max(1),
        },
        9 => Kind::Date {
            days: *pick(rng, &[30, 2_500]),
        },
        10 => Kind::Decimal { card: card(rng) },
        _ => {
            if rng.random_bool(0.5) {
                Kind::Bool
            } else {
                Kind::Float { card: card(rng) }
            }
        }
    }
}

/// A 64-bit mix (splitmix64's finaliser): value `i` of a pool, reproducibly.
fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A number in [0, 1) drawn from `i`, reproducibly.
pub fn mix_unit(i: u64) -> f64 {
    (mix(0x5eed, i) >> 11) as f64 / (1u64 << 53) as f64
}

/// Rows `start .. start + len` of column `col` (of a table of `rows` rows).
fn column(
    rng: &mut SmallRng,
    col: &ColSpec,
    seed: u64,
    start: usize,
    len: usize,
    rows: usize,
) -> Result<ArrayRef> {
    let nulls = col.nulls;
    let valid = |rng: &mut SmallRng| nulls == 0.0 || !rng.random_bool(nulls);
    let base = (mix(seed, 0) % 1_000_000) as i64;
    let uniform = |rng: &mut SmallRng, card: u64| rng.random_range(0..card.max(1));
    Ok(match col.kind {
        Kind::Int32 { card } => Arc::new(Int32Array::from_iter((0..len).map(|_| {
            let v = uniform(rng, card) as i64 + base;
            valid(rng).then_some(v as i32)
        }))),
        Kind::Int64 { card } => Arc::new(Int64Array::from_iter((0..len).map(|_| {
            let v = uniform(rng, card) as i64 + base;
            valid(rng).then_some(v)
        }))),
        Kind::Zipf { card, s } => {
            let z = Zipf::new(card.max(1) as f64, s)?;
            Arc::new(Int64Array::from_iter((0..len).map(|_| {
                let v = z.sample(rng) as i64 + base;
                valid(rng).then_some(v)
            })))
        }
        Kind::Sorted { card } => {
            let run = (rows as u64 / card.max(1)).max(1);
            Arc::new(Int64Array::from_iter((0..len).map(|j| {
                let v = ((start + j) as u64 / run) as i64 + base;
                valid(rng).then_some(v)
            })))
        }
        Kind::WideIds { card } => Arc::new(Int64Array::from_iter((0..len).map(|_| {
            let v = (mix(seed, uniform(rng, card)) >> 2) as i64;
            valid(rng).then_some(v)
        }))),
        Kind::Tag { card, empty } => Arc::new(StringArray::from_iter((0..len).map(|_| {
            let s = if empty > 0.0 && rng.random_bool(empty) {
                String::new()
            } else {
                format!("tag{}", uniform(rng, card))
            };
            valid(rng).then_some(s)
        }))),
        Kind::Url { card } => {
            let z = Zipf::new(card.max(1) as f64, 0.9)?;
            Arc::new(StringArray::from_iter((0..len).map(|_| {
                let i = z.sample(rng) as u64;
                let h = mix(seed, i);
                let s = format!(
                    "https://site{}.example.com/{}/page-{}.html?id={i}",
                    h % 97,
                    ["news", "shop", "search", "video"][(h % 4) as usize],
                    h % 100_000
                );
                valid(rng).then_some(s)
            })))
        }
        Kind::Date { days } => Arc::new(Date32Array::from_iter((0..len).map(|_| {
            let v = 18_000 + rng.random_range(0..days.max(1)) as i32;
            valid(rng).then_some(v)
        }))),
        Kind::Decimal { card } => Arc::new(
            Decimal128Array::from_iter((0..len).map(|_| {
                let v = i128::from(uniform(rng, card)) + 100;
                valid(rng).then_some(v)
            }))
            .with_precision_and_scale(15, 2)?,
        ),
        Kind::Float { card } => Arc::new(Float64Array::from_iter((0..len).map(|_| {
            let v = uniform(rng, card) as f64 * 0.25;
            valid(rng).then_some(v)
        }))),
        Kind::Bool => Arc::new(BooleanArray::from_iter(
            (0..len).map(|_| valid(rng).then(|| rng.random_bool(0.5))),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;

    #[test]
    fn a_spec_writes_the_same_table_every_time() {
        let spec = TableSpec::random(3, 70_000);
        let schema = Arc::new(Schema::new(
            spec.columns
                .iter()
                .map(|c| Field::new(&c.name, c.kind.arrow(), true))
                .collect::<Vec<_>>(),
        ));
        let a = spec.chunk(&schema, 1).expect("chunk");
        let b = spec.chunk(&schema, 1).expect("chunk");
        assert_eq!(a, b);
        assert_eq!(a.num_rows(), 70_000 - CHUNK);
        assert_ne!(spec.chunk(&schema, 0).expect("chunk"), a);
    }

    #[test]
    fn a_written_table_reads_back_with_its_rows_and_nulls() {
        use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
        let mut spec = TableSpec::random(11, 100_000);
        spec.columns[0].nulls = 0.5;
        let path = std::env::temp_dir().join(format!("harm-{}.parquet", std::process::id()));
        spec.write(&path).expect("write");
        let reader =
            SerializedFileReader::new(std::fs::File::open(&path).expect("open")).expect("parquet");
        let meta = reader.metadata();
        assert_eq!(meta.file_metadata().num_rows(), 100_000);
        let nulls: i64 = meta
            .row_groups()
            .iter()
            .filter_map(|g| g.column(0).statistics().and_then(|s| s.null_count_opt()))
            .map(|n| n as i64)
            .sum();
        assert!(
            (40_000..60_000).contains(&nulls),
            "{nulls} NULLs of 100000 at 0.5"
        );
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn wide_ids_are_wide_and_sorted_keys_ascend() {
        let col = |kind| ColSpec {
            name: "k0".into(),
            kind,
            nulls: 0.0,
        };
        let mut rng = SmallRng::seed_from_u64(1);
        let ids = column(
            &mut rng,
            &col(Kind::WideIds { card: 1 << 20 }),
            9,
            0,
            4096,
            1 << 20,
        )
        .expect("ids");
        let ids = ids.as_any().downcast_ref::<Int64Array>().expect("int64");
        let (lo, hi) = (ids.values().iter().min(), ids.values().iter().max());
        assert!(hi.zip(lo).is_some_and(|(h, l)| h - l > 1 << 58));
        let sorted = column(
            &mut rng,
            &col(Kind::Sorted { card: 100 }),
            9,
            5000,
            4096,
            100_000,
        )
        .expect("sorted");
        let sorted = sorted.as_any().downcast_ref::<Int64Array>().expect("int64");
        assert!(sorted.values().windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(sorted.null_count(), 0);
    }
}
