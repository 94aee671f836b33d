//! The planner's sizing needs no GPU: it reads only the device's properties.
use super::*;
use crate::strategy::GpuParams;
use arrow::datatypes::DataType;
use grouper_core::agg::{AggKind, AggregateSpec};

/// An H100's properties, as the driver reports them.
fn h100() -> crate::DeviceInfo {
    crate::DeviceInfo {
        ordinal: 0,
        name: "NVIDIA H100 80GB HBM3".into(),
        compute_capability: (9, 0),
        sms: 132,
        l2_bytes: 50 << 20,
        shared_per_block: 227 * 1024,
        shared_per_sm: 228 * 1024,
        threads_per_sm: 2048,
        blocks_per_sm: 32,
        threads_per_block: 1024,
        memory_bytes: 80 << 30,
        driver_version: 13000,
    }
}

/// Default options with `s` forced.
fn forced(s: GpuStrategy) -> GpuOptions {
    GpuOptions {
        strategy: Some(s),
        ..GpuOptions::default()
    }
}

/// The choice for `groups` uniform hashed keys of one word in 2^28 rows, every argument
/// possibly NULL.
fn choose_hashed(
    opts: &GpuOptions,
    layout: &Layout,
    groups: u64,
    info: &crate::DeviceInfo,
) -> Result<Choice> {
    choose(
        opts,
        layout,
        &[],
        1,
        Demand::uniform(u64::MAX, groups, 1 << 28),
        info,
    )
}

/// `opts` with blocks the user fixed at `threads` threads.
fn blocks_of(threads: u32, opts: GpuOptions) -> GpuOptions {
    GpuOptions {
        params: GpuParams {
            threads_per_block: Some(threads),
            ..opts.params
        },
        ..opts
    }
}

fn layout(sums: usize) -> Layout {
    let mut aggs = vec![AggregateSpec::count_star()];
    aggs.extend((0..sums).map(|_| AggregateSpec::new(AggKind::Sum, DataType::Float64)));
    Layout::new(&aggs).unwrap()
}

/// Blocks of `threads` threads with `shared` bytes each that one SM holds.
fn resident(info: &crate::DeviceInfo, threads: u32, shared: u64) -> u64 {
    (info.shared_per_sm as u64 / (shared + 1024)).min((info.threads_per_sm / threads) as u64)
}

#[test]
fn shared_tables_leave_the_multiprocessor_full() {
    let info = h100();
    let opts = GpuOptions::default();
    for sums in 0..3 {
        let layout = layout(sums);
        let w = layout.words as u64;
        for log in 0..=12 {
            let domain = 1u64 << log;
            let forced = GpuOptions {
                strategy: Some(GpuStrategy::PERFECT_SHARED),
                ..opts.clone()
            };
            let c = choose(
                &forced,
                &layout,
                &[],
                1,
                Demand::uniform(domain, domain, 1 << 28),
                &info,
            )
            .unwrap();
            // Narrow copies: 4 bytes for the row count, 8 for each other word.
            let slot = 8 * (w - 1) + 4;
            let shared = (slot * domain * c.copies as u64).next_multiple_of(8);
            assert!(c.copies >= 1 && c.copies <= c.threads, "{domain}: {c:?}");
            if slot * domain + 1024 > info.shared_per_sm as u64 / 2 {
                // Not even two blocks of 1024 threads hold a copy each: one large block.
                assert_eq!((c.threads, c.copies), (1024, 1), "{domain}");
                continue;
            }
            assert_eq!(
                resident(&info, c.threads, shared) * c.threads as u64,
                info.threads_per_sm as u64,
                "domain {domain}, {w} words: {c:?} leaves the SM part empty"
            );
            // More copies would no longer fit at full occupancy.
            let more = 2 * shared;
            assert!(
                c.copies == c.threads
                    || resident(&info, c.threads, more) * (c.threads as u64)
                        < info.threads_per_sm as u64,
                "domain {domain}: room for more copies than {c:?}"
            );
        }
        let auto = choose(
            &opts,
            &layout,
            &[],
            1,
            Demand::uniform(4096, 4096, 1 << 28),
            &info,
        )
        .unwrap();
        assert_eq!(auto.strategy, GpuStrategy::PERFECT_SHARED, "{auto:?}");
    }
    // A block size the user fixed is kept: the table then costs occupancy.
    let fixed = blocks_of(256, forced(GpuStrategy::PERFECT_SHARED));
    let c = choose(
        &fixed,
        &layout(1),
        &[],
        1,
        Demand::uniform(4096, 4096, 1 << 28),
        &info,
    )
    .unwrap();
    assert_eq!((c.threads, c.copies), (256, 1));
    // block_local: 1024 groups at fill 0.5 need 2048 narrow slots of 28 bytes (key, sum,
    // seen, a 4-byte count), with headroom twice that: 112 KiB, which blocks of 1024
    // threads take at full occupancy (four times, 224 KiB, would not fit).
    // 64 groups: four times their 128 slots, 14 KiB, in 256-thread blocks.
    let forced = GpuOptions {
        strategy: Some(GpuStrategy::BLOCK_LOCAL),
        ..opts.clone()
    };
    let c = choose_hashed(&forced, &layout(1), 1024, &info).unwrap();
    assert_eq!((c.threads, c.local_slots), (1024, 4096));
    let c = choose_hashed(&forced, &layout(1), 64, &info).unwrap();
    assert_eq!((c.threads, c.local_slots), (256, 512));
}

