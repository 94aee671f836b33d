//! How many groups a query will make, estimated before aggregating (docs/ARCHITECTURE.md, "The planner's decision order"; Karnagel §4:
//! every rule keys on the group count), and where the number came from.
//!
//! Three sources, the most trustworthy first:
//!
//! * **statistics**: distinct counts that DataFusion or a Parquet footer carries for the key
//!   columns (their product for several keys), with the input's row count;
//! * **range**: the key domain from min/max (and dictionary sizes) bounds the groups exactly
//!   when the sample shows it about filled — the size a direct-index (`perfect`) table takes;
//! * **sketch**: a HyperLogLog sketch over the rows at hand (the first batch, or the first
//!   [`SKETCH_ROWS`] of an in-memory input) counts their distinct keys to ~1.6%; a sample of
//!   exact key frequencies extrapolates to the whole input with the bias-corrected Chao1
//!   estimator `D + f1(f1-1) / 2(f2+1)`, capped by linear extrapolation `D·N/n`. Chao1 is exact
//!   for uniform keys at every group count measured in the sweeps (GEE overestimated them by
//!   5–20× at 2^14–2^16 groups of 2^28 rows) and low for skewed keys, which table growth and
//!   the overflow path absorb.

use std::fmt;

use cardinality_estimator::CardinalityEstimator;
use hashbrown::HashMap;

use crate::hash::murmur3;

/// Rows sampled, at pseudo-random positions, for exact key frequencies.
pub const SAMPLE_ROWS: usize = 1 << 16;

/// How many times its mean frequency the hottest sampled key must have for the keys to count
/// as skewed: zipf(1.1) keys over 2^8 values or more have 50× and beyond, uniform keys under 10×.
pub const SKEW_FACTOR: f64 = 16.0;

/// Rows the HyperLogLog sketch reads at most.
pub const SKETCH_ROWS: usize = 1 << 22;

/// Levels of [`Estimate::hot_rows`]: key shares 1/2, 1/4, … 1/2^14 of the sample (the least,
/// four of its 65,536 rows).
pub const HOT_LEVELS: usize = 14;

/// Rows per group at most, on average, for keys to count as nearly unique (see
/// [`Estimate::nearly_unique`]).
pub const UNIQUE_ROWS_PER_GROUP: u64 = 8;

/// What the input's statistics say before a row is read; `None` where they say nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    /// Rows of the whole input.
    pub rows: Option<u64>,
    /// Distinct key combinations (the product of the key columns' distinct counts).
    pub distinct: Option<u64>,
}

/// Key ranges the input's statistics give before a row is read (one entry per key, in key
/// order; `None` where unknown, and for strings and booleans, which need none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyBounds {
    /// Smallest and largest ordinal of each key.
    pub ranges: Vec<Option<(i128, i128)>>,
    /// Whether each key may be NULL.
    pub may_null: Vec<bool>,
}

/// Where an estimate's group count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Distinct counts from DataFusion / Parquet statistics.
    Statistics,
    /// The key range (min/max): the domain is the tighter bound.
    Range,
    /// The HyperLogLog sketch and the frequency sample.
    Sketch,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Statistics => "statistics",
            Source::Range => "key range",
            Source::Sketch => "hll sketch + chao1",
        })
    }
}

/// What the planner knows about the input before aggregating.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Input rows: the statistics' count, else the rows at hand.
    pub rows: usize,
    /// Upper bound on groups from the key encoding.
    pub domain: u64,
    /// Estimated number of groups.
    pub groups: u64,
    /// Rows in the frequency sample.
    pub sampled: usize,
    /// Distinct keys in the frequency sample.
    pub distinct: u64,
    /// Rows the sketch read, and the distinct keys it counted among them.
    pub sketched: (usize, u64),
    /// Where `groups` came from.
    pub source: Source,
    /// Bits of the packed key (what a table stores per key; 64 per word beyond one word).
    pub key_bits: u32,
    /// Rows of the frequency sample that its most frequent key takes: how hot the hottest
    /// group is (a strategy with one shared table serializes its updates).
    pub top_count: u64,
    /// Rows of the frequency sample on its hot keys, by how hot: `hot_rows[i]` counts the rows
    /// of keys that each take at least 1/2^(i+1) of the sample. The hottest key alone does not
    /// say how many rows contend: one key in 0.15% of the rows (a normal distribution's
    /// clamped tail) serializes few of them, a thousand keys each that hot serialize them all.
    pub hot_rows: [u32; HOT_LEVELS],
    /// Whether the keys are coded through dictionaries that grow as new keys arrive (strings,
    /// interned composite keys): their capacity bounds only the keys at hand, so `domain` is
    /// projected from the estimated groups ([`estimate_dictionary`]).
    pub dictionary: bool,
    /// Whether the sample's key words arrive in increasing order over more than one key (a
    /// file written in key order): private tables then take them in key order, unhashed
    /// ([`crate::table::LinearTable::in_key_order`]).
    pub sorted: bool,
}

impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rows={} key_domain={}{} key_bits={} est_groups={} from {} (sample: {} rows, {} distinct, top key {:.2}%{}{}; sketch: {} rows, ~{} distinct)",
            self.rows,
            self.domain,
            if self.dictionary {
                " (dictionary codes, projected)"
            } else {
                ""
            },
            self.key_bits,
            self.groups,
            self.source,
            self.sampled,
            self.distinct,
            100.0 * self.top_share(),
            if self.skewed() { ", skewed" } else { "" },
            if self.sorted { ", sorted" } else { "" },
            self.sketched.0,
            self.sketched.1
        )
    }
}

impl Estimate {
    /// Whether the sampled keys fill the domain about as densely as uniform keys over all of
    /// it would (always, for dictionary codes): then a direct-index table is mostly occupied,
    /// not a sparse waste of memory.
    pub fn looks_dense(&self) -> bool {
        if self.dictionary {
            // Dictionary codes are handed out consecutively: a capacity is at least half used.
            return true;
        }
        let (n, d) = (self.sampled as f64, self.domain as f64);
        let expected = d * (1.0 - (-n / d.max(1.0)).exp());
        // 0.2: zipf(1.1) keys over 2^22 values (about a third of the uniform count) still ran
        // faster indexed directly at 2^23 and 2^25 rows (bench cpu-sweep).
        self.distinct as f64 >= 0.2 * expected
    }

    /// Share of the input's rows the hottest key is expected to take (from the sample).
    pub fn top_share(&self) -> f64 {
        self.top_count as f64 / self.sampled.max(1) as f64
    }

    /// Share of the input's rows on keys that each take at least `share` of them (from the
    /// sample), counted at the power of two at or above `share` (at most 1/2, at least
    /// 1/2^[`HOT_LEVELS`]): keys between it and `share` are left out.
    pub fn hot_share(&self, share: f64) -> f64 {
        let level = (1.0 / share.max(f64::MIN_POSITIVE)).log2().floor() as usize;
        let at = level.clamp(1, HOT_LEVELS) - 1;
        let rows = self.hot_rows.get(at).copied().unwrap_or(0);
        f64::from(rows) / self.sampled.max(1) as f64
    }

    /// Whether the keys are skewed: the sample's hottest key is at least [`SKEW_FACTOR`]
    /// times as frequent as its average key, by more than uniform keys' spread. (Uniform
    /// keys' hottest count is a few times the mean at most: ~8 with a mean of 1, ~1.3 with
    /// a mean of 256.) Skewed inputs plan from the profile's skewed points, and strategies
    /// that funnel every row into one table avoid them (hot keys serialize its updates).
    pub fn skewed(&self) -> bool {
        let mean = self.sampled as f64 / self.distinct.max(1) as f64;
        self.sampled >= 1024 && self.top_count as f64 >= SKEW_FACTOR * mean + SKEW_FACTOR
    }

    /// Whether the input has very many groups for its rows: little reduction, where a sort
    /// beats tables. Nearly every sampled key distinct is not enough on its own: a first batch
    /// of 8192 rows over 2^16 uniform groups is 94% distinct, yet every group has 64 rows
    /// (measured, 2^22 rows on 2 threads: per-thread tables 3x faster than the sort there; the
    /// sort won at 4 rows per group). So the extrapolated groups must also reach an eighth of
    /// the rows.
    pub fn nearly_unique(&self) -> bool {
        self.sampled >= 1024
            && self.distinct as f64 >= 0.9 * self.sampled as f64
            && self.groups.saturating_mul(UNIQUE_ROWS_PER_GROUP) >= self.rows as u64
    }

