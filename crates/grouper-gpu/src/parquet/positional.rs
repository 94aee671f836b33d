//! A Parquet file read with positional reads (`pread`), so that CPU workers read row groups of
//! one file at once: the parquet crate's reader over a `File` clones the handle, whose clones
//! share one file offset — concurrent readers would read each other's bytes.

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