/// block_local's copies: as many as fit at full occupancy, at most one per lane, of a
/// table with four or two times the slots its groups need where one copy of that fits;
/// past that one table, whole in a 1024-thread block's shared memory where it fits, else
/// as large as fits there; with blocks the user fixed smaller, only a full-occupancy share.
#[test]
fn block_tables_take_copies_for_few_groups_and_a_whole_sm_for_many() {
    let info = h100();
    let opts = forced(GpuStrategy::BLOCK_LOCAL);
    // (groups, threads, copies, slots); key, sum, seen and a 4-byte count: 28 bytes a slot.
    for (groups, want) in [
        (4, (256, 8, 64)),   // 1.75 KiB a copy (64 slots at least); 27.5 at full occupancy
        (64, (256, 1, 512)), // four times 128 slots: 14 KiB
        (256, (512, 1, 2048)), // four times 512 slots: 56 KiB, 512-thread blocks
        (1024, (1024, 1, 4096)), // twice 2048 slots: 112 KiB, one block an SM
        (2048, (1024, 1, 4096)), // 112 KiB: no headroom fits
        (4096, (1024, 1, 8256)), // an SM's whole shared memory: 8,265 slots, to 64s
        (8192, (1024, 1, 8256)), // 448 KiB would not fit: the most that does
    ] {
        let d = Demand::uniform(u64::MAX, groups, 1 << 28);
        let c = choose(&opts, &layout(1), &[], 1, d, &info).unwrap();
        assert_eq!(
            (c.threads, c.copies, c.local_slots),
            want,
            "{groups} groups"
        );
        let spec_bytes = 28 * c.copies as u64 * c.local_slots;
        assert!(spec_bytes < info.shared_per_block as u64, "{groups}: {c:?}");
    }
    // The GPU test's layout (block_tables_with_copies_or_a_whole_sm_match_the_reference):
    // COUNT(*), SUM(i64) (low, high, seen), SUM(f64) (sum, seen), the key and a 4-byte
    // count, 52 bytes.
    let narrow = Layout::new(&[
        AggregateSpec::count_star(),
        AggregateSpec::new(AggKind::Sum, DataType::Int64),
        AggregateSpec::new(AggKind::Sum, DataType::Float64),
    ])
    .unwrap();
    for (groups, want) in [
        (1, (256, 8, 64)),
        (40, (256, 4, 128)), // five narrow words: no headroom (not light)
        (2000, (1024, 1, 4096)),
        (3000, (1024, 1, 4416)), // 226 KiB of 52-byte slots, to 64s
    ] {
        let d = Demand::uniform(u64::MAX, groups, 1 << 28);
        let c = choose(&opts, &narrow, &[], 1, d, &info).unwrap();
        assert_eq!(
            (c.threads, c.copies, c.local_slots),
            want,
            "{groups} groups"
        );
    }
    // A table of fewer than 64 slots: the power of two below, as long as 16 fit (26
    // sums of doubles, each with its `seen` word, in 128-thread blocks: 13.25 KiB at full
    // occupancy holds 31 slots of 428 bytes).
    let wide = Layout::new(&vec![
        AggregateSpec::new(AggKind::Sum, DataType::Float64);
        26
    ])
    .unwrap();
    let d = Demand::uniform(u64::MAX, 2240, 1 << 28);
    let c = choose(&blocks_of(128, opts.clone()), &wide, &[], 1, d, &info).unwrap();
    assert_eq!((c.threads, c.copies, c.local_slots), (128, 1, 16), "{c:?}");
    let small = blocks_of(256, opts);
    let d = Demand::uniform(u64::MAX, 4096, 1 << 28);
    let c = choose(&small, &layout(1), &[], 1, d, &info).unwrap();
    // 228 KiB / 8 blocks − 1 KiB: 27.5 KiB, 1,005 slots, to 64s.
    assert_eq!((c.threads, c.copies, c.local_slots), (256, 1, 960));
}

