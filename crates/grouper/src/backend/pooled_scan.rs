//! grouper's own scan of the CPU workers' Parquet morsels: DataFusion's scan, cut into morsels
//! ([`super::row_group_morsels`]), read row group by row group with arrow's decoders over
//! memory maps, the pages decompressed into reused buffers ([`super::pooled_pages`]).
//!
//! DataFusion's scan gives no hold on its page reader; this one reads what that scan would:
//! the same files, columns in the same types (the scan's table schema, Decimal64 and dictionary
//! keys included, [`super::fused_scan`]), the same row groups and rows of each morsel, with the
//! predicate's pruning applied as DataFusion does it (row group statistics, then the page
//! index). Only scans whose every file can be read into the table's types directly are taken
//! over (no schema adaptation, no filter evaluated in the reader, no limit); any other stays
//! DataFusion's.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use bytes::Bytes;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::physical_plan::parquet::{ParquetAccessPlan, RowGroupAccess};
use datafusion::datasource::physical_plan::FileSource;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, RowSelection,
};
use datafusion::parquet::arrow::{
    parquet_to_arrow_field_levels, parquet_to_arrow_schema, FieldLevels, ProjectionMask,
};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
};

use super::mapped::{map_file, maps_files};
use super::pooled_pages::{PagePool, PooledRowGroup};
use super::pruning::ScanPruning;
use super::row_group_morsels::{self, CutScan};
use crate::parquet_files::{cached_footer, local_parquet_files, local_path, scan_columns};

/// One file the scan reads: its map, footer and the decoders' view of the projected columns.
struct ScanFile {
    bytes: Bytes,
    metadata: Arc<ParquetMetaData>,
    levels: FieldLevels,
}

/// A run of one morsel: row group `row_group` of file `file`, the rows `selection` picks
/// (all of them for `None`).
#[derive(Debug, Clone)]
struct Run {
    file: usize,
    row_group: usize,
    selection: Option<RowSelection>,
}

/// The scan: one partition a morsel.
pub(crate) struct PooledScanExec {
    files: Arc<Vec<ScanFile>>,
    morsels: Vec<Vec<Run>>,
    /// Per output column, its place among the projected columns in file order.
    order: Vec<usize>,
    schema: SchemaRef,
    batch_size: usize,
    pool: Arc<PagePool>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for PooledScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledScanExec")
            .field("files", &self.files.len())
            .field("morsels", &self.morsels.len())
            .finish_non_exhaustive()
    }
}