    /// Groups to size a hash table for at the start. An extrapolation from the first rows
    /// can be far off either way (keys periodic over more than a batch look unique), so a
    /// sketch-based table starts at no more than four times what the sketch counted and grows;
    /// statistics and ranges are bounds, taken as they are.
    pub fn table_groups(&self) -> u64 {
        match self.source {
            Source::Sketch => self.private_table_groups(),
            _ => self.groups,
        }
    }

    /// Groups to size one worker's private table for at the start (`thread_local`): no more
    /// than four times what the sketch counted in the first rows (at least 2^16), and the
    /// table grows. A range or statistics bounds the groups of all workers together, while
    /// each worker sees a share of the rows: sized for the bound, 16 workers over 2^23 uniform
    /// rows of 2^20 dense keys each cleared a 64 MiB table for ~400k groups, a gigabyte a
    /// query past the 300 MiB L3, and ran 120–390 ms from run to run, where the same keys
    /// scattered (sketch-sized tables that grew) ran 110–160 ms; sized this way, both run
    /// alike (H100 host, 16 cores). Growing rehashes the groups inserted so far: never more
    /// work than the inserts.
    pub fn private_table_groups(&self) -> u64 {
        self.groups
            .min(self.sketched.1.saturating_mul(4).max(1 << 16))
    }
}

/// Bits a packed key of `domain` values takes (64 when the domain is unbounded).
pub fn key_bits(domain: u64) -> u32 {
    if domain <= 1 {
        0
    } else {
        64 - (domain - 1).leading_zeros()
    }
}

/// Estimates the group count from the key words at hand (`words`, in pieces), their `domain`,
/// and what statistics say.
pub fn estimate(words: &[Vec<u64>], domain: u64, hints: Hints) -> Estimate {
    estimate_over(words, domain, false, hints)
}

/// Estimates the group count of keys coded through dictionaries that grow as new keys arrive
/// (string columns, interned composite keys), whose codes so far fill `capacity`.
///
/// A dictionary built from the first batch bounds only that batch: 8192 rows of random 62-bit
/// id pairs interned into 16,384 codes looked like an exact key range of 16,384 groups, where
/// 400k arrived (issue 29; a direct table that every later batch widened). So the groups come
/// from the sketch and the sample's extrapolation, never from the capacity, and the domain a
/// direct table would need is projected to what the dictionary will hold once they arrived:
/// the capacity scaled by estimated groups over sampled distinct keys. Keys whose first batch
/// holds them all (a few hundred regions) project onto the capacity itself.
pub fn estimate_dictionary(words: &[Vec<u64>], capacity: u64, hints: Hints) -> Estimate {
    estimate_over(words, capacity, true, hints)
}

fn estimate_over(words: &[Vec<u64>], domain: u64, dictionary: bool, hints: Hints) -> Estimate {
    let at_hand: usize = words.iter().map(Vec::len).sum();
    let rows = hints.rows.map_or(at_hand, |r| (r as usize).max(at_hand));
    let word_at = positions(words);
    let (sampled, freq) = frequencies(at_hand, &word_at);
    let sketched = sketch(at_hand, &word_at);
    let distinct = freq.len() as u64;
    let top_count = freq.values().copied().max().unwrap_or(0) as u64;
    let hot_rows = hot_rows(&freq, sampled);
    let chao1 = chao1(&freq, sampled, rows);
    let from_sketch = chao1.max(sketched.1);
    let (groups, source) = match hints.distinct {
        Some(d) => (d.max(distinct), Source::Statistics),
        None if !dictionary && domain <= from_sketch => (domain, Source::Range),
        None => (from_sketch, Source::Sketch),
    };
    let domain = if dictionary {
        domain
            .saturating_mul(groups.min(rows as u64).div_ceil(distinct.max(1)))
            .max(domain)
    } else {
        domain
    };
    Estimate {
        rows,
        domain,
        groups: groups.min(domain).min(rows as u64).max(distinct),
        sampled,
        distinct,
        sketched,
        source,
        key_bits: key_bits(domain),
        top_count,
        hot_rows,
        dictionary,
        sorted: distinct > 1 && words.iter().flatten().is_sorted(),
    }
}

