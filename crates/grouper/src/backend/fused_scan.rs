//! A fused CPU pipeline's own Parquet scan: columns in the form the workers use them, and the
//! files' bytes from memory maps ([`super::mapped`]).
//!
//! - **Decimals as 64-bit.** A Parquet decimal of at most 18 digits is stored as INT32 or INT64;
//!   DataFusion's reader widens every value to a 128-bit `Decimal128` (a copy of each column,
//!   twice its size), and the fused program then narrows each value back to a 64-bit lane
//!   ([`grouper_core::expr::vector::Program`]). Where the workers read such a column only as
//!   lanes ([`super::fusion::CpuFusion::lane_only_columns`]), the scan produces it as
//!   `Decimal64`: arrow's reader hands over the stored INT64 values without a copy and the
//!   program loads them as they are. TPC-H Q1 reads four such columns.
//! - **String keys dictionary-encoded.** A string column of few values is stored as a small
//!   dictionary page and each row's index into it; DataFusion's reader builds a 16-byte view
//!   per row, which the workers filter and code row by row. Where a column is read only as a
//!   group key ([`super::fusion::CpuFusion::key_only_columns`]) and every column chunk's
//!   dictionary page is small, the scan produces it as `Dictionary(Int32, Utf8)`: the reader
//!   hands over the indices, and the key codec codes the dictionary's values once a batch
//!   (`grouper_core::keys`). TPC-H Q1's two flags, db-benchmark's `id1`/`id2`.
//!
//! - **Files mapped.** Column chunks are slices of a memory map of each file instead of fresh
//!   zeroed buffers copied into ([`super::mapped`]).
//!
//! How: the rebuilt scan's table schema declares those columns in the new type, and each file
//! carries its own Arrow schema with the same change (`PartitionedFile::with_arrow_schema`,
//! which DataFusion hands to the Parquet reader as its schema hint), so the reader produces
//! what the table declares and nothing is cast. Every other column, the projection, the
//! pushed-down predicate (whose columns are never changed) and the options stay as they were.
//! Only local files whose footers agree (the column stored as INT32/INT64, or as byte arrays
//! with small dictionaries) and whose own Arrow schema names the table's columns in order are
//! rebuilt; anything else keeps DataFusion's scan.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, DECIMAL64_MAX_PRECISION};
use datafusion::common::stats::ColumnStatistics;
use datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfigBuilder, FileSource, ParquetFileReaderFactory, ParquetSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::execution::TaskContext;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::basic::Type as PhysicalType;
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_plan::ExecutionPlan;

use super::fusion::CpuFusion;
use super::mapped::{maps_files, MappedReaderFactory};
use crate::group_by::GroupByPlan;
use crate::narrow_table::{string_dictionary, widen, WidenExec};
use crate::parquet_files::{
    cached_footer, local_parquet_files, local_path, scan_columns, scan_files, top_level_column,
};

/// Bytes (page header included) of the largest dictionary page a key column may have in any
/// column chunk to be read dictionary-encoded: each batch codes its dictionary's values once,
/// so a dictionary must be small beside a batch (16 KiB: about a thousand short strings).
const SMALL_KEY_DICTIONARY: i64 = 16 << 10;

/// What a rebuilt scan reads differently: columns by name, each with its new type.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Narrowed {
    /// Decimal columns read as `Decimal64`.
    pub(crate) decimals: usize,
    /// String key columns read as `Dictionary(Int32, Utf8)`.
    pub(crate) keys: usize,
    /// Whether column chunks come from memory maps of the files.
    pub(crate) mapped: bool,
}

impl fmt::Display for Narrowed {
    /// What `--explain` says of the scan: "4 decimal columns read as 64-bit, 2 keys as
    /// dictionaries, files mapped" (empty when nothing changed).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut read = Vec::new();
        if self.decimals > 0 {
            read.push(format!("{} decimal columns read as 64-bit", self.decimals));
        }
        if self.keys > 0 {
            read.push(format!("{} keys as dictionaries", self.keys));
        }
        if self.mapped {
            read.push("files mapped".to_string());
        }
        write!(f, "{}", read.join(", "))
    }
}