/// `cut` (a scan of local Parquet files cut into morsels, [`super::row_group_morsels`]) read by
/// grouper's scan, or `None` where it must stay DataFusion's (see the module's doc). Each file
/// is pruned once, its surviving row groups and rows then taken from each morsel's runs.
pub(crate) fn over(cut: &CutScan, context: &TaskContext) -> Option<Arc<dyn ExecutionPlan>> {
    let scan = &cut.source;
    if !maps_files(context) {
        return None;
    }
    let (cfg, parquet, _) = local_parquet_files(scan)?;
    let predicate = parquet.filter();
    let options = &parquet.table_parquet_options().global;
    let reader_filters = options.pushdown_filters;
    if cfg.limit.is_some() || (predicate.is_some() && reader_filters) {
        return None;
    }
    let table = Arc::clone(cfg.file_schema());
    let names = scan_columns(cfg, scan)?;
    let columns = names
        .iter()
        .map(|n| table.index_of(n).ok())
        .collect::<Option<Vec<usize>>>()?;
    if columns.is_empty() {
        return None;
    }
    let mut roots = columns.clone();
    roots.sort_unstable();
    roots.dedup();
    let order = columns
        .iter()
        .map(|c| roots.binary_search(c).ok())
        .collect::<Option<Vec<_>>>()?;

    // Pruned as DataFusion's opener prunes, where its options let it.
    let pruning = ScanPruning::new(parquet, Arc::clone(&table));
    let cache = context
        .runtime_env()
        .cache_manager
        .get_file_metadata_cache();
    let mut files: Vec<ScanFile> = Vec::with_capacity(cut.files.len());
    let mut kept: Vec<ParquetAccessPlan> = Vec::with_capacity(cut.files.len());
    for f in &cut.files {
        if f.range.is_some() {
            return None;
        }
        let metadata = cached_footer(f, Some(cache.as_ref()))?;
        let file = scan_file(&local_path(f), f.object_meta.size, metadata, &table, &roots)?;
        let plan = pruning.access_plan(f.object_meta.location.as_ref(), &file.metadata, true);
        files.push(file);
        kept.push(plan);
    }
    // Each morsel's runs, less the row groups and rows pruning left out.
    let mut morsels = Vec::new();
    for runs in cut.morsels() {
        let mut read = Vec::with_capacity(runs.len());
        for &(file, row_group, start, end) in runs {
            let n = cut.rows(file, row_group)?;
            let part = row_group_morsels::part(start, end, n);
            let selection = match (kept.get(file)?.inner().get(row_group)?, part) {
                (RowGroupAccess::Skip, _) => continue,
                (RowGroupAccess::Scan, part) => part,
                (RowGroupAccess::Selection(s), None) => Some(s.clone()),
                (RowGroupAccess::Selection(s), Some(part)) => Some(s.intersection(&part)),
            };
            read.push(Run {
                file,
                row_group,
                selection,
            });
        }
        morsels.push(read);
    }
    let schema = scan.schema();
    let properties = PlanProperties::new(
        EquivalenceProperties::new(Arc::clone(&schema)),
        Partitioning::UnknownPartitioning(morsels.len()),
        EmissionType::Incremental,
        Boundedness::Bounded,
    );
    Some(Arc::new(PooledScanExec {
        files: Arc::new(files),
        morsels,
        order,
        schema,
        batch_size: context.session_config().batch_size(),
        pool: Arc::new(PagePool::new(context.session_config().target_partitions())),
        properties: Arc::new(properties),
    }))
}

/// File `path` (of `size` bytes, footer `metadata`) mapped, with the decoders' view of its
/// columns `roots` read as `table` declares them; `None` when it cannot be mapped or a column's
/// table type is not its own (below).
fn scan_file(
    path: &std::path::Path,
    size: u64,
    metadata: Arc<ParquetMetaData>,
    table: &SchemaRef,
    roots: &[usize],
) -> Option<ScanFile> {
    let file_meta = metadata.file_metadata();
    let natural =
        parquet_to_arrow_schema(file_meta.schema_descr(), file_meta.key_value_metadata()).ok()?;
    let same_values = natural.fields().len() == table.fields().len()
        && natural
            .fields()
            .iter()
            .zip(table.fields())
            .all(|(f, t)| f.name() == t.name() && same_values(f.data_type(), t.data_type()));
    if !same_values {
        return None;
    }
    let options = ArrowReaderOptions::new().with_schema(Arc::clone(table));
    ArrowReaderMetadata::try_new(Arc::clone(&metadata), options).ok()?;
    let descr = file_meta.schema_descr();
    let mask = ProjectionMask::roots(descr, roots.iter().copied());
    let levels = parquet_to_arrow_field_levels(descr, mask, Some(table.fields())).ok()?;
    let bytes = map_file(&path.to_path_buf(), size)?;
    Some(ScanFile {
        bytes,
        metadata,
        levels,
    })
}

