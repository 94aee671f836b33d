//! The device memory one query may take: the table (which may grow mid-run), the pipeline's
//! buffers and the launch shapes' scratch all count against one [`Budget`], so a query under
//! `--gpu-memory-limit` shrinks its chunks or fails with one clear error instead of taking the
//! device's memory from everyone else.

use std::cell::Cell;

use grouper_core::error::{GrouperError, Result};

/// Device memory grouper may take for one query (`None`: as much as the device has).
/// Shared by the table (which may grow mid-run) and the pipeline's buffers.
#[derive(Debug, Default)]
pub struct Budget {
    limit: Option<u64>,
    used: Cell<u64>,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: Option<u64>) -> Self {
        Self {
            limit,
            used: Cell::new(0),
        }
    }

    /// Counts `bytes` about to be allocated for `what`, or says they do not fit.
    pub fn take(&self, bytes: u64, what: &str) -> Result<()> {
        let used = self.used.get().saturating_add(bytes);
        match self.limit {
            Some(limit) if used > limit => Err(GrouperError::Gpu(format!(
                "{what} needs {bytes} bytes of GPU memory; the memory limit of {limit} bytes has {} left",
                limit.saturating_sub(self.used.get())
            ))),
            _ => {
                self.used.set(used);
                Ok(())
            }
        }
    }

    /// Returns `bytes` freed.
    pub fn give(&self, bytes: u64) {
        self.used.set(self.used.get().saturating_sub(bytes));
    }

    /// Bytes still free under the limit (`None`: no limit).
    pub fn left(&self) -> Option<u64> {
        self.limit.map(|l| l.saturating_sub(self.used.get()))
    }

    /// The limit, if any.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }
}
