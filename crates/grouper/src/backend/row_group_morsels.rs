//! A scan of local Parquet files cut into morsels of about equal rows for the CPU workers, row
//! groups larger than a morsel split into runs of their rows.
//!
//! DataFusion splits a file scan by byte ranges, and a row group goes whole to the range its
//! middle falls in: however fine the ranges, a morsel is at least a row group. Files of large
//! row groups then leave the workers, who take morsels in turns ([`super::cpu`]), unequal
//! shares: TPC-H SF 10's `lineitem` as `grouper gen tpch` writes it (row groups of 1Mi rows,
//! a smaller last one per file) gave 16 workers 2.86M–4.80M rows each, the last ending 47–60
//! ms after the first (H200 host, `GROUPER_TRACE`). Here each morsel is one partition reading a
//! run of rows: whole row groups (of one file or several) that together stay under a morsel's
//! rows, or a part of one larger row group (a `ParquetAccessPlan` that selects the part; the reader skips
//! the other pages by their headers or the offset index, without decoding them, and decodes
//! the chunk's dictionary page once per part). The workers then end within about a morsel of
//! each other.
//!
//! Only whole local files, without row selections or access plans of their own, in a scan
//! that promises no order, are cut; DataFusion's statistics pruning and the predicate's page
//! pruning still apply to each morsel's row groups.

use std::sync::Arc;

use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    ParquetAccessPlan, ParquetRowSelection, RowGroupAccess,
};
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use datafusion::physical_plan::ExecutionPlan;

use crate::parquet_files::{cached_footer, local_parquet_files};

/// One morsel: per file it reads (files ascending), per row group of that file it reads (row
/// groups ascending), the rows `start..end` of that row group.
#[derive(Debug, Clone, Default, PartialEq)]
struct Morsel {
    /// `(file, row group, start, end)`; the file is an index among the scan's files.
    runs: Vec<(usize, usize, u64, u64)>,
}

/// Morsels of whole row groups hold at least [`split`]'s `min_rows` over this many rows, where
/// a row group is cut into parts only past `min_rows`: a part decodes its column chunks'
/// dictionary pages again, a whole row group does not. TPC-H SF 1's lineitem (tpchgen-cli: 53
/// row groups of ~113k rows) on the H200 host's 16 threads had been 27 morsels of two row
/// groups, with workers ending 15 ms apart (one morsel or two); in 53 of one, Q1 from Parquet
/// ran 59.8 -> 57.6 and 63.0 -> 57.4 ms (medians of 15 fresh processes in turns, two calls),
/// where 106 half row groups had run 67.9 -> 70.6 ms.
const WHOLE_MIN_DIVISOR: u64 = 4;

impl Morsel {
    /// The files the morsel reads, each with the runs it reads of it.
    fn files(&self) -> impl Iterator<Item = (usize, Vec<(usize, u64, u64)>)> + '_ {
        self.runs.chunk_by(|a, b| a.0 == b.0).map(|runs| {
            (
                runs[0].0,
                runs.iter().map(|&(_, rg, s, e)| (rg, s, e)).collect(),
            )
        })
    }
}

/// A scan of whole local Parquet files cut into morsels, kept as runs of row groups: grouper's
/// pooled scan reads them as they are ([`super::pooled_scan::over`]), and only DataFusion's
/// scan needs them as a plan ([`CutScan::scan`]), whose access plans hold an entry for every row
/// group of a file in every morsel (SF 10's `lineitem`, 524 row groups, in 524 morsels on 16
/// threads: 275k entries, 9 MB, whose first touch alone cost the H200 host 10-25 ms).
pub(crate) struct CutScan {
    /// The scan that was cut.
    pub(crate) source: Arc<dyn ExecutionPlan>,
    /// Its files, whole, each once.
    pub(crate) files: Vec<PartitionedFile>,
    /// Per file, its row groups' rows.
    row_groups: Vec<Vec<u64>>,
    morsels: Vec<Morsel>,
}

