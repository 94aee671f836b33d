//! grouper's Arrow Flight SQL server (`grouper serve`): one long-lived DataFusion session with
//! grouper installed, queried by any Flight SQL client (ADBC, JDBC, pyarrow, BI tools). Tables
//! registered at start or created with SQL stay in memory across queries and clients, and with
//! them the GPU's prepared inputs: the warm speed that a one-shot `grouper query` cannot reach.
//!
//! How a query travels (the Flight SQL protocol, and where grouper's choices sit in it):
//! - `GetFlightInfo` plans the SQL (DDL such as `CREATE TABLE ... AS` runs here) and keeps the
//!   physical plan under a one-use ticket; the answer carries the plan's exact schema, which the
//!   result stream then has too (clients such as ADBC check that they agree).
//! - `DoGet` runs the plan and streams its batches as they come. A client that goes away drops
//!   the stream, and with it the query (grouper's CPU workers abort on drop).
//! - Prepared statements keep their SQL and plan it again at each execution, so a table created
//!   or replaced in between is seen.
//! - At most `concurrency` statements plan or run at once ([`admission`]); the rest wait in a
//!   queue of at most `queue`, and a client past that is told the server is busy.
//! - `CancelFlightInfo` (and Flight SQL's older `CancelQuery`) stop a planned or running query.
//! - With a token, every call must carry `authorization: Bearer <token>` ([`auth`]).

pub mod admission;
mod auth;
mod catalog;
mod errors;
mod service;
mod statements;

use std::future::Future;

use anyhow::{Context, Result};
use arrow_flight::flight_service_server::FlightServiceServer;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;

pub use service::FlightSql;

/// How the server admits and authenticates clients.
#[derive(Debug, Clone)]
pub struct Options {
    /// Statements planned or run at once; more wait in the queue.
    pub concurrency: usize,
    /// Statements that may wait for a slot; a client past this is told the server is busy.
    pub queue: usize,
    /// The bearer token every call must carry; `None` lets any client in.
    pub token: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            concurrency: 4,
            queue: 256,
            token: None,
        }
    }
}

/// Serves `service` (made by the caller, who may then watch it: [`FlightSql::running`]) on
/// `listener` until `shutdown` resolves, then stops taking calls and returns once the calls under
/// way (a running query's stream among them) have ended.
pub async fn serve(
    service: FlightSql,
    listener: TcpListener,
    options: &Options,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let flight =
        FlightServiceServer::with_interceptor(service, auth::Bearer::new(options.token.as_deref()));
    tonic::transport::Server::builder()
        .add_service(flight)
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await
        .context("the Flight SQL server failed")
}

/// The listener's connections, each without Nagle's delay: a small answer (a FlightInfo, a
/// one-row result) would otherwise wait for the client's delayed acknowledgement, 40 ms a call
/// on Linux, which made `SELECT 1` take 44 ms.
fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}
