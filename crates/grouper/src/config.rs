//! How a session's `GroupByExec` nodes run: which backend ([`Backend`]), how co-processing
//! divides its chunks ([`Split`]), and the [`Engine`] every node of a session shares (backend,
//! CPU overrides and profile, GPU options, worker pool).

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::execution::cache::cache_manager::FileMetadataCache;
use grouper_core::planner::Overrides;
use grouper_core::profile::Profile;
#[cfg(feature = "gpu")]
use grouper_gpu::GpuOptions;

/// Which engine aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The best engine for the query (see [`crate::backend::Route`]; `--explain` says why).
    #[default]
    Auto,
    /// grouper's CPU strategies.
    Cpu,
    /// grouper on an NVIDIA GPU; an error when there is none.
    Gpu,
    /// CPU workers and the GPU take chunks from one queue (co-processing); an error when there
    /// is no GPU.
    Hybrid,
    /// DataFusion's own aggregation: the built-in baseline.
    DataFusion,
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Backend::Auto,
            "cpu" => Backend::Cpu,
            "gpu" => Backend::Gpu,
            "hybrid" => Backend::Hybrid,
            "datafusion" => Backend::DataFusion,
            _ => {
                return Err(format!(
                    "unknown backend '{s}' (expected auto, cpu, gpu, hybrid or datafusion)"
                ))
            }
        })
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
            Backend::Hybrid => "hybrid",
            Backend::DataFusion => "datafusion",
        })
    }
}

/// How the chunks divide between the GPU and the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Split {
    /// Both take chunks from one queue, the CPU only while it would finish before the GPU.
    #[default]
    Dynamic,
    /// The CPU takes this share (0 to 1) of the chunks, the last ones, whatever the speeds;
    /// the GPU the others.
    Static(f64),
}

impl Split {
    /// A static CPU share from the user: a number from 0 to 1.
    pub fn cpu_share(share: f64) -> std::result::Result<Self, String> {
        if (0.0..=1.0).contains(&share) {
            Ok(Self::Static(share))
        } else {
            Err(format!(
                "a CPU share is a fraction from 0 to 1, not {share}"
            ))
        }
    }
}

impl std::str::FromStr for Split {
    type Err = String;

    /// A static CPU share, as the user writes it (`0.05`).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let share: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a number"))?;
        Self::cpu_share(share)
    }
}

/// How GroupByExec nodes of a session run: backend, CPU overrides, GPU options, thread pool.
#[derive(Debug)]
pub struct Engine {
    /// Which engine aggregates.
    pub backend: Backend,
    /// CPU strategy and table parameters fixed by the user.
    pub overrides: Overrides,
    /// This CPU's profile from `grouper calibrate`, if one is stored.
    pub cpu_profile: Option<Arc<Profile>>,
    /// GPU strategy, kernel parameters, resident or batched (a GPU run takes them from
    /// [`Engine::gpu_options`], with the device profile).
    #[cfg(feature = "gpu")]
    pub gpu: GpuOptions,
    /// The GPU's device profile, read when a GPU run first needs it.
    #[cfg(feature = "gpu")]
    pub gpu_profile: LazyGpuProfile,
    /// How co-processing divides the chunks.
    pub hybrid_split: Split,
    /// The CPU worker pool, started on first use.
    pub pool: LazyPool,
    /// `auto` never leaves an aggregation to DataFusion's own (see [`crate::harm`]).
    pub grouper_only: bool,
    /// Aggregations over several partitions are planned in two phases for a distributed
    /// engine (see [`crate::session::GrouperConfig::distributed`]).
    pub distributed: bool,
    /// The aggregations `auto` left to DataFusion, and why (for `--explain`).
    pub kept: Arc<KeptLog>,
    /// The session's cache of Parquet footers (DataFusion fills it as it lists the files):
    /// choosing a route reads the footers again (pruning, the GPU's page source) without
    /// parsing them again.
    pub footers: Arc<FileMetadataCache>,
}