impl CutScan {
    /// Each morsel's runs: `(file, row group, start, end)`, the rows `start..end` of that row
    /// group of `files[file]`.
    pub(crate) fn morsels(&self) -> impl Iterator<Item = &[(usize, usize, u64, u64)]> + '_ {
        self.morsels.iter().map(|m| m.runs.as_slice())
    }

    /// Rows of row group `row_group` of file `file`.
    pub(crate) fn rows(&self, file: usize, row_group: usize) -> Option<u64> {
        self.row_groups.get(file)?.get(row_group).copied()
    }

    /// The cut as DataFusion's scan: one partition a morsel, each file of it with an access
    /// plan of the runs it reads.
    pub(crate) fn scan(&self) -> Option<Arc<dyn ExecutionPlan>> {
        let (cfg, _, _) = local_parquet_files(&self.source)?;
        let groups = self
            .morsels
            .iter()
            .map(|m| {
                let read = m.files().map(|(f, runs)| {
                    let counts = self.row_groups.get(f)?;
                    Some(
                        self.files
                            .get(f)?
                            .clone()
                            .with_extension(access_plan(counts, &runs)),
                    )
                });
                Some(FileGroup::new(read.collect::<Option<Vec<_>>>()?))
            })
            .collect::<Option<Vec<_>>>()?;
        let config = FileScanConfigBuilder::from(cfg.clone())
            .with_file_groups(groups)
            .build();
        Some(DataSourceExec::from_data_source(config))
    }
}

/// `source`, a scan of whole local Parquet files, cut into about `target` morsels: a row group
/// is cut into parts only past `min_rows` rows, and morsels of whole row groups hold at least a
/// [`WHOLE_MIN_DIVISOR`]th of that (fewer where the files hold fewer rows); `None` when it is
/// not such a scan, a footer cannot be read, or it would be a single morsel.
pub(crate) fn cut_scan(
    source: &Arc<dyn ExecutionPlan>,
    target: usize,
    min_rows: usize,
    context: &TaskContext,
) -> Option<CutScan> {
    let (cfg, _, _) = local_parquet_files(source)?;
    if cfg.preserve_order || !cfg.output_ordering.is_empty() {
        return None;
    }
    let files = whole_files(cfg.file_groups.iter().flat_map(|g| g.iter()))?;
    let cache = context
        .runtime_env()
        .cache_manager
        .get_file_metadata_cache();
    let row_groups: Vec<Vec<u64>> = files
        .iter()
        .map(|f| {
            let meta = cached_footer(f, Some(cache.as_ref()))?;
            let rows = meta.row_groups().iter().map(|rg| rg.num_rows());
            rows.map(|n| u64::try_from(n).ok())
                .collect::<Option<Vec<u64>>>()
        })
        .collect::<Option<_>>()?;
    let total: u64 = row_groups.iter().flatten().sum();
    let part_rows = min_rows.max(1) as u64;
    let per = total
        .div_ceil(target.max(1) as u64)
        .max(part_rows.div_ceil(WHOLE_MIN_DIVISOR));
    let morsels = cut(&row_groups, per, part_rows);
    if morsels.len() < 2 {
        return None;
    }
    Some(CutScan {
        source: Arc::clone(source),
        files,
        row_groups,
        morsels,
    })
}

/// [`cut_scan`] as DataFusion's scan ([`CutScan::scan`]), one partition a morsel.
#[cfg(test)]
pub(crate) fn split(
    source: &Arc<dyn ExecutionPlan>,
    target: usize,
    min_rows: usize,
    context: &TaskContext,
) -> Option<Arc<dyn ExecutionPlan>> {
    cut_scan(source, target, min_rows, context)?.scan()
}

/// The scan's files, each once and whole (no byte range), in the scan's order, when each is
/// read whole: by one partition, or in byte ranges that together cover it (DataFusion's own
/// split), and none carries a row selection or access plan; `None` otherwise.
fn whole_files<'a>(
    scanned: impl Iterator<Item = &'a PartitionedFile>,
) -> Option<Vec<PartitionedFile>> {
    let mut files: Vec<(PartitionedFile, Vec<(i64, i64)>)> = Vec::new();
    for f in scanned {
        if f.extension::<ParquetAccessPlan>().is_some()
            || f.extension::<ParquetRowSelection>().is_some()
        {
            return None;
        }
        let size = i64::try_from(f.object_meta.size).ok()?;
        let range = f.range.as_ref().map_or((0, size), |r| (r.start, r.end));
        match files
            .iter_mut()
            .find(|(g, _)| g.object_meta.location == f.object_meta.location)
        {
            Some((_, ranges)) => ranges.push(range),
            None => {
                let mut whole = f.clone();
                whole.range = None;
                files.push((whole, vec![range]));
            }
        }
    }
    let covered = |f: &PartitionedFile, ranges: &mut Vec<(i64, i64)>| {
        ranges.sort_unstable();
        let mut end = 0;
        for &(s, e) in ranges.iter() {
            if s != end || e < s {
                return false;
            }
            end = e;
        }
        u64::try_from(end).ok() == Some(f.object_meta.size)
    };
    let all = files.iter_mut().all(|(f, ranges)| covered(f, ranges));
    (all && !files.is_empty()).then(|| files.into_iter().map(|(f, _)| f).collect())
}

