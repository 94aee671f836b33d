//! A fused CPU pipeline's Parquet scan, reading decimals in the pipeline's own width.
//!
//! A Parquet decimal of at most 18 digits is stored as INT32 or INT64; DataFusion's reader
//! widens every value to a 128-bit `Decimal128` (a copy of each column, twice its size), and
//! the fused program then narrows each value back to a 64-bit lane ([`grouper_core::expr::
//! vector::Program`]). Where the workers read such a column only as lanes
//! ([`super::fusion::CpuFusion::lane_only_decimals`]), the scan is rebuilt to produce it as
//! `Decimal64` instead: the Parquet reader then hands over the stored INT64 values without a
//! copy (arrow's reader reinterprets them), and the program loads them as they are. TPC-H Q1
//! reads four such columns.
//!
//! How: the rebuilt scan's table schema declares those columns `Decimal64` of the same precision
//! and scale, and each file carries its own Arrow schema with the same change
//! (`PartitionedFile::with_arrow_schema`, which DataFusion hands to the Parquet reader as its
//! schema hint), so the reader produces what the table declares and nothing is cast. Every
//! other column, the projection, the pushed-down predicate and the options stay as they were.
//! Only local files whose footers show the column as INT32 or INT64 and whose own Arrow schema
//! matches the table's names are rebuilt; anything else keeps DataFusion's scan.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, DECIMAL64_MAX_PRECISION};
use datafusion::common::stats::ColumnStatistics;
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfigBuilder, FileSource, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::basic::Type as PhysicalType;
use datafusion::parquet::file::metadata::ParquetMetaDataReader;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_plan::ExecutionPlan;

use crate::parquet_files::{local_parquet_files, scan_columns};

