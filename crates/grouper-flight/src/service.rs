//! The Flight SQL service: arrow-flight's `FlightSqlService` over one session (the crate's doc
//! says how a query travels through it).

use std::pin::Pin;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_flight::encode::{DictionaryHandling, FlightDataEncoderBuilder};
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::metadata::SqlInfoData;
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionCancelQueryRequest, ActionCancelQueryResult, ActionClosePreparedStatementRequest,
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, CommandGetCatalogs,
    CommandGetDbSchemas, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables,
    CommandPreparedStatementQuery, CommandPreparedStatementUpdate, CommandStatementQuery,
    CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt, SqlInfo,
    TicketStatementQuery,
};
use arrow_flight::{
    Action, ActionType, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, FlightData,
    FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, IpcMessage,
    SchemaAsIpc, Ticket,
};
use datafusion::arrow::array::{Array, UInt64Array};
use datafusion::arrow::ipc::writer::IpcWriteOptions;
use datafusion::physical_plan::{collect, execute_stream, ExecutionPlan};
use datafusion::prelude::SessionContext;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tonic::{Request, Response, Status, Streaming};

use crate::admission::{Admission, Slot};
use crate::statements::{from_bytes, to_bytes, Cancel, Id, Running, Statements};
use crate::{catalog, errors, Options};

/// Flight's action for cancelling a query (Flight SQL's `CancelQuery` is its older form).
const CANCEL_FLIGHT_INFO: &str = "CancelFlightInfo";
/// `ActionCancelQueryResult.CancelResult.CANCEL_RESULT_CANCELLED` (arrow-flight does not
/// export the enum).
const CANCEL_RESULT_CANCELLED: i32 = 1;

type DoGetStream = <FlightSql as FlightService>::DoGetStream;

/// grouper's Flight SQL service over one session. Clones share the session and its state.
#[derive(Clone)]
pub struct FlightSql {
    inner: Arc<Inner>,
}

struct Inner {
    ctx: SessionContext,
    admission: Admission,
    statements: Arc<Statements>,
    sql_info: SqlInfoData,
}

impl FlightSql {
    /// A service over `ctx` (tables already registered stay; clients may add more with SQL).
    pub fn new(ctx: SessionContext, options: &Options) -> anyhow::Result<FlightSql> {
        Ok(FlightSql {
            inner: Arc::new(Inner {
                ctx,
                admission: Admission::new(options.concurrency, options.queue),
                statements: Arc::new(Statements::default()),
                sql_info: catalog::sql_info()?,
            }),
        })
    }

    /// Queries streaming results (or waiting for a slot to) now.
    pub fn running(&self) -> usize {
        self.inner.statements.running()
    }

    /// Statements holding a slot now, planning or running.
    pub fn admitted(&self) -> usize {
        self.inner.admission.admitted()
    }

    /// Plans `sql` in a slot: DDL runs here, a query gets its physical plan.
    async fn plan(&self, sql: &str) -> Result<Arc<dyn ExecutionPlan>, Status> {
        let _slot = self.inner.admission.admit().await?;
        let df = self.inner.ctx.sql(sql).await.map_err(errors::planning)?;
        df.create_physical_plan().await.map_err(errors::datafusion)
    }

    /// Plans `sql` and answers where its result waits: a ticket for one `DoGet`.
    async fn flight_info(
        &self,
        sql: &str,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let plan = self.plan(sql).await?;
        let schema = plan.schema();
        let ticket = TicketStatementQuery {
            statement_handle: to_bytes(self.inner.statements.plan(plan)).into(),
        };
        info(ticket, &schema, descriptor)
    }

    /// Runs the query under `ticket`, streaming its batches.
    async fn run(&self, ticket: Id) -> Result<Response<DoGetStream>, Status> {
        let (plan, running) = self.inner.statements.start(ticket).ok_or_else(|| {
            Status::not_found(
                "no query under this ticket: it ran already, was cancelled, or waited too long",
            )
        })?;
        let slot = self.inner.admission.admit().await?;
        let schema = plan.schema();
        let batches = execute_stream(plan, self.inner.ctx.task_ctx())
            .map_err(errors::datafusion)?
            .map_err(|e| FlightError::Tonic(Box::new(errors::datafusion(e))));
        // Dictionaries are sent with the batches, so that the stream's schema is the plan's,
        // which the FlightInfo gave (hydrating them would change the column types).
        let data = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .with_dictionary_handling(DictionaryHandling::Resend)
            .build(batches)
            .map_err(Status::from);
        Ok(Response::new(Box::pin(until_cancelled(
            data, running, slot,
        ))))
    }

