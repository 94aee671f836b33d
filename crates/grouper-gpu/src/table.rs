//! Device memory: the column pointers a kernel reads and the tables it writes, and the table
//! kernels every strategy shares (initialise, merge entries, grow: Karnagel's trap-and-grow
//! grows the global hash table by merging it into one twice as large).

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};

use crate::budget::Budget;
use crate::device::gpu_err;
use grouper_core::error::{GrouperError, Result};

/// The smallest power of two at least `n` (and at least 1): table capacities.
pub(crate) fn pow2_at_least(n: u64) -> u64 {
    n.max(1).checked_next_power_of_two().unwrap_or(1 << 63)
}

/// Entries a hash table of `slots` slots may hold at fill factor `fill` (at least one): past it,
/// rows are listed for after the table grows (global) or go on to the global table (local).
pub(crate) fn fill_limit(slots: u64, fill: f64) -> u64 {
    ((slots as f64 * fill) as u64).max(1)
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

/// The global table's own kernels (compiled in the planned variant's module) and shape:
/// allocating and initialising a table, merging entries into one, growing it.
pub(crate) struct TableKernels {
    pub(crate) init_table: CudaFunction,
    pub(crate) merge_entries: CudaFunction,
    /// Words per slot: key words (none for a direct table), then state words.
    pub(crate) width: usize,
    /// Fill factor of hash tables before they grow.
    pub(crate) fill: f64,
    /// The grid the table kernels launch with.
    pub(crate) grid: LaunchConfig,
}

impl TableKernels {
    /// A new table of `cap` slots, initialised empty, taken from `budget`.
    pub(crate) fn new_table(
        &self,
        stream: &Arc<CudaStream>,
        cap: u64,
        budget: &Budget,
    ) -> Result<DeviceTable> {
        budget.take(8 * self.width as u64 * cap, "the aggregation table")?;
        let mut t = DeviceTable::alloc(stream, self.width, cap)?;
        let mut b = stream.launch_builder(&self.init_table);
        b.arg(&mut t.slots).arg(&cap);
        // SAFETY: init_table(u64*, u64) writes cap * GS words, which the table holds.
        unsafe { b.launch(self.grid) }.map_err(gpu_err("launching init_table"))?;
        Ok(t)
    }

    /// Merges `n` entries of `src` (or those `list` names) into `dst`; entries that find it
    /// full are listed in `overflow` (at most `overflow_cap`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn merge(
        &self,
        stream: &Arc<CudaStream>,
        src: &DeviceTable,
        n: u64,
        list: Option<&CudaSlice<u32>>,
        dst: &mut DeviceTable,
        ctrl: &mut CudaSlice<u64>,
        overflow: &mut CudaSlice<u32>,
        overflow_cap: u64,
    ) -> Result<()> {
        let dcap = dst.cap;
        let limit = fill_limit(dcap, self.fill);
        let null = 0u64;
        let mut b = stream.launch_builder(&self.merge_entries);
        b.arg(&src.slots).arg(&n);
        match list {
            Some(l) => b.arg(l),
            None => b.arg(&null),
        };
        b.arg(&mut dst.slots)
            .arg(&dcap)
            .arg(&limit)
            .arg(ctrl)
            .arg(overflow)
            .arg(&overflow_cap);
        // SAFETY: matches merge_entries's parameters; `src` holds `n` slots (or `list` names
        // slots below its capacity), `dst` holds `dcap`, and at most `overflow_cap` failures are
        // written.
        unsafe { b.launch(self.grid) }.map_err(gpu_err("launching merge_entries"))?;
        Ok(())
    }

    /// Replaces `table` by one large enough for `need` groups holding its entries (Karnagel's
    /// grow).
    pub(crate) fn grow(
        &self,
        stream: &Arc<CudaStream>,
        table: &mut DeviceTable,
        need: u64,
        ctrl: &mut CudaSlice<u64>,
        scratch: &mut CudaSlice<u32>,
        budget: &Budget,
    ) -> Result<()> {
        let fill = self.fill;
        let cap = pow2_at_least(((need as f64 / fill) as u64 + 1).max(table.cap * 2));
        let mut grown = self.new_table(stream, cap, budget)?;
        stream
            .memcpy_htod(&[0u64, 0, 0, 0], ctrl)
            .map_err(gpu_err("resetting counters"))?;
        let cap_list = scratch.len() as u64;
        self.merge(
            stream, table, table.cap, None, &mut grown, ctrl, scratch, cap_list,
        )?;
        let c = stream
            .clone_dtoh(ctrl)
            .map_err(gpu_err("reading counters"))?;
        if c[1] != 0 {
            return Err(GrouperError::Gpu("growing the table lost entries".into()));
        }
        budget.give(8 * self.width as u64 * table.cap);
        *table = grown;
        Ok(())
    }
}