/// Whether a column the file holds as `natural` (its Arrow type as DataFusion's reader infers
/// it) and the table declares as `table` reads to the same values: the same type, or one that
/// only lays them out differently (string and binary views, which DataFusion reads by default;
/// the `Decimal64` and dictionary keys of [`super::fused_scan`]). Anything DataFusion would
/// cast (a timestamp's unit or zone, a decimal's scale) keeps DataFusion's scan, which does:
/// arrow's reader would take such a table type as a hint and relabel the stored values.
fn same_values(natural: &DataType, table: &DataType) -> bool {
    use DataType::*;
    match (natural, table) {
        (a, b) if a == b => true,
        (Utf8 | LargeUtf8, Utf8View) | (Binary | LargeBinary, BinaryView) => true,
        (Decimal128(p, s), Decimal64(q, t)) => p == q && s == t,
        (Utf8 | LargeUtf8 | Utf8View, Dictionary(k, v)) => {
            **k == Int32 && matches!(**v, Utf8 | LargeUtf8 | Utf8View)
        }
        _ => false,
    }
}

impl DisplayAs for PooledScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PooledScanExec: {} files, {} morsels, pages decompressed into reused buffers",
            self.files.len(),
            self.morsels.len()
        )
    }
}

impl ExecutionPlan for PooledScanExec {
    fn name(&self) -> &str {
        "PooledScanExec"
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal("a scan has no children".into()))
        }
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let runs = self.morsels.get(partition).cloned().ok_or_else(|| {
            DataFusionError::Internal(format!("partition {partition} of {}", self.morsels.len()))
        })?;
        let batches = MorselBatches {
            files: Arc::clone(&self.files),
            runs: runs.into_iter(),
            reader: None,
            pool: Arc::clone(&self.pool),
            order: self.order.clone(),
            schema: Arc::clone(&self.schema),
            batch_size: self.batch_size,
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            futures::stream::iter(batches),
        )))
    }
}

/// A morsel's batches, run after run.
struct MorselBatches {
    files: Arc<Vec<ScanFile>>,
    runs: std::vec::IntoIter<Run>,
    reader: Option<ParquetRecordBatchReader>,
    pool: Arc<PagePool>,
    order: Vec<usize>,
    schema: SchemaRef,
    batch_size: usize,
}

impl MorselBatches {
    /// The reader of the next run, `None` after the last.
    fn next_reader(&mut self) -> Result<Option<ParquetRecordBatchReader>> {
        let Some(run) = self.runs.next() else {
            return Ok(None);
        };
        let file = self
            .files
            .get(run.file)
            .ok_or_else(|| DataFusionError::Internal("a run past the scan's files".into()))?;
        let group = PooledRowGroup {
            file: &file.bytes,
            metadata: &file.metadata,
            row_group: run.row_group,
            pool: &self.pool,
        };
        let reader = ParquetRecordBatchReader::try_new_with_row_groups(
            &file.levels,
            &group,
            self.batch_size,
            run.selection,
        )?;
        Ok(Some(reader))
    }

    /// `batch`'s columns in the scan's output order and schema.
    fn output(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let columns = self
            .order
            .iter()
            .map(|&i| batch.columns().get(i).cloned())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| DataFusionError::Internal("a batch short of columns".into()))?;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }
}

