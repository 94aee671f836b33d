//! `grouper bench radix-sort`: the GPU's LSD radix sort of (u32 key, u32 row id) pairs
//! (`grouper_gpu::sort`) against PyTorch's `torch.sort(stable=True)` in the same run (issue 25's
//! target: 2^28 pairs at ≥ 15 Gpairs/s on an H100). Keys uniform below 2^bits; sort time by
//! CUDA events (the histogram, its read-back and every pass), median of `--reps` after a
//! warm-up; the last result is read back and checked whole: keys in order, each the key of the
//! row id beside it, row ids rising within equal keys (stable).
// Benchmark harness, not a query path: its indexing is into vectors it sized itself.
#![allow(clippy::indexing_slicing)]

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use grouper_gpu::sort::RadixSort;
use grouper_gpu::Gpu;
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::bench::common::{git_commit, run_peer, write_json};
use crate::bench::gpu_sweep::median;

#[derive(Args, Debug)]
pub struct RadixSortArgs {
    /// log2 of the pairs sorted.
    #[arg(long, default_value_t = 28)]
    rows_log2: u32,
    /// Key widths in bits (keys uniform below 2^bits; comma-separated).
    #[arg(long, default_value = "32,24,16,8", value_delimiter = ',')]
    key_bits: Vec<u32>,
    /// Timed runs per point (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Python with torch for the PyTorch peer (skipped if it fails).
    #[arg(long, default_value = "python3")]
    torch_python: PathBuf,
    /// Where to write the JSON result.
    #[arg(long, default_value = "bench/results/radix-sort.json")]
    out: PathBuf,
}

/// Keys uniform below 2^bits from a fixed seed (splitmix64 of the position).
fn keys(n: usize, bits: u32) -> Vec<u32> {
    let mask = if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    };
    (0..n as u64)
        .into_par_iter()
        .map(|i| {
            let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u32 & mask
        })
        .collect()
}

/// Whether `sorted` with `rows` is the stable sort of `input`; the first failure if not.
fn check(input: &[u32], sorted: &[u32], rows: &[u32]) -> Result<()> {
    anyhow::ensure!(sorted.len() == input.len() && rows.len() == input.len());
    let bad = (0..input.len()).into_par_iter().find_any(|&i| {
        let r = rows[i] as usize;
        r >= input.len()
            || input[r] != sorted[i]
            || (i + 1 < input.len()
                && (sorted[i] > sorted[i + 1]
                    || (sorted[i] == sorted[i + 1] && rows[i] >= rows[i + 1])))
    });
    match bad {
        Some(i) => anyhow::bail!(
            "the sort is wrong at position {i}: key {} row {}",
            sorted[i],
            rows[i]
        ),
        None => Ok(()),
    }
}

/// PyTorch's sort times per key width, or why they are missing.
fn torch_points(a: &RadixSortArgs) -> Result<Value> {
    let args = [1u64 << a.rows_log2, a.reps as u64]
        .into_iter()
        .chain(a.key_bits.iter().map(|&b| b as u64))
        .map(|x| x.to_string());
    run_peer(&a.torch_python, "torch_sort.py", args, "PyTorch peer")
}

pub async fn radix_sort(a: RadixSortArgs) -> Result<()> {
    let gpu = Gpu::get()?;
    let sorter = RadixSort::new(&gpu)?;
    let n = 1usize << a.rows_log2;
    let torch = torch_points(&a).unwrap_or_else(|e| {
        eprintln!("PyTorch peer skipped: {e}");
        Value::Null
    });
    println!(
        "{}: radix sort of 2^{} (u32 key, u32 row id) pairs",
        gpu.info.name, a.rows_log2
    );
    println!(
        "{:>5} {:>7} {:>9} {:>10} {:>9} {:>8}",
        "bits", "passes", "ms", "Gpairs/s", "torch ms", "x torch"
    );
    let mut points = Vec::new();
    for &bits in &a.key_bits {
        let input = keys(n, bits);
        let t = sorter.time(&gpu, &input, a.reps)?;
        check(&input, &t.keys, &t.rows)?;
        let ms = median(t.ms.clone());
        let rate = n as f64 / (ms * 1e-3) / 1e9;
        let torch_ms = torch["points"][bits.to_string()].as_f64();
        println!(
            "{:>5} {:>7} {:>9.3} {:>10.2} {:>9} {:>8}",
            bits,
            t.passes,
            ms,
            rate,
            torch_ms.map_or("-".into(), |x| format!("{x:.3}")),
            torch_ms.map_or("-".into(), |x| format!("{:.2}", x / ms)),
        );
        points.push(json!({
            "key_bits": bits, "passes": t.passes, "ms": ms, "runs_ms": t.ms,
            "gpairs_per_s": rate, "torch_ms": torch_ms, "checked": true,
        }));
        // Written after every point, so a run cut short still leaves its results.
        write_json(
            &a.out,
            &json!({
                "benchmark": "radix-sort",
                "device": gpu.info.name,
                "commit": git_commit(),
                "command": std::env::args().collect::<Vec<_>>().join(" "),
                "what": "stable LSD radix sort of (u32 key, u32 row id) pairs, device-resident, CUDA events around histogram + read-back + passes",
                "pairs": n,
                "reps": a.reps,
                "compile_ms": sorter.compile_ms,
                "torch": torch.get("torch"),
                "points": points,
            }),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_finds_each_kind_of_wrong_sort() {
        let input = vec![3u32, 1, 3, 2];
        check(&input, &[1, 2, 3, 3], &[1, 3, 0, 2]).unwrap();
        // Unstable (equal keys' rows out of order), unsorted, a key not its row's, a row past
        // the end.
        assert!(check(&input, &[1, 2, 3, 3], &[1, 3, 2, 0]).is_err());
        assert!(check(&input, &[2, 1, 3, 3], &[3, 1, 0, 2]).is_err());
        assert!(check(&input, &[1, 2, 3, 3], &[1, 3, 0, 0]).is_err());
        assert!(check(&input, &[1, 2, 3, 3], &[1, 3, 0, 9]).is_err());
    }

    #[test]
    fn keys_stay_below_their_width() {
        assert!(keys(1000, 8).iter().all(|&k| k < 256));
        assert!(keys(1000, 32).iter().any(|&k| k > u16::MAX as u32));
    }
}