/// Without a profile: registers for one group, interleaved shared copies from two to
/// 4,096 (the H200's sweep: shared 1.7x registers at four groups), whatever the words.
#[test]
fn few_dense_groups_take_registers_or_shared_copies() {
    let info = h100();
    let opts = GpuOptions::default();
    for sums in 0..3 {
        for (domain, want) in [
            (1, GpuStrategy::PERFECT_REGISTERS),
            (2, GpuStrategy::PERFECT_SHARED),
            (4, GpuStrategy::PERFECT_SHARED),
            (16, GpuStrategy::PERFECT_SHARED),
            (64, GpuStrategy::PERFECT_SHARED),
        ] {
            let demand = Demand::uniform(domain, domain, 1 << 28);
            let c = choose(&opts, &layout(sums), &[], 1, demand, &info).unwrap();
            assert_eq!(c.strategy, want, "domain {domain}, {sums} sums: {c:?}");
        }
    }
}

/// Dense keys without a profile: a shared table wherever one copy fits a block (2^14
/// groups of a count and a sum, narrow: 192 KiB), the device-memory table beyond, and
/// partitioned where that table is beyond L2 and a block's shared tables, in up to 32 key
/// ranges, cover a partition's keys.
#[test]
fn dense_keys_take_shared_then_global_then_partitioned_tables() {
    let info = h100();
    let opts = GpuOptions::default();
    for (log2, want) in [
        (12, GpuStrategy::PERFECT_SHARED),
        (13, GpuStrategy::PERFECT_SHARED),
        (14, GpuStrategy::PERFECT_SHARED),
        (15, GpuStrategy::PERFECT_GLOBAL),
        (20, GpuStrategy::PERFECT_GLOBAL),
        (22, GpuStrategy::PERFECT_PARTITIONED),
        // Key ranges of 16,384 narrow slots cover each partition's keys: four at 2^24,
        // sixteen at 2^26, 32 at 2^27 (the rule's count: measured at 2^26 in the sweep's 8,192-slot
        // tables, as many rows a range); 2^28 would take 64.
        (24, GpuStrategy::PERFECT_PARTITIONED),
        (26, GpuStrategy::PERFECT_PARTITIONED),
        (27, GpuStrategy::PERFECT_PARTITIONED),
        (28, GpuStrategy::PERFECT_GLOBAL),
    ] {
        let demand = Demand::uniform(1 << log2, 1 << log2, 1 << 28);
        let c = choose(&opts, &layout(1), &[true, true], 1, demand, &info).unwrap();
        assert_eq!(c.strategy, want, "2^{log2} groups: {c:?}");
        if (24..=27).contains(&log2) {
            assert_eq!(c.copies, 1 << (log2 - 22), "2^{log2} groups: {c:?}");
        }
    }
    // 20 bytes a slot — two non-null sums, or a sum that may be NULL (its `seen` word) —
    // and 2^14 groups no longer fit one SM's shared memory.
    let demand = Demand::uniform(1 << 14, 1 << 14, 1 << 28);
    for (sums, non_null) in [(2, &[true; 3][..]), (1, &[][..])] {
        let c = choose(&opts, &layout(sums), non_null, 1, demand, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::PERFECT_GLOBAL, "{sums}: {c:?}");
    }
}

