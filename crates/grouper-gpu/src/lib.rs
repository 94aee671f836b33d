//! # grouper-gpu
//!
//! grouper's GPU backend: aggregation kernels generated per query, compiled at run time with
//! NVRTC. cudarc loads the driver and NVRTC when a query first asks for the device, so this
//! crate builds without CUDA; without a GPU, [`Gpu::get`] says why and callers run on the CPU.
//!
//! ```text
//!  GpuQuery (filter, key columns, aggregate arguments as expr IR)
//!     │  keys: KeyCodec planned on the host (exact ranges, string dictionaries);
//!     │        keys wider than 64 bits split into several words (latched key compare)
//!     ▼
//!  strategy (Karnagel's regions, sized from the device's properties)
//!     perfect_registers  perfect_shared  perfect_global    direct index (Tomé §3.3–3.5, §4.1)
//!     block_local        thread_private  global            hash tables (Rosenfeld §2.2)
//!     perfect_sorted     sorted                            rows radix-sorted, runs merged
//!                                                          (Karnagel §5.2, sort + atomics)
//!     ▼
//!  codegen ─▶ NVRTC (sm_XY, cached) ─▶ agg_rows over resident columns or copied batches
//!     │  trap: rows that find the global table full are listed; the table grows and only
//!     │        those rows run again (Karnagel §2) — none lost, none counted twice
//!     ▼
//!  table read back ─▶ words become the CPU's aggregate states ─▶ the CPU's finalize
//! ```

pub mod atomics;
pub mod budget;
pub mod cache;
pub mod codegen;
pub mod compile;
pub mod device;
pub mod encode;
pub mod expr_cuda;
pub mod image;
mod key_words;
pub mod pages;
pub mod parquet;
pub mod pipeline;
mod placement;
mod plan;
pub mod prepare;
pub mod query;
mod readback;
mod replan;
pub mod report;
pub mod run;
pub mod sort;
pub mod strategy;
pub mod stream;
mod table;
mod trap;
mod tuning;
mod variant;
mod wide_keys;

pub use device::{gpu_required, installed_driver, DeviceInfo, Gpu, NO_DRIVER};
pub use prepare::Piece;
pub use query::{ColumnBounds, GpuOptions, GpuQuery};
pub use report::{GpuOutput, GpuReport, TuneReport};
pub use run::Prepared;
pub use strategy::{BucketMap, GpuConfig, GpuParams, GpuStrategy, Index, Placement, Probing};
pub use stream::Batches;
