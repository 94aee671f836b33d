//! Device memory: the column pointers a kernel reads and the tables it writes.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, DriverError};

use crate::error::{GrouperError, Result};

/// Entries a hash table of `slots` slots may hold at fill factor `fill` (at least one): past it,
/// rows are listed for after the table grows (global) or go on to the global table (local).
pub(crate) fn fill_limit(slots: u64, fill: f64) -> u64 {
    ((slots as f64 * fill) as u64).max(1)
}

/// Maps a driver error to ours, naming what failed.
pub(crate) fn gpu_err(what: &'static str) -> impl Fn(DriverError) -> GrouperError {
    move |e| {
        let text = e.to_string();
        if text.contains("OUT_OF_MEMORY") {
            GrouperError::Gpu(format!("{what}: out of GPU memory"))
        } else {
            GrouperError::Gpu(format!("{what}: {text}"))
        }
    }
}

/// The column pointer block passed to kernels by value (data and validity per column).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ColPtrs(pub [u64; 64]);

// SAFETY: a plain array of 64-bit device addresses, the layout of `struct ColPtrs` in codegen.
unsafe impl DeviceRepr for ColPtrs {}

/// A hash or direct table on the device, array of structs: slot `s` holds its key words then
/// its state words at `slots[s * width ..]` (none of the former for direct tables), so one
/// row's update touches one or two cache lines.
pub struct DeviceTable {
    /// `cap * width` words.
    pub slots: CudaSlice<u64>,
    /// Slots.
    pub cap: u64,
}

impl DeviceTable {
    /// Allocates an uninitialised table (the caller launches `init_table`).
    pub fn alloc(stream: &Arc<CudaStream>, width: usize, cap: u64) -> Result<Self> {
        let n = (width * cap as usize).max(1);
        // SAFETY: `init_table` writes every element before use.
        let slots = unsafe { stream.alloc::<u64>(n) }
            .map_err(gpu_err("allocating the aggregation table"))?;
        Ok(Self { slots, cap })
    }
}
