//! Writing query results: a table for people, CSV/JSON for pipes, Parquet for files.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use arrow::array::RecordBatch;
use arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::arrow::ArrowWriter;
use rayon::prelude::*;

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

/// Result rows from which CSV and JSON are formatted on several threads: one thread wrote a
/// million rows of db-benchmark q3 (a string and two numbers) as CSV in ~0.25 s on the H200
/// host, about as long as grouper and DataFusion took to compute them.
const PARALLEL_ROWS: usize = 1 << 16;

/// Writes `batches` in `format` to `output` (a file) or standard output, CSV and JSON of many
/// rows formatted on `threads` threads.
pub fn write(
    batches: &[RecordBatch],
    format: Format,
    output: Option<&Path>,
    threads: usize,
) -> Result<()> {
    let sink: Box<dyn Write + Send> = match output {
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
    write_to(sink, batches, format, threads, PARALLEL_ROWS)
}

/// [`write`] into `sink`, formatting CSV and JSON on `threads` threads from `parallel_rows`.
fn write_to(
    mut sink: Box<dyn Write + Send>,
    batches: &[RecordBatch],
    format: Format,
    threads: usize,
    parallel_rows: usize,
) -> Result<()> {
    match format {
        Format::Table => writeln!(sink, "{}", pretty_format_batches(batches)?)?,
        Format::Csv => encoded(&mut sink, batches, threads, parallel_rows, |i, b| {
            // The header once, above the first batch.
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(i == 0)
                .build(Vec::new());
            w.write(b)?;
            Ok(w.into_inner())
        })?,
        Format::Json => encoded(&mut sink, batches, threads, parallel_rows, |_, b| {
            let mut w = arrow::json::LineDelimitedWriter::new(Vec::new());
            w.write(b)?;
            w.finish()?;
            Ok(w.into_inner())
        })?,
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

/// Writes each batch as `encode` makes it (given its index), in order: a few batches per thread
/// at a time formatted in parallel when there are `parallel_rows` rows or more and several
/// threads, one by one otherwise.
fn encoded(
    sink: &mut dyn Write,
    batches: &[RecordBatch],
    threads: usize,
    parallel_rows: usize,
    encode: impl Fn(usize, &RecordBatch) -> Result<Vec<u8>> + Sync,
) -> Result<()> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if threads < 2 || rows < parallel_rows {
        for (i, b) in batches.iter().enumerate() {
            sink.write_all(&encode(i, b)?)?;
        }
        return Ok(());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let wave = 4 * threads;
    for (w, chunk) in batches.chunks(wave).enumerate() {
        let bytes: Vec<Vec<u8>> = pool.install(|| {
            chunk
                .par_iter()
                .enumerate()
                .map(|(j, b)| encode(w * wave + j, b))
                .collect::<Result<_>>()
        })?;
        for b in bytes {
            sink.write_all(&b)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    /// A sink whose bytes the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn written(batches: &[RecordBatch], format: Format, threads: usize, from: usize) -> Vec<u8> {
        let sink = Shared::default();
        write_to(Box::new(sink.clone()), batches, format, threads, from).unwrap();
        let bytes = sink.0.lock().unwrap().clone();
        bytes
    }

    #[test]
    fn parallel_output_is_the_sequential_output() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("v", DataType::Int64, false),
            Field::new("x", DataType::Float64, true),
        ]));
        // Batches of different sizes, an empty one among them, NULLs and quoting.
        let batches: Vec<RecordBatch> = [5usize, 0, 37, 1, 200, 3]
            .iter()
            .enumerate()
            .map(|(b, &n)| {
                let k: StringArray = (0..n)
                    .map(|i| (i % 7 != 0).then(|| format!("k{b},{i}\"")))
                    .collect();
                let v = Int64Array::from_iter_values((0..n as i64).map(|i| i * 1_000_003 - 7));
                let x: Float64Array = (0..n)
                    .map(|i| (i % 5 != 0).then_some(i as f64 / 3.0))
                    .collect();
                RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![Arc::new(k), Arc::new(v), Arc::new(x)],
                )
                .unwrap()
            })
            .collect();
        for format in [Format::Csv, Format::Json] {
            let one = written(&batches, format, 1, usize::MAX);
            assert!(one.len() > 1000, "{format:?}");
            for threads in [2, 3, 8] {
                assert_eq!(
                    written(&batches, format, threads, 0),
                    one,
                    "{format:?} {threads}"
                );
            }
        }
        let csv = String::from_utf8(written(&batches, Format::Csv, 4, 0)).unwrap();
        assert_eq!(
            csv.lines().filter(|l| *l == "k,v,x").count(),
            1,
            "one header"
        );
        assert_eq!(csv.lines().count(), 1 + 5 + 37 + 1 + 200 + 3);
    }
}
