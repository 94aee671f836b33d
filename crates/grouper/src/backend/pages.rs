//! The GPU route over Parquet files read as pages ([`grouper_gpu::pages`]): when the fused
//! source is DataFusion's scan of local Parquet files, the files' pages go to the GPU still
//! encoded instead of DataFusion decoding them into batches first. DataFusion's scan reads one
//! batch (the string dictionaries and the group estimate are seeded from it) and is then left.

use std::sync::Arc;

use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::error::Result;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use futures::StreamExt;
use grouper_gpu::pages::PageSource;
use grouper_gpu::{ColumnBounds, GpuQuery, Prepared};

use super::external;
use super::pruning::ScanPruning;
use crate::config::Engine;
use crate::group_by::GroupByPlan;
use crate::harm::DICTIONARY_CHUNKS;
use crate::parquet_files::{
    cached_footer, dictionary_values, local_parquet_files, scan_columns, scan_files, string_type,
};

/// The files and column names of `source` when it is a scan the GPU can read as pages: local
/// Parquet files, whole (no limit, no partition columns, no filter pushed into the reader), its
/// columns plain columns of the files; with the row groups its predicate's statistics leave,
/// where they leave some out. `None` otherwise (the scan's batches are used).
pub(crate) fn page_source(
    source: &Arc<dyn ExecutionPlan>,
    footers: &FileMetadataCache,
) -> Option<PageSource> {
    let (cfg, parquet, files) = local_parquet_files(source)?;
    let pushed = cfg.file_source().filter().is_some()
        && parquet.table_parquet_options().global.pushdown_filters;
    if pushed || cfg.limit.is_some() {
        return None;
    }
    let columns = scan_columns(cfg, source)?;
    let kept = kept_row_groups(cfg, parquet, footers);
    Some(PageSource {
        files,
        columns,
        kept_rows: kept.as_ref().map(|(_, rows)| *rows),
        row_groups: kept.map(|(groups, _)| groups),
    })
}

/// Per file of the scan `cfg` (in its order), the row groups the predicate's statistics may
/// select, as DataFusion's opener prunes them, and their rows; `None` where none is left out
/// (no predicate, pruning off, or a footer not read here: the page reader then reads and
/// checks every row group). The footers come from `footers`, the session's cache, where
/// DataFusion left them as it listed the files. Pages within a row group are not pruned: the
/// GPU decodes whole column chunks, and the query's filter still runs on every row read.
fn kept_row_groups(
    cfg: &FileScanConfig,
    parquet: &ParquetSource,
    footers: &FileMetadataCache,
) -> Option<(Vec<Vec<usize>>, u64)> {
    let pruning = ScanPruning::new(parquet, Arc::clone(cfg.file_schema()));
    if !pruning.prunes_row_groups() {
        return None;
    }
    let (mut pruned, mut rows) = (false, 0u64);
    let kept = scan_files(cfg)
        .into_iter()
        .map(|f| {
            let meta = cached_footer(f, Some(footers))?;
            let plan = pruning.access_plan(f.object_meta.location.as_ref(), &meta, false);
            let kept = plan.row_group_indexes();
            pruned |= kept.len() < meta.num_row_groups();
            rows += kept
                .iter()
                .map(|&rg| meta.row_group(rg).num_rows().max(0) as u64)
                .sum::<u64>();
            Some(kept)
        })
        .collect::<Option<Vec<_>>>()?;
    pruned.then_some((kept, rows))
}

/// Values (rows × the scan's columns) from which `auto` sends a Parquet scan the GPU reads as
/// pages to the GPU alone. The GPU's start in a fresh process is a fixed ~0.4-0.6 s that its
/// faster decoding pays back only over enough values, and the host decodes few columns quickly:
/// on the H100 machine (16 host threads, fresh processes) TPC-H Q1's pages (7 columns) took the
/// GPU 1156 ms at SF 30 (180M rows, 1.26G values) against the CPU's 1925
/// (`files-h100-pages-q1.json`), while db-benchmark q1 (2 columns) at 1e8 rows (200M values),
/// sent to the GPU by the rule of 2^26 rows before this one, took it 797 ms against grouper's CPU
/// 174 and DataFusion alone 169 (`pages-harm-1e8-h100-16t.json`). About 0.45 ns a value on the
/// GPU against 0.9-1.5 on the host's threads puts the crossing between 0.6G and 1.4G values.
pub const PAGES_MIN_VALUES: u64 = 1 << 30;

