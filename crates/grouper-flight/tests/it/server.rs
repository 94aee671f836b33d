//! The server through Flight's own gRPC client, one call at a time, where a test must see what
//! a client sees: status codes, cancellation (by `CancelFlightInfo`, by a client that goes away)
//! with the CPU idle afterwards, the queue's bound, the token, prepared statements that see
//! tables made after them, the catalog, and a shutdown that lets a running query finish.
//! (Many clients at once from Python's ADBC driver: grouper-cli's `serve` test.)

use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any,
    CommandGetSqlInfo, CommandGetTables, CommandPreparedStatementQuery, CommandStatementQuery,
    ProstMessageExt,
};
use arrow_flight::{
    Action, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, FlightDescriptor,
    FlightInfo,
};
use futures::TryStreamExt;
use grouper::{Backend, GrouperConfig};
use grouper_flight::{FlightSql, Options};
use prost::Message;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// A grouper aggregation that runs for minutes: cancelled, it must stop.
const ENDLESS: &str = "SELECT k, count(*) AS n FROM \
    (SELECT value % 1000 AS k FROM generate_series(1, 10000000000)) GROUP BY k";

/// One test at a time: the cancellation checks measure this process's CPU, which another
/// test's query would use.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A server on a free port, in this process.
struct Server {
    uri: String,
    service: FlightSql,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<anyhow::Result<()>>,
    token: Option<String>,
}

async fn start(options: Options) -> Server {
    // grouper's own CPU operator for every aggregation (`auto` may leave one to DataFusion's).
    let config = GrouperConfig {
        backend: Backend::Cpu,
        threads: Some(2),
        grouper_only: true,
        ..Default::default()
    };
    let ctx = grouper::session_context(&config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    let service = FlightSql::new(ctx, &options).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let token = options.token.clone();
    let done = tokio::spawn({
        let service = service.clone();
        async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            grouper_flight::serve(service, listener, &options, shutdown).await
        }
    });
    Server {
        uri,
        service,
        stop: Some(stop),
        done,
        token,
    }
}

/// A connection to `uri`.
async fn connect(uri: &str) -> Result<Channel, tonic::transport::Error> {
    Channel::from_shared(uri.to_string())
        .unwrap()
        .connect()
        .await
}

/// A client of `server`, sending its token.
struct Client {
    flight: FlightServiceClient<Channel>,
    token: Option<String>,
}