    /// Runs `sql` to its end; the rows a DML statement changed, or -1 (DDL and queries).
    async fn update(&self, sql: &str) -> Result<i64, Status> {
        let plan = self.plan(sql).await?;
        let _slot = self.inner.admission.admit().await?;
        let batches = collect(plan, self.inner.ctx.task_ctx())
            .await
            .map_err(errors::datafusion)?;
        Ok(changed_rows(&batches))
    }

    /// The SQL of the prepared statement `handle` names.
    fn prepared(&self, handle: &[u8]) -> Result<Arc<str>, Status> {
        from_bytes(handle)
            .and_then(|h| self.inner.statements.prepared(h))
            .ok_or_else(|| {
                Status::not_found(
                    "no prepared statement under this handle: it was closed, or the server restarted",
                )
            })
    }

    /// Cancels the queries whose tickets `info` holds.
    fn cancel(&self, info: &FlightInfo) -> Cancel {
        let mut found = Cancel::NotFound;
        for endpoint in &info.endpoint {
            let ticket = endpoint.ticket.as_ref().and_then(|t| ticket_id(&t.ticket));
            if let Some(t) = ticket {
                if self.inner.statements.cancel(t) == Cancel::Cancelled {
                    found = Cancel::Cancelled;
                }
            }
        }
        found
    }
}

/// The number in one of our tickets (a `TicketStatementQuery` in an `Any`).
fn ticket_id(bytes: &[u8]) -> Option<Id> {
    let any = arrow_flight::sql::Any::decode(bytes).ok()?;
    let ticket: TicketStatementQuery = any.unpack().ok()??;
    from_bytes(&ticket.statement_handle)
}

/// A FlightInfo with one endpoint whose ticket is `ticket`.
fn info(
    ticket: impl ProstMessageExt,
    schema: &arrow::datatypes::Schema,
    descriptor: FlightDescriptor,
) -> Result<Response<FlightInfo>, Status> {
    let endpoint = FlightEndpoint::new().with_ticket(Ticket::new(ticket.as_any().encode_to_vec()));
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(format!("cannot encode the result's schema: {e}")))?
        .with_endpoint(endpoint)
        .with_descriptor(descriptor);
    Ok(Response::new(info))
}

/// One metadata batch as a `DoGet` stream.
fn one_batch(batch: Result<RecordBatch, Status>) -> Result<Response<DoGetStream>, Status> {
    let batch = batch?;
    let schema: SchemaRef = batch.schema();
    let data = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(futures::stream::once(async { Ok(batch) }))
        .map_err(Status::from);
    Ok(Response::new(Box::pin(data)))
}

/// `data` until it ends or its query is cancelled (then one `Cancelled` status ends it). The
/// query's slot and registry entry go with the stream, when it ends or the client drops it.
fn until_cancelled(
    data: impl Stream<Item = Result<FlightData, Status>> + Send + 'static,
    running: Running,
    slot: Slot,
) -> impl Stream<Item = Result<FlightData, Status>> + Send + 'static {
    let data: Pin<Box<dyn Stream<Item = _> + Send>> = Box::pin(data);
    futures::stream::unfold(Some((data, running, slot)), |state| async move {
        let (mut data, mut running, slot) = state?;
        tokio::select! {
            biased;
            _ = &mut running.cancelled => {
                Some((Err(Status::cancelled("the query was cancelled")), None))
            }
            item = data.next() => item.map(|item| (item, Some((data, running, slot)))),
        }
    })
}

/// The rows a DML statement reports changing (its one `count` column), or -1.
fn changed_rows(batches: &[RecordBatch]) -> i64 {
    let counts: Option<u64> = batches
        .iter()
        .map(
            |b| match (b.num_columns(), b.schema().field(0).name().as_str()) {
                (1, "count") => b
                    .column(0)
                    .as_any()
                    .downcast_ref::<UInt64Array>()
                    .map(|c| c.iter().flatten().sum::<u64>()),
                _ => None,
            },
        )
        .sum();
    match (batches.is_empty(), counts) {
        (false, Some(n)) => i64::try_from(n).unwrap_or(i64::MAX),
        _ => -1,
    }
}

#[tonic::async_trait]
impl FlightSqlService for FlightSql {
    type FlightService = FlightSql;