/// The word at a position of the concatenated pieces.
fn positions(words: &[Vec<u64>]) -> impl Fn(usize) -> u64 + '_ {
    let mut starts = Vec::with_capacity(words.len());
    let mut base = 0usize;
    for ws in words {
        starts.push(base);
        base += ws.len();
    }
    move |pos| {
        let m = starts.partition_point(|&s| s <= pos).saturating_sub(1);
        words
            .get(m)
            .and_then(|w| w.get(pos - starts.get(m).copied().unwrap_or(0)))
            .copied()
            .unwrap_or(0)
    }
}

/// `n` of `rows` positions: all when they are few, else pseudo-random ones (a strided
/// sample would alias with periodic keys).
fn pick(k: usize, n: usize, rows: usize) -> usize {
    if n == rows {
        k
    } else {
        (murmur3(k as u64 ^ 0x5eed) % rows as u64) as usize
    }
}

/// Exact key frequencies in a sample of up to [`SAMPLE_ROWS`] rows.
fn frequencies(rows: usize, word_at: &impl Fn(usize) -> u64) -> (usize, HashMap<u64, u32>) {
    let n = rows.min(SAMPLE_ROWS);
    let mut freq: HashMap<u64, u32> = HashMap::new();
    for k in 0..n {
        *freq.entry(word_at(pick(k, n, rows))).or_default() += 1;
    }
    (n, freq)
}

/// Rows of the sample on keys taking at least 1/2^(i+1) of it, for each level `i`.
fn hot_rows(freq: &HashMap<u64, u32>, sampled: usize) -> [u32; HOT_LEVELS] {
    let mut rows = [0u32; HOT_LEVELS];
    for &c in freq.values() {
        // The hottest level a key of `c` rows reaches: the least `i` with c·2^(i+1) ≥ sampled,
        // i.e. 2^(i+1) ≥ ⌈sampled / c⌉ (one step a key, not one a level: most keys are cold).
        let q = (sampled as u64).div_ceil(u64::from(c.max(1)));
        let i = (q.next_power_of_two().trailing_zeros().max(1) - 1) as usize;
        if let Some(r) = rows.get_mut(i) {
            *r += c;
        }
    }
    // A key counts at its level and at every cooler one.
    let mut hotter = 0;
    for r in &mut rows {
        hotter += *r;
        *r = hotter;
    }
    rows
}

/// HyperLogLog over up to [`SKETCH_ROWS`] rows: (rows read, distinct keys among them).
fn sketch(rows: usize, word_at: &impl Fn(usize) -> u64) -> (usize, u64) {
    let n = rows.min(SKETCH_ROWS);
    let mut hll = CardinalityEstimator::<u64>::new();
    for k in 0..n {
        hll.insert_hash(murmur3(word_at(pick(k, n, rows))));
    }
    (n, hll.estimate() as u64)
}

