//! What the server tells clients about itself and its tables: Flight SQL's metadata commands
//! (`GetSqlInfo`, `GetCatalogs`, `GetDbSchemas`, `GetTables`, `GetTableTypes`), which tools
//! such as DBeaver and ADBC's `adbc_get_objects` call before any query. arrow-flight's builders
//! apply the clients' filters (catalog, `LIKE` patterns, table types); this module lists what
//! the session holds.

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use arrow_flight::error::FlightError;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetTableTypes, CommandGetTables, SqlInfo,
    SqlSupportedTransaction,
};
use datafusion::datasource::TableType;
use datafusion::prelude::SessionContext;
use tonic::Status;

use crate::errors;

/// The table types DataFusion's tables have, by Flight SQL's (JDBC's) names.
const TABLE_TYPES: [&str; 3] = ["TABLE", "VIEW", "LOCAL TEMPORARY"];

fn type_name(t: TableType) -> &'static str {
    match t {
        TableType::Base => TABLE_TYPES[0],
        TableType::View => TABLE_TYPES[1],
        TableType::Temporary => TABLE_TYPES[2],
    }
}

/// The server's `GetSqlInfo` answers: who it is, and that it has SQL and cancellation but no
/// transactions (so that ADBC clients in autocommit mode do not try to begin one).
pub(crate) fn sql_info() -> Result<SqlInfoData, FlightError> {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, "grouper");
    b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    // The Arrow columnar format's version (Schema.fbs), which arrow 59 writes.
    b.append(SqlInfo::FlightSqlServerArrowVersion, "1.5.0");
    b.append(SqlInfo::FlightSqlServerReadOnly, false);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    b.append(
        SqlInfo::FlightSqlServerTransaction,
        SqlSupportedTransaction::None as i32,
    );
    b.append(SqlInfo::FlightSqlServerCancel, true);
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.build()
}

/// `GetCatalogs`.
pub(crate) fn catalogs(
    ctx: &SessionContext,
    query: CommandGetCatalogs,
) -> Result<RecordBatch, Status> {
    let mut b = query.into_builder();
    for name in ctx.catalog_names() {
        b.append(name);
    }
    Ok(b.build()?)
}

/// `GetDbSchemas`.
pub(crate) fn schemas(
    ctx: &SessionContext,
    query: CommandGetDbSchemas,
) -> Result<RecordBatch, Status> {
    let mut b = query.into_builder();
    for catalog in ctx.catalog_names() {
        if let Some(c) = ctx.catalog(&catalog) {
            for schema in c.schema_names() {
                b.append(&catalog, schema);
            }
        }
    }
    Ok(b.build()?)
}

/// `GetTables`, each table's Arrow schema included where the client asks.
pub(crate) async fn tables(
    ctx: &SessionContext,
    query: CommandGetTables,
) -> Result<RecordBatch, Status> {
    let mut b = query.into_builder();
    let with_schema = b.include_schema();
    for catalog in ctx.catalog_names() {
        let Some(c) = ctx.catalog(&catalog) else {
            continue;
        };
        for schema in c.schema_names() {
            let Some(s) = c.schema(&schema) else {
                continue;
            };
            let mut names = s.table_names();
            names.sort();
            for name in names {
                // A table dropped since the listing is left out.
                let Some(table) = s.table(&name).await.map_err(errors::datafusion)? else {
                    continue;
                };
                let columns = match with_schema {
                    true => table.schema(),
                    false => std::sync::Arc::new(Schema::empty()),
                };
                b.append(
                    &catalog,
                    &schema,
                    &name,
                    type_name(table.table_type()),
                    &columns,
                )?;
            }
        }
    }
    Ok(b.build()?)
}

/// `GetTableTypes`.
pub(crate) fn table_types(query: CommandGetTableTypes) -> Result<RecordBatch, Status> {
    let mut b = query.into_builder();
    for t in TABLE_TYPES {
        b.append(t);
    }
    Ok(b.build()?)
}