/// Hashed keys stay `block_local` past the per-block tables' room (their rows overflow into
/// the global table), and are partitioned far past it (8 times the 4,096 groups a block's
/// table holds); the global hash table only where a block's table is too small.
#[test]
fn hashed_keys_past_the_block_tables_room_overflow_into_the_global_table() {
    let info = h100();
    let opts = GpuOptions::default();
    for log2 in [10, 12, 14, 15, 16, 18, 20, 24] {
        let demand = Demand::uniform(u64::MAX, 1 << log2, 1 << 28);
        let c = choose(&opts, &layout(1), &[], 1, demand, &info).unwrap();
        let want = match log2 {
            ..15 => GpuStrategy::BLOCK_LOCAL,
            _ => GpuStrategy::HASH_PARTITIONED,
        };
        assert_eq!(c.strategy, want, "2^{log2} groups: {c:?}");
        if want == GpuStrategy::HASH_PARTITIONED {
            continue;
        }
        if log2 > 10 {
            // (2^10 uniform groups: a key's share, 1/1024, counts as hot on 132 SMs.)
            // 2^12 groups: 8,192 slots of 28 bytes fill an SM's shared memory.
            assert_eq!(c.reason.contains("overflow"), log2 > 12, "{}", c.reason);
        }
    }
    // A layout so wide that a block's table holds fewer than 64 slots: the global table.
    let wide = Layout::new(&vec![
        AggregateSpec::new(AggKind::Sum, DataType::Float64);
        500
    ])
    .unwrap();
    let c = choose_hashed(&opts, &wide, 1 << 20, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::GLOBAL, "{c:?}");
}

#[test]
fn hot_keys_keep_out_of_one_device_memory_table() {
    let info = h100();
    let opts = GpuOptions::default();
    // Dense keys over 2^16 values, uniform: a direct table in device memory.
    let uniform = Demand::uniform(1 << 16, 1 << 16, 1 << 28);
    let c = choose(&opts, &layout(1), &[], 1, uniform, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::PERFECT_GLOBAL, "{c:?}");
    // The same keys zipf-distributed: the hottest takes ~11% of the rows.
    let zipf = Demand {
        top_share: 0.11,
        skewed: true,
        ..uniform
    };
    let c = choose(&opts, &layout(1), &[], 1, zipf, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::BLOCK_LOCAL, "{c:?}");
    assert!(
        c.reason.contains("hottest key takes 11.00%"),
        "{}",
        c.reason
    );
    // Hot keys with few rows between them stay in the direct table: the sort-based paper's
    // normal keys (2^27 rows, ~68M groups over a domain of 2^28), whose clamped tails put
    // 0.15% of the rows on each end key and 0.26% on both (block_local ran 9x slower).
    let tails = Demand {
        domain: 1 << 28,
        groups: 68_000_000,
        rows: 1 << 27,
        top_share: 0.0015,
        hot_share: 0.0026,
        skewed: true,
    };
    let c = choose(&opts, &layout(1), &[], 1, tails, &info).unwrap();
    assert_ne!(c.strategy, GpuStrategy::BLOCK_LOCAL, "{c:?}");
    assert!(!c.reason.contains("hottest"), "{}", c.reason);
    // The same hottest key with a hundredth of the rows on keys as hot: per-block tables.
    let c = choose(
        &opts,
        &layout(1),
        &[],
        1,
        Demand {
            hot_share: 0.01,
            ..tails
        },
        &info,
    )
    .unwrap();
    assert_eq!(c.strategy, GpuStrategy::BLOCK_LOCAL, "{c:?}");
    assert!(c.reason.contains("keys that hot"), "{}", c.reason);
    // Hashed keys, many groups: per-block tables that overflow, for a hot key's sake where
    // one is hot.
    let wide = Demand::uniform(u64::MAX, 1 << 14, 1 << 28);
    let c = choose(&opts, &layout(1), &[], 1, wide, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::BLOCK_LOCAL, "{c:?}");
    assert!(c.reason.contains("overflow per-block"), "{}", c.reason);
    let hot = Demand {
        top_share: 2.0 * info.hot_key_share(),
        ..wide
    };
    let c = choose(&opts, &layout(1), &[], 1, hot, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::BLOCK_LOCAL, "{c:?}");
    assert!(c.reason.contains("hottest key"), "{}", c.reason);
    // Shared-memory strategies already spread hot keys: the rules keep them.
    let small = Demand {
        top_share: 0.3,
        skewed: true,
        ..Demand::uniform(1024, 1024, 1 << 28)
    };
    let c = choose(&opts, &layout(1), &[], 1, small, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::PERFECT_SHARED, "{c:?}");
    // Re-planned for more groups than estimated: uniform keys cool down, skewed stay hot.
    let few = Demand {
        top_share: 1.0 / 40.0,
        ..Demand::uniform(u64::MAX, 40, 1 << 28)
    };
    let c = choose(&opts, &layout(1), &[], 1, few, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::BLOCK_LOCAL, "{c:?}");
    let grown = few.grown(1 << 20);
    assert!(grown.top_share < 1e-4, "{grown:?}");
    let c = choose(&opts, &layout(1), &[], 1, grown, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::HASH_PARTITIONED, "{c:?}");
    assert!(!c.reason.contains("hottest"), "{}", c.reason);
    // Partitioned while its 16 key ranges' tables hold at least a tenth of a partition's
    // groups (8,000 slots a range here: 98% of them at 2^24, 12% at 2^27), else block_local
    // (6% at 2^28; a hash fold takes no more than 16 ranges unless the user fixes them).
    for (log2, want) in [
        (24, GpuStrategy::HASH_PARTITIONED),
        (25, GpuStrategy::HASH_PARTITIONED),
        (26, GpuStrategy::HASH_PARTITIONED),
        (27, GpuStrategy::HASH_PARTITIONED),
        (28, GpuStrategy::BLOCK_LOCAL),
    ] {
        let many = Demand::uniform(u64::MAX, 1 << log2, 1 << 28);
        let c = choose(&opts, &layout(1), &[], 1, many, &info).unwrap();
        assert_eq!(c.strategy, want, "2^{log2}: {c:?}");
    }
    let skewed = Demand {
        skewed: true,
        ..few
    };
    assert_eq!(skewed.grown(1 << 20).top_share, skewed.top_share);
    // A forced strategy stays forced.
    let forced = GpuOptions {
        strategy: Some(GpuStrategy::GLOBAL),
        ..opts
    };
    let c = choose(&forced, &layout(1), &[], 1, hot, &info).unwrap();
    assert_eq!(c.strategy, GpuStrategy::GLOBAL);
}

