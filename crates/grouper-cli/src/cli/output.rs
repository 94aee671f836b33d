//! Writing query results: a table for people, CSV/JSON for pipes, Parquet for files.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use arrow::array::RecordBatch;
use arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::arrow::ArrowWriter;

/// Output formats of `grouper query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An aligned text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// One JSON object per row.
    Json,
    /// Parquet (needs --output).
    Parquet,
}

/// Writes `batches` in `format` to `output` (a file) or standard output.
pub fn write(batches: &[RecordBatch], format: Format, output: Option<&Path>) -> Result<()> {
    let mut sink: Box<dyn Write + Send> = match output {
        Some(p) => {
            Box::new(File::create(p).with_context(|| format!("cannot create {}", p.display()))?)
        }
        None => {
            if format == Format::Parquet {
                bail!("--format parquet needs --output PATH");
            }
            Box::new(std::io::stdout())
        }
    };
    match format {
        Format::Table => writeln!(sink, "{}", pretty_format_batches(batches)?)?,
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut sink);
            for b in batches {
                w.write(b)?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::LineDelimitedWriter::new(&mut sink);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
        }
        Format::Parquet => {
            let schema = batches.first().map(|b| b.schema());
            let Some(schema) = schema else {
                bail!("no result batches to write")
            };
            let mut w = ArrowWriter::try_new(sink, schema, None)?;
            for b in batches {
                w.write(b)?;
            }
            w.close()?;
            return Ok(());
        }
    }
    sink.flush()?;
    Ok(())
}