/// Files of `row_groups` (each file's row groups' rows) cut into morsels of about `per` rows:
/// a row group of more rows than `per` and `part_rows` into equal parts of at most the larger
/// of them, each a morsel (one of more rows than `per` but not `part_rows` is a morsel whole);
/// runs of smaller ones, across files too (many small files do not make as many partitions),
/// into morsels of whole row groups, each ending before `per` rows would be passed. Empty row
/// groups are left out.
fn cut(row_groups: &[Vec<u64>], per: u64, part_rows: u64) -> Vec<Morsel> {
    let mut morsels = Vec::new();
    let mut open = Morsel::default();
    let mut rows = 0;
    let mut close = |open: &mut Morsel, rows: &mut u64| {
        if !open.runs.is_empty() {
            morsels.push(std::mem::take(open));
        }
        *rows = 0;
    };
    for (file, counts) in row_groups.iter().enumerate() {
        for (rg, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
            if n > per {
                close(&mut open, &mut rows);
                let parts = n.div_ceil(per.max(part_rows));
                for k in 0..parts {
                    open.runs
                        .push((file, rg, n * k / parts, n * (k + 1) / parts));
                    close(&mut open, &mut rows);
                }
                continue;
            }
            if rows + n > per {
                close(&mut open, &mut rows);
            }
            open.runs.push((file, rg, 0, n));
            rows += n;
        }
    }
    close(&mut open, &mut rows);
    morsels
}

/// The access plan reading `runs` of a file whose row groups hold `counts` rows: a row group
/// read whole is scanned, a part of one selected, the rest skipped.
fn access_plan(counts: &[u64], runs: &[(usize, u64, u64)]) -> ParquetAccessPlan {
    let mut plan = ParquetAccessPlan::new_none(counts.len());
    for &(rg, start, end) in runs {
        let n = counts.get(rg).copied().unwrap_or(end);
        let access = match part(start, end, n) {
            None => RowGroupAccess::Scan,
            Some(s) => RowGroupAccess::Selection(s),
        };
        plan.set(rg, access);
    }
    plan
}

