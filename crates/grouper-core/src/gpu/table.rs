//! Device memory: the columns a kernel reads and the tables it writes.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::{BooleanBuffer, Buffer};
use arrow::datatypes::DataType;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, DriverError};

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

/// Host bytes of one device column: values and (when some value is NULL) validity bits, both
/// starting at bit 0 of row 0.
pub struct HostColumn {
    /// Values: packed bits for booleans, else native values.
    pub values: Buffer,
    /// Validity bits, `None` when no value is NULL.
    pub validity: Option<Buffer>,
}

/// `BooleanBuffer` bits re-based to offset 0 (a no-op copy-free when already aligned).
fn rebased(bits: &BooleanBuffer) -> Buffer {
    if bits.offset() == 0 {
        bits.inner().clone()
    } else {
        bits.iter().collect::<BooleanBuffer>().into_inner()
    }
}

impl HostColumn {
    /// The bytes of `array` as the kernel reads them.
    pub fn from_array(array: &ArrayRef) -> Result<Self> {
        let validity = array
            .logical_nulls()
            .filter(|n| n.null_count() > 0)
            .map(|n| rebased(n.inner()));
        let values = match array.data_type() {
            DataType::Boolean => rebased(array.as_boolean().values()),
            t if t.is_primitive() => {
                let data = array.to_data();
                let width = t.primitive_width().unwrap_or(1);
                data.buffers()[0].slice_with_length(data.offset() * width, data.len() * width)
            }
            other => {
                return Err(GrouperError::UnsupportedType {
                    what: "GPU column",
                    data_type: other.clone(),
                })
            }
        };
        Ok(Self { values, validity })
    }
}

/// One device column: values and optional validity.
pub struct DeviceColumn {
    values: CudaSlice<u8>,
    validity: Option<CudaSlice<u8>>,
    /// Whether `validity` holds bits for the current batch.
    has_validity: bool,
}

impl DeviceColumn {
    /// A device column with room for `host`.
    pub fn alloc(stream: &Arc<CudaStream>, values: usize, validity: usize) -> Result<Self> {
        // SAFETY: the buffers are written by `upload` before any kernel reads them.
        let v =
            unsafe { stream.alloc::<u8>(values.max(1)) }.map_err(gpu_err("allocating a column"))?;
        // SAFETY: as above.
        let n = unsafe { stream.alloc::<u8>(validity.max(1)) }
            .map_err(gpu_err("allocating a column"))?;
        Ok(Self {
            values: v,
            validity: Some(n),
            has_validity: false,
        })
    }

    /// Whether `host` fits this buffer.
    pub fn fits(&self, host: &HostColumn) -> bool {
        self.values.len() >= host.values.len()
            && host
                .validity
                .as_ref()
                .is_none_or(|b| self.validity.as_ref().is_some_and(|d| d.len() >= b.len()))
    }

    /// Copies `host` in (asynchronously on `stream`).
    pub fn upload(&mut self, stream: &Arc<CudaStream>, host: &HostColumn) -> Result<()> {
        let err = gpu_err("copying a column to the GPU");
        let mut dst = self.values.slice_mut(0..host.values.len());
        stream
            .memcpy_htod(host.values.as_slice(), &mut dst)
            .map_err(&err)?;
        self.has_validity = false;
        if let (Some(b), Some(d)) = (&host.validity, self.validity.as_mut()) {
            let mut dst = d.slice_mut(0..b.len());
            stream.memcpy_htod(b.as_slice(), &mut dst).map_err(&err)?;
            self.has_validity = true;
        }
        Ok(())
    }

    /// (values, validity or 0) device addresses.
    pub fn pointers(&self, stream: &Arc<CudaStream>) -> (u64, u64) {
        let (v, _g) = self.values.device_ptr(stream);
        let n = match (&self.validity, self.has_validity) {
            (Some(n), true) => n.device_ptr(stream).0,
            _ => 0,
        };
        (v, n)
    }
}

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
