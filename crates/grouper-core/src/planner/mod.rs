//! The planner: estimate the number of groups, then choose a strategy and its parameters
//! (docs/ARCHITECTURE.md, "The planner's decision order"; Karnagel §4's rules for the CPU side).
//!
//! The estimate ([`estimate()`]) comes from statistics, the key range, or a sketch of the first
//! rows, and says which. The rules are few and measured (see `grouper bench cpu-sweep`); a
//! device profile from `grouper calibrate` overrides them where it measured this machine:
//!
//! * domain ≤ [`perfect_limit`]: `perfect` — no hashing at all. Measured (`bench cpu-sweep`):
//!   direct indexing beats hashing even at 2^20 groups, where neither fits cache, because it
//!   saves the probe's miss; the bound is memory: per-thread arrays of the whole domain.
//!   Above 2^20 the sample must also fill the domain about as densely as uniform keys would
//!   ([`Estimate::looks_dense`]); sparse wide domains (skewed keys) waste memory and lose to
//!   hashing.
//!   Per-thread arrays over a third of that memory (many threads, a wide domain) give way to
//!   `partitioned` (to `thread_local` when a key is hot).
//! * too wide to index and many groups (`partitioning_pays`: 2^18 estimated, nearly every
//!   sampled key distinct, or a skewed sample's long tail; no key in a quarter of the rows):
//!   `partitioned` — each worker's private table would barely reduce and every group would be
//!   inserted twice; rows partitioned by hash insert it once. (`sort` ran nearly unique keys
//!   before; at 16 threads its per-thread arrays of all groups cost seconds.)
//! * otherwise `thread_local` — per-thread tables stay cache-resident while groups are few, and
//!   the partitioned merge keeps many groups parallel.

use std::fmt;

use crate::cpu::{dense, Params, Strategy};
use crate::error::Result;
use crate::hash::HashFn;
use crate::profile::{KeyKind, Profile};
use crate::table::{check_fill_factor, check_mapping, BucketMap, Probing};

mod estimate;

pub use estimate::{
    estimate, estimate_dictionary, key_bits, Estimate, Hints, KeyBounds, Source, HOT_LEVELS,
    SAMPLE_ROWS, SKETCH_ROWS, SKEW_FACTOR,
};

/// Largest key domain for which `auto` picks direct indexing, whatever the memory. Measured
/// (`bench cpu-sweep`, 2^25 rows): at 2^24 uniform groups direct indexing (2.4 s) still beat
/// sorting (3.0 s) and per-thread tables (5.8 s); the bound leaves room for the first batch's
/// range to widen by an eighth.
pub const PERFECT_MAX_DOMAIN: u64 = 1 << 25;

/// Memory all threads' direct-index arrays may take together.
pub const PERFECT_BUDGET_BYTES: u64 = 1 << 30;

/// Memory all threads' direct-index arrays may take together when `perfect` is requested: far
/// above `auto`'s budget, but a bound, so that a forced `perfect` over a wide domain with many
/// aggregates fails clearly instead of exhausting the machine.
pub const FORCED_PERFECT_BUDGET_BYTES: u64 = 8 << 30;

/// The largest domain `auto` indexes directly, for `state_bytes` of state per group and
/// `threads` workers.
pub fn perfect_limit(state_bytes: usize, threads: usize) -> u64 {
    direct_index_limit(state_bytes, threads, PERFECT_BUDGET_BYTES).min(PERFECT_MAX_DOMAIN)
}

/// The largest domain whose per-thread direct-index arrays fit `budget` bytes together.
pub fn direct_index_limit(state_bytes: usize, threads: usize, budget: u64) -> u64 {
    let per_group = (state_bytes as u64 + 1) * threads.max(1) as u64; // +1: the presence flag
    budget / per_group
}

/// Estimated groups from which `auto` partitions rows rather than keep per-thread tables, where
/// keys are too wide to index directly (`bench cpu-sweep`, uniform keys: partitioned rows beat
/// per-thread tables from 2^18 groups on both 2 and 16 threads, and lost at 2^16).
pub const PARTITIONED_MIN_GROUPS: u64 = 1 << 18;

