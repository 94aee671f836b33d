//! Building a DataFusion `SessionContext` with grouper installed.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use grouper_core::planner::Overrides;
#[cfg(feature = "gpu")]
use grouper_gpu::GpuOptions;

pub use crate::config::worker_pool;
use crate::config::{Backend, Engine, KeptLog, LazyPool, Split};
use crate::profile_store;
use crate::rule::GrouperRule;
use crate::top_n::TopPerGroupRule;

/// Everything that shapes a grouper session.
#[derive(Debug, Clone, Default)]
pub struct GrouperConfig {
    /// Which engine aggregates.
    pub backend: Backend,
    /// CPU strategy, hash function and table parameters fixed by the user.
    pub overrides: Overrides,
    /// GPU strategy, kernel parameters, resident or batched.
    #[cfg(feature = "gpu")]
    pub gpu: GpuOptions,
    /// Worker threads (DataFusion partitions and grouper's pool); all cores when `None`.
    pub threads: Option<usize>,
    /// Memory budget of the session in bytes: grouper's aggregation state and DataFusion's
    /// operators (which spill where they can) draw from one pool; `None` is unbounded.
    pub memory_limit: Option<usize>,
    /// Plan from the rules alone, ignoring this machine's device profiles (`grouper
    /// calibrate`); by default a profile, where one is stored, decides before the rules.
    pub no_profile: bool,
    /// Co-processing (`--backend hybrid`): how the chunks divide between the GPU and the CPU
    /// (by their measured speeds, unless a static share is asked for).
    pub hybrid_split: Split,
    /// grouper's worker pool, to share between sessions (its size then stands for `threads`);
    /// each session makes its own when `None`. Sessions compared against each other share
    /// one: on a 16-vCPU host, identical plans in sessions with pools of their own ran
    /// 20–37% apart at best of 20 runs, each pool keeping the thread placement it started with.
    pub pool: Option<Arc<rayon::ThreadPool>>,
    /// `auto` replaces every aggregation grouper handles, never leaving one to DataFusion's
    /// own where grouper's CPU would not beat it (see [`crate::harm`]): grouper's routes alone,
    /// for comparing them.
    pub grouper_only: bool,
    /// Plans for a distributed engine (datafusion-distributed): an aggregation over several
    /// partitions stays in two phases, partial groups on the workers and their merge after the
    /// shuffle ([`crate::merge::MergeExec`]), instead of grouper's one node.
    pub distributed: bool,
}

/// DataFusion batch size of GPU and hybrid sessions.
pub const GPU_BATCH_SIZE: usize = 1 << 16;

/// A `SessionContext` with grouper's defaults: the one-line adoption for DataFusion users.
pub fn grouper_context() -> SessionContext {
    session_context(&GrouperConfig::default()).unwrap_or_else(|_| SessionContext::new())
}

/// A `SessionContext` configured by `config`; fails for backends this build cannot run.
pub fn session_context(config: &GrouperConfig) -> Result<SessionContext> {
    Ok(SessionContext::new_with_state(session_state(config)?).enable_url_table())
}

/// The session state behind [`session_context`]: its configuration, runtime (memory pool,
/// footer cache) and grouper's rules. A host that owns its own context plans with it instead
/// (the Python package, whose planner replaces datafusion-python's).
pub fn session_state(config: &GrouperConfig) -> Result<SessionState> {
    if matches!(config.backend, Backend::Gpu | Backend::Hybrid) {
        #[cfg(feature = "gpu")]
        crate::device_facts::open()
            .map_err(|e| DataFusionError::Plan(format!("--backend {}: {e}", config.backend)))?;
        #[cfg(not(feature = "gpu"))]
        return Err(DataFusionError::Plan(format!(
            "--backend {}: {}",
            config.backend,
            crate::backend::NO_GPU_FEATURE
        )));
    }
    let threads = config
        .pool
        .as_ref()
        .map(|p| p.current_num_threads())
        .or(config.threads)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let kept = Arc::new(KeptLog::default());
    let mut session = SessionConfig::new()
        .with_target_partitions(threads)
        .with_extension(Arc::clone(&kept));
    if matches!(config.backend, Backend::Gpu | Backend::Hybrid) {
        // DataFusion's 8192-row batches are far too small for the GPU path: an in-memory table
        // is re-sliced into them on every scan (600M rows: 73k batches, ~0.4 s of per-batch
        // work before the GPU starts). Larger batches keep a table's own batches whole.
        session = session.with_batch_size(GPU_BATCH_SIZE);
    }
    let mut builder = SessionStateBuilder::new()
        .with_config(session)
        .with_default_features();
    let runtime = match config.memory_limit {
        Some(limit) => RuntimeEnvBuilder::new().with_memory_limit(limit, 1.0),
        None => RuntimeEnvBuilder::new(),
    }
    .build_arc()?;
    // The footers DataFusion reads when it lists the files, which grouper's own readers share.
    let footers = runtime.cache_manager.get_file_metadata_cache();
    builder = builder.with_runtime_env(runtime);
    if config.backend != Backend::DataFusion {
        let pool = match &config.pool {
            Some(p) => LazyPool::started(Arc::clone(p)),
            None => LazyPool::new(threads),
        };
        let cpu_profile = (!config.no_profile)
            .then(|| profile_store::load(&profile_store::cpu_key(threads)))
            .flatten();
        let engine = Arc::new(Engine {
            backend: config.backend,
            overrides: Overrides {
                memory_budget: config.memory_limit.map(|l| l as u64),
                ..config.overrides
            },
            cpu_profile,
            #[cfg(feature = "gpu")]
            gpu: config.gpu.clone(),
            #[cfg(feature = "gpu")]
            gpu_profile: crate::config::LazyGpuProfile::new(
                !config.no_profile && config.backend != Backend::Cpu,
            ),
            hybrid_split: config.hybrid_split,
            pool,
            grouper_only: config.grouper_only,
            distributed: config.distributed,
            kept,
            footers,
        });
        // The engine is a session extension too: grouper's nodes that arrive serialised (a
        // distributed worker's, `crate::codec`) run with the engine of the session that reads
        // them.
        if let Some(session) = builder.config() {
            session.set_extension(Arc::clone(&engine));
        }
        builder = builder.with_physical_optimizer_rule(Arc::new(GrouperRule::new(engine)));
        if !config.distributed {
            // Its node has no codec: a distributed plan keeps DataFusion's window functions.
            builder = builder.with_physical_optimizer_rule(Arc::new(TopPerGroupRule));
        }
    }
    Ok(builder.build())
}
