//! The GPU's hashing schemes (`codegen/probing`) against the CPU reference: Chain and Chain+
//! global tables under every hashed strategy, cuckoo tables in `thread_private`'s private
//! tables (refused elsewhere, with the way to run them). Every run starts from a table of one
//! group, so each scheme traps, grows and resumes; keys of one and several words, NULL keys,
//! skew. The private tables run on a small grid, so each thread's table sees most keys, and at
//! fill 0.9 too, where two cuckoo sub-tables cannot always place a key (it then stays in two
//! private entries, which the global table merges). One data set maps the global table's
//! buckets by modulo (tables of any size, grown to any size).

use grouper_core::compare::same_groups;
use grouper_core::reference;
use grouper_core::GrouperError;
use grouper_gpu::{BucketMap, GpuOptions, GpuParams, GpuStrategy, Prepared, Probing};

use crate::gpu::{case, have_gpu, keyed, values, KeyKind};

/// The strategies with a hashed global table.
const HASHED: [GpuStrategy; 5] = [
    GpuStrategy::GLOBAL,
    GpuStrategy::BLOCK_LOCAL,
    GpuStrategy::THREAD_PRIVATE,
    GpuStrategy::SORTED,
    GpuStrategy::HASH_PARTITIONED,
];

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn every_scheme_traps_grows_and_matches_the_reference() {
    if !have_gpu() {
        return;
    }
    for (kinds, groups, rows, skew) in [
        (vec![KeyKind::I64], 20u64, 400_000usize, false),
        (vec![KeyKind::I64, KeyKind::Str], 60, 400_000, true),
        (vec![KeyKind::U64Scattered], 10_000, 200_000, false),
        (vec![KeyKind::I16, KeyKind::DecWide], 3_000, 100_000, true),
    ] {
        let keys = keyed(&kinds, rows, groups, 5, false, skew, groups);
        let (vals, aggs) = values(rows, 5, groups ^ 7);
        let c = case(keys, vals, &aggs, 2);
        let expected = reference::aggregate(&c.spec, &c.reference).unwrap();
        for probing in Probing::ALL {
            let cuckoo = matches!(probing, Probing::Cuckoo2 | Probing::Cuckoo4);
            for s in HASHED {
                let private = s == GpuStrategy::THREAD_PRIVATE;
                let fills: &[f64] = if private { &[0.5, 0.9] } else { &[0.5] };
                for &fill_factor in fills {
                    let opts = GpuOptions {
                        strategy: Some(s),
                        params: GpuParams {
                            probing,
                            fill_factor,
                            initial_groups: Some(1),
                            threads_per_block: private.then_some(32),
                            blocks_per_sm: private.then_some(1),
                            ..Default::default()
                        },
                        batch_rows: 100_000,
                        ..Default::default()
                    };
                    // The global table under the modulo mapping too (tables of any size).
                    let mut opts = opts;
                    if !private && groups == 3_000 {
                        opts.params.buckets = BucketMap::Modulo;
                    }
                    let what = format!(
                        "{s} {probing} {} fill {fill_factor}, {kinds:?}, {groups} groups",
                        opts.params.buckets
                    );
                    match Prepared::new(&c.query, &c.batches, &opts).and_then(|mut p| p.run()) {
                        Ok(out) => {
                            assert!(!cuckoo || private, "{what}: ran");
                            assert!(out.report.grows > 0, "{what}: the tiny table never grew");
                            same_groups(&expected, &out.columns, kinds.len())
                                .unwrap_or_else(|e| panic!("{what}: {e}"));
                        }
                        Err(GrouperError::InvalidOption(why)) if cuckoo && !private => {
                            assert!(why.contains("thread_private"), "{what}: {why}");
                        }
                        Err(e) => panic!("{what}: {e}"),
                    }
                }
            }
        }
    }
}