/// `input` rebuilt as [`rebuilt`] does, for an aggregation that reads it directly (nothing
/// fused: its keys and arguments are DataFusion's expressions over `input`'s columns): files
/// mapped, and string keys no argument reads dictionary-encoded.
pub(crate) fn unfused(
    input: &Arc<dyn ExecutionPlan>,
    plan: &GroupByPlan,
    context: &TaskContext,
) -> Option<(Arc<dyn ExecutionPlan>, Narrowed)> {
    rebuilt(input, &[], &plan.key_only_columns(), context)
}

/// The node grouper's CPU workers read for `plan` over `input` (the fused source where the CPU
/// fuses, [`CpuFusion`], else `input`) and, for each group key, the column of it that the key
/// alone reads (`None` for a key that a filter or an argument also reads, or an expression):
/// what [`rebuilt`] may hand over in another form. Plan-time facts for `harm`.
pub(crate) fn workers_key_columns(
    plan: &GroupByPlan,
    input: &Arc<dyn ExecutionPlan>,
) -> (Arc<dyn ExecutionPlan>, Vec<Option<usize>>) {
    match CpuFusion::new(plan, input) {
        Some(f) => {
            let only = f.key_only_columns();
            let keys = f
                .key_columns()
                .iter()
                .map(|c| only.contains(c).then_some(*c));
            (Arc::clone(&f.source), keys.collect())
        }
        None => {
            let only = plan.key_only_columns();
            let keys = plan.keys.iter().map(|(e, _)| {
                let c = e.downcast_ref::<Column>()?.index();
                only.contains(&c).then_some(c)
            });
            (Arc::clone(input), keys.collect())
        }
    }
}