/// The rows of a scan of `rows` rows that `pages` reads: those of the row groups left after
/// pruning, where the predicate pruned some (the CPU's scan reads as few).
pub(crate) fn page_rows(pages: &PageSource, rows: u64) -> u64 {
    pages.kept_rows.map_or(rows, |kept| kept.min(rows))
}

/// Values of a scan of `rows` rows over `pages`' columns ([`page_rows`] of them), for
/// [`PAGES_MIN_VALUES`].
pub(crate) fn page_values(pages: &PageSource, rows: u64) -> u64 {
    page_rows(pages, rows).saturating_mul(pages.columns.len().max(1) as u64)
}

/// Distinct values a string key may have for `auto` to send a Parquet scan to the GPU as pages,
/// listed by the files' dictionary pages. The page decoder codes a string key's dictionary pages
/// through the plan's dictionary, seeded from the first batch; a key of more values than that
/// holds is outside the plan at run time, and the scan went to grouper's CPU instead of
/// DataFusion's aggregation, which `auto` would have kept for such keys: db-benchmark at 1e8
/// rows from Parquet (H100 host, 16 threads, `q10-1e8-parquet-h100-16t.json`) q3 (a million
/// `id3` strings) 3.2 s and q10 (six keys) 20.5 s, against 0.58 and 2.4 s for DataFusion alone.
pub const PAGES_MAX_STRINGS: usize = 1024;

/// The first string key of `plan` whose values `pages`' dictionary pages do not list, at most
/// [`PAGES_MAX_STRINGS`] of them (a key of more, or of plain-encoded pages), by name; `None`
/// when every string key is listed (or there is none).
pub(crate) fn unlisted_string_key(plan: &GroupByPlan, pages: &PageSource) -> Option<String> {
    let fused = plan.fused.as_ref()?;
    plan.spec
        .key_types
        .iter()
        .zip(&fused.keys)
        .zip(&plan.keys)
        .filter(|((t, _), _)| string_type(t))
        .find(|((_, &column), _)| {
            pages.columns.get(column).is_none_or(|name| {
                dictionary_values(&pages.files, name, PAGES_MAX_STRINGS, DICTIONARY_CHUNKS)
                    .is_none()
            })
        })
        .map(|(_, (_, name))| name.clone())
}

/// Starts the GPU, and the page decoder's compile, on a thread of their own, as soon as `auto`
/// has sent a scan to the GPU as pages while planning: the context (~0.22 s on the H200 host)
/// then overlaps the rest of planning and the execution's start, where [`run_pages`] started
/// it 30-50 ms after planning ended (`GROUPER_TRACE=1`, TPC-H Q1 at SF 30). [`run_pages`] finds
/// it started (the GPU is opened once a process), or waits for it. An `EXPLAIN` of such a query
/// starts it too.
pub(crate) fn start_early() {
    if let Some(info) = crate::device_facts::known() {
        grouper_gpu::parquet::Decoder::prebuild(info);
    }
    std::thread::spawn(|| {
        if let Ok(gpu) = crate::device_facts::open() {
            grouper_gpu::parquet::Decoder::warm(&gpu);
        }
    });
}