#[test]
fn sorted_placements_take_the_keys_their_sort_orders() {
    // A device whose memory holds a direct table of 2^32 slots.
    let info = crate::DeviceInfo {
        memory_bytes: 1 << 40,
        ..h100()
    };
    // A direct table sorted by its key word: the sort's keys are 32 bits.
    let within = Demand::uniform(1 << 32, 1 << 20, 1 << 28);
    let past = Demand::uniform((1 << 32) + 1, 1 << 20, 1 << 28);
    let opts = forced(GpuStrategy::PERFECT_SORTED);
    assert!(choose(&opts, &layout(1), &[], 1, within, &info).is_ok());
    let err = choose(&opts, &layout(1), &[], 1, past, &info).unwrap_err();
    assert!(err.to_string().contains("does not apply"), "{err}");
    // Keys wider than a word have no direct index; the hash table takes any key.
    assert!(choose(&opts, &layout(1), &[], 2, within, &info).is_err());
    let hashed = forced(GpuStrategy::SORTED);
    let wide = Demand::uniform(u64::MAX, 1 << 24, 1 << 28);
    let c = choose(&hashed, &layout(2), &[], 3, wide, &info).unwrap();
    assert_eq!(
        (c.strategy, c.copies, c.local_slots),
        (GpuStrategy::SORTED, 0, 0)
    );
}

