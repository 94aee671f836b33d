//! The GPU planner: from what is known of a query's keys ([`Demand`]: domain, groups, rows,
//! the hottest key's share and the hot keys') and the device's properties to a strategy and
//! its sizes ([`Choice`]). It prepares nothing and launches nothing, so its rules are tested
//! without a GPU (the tests below read an H100's properties).
//!
//! Order of decision: a forced strategy (checked); the device profile where it measured near
//! the estimate; then Karnagel's regions — registers, shared memory, hot keys that take a real
//! share of the rows kept out of one device-memory table, a direct table in device memory for
//! dense keys (partitioned where it is beyond L2 and a block's shared table covers a
//! partition's keys in at most four key ranges), per-block shared hash tables up to
//! [`PARTITION_PAST_BLOCK`] times the groups a block's table holds and partitioned hash tables
//! past that, the global hash table where a block's would be too small.

use crate::device::DeviceInfo;
use crate::placement::{pow2_floor, Room};
use crate::query::GpuOptions;
use crate::strategy::{GpuStrategy, Index, Placement};
use grouper_core::agg::layout::Layout;
use grouper_core::error::{GrouperError, Result};
use grouper_core::profile::KeyKind;

/// The strategy and its sizes.
#[derive(Debug)]
pub(crate) struct Choice {
    pub(crate) strategy: GpuStrategy,
    pub(crate) reason: String,
    pub(crate) threads: u32,
    pub(crate) copies: u32,
    pub(crate) local_slots: u64,
}

/// What the planner knows of a query's keys when it chooses: their domain, the groups and
/// rows expected, and how hot the hottest key is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Demand {
    /// Key domain (`u64::MAX` when unbounded).
    pub(crate) domain: u64,
    /// Expected groups.
    pub(crate) groups: u64,
    /// Input rows.
    pub(crate) rows: u64,
    /// Share of the rows the hottest key takes.
    pub(crate) top_share: f64,
    /// Share of the rows on keys each at least as hot as the device's hot-key share
    /// ([`DeviceInfo::hot_key_share`]): how many rows contend, where `top_share` says only
    /// that one key does.
    pub(crate) hot_share: f64,
    /// Whether the keys are skewed ([`grouper_core::planner::Estimate::skewed`]).
    pub(crate) skewed: bool,
}

impl Demand {
    /// The demand once `groups` have been seen, more than planned for: uniform keys' hottest
    /// share shrinks with the groups; a skewed input's hot keys stay as hot.
    pub(crate) fn grown(self, groups: u64) -> Self {
        let top_share = match self.skewed {
            true => self.top_share,
            false => self.top_share * self.groups.max(1) as f64 / groups.max(1) as f64,
        };
        Demand {
            groups,
            top_share: top_share.min(self.top_share),
            ..self
        }
    }

    /// Uniform keys: no key hotter than its share of `groups`.
    #[cfg(test)]
    pub(crate) fn uniform(domain: u64, groups: u64, rows: u64) -> Self {
        Demand {
            domain,
            groups,
            rows,
            top_share: 1.0 / groups.max(1) as f64,
            // Every key as hot as the hottest: all rows, where that one is hot.
            hot_share: 1.0,
            skewed: false,
        }
    }
}

/// How many times the groups a block's shared hash table holds past which hashed keys are
/// partitioned (`choose`): on the H100 (4,096 groups a block's table) from 2^15 groups. With
/// the fold table's headroom, at 2^28 rows `hash_partitioned` took 9.2 ms at 2^15 scattered
/// groups against `block_local`'s 10.0, 8.8 against 10.2 at 2^16, and 10.6 against 7.6 at
/// 2^14 (`gpu-sweep-h100-2p28-partitioned-headroom.json`).
const PARTITION_PAST_BLOCK: f64 = 8.0;

/// Least share of the rows on hot keys ([`Demand::hot_share`]) for the planner to keep them out
/// of one device-memory table. The hottest key's share alone sent the sort-based paper's normal
/// keys (2^27 rows, ~68M groups; its generator clamps the tails, ~0.13% of the rows on each end
/// key, 0.26% on both) to `block_local` on the H100: 117 ms against `perfect_global`'s 13
/// (`seeds/sort-atomics-gpu.json`, 5c745bd). Where the hot keys take real shares the block
/// tables pay: all rows at 2^10 uniform groups (4× faster than one device-memory table), about
/// half of zipf(1.1)'s, where they won up to 2.9M groups (`regret-gpu-h100.json`). At 1%, the
/// most one key could serialize on 2^27 rows is 1.3M atomics at the 1.37e9 a second one
/// counter took (`seeds/sort-atomics-micro.json`): ~1 ms. With the rule (ab07a98) the normal
/// keys took `perfect_partitioned`, 16.2 ms against `perfect_global`'s 12.4 in the same run.
const HOT_ROWS_THAT_CONTEND: f64 = 0.01;

