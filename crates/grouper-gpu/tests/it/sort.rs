//! The GPU radix sort (`grouper_gpu::sort`) against the CPU's stable sort: key widths from one
//! value to full 32 bits, skewed and sorted inputs, sizes around a tile's edge (4,096 keys) and
//! across many tiles (the look-back), and an empty sort. Ignored without a GPU, like `gpu`.

use grouper_gpu::sort::{RadixSort, SortBuffers};
use grouper_gpu::Gpu;

use crate::gpu::{have_gpu, xorshift};

/// The stable sort's row ids of `keys`, on the CPU.
fn expected(keys: &[u32]) -> Vec<u32> {
    let mut rows: Vec<u32> = (0..keys.len() as u32).collect();
    rows.sort_by_key(|&r| keys[r as usize]);
    rows
}

fn sorted_on_gpu(sorter: &RadixSort, bufs: &mut SortBuffers, keys: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let gpu = Gpu::get().unwrap();
    let stream = &gpu.stream;
    if !keys.is_empty() {
        let mut first = bufs.keys[0].slice_mut(0..keys.len());
        stream.memcpy_htod(keys, &mut first).unwrap();
    }
    let s = sorter.sort(stream, bufs, keys.len()).unwrap();
    let k = stream.clone_dtoh(&bufs.keys[s.buffer]).unwrap();
    let v = stream.clone_dtoh(&bufs.vals[s.buffer]).unwrap();
    (k[..keys.len()].to_vec(), v[..keys.len()].to_vec())
}

#[test]
#[ignore = "needs a GPU; run with --include-ignored on a GPU machine"]
fn radix_sort_equals_the_stable_sort() {
    if !have_gpu() {
        return;
    }
    let gpu = Gpu::get().unwrap();
    let sorter = RadixSort::new(&gpu).unwrap();
    // More keys than a look-back word counts are refused before any memory is asked for.
    assert!(SortBuffers::new(&gpu.stream, RadixSort::MAX_KEYS + 1).is_err());
    let mut bufs = SortBuffers::new(&gpu.stream, 1 << 21).unwrap();
    let mut words = xorshift(7);
    let mut next = move || (words() >> 16) as u32;
    let mut cases: Vec<(String, Vec<u32>)> = Vec::new();
    for n in [0usize, 1, 31, 4095, 4096, 4097, 100_000, 1 << 21] {
        for bits in [0u32, 1, 8, 12, 20, 32] {
            let mask = if bits == 32 {
                u32::MAX
            } else {
                (1u32 << bits) - 1
            };
            cases.push((
                format!("{n} keys of {bits} bits"),
                (0..n).map(|_| next() & mask).collect(),
            ));
        }
    }
    // Skewed: one key in nine of ten rows; sorted and reversed runs; keys at u32::MAX.
    let n = 300_000;
    cases.push((
        "heavy hitter".into(),
        (0..n)
            .map(|i| if i % 10 == 0 { next() } else { 77 })
            .collect(),
    ));
    cases.push(("sorted".into(), (0..n as u32).collect()));
    cases.push(("reversed".into(), (0..n as u32).rev().collect()));
    cases.push((
        "at u32::MAX".into(),
        (0..n).map(|_| u32::MAX - (next() & 3)).collect(),
    ));
    for (what, keys) in &cases {
        let (k, v) = sorted_on_gpu(&sorter, &mut bufs, keys);
        let rows = expected(keys);
        assert_eq!(v, rows, "{what}: row ids");
        let want: Vec<u32> = rows.iter().map(|&r| keys[r as usize]).collect();
        assert_eq!(k, want, "{what}: keys");
    }
}