impl Iterator for MorselBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(reader) = self.reader.as_mut() {
                match reader.next() {
                    Some(batch) => {
                        return Some(batch.map_err(Into::into).and_then(|b| self.output(b)))
                    }
                    None => self.reader = None,
                }
            }
            match self.next_reader() {
                Ok(Some(r)) => self.reader = Some(r),
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, Decimal128Array, Int32Array, Int64Array, RecordBatch, StringArray,
    };
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::source::DataSourceExec;
    use datafusion::parquet::basic::{Compression, ZstdLevel};
    use datafusion::parquet::file::properties::{WriterProperties, WriterVersion};
    use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::over;
    use crate::backend::row_group_morsels::cut_scan;
    use crate::test_support::{answer_lines, physical_plan};

    /// Only layouts of the same values are read as the table declares; casts stay DataFusion's.
    #[test]
    fn only_relayouts_of_the_same_values_are_taken() {
        use arrow::datatypes::TimeUnit;
        use DataType::*;
        let dict = Dictionary(Box::new(Int32), Box::new(Utf8));
        for (natural, table, same) in [
            (Int64, Int64, true),
            (Utf8, Utf8View, true),
            (Binary, BinaryView, true),
            (Decimal128(15, 2), Decimal64(15, 2), true),
            (Utf8, dict.clone(), true),
            (Decimal128(15, 2), Decimal64(15, 3), false),
            (Decimal128(15, 2), Decimal128(16, 2), false),
            (Int32, Int64, false),
            (
                Timestamp(TimeUnit::Nanosecond, None),
                Timestamp(TimeUnit::Microsecond, None),
                false,
            ),
            (
                Timestamp(TimeUnit::Microsecond, None),
                Timestamp(TimeUnit::Microsecond, Some("+01:00".into())),
                false,
            ),
            (Int32, dict, false),
        ] {
            assert_eq!(
                super::same_values(&natural, &table),
                same,
                "{natural} as {table}"
            );
        }
    }

    /// The scan node below `plan`.
    fn scan_below(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        if plan.downcast_ref::<DataSourceExec>().is_some() {
            return Arc::clone(plan);
        }
        scan_below(plan.children()[0])
    }

    /// Files of 1,000-row row groups and 64-row pages, written four ways: snappy (data pages
    /// v1 and v2), zstd and uncompressed; a dictionary-encoded string, a plain nullable
    /// integer, a nullable decimal and a sorted integer to prune on.
    fn write_files(dir: &std::path::Path) -> usize {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("v", DataType::Int64, true),
            Field::new("d", DataType::Decimal128(15, 2), true),
            Field::new("s", DataType::Int32, false),
        ]));
        let ways = [
            (Compression::SNAPPY, WriterVersion::PARQUET_1_0),
            (Compression::SNAPPY, WriterVersion::PARQUET_2_0),
            (
                Compression::ZSTD(ZstdLevel::default()),
                WriterVersion::PARQUET_1_0,
            ),
            (Compression::UNCOMPRESSED, WriterVersion::PARQUET_1_0),
        ];
        let per = 2500;
        for (i, (codec, version)) in ways.into_iter().enumerate() {
            let rows = (i * per) as i64..((i + 1) * per) as i64;
            let k = StringArray::from_iter_values(
                rows.clone().map(|r| ["A", "N", "R"][(r % 3) as usize]),
            );
            let v: Int64Array = rows
                .clone()
                .map(|r| (r % 7 != 0).then_some(r * 31))
                .collect();
            let d = rows
                .clone()
                .map(|r| (r % 5 != 0).then_some(i128::from(r) * 101))
                .collect::<Decimal128Array>()
                .with_precision_and_scale(15, 2)
                .unwrap();
            let s: Int32Array = rows.map(|r| r as i32).collect();
            let columns: Vec<ArrayRef> = vec![Arc::new(k), Arc::new(v), Arc::new(d), Arc::new(s)];
            let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
            let props = WriterProperties::builder()
                .set_compression(codec)
                .set_writer_version(version)
                .set_max_row_group_row_count(Some(1000))
                .set_data_page_row_count_limit(64)
                .set_write_batch_size(64)
                .set_column_dictionary_enabled("v".into(), false)
                .build();
            let file = std::fs::File::create(dir.join(format!("{i}.parquet"))).unwrap();
            let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(
                file,
                Arc::clone(&schema),
                Some(props),
            )
            .unwrap();
            w.write(&batch).unwrap();
            w.finish().unwrap();
        }
        ways.len() * per
    }

    /// Every partition's batches of `plan`.
    async fn all_rows(plan: &Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> Vec<RecordBatch> {
        let mut batches = Vec::new();
        for p in 0..plan.output_partitioning().partition_count() {
            let stream = plan.execute(p, ctx.task_ctx()).unwrap();
            let mut part: Vec<RecordBatch> =
                futures::TryStreamExt::try_collect(stream).await.unwrap();
            batches.append(&mut part);
        }
        batches
    }

    /// Cut into morsels (parts of row groups among them), the pooled scan reads the rows
    /// DataFusion's reads, in the scan's column order and types, over every way a page is
    /// stored; with a predicate it prunes as DataFusion does (row groups, then pages).
    #[tokio::test]
    async fn the_pooled_scan_reads_what_datafusion_reads() {
        let dir = std::env::temp_dir().join(format!("grouper-pooled-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let total = write_files(&dir);
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(4));
        let path = dir.join("");
        ctx.register_parquet("t", path.to_string_lossy().as_ref(), Default::default())
            .await
            .unwrap();
        for (sql, pruned) in [
            ("SELECT v, k, d FROM t", false),
            ("SELECT d, s FROM t WHERE s < 1700 OR s >= 9950", true),
        ] {
            let scan = scan_below(&physical_plan(&ctx, sql).await);
            let cut = cut_scan(&scan, 16, 400, &ctx.task_ctx()).expect("cut into morsels");
            let pooled = over(&cut, &ctx.task_ctx()).expect("read by the pooled scan");
            let cut = cut.scan().expect("DataFusion's scan of the morsels");
            assert_eq!(pooled.schema(), scan.schema());
            let theirs = all_rows(&cut, &ctx).await;
            let ours = all_rows(&pooled, &ctx).await;
            assert!(ours.iter().all(|b| b.schema() == scan.schema()));
            let rows: usize = ours.iter().map(RecordBatch::num_rows).sum();
            if pruned {
                // Row groups 0, 1 and 9 of 10 (s < 1700 or s >= 9950), fewer rows by the
                // page index.
                assert!((1750..3000).contains(&rows), "{rows} rows read");
            } else {
                assert_eq!(rows, total);
            }
            assert_eq!(
                answer_lines(&ours, false),
                answer_lines(&theirs, false),
                "{sql}"
            );
        }
        // With pruning off (row groups and pages) every row group is read. DataFusion's scan
        // still drops whole files by their statistics (not by these options): what it reads
        // is a part of what this one reads.
        let config = SessionConfig::new()
            .with_target_partitions(4)
            .set_bool("datafusion.execution.parquet.pruning", false)
            .set_bool("datafusion.execution.parquet.enable_page_index", false);
        let ctx = SessionContext::new_with_config(config);
        ctx.register_parquet("t", path.to_string_lossy().as_ref(), Default::default())
            .await
            .unwrap();
        let sql = "SELECT d, s FROM t WHERE s < 1700 OR s >= 9950";
        let scan = scan_below(&physical_plan(&ctx, sql).await);
        let cut = cut_scan(&scan, 16, 400, &ctx.task_ctx()).expect("cut into morsels");
        let pooled = over(&cut, &ctx.task_ctx()).expect("read by the pooled scan");
        let cut = cut.scan().expect("DataFusion's scan of the morsels");
        let ours = all_rows(&pooled, &ctx).await;
        assert_eq!(ours.iter().map(RecordBatch::num_rows).sum::<usize>(), total);
        let theirs = answer_lines(&all_rows(&cut, &ctx).await, false);
        let ours = answer_lines(&ours, false);
        assert!(theirs.iter().all(|l| ours.binary_search(l).is_ok()));
        // A filter the reader evaluates itself is DataFusion's.
        let config = SessionConfig::new()
            .with_target_partitions(4)
            .set_bool("datafusion.execution.parquet.pushdown_filters", true);
        let ctx = SessionContext::new_with_config(config);
        ctx.register_parquet("t", path.to_string_lossy().as_ref(), Default::default())
            .await
            .unwrap();
        let scan = scan_below(&physical_plan(&ctx, "SELECT d FROM t WHERE s < 10").await);
        let cut = cut_scan(&scan, 16, 400, &ctx.task_ctx()).expect("cut into morsels");
        assert!(over(&cut, &ctx.task_ctx()).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