/// Most key ranges of a direct partitioned fold that the planner takes over `perfect_global`,
/// since a fold in more than four splits its rows by range first and reads each range's rows
/// once. On the H100 at 2^28 rows (`gpu-sweep-h100-2p28-range-split.json`): 8 ranges (2^25
/// dense groups) 15.6 ms against `perfect_global`'s 24.2; four won by 1.6x at 2^24; 32 (2^26,
/// the split staged, `gpu-sweep-h100-2p28-split-staged.json`) 19.0 against 24.5 (b33ea21,
/// 24.5 again at 97f9a34). 64 ranges (2^28) took 27.8 against 26.3 (97f9a34), so 2^27-2^28
/// keys are not taken (fewer ranges leave keys to the device-memory table, and lost more:
/// sixteen at 2^28 34.1-35.0).
const DIRECT_RANGES_THAT_PAY: u64 = 32;

/// Least share of a partition's average groups that a hashed partitioned fold's tables (all
/// its key ranges, at the fill limit) must hold for the planner to take it over `block_local`:
/// the rest of a partition's groups go on to the device-memory table after a shared-table
/// probe. On the H100 with scattered u64 keys at 2^28 rows, the fold splitting its rows by
/// range (`gpu-sweep-h100-2p28-range-split.json`; the sweep's 20-byte slots, ~11,200 a table):
/// 16 ranges holding about a third of a partition's groups (2^26) took 98.5 ms against
/// `block_local`'s 118.1, a sixth (2^27) 170.5 against 184.9, a twelfth (2^28) 279.2 against
/// 270.2 (a tenth lies between: where exactly it pays is not measured); holding all (2^24),
/// 31.5 (`block_local` 37.7 at eb2c3a1). Before the split, when each range reread its
/// partition's rows, a third had lost (2^26: 177 ms against 121, b33ea21,
/// `gpu-sweep-h100-2p28-high-groups.json`).
const HASH_FOLD_SHARE_THAT_PAYS: f64 = 0.1;