/// Whether partitioned rows beat per-thread tables for keys too wide to index: many groups
/// (nearly every sampled key distinct, or [`PARTITIONED_MIN_GROUPS`] estimated), or skewed
/// keys with a long tail (the estimate at least twice the sample: zipf keys over 2^22 and
/// 2^24 values look like 21k-25k groups from 8192 rows, and arrive as millions), and no key so
/// hot that its partition would be a quarter of all the work.
fn partitioning_pays(e: &Estimate) -> bool {
    let long_tail = e.skewed() && e.groups >= 2 * e.sampled as u64;
    !hot_key(e) && (e.nearly_unique() || e.groups >= PARTITIONED_MIN_GROUPS || long_tail)
}

/// Whether one key takes over a quarter of the sampled rows: partitioned rows would make its
/// partition a quarter of all the work, where private tables absorb it.
fn hot_key(e: &Estimate) -> bool {
    e.top_count.saturating_mul(4) > e.sampled as u64
}

/// Whether one key's partition would hold more than a worker's share of the rows (the hottest
/// key in over `1 / threads` of the sample): then partitioned rows wait on that partition.
fn outweighs_a_worker(e: &Estimate, threads: usize) -> bool {
    e.top_count.saturating_mul(threads.max(1) as u64) > e.sampled as u64
}

/// Domains up to this size are indexed directly however sparsely the sample fills them
/// (measured: direct indexing beat hashing on zipf keys up to 2^20).
pub const ALWAYS_PERFECT_DOMAIN: u64 = 1 << 20;

/// The planner's choice and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The strategy that runs.
    pub strategy: Strategy,
    /// Its parameters.
    pub params: Params,
    /// What the choice was based on.
    pub estimate: Estimate,
    /// One sentence on why.
    pub reason: String,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "strategy={} hash={} fill={}",
            self.strategy, self.params.hash, self.params.fill_factor
        )?;
        // The private tables' scheme and mapping, where they are not the defaults.
        if self.params.probing != Probing::Linear {
            write!(f, " probing={}", self.params.probing)?;
        }
        if self.params.buckets != BucketMap::HighBits {
            write!(f, " buckets={}", self.params.buckets)?;
        }
        write!(f, " {}; {}", self.estimate, self.reason)
    }
}

/// What the user fixed; everything left `None` the planner decides.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Overrides {
    /// Force a strategy.
    pub strategy: Option<Strategy>,
    /// Force a hash function.
    pub hash: Option<HashFn>,
    /// Force a fill factor.
    pub fill_factor: Option<f64>,
    /// Force the hashing scheme of the private tables (`thread_local`, and `perfect` past its
    /// domain); linear probing by default, Luan's fastest on CPUs.
    pub probing: Option<Probing>,
    /// Force how hashes map to buckets (high bits by default).
    pub buckets: Option<BucketMap>,
    /// Force the initial table size in groups (tests use tiny values to exercise growth).
    pub initial_groups: Option<usize>,
    /// The query's memory budget in bytes, when it has one (its groups spill past it): the
    /// planner then picks no buffered strategy (`sort`, `shared`), which would hold the whole
    /// input and whose eviction sorts or hashes all of it at once, starts tables small, and
    /// keeps direct-index arrays within a quarter of it.
    pub memory_budget: Option<u64>,
}

/// Largest initial table (groups) under a memory budget; tables grow from it.
pub const BOUNDED_INITIAL_GROUPS: usize = 1 << 14;

/// Default load of hash tables: linear probing stays short below one half.
pub const DEFAULT_FILL: f64 = 0.5;

