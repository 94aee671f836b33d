//! Parquet pages decompressed into buffers a scan reuses, for [`super::pooled_scan`].
//!
//! Arrow's page reader decompresses every page into a fresh buffer that it first fills with
//! zeros, and frees it once the page is decoded. A fresh process has no freed memory to hand
//! back, so each such buffer is new memory the kernel zeroes again on first touch (TPC-H Q1 from
//! Parquet at SF 10 on 2 threads here: the zero-fill 3.7% of the CPU time, the kernel's
//! `clear_page` 3.3%, `perf`). Here a column chunk's pages are read undecompressed (the reader
//! is told the chunk is stored plain) and each is decompressed into a buffer of the scan's pool,
//! which returns there when the last slice of the page is dropped: after the first pages, no
//! allocation, no zero-fill and no fault. Snappy only (tpchgen-cli's, DuckDB's and pyarrow's
//! default); a chunk compressed otherwise is read by arrow's reader as before.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use datafusion::parquet::arrow::arrow_reader::RowGroups;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use datafusion::parquet::errors::{ParquetError, Result};
use datafusion::parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use datafusion::parquet::file::properties::ReaderProperties;
use datafusion::parquet::file::serialized_reader::SerializedPageReader;

/// Spare bytes a pool keeps for each thread reading: a page per column being read and its
/// dictionary page, with room (tpchgen-cli's pages are about 1 MiB).
const SPARE_BYTES_PER_THREAD: usize = 16 << 20;

/// A scan's spare page buffers, shared by its partitions. Each keeps its initialized length (it
/// is never zeroed again), so a page that fits one is decompressed into it as it is.
#[derive(Debug)]
pub(crate) struct PagePool {
    spare: Mutex<Spare>,
    most: usize,
}

#[derive(Debug, Default)]
struct Spare {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl PagePool {
    /// A pool for a scan read by `threads` threads at once.
    pub(crate) fn new(threads: usize) -> Self {
        Self {
            spare: Mutex::new(Spare::default()),
            most: SPARE_BYTES_PER_THREAD.saturating_mul(threads.max(1)),
        }
    }

    /// A buffer of at least `len` initialized bytes.
    fn take(&self, len: usize) -> Vec<u8> {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        // The smallest spare that fits, else the largest (grown once): a small dictionary page
        // does not take the buffer a large data page would fit.
        let buffers = &mut spare.buffers;
        let fits = (0..buffers.len()).filter(|&i| buffers[i].len() >= len);
        let best = fits
            .min_by_key(|&i| buffers[i].len())
            .or_else(|| (0..buffers.len()).max_by_key(|&i| buffers[i].len()));
        let mut buf = best.map(|i| buffers.swap_remove(i)).unwrap_or_default();
        spare.bytes -= buf.len();
        drop(spare);
        if buf.len() < len {
            buf.resize(len, 0);
        }
        buf
    }