/// `source` rebuilt to read its files through memory maps and to produce its output columns
/// `decimals` as `Decimal64` (those declared Decimal128 of at most 18 digits) and `keys`
/// dictionary-encoded (those declared Utf8 or Utf8View) where the files allow, or `None` where it is not a scan of
/// local Parquet files that can be (see the module's doc); with what changed. The output keeps
/// its columns, names and order.
pub(crate) fn rebuilt(
    source: &Arc<dyn ExecutionPlan>,
    decimals: &[usize],
    keys: &[usize],
    context: &TaskContext,
) -> Option<(Arc<dyn ExecutionPlan>, Narrowed)> {
    let (cfg, parquet, _) = local_parquet_files(source)?;
    if cfg.preserve_order || !cfg.output_ordering.is_empty() {
        return None;
    }
    let names = scan_columns(cfg, source)?;
    let output = source.schema();
    let predicate = parquet.filter();
    let predicate_reads = predicate.as_ref().map(collect_columns).unwrap_or_default();
    let candidates = |columns: &[usize], fits: &dyn Fn(&DataType) -> bool| -> Vec<String> {
        columns
            .iter()
            .filter_map(|&c| {
                let name = names.get(c)?;
                let filtered = predicate_reads.iter().any(|p| p.name() == name);
                (fits(output.fields().get(c)?.data_type()) && !filtered).then(|| name.clone())
            })
            .collect()
    };
    let mut wanted = Wanted {
        decimals: candidates(
            decimals,
            &|t| matches!(t, DataType::Decimal128(p, _) if *p <= DECIMAL64_MAX_PRECISION),
        ),
        keys: candidates(keys, &|t| matches!(t, DataType::Utf8 | DataType::Utf8View)),
    };
    let file_schema = Arc::clone(cfg.file_schema());
    let cache = context
        .runtime_env()
        .cache_manager
        .get_file_metadata_cache();
    let mut natural: HashMap<PathBuf, Schema> = HashMap::new();
    for f in scan_files(cfg) {
        let meta = cached_footer(f, Some(cache.as_ref()))?;
        natural.insert(
            local_path(f),
            file_arrow_schema(&meta, &file_schema, &mut wanted)?,
        );
    }
    let table = Arc::new(wanted.apply(&file_schema));
    let hints: HashMap<PathBuf, SchemaRef> = natural
        .into_iter()
        .map(|(f, s)| (f, Arc::new(wanted.apply(&s))))
        .collect();

    let mut rebuilt = ParquetSource::new(TableSchema::from(Arc::clone(&table)))
        .with_table_parquet_options(parquet.table_parquet_options().clone());
    if let Some(p) = predicate {
        rebuilt = rebuilt.with_predicate(p);
    }
    // Footers from the scan's own reader (DataFusion's, which ParquetFormat sets, or the
    // one DataFusion would make), byte ranges from maps of the files.
    let inner: Arc<dyn ParquetFileReaderFactory> = match parquet.parquet_file_reader_factory() {
        Some(factory) => Arc::clone(factory),
        None => {
            let runtime = context.runtime_env();
            let store = runtime.object_store(&cfg.object_store_url).ok()?;
            let cache = runtime.cache_manager.get_file_metadata_cache();
            Arc::new(CachedParquetFileReaderFactory::new(store, cache))
        }
    };
    let mapped = maps_files(context);
    rebuilt = rebuilt.with_parquet_file_reader_factory(match mapped {
        true => Arc::new(MappedReaderFactory::new(inner)),
        false => inner,
    });
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
                    let hint = hints.get(&local_path(f))?;
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
    // The changed columns' statistics hold values of their old types: they are dropped
    // (nothing below the workers prunes on them: the predicate does not read them).
    let mut statistics = cfg.statistics();
    for (i, f) in file_schema.fields().iter().enumerate() {
        if wanted.changes(f.name()) {
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
    let narrowed = Narrowed {
        decimals: wanted.decimals.len(),
        keys: wanted.keys.len(),
        mapped,
    };
    (narrowed != Narrowed::default() && same_columns(&output, &scan.schema()))
        .then_some((scan, narrowed))
}

/// `source` (a narrowed in-memory table's [`WidenExec`]: [`crate::narrow_table`]) rebuilt for
/// grouper's CPU workers: the narrowed columns among `decimals` (read only as the fused
/// program's 64-bit lanes) and `keys` (read only as group keys) left narrow, the rest widened;
/// with what stays narrow. `None` for any other source, or when nothing would stay narrow.
pub(crate) fn rebuilt_narrowed(
    source: &Arc<dyn ExecutionPlan>,
    decimals: &[usize],
    keys: &[usize],
) -> Option<(Arc<dyn ExecutionPlan>, Narrowed)> {
    let w = source.downcast_ref::<WidenExec>()?;
    let stored = w.input.schema();
    let mut read = Narrowed::default();
    let fields: Vec<Field> = stored
        .fields()
        .iter()
        .zip(w.schema.fields())
        .enumerate()
        .map(|(c, (s, d))| {
            let keep = match s.data_type() {
                t if t == d.data_type() => false,
                DataType::Decimal64(..) if decimals.contains(&c) => {
                    read.decimals += 1;
                    true
                }
                DataType::Dictionary(..) if keys.contains(&c) => {
                    read.keys += 1;
                    true
                }
                _ => false,
            };
            match keep {
                true => s.as_ref().clone(),
                false => d.as_ref().clone(),
            }
        })
        .collect();
    if read == Narrowed::default() {
        return None;
    }
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        w.schema.metadata().clone(),
    ));
    let plan = widen(Arc::clone(&w.input), schema).ok()?;
    Some((plan, read))
}

/// The columns to change, by name.
struct Wanted {
    decimals: Vec<String>,
    keys: Vec<String>,
}

impl Wanted {
    fn changes(&self, name: &String) -> bool {
        self.decimals.contains(name) || self.keys.contains(name)
    }

