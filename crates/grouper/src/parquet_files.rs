//! What a scan of local Parquet files reads, and the order its files keep a column in: facts a
//! plan-time rule takes from the files' footers, before any row is read.
//!
//! A file written in key order (TPC-H's `lineitem` by `l_orderkey`) has row groups whose key
//! ranges increase without overlapping; DataFusion gives each scan partition a run of whole row
//! groups, so each of grouper's workers then sees a run of the keys, in order. DataFusion's
//! statistics merge the row groups into one range per file and say nothing of that order.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::parquet::basic::{Encoding, PageType, Type as PhysicalType};
use datafusion::parquet::column::page::Page;
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use datafusion::parquet::file::reader::FileReader;
use datafusion::parquet::file::serialized_reader::SerializedFileReader;
use datafusion::parquet::file::statistics::Statistics;
use datafusion::parquet::schema::types::SchemaDescriptor;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;

/// The scan's configuration and its Parquet source, and the local files it reads (each once,
/// in the scan's order), when `source` is a scan of local Parquet files without partition
/// columns; `None` otherwise.
pub(crate) fn local_parquet_files(
    source: &Arc<dyn ExecutionPlan>,
) -> Option<(&FileScanConfig, &ParquetSource, Vec<PathBuf>)> {
    let ds = source.downcast_ref::<DataSourceExec>()?;
    let cfg = (ds.data_source().as_ref() as &dyn std::any::Any).downcast_ref::<FileScanConfig>()?;
    let parquet =
        (cfg.file_source().as_ref() as &dyn std::any::Any).downcast_ref::<ParquetSource>()?;
    if !cfg.table_partition_cols().is_empty() || cfg.object_store_url.as_str() != "file:///" {
        return None;
    }
    let files = scan_files(cfg);
    if files.iter().any(|f| !f.partition_values.is_empty()) {
        return None;
    }
    Some((cfg, parquet, files.into_iter().map(local_path).collect()))
}

/// The files a scan configured by `cfg` reads, each once (a file split into byte ranges is in
/// several groups), in the scan's order.
pub(crate) fn scan_files(cfg: &FileScanConfig) -> Vec<&PartitionedFile> {
    let mut files: Vec<&PartitionedFile> = Vec::new();
    for f in cfg.file_groups.iter().flat_map(|g| g.iter()) {
        if !files
            .iter()
            .any(|g| g.object_meta.location == f.object_meta.location)
        {
            files.push(f);
        }
    }
    files
}

/// The local path of a file of a `file:///` scan (its object path is the path without the
/// leading `/`).
pub(crate) fn local_path(f: &PartitionedFile) -> PathBuf {
    PathBuf::from(format!("/{}", f.object_meta.location.as_ref()))
}

/// The file column each output column of `source`, a scan configured by `cfg`, reads, in output
/// order, when every one is a plain column of the files (no expression or alias evaluated in
/// the scan).
pub(crate) fn scan_columns(
    cfg: &FileScanConfig,
    source: &Arc<dyn ExecutionPlan>,
) -> Option<Vec<String>> {
    let file_schema = cfg.file_schema();
    let mut columns = Vec::new();
    match cfg.file_source().projection() {
        Some(projection) => {
            for p in projection.iter() {
                let col = p.expr.downcast_ref::<Column>()?;
                let field = file_schema.fields().get(col.index())?;
                if field.name() != col.name() || p.alias != *col.name() {
                    return None;
                }
                columns.push(col.name().to_string());
            }
        }
        None => columns.extend(file_schema.fields().iter().map(|f| f.name().clone())),
    }
    (columns.len() == source.schema().fields().len()).then_some(columns)
}

/// Whether every file holds the top-level integer column `name` (INT32 or INT64, signed) in
/// increasing order over its row groups (each row group's maximum below the next one's minimum,
/// every row group with both in its footer), and no two files share a key (their ranges do not
/// overlap): then any run of files a worker reads holds keys no other worker's does. Files of
/// one row group each are in order by themselves, so without the second condition 300 files
/// of the same 97 keys counted as ordered too. Files are read through their footers only
/// (from `cache` where it holds them, [`cached_footer`]); a file that cannot be read, or a
/// column without statistics, is not in order.
pub(crate) fn row_groups_in_order(
    files: &[&PartitionedFile],
    name: &str,
    cache: Option<&FileMetadataCache>,
) -> bool {
    let mut ranges = Vec::with_capacity(files.len());
    for f in files {
        match cached_footer(f, cache).and_then(|meta| file_key_range(&meta, name)) {
            Some(Some(range)) => ranges.push(range),
            Some(None) => {}
            None => return false,
        }
    }
    ranges.sort_unstable();
    !files.is_empty()
        && ranges
            .iter()
            .zip(ranges.iter().skip(1))
            .all(|(a, b)| a.1 < b.0)
}

/// The index of the top-level (not nested) leaf column `name` in a file's schema.
pub(crate) fn top_level_column(schema: &SchemaDescriptor, name: &str) -> Option<usize> {
    (0..schema.num_columns()).find(|&i| {
        let c = schema.column(i);
        c.path().parts().len() == 1 && c.name() == name
    })
}