    /// Takes `buf` back while the pool keeps less than its most.
    fn give(&self, buf: Vec<u8>) {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.bytes + buf.len() <= self.most {
            spare.bytes += buf.len();
            spare.buffers.push(buf);
        }
    }
}

/// A page's bytes in a pool buffer, given back when the last `Bytes` slice of it is dropped.
struct Pooled {
    buf: Vec<u8>,
    len: usize,
    pool: Arc<PagePool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

/// `prefix` then `compressed` snappy-decompressed, in a buffer of `pool`; an error where the
/// page would pass `most` bytes (a malformed length must not become an allocation). An empty
/// `compressed` is no values (parquet-java writes all-NULL v2 pages so), not a snappy stream.
fn decompress(
    pool: &Arc<PagePool>,
    prefix: &[u8],
    compressed: &[u8],
    most: usize,
) -> Result<Bytes> {
    let n = match compressed {
        [] => 0,
        _ => snap::raw::decompress_len(compressed)
            .map_err(|e| ParquetError::General(format!("snappy page: {e}")))?,
    };
    let len = prefix.len() + n;
    if len > most {
        return Err(ParquetError::General(format!(
            "a snappy page of {len} bytes in a column chunk of {most}"
        )));
    }
    let mut buf = pool.take(len);
    buf[..prefix.len()].copy_from_slice(prefix);
    if n > 0 {
        let wrote = snap::raw::Decoder::new()
            .decompress(compressed, &mut buf[prefix.len()..len])
            .map_err(|e| ParquetError::General(format!("snappy page: {e}")))?;
        if wrote != n {
            return Err(ParquetError::General(format!(
                "snappy page of {wrote} bytes where its header says {n}"
            )));
        }
    }
    let pool = Arc::clone(pool);
    Ok(Bytes::from_owner(Pooled { buf, len, pool }))
}

/// The pages of a snappy column chunk, read as stored and decompressed into pool buffers.
struct SnappyPages {
    inner: SerializedPageReader<Bytes>,
    pool: Arc<PagePool>,
    /// The chunk's uncompressed bytes (its footer's): no page of it is larger.
    most: usize,
}

impl SnappyPages {
    fn decompressed(&self, page: Page) -> Result<Page> {
        Ok(match page {
            Page::DataPage {
                buf,
                num_values,
                encoding,
                def_level_encoding,
                rep_level_encoding,
                statistics,
            } => Page::DataPage {
                buf: decompress(&self.pool, &[], &buf, self.most)?,
                num_values,
                encoding,
                def_level_encoding,
                rep_level_encoding,
                statistics,
            },
            Page::DataPageV2 {
                buf,
                num_values,
                encoding,
                num_nulls,
                num_rows,
                def_levels_byte_len,
                rep_levels_byte_len,
                is_compressed,
                statistics,
            } => {
                // The levels come first and are never compressed.
                let levels = def_levels_byte_len as usize + rep_levels_byte_len as usize;
                let buf = match (is_compressed, buf.get(..levels), buf.get(levels..)) {
                    (false, _, _) => buf,
                    (true, Some(prefix), Some(values)) => {
                        decompress(&self.pool, prefix, values, self.most)?
                    }
                    _ => return Err(ParquetError::General("page levels past its end".into())),
                };
                Page::DataPageV2 {
                    buf,
                    num_values,
                    encoding,
                    num_nulls,
                    num_rows,
                    def_levels_byte_len,
                    rep_levels_byte_len,
                    is_compressed,
                    statistics,
                }
            }
            Page::DictionaryPage {
                buf,
                num_values,
                encoding,
                is_sorted,
            } => Page::DictionaryPage {
                buf: decompress(&self.pool, &[], &buf, self.most)?,
                num_values,
                encoding,
                is_sorted,
            },
        })
    }
}

impl Iterator for SnappyPages {
    type Item = Result<Page>;

    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

impl PageReader for SnappyPages {
    fn get_next_page(&mut self) -> Result<Option<Page>> {
        self.inner
            .get_next_page()?
            .map(|p| self.decompressed(p))
            .transpose()
    }

    fn peek_next_page(&mut self) -> Result<Option<PageMetadata>> {
        self.inner.peek_next_page()
    }

    fn skip_next_page(&mut self) -> Result<()> {
        self.inner.skip_next_page()
    }

    fn at_record_boundary(&mut self) -> Result<bool> {
        self.inner.at_record_boundary()
    }
}

/// One row group of a mapped file, its snappy chunks' pages decompressed into `pool`.
pub(crate) struct PooledRowGroup<'a> {
    pub(crate) file: &'a Bytes,
    pub(crate) metadata: &'a ParquetMetaData,
    pub(crate) row_group: usize,
    pub(crate) pool: &'a Arc<PagePool>,
}

impl PooledRowGroup<'_> {
    fn group(&self) -> Result<&RowGroupMetaData> {
        let n = self.metadata.num_row_groups();
        (self.row_group < n)
            .then(|| self.metadata.row_group(self.row_group))
            .ok_or_else(|| ParquetError::General(format!("row group {} of {n}", self.row_group)))
    }

