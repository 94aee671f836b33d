//! `grouper worker`: a datafusion-distributed worker with grouper's engine (crate
//! `grouper-distributed`), until Ctrl-C (or SIGTERM). A coordinator (`grouper query
//! --workers`) sends it stages of its plans; it aggregates its share of the files with
//! grouper's strategies, on its GPU where it has one.

use std::io::Write;

use anyhow::{Context, Result};
use clap::Args;
use tokio::net::TcpListener;
use tokio::runtime::Runtime;

use super::EngineArgs;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Address to listen on, HOST:PORT (port 0: any free one; the address taken is printed).
    /// Workers have no authentication: keep them on a private network.
    #[arg(long, default_value = "127.0.0.1:50061")]
    pub listen: String,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Serves tasks until Ctrl-C or SIGTERM.
pub fn run(args: WorkerArgs, rt: &Runtime) -> Result<()> {
    let worker = grouper_distributed::worker(&args.engine.config())?;
    rt.block_on(async {
        let listener = TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        println!(
            "grouper worker: at http://{addr}; GROUP BY on {}. Ctrl-C stops.",
            super::shell::engine(&args.engine)
        );
        std::io::stdout().flush()?;
        grouper_distributed::serve(worker, listener, super::serve::stop_asked()).await?;
        eprintln!("grouper worker: stopped");
        Ok(())
    })
}