/// Chooses strategy and parameters for `threads` workers; `perfect_limit` is the largest domain
/// to index directly.
/// `profile`, this machine's calibration, decides before the rules where it measured near the
/// estimate.
pub fn choose(
    estimate: Estimate,
    overrides: &Overrides,
    perfect_limit: u64,
    threads: usize,
    profile: Option<&Profile>,
) -> Result<Decision> {
    let fill_factor = overrides.fill_factor.unwrap_or(DEFAULT_FILL);
    check_fill_factor(fill_factor)?;
    check_mapping(
        overrides.hash.unwrap_or_default(),
        overrides.buckets.unwrap_or_default(),
    )?;
    let indexable = dense::fits(estimate.domain, perfect_limit);
    let dense = indexable && (estimate.domain <= ALWAYS_PERFECT_DOMAIN || estimate.looks_dense());
    let kind = if dense {
        KeyKind::Dense
    } else {
        KeyKind::Hashed
    };
    // Dense points are found by the key domain: what a direct table's size and merge cost
    // grow with, and known exactly, while a first batch's group estimate of skewed keys runs
    // low (zipf keys over 2^18 values looked like 2^14 groups, where a direct index still wins).
    let at = match kind {
        KeyKind::Dense => estimate.domain,
        KeyKind::Hashed => estimate.groups,
    };
    let profiled = profile
        .and_then(|p| p.advise(kind, estimate.skewed(), at))
        .and_then(|a| {
            let s = a
                .ranked
                .iter()
                .filter_map(|(n, _)| n.parse::<Strategy>().ok())
                .find(|&s| (s.descriptor().eligible)(estimate.domain, perfect_limit))?;
            Some((s, a.to_string()))
        });
    let (strategy, reason) = match (overrides.strategy, profiled) {
        (Some(s), _) => (s, format!("{s} was requested")),
        // Sorted keys over a domain too wide to be always direct: each worker's table takes
        // them in key order, unhashed, and workers over disjoint runs of keys need no merge.
        // TPC-H Q18's subquery at SF 1 on 2 threads (`l_orderkey`, a 6M domain the sample
        // fills densely): 0.09 s, where `perfect`'s per-worker arrays took 0.14 s and
        // DataFusion 0.18 s.
        (None, _) if estimate.sorted && estimate.domain > ALWAYS_PERFECT_DOMAIN => (
            Strategy::ThreadLocal,
            format!(
                "the sampled keys arrive sorted over a domain ({}) wider than always direct ({ALWAYS_PERFECT_DOMAIN}): per-thread tables in key order, unhashed",
                estimate.domain
            ),
        ),
        (None, Some(advised)) => advised,
        // Per-thread direct arrays of more than a third of their budget (16 threads over a
        // 2^20 domain: 400 MiB to clear and merge, 261 ms where DataFusion took 111): rows
        // partitioned by hash unless a hot key's partition would outweigh a worker's share of
        // the rows, then private tables, which absorb it. Zipf 1.1 keys (the hottest in 11%
        // of the rows): over 2^24 values, 2^24 rows on 2 threads here, partitioned 331 ms,
        // private tables 419, DataFusion 353; over 2^20 values, 2^25 rows on an H200 host's
        // 16 threads, partitioned 147, private tables 122, DataFusion 122 (`bench cpu-sweep
        // --strategies`, `cpu-sweep-*-7dc250a*.json`).
        (None, None) if indexable && estimate.domain.saturating_mul(3) > perfect_limit => {
            if hot_key(&estimate) || outweighs_a_worker(&estimate, threads) {
                (
                    Strategy::ThreadLocal,
                    format!(
                        "direct-index arrays of the key domain ({}) would take over a third of their budget over all threads, and a hot key takes {} of {} sampled rows, over a quarter or over one of {threads} workers' share: per-thread tables absorb it",
                        estimate.domain, estimate.top_count, estimate.sampled
                    ),
                )
            } else {
                (
                    Strategy::Partitioned,
                    format!(
                        "direct-index arrays of the key domain ({}) would take over a third of their budget over all threads: rows partitioned by key hash, one table per partition",
                        estimate.domain
                    ),
                )
            }
        }
        // Many groups over keys too wide to index: a worker's private table would hold nearly
        // as many groups as its rows and each group would be inserted twice (the table, then
        // the merge); partitioned rows insert it once. `bench cpu-sweep`, 2^25 rows on 16
        // threads: 2^24 uniform keys 0.21 s, per-thread tables 0.67 s, a sort 2.2 s; 2^24 zipf
        // keys 0.12 s against 0.17 s.
        (None, None) if !indexable && partitioning_pays(&estimate) => (
            Strategy::Partitioned,
            format!(
                "~{} groups ({} distinct of {} sampled, top key {} rows) over a key domain ({}) too wide to index directly: rows partitioned by key hash, each group inserted once",
                estimate.groups, estimate.distinct, estimate.sampled, estimate.top_count, estimate.domain
            ),
        ),
        (None, None) if !indexable => (
            Strategy::ThreadLocal,
            format!(
                "the key domain ({}) is too wide for direct indexing (≤ {perfect_limit}); per-thread tables with a partitioned merge",
                estimate.domain
            ),
        ),
        (None, None) if estimate.domain <= ALWAYS_PERFECT_DOMAIN => (
            Strategy::Perfect,
            format!(
                "the key domain ({}) fits a direct-index table (≤ {ALWAYS_PERFECT_DOMAIN} always direct)",
                estimate.domain
            ),
        ),
        (None, None) if estimate.looks_dense() => (
            Strategy::Perfect,
            format!(
                "the key domain ({}) fits a direct-index table (≤ {perfect_limit}) and the sample fills it densely",
                estimate.domain
            ),
        ),
        (None, None) => (
            Strategy::ThreadLocal,
            format!(
                "the key domain ({}) is sparsely filled by the sample ({} distinct of {}); per-thread tables with a partitioned merge",
                estimate.domain, estimate.distinct, estimate.sampled
            ),
        ),
    };
    let (strategy, reason) = match strategy.is_streaming() || overrides.memory_budget.is_none() {
        true => (strategy, reason),
        false if overrides.strategy.is_some() => (strategy, reason),
        false => (
            Strategy::ThreadLocal,
            format!("{reason}; but under a memory budget, per-thread tables that spill instead of {strategy}, which keeps all input"),
        ),
    };
    // Size tables for the estimate with headroom; growth handles underestimates. Under a
    // memory budget they start small: a table sized for all groups may alone pass it.
    let cap = match overrides.memory_budget {
        Some(_) => BOUNDED_INITIAL_GROUPS,
        None => usize::MAX,
    };
    let headroom = |groups: u64| ((groups as usize).saturating_mul(5) / 4 + 16).min(cap);
    let initial_groups = overrides
        .initial_groups
        .unwrap_or(headroom(estimate.table_groups()));
    let private_groups = overrides
        .initial_groups
        .unwrap_or(headroom(estimate.private_table_groups()));
    Ok(Decision {
        strategy,
        params: Params {
            hash: overrides.hash.unwrap_or_default(),
            fill_factor,
            probing: overrides.probing.unwrap_or_default(),
            buckets: overrides.buckets.unwrap_or_default(),
            initial_groups,
            private_groups,
        },
        estimate,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Point;

    #[test]
    fn direct_arrays_too_large_for_all_threads_partition_rows() {
        // 2^20 uniform keys, a first batch of 8192 rows nearly all distinct.
        let uniform = estimate(
            &[(0..8192u64).map(|r| r * 127 % (1 << 20)).collect()],
            1 << 20,
            Hints::default(),
        );
        assert!(!uniform.skewed());
        let auto = Overrides::default();
        let pick = |e: Estimate, threads| {
            choose(e, &auto, perfect_limit(24, threads), threads, None)
                .unwrap()
                .strategy
        };
        // 2 threads: 50 MiB of arrays, direct. 16 threads: 400 MiB (over a third of the
        // budget), partitioned.
        assert_eq!(pick(uniform, 2), Strategy::Perfect);
        assert_eq!(pick(uniform, 16), Strategy::Partitioned);
        // A key in a third of the rows keeps private tables, which absorb it.
        let with_hot_key = |every: u64| {
            estimate(
                &[(0..8192u64)
                    .map(|r| {
                        if r % every == 0 {
                            5
                        } else {
                            r * 127 % (1 << 20)
                        }
                    })
                    .collect()],
                1 << 20,
                Hints::default(),
            )
        };
        let hot = with_hot_key(3);
        assert!(hot.skewed());
        assert_eq!(pick(hot, 2), Strategy::Perfect);
        assert_eq!(pick(hot, 16), Strategy::ThreadLocal);
        // Skewed, the hottest key in a tenth of the rows (zipf 1.1's share): on 16 threads its
        // partition would outweigh a worker's share, on 2 (over 2^24 values) it does not.
        let skewed = with_hot_key(10);
        assert!(skewed.skewed());
        assert_eq!(pick(skewed, 16), Strategy::ThreadLocal);
        let wider = Estimate {
            domain: 1 << 24,
            ..skewed
        };
        assert_eq!(pick(wider, 2), Strategy::Partitioned);
        // 2^18 keys' arrays on 16 threads (100 MiB) stay direct.
        let smaller = Estimate {
            domain: 1 << 18,
            ..uniform
        };
        assert_eq!(pick(smaller, 16), Strategy::Perfect);
    }

    #[test]
    fn sorted_wide_keys_take_private_tables_in_key_order() {
        // TPC-H Q18's subquery at SF 1: `l_orderkey` over a 6M domain that its first sorted
        // batch fills densely.
        let q18 = estimate(
            &[(0..8192u64).map(|r| r / 4 * 3).collect()],
            6_000_000,
            Hints::default(),
        );
        assert!(q18.sorted && q18.looks_dense());
        let limit = perfect_limit(24, 2);
        let auto = Overrides::default();
        let pick = |e: Estimate| choose(e, &auto, limit, 2, None).unwrap().strategy;
        assert_eq!(pick(q18), Strategy::ThreadLocal);
        assert_eq!(
            pick(Estimate {
                sorted: false,
                ..q18
            }),
            Strategy::Perfect
        );
        // Sorted and nearly unique over a domain too wide to index: no partitioning either.
        let ids = estimate(
            &[(0..8192u64).map(|r| r * 1000).collect()],
            1 << 40,
            Hints::default(),
        );
        assert!(ids.sorted && ids.nearly_unique());
        assert_eq!(pick(ids), Strategy::ThreadLocal);
        assert_eq!(
            pick(Estimate {
                sorted: false,
                ..ids
            }),
            Strategy::Partitioned
        );
        // Within the always-direct domain sorted keys stay direct (no hashing there either).
        let small = estimate(
            &[(0..8192u64).map(|r| r / 8).collect()],
            1 << 20,
            Hints::default(),
        );
        assert!(small.sorted);
        assert_eq!(pick(small), Strategy::Perfect);
        // One key, or keys out of order, are not sorted.
        assert!(!estimate(&[vec![7; 100]], 1 << 30, Hints::default()).sorted);
        assert!(!estimate(&[vec![1, 2], vec![0, 3]], 1 << 30, Hints::default()).sorted);
        // Requested strategies still win.
        let perfect = Overrides {
            strategy: Some(Strategy::Perfect),
            ..Default::default()
        };
        assert_eq!(
            choose(q18, &perfect, limit, 2, None).unwrap().strategy,
            Strategy::Perfect
        );
    }

    #[test]
    fn small_domains_go_perfect() {
        let e = Estimate {
            rows: 10,
            domain: 6,
            groups: 6,
            sampled: 10,
            distinct: 6,
            sketched: (10, 6),
            source: Source::Range,
            key_bits: 3,
            top_count: 2,
            hot_rows: [0; HOT_LEVELS],
            dictionary: false,
            sorted: false,
        };
        let limit = perfect_limit(24, 2);
        let auto = Overrides::default();
        assert_eq!(
            choose(e, &auto, limit, 2, None).unwrap().strategy,
            Strategy::Perfect
        );
        let wide = Estimate {
            domain: 1 << 40,
            ..e
        };
        assert_eq!(
            choose(wide, &auto, limit, 2, None).unwrap().strategy,
            Strategy::ThreadLocal
        );
        let bad = Overrides {
            fill_factor: Some(1.5),
            ..Default::default()
        };
        assert!(choose(e, &bad, limit, 2, None).is_err());
        // A forced scheme and mapping reach the parameters and the explanation; the defaults
        // are not printed.
        let cuckoo = Overrides {
            probing: Some(Probing::Cuckoo2),
            buckets: Some(BucketMap::Modulo),
            ..Default::default()
        };
        let d = choose(wide, &cuckoo, limit, 2, None).unwrap();
        assert_eq!(
            (d.params.probing, d.params.buckets),
            (Probing::Cuckoo2, BucketMap::Modulo)
        );
        assert!(
            d.to_string()
                .contains("fill=0.5 probing=cuckoo2 buckets=modulo"),
            "{d}"
        );
        let plain = choose(wide, &auto, limit, 2, None).unwrap().to_string();
        assert!(
            !plain.contains("probing=") && !plain.contains("buckets="),
            "{plain}"
        );
        // A wide domain that the sample fills sparsely goes to hashing; a dense one stays direct.
        let sparse = Estimate {
            rows: 1 << 16,
            domain: 1 << 22,
            groups: 2000,
            sampled: 1 << 16,
            distinct: 2000,
            sketched: (1 << 16, 2000),
            source: Source::Sketch,
            key_bits: 22,
            top_count: 100,
            hot_rows: [0; HOT_LEVELS],
            dictionary: false,
            sorted: false,
        };
        assert_eq!(
            choose(sparse, &auto, limit, 2, None).unwrap().strategy,
            Strategy::ThreadLocal
        );
        let dense = Estimate {
            distinct: 60_000,
            groups: 60_000,
            ..sparse
        };
        assert_eq!(
            choose(dense, &auto, limit, 2, None).unwrap().strategy,
            Strategy::Perfect
        );
        let unique = Estimate {
            domain: 1 << 40,
            distinct: 65_000,
            groups: 65_000,
            top_count: 2,
            ..sparse
        };
        assert_eq!(
            choose(unique, &auto, limit, 2, None).unwrap().strategy,
            Strategy::Partitioned
        );
        // A first batch of 8192 rows, 94% distinct, from 2^22 rows over 2^16 groups: 64 rows a
        // group is plenty of reduction for tables.
        let first_batch = Estimate {
            rows: 1 << 22,
            sampled: 8192,
            distinct: 7700,
            groups: 1 << 16,
            ..unique
        };
        assert_eq!(
            choose(first_batch, &auto, limit, 2, None).unwrap().strategy,
            Strategy::ThreadLocal
        );
        let few_rows_each = Estimate {
            groups: 1 << 20,
            ..first_batch
        };
        assert_eq!(
            choose(few_rows_each, &auto, limit, 2, None)
                .unwrap()
                .strategy,
            Strategy::Partitioned
        );
        // The same groups with a key in over a quarter of the rows stay in private tables,
        // which absorb it.
        let hot = Estimate {
            top_count: 3000,
            ..few_rows_each
        };
        assert!(hot.skewed());
        assert_eq!(
            choose(hot, &auto, limit, 2, None).unwrap().strategy,
            Strategy::ThreadLocal
        );
        // Zipf keys over 2^22 values from 2^25 rows: the sample sees 3361 keys, one in 11.6% of
        // its rows, and the estimate extrapolates a long tail (21k): partitioned. Over 2^16
        // values (an estimate of 9.9k) private tables reduce the rows first.
        let zipf = Estimate {
            rows: 1 << 25,
            distinct: 3361,
            groups: 21_072,
            top_count: 948,
            ..first_batch
        };
        assert!(zipf.skewed());
        assert_eq!(
            choose(zipf, &auto, limit, 2, None).unwrap().strategy,
            Strategy::Partitioned
        );
        let short_tail = Estimate {
            distinct: 2571,
            groups: 9935,
            top_count: 1105,
            ..zipf
        };
        assert_eq!(
            choose(short_tail, &auto, limit, 2, None).unwrap().strategy,
            Strategy::ThreadLocal
        );
        // A device profile measured near the estimate decides before the rules, within what
        // applies: it may not index a domain too wide for memory.
        let profile = Profile {
            device: "test".into(),
            points: vec![Point {
                kind: KeyKind::Hashed,
                skewed: false,
                groups_log2: 11,
                ms: vec![("perfect".into(), 1.0), ("shared".into(), 2.0)],
                shape: None,
            }],
        };
        let d = choose(sparse, &auto, limit, 2, Some(&profile)).unwrap();
        assert_eq!(d.strategy, Strategy::Perfect, "{d}");
        assert!(d.reason.starts_with("device profile"), "{d}");
        let d = choose(unique, &auto, limit, 2, Some(&profile)).unwrap();
        assert_eq!(d.strategy, Strategy::Partitioned, "too far from 2^11: {d}");
        let wide_sparse = Estimate {
            domain: 1 << 40,
            ..sparse
        };
        let d = choose(wide_sparse, &auto, limit, 2, Some(&profile)).unwrap();
        assert_eq!(d.strategy, Strategy::Shared, "{d}");
        // Skewed keys take no advice from uniform points: the rules decide.
        let hot = Estimate {
            top_count: 20_000,
            hot_rows: [0; HOT_LEVELS],
            dictionary: false,
            ..wide_sparse
        };
        assert!(hot.skewed());
        let d = choose(hot, &auto, limit, 2, Some(&profile)).unwrap();
        assert_eq!(d.strategy, Strategy::ThreadLocal, "{d}");
        assert!(!d.reason.starts_with("device profile"), "{d}");
        // Dense keys are located by their domain: skewed keys over 2^18 values whose first
        // batch suggests 2^14 groups plan from the points at 2^17 and 2^19.
        let skewed_dense = |log2: u32, best: &str| Point {
            kind: KeyKind::Dense,
            skewed: true,
            groups_log2: log2,
            ms: vec![(best.into(), 1.0), ("shared".into(), 9.0)],
            shape: None,
        };
        let profile = Profile {
            device: "test".into(),
            points: vec![
                skewed_dense(13, "perfect"),
                skewed_dense(15, "perfect"),
                skewed_dense(17, "thread_local"),
                skewed_dense(19, "thread_local"),
            ],
        };
        let zipf = Estimate {
            domain: 1 << 18,
            groups: 1 << 14,
            top_count: 7000,
            hot_rows: [0; HOT_LEVELS],
            dictionary: false,
            ..sparse
        };
        assert!(zipf.skewed());
        let d = choose(zipf, &auto, limit, 2, Some(&profile)).unwrap();
        assert_eq!(d.strategy, Strategy::ThreadLocal, "{d}");
        // The bound is memory: many threads or big states index less directly.
        assert_eq!(perfect_limit(24, 2), (1 << 30) / (25 * 2));
        assert_eq!(perfect_limit(8, 1), PERFECT_MAX_DOMAIN);
        assert_eq!(perfect_limit(1023, 64), (1 << 30) / (1024 * 64));
    }

    #[test]
    fn private_tables_start_from_the_first_rows() {
        // 2^20 dense keys, a first batch of 8192 rows: the range bounds the groups of all
        // workers together (a shared table's size); each worker's private table starts from
        // what the sketch counted (at least 2^16) and grows.
        let e = Estimate {
            rows: 1 << 23,
            domain: 1 << 20,
            groups: 1 << 20,
            sampled: 8192,
            distinct: 8160,
            sketched: (8192, 8150),
            source: Source::Range,
            key_bits: 20,
            top_count: 3,
            hot_rows: [0; HOT_LEVELS],
            dictionary: false,
            sorted: false,
        };
        let limit = perfect_limit(24, 16);
        let d = choose(e, &Overrides::default(), limit, 16, None).unwrap();
        assert_eq!(d.params.initial_groups, (1 << 20) * 5 / 4 + 16);
        assert_eq!(d.params.private_groups, (1 << 16) * 5 / 4 + 16);
        // Many distinct keys in the first rows size it for four times as many.
        let wide = Estimate {
            sketched: (1 << 20, 200_000),
            ..e
        };
        let d = choose(wide, &Overrides::default(), limit, 16, None).unwrap();
        assert_eq!(d.params.private_groups, 800_000 * 5 / 4 + 16);
        // A forced initial size (the tests of growth) sizes both.
        let tiny = Overrides {
            initial_groups: Some(1),
            ..Default::default()
        };
        let d = choose(e, &tiny, limit, 16, None).unwrap();
        assert_eq!((d.params.initial_groups, d.params.private_groups), (1, 1));
    }
}
