//! Local Parquet files read through memory maps, for the fused CPU pipeline's scan.
//!
//! DataFusion reads a column chunk of a local file by allocating a zeroed buffer and copying the
//! bytes into it (`object_store`'s local reads). In a fresh process each such buffer is new
//! memory: TPC-H Q1 at SF 1 on 2 threads spent a quarter of its CPU time in the kernel zeroing
//! the pages those buffers touched for the first time (`clear_page`), plus the zeroing and the
//! copy themselves. Mapped, the file's bytes are the page cache's own pages: a column chunk is
//! a slice of the map, with nothing allocated, zeroed or copied; Parquet pages stored without
//! compression are decoded straight from it.
//!
//! The footer still comes from the scan's own reader (DataFusion's, with the metadata cache it
//! shares with planning); only the byte ranges of column chunks are served from the map, so this
//! is for local files only, whose bytes are the file's. A file that cannot be mapped, or whose
//! length differs from the one the scan was planned with, is read by the scan's reader as
//! before.
//!
//! Not under a memory limit ([`maps_files`]): a mapped page the scan has touched counts in the
//! process's resident set until the map goes, so a scan of a file larger than the limit kept
//! the whole file resident (db-benchmark q10's shape at 1e8 rows under `--memory-limit 2G` on
//! 16 threads: 7.7 GiB peak RSS, its 3.2 GB file among it). Read by the scan's reader, a column
//! chunk's buffer is freed once decoded.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::parquet::arrow::arrow_reader::ArrowReaderOptions;
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
use datafusion::parquet::errors::{ParquetError, Result as ParquetResult};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::future::{BoxFuture, FutureExt};

use crate::parquet_files::local_path;

/// Makes readers whose byte ranges come from a memory map of each local file (one map a file,
/// shared by every partition reading it) and whose footers come from `inner`.
pub(crate) struct MappedReaderFactory {
    inner: Arc<dyn ParquetFileReaderFactory>,
    maps: Mutex<HashMap<PathBuf, Option<Bytes>>>,
}

impl fmt::Debug for MappedReaderFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedReaderFactory")
            .finish_non_exhaustive()
    }
}

impl MappedReaderFactory {
    /// Readers over the maps, footers from `inner` (the scan's own reader of the same files).
    pub(crate) fn new(inner: Arc<dyn ParquetFileReaderFactory>) -> Self {
        Self {
            inner,
            maps: Mutex::new(HashMap::new()),
        }
    }

    /// The whole of file `path` mapped, when it can be and is `size` bytes long.
    fn map(&self, path: PathBuf, size: u64) -> Option<Bytes> {
        let mut maps = self.maps.lock().unwrap_or_else(PoisonError::into_inner);
        maps.entry(path)
            .or_insert_with_key(|path| map_file(path, size))
            .clone()
    }
}

/// Whether scans under `context` read files through maps: not when its memory pool has a limit
/// (see the module's doc).
pub(crate) fn maps_files(context: &datafusion::execution::TaskContext) -> bool {
    !matches!(
        context.memory_pool().memory_limit(),
        datafusion::execution::memory_pool::MemoryLimit::Finite(_)
    )
}

/// `path` mapped read-only, as bytes; `None` when it cannot be opened or mapped or its length is
/// not `size`.
pub(crate) fn map_file(path: &PathBuf, size: u64) -> Option<Bytes> {
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() != size || size == 0 {
        return None;
    }
    // SAFETY: the map is of a file opened read-only, and nothing in this process writes to
    // it. Its bytes are read only through the `Bytes` made from it, which keeps the map alive
    // for as long as any slice of it is. What no mapping can rule out is another process
    // truncating the file while it is read (a read past the new end faults); a Parquet file
    // under a query is not rewritten in place by the tools that write them (they write a new
    // file), and DataFusion's own reader would then read a torn file too.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    Some(Bytes::from_owner(map))
}

impl ParquetFileReaderFactory for MappedReaderFactory {
    fn create_reader(
        &self,
        partition_index: usize,
        partitioned_file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> datafusion::error::Result<Box<dyn AsyncFileReader + Send>> {
        let path = local_path(&partitioned_file);
        let size = partitioned_file.object_meta.size;
        let inner = self.inner.create_reader(
            partition_index,
            partitioned_file,
            metadata_size_hint,
            metrics,
        )?;
        Ok(match self.map(path, size) {
            Some(bytes) => Box::new(MappedReader { inner, bytes }),
            None => inner,
        })
    }
}

/// A file's byte ranges from its map; its footer from DataFusion's reader.
struct MappedReader {
    inner: Box<dyn AsyncFileReader + Send>,
    bytes: Bytes,
}

impl MappedReader {
    fn slice(&self, range: Range<u64>) -> ParquetResult<Bytes> {
        let len = self.bytes.len() as u64;
        if range.start > range.end || range.end > len {
            return Err(ParquetError::General(format!(
                "byte range {range:?} outside a file of {len} bytes"
            )));
        }
        Ok(self.bytes.slice(range.start as usize..range.end as usize))
    }
}

impl AsyncFileReader for MappedReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, ParquetResult<Bytes>> {
        let bytes = self.slice(range);
        async move { bytes }.boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, ParquetResult<Vec<Bytes>>> {
        let bytes = ranges.into_iter().map(|r| self.slice(r)).collect();
        async move { bytes }.boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, ParquetResult<Arc<ParquetMetaData>>> {
        self.inner.get_metadata(options)
    }
}