impl Client {
    async fn of(server: &Server) -> Client {
        Client {
            flight: FlightServiceClient::new(connect(&server.uri).await.unwrap()),
            token: server.token.clone(),
        }
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut r = Request::new(message);
        if let Some(t) = &self.token {
            r.metadata_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        r
    }

    async fn info(&mut self, command: impl ProstMessageExt) -> Result<FlightInfo, Status> {
        let descriptor = FlightDescriptor::new_cmd(command.as_any().encode_to_vec());
        let r = self.request(descriptor);
        Ok(self.flight.get_flight_info(r).await?.into_inner())
    }

    async fn plan(&mut self, sql: &str) -> Result<FlightInfo, Status> {
        self.info(CommandStatementQuery {
            query: sql.into(),
            transaction_id: None,
        })
        .await
    }

    async fn fetch(&mut self, info: &FlightInfo) -> Result<Vec<RecordBatch>, Status> {
        let ticket = info.endpoint[0].ticket.clone().unwrap();
        let r = self.request(ticket);
        let data = self.flight.do_get(r).await?.into_inner();
        FlightRecordBatchStream::new_from_flight_data(data.map_err(FlightError::from))
            .try_collect()
            .await
            .map_err(Status::from)
    }

    async fn sql(&mut self, sql: &str) -> Result<Vec<RecordBatch>, Status> {
        let info = self.plan(sql).await?;
        self.fetch(&info).await
    }

    async fn action(&mut self, kind: &str, body: Vec<u8>) -> Result<Vec<u8>, Status> {
        let r = self.request(Action::new(kind, body));
        let mut results = self.flight.do_action(r).await?.into_inner();
        let first = results.message().await?.unwrap_or_default();
        Ok(first.body.to_vec())
    }

    async fn cancel(&mut self, info: &FlightInfo) -> CancelStatus {
        let body = CancelFlightInfoRequest::new(info.clone()).encode_to_vec();
        let result = self.action("CancelFlightInfo", body).await.unwrap();
        CancelFlightInfoResult::decode(result.as_slice())
            .unwrap()
            .status()
    }
}

/// The one column `name` of `batches`, as i64s (from any integer type).
fn ints(batches: &[RecordBatch], name: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for b in batches {
        let c = b.column_by_name(name).unwrap();
        if let Some(a) = c.as_any().downcast_ref::<Int64Array>() {
            out.extend(a.iter().map(Option::unwrap));
        } else {
            let a = c.as_any().downcast_ref::<UInt64Array>().unwrap();
            out.extend(a.iter().map(|v| v.unwrap() as i64));
        }
    }
    out
}

/// Seconds of CPU this process has used (user and system; /proc/self/stat in clock ticks).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// Waits up to 10 s for `done`.
async fn until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "waited 10 s for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// After a cancel: nothing running, no slot held, and the CPU idle (grouper's workers stopped).
async fn stopped(server: &Server) {
    until("the query to leave", || {
        server.service.running() == 0 && server.service.admitted() == 0
    })
    .await;
    let before = cpu_seconds();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let used = cpu_seconds() - before;
    assert!(used < 0.3, "{used:.2} s of CPU in 1.5 s after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_answers_and_cancels_by_request_or_by_a_client_gone() {
    let _serial = SERIAL.lock().await;
    let server = start(Options::default()).await;
    let mut c = Client::of(&server).await;
    let b = c
        .sql("SELECT value % 3 AS k, count(*) AS n FROM generate_series(1, 30000) GROUP BY k ORDER BY k")
        .await
        .unwrap();
    assert_eq!(ints(&b, "k"), [0, 1, 2]);
    assert_eq!(ints(&b, "n"), [10000, 10000, 10000]);

    // CancelFlightInfo on a running query: its stream ends with CANCELLED.
    let info = c.plan(ENDLESS).await.unwrap();
    let mut reader = Client::of(&server).await;
    let run = tokio::spawn({
        let info = info.clone();
        async move { reader.fetch(&info).await }
    });
    until("the query to run", || server.service.running() == 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(c.cancel(&info).await, CancelStatus::Cancelled);
    let status = run.await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    stopped(&server).await;
    // Its ticket is spent: cancelling again finds nothing, fetching fails.
    assert_eq!(c.cancel(&info).await, CancelStatus::NotCancellable);
    assert_eq!(c.fetch(&info).await.unwrap_err().code(), Code::NotFound);

    // A planned query cancelled before its DoGet never runs.
    let info = c.plan(ENDLESS).await.unwrap();
    assert_eq!(c.cancel(&info).await, CancelStatus::Cancelled);
    assert_eq!(c.fetch(&info).await.unwrap_err().code(), Code::NotFound);

    // A client that goes away (its stream dropped) takes its query with it.
    let info = c.plan(ENDLESS).await.unwrap();
    let mut reader = Client::of(&server).await;
    let run = tokio::spawn(async move { reader.fetch(&info).await });
    until("the query to run", || server.service.running() == 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    run.abort();
    stopped(&server).await;

    // The server goes on.
    assert_eq!(ints(&c.sql("SELECT 41 + 1 AS x").await.unwrap(), "x"), [42]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_queue_a_client_is_told_the_server_is_busy() {
    let _serial = SERIAL.lock().await;
    let server = start(Options {
        concurrency: 1,
        queue: 0,
        token: None,
    })
    .await;
    let mut c = Client::of(&server).await;
    let info = c.plan(ENDLESS).await.unwrap();
    let mut reader = Client::of(&server).await;
    let run = tokio::spawn({
        let info = info.clone();
        async move { reader.fetch(&info).await }
    });
    until("the query to hold the slot", || {
        server.service.admitted() == 1
    })
    .await;
    let busy = c.plan("SELECT 1").await.unwrap_err();
    assert_eq!(busy.code(), Code::ResourceExhausted, "{busy:?}");
    assert!(busy.message().contains("busy"), "{busy:?}");
    assert_eq!(c.cancel(&info).await, CancelStatus::Cancelled);
    assert_eq!(run.await.unwrap().unwrap_err().code(), Code::Cancelled);
    until("the slot to free", || server.service.admitted() == 0).await;
    assert_eq!(ints(&c.sql("SELECT 1 AS one").await.unwrap(), "one"), [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_statements_are_clear_errors_and_the_token_is_required() {
    let _serial = SERIAL.lock().await;
    let server = start(Options {
        token: Some("s3cret".into()),
        ..Options::default()
    })
    .await;
    let mut c = Client::of(&server).await;
    for (sql, code, says) in [
        ("SELEC 1", Code::InvalidArgument, "SELEC"),
        ("SELECT * FROM nowhere", Code::InvalidArgument, "nowhere"),
        (
            "SELECT * FROM '/no/such/file.parquet'",
            Code::InvalidArgument,
            "no file matches",
        ),
    ] {
        let e = c.plan(sql).await.unwrap_err();
        assert_eq!(e.code(), code, "{sql}: {e:?}");
        assert!(
            e.message().contains(says) && !e.message().contains('\n'),
            "{e:?}"
        );
    }
    // An error while the query runs reaches the client through its stream.
    let e = c
        .sql("SELECT k, sum(v) / 0 AS s FROM (SELECT value % 3 AS k, value AS v FROM generate_series(1, 100)) GROUP BY k")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("Divide by zero"), "{e:?}");

    let mut stranger = Client::of(&server).await;
    stranger.token = None;
    assert_eq!(
        stranger.plan("SELECT 1").await.unwrap_err().code(),
        Code::Unauthenticated
    );
    stranger.token = Some("s3cre".into());
    assert_eq!(
        stranger.plan("SELECT 1").await.unwrap_err().code(),
        Code::Unauthenticated
    );
    assert_eq!(ints(&c.sql("SELECT 7 AS x").await.unwrap(), "x"), [7]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_see_tables_made_after_them_and_the_catalog_lists_them() {
    let _serial = SERIAL.lock().await;
    let server = start(Options::default()).await;
    let mut c = Client::of(&server).await;
    c.sql("CREATE TABLE t AS SELECT value AS v FROM generate_series(1, 10)")
        .await
        .unwrap();
    let request = ActionCreatePreparedStatementRequest {
        query: "SELECT count(*) AS n, sum(v) AS s FROM t".into(),
        transaction_id: None,
    };
    let result = c
        .action("CreatePreparedStatement", request.as_any().encode_to_vec())
        .await
        .unwrap();
    let prepared: ActionCreatePreparedStatementResult = Any::decode(result.as_slice())
        .unwrap()
        .unpack()
        .unwrap()
        .unwrap();
    let query = CommandPreparedStatementQuery {
        prepared_statement_handle: prepared.prepared_statement_handle,
    };
    let info = c.info(query.clone()).await.unwrap();
    assert_eq!(ints(&c.fetch(&info).await.unwrap(), "s"), [55]);
    c.sql("CREATE OR REPLACE TABLE t AS SELECT value AS v FROM generate_series(1, 100)")
        .await
        .unwrap();
    let info = c.info(query).await.unwrap();
    assert_eq!(ints(&c.fetch(&info).await.unwrap(), "s"), [5050]);

    // GetTables with schemas: t, with its column.
    let tables = CommandGetTables {
        include_schema: true,
        table_name_filter_pattern: Some("t".into()),
        ..Default::default()
    };
    let info = c.info(tables).await.unwrap();
    let batches = c.fetch(&info).await.unwrap();
    let names = batches[0]
        .column_by_name("table_name")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .clone();
    assert_eq!(names.iter().collect::<Vec<_>>(), [Some("t")]);
    let schema = batches[0].column_by_name("table_schema").unwrap();
    assert_eq!(schema.len(), 1);
    // GetSqlInfo: the server's name.
    let info = c
        .info(CommandGetSqlInfo {
            info: vec![arrow_flight::sql::SqlInfo::FlightSqlServerName as u32],
        })
        .await
        .unwrap();
    let batches = c.fetch(&info).await.unwrap();
    assert_eq!(batches[0].num_rows(), 1);
    let shown = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    assert!(shown.contains("grouper"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_lets_the_running_query_finish_then_ends() {
    let _serial = SERIAL.lock().await;
    let mut server = start(Options::default()).await;
    let mut c = Client::of(&server).await;
    let info = c
        .plan("SELECT value % 7 AS k, count(*) AS n FROM generate_series(1, 30000000) GROUP BY k ORDER BY k")
        .await
        .unwrap();
    let run = tokio::spawn(async move { c.fetch(&info).await });
    until("the query to run", || server.service.running() == 1).await;
    let _ = server.stop.take().unwrap().send(());
    let batches = run.await.unwrap().unwrap();
    assert_eq!(ints(&batches, "n").iter().sum::<i64>(), 30_000_000);
    tokio::time::timeout(Duration::from_secs(10), &mut server.done)
        .await
        .expect("the server ends once its calls have")
        .unwrap()
        .unwrap();
    assert!(connect(&server.uri).await.is_err());
}