/// `source` rebuilt to produce its output columns `columns` (declared Decimal128 of at most 18
/// digits) as `Decimal64`, or `None` where it is not a scan that can (see the module's doc),
/// or none of `columns` qualifies; with the number of columns narrowed. The output keeps its
/// columns, names and order.
pub(crate) fn narrowed(
    source: &Arc<dyn ExecutionPlan>,
    columns: &[usize],
) -> Option<(Arc<dyn ExecutionPlan>, usize)> {
    if columns.is_empty() {
        return None;
    }
    let (cfg, parquet, files) = local_parquet_files(source)?;
    if cfg.preserve_order || !cfg.output_ordering.is_empty() {
        return None;
    }
    let names = scan_columns(cfg, source)?;
    let output = source.schema();
    let predicate = parquet.filter();
    let predicate_reads = predicate.as_ref().map(collect_columns).unwrap_or_default();
    let mut wanted: Vec<String> = columns
        .iter()
        .filter_map(|&c| {
            let name = names.get(c)?;
            let decimal = matches!(
                output.fields().get(c)?.data_type(),
                DataType::Decimal128(p, _) if *p <= DECIMAL64_MAX_PRECISION
            );
            let filtered = predicate_reads.iter().any(|p| p.name() == name);
            (decimal && !filtered).then(|| name.clone())
        })
        .collect();
    let file_schema = Arc::clone(cfg.file_schema());
    let mut natural: HashMap<PathBuf, Schema> = HashMap::new();
    for f in &files {
        let schema = file_arrow_schema(f, &file_schema, &mut wanted)?;
        natural.insert(f.clone(), schema);
    }
    if wanted.is_empty() {
        return None;
    }
    let table = Arc::new(with_decimal64(&file_schema, &wanted));
    let hints: HashMap<PathBuf, SchemaRef> = natural
        .into_iter()
        .map(|(f, s)| (f, Arc::new(with_decimal64(&s, &wanted))))
        .collect();

    let mut rebuilt = ParquetSource::new(TableSchema::from(Arc::clone(&table)))
        .with_table_parquet_options(parquet.table_parquet_options().clone());
    if let Some(p) = predicate {
        rebuilt = rebuilt.with_predicate(p);
    }
    if let Some(factory) = parquet.parquet_file_reader_factory() {
        rebuilt = rebuilt.with_parquet_file_reader_factory(Arc::clone(factory));
    }
    let rebuilt: Arc<dyn FileSource> = match parquet.projection() {
        Some(p) => rebuilt.try_pushdown_projection(p).ok()??,
        None => Arc::new(rebuilt),
    };

    let groups = cfg
        .file_groups
        .iter()
        .map(|g| {
            let files = g
                .iter()
                .map(|f| {
                    let path = PathBuf::from(format!("/{}", f.object_meta.location.as_ref()));
                    let hint = hints.get(&path)?;
                    Some(f.clone().with_arrow_schema(Arc::clone(hint)))
                })
                .collect::<Option<Vec<_>>>()?;
            let group = FileGroup::new(files);
            Some(match g.file_statistics(None) {
                Some(s) => group.with_statistics(Arc::new(s.clone())),
                None => group,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    // The narrowed columns' statistics hold Decimal128 values: they are dropped (nothing
    // below the workers prunes on them: the predicate does not read them).
    let mut statistics = cfg.statistics();
    for (i, f) in file_schema.fields().iter().enumerate() {
        if wanted.contains(f.name()) {
            if let Some(c) = statistics.column_statistics.get_mut(i) {
                *c = ColumnStatistics::new_unknown();
            }
        }
    }
    let config = FileScanConfigBuilder::from(cfg.clone())
        .with_source(rebuilt)
        .with_file_groups(groups)
        .with_statistics(statistics)
        .build();
    let scan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
    same_columns(&output, &scan.schema()).then_some((scan, wanted.len()))
}

/// The Arrow schema DataFusion's reader would give file `path` (its embedded Arrow schema, or
/// the one its Parquet types imply), when its names are `table`'s in order; `wanted` loses
/// every column the file does not store as INT32 or INT64 under the table's own decimal type.
/// `None` when the file cannot be read or does not match.
fn file_arrow_schema(path: &PathBuf, table: &Schema, wanted: &mut Vec<String>) -> Option<Schema> {
    let file = std::fs::File::open(path).ok()?;
    let meta = ParquetMetaDataReader::new().parse_and_finish(&file).ok()?;
    let file_meta = meta.file_metadata();
    let descr = file_meta.schema_descr();
    let schema = parquet_to_arrow_schema(descr, file_meta.key_value_metadata()).ok()?;
    let names_match = schema.fields().len() == table.fields().len()
        && schema
            .fields()
            .iter()
            .zip(table.fields())
            .all(|(a, b)| a.name() == b.name());
    if !names_match {
        return None;
    }
    wanted.retain(|name| {
        let stored = (0..descr.num_columns()).any(|i| {
            let c = descr.column(i);
            c.path().parts().len() == 1
                && c.name() == name
                && matches!(c.physical_type(), PhysicalType::INT32 | PhysicalType::INT64)
        });
        let same = schema.field_with_name(name).ok().map(Field::data_type)
            == table.field_with_name(name).ok().map(Field::data_type);
        stored && same
    });
    Some(schema)
}

/// `schema` with each column named in `names` (a Decimal128) as `Decimal64` of its precision
/// and scale.
fn with_decimal64(schema: &Schema, names: &[String]) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Decimal128(p, s) if names.contains(f.name()) => f
                .as_ref()
                .clone()
                .with_data_type(DataType::Decimal64(*p, *s)),
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// Whether two schemas name the same columns in the same order.
fn same_columns(a: &Schema, b: &Schema) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(x, y)| x.name() == y.name())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Decimal128Array, Int32Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::{collect, displayable};

    use crate::test_support::{answer_lines, physical_plan};
    use crate::{session_context, Backend, GrouperConfig};

    fn decimals(values: impl Iterator<Item = Option<i128>>, p: u8) -> ArrayRef {
        Arc::new(
            values
                .collect::<Decimal128Array>()
                .with_precision_and_scale(p, 2)
                .unwrap(),
        )
    }

    /// The CPU reads the decimals it uses only as lanes as `Decimal64` (here the discount,
    /// INT64 in the file, and the quantity, INT32), not the price (MIN reads it as it is), not
    /// a 25-digit decimal, not the filter's column; the answer is DataFusion's, NULLs included.
    #[tokio::test]
    async fn lane_only_decimals_are_read_as_64_bits() {
        let n = 5000i128;
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("ship", DataType::Int32, false),
            Field::new("price", DataType::Decimal128(15, 2), false),
            Field::new("disc", DataType::Decimal128(15, 2), true),
            Field::new("qty", DataType::Decimal128(9, 2), true),
            Field::new("wide", DataType::Decimal128(25, 2), false),
            Field::new("tax", DataType::Decimal128(12, 2), false),
        ]));
        let keys = ["A", "N", "R"];
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| keys[(i * 7 % 3) as usize]),
                )),
                Arc::new(Int32Array::from_iter_values(
                    (0..n).map(|i| (i % 100) as i32),
                )),
                decimals(
                    (0..n).map(|i| Some(90_000 + i * 1_234_567 % 10_000_000)),
                    15,
                ),
                decimals((0..n).map(|i| (i % 11 != 0).then_some(i % 11)), 15),
                decimals((0..n).map(|i| (i % 13 != 0).then_some(100 * (i % 50))), 9),
                decimals((0..n).map(|i| Some(i * 10_i128.pow(20))), 25),
                // Compared in the filter: read as it is.
                decimals((0..n).map(|i| Some(i % 9)), 12),
            ],
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("grouper-narrow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Two files: a scan of one would be one partition, which the CPU does not fuse.
        for (i, rows) in [(0, 0..2000), (1, 2000..n as usize)] {
            let file = std::fs::File::create(dir.join(format!("{i}.parquet"))).unwrap();
            let schema = Arc::clone(&schema);
            let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(file, schema, None);
            let w = w.as_mut().unwrap();
            w.write(&batch.slice(rows.start, rows.len())).unwrap();
            w.finish().unwrap();
        }
        let path = dir.join("");
        let sql = "SELECT k, sum(price * (1 - disc)), avg(qty), min(price), sum(wide), \
                   sum(disc), sum(tax), count(*) FROM t \
                   WHERE ship < 70 AND tax < 0.07 GROUP BY k";
        let mut answers = Vec::new();
        for backend in [Backend::Cpu, Backend::DataFusion] {
            let ctx = session_context(&GrouperConfig {
                backend,
                ..Default::default()
            })
            .unwrap();
            let options = datafusion::prelude::ParquetReadOptions::default();
            ctx.register_parquet("t", path.to_string_lossy().as_ref(), options)
                .await
                .unwrap();
            let plan = physical_plan(&ctx, sql).await;
            let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
            answers.push(answer_lines(&batches, false));
            let shown = displayable(plan.as_ref()).indent(true).to_string();
            if backend == Backend::Cpu {
                assert!(
                    shown.contains("(2 decimal columns read as 64-bit)"),
                    "{shown}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(answers[0], answers[1]);
    }
}