    /// `schema` with each wanted decimal (a Decimal128) as `Decimal64` of its precision and
    /// scale, and each wanted key as `Dictionary(Int32, Utf8)`.
    fn apply(&self, schema: &Schema) -> Schema {
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| {
                let field = f.as_ref().clone();
                match f.data_type() {
                    DataType::Decimal128(p, s) if self.decimals.contains(f.name()) => {
                        field.with_data_type(DataType::Decimal64(*p, *s))
                    }
                    _ if self.keys.contains(f.name()) => field.with_data_type(string_dictionary()),
                    _ => field,
                }
            })
            .collect();
        Schema::new_with_metadata(fields, schema.metadata().clone())
    }
}

/// The Arrow schema DataFusion's reader would give the file of footer `meta` (its embedded
/// Arrow schema, or the one its Parquet types imply), when its names are `table`'s in order;
/// `wanted` loses every column this file does not store as the change needs (see
/// [`stored_as_wanted`]). `None` when the file does not match.
fn file_arrow_schema(
    meta: &ParquetMetaData,
    table: &Schema,
    wanted: &mut Wanted,
) -> Option<Schema> {
    let file_meta = meta.file_metadata();
    let schema =
        parquet_to_arrow_schema(file_meta.schema_descr(), file_meta.key_value_metadata()).ok()?;
    let names_match = schema.fields().len() == table.fields().len()
        && schema
            .fields()
            .iter()
            .zip(table.fields())
            .all(|(a, b)| a.name() == b.name());
    if !names_match {
        return None;
    }
    let natural = |name: &String| schema.field_with_name(name).ok().map(Field::data_type);
    wanted.decimals.retain(|name| {
        natural(name) == table.field_with_name(name).ok().map(Field::data_type)
            && stored_as_wanted(meta, name, false)
    });
    wanted.keys.retain(|name| {
        matches!(natural(name), Some(DataType::Utf8 | DataType::Utf8View))
            && stored_as_wanted(meta, name, true)
    });
    Some(schema)
}

/// Whether the file stores top-level column `name` as a change needs it: a decimal as INT32 or
/// INT64; a key (`key`) as byte arrays with a dictionary page of at most
/// [`SMALL_KEY_DICTIONARY`] in every column chunk (the footer's offsets bound it). A data page
/// that fell back to plain encoding is still read right (arrow's reader makes that batch's
/// dictionary), only slower.
fn stored_as_wanted(meta: &ParquetMetaData, name: &str, key: bool) -> bool {
    let descr = meta.file_metadata().schema_descr();
    let Some(i) = top_level_column(descr, name) else {
        return false;
    };
    let physical = descr.column(i).physical_type();
    if !key {
        return matches!(physical, PhysicalType::INT32 | PhysicalType::INT64);
    }
    physical == PhysicalType::BYTE_ARRAY
        && meta.row_groups().iter().all(|rg| {
            let chunk = rg.column(i);
            chunk.dictionary_page_offset().is_some_and(|d| {
                (0..=SMALL_KEY_DICTIONARY).contains(&(chunk.data_page_offset() - d))
            })
        })
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
        // Under a memory limit the files are read, not mapped (a mapped page counts in the
        // resident set until the map goes).
        let read = "(2 decimal columns read as 64-bit, 1 keys as dictionaries";
        for (backend, memory_limit, shows) in [
            (Backend::Cpu, None, Some(format!("{read}, files mapped)"))),
            (Backend::Cpu, Some(256 << 20), Some(format!("{read})"))),
            (Backend::DataFusion, None, None),
        ] {
            // Two threads over the two files: with more, DataFusion round-robins the scan's
            // batches between the filter and the scan, where the CPU does not fuse (an H200
            // host's 16 threads).
            let ctx = session_context(&GrouperConfig {
                backend,
                threads: Some(2),
                memory_limit,
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
            if let Some(shows) = shows {
                assert!(shown.contains(&shows), "{shown}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(answers[0], answers[2]);
        assert_eq!(answers[1], answers[2]);
    }
}