/// Runs `query` over `pages` on the GPU, planned from `bounds` and the first batch of
/// `source`'s scan. The inner error is the engine's: [`grouper_core::GrouperError::OutsidePlan`]
/// or `Unsupported` send the caller to the scan's batches.
pub(crate) async fn run_pages(
    query: GpuQuery,
    source: &Arc<dyn ExecutionPlan>,
    pages: PageSource,
    bounds: Vec<ColumnBounds>,
    rows: Option<u64>,
    engine: &Arc<Engine>,
    context: &Arc<TaskContext>,
) -> Result<grouper_core::Result<grouper_gpu::GpuOutput>> {
    // The GPU starts (~0.23 s on the H100 host) while the files' footers are read and the scan
    // gives its first batch; NVRTC compiles the page decoder while the aggregation kernel is
    // planned and compiled (on a fresh machine, ~1.1 s of compiles in a row for Q1 on the H100).
    // A decoder this machine has not compiled yet compiles while the GPU starts (NVRTC needs
    // no context), from the properties an earlier process recorded.
    if let Some(info) = crate::device_facts::known() {
        grouper_gpu::parquet::Decoder::prebuild(info);
    }
    let starting = tokio::task::spawn_blocking(|| {
        let gpu = crate::device_facts::open();
        if let Ok(gpu) = &gpu {
            grouper_gpu::parquet::Decoder::warm(gpu);
        }
        gpu.map(|_| ())
    });
    let opening = {
        let pages = pages.clone();
        tokio::task::spawn_blocking(move || pages.open())
    };
    let mut first = Vec::new();
    let mut stream = source.execute(0, Arc::clone(context))?;
    if let Some(b) = stream.next().await {
        first.push(b?);
    }
    drop(stream);
    let opened = opening.await.map_err(external)?;
    if let Err(e) = starting.await.map_err(external)? {
        // `auto` then runs the query on the CPU (it chose the pages before starting the GPU).
        return Ok(Err(grouper_core::GrouperError::Unsupported(e.to_string())));
    }
    let mut opts = engine.gpu_options();
    // The pages are the transfer encoding: the kernel reads the decoded columns as they are.
    opts.compress = false;
    tokio::task::spawn_blocking(move || {
        Prepared::streaming(&query, &first, &bounds, rows, &opts)
            .and_then(|mut p| p.run_pages(&pages, opened?))
    })
    .await
    .map_err(external)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int32Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::prelude::ParquetReadOptions;

    use super::*;
    use crate::exec::GroupByExec;
    use crate::{Backend, GrouperConfig};

    /// grouper's operator in `plan`.
    fn group_by_exec(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
        match plan.downcast_ref::<GroupByExec>() {
            Some(_) => Some(Arc::clone(plan)),
            None => plan.children().into_iter().find_map(group_by_exec),
        }
    }

    fn footers(ctx: &datafusion::prelude::SessionContext) -> Arc<FileMetadataCache> {
        ctx.runtime_env().cache_manager.get_file_metadata_cache()
    }

    fn fused_source(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
        let exec = group_by_exec(plan)?;
        let g = exec.downcast_ref::<GroupByExec>()?;
        g.group_by().fused.as_ref().map(|f| Arc::clone(&f.source))
    }

    /// A string key whose values the files' dictionary pages list (3 of them) may go to the GPU
    /// as pages; one of more values than [`PAGES_MAX_STRINGS`] (their pages dictionary-encoded
    /// or, past the writer's dictionary size, plain) is named, whichever key it is.
    #[tokio::test]
    async fn string_keys_beyond_the_dictionary_pages_are_named() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("few", DataType::Utf8, false),
            Field::new("many", DataType::Utf8, false),
            Field::new("v", DataType::Int64, false),
        ]));
        let n = 3 * PAGES_MAX_STRINGS as i64;
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| ["a", "b", "c"][i as usize % 3]),
                )),
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("value {i}")),
                )),
                Arc::new(Int64Array::from_iter_values(0..n)),
            ],
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("grouper-pages-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys.parquet");
        let ctx = crate::test_support::grouper_over_parquet(&path, &batch, None).await;
        for (sql, unlisted) in [
            ("SELECT few, sum(v) FROM t GROUP BY few", None),
            (
                "SELECT few, many, sum(v) FROM t GROUP BY few, many",
                Some("many"),
            ),
            (
                "SELECT many, few, count(*) FROM t GROUP BY many, few",
                Some("many"),
            ),
        ] {
            let plan = crate::test_support::physical_plan(&ctx, sql).await;
            let exec = group_by_exec(&plan).expect("grouper's operator");
            let plan = exec.downcast_ref::<GroupByExec>().unwrap().group_by();
            let source = Arc::clone(&plan.fused.as_ref().expect("a fused source").source);
            let pages = page_source(&source, &*footers(&ctx)).expect("a page source");
            assert_eq!(
                unlisted_string_key(plan, &pages).as_deref(),
                unlisted,
                "{sql}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A filter on a column the row groups hold in order leaves out the row groups whose
    /// statistics rule every row out (their rows no longer count towards the GPU's threshold);
    /// a filter that rules none out, or none at all, reads every row group.
    #[tokio::test]
    async fn row_groups_the_filter_rules_out_are_not_read() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("k", DataType::Int32, false),
        ]));
        let n = 4000i64;
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(Int32Array::from_iter_values((0..n).map(|i| (i % 7) as i32))),
            ],
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("grouper-pages-prune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sorted.parquet");
        let props = datafusion::parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(1000))
            .build();
        let ctx = crate::test_support::grouper_over_parquet(&path, &batch, Some(props)).await;
        // The filter, the row groups and rows kept, the columns read.
        for (filter, kept, columns) in [
            ("id < 1500", Some((vec![0, 1], 2000)), 2),
            ("id >= 3000 AND k = 2", Some((vec![3], 1000)), 2),
            ("id > 9000", Some((vec![], 0)), 2),
            ("k = 2", None, 1),
            ("true", None, 1),
        ] {
            let sql = format!("SELECT k, count(*) FROM t WHERE {filter} GROUP BY k");
            let plan = crate::test_support::physical_plan(&ctx, &sql).await;
            let source = fused_source(&plan).expect("a fused source");
            let pages = page_source(&source, &*footers(&ctx)).expect("a page source");
            let values = kept.as_ref().map_or(n as u64, |k| k.1) * columns;
            assert_eq!(page_values(&pages, n as u64), values, "{filter}");
            let got = pages
                .row_groups
                .map(|mut g| (g.remove(0), pages.kept_rows.unwrap()));
            assert_eq!(got, kept, "{filter}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A scan of local Parquet files names them and the file columns it reads; a filter the
    /// reader applies itself (pushed down) keeps the scan's batches.
    #[tokio::test]
    async fn a_parquet_scan_becomes_its_files_and_columns() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("k", DataType::Int32, false),
            Field::new("v", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(Int32Array::from(vec![7, 7, 9])),
                Arc::new(Int64Array::from(vec![10, 20, 30])),
            ],
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("grouper-pages-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["p0.parquet", "p1.parquet"] {
            let file = std::fs::File::create(dir.join(name)).unwrap();
            let mut w = ArrowWriter::try_new(file, Arc::clone(&schema), None).unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
        }
        let sql = "SELECT k, sum(v) FROM t WHERE v > 5 GROUP BY k";
        for pushdown in [false, true] {
            let ctx = crate::session_context(&GrouperConfig {
                backend: Backend::Auto,
                grouper_only: true,
                ..Default::default()
            })
            .unwrap();
            ctx.state_ref()
                .write()
                .config_mut()
                .options_mut()
                .execution
                .parquet
                .pushdown_filters = pushdown;
            ctx.register_parquet(
                "t",
                dir.to_string_lossy().as_ref(),
                ParquetReadOptions::default(),
            )
            .await
            .unwrap();
            let plan = crate::test_support::physical_plan(&ctx, sql).await;
            let source = fused_source(&plan).expect("a fused source");
            let pages = page_source(&source, &*footers(&ctx));
            if pushdown {
                assert!(pages.is_none());
                continue;
            }
            let pages = pages.expect("a page source");
            let mut files = pages.files.clone();
            files.sort();
            assert_eq!(files, vec![dir.join("p0.parquet"), dir.join("p1.parquet")]);
            assert!(pages.columns.contains(&"k".to_string()));
            assert!(pages.columns.contains(&"v".to_string()));
            assert!(!pages.columns.contains(&"a".to_string()));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
