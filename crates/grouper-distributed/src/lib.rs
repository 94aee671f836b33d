//! grouper on a distributed DataFusion engine: [datafusion-distributed], chosen over Ballista
//! (`docs/ARCHITECTURE.md` says why).
//!
//! ```text
//!  coordinator: grouper's session, planning in two phases (GrouperConfig::distributed)
//!               + datafusion-distributed's planner, which cuts stages at the shuffles
//!    ┌──────────────────────────┐        ┌──────────────────────────────────────────────┐
//!    │ MergeExec (per partition) │ ◀──── │ NetworkShuffle ◀─ RepartitionExec Hash(keys) │
//!    └──────────────────────────┘        │   ◀─ GroupByExec, partial phase  (workers:    │
//!                                        │      grouper's CPU strategies, or the GPU)    │
//!                                        └──────────────────────────────────────────────┘
//! ```
//!
//! The plan reaches the workers serialised: grouper's nodes through [`GroupByCodec`], rebuilt
//! there with each worker's own engine (its GPU, its threads). Several GPUs in one host are
//! several workers, one per GPU (`CUDA_VISIBLE_DEVICES`).
//!
//! [datafusion-distributed]: https://github.com/datafusion-contrib/datafusion-distributed

use std::future::Future;
use std::sync::Arc;

use anyhow::{Context, Result};
use datafusion::error::DataFusionError;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion_distributed::{
    DistributedExt, SessionStateBuilderExt, WorkerQueryContext, WorkerResolver,
};
use grouper::codec::GroupByCodec;
use grouper::config::Engine;
use grouper::GrouperConfig;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use url::Url;

pub use datafusion_distributed::{display_plan_ascii, Worker};

/// The workers a coordinator sends tasks to: a fixed list.
#[derive(Clone)]
struct Workers(Vec<Url>);

impl WorkerResolver for Workers {
    fn get_urls(&self) -> std::result::Result<Vec<Url>, DataFusionError> {
        Ok(self.0.clone())
    }
}

/// A coordinator's session: grouper's, with aggregations planned in two phases, and
/// datafusion-distributed's planner sending stages to `workers`. `bytes_per_task`: how much
/// of a file scan one task reads (datafusion-distributed's default, 16 MiB, when `None`).
pub fn coordinator(
    config: &GrouperConfig,
    workers: Vec<Url>,
    bytes_per_task: Option<usize>,
) -> Result<SessionState> {
    anyhow::ensure!(!workers.is_empty(), "no workers given");
    let state = grouper::session::session_state(&GrouperConfig {
        distributed: true,
        ..config.clone()
    })?;
    let mut builder = SessionStateBuilder::new_from_existing(state)
        .with_distributed_planner()
        .with_distributed_worker_resolver(Workers(workers))
        .with_distributed_user_codec(GroupByCodec);
    if let Some(bytes) = bytes_per_task {
        builder = builder.with_distributed_file_scan_config_bytes_per_partition(bytes)?;
    }
    Ok(builder.build())
}

/// A worker that runs the tasks it is sent with grouper's engine under `config` (its backend,
/// threads and GPU options), one engine for all its queries.
pub fn worker(config: &GrouperConfig) -> Result<Worker> {
    let state = grouper::session::session_state(config)?;
    let engine: Option<Arc<Engine>> = state.config().get_extension::<Engine>();
    Ok(Worker::from_session_builder(
        move |ctx: WorkerQueryContext| {
            let engine = engine.clone();
            async move {
                let mut builder = ctx.builder;
                if let (Some(session), Some(engine)) = (builder.config(), engine) {
                    session.set_extension(engine);
                }
                Ok(builder.with_distributed_user_codec(GroupByCodec).build())
            }
        },
    ))
}

/// Serves `worker` on `listener` until `shutdown` completes.
pub async fn serve(
    worker: Worker,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    tonic::transport::Server::builder()
        .add_service(worker.into_worker_server())
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
        .context("the worker's server failed")
}