/// The selection of rows `start..end` of a row group of `n` rows; `None` for all of them.
pub(crate) fn part(start: u64, end: u64, n: u64) -> Option<RowSelection> {
    if start == 0 && end >= n {
        return None;
    }
    let selectors = [
        RowSelector::skip(start as usize),
        RowSelector::select(end.saturating_sub(start) as usize),
        RowSelector::skip(n.saturating_sub(end) as usize),
    ];
    let selectors = selectors.into_iter().filter(|s| s.row_count > 0);
    Some(RowSelection::from(selectors.collect::<Vec<_>>()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::file::properties::WriterProperties;
    use datafusion::physical_plan::{collect, ExecutionPlanProperties};
    use datafusion::prelude::SessionContext;

    use super::*;

    /// A row group of more rows than `per` but not `part_rows` is a morsel whole; a larger one
    /// is cut into parts of at most `part_rows`; smaller ones still gather up to `per`.
    #[test]
    fn a_row_group_is_cut_only_past_part_rows() {
        let files = vec![vec![113, 113, 60, 60, 300, 900]];
        let morsels = cut(&files, 150, 400);
        let runs: Vec<_> = morsels.iter().map(|m| m.runs.clone()).collect();
        assert_eq!(
            runs,
            vec![
                vec![(0, 0, 0, 113)],
                vec![(0, 1, 0, 113)],
                vec![(0, 2, 0, 60), (0, 3, 0, 60)],
                vec![(0, 4, 0, 300)],
                vec![(0, 5, 0, 300)],
                vec![(0, 5, 300, 600)],
                vec![(0, 5, 600, 900)],
            ]
        );
    }

    /// Big row groups are cut into equal parts of at most `per` rows, small ones gathered whole
    /// (across files too) until the next would pass `per`; every row of every file is in
    /// exactly one morsel.
    #[test]
    fn morsels_cover_every_row_once_in_parts_of_at_most_per() {
        let files = vec![
            vec![1000, 1000, 300],
            vec![100, 100, 100, 0, 100, 250],
            vec![],
            vec![50],
            vec![60],
        ];
        let morsels = cut(&files, 400, 400);
        let mut seen: Vec<Vec<Vec<bool>>> = files
            .iter()
            .map(|f| f.iter().map(|&n| vec![false; n as usize]).collect())
            .collect();
        for m in &morsels {
            let rows: u64 = m.runs.iter().map(|(_, _, s, e)| e - s).sum();
            assert!(rows > 0 && rows <= 400, "{m:?}");
            for &(f, rg, s, e) in &m.runs {
                for r in s..e {
                    let cell = &mut seen[f][rg][r as usize];
                    assert!(!*cell, "row {r} of row group {rg} of file {f} twice");
                    *cell = true;
                }
            }
        }
        assert!(seen.iter().flatten().flatten().all(|&s| s));
        // 1000 rows: three parts of 333-334; then 300 + 100 (file 1's first); 100 + 100 + 100
        // (the empty one skipped); 250 + 50 + 60 over three files.
        assert_eq!(morsels.len(), 3 + 3 + 1 + 1 + 1);
        assert_eq!(morsels[0].runs, vec![(0, 0, 0, 333)]);
        assert_eq!(morsels[6].runs, vec![(0, 2, 0, 300), (1, 0, 0, 100)]);
        assert_eq!(
            morsels[8].runs,
            vec![(1, 5, 0, 250), (3, 0, 0, 50), (4, 0, 0, 60)]
        );
        let read: Vec<_> = morsels[8]
            .files()
            .map(|(f, runs)| (f, runs.len()))
            .collect();
        assert_eq!(read, vec![(1, 1), (3, 1), (4, 1)]);
    }

    /// A scan of two files of several row groups, cut into morsels: the partitions read every
    /// row exactly once, as the scan did, each partition at most a morsel's rows (DataFusion's
    /// streams, which may take their siblings' unopened files, then take morsels).
    #[tokio::test]
    async fn a_split_scan_reads_each_row_once() {
        let dir = std::env::temp_dir().join(format!("grouper-morsels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
        let mut next = 0i64;
        // 5,000 rows in row groups of 1,500 (the last 500), then 1,200 in row groups of 100.
        for (i, (rows, group)) in [(5000, 1500), (1200, 100)].into_iter().enumerate() {
            let values: Int64Array = (next..next + rows)
                .map(|v| (v % 97 != 0).then_some(v))
                .collect();
            next += rows;
            let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values)]).unwrap();
            let props = WriterProperties::builder()
                .set_max_row_group_row_count(Some(group))
                .set_data_page_row_count_limit(64)
                .set_write_batch_size(64)
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
        // Each partition reads its own morsel: none takes its siblings' unopened ones.
        let config = datafusion::prelude::SessionConfig::new().set_bool(
            "datafusion.execution.enable_file_stream_work_stealing",
            false,
        );
        let ctx = SessionContext::new_with_config(config);
        let path = dir.join("");
        ctx.register_parquet("t", path.to_string_lossy().as_ref(), Default::default())
            .await
            .unwrap();
        let df = ctx.sql("SELECT v FROM t").await.unwrap();
        let scan = df.create_physical_plan().await.unwrap();
        let split = split(&scan, 8, 400, &ctx.task_ctx()).expect("a scan of local files is cut");
        let parts = split.output_partitioning().partition_count();
        // 6,200 rows over 8 is 775 a morsel: the 1,500-row groups in two parts each; the
        // 500-row one with two of the next file's 100-row ones; then seven, then three of them.
        assert_eq!(parts, 3 * 2 + 1 + 1 + 1);
        let mut values = Vec::new();
        let mut nulls = 0;
        for p in 0..parts {
            let batches = split.execute(p, ctx.task_ctx()).unwrap();
            let batches: Vec<RecordBatch> =
                futures::TryStreamExt::try_collect(batches).await.unwrap();
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            assert!((1..=775).contains(&rows), "partition {p}: {rows} rows");
            for b in &batches {
                let v = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                nulls += v.null_count();
                values.extend(v.iter().flatten());
            }
        }
        values.sort_unstable();
        let expected: Vec<i64> = (0..next).filter(|v| v % 97 != 0).collect();
        assert_eq!(values, expected);
        assert_eq!(nulls, (0..next).filter(|v| v % 97 == 0).count());
        // The scan as DataFusion planned it reads as many rows.
        let whole = collect(Arc::clone(&scan), ctx.task_ctx()).await.unwrap();
        let rows: usize = whole.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, next as usize);
        // DataFusion's byte ranges, which together cover each file, are cut alike.
        let mut options = datafusion::config::ConfigOptions::new();
        options.optimizer.repartition_file_min_size = 0;
        let ranged = scan.repartitioned(3, &options).unwrap().expect("ranges");
        assert!(
            format!("{ranged:?}").contains("0.parquet:0.."),
            "{ranged:?}"
        );
        let again = super::split(&ranged, 8, 400, &ctx.task_ctx())
            .expect("ranges covering the files are cut");
        assert_eq!(again.output_partitioning().partition_count(), parts);
        // Already cut: left alone.
        assert!(super::split(&split, 8, 400, &ctx.task_ctx()).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A query grouper's CPU runs on 8 threads over files large enough to be cut (row groups
    /// of 300,000 and 100,000 rows: the large ones in parts, a file's last small one gathered
    /// with the next file's first) answers as DataFusion does, filter and NULLs included.
    #[tokio::test]
    async fn an_aggregation_over_cut_files_answers_as_datafusion() {
        use crate::test_support::{answer_lines, physical_plan};
        use crate::{session_context, Backend, GrouperConfig};

        let dir = std::env::temp_dir().join(format!("grouper-morsels-q-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, true),
        ]));
        let batch = |rows: std::ops::Range<i64>| {
            let k: Int64Array = rows.clone().map(|r| (r * 7919) % 13).collect();
            let v: Int64Array = rows.map(|r| (r % 101 != 0).then_some(r)).collect();
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(k), Arc::new(v)]).unwrap()
        };
        // File 0: row groups of 300,000 and 100,000 rows; file 1: 100,000 and 300,000.
        for (i, groups) in [[300_000i64, 100_000], [100_000, 300_000]]
            .iter()
            .enumerate()
        {
            let file = std::fs::File::create(dir.join(format!("{i}.parquet"))).unwrap();
            let mut w =
                datafusion::parquet::arrow::ArrowWriter::try_new(file, Arc::clone(&schema), None)
                    .unwrap();
            let mut start = i as i64 * 400_000;
            for &n in groups {
                w.write(&batch(start..start + n)).unwrap();
                w.flush().unwrap();
                start += n;
            }
            w.finish().unwrap();
        }
        let path = dir.join("");
        let sql = "SELECT k, sum(v), count(v), count(*), min(v) FROM t WHERE v % 3 <> 1 GROUP BY k";
        let mut answers = Vec::new();
        for backend in [Backend::Cpu, Backend::DataFusion] {
            let ctx = session_context(&GrouperConfig {
                backend,
                threads: Some(8),
                ..Default::default()
            })
            .unwrap();
            ctx.register_parquet("t", path.to_string_lossy().as_ref(), Default::default())
                .await
                .unwrap();
            if backend == Backend::Cpu {
                // What the workers' morsels are (8 threads: 800,000 rows over at least 8
                // morsels is 100,000 a morsel; parts of 2^18 rows at least, `MIN_MORSEL_ROWS`):
                // 300,000 rows in two parts, each 100,000-row group whole, 300,000 in two parts.
                let scan = physical_plan(&ctx, "SELECT k, v FROM t").await;
                let cut = super::split(&scan, 8, 1 << 18, &ctx.task_ctx()).unwrap();
                assert_eq!(cut.output_partitioning().partition_count(), 6);
            }
            let plan = physical_plan(&ctx, sql).await;
            let batches = collect(plan, ctx.task_ctx()).await.unwrap();
            answers.push(answer_lines(&batches, false));
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(answers[0].len() >= 13, "{:?}", answers[0]);
        assert_eq!(answers[0], answers[1]);
    }
}
