//! A Parquet file read with positional reads (`pread`), so that CPU workers read row groups of
//! one file at once: the parquet crate's reader over a `File` clones the handle, whose clones
//! share one file offset — concurrent readers would read each other's bytes. The page stream
//! reads each column chunk whole, once ([`ChunkBytes`]).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use parquet::errors::{ParquetError, Result};
use parquet::file::reader::{ChunkReader, Length};

/// A file shared by readers that each keep their own position.
#[derive(Clone)]
pub struct Positional {
    file: Arc<File>,
    len: u64,
}

impl Positional {
    /// `file`, read at positions.
    pub fn new(file: File) -> std::io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(Self {
            file: Arc::new(file),
            len,
        })
    }
}

/// A reader from one position of a [`Positional`] file onwards.
pub struct At {
    file: Arc<File>,
    pos: u64,
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Length for Positional {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for Positional {
    type T = At;

    fn get_read(&self, start: u64) -> Result<At> {
        Ok(At {
            file: Arc::clone(&self.file),
            pos: start,
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes> {
        let mut buf = vec![0u8; length];
        self.file
            .read_exact_at(&mut buf, start)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(Bytes::from(buf))
    }
}

/// One column chunk's bytes, read with one positional read and served from memory to the
/// parquet crate's page reader: it reads each page header a few bytes at a time through
/// `get_read` (a `pread` per call from a [`Positional`] file) and each page into a buffer of
/// its own; from here, both are slices of one buffer.
pub struct ChunkBytes {
    bytes: Bytes,
    start: u64,
}

impl ChunkBytes {
    /// Bytes `start..start + len` of `file` (a range past the file's end, as a corrupt footer
    /// may give, is an error before anything is allocated).
    pub fn read(file: &Positional, start: u64, len: u64) -> Result<Self> {
        if start.checked_add(len).is_none_or(|end| end > file.len) {
            return Err(ParquetError::EOF(format!(
                "a column chunk at {start}..+{len} past the file's {} bytes",
                file.len
            )));
        }
        let mut buf = vec![0u8; len as usize];
        file.file
            .read_exact_at(&mut buf, start)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(Self {
            bytes: Bytes::from(buf),
            start,
        })
    }

    /// The buffer's range for file bytes `start..start + len`.
    fn range(&self, start: u64, len: usize) -> Result<std::ops::Range<usize>> {
        let at = start
            .checked_sub(self.start)
            .and_then(|a| usize::try_from(a).ok())
            .filter(|a| {
                a.checked_add(len)
                    .is_some_and(|end| end <= self.bytes.len())
            })
            .ok_or_else(|| {
                ParquetError::EOF(format!(
                    "bytes {start}..+{len} lie outside the column chunk {}..+{}",
                    self.start,
                    self.bytes.len()
                ))
            })?;
        Ok(at..at + len)
    }
}

impl Length for ChunkBytes {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for ChunkBytes {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> Result<Self::T> {
        let rest = self
            .bytes
            .len()
            .saturating_sub((start.saturating_sub(self.start)) as usize);
        let range = self.range(start, rest)?;
        Ok(bytes::Buf::reader(self.bytes.slice(range)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes> {
        Ok(self.bytes.slice(self.range(start, length)?))
    }
}
