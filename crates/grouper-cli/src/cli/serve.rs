//! `grouper serve`: the Flight SQL server (crate `grouper-flight`) on an address, over one
//! session with the tables given, until Ctrl-C (or SIGTERM) asks it to stop.

use std::io::Write;

use anyhow::{Context, Result};
use clap::Args;
use grouper_flight::{FlightSql, Options};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;

use super::EngineArgs;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on, HOST:PORT (port 0: any free one; the address taken is printed).
    /// Other machines reach it only if HOST is theirs to reach, e.g. 0.0.0.0.
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub listen: String,
    /// Register a table: NAME=PATH (a file, a directory or a glob; format from the extension).
    /// Clients may add more with SQL (CREATE TABLE ... AS, CREATE EXTERNAL TABLE).
    #[arg(long = "table", value_name = "NAME=PATH")]
    pub tables: Vec<String>,
    /// Statements planned or run at once (each uses every core, and the GPU).
    #[arg(long, default_value_t = Options::default().concurrency)]
    pub concurrency: usize,
    /// Statements that may wait for a slot; past this, clients are told the server is busy.
    #[arg(long, default_value_t = Options::default().queue)]
    pub queue: usize,
    /// Clients must send 'authorization: Bearer TOKEN' (ADBC: the option
    /// adbc.flight.sql.authorization_header). Best given in GROUPER_TOKEN, which other users
    /// cannot read from the process list.
    #[arg(long, env = "GROUPER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Serves until Ctrl-C or SIGTERM, then lets running queries finish (a second Ctrl-C ends the
/// process at once).
pub fn run(args: ServeArgs, rt: &Runtime) -> Result<()> {
    let ctx = grouper::session_context(&args.engine.config())?;
    rt.block_on(async {
        grouper_shell::tables::register_tables(&ctx, &args.tables).await?;
        let listener = TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        let options = Options {
            concurrency: args.concurrency,
            queue: args.queue,
            token: args.token.clone().filter(|t| !t.is_empty()),
        };
        let service = FlightSql::new(ctx, &options)?;
        println!(
            "grouper serve: Flight SQL at grpc://{addr}; {} table(s); GROUP BY on {}; {}. Ctrl-C stops.",
            args.tables.len(),
            super::shell::engine(&args.engine),
            match options.token {
                Some(_) => "clients need the token",
                None => "no token",
            }
        );
        if options.token.is_none() && !addr.ip().is_loopback() {
            eprintln!("warning: no --token, and {addr} is reachable from other machines: anyone who reaches it can read every table this process can");
        }
        std::io::stdout().flush()?;
        let watched = service.clone();
        let shutdown = async move {
            stop_asked().await;
            match watched.running() {
                0 => eprintln!("grouper serve: shutting down"),
                1 => eprintln!("grouper serve: shutting down once the running query ends (Ctrl-C again stops at once)"),
                n => eprintln!("grouper serve: shutting down once the {n} running queries end (Ctrl-C again stops at once)"),
            }
            tokio::spawn(async {
                if tokio::signal::ctrl_c().await.is_ok() {
                    eprintln!("error: interrupted");
                    std::process::exit(130);
                }
            });
        };
        grouper_flight::serve(service, listener, &options, shutdown).await?;
        eprintln!("grouper serve: stopped");
        Ok(())
    })
}

/// Resolves at Ctrl-C or SIGTERM (a service manager's stop).
pub(super) async fn stop_asked() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let term = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