/// The footer of local Parquet file `path`, when it can be opened and read.
fn footer(path: &Path) -> Option<ParquetMetaData> {
    let file = std::fs::File::open(path).ok()?;
    ParquetMetaDataReader::new().parse_and_finish(&file).ok()
}

/// The footer of local Parquet file `f`: DataFusion's, from the session's file metadata cache
/// (`cache`, where the caller has the session's) where it holds one for the file as it is now
/// (same size and modification time; DataFusion fills it when it infers a table's schema),
/// else parsed from the file. A footer is parsed
/// in full each time: tpchgen-cli's SF 10 `lineitem` (365 row groups) has a 1 MB one, a few
/// milliseconds a parse.
pub(crate) fn cached_footer(
    f: &PartitionedFile,
    cache: Option<&FileMetadataCache>,
) -> Option<Arc<ParquetMetaData>> {
    let cached = cache
        .and_then(|cache| cache.get(&f.object_meta.location))
        .filter(|entry| entry.is_valid_for(&f.object_meta))
        .and_then(|entry| {
            let metadata = entry.file_metadata.as_any();
            let parquet = metadata.downcast_ref::<CachedParquetMetaData>()?;
            Some(Arc::clone(parquet.parquet_metadata()))
        });
    cached.or_else(|| footer(&local_path(f)).map(Arc::new))
}

/// The range of integer column `name` in the file of footer `meta` when its row groups hold it
/// in increasing order (`Some(None)` for a file of no row groups); `None` when they do not, or
/// its statistics cannot be read.
fn file_key_range(meta: &ParquetMetaData, name: &str) -> Option<Option<(i64, i64)>> {
    let schema = meta.file_metadata().schema_descr();
    let column = top_level_column(schema, name)?;
    let mut range: Option<(i64, i64)> = None;
    for rg in meta.row_groups() {
        let (lo, hi) = match rg.column(column).statistics()? {
            Statistics::Int32(s) => (i64::from(*s.min_opt()?), i64::from(*s.max_opt()?)),
            Statistics::Int64(s) => (*s.min_opt()?, *s.max_opt()?),
            _ => return None,
        };
        if lo > hi || range.is_some_and(|(_, last)| last >= lo) {
            return None;
        }
        range = Some((range.map_or(lo, |(first, _)| first), hi));
    }
    Some(range)
}

/// Bytes (page header included, as the footer's offsets bound it) above which a column chunk's
/// dictionary page is not read by [`dictionary_values`]: a dictionary of a few short strings
/// takes tens of bytes; one of a high-cardinality column takes up to a megabyte.
const SMALL_DICTIONARY_PAGE: i64 = 4 << 10;

/// Whether a key of type `t` is a string, whose values [`dictionary_values`] may list.
pub(crate) fn string_type(t: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType;
    matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8)
}