/// `partitioned`'s shared hash table holds twice a partition's groups, within a whole SM's
/// shared memory for a 1024-thread block (every slot that fits, to 64s); a direct table a
/// power of two; a layout too wide for 64 slots none (rows update the device-memory table
/// in partition order).
#[test]
fn partitioned_tables_take_a_partitions_groups_within_a_whole_sm() {
    let info = h100();
    let l = layout(1);
    // Key; sum, seen; count. The fold's static shared arrays take their part of the SM's
    // shared memory.
    let slot = crate::placement::narrow_slot_bytes(1, 2);
    let fold = crate::placement::FOLD_STATIC_BYTES;
    let whole_sm = (227 * 1024 - 1024 - fold) / slot / 64 * 64;
    assert_eq!(whole_sm, 8000);
    let opts = forced(GpuStrategy::HASH_PARTITIONED);
    for (log2, want) in [
        (12, 64),
        (16, 1024),
        (20, 16384.min(whole_sm)),
        (24, whole_sm),
    ] {
        let demand = Demand::uniform(u64::MAX, 1 << log2, 1 << 28);
        let c = choose(&opts, &l, &[], 1, demand, &info).unwrap();
        assert_eq!((c.threads, c.local_slots), (1024, want), "2^{log2}: {c:?}");
    }
    // A partition's groups over a whole SM's table at its fill limit (with a quarter to
    // spare): its fold takes key ranges, the fewest (to 16) whose share fits; the user may
    // fix them, to 64.
    for (log2, ranges) in [(16, 1), (19, 1), (20, 2), (22, 6), (24, 16), (28, 16)] {
        let demand = Demand::uniform(u64::MAX, 1 << log2, 1 << 28);
        let c = choose(&opts, &l, &[], 1, demand, &info).unwrap();
        assert_eq!(c.copies, ranges, "2^{log2}: {c:?}");
    }
    let fixed = GpuOptions {
        params: GpuParams {
            key_ranges: Some(40),
            ..opts.params
        },
        ..opts.clone()
    };
    let c = choose_hashed(&fixed, &l, 1 << 24, &info).unwrap();
    assert_eq!((c.copies, c.local_slots), (40, whole_sm), "{c:?}");
    // Blocks the user fixed at 256 threads: their share at full occupancy (8 a SM).
    let small = blocks_of(256, opts.clone());
    let c = choose_hashed(&small, &l, 1 << 24, &info);
    let share = (228 * 1024 / 8 - 1024 - fold) / slot / 64 * 64;
    assert_eq!(c.unwrap().local_slots, share);
    // 400 sums: a slot of 3.2 KB, fewer than 64 in a block: no shared table.
    let wide = layout(400);
    let c = choose_hashed(&opts, &wide, 1 << 20, &info);
    assert_eq!(c.unwrap().local_slots, 0);
    // A direct table: a partition's keys (2^12 at a domain of 2^20), no key words.
    let direct = forced(GpuStrategy::PERFECT_PARTITIONED);
    let slot = crate::placement::narrow_slot_bytes(0, 2);
    let whole_sm = crate::placement::pow2_floor((227 * 1024 - 1024 - fold) / slot);
    // Key ranges: the fewest whose tables cover a partition's keys (2^24: 65,536 keys, 8
    // ranges of 8,192 slots), at most 64.
    for (log2, want, ranges) in [
        (16, 256, 1),
        (20, 4096.min(whole_sm), 1),
        (22, whole_sm, 2),
        (24, whole_sm, 8),
        (26, whole_sm, 32),
        (28, whole_sm, 64),
    ] {
        let demand = Demand::uniform(1 << log2, 1 << log2, 1 << 28);
        let c = choose(&direct, &l, &[], 1, demand, &info).unwrap();
        assert_eq!((c.threads, c.local_slots), (1024, want), "2^{log2}: {c:?}");
        assert_eq!(c.copies, ranges, "2^{log2}: {c:?}");
    }
    assert_eq!(whole_sm, 8192);
    // Fixed: a partition's 65,536 keys at 2^24 in 8 ranges of 8,192 slots.
    let fixed = GpuOptions {
        params: GpuParams {
            key_ranges: Some(8),
            ..direct.params
        },
        ..direct.clone()
    };
    let demand = Demand::uniform(1 << 24, 1 << 24, 1 << 28);
    let c = choose(&fixed, &l, &[], 1, demand, &info).unwrap();
    assert_eq!((c.copies, c.local_slots), (8, 8192), "{c:?}");
    // No more ranges than a block has threads (part_split gives each range a thread). On an
    // H100 a 32-thread block's share of shared memory holds no fold table; on a device of 64
    // threads a multiprocessor it holds half of it, and 2^28 keys, which would take 64 ranges,
    // take 32; a fixed 40 hashed ranges 32 too.
    let few_threads = crate::DeviceInfo {
        threads_per_sm: 64,
        ..h100()
    };
    let narrow = blocks_of(32, direct.clone());
    let demand = Demand::uniform(1 << 28, 1 << 28, 1 << 28);
    let c = choose(&narrow, &l, &[], 1, demand, &few_threads).unwrap();
    assert_eq!((c.threads, c.copies), (32, 32), "{c:?}");
    let mut hashed = blocks_of(32, forced(GpuStrategy::HASH_PARTITIONED));
    hashed.params.key_ranges = Some(40);
    let c = choose_hashed(&hashed, &l, 1 << 24, &few_threads).unwrap();
    assert_eq!((c.threads, c.copies), (32, 32), "{c:?}");
}