    /// The token (if any) travels in every call's header, checked before any call arrives
    /// here; a handshake has nothing left to check.
    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let done = HandshakeResponse::default();
        Ok(Response::new(Box::pin(futures::stream::once(async {
            Ok(done)
        }))))
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.flight_info(&query.query, request.into_inner()).await
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let sql = self.prepared(&query.prepared_statement_handle)?;
        self.flight_info(&sql, request.into_inner()).await
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        info(query, &schema, request.into_inner())
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        info(query, &schema, request.into_inner())
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        info(query, &schema, request.into_inner())
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        info(query, &schema, request.into_inner())
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&self.inner.sql_info).schema();
        info(query, &schema, request.into_inner())
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let id = from_bytes(&ticket.statement_handle)
            .ok_or_else(|| Status::invalid_argument("not a ticket of this server"))?;
        self.run(id).await
    }

    /// A client may also fetch a prepared statement's result directly with its handle.
    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let sql = self.prepared(&query.prepared_statement_handle)?;
        let plan = self.plan(&sql).await?;
        self.run(self.inner.statements.plan(plan)).await
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        one_batch(catalog::catalogs(&self.inner.ctx, query))
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        one_batch(catalog::schemas(&self.inner.ctx, query))
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        one_batch(catalog::tables(&self.inner.ctx, query).await)
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        one_batch(catalog::table_types(query))
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        one_batch(
            query
                .into_builder(&self.inner.sql_info)
                .build()
                .map_err(Status::from),
        )
    }

    async fn do_put_statement_update(
        &self,
        command: CommandStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.update(&command.query).await
    }

    async fn do_put_prepared_statement_update(
        &self,
        command: CommandPreparedStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let sql = self.prepared(&command.prepared_statement_handle)?;
        self.update(&sql).await
    }

    async fn do_put_prepared_statement_query(
        &self,
        _query: CommandPreparedStatementQuery,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        Err(Status::unimplemented(
            "grouper serve takes no bound parameters: write the values into the SQL",
        ))
    }

    /// Checks the SQL (parsed and planned, nothing run) and keeps it under a handle.
    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let plan = self
            .inner
            .ctx
            .state()
            .create_logical_plan(&query.query)
            .await
            .map_err(errors::planning)?;
        let schema = plan.schema().as_arrow().clone();
        let IpcMessage(schema) = SchemaAsIpc::new(&schema, &IpcWriteOptions::default())
            .try_into()
            .map_err(|e| Status::internal(format!("cannot encode the result's schema: {e}")))?;
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: to_bytes(self.inner.statements.prepare(&query.query)).into(),
            dataset_schema: schema,
            parameter_schema: Default::default(),
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        if let Some(h) = from_bytes(&query.prepared_statement_handle) {
            self.inner.statements.close(h);
        }
        Ok(())
    }

    async fn do_action_cancel_query(
        &self,
        query: ActionCancelQueryRequest,
        _request: Request<Action>,
    ) -> Result<ActionCancelQueryResult, Status> {
        let info = FlightInfo::decode(query.info)
            .map_err(|e| Status::invalid_argument(format!("not a FlightInfo: {e}")))?;
        match self.cancel(&info) {
            Cancel::Cancelled => Ok(ActionCancelQueryResult {
                result: CANCEL_RESULT_CANCELLED,
            }),
            Cancel::NotFound => Err(Status::not_found(
                "no such query: it finished, or was cancelled before",
            )),
        }
    }

    /// Flight's `CancelFlightInfo`.
    async fn do_action_fallback(
        &self,
        request: Request<Action>,
    ) -> Result<Response<<Self as FlightService>::DoActionStream>, Status> {
        let action = request.into_inner();
        if action.r#type != CANCEL_FLIGHT_INFO {
            return Err(Status::invalid_argument(format!(
                "unknown action '{}'",
                action.r#type
            )));
        }
        let info = CancelFlightInfoRequest::decode(action.body)
            .ok()
            .and_then(|r| r.info)
            .ok_or_else(|| Status::invalid_argument("not a CancelFlightInfoRequest"))?;
        let status = match self.cancel(&info) {
            Cancel::Cancelled => CancelStatus::Cancelled,
            Cancel::NotFound => CancelStatus::NotCancellable,
        };
        let result = CancelFlightInfoResult {
            status: status as i32,
        };
        let body = arrow_flight::Result {
            body: result.encode_to_vec().into(),
        };
        Ok(Response::new(Box::pin(futures::stream::once(async {
            Ok(body)
        }))))
    }

    async fn list_custom_actions(&self) -> Option<Vec<Result<ActionType, Status>>> {
        Some(vec![Ok(ActionType {
            r#type: CANCEL_FLIGHT_INFO.into(),
            description: "Cancel a query: its FlightInfo in a CancelFlightInfoRequest".into(),
        })])
    }

    /// The server's information is fixed ([`catalog::sql_info`]).
    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}