/// The distinct values of the top-level string column `name` over every column chunk of
/// `files`, read from their dictionary pages, when each chunk has a small one (the footer
/// bounds it before a page is read), its data pages are all dictionary-encoded (where the
/// footer says), and there are at most `limit` of them in all; `None` otherwise (a file that
/// cannot be read, a chunk without a dictionary, more values, more than `max_chunks` chunks).
/// One small read per chunk (from the page cache): the footers alone bound no string
/// column's cardinality, and `max_chunks` bounds what planning spends on it.
pub(crate) fn dictionary_values(
    files: &[PathBuf],
    name: &str,
    limit: usize,
    max_chunks: usize,
) -> Option<usize> {
    let mut values: HashSet<Vec<u8>> = HashSet::new();
    let mut chunks = 0usize;
    for path in files {
        let reader = SerializedFileReader::new(std::fs::File::open(path).ok()?).ok()?;
        let meta = reader.metadata();
        let schema = meta.file_metadata().schema_descr();
        let column = top_level_column(schema, name)?;
        if schema.column(column).physical_type() != PhysicalType::BYTE_ARRAY {
            return None;
        }
        for (g, rg) in meta.row_groups().iter().enumerate() {
            chunks += 1;
            if chunks > max_chunks {
                return None;
            }
            let chunk = rg.column(column);
            let page_bytes = chunk.data_page_offset() - chunk.dictionary_page_offset()?;
            let all_dictionary = chunk.page_encoding_stats().is_none_or(|stats| {
                stats.iter().all(|s| {
                    s.page_type == PageType::DICTIONARY_PAGE
                        || matches!(
                            s.encoding,
                            Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY
                        )
                })
            });
            if !(0..=SMALL_DICTIONARY_PAGE).contains(&page_bytes) || !all_dictionary {
                return None;
            }
            let page = reader
                .get_row_group(g)
                .ok()?
                .get_column_page_reader(column)
                .ok()?
                .get_next_page()
                .ok()??;
            let Page::DictionaryPage {
                buf,
                num_values,
                encoding,
                ..
            } = page
            else {
                return None;
            };
            if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
                return None;
            }
            // PLAIN byte arrays: each a 4-byte little-endian length, then its bytes.
            let mut rest: &[u8] = &buf;
            for _ in 0..num_values {
                let (len, tail) = rest.split_first_chunk::<4>()?;
                let len = u32::from_le_bytes(*len) as usize;
                let value = tail.get(..len)?;
                rest = tail.get(len..)?;
                if values.insert(value.to_vec()) && values.len() > limit {
                    return None;
                }
            }
        }
    }
    Some(values.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;

    /// A file of `keys` (and their text) in row groups of 4 rows.
    fn file(name: &str, keys: &[i32]) -> PathBuf {
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(4));
        file_with(name, keys, props.build())
    }

    /// A file of `keys` (column `k`) and their text (`s`) written with `props`.
    fn file_with(name: &str, keys: &[i32], props: WriterProperties) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("grouper-order-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            Arc::clone(&schema),
            Some(props),
        )
        .unwrap();
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(keys.to_vec())),
                Arc::new(StringArray::from_iter_values(
                    keys.iter().map(|k| format!("{k}")),
                )),
            ],
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    }

    #[test]
    fn dictionary_pages_list_a_string_columns_values() {
        // `s` holds each key's text: 4 values in row groups of 4 rows, one file after another.
        let a = file("dict-a.parquet", &[1, 2, 1, 2, 3, 1, 2, 3]);
        let b = file("dict-b.parquet", &[4, 4, 1, 2]);
        let values = |files: &[PathBuf], name: &str, limit: usize| {
            dictionary_values(files, name, limit, 100)
        };
        assert_eq!(values(std::slice::from_ref(&a), "s", 8), Some(3));
        assert_eq!(values(&[a.clone(), b.clone()], "s", 8), Some(4));
        // More chunks than allowed (the two files hold 3), more values than the limit, an
        // integer column, a missing one, a file that is not Parquet.
        assert_eq!(
            dictionary_values(&[a.clone(), b.clone()], "s", 8, 3),
            Some(4)
        );
        assert_eq!(dictionary_values(&[a.clone(), b.clone()], "s", 8, 2), None);
        assert_eq!(values(&[a.clone(), b], "s", 3), None);
        assert_eq!(values(std::slice::from_ref(&a), "k", 8), None);
        assert_eq!(values(std::slice::from_ref(&a), "x", 8), None);
        let junk = a.with_file_name("dict-junk.parquet");
        std::fs::write(&junk, b"not parquet").unwrap();
        assert_eq!(values(&[junk], "s", 8), None);
        // A column written without dictionaries says nothing.
        let no_dictionary = WriterProperties::builder().set_dictionary_enabled(false);
        let plain = file_with("dict-plain.parquet", &[1, 2, 1], no_dictionary.build());
        assert_eq!(values(&[plain], "s", 8), None);
    }

    /// [`row_groups_in_order`] over local files as a scan lists them (no metadata cache).
    fn in_order(files: &[PathBuf], name: &str) -> bool {
        let files: Vec<PartitionedFile> = files
            .iter()
            .map(|p| {
                let size = std::fs::metadata(p).map_or(0, |m| m.len());
                PartitionedFile::new(p.to_string_lossy().trim_start_matches('/'), size)
            })
            .collect();
        row_groups_in_order(&files.iter().collect::<Vec<_>>(), name, None)
    }

    #[test]
    fn row_groups_are_in_order_when_each_range_ends_below_the_next() {
        let sorted = file("sorted.parquet", &[1, 1, 2, 3, 5, 6, 6, 9, 10, 10]);
        // Inside a row group order does not matter; across them it does.
        let inner = file("inner.parquet", &[3, 1, 2, 3, 9, 5, 6, 6, 12, 10]);
        assert!(in_order(std::slice::from_ref(&sorted), "k"));
        assert!(in_order(std::slice::from_ref(&inner), "k"));
        // A key in two row groups (3 ends one and starts the next), ranges out of order.
        let touching = file("touching.parquet", &[1, 2, 3, 3, 3, 4, 5, 6]);
        let backwards = file("backwards.parquet", &[9, 9, 9, 9, 1, 2, 3, 4]);
        for f in [&touching, &backwards] {
            assert!(!in_order(&[sorted.clone(), f.clone()], "k"), "{f:?}");
        }
        // Files in order each, sharing keys: a worker's run of files would share them too.
        let again = file("again.parquet", &[1, 1, 2, 3, 5, 6, 6, 9, 10, 10]);
        let single = file("single.parquet", &[4, 7]);
        assert!(!in_order(&[sorted.clone(), again], "k"));
        assert!(!in_order(&[sorted.clone(), single.clone()], "k"));
        let later = file("later.parquet", &[11, 12]);
        assert!(in_order(&[later, single], "k"));
        // Strings, a missing column, no file, a file that is not Parquet.
        assert!(!in_order(std::slice::from_ref(&sorted), "s"));
        assert!(!in_order(std::slice::from_ref(&sorted), "x"));
        assert!(!in_order(&[], "k"));
        let junk = sorted.with_file_name("junk.parquet");
        std::fs::write(&junk, b"not parquet").unwrap();
        assert!(!in_order(&[junk], "k"));
    }
}
