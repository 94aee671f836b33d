//! What a GPU run reports, for `--explain`, `--timing` and the benchmarks: the plan and why
//! ([`GpuReport`]), what the runtime tuner did ([`TuneReport`]), and the result columns with
//! the report ([`GpuOutput`]).

use std::fmt;

use arrow::array::ArrayRef;

use crate::compile::CacheHit;
use crate::strategy::{GpuConfig, GpuStrategy};
use grouper_core::tune::Step;

/// What happened, for `--explain`, `--timing` and benchmarks.
#[derive(Debug, Clone)]
pub struct GpuReport {
    /// Device name.
    pub device: String,
    /// Strategy run.
    pub strategy: GpuStrategy,
    /// Why it was chosen.
    pub reason: String,
    /// Key words per group (1 unless keys are wider than 64 bits).
    pub key_words: usize,
    /// Key domain of the first word.
    pub domain: u64,
    /// Estimated groups.
    pub est_groups: u64,
    /// The estimate, its source, and the planned table's size against the device's shared
    /// memory per block, L2 and free memory (read when the query was planned).
    pub estimate: String,
    /// Groups found.
    pub groups: u64,
    /// Times the global table grew.
    pub grows: u32,
    /// Launch shape.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block.
    pub shared_bytes: u64,
    /// Copies of a block's shared table (`perfect_shared`, `block_local`), or the key ranges
    /// of a partitioned fold (0 where the placement has neither).
    pub copies: u32,
    /// NVRTC compile and module load, ms.
    pub compile_ms: f64,
    /// Which cache served the kernels.
    pub cache: CacheHit,
    /// Host-to-device copies, ms (in `prepare` for resident runs).
    pub upload_ms: f64,
    /// How chunks reached the kernel (see [`crate::GpuOptions::transfer`]).
    pub transfer: &'static str,
    /// Bytes per row the kernel's columns take as they are (dictionary keys as 32-bit codes).
    pub raw_bytes_per_row: f64,
    /// Bytes per row sent (after transfer compression; validity bits included).
    pub sent_bytes_per_row: f64,
    /// Per column read, its transfer encoding.
    pub encodings: Vec<String>,
    /// Whether the filter ran on the CPU (a selection bit per row was sent instead).
    pub cpu_filter: bool,
    /// Whether chunks were made as the scan delivered its batches (not collected first).
    pub from_scan: bool,
    /// Chunks and rows per chunk.
    pub chunks: usize,
    /// Rows per chunk (after the memory budget).
    pub batch_rows: usize,
    /// Host preparation (keys, codes, encoding), ms; 0 when served by the cache.
    pub prepare_ms: f64,
    /// Whether the prepared input came from the cache.
    pub cached: bool,
    /// Kernels of the last run, ms (CUDA events).
    pub kernel_ms: f64,
    /// Wall clock of the last run, ms.
    pub total_ms: f64,
    /// Rows of the input.
    pub rows: u64,
    /// Rows the GPU aggregated in the last run (all, unless co-processing split them).
    pub rows_run: u64,
    /// What the runtime tuner did (across this query's runs so far), if it ran.
    pub tuning: Option<TuneReport>,
    /// Strategy switches between chunks in the last run, when the groups seen outgrew the
    /// plan (each says after which chunk, from what to what, and why).
    pub switches: Vec<String>,
}

/// Result columns (keys, then aggregates) and the report.
#[derive(Debug)]
pub struct GpuOutput {
    /// Keys then aggregates.
    pub columns: Vec<ArrayRef>,
    /// Result groups.
    pub num_rows: usize,
    /// What happened.
    pub report: GpuReport,
}

/// What the tuner did, for `--explain`, reports and benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneReport {
    /// The shapes it started from (the planner's first).
    pub starts: Vec<GpuConfig>,
    /// Every shape measured, in order, with its time per row.
    pub steps: Vec<Step<GpuStrategy>>,
    /// The fastest shape measured and its time per row (ms).
    pub best: Option<(GpuConfig, f64)>,
    /// Whether the search is over.
    pub converged: bool,
    /// Whether shapes were timed in pairs with their reference because the table kept
    /// growing (chunk times drift as it fills).
    pub paired: bool,
    /// Chunks run since the tuner was made, and of those the ones that measured a shape.
    pub batches: (u64, u64),
    /// Kernel time of the chunks that measured a shape, ms.
    pub search_ms: f64,
    /// Time spent deciding, ms.
    pub decision_ms: f64,
    /// Time spent compiling shapes beyond the planner's, ms.
    pub compile_ms: f64,
    /// Shapes of the space (per strategy).
    pub space: usize,
}

impl fmt::Display for TuneReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let starts: Vec<String> = self.starts.iter().map(|c| c.to_string()).collect();
        write!(
            f,
            "tuner (Rosenfeld Alg. 1, shapes blocks/SM x threads x items): from {}; {} of {} shapes measured over {} of {} chunks",
            starts.join(", "),
            self.steps.len(),
            self.space * self.starts.len(),
            self.batches.1,
            self.batches.0
        )?;
        if let Some((best, t)) = &self.best {
            let first = self.steps.first().map_or(*t, |s| s.time);
            write!(
                f,
                "; best {best} at {:.3} ns/row ({:.2}x the planner's shape)",
                t * 1e6,
                t / first
            )?;
        }
        if self.paired {
            write!(
                f,
                "; while the table grew (chunk times drift as it fills), shapes were timed between chunks of the shape they were compared with"
            )?;
        }
        write!(
            f,
            "; {}; deciding took {:.3} ms, compiling {:.0} ms",
            if self.converged {
                "converged"
            } else {
                "still searching (continues in the next run of this query)"
            },
            self.decision_ms,
            self.compile_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grouper_core::tune::Config;

    #[test]
    fn explain_says_where_the_search_started_and_what_it_found() {
        let c = |strategy, blocks_per_sm, threads| Config {
            strategy,
            blocks_per_sm,
            threads,
            items: 4,
        };
        let planned = c(GpuStrategy::BLOCK_LOCAL, 4, 256);
        let found = c(GpuStrategy::BLOCK_LOCAL, 8, 128);
        let step = |config, time| Step {
            config,
            time,
            batches: 3,
            reference: None,
        };
        let r = TuneReport {
            starts: vec![planned, c(GpuStrategy::GLOBAL, 8, 256)],
            steps: vec![step(planned, 2e-6), step(found, 1e-6)],
            best: Some((found, 1e-6)),
            converged: true,
            paired: false,
            batches: (32, 6),
            search_ms: 1.0,
            decision_ms: 0.01,
            compile_ms: 120.0,
            space: 120,
        };
        let text = r.to_string();
        assert!(!text.contains("table grew"), "{text}");
        let paired = TuneReport {
            paired: true,
            ..r.clone()
        }
        .to_string();
        assert!(paired.contains("while the table grew"), "{paired}");
        for part in [
            "from block_local 4x256x4, global 8x256x4",
            "2 of 240 shapes measured over 6 of 32 chunks",
            "best block_local 8x128x4 at 1.000 ns/row (0.50x the planner's shape)",
            "converged",
            "compiling 120 ms",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
    }
}
