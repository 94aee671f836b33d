//! Registering tables from files (`--table NAME=PATH`), for the one-shot query, the shell and
//! the server alike.

use std::path::Path;

use anyhow::{bail, Context, Result};
use datafusion::prelude::{CsvReadOptions, JsonReadOptions, ParquetReadOptions, SessionContext};

/// Registers `NAME=PATH` tables, choosing the reader from the extension, each on a task of its
/// own: registering reads and parses a file's footer (1 MB for TPC-H SF 10's `lineitem`), and
/// one after another TPC-H's eight tables at SF 10 took the H200 host ~80 ms of a 300 ms Q1.
pub async fn register_tables(ctx: &SessionContext, tables: &[String]) -> Result<()> {
    let mut tasks = Vec::with_capacity(tables.len());
    for t in tables {
        let Some((name, path)) = t.split_once('=') else {
            bail!("--table expects NAME=PATH, got '{t}'");
        };
        let (ctx, name, path) = (ctx.clone(), name.to_string(), path.to_string());
        tasks.push(tokio::spawn(async move {
            register_table(&ctx, &name, &path)
                .await
                .with_context(|| format!("cannot register table '{name}' from {path}"))
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Registers table `name` over `path`, its reader chosen by the extension.
async fn register_table(
    ctx: &SessionContext,
    name: &str,
    path: &str,
) -> datafusion::error::Result<()> {
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".csv") {
        ctx.register_csv(name, path, CsvReadOptions::new()).await
    } else if lower.ends_with(".json") || lower.ends_with(".ndjson") {
        ctx.register_json(name, path, JsonReadOptions::default())
            .await
    } else if lower.ends_with(".arrow") || lower.ends_with(".ipc") || lower.ends_with(".feather") {
        ctx.register_arrow(name, path, Default::default()).await
    } else {
        ctx.register_parquet(name, path, ParquetReadOptions::default())
            .await
    }
}

/// DataFusion reports a path in FROM that matches no file as an unknown table; say what it is.
pub fn missing_file(e: datafusion::error::DataFusionError) -> anyhow::Error {
    let text = e.to_string();
    let name = text
        .split("table '")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .map(|n| n.trim_start_matches("datafusion.public."));
    match name {
        Some(n) if n.contains(['/', '.', '*']) && !Path::new(n).exists() => anyhow::anyhow!(
            "no file matches '{n}' (a path or glob in FROM must name existing files)"
        ),
        _ => e.into(),
    }
}