#[cfg(feature = "gpu")]
impl Engine {
    /// The options of a GPU run: [`Engine::gpu`] with this device's profile unless one was
    /// given.
    pub fn gpu_options(&self) -> GpuOptions {
        let mut opts = self.gpu.clone();
        if opts.profile.is_none() {
            opts.profile = self.gpu_profile.get();
        }
        opts
    }
}

/// The GPU's device profile (`grouper calibrate`), read the first time a GPU run asks for it,
/// once the GPU it belongs to is started. Finding it earlier means loading the CUDA driver
/// library to check its version, ~4 ms of every `auto` process on a GPU machine (H100 host:
/// `auto` 30.1 ms against 25.2 ms for DataFusion alone on a 1000-row CSV, median of 25), also
/// for the queries DataFusion keeps.
#[cfg(feature = "gpu")]
#[derive(Debug, Default)]
pub struct LazyGpuProfile {
    wanted: bool,
    loaded: OnceLock<Option<Arc<Profile>>>,
}

#[cfg(feature = "gpu")]
impl LazyGpuProfile {
    /// A profile to look up on first use (`wanted`), or never.
    pub fn new(wanted: bool) -> Self {
        Self {
            wanted,
            loaded: OnceLock::new(),
        }
    }

    /// The profile stored for the started GPU, if one is wanted and stored.
    pub fn get(&self) -> Option<Arc<Profile>> {
        if !self.wanted {
            return None;
        }
        self.loaded
            .get_or_init(|| {
                let gpu = grouper_gpu::Gpu::get().ok()?;
                crate::profile_store::load(&crate::profile_store::gpu_key(&gpu.info))
            })
            .clone()
    }
}

/// grouper's CPU worker pool, started the first time a `GroupByExec` needs it: a session whose
/// aggregations all stay DataFusion's ([`crate::harm`]) starts no threads of grouper's.
#[derive(Debug)]
pub struct LazyPool {
    threads: usize,
    pool: OnceLock<Arc<rayon::ThreadPool>>,
}

impl LazyPool {
    /// A pool of `threads` threads, not started yet.
    pub fn new(threads: usize) -> Self {
        Self {
            threads,
            pool: OnceLock::new(),
        }
    }

    /// A pool already running (shared between sessions).
    pub fn started(pool: Arc<rayon::ThreadPool>) -> Self {
        Self {
            threads: pool.current_num_threads(),
            pool: OnceLock::from(pool),
        }
    }

    /// Threads of the pool.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The pool, started now if it was not.
    pub fn get(&self) -> Result<Arc<rayon::ThreadPool>, rayon::ThreadPoolBuildError> {
        if let Some(p) = self.pool.get() {
            return Ok(Arc::clone(p));
        }
        let p = worker_pool(self.threads)?;
        // Two first users at once: one pool is kept, the other dropped.
        Ok(Arc::clone(self.pool.get_or_init(|| p)))
    }
}

/// A worker pool of `threads` threads for grouper's CPU aggregation (one per session unless
/// [`crate::GrouperConfig::pool`] shares one).
pub fn worker_pool(
    threads: usize,
) -> std::result::Result<Arc<rayon::ThreadPool>, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("grouper-{i}"))
        .build()
        .map(Arc::new)
}

/// Aggregations `auto` left to DataFusion, and why, most recent last; a session keeps the
/// last [`KEPT_MAX`] (the rule runs once per planned query).
#[derive(Debug, Default)]
pub struct KeptLog(Mutex<VecDeque<String>>);

/// Entries a [`KeptLog`] holds.
pub const KEPT_MAX: usize = 64;

impl KeptLog {
    pub(crate) fn push(&self, entry: String) {
        if let Ok(mut log) = self.0.lock() {
            if log.len() == KEPT_MAX {
                log.pop_front();
            }
            log.push_back(entry);
        }
    }

    pub(crate) fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut log| log.drain(..).collect())
            .unwrap_or_default()
    }
}
