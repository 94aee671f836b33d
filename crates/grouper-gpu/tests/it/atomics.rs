//! The atomics microbenchmark (`grouper_gpu::atomics`) on the device: atomic adds land exactly
//! (it fails otherwise), every way runs where it fits, and shared memory is skipped past a
//! block's room.

use grouper_gpu::Gpu;

use crate::gpu::have_gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn atomics_land_exactly_and_every_way_runs_where_it_fits() {
    if !have_gpu() {
        return;
    }
    let gpu = Gpu::get().unwrap();
    let points = grouper_gpu::atomics::atomics(&gpu, 1 << 22, &[1, 1024, 1 << 20], 256, 1).unwrap();
    // Shared memory holds 1 and 1,024 u32 counters a block, not 2^20.
    assert_eq!(points.len(), 2 * 4 + 2, "{points:?}");
    for p in &points {
        assert!(p.ms > 0.0 && p.adds_per_s > 0.0, "{p:?}");
        if p.op == "atomic" {
            assert!(p.exact, "{p:?}");
        }
    }
    assert!(!points
        .iter()
        .any(|p| p.memory == "shared" && p.targets == 1 << 20));
}