    /// Column `i`'s pages: snappy ones read as stored and decompressed here, others by arrow.
    fn pages(&self, i: usize) -> Result<Box<dyn PageReader>> {
        let group = self.group()?;
        let chunk = group.columns().get(i).ok_or_else(|| {
            ParquetError::General(format!("column {i} of {}", group.num_columns()))
        })?;
        let rows = usize::try_from(group.num_rows())
            .map_err(|_| ParquetError::General("negative row count".into()))?;
        let locations = self
            .metadata
            .offset_index()
            .and_then(|o| o.get(self.row_group))
            .and_then(|rg| rg.get(i))
            .map(|o| o.page_locations().clone());
        let props = Arc::new(ReaderProperties::builder().build());
        let file = Arc::new(self.file.clone());
        // (A footer without the chunk's size gives no bound to check pages against.)
        if chunk.compression() != Compression::SNAPPY || chunk.uncompressed_size() <= 0 {
            let pages =
                SerializedPageReader::new_with_properties(file, chunk, rows, locations, props)?;
            return Ok(Box::new(pages));
        }
        let stored = chunk
            .clone()
            .into_builder()
            .set_compression(Compression::UNCOMPRESSED)
            .build()?;
        let inner =
            SerializedPageReader::new_with_properties(file, &stored, rows, locations, props)?;
        Ok(Box::new(SnappyPages {
            inner,
            pool: Arc::clone(self.pool),
            most: usize::try_from(chunk.uncompressed_size()).unwrap_or(0),
        }))
    }
}

/// The one page reader of a column chunk.
struct OneChunk(Option<Result<Box<dyn PageReader>>>);

impl Iterator for OneChunk {
    type Item = Result<Box<dyn PageReader>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.take()
    }
}

impl PageIterator for OneChunk {}

impl RowGroups for PooledRowGroup<'_> {
    fn num_rows(&self) -> usize {
        self.group()
            .ok()
            .and_then(|g| usize::try_from(g.num_rows()).ok())
            .unwrap_or(0)
    }

    fn column_chunks(&self, i: usize) -> Result<Box<dyn PageIterator>> {
        Ok(Box::new(OneChunk(Some(self.pages(i)))))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(self.group().ok().into_iter())
    }

    fn metadata(&self) -> &ParquetMetaData {
        self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer given back is taken again without growing (the smallest that fits), and a
    /// pool keeps no more than its most.
    #[test]
    fn buffers_are_reused_and_the_pool_is_bounded() {
        let pool = PagePool::new(1);
        let big = pool.take(1 << 20);
        let small = pool.take(100);
        let (big_at, small_at) = (big.as_ptr(), small.as_ptr());
        pool.give(big);
        pool.give(small);
        let again = pool.take(50);
        assert_eq!(again.as_ptr(), small_at);
        let again_big = pool.take(1000);
        assert_eq!(again_big.as_ptr(), big_at);
        assert_eq!(again_big.len(), 1 << 20);
        for _ in 0..40 {
            pool.give(vec![0; 1 << 20]);
        }
        let spare = pool.spare.lock().unwrap();
        assert!(spare.bytes <= SPARE_BYTES_PER_THREAD);
        assert_eq!(
            spare.bytes,
            spare.buffers.iter().map(Vec::len).sum::<usize>()
        );
    }

    /// A page decompressed from snappy equals its bytes, after the given prefix.
    #[test]
    fn snappy_pages_decompress_after_their_levels() {
        let pool = Arc::new(PagePool::new(1));
        let values: Vec<u8> = (0..10_000u32)
            .flat_map(|v| (v % 251).to_le_bytes())
            .collect();
        let compressed = snap::raw::Encoder::new().compress_vec(&values).unwrap();
        let page = decompress(&pool, &[7, 8, 9], &compressed, 1 << 20).unwrap();
        assert_eq!(&page[..3], &[7, 8, 9]);
        assert_eq!(&page[3..], &values[..]);
        drop(page);
        // Given back on drop, reused for the next page.
        assert_eq!(pool.spare.lock().unwrap().buffers.len(), 1);
        assert!(decompress(&pool, &[], &compressed[..10], 1 << 20).is_err());
        // A length past the chunk's is refused before anything is allocated.
        assert!(decompress(&pool, &[], &compressed, 1000).is_err());
        // No values: the levels alone.
        assert_eq!(&decompress(&pool, &[1, 2], &[], 1000).unwrap()[..], &[1, 2]);
    }
}