/// Bias-corrected Chao1 from the sample's frequencies, capped by linear extrapolation to
/// `rows` (which it reaches when nearly every sampled key is a singleton).
fn chao1(freq: &HashMap<u64, u32>, sampled: usize, rows: usize) -> u64 {
    if sampled == 0 {
        return 0;
    }
    let d = freq.len() as f64;
    let f1 = freq.values().filter(|&&c| c == 1).count() as f64;
    let f2 = freq.values().filter(|&&c| c == 2).count() as f64;
    let chao = d + f1 * (f1 - 1.0).max(0.0) / (2.0 * (f2 + 1.0));
    let linear = d * rows as f64 / sampled as f64;
    chao.min(linear).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn uniform(rows: u64, groups: u64) -> Vec<Vec<u64>> {
        vec![(0..rows).map(|i| murmur3(i) % groups).collect()]
    }

    #[test]
    fn few_many_and_none() {
        let few: Vec<Vec<u64>> = vec![(0..1_000_000u64).map(|i| i % 100).collect()];
        let e = estimate(&few, 1 << 40, Hints::default());
        assert_eq!((e.groups, e.source), (100, Source::Sketch));
        let many: Vec<Vec<u64>> = vec![(0..1_000_000u64).collect()];
        let e = estimate(&many, 1 << 40, Hints::default());
        assert!(e.groups > 900_000 && e.groups <= 1_000_000, "{e}");
        let none = estimate(&[], 1, Hints::default());
        assert_eq!((none.groups, none.rows), (0, 0));
    }

    #[test]
    fn chao1_extrapolates_uniform_keys_from_the_first_rows() {
        // The first 2^16 rows of 2^24, with 2^16 groups: the sample sees ~41K of them.
        for groups in [1u64 << 12, 1 << 14, 1 << 16, 1 << 18] {
            let e = estimate(
                &uniform(1 << 16, groups),
                u64::MAX,
                Hints {
                    rows: Some(1 << 24),
                    distinct: None,
                },
            );
            let ratio = e.groups as f64 / groups as f64;
            assert!((0.8..1.25).contains(&ratio), "{groups}: {e}");
            assert_eq!(e.rows, 1 << 24);
        }
    }

    #[test]
    fn statistics_and_range_take_precedence() {
        let words = uniform(10_000, 50);
        let stats = Hints {
            rows: Some(1 << 20),
            distinct: Some(5000),
        };
        let e = estimate(&words, u64::MAX, stats);
        assert_eq!((e.groups, e.source), (5000, Source::Statistics));
        // A range no wider than the sample's count is the exact bound.
        let e = estimate(&words, 50, Hints::default());
        assert_eq!((e.groups, e.source, e.key_bits), (50, Source::Range, 6));
        // Statistics never claim fewer groups than the sample saw.
        let low = Hints {
            rows: None,
            distinct: Some(3),
        };
        assert_eq!(estimate(&words, u64::MAX, low).groups, 50);
    }

    #[test]
    fn dictionary_capacity_is_no_key_range() {
        // The first 8192 rows of 2^21 random id pairs, interned: every code distinct, the
        // dictionary's capacity twice that. As a plain domain it reads as an exact range.
        let codes: Vec<Vec<u64>> = vec![(0..8192u64).collect()];
        let hints = Hints {
            rows: Some(1 << 21),
            distinct: None,
        };
        let plain = estimate(&codes, 1 << 14, hints);
        assert_eq!((plain.groups, plain.source), (1 << 14, Source::Range));
        let e = estimate_dictionary(&codes, 1 << 14, hints);
        assert_eq!(e.source, Source::Sketch, "{e}");
        assert!(e.groups >= 1 << 20, "{e}");
        // The domain a direct table would need once the dictionary holds them, at least as
        // dense as its first batch filled it.
        assert!(e.domain >= 2 * e.groups - (1 << 14), "{e}");
        assert!(e.dictionary && e.looks_dense());
        assert!(
            e.to_string().contains("(dictionary codes, projected)"),
            "{e}"
        );
        // A dictionary its first batch filled (300 regions) keeps its capacity.
        let few: Vec<Vec<u64>> = vec![(0..8192u64).map(|i| murmur3(i) % 300).collect()];
        let e = estimate_dictionary(&few, 1024, hints);
        assert_eq!((e.groups, e.domain), (300, 1024), "{e}");
    }

    #[test]
    fn sketch_counts_beyond_the_sample() {
        // 2^20 distinct keys in 2^21 rows: the sample alone would see 2^16 of them.
        let words = uniform(1 << 21, 1 << 20);
        let e = estimate(&words, u64::MAX, Hints::default());
        assert!(e.sketched.1 > 800_000, "{e}");
        assert!(e.groups >= e.sketched.1 && e.groups <= 1 << 21, "{e}");
    }

    #[test]
    fn tables_start_near_what_was_seen() {
        // Keys periodic over more rows than the batch: every key in it is distinct.
        let words: Vec<Vec<u64>> = vec![(0..8192u64).collect()];
        let e = estimate(
            &words,
            u64::MAX,
            Hints {
                rows: Some(1 << 30),
                distinct: None,
            },
        );
        assert!(e.groups >= 1 << 20, "{e}");
        assert_eq!(e.table_groups(), 1 << 16);
    }

    #[test]
    fn skew_is_told_from_uniform_keys() {
        // Zipf-like keys: rank r with weight 1/r over 2^12 ranks, against uniform keys at the
        // group counts where uniform maxima spread most (a mean of ~1 per key).
        let weights: Vec<f64> = (1..=4096).map(|r| 1.0 / r as f64).collect();
        let total: f64 = weights.iter().sum();
        let mut cdf = Vec::with_capacity(weights.len());
        let mut acc = 0.0;
        for w in &weights {
            acc += w / total;
            cdf.push(acc);
        }
        let zipf: Vec<Vec<u64>> = vec![(0..1u64 << 18)
            .map(|i| {
                let u = (murmur3(i) >> 11) as f64 / (1u64 << 53) as f64;
                cdf.partition_point(|&c| c < u) as u64
            })
            .collect()];
        let e = estimate(&zipf, u64::MAX, Hints::default());
        assert!(e.skewed(), "{e}");
        assert!(e.top_share() > 0.1, "{e}");
        assert!(e.to_string().contains(", skewed"), "{e}");
        for groups in [4u64, 256, 1 << 12, 1 << 16, 1 << 20] {
            let e = estimate(&uniform(1 << 18, groups), u64::MAX, Hints::default());
            assert!(!e.skewed(), "{groups}: {e}");
            assert!(e.top_share() < 2.0 / groups as f64 + 1e-3, "{groups}: {e}");
        }
        // Too small a sample says nothing.
        assert!(!estimate(&[vec![1, 1, 1, 2]], u64::MAX, Hints::default()).skewed());
    }

    /// The hot keys' share of the rows tells one hot key from many: a normal distribution
    /// clamped at its tails (two end keys in ~0.13% of the rows each, the rest nearly unique)
    /// against 1,024 uniform keys, each as hot.
    #[test]
    fn hot_rows_count_every_key_as_hot_as_asked() {
        let rows = 1u64 << 18;
        let tails = (0..rows).map(|i| match i % 800 {
            0 => 0,
            1 => u64::MAX,
            _ => i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        });
        let e = estimate(&[tails.collect()], u64::MAX, Hints::default());
        assert!(e.top_share() > 1.0 / 1056.0, "{e}");
        let hot = e.hot_share(1.0 / 1056.0);
        assert!((0.001..0.004).contains(&hot), "{hot}: {e}");
        let uniform: Vec<u64> = (0..rows).map(|i| i % 64).collect();
        let e = estimate(&[uniform], u64::MAX, Hints::default());
        // Each key takes 1/64 of the rows (the sample's ~1,024 ± 32 rows): every row counts
        // at half that share and below, none at four times it.
        assert_eq!(e.hot_share(1.0 / 128.0), 1.0, "{e}");
        assert_eq!(e.hot_share(1.0 / 1056.0), 1.0, "{e}");
        assert_eq!(e.hot_share(1.0 / 16.0), 0.0, "{e}");
        // Past the levels: clamped to the coolest and the hottest.
        assert_eq!(e.hot_share(1e-9), 1.0);
        assert_eq!(e.hot_share(0.9), 0.0);
    }

    proptest! {
        /// The estimate stays within its bounds: at least what the sample saw, at most the
        /// domain and the rows.
        #[test]
        fn within_bounds(keys in prop::collection::vec(0u64..500, 0..3000), domain in 1u64..1000, extra in 0u64..10_000) {
            let words = vec![keys.iter().map(|k| k % domain).collect::<Vec<_>>()];
            let hints = Hints { rows: Some(keys.len() as u64 + extra), distinct: None };
            let e = estimate(&words, domain, hints);
            prop_assert!(e.groups >= e.distinct);
            prop_assert!(e.groups <= domain.max(e.distinct));
            prop_assert!(e.groups <= e.rows as u64);
            let exact = words[0].iter().collect::<std::collections::HashSet<_>>().len() as u64;
            prop_assert_eq!(e.distinct, exact);
            // Every row of a sample this small is read: the hottest key's count is exact.
            let mut counts = std::collections::HashMap::new();
            for k in &words[0] {
                *counts.entry(*k).or_insert(0u64) += 1;
            }
            prop_assert_eq!(e.top_count, counts.values().copied().max().unwrap_or(0));
            // And so are the hot keys' rows at every level.
            for (i, &rows) in e.hot_rows.iter().enumerate() {
                let at_least = words[0].len() as f64 / f64::from(1u32 << (i + 1));
                let hot: u64 = counts.values().filter(|&&c| c as f64 >= at_least).sum();
                prop_assert_eq!(u64::from(rows), hot, "level {}", i);
            }
        }
    }
}