/// The planner's choice (or the forced strategy, checked), sized from the device.
pub(crate) fn choose(
    opts: &GpuOptions,
    layout: &Layout,
    non_null: &[bool],
    key_words: usize,
    demand: Demand,
    info: &DeviceInfo,
) -> Result<Choice> {
    let Demand {
        domain,
        groups,
        rows,
        top_share,
        hot_share,
        skewed,
    } = demand;
    let w = layout.words as u64;
    let fill = opts.params.fill_factor;
    let single = key_words <= 1;
    let room = Room {
        info,
        block_sizes: match opts.params.threads_per_block {
            Some(t) => vec![t],
            None => vec![256, 512, 1024],
        },
        default_threads: opts.params.threads_per_block.unwrap_or(256),
        words: w,
        narrow_words: crate::codegen::narrow_words(layout, non_null).len() as u64,
        key_words: key_words.max(1) as u64,
        domain,
        groups,
        fill,
        // A direct table in device memory: within a quarter of the device, and half of the
        // memory limit (the rest streams the input).
        direct_room: (info.memory_bytes / 4).min(opts.memory_limit.map_or(u64::MAX, |l| l / 2)),
        key_ranges: opts.params.key_ranges.map(u64::from),
    };
    // Registers only for one group: since the shared copies reduce in a tree before their
    // flush, interleaved shared copies run as fast at one group (594 against 599 Grows/s on
    // the H200, 2^28 rows) and faster from two: 471 against 276 at four groups, where a
    // thread's registers compare every row with every slot.
    let registers_ok = single && domain <= 1 && w <= 48;
    let shared = Placement::Shared.size(Index::Direct, &room);
    let shared_copies = shared.map_or(0, |z| z.copies);
    let global_direct_ok = Placement::Global.size(Index::Direct, &room).is_some();
    let block_slots = Placement::Block
        .size(Index::Hashed, &room)
        .map_or(0, |z| z.local_slots);
    let pick = |strategy: GpuStrategy, reason: String| -> Result<Choice> {
        let Some(z) = strategy.placement().size(strategy.index(), &room) else {
            return Err(GrouperError::InvalidOption(format!(
                "GPU strategy {strategy} does not apply: key domain {domain} with {w} state words{}",
                if single { "" } else { " (keys wider than 64 bits)" }
            )));
        };
        Ok(Choice {
            strategy,
            reason,
            threads: z.threads,
            copies: z.copies,
            local_slots: z.local_slots,
        })
    };
    if let Some(s) = opts.strategy {
        return pick(s, "forced".into());
    }
    // The device profile, where it measured near the estimate: the fastest strategy there
    // that applies to this query (a direct table needs dense keys in a small domain).
    let dense = global_direct_ok && domain <= groups.saturating_mul(4).max(1 << 16);
    let kind = if dense {
        KeyKind::Dense
    } else {
        KeyKind::Hashed
    };
    if let Some(advice) = opts
        .profile
        .as_deref()
        .and_then(|p| p.advise(kind, skewed, groups))
    {
        for (name, _) in &advice.ranked {
            let Ok(s) = name.parse::<GpuStrategy>() else {
                continue;
            };
            if !s.placement().holds(groups, fill) {
                continue;
            }
            if let Ok(c) = pick(s, advice.to_string()) {
                return Ok(c);
            }
        }
    }
    if registers_ok {
        return pick(
            GpuStrategy::PERFECT_REGISTERS,
            format!("key domain {domain} fits registers"),
        );
    }
    // Any shared table beats the device-memory one: on the H100 (2^26 rows, 96f7172) one
    // narrow copy in a whole-SM block took 0.34 and 0.42 ms at 2^13 and 2^14 dense groups
    // against perfect_global's 1.95 and 1.69 (`gpu-sweep-h100-2p26-narrow-96f7172.json`).
    if shared_copies > 0 {
        return pick(
            GpuStrategy::PERFECT_SHARED,
            format!("key domain {domain} fits shared memory ({shared_copies} copies per block)"),
        );
    }
    // A key this hot funnels its rows' atomics into one address of a device-memory table,
    // which serializes them; per-block shared tables take them in parallel on every SM.
    let hot_limit = info.hot_key_share();
    // (Where a block's table applies: slots too wide for 16 in a user's small blocks leave
    // the rows to the device-memory tables below.)
    // Only where the hot keys take a real share of the rows ([`HOT_ROWS_THAT_CONTEND`]): a
    // few rows on hot keys cost less than what block tables too small for the rest would.
    let contended = top_share >= hot_limit && hot_share >= HOT_ROWS_THAT_CONTEND && block_slots > 0;
    if contended {
        return pick(
            GpuStrategy::BLOCK_LOCAL,
            format!(
                "the hottest key takes {:.2}% of the rows, keys that hot (≥ {:.3}%) {:.1}%: in one device-memory table their atomics serialize; per-block shared tables absorb them, the rest overflows",
                100.0 * top_share,
                100.0 * hot_limit,
                100.0 * hot_share
            ),
        );
    }
    if global_direct_ok && domain <= groups.saturating_mul(4).max(rows).max(1 << 16) {
        // A direct table beyond L2 takes its atomics in device memory. Partitioned, a block
        // folds a partition's rows in its shared table, and the rest update a partition's
        // range of the device-memory table at a time, which L2 holds. It pays where shared
        // tables cover a partition's keys in key ranges (DIRECT_RANGES_THAT_PAY): on the H100
        // at 2^28 rows 8.8 ms in one range against perfect_global's 19.2 at 2^22 dense groups
        // and 14.4 in four at 2^24 against 23.4 (`gpu-sweep-h100-2p28-key-ranges.json`); 19.0
        // in 32 at 2^26 against 24.5 (`gpu-sweep-h100-2p28-split-staged.json`). One range
        // covering half (2^26 rows, 140f7c6): 3.57 ms against 4.78 at 2^22, where an eighth
        // lost (6.79 against 5.83 at 2^24).
        let table_bytes = domain.saturating_mul(8 * w);
        let covered = Placement::Partitioned
            .size(Index::Direct, &room)
            .is_some_and(|z| {
                u64::from(z.copies.max(1)) <= DIRECT_RANGES_THAT_PAY && z.fold_slots() >= domain
            });
        if table_bytes > info.l2_bytes && covered {
            return pick(
                GpuStrategy::PERFECT_PARTITIONED,
                format!(
                    "dense keys: a direct table of {} MiB is beyond L2 ({} MiB); partitioned, each partition's keys fold in shared memory",
                    table_bytes >> 20,
                    info.l2_bytes >> 20
                ),
            );
        }
        return pick(
            GpuStrategy::PERFECT_GLOBAL,
            format!(
                "dense keys: domain {domain} for ~{groups} groups, direct index in device memory"
            ),
        );
    }
    // Past the per-block tables' room their hits still spare the global table's atomics, and
    // far past it a table that takes a whole SM's shared memory (1024 threads, half the SM)
    // keeps fewer atomics in flight on a table beyond L2, where fewer won: on the H200 (2^26
    // rows, scattered u64 keys, 15a26a3) block_local took 2.35 ms at 2^16 groups against
    // global's 2.29, 3.83 against 4.67 at 2^20 and 17.2 against 25.8 at 2^24
    // (`check-h200-gpu-15a26a3-*.json`); on the H100 (2^26 rows, ff94266, one run) 2.61 against
    // 2.62 at 2^16, 2.70 against 2.66 at 2^18, 4.96 against 6.02 at 2^20, 9.67 against 12.26 at
    // 2^22, 20.4 against 27.8 at 2^24 (`gpu-sweep-h100-2p26-partitioned-ff94266.json`). The
    // global hash table only where a block's is too small to be worth it.
    // Far past them (a block's table holding under 1/PARTITION_PAST_BLOCK of the groups), most
    // rows miss it and update the global table; partitioned, a block folds one partition's
    // rows in its shared table, and the rest update a partition's share of the global table at
    // a time. On the H100 (2^26 rows, scattered u64 keys, cf18cfd's narrow tables, 4,096
    // groups a block's table) hash_partitioned took 2.48 ms at 2^16 groups against
    // block_local's 2.54, 2.01 against 2.63 at 2^18, 4.72 against 4.88 at 2^20, 9.46 against
    // 9.68 at 2^22 and 18.1 against 20.9 at 2^24; 4.04 against 2.14 at 2^14, where the
    // scatter's pass costs more than the misses (`gpu-sweep-h100-2p26-cf18cfd.json`). The
    // rules-only regret sweep at 89ed8e2 (16 x 4,096 = 2^16 groups not yet partitioned) found
    // 2.33 ms for block_local against 2.04 at 2^16, and at most 2.8% regret at 2^18-2^24
    // (`regret-gpu-h100-rules-hashed-89ed8e2.json`).
    // The rule's boundary was measured with whole-SM tables of 8,192 slots: a table's slots
    // count in powers of two here, so the whole-SM table's extra slots (11,520 of 20 bytes
    // on an H100) leave it at 8 x 4,096 = 2^15 groups.
    let block_groups = pow2_floor(block_slots) as f64 * fill;
    let partitioned_ok = Placement::Partitioned
        .size(Index::Hashed, &room)
        .is_some_and(|z| {
            let held = z.fold_slots() as f64 * fill;
            z.local_slots >= 64 && held >= HASH_FOLD_SHARE_THAT_PAYS * groups as f64
        });
    if block_slots >= 64 && partitioned_ok && groups as f64 >= PARTITION_PAST_BLOCK * block_groups {
        return pick(
            GpuStrategy::HASH_PARTITIONED,
            format!("~{groups} groups are over {PARTITION_PAST_BLOCK}× what a block's shared hash table holds ({block_groups}): partitioned, a block folds one partition's groups in shared memory"),
        );
    }
    if block_slots >= 64 {
        let reason = if block_groups >= groups as f64 {
            format!("~{groups} groups fit a shared-memory hash table per block")
        } else {
            format!("~{groups} groups overflow per-block shared hash tables of {block_slots} slots into the global one: their hits spare its atomics, and the tables' blocks keep fewer in flight")
        };
        return pick(GpuStrategy::BLOCK_LOCAL, reason);
    }
    pick(
        GpuStrategy::GLOBAL,
        format!("~{groups} groups: one hash table in device memory"),
    )
}

#[cfg(test)]
mod tests;
