//! Device memory: the column pointers a kernel reads and the tables it writes, and the table
//! kernels every strategy shares (initialise, merge entries, grow: Karnagel's trap-and-grow
//! grows the global hash table by merging it into one twice as large).

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};

use crate::budget::Budget;
use crate::device::gpu_err;
use crate::strategy::{BucketMap, Probing};
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

/// How the global table's hashing scheme lays it out (`codegen/probing`): the entries the
/// kernels, the read-back and the merges address — slots of `width` words, key words then
/// state words — and the directory words after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GlobalScheme {
    /// Its slots are its entries: linear probing, and direct tables.
    Slots,
    /// Luan's Chain: `cap` entries, then `cap` 32-bit bucket heads and `cap` 32-bit links.
    Chained,
    /// Luan's Chain+: `cap` buckets' first entries inline and `cap` further entries, then a
    /// 32-bit link per entry and the count of further entries taken.
    ChainedPlus,
}

impl GlobalScheme {
    /// The global table's scheme for `probing`: a direct table (`perfect`) has no hash, and
    /// cuckoo hashing runs in private tables only, over a linearly probed global table.
    pub(crate) fn of(probing: Probing, perfect: bool) -> Self {
        match probing {
            _ if perfect => GlobalScheme::Slots,
            Probing::Chained => GlobalScheme::Chained,
            Probing::ChainedPlus => GlobalScheme::ChainedPlus,
            Probing::Linear | Probing::Cuckoo2 | Probing::Cuckoo4 => GlobalScheme::Slots,
        }
    }

    /// Entries of a table of `cap` slots (buckets).
    pub(crate) fn entries(self, cap: u64) -> u64 {
        match self {
            GlobalScheme::ChainedPlus => 2 * cap,
            GlobalScheme::Slots | GlobalScheme::Chained => cap,
        }
    }

    /// Directory words after the entries.
    pub(crate) fn directory_words(self, cap: u64) -> u64 {
        match self {
            GlobalScheme::Slots => 0,
            GlobalScheme::Chained => cap,
            GlobalScheme::ChainedPlus => cap + 1,
        }
    }

    /// Words of a table of `cap` slots, `width` words an entry.
    pub(crate) fn words(self, width: usize, cap: u64) -> u64 {
        (width as u64)
            .saturating_mul(self.entries(cap))
            .saturating_add(self.directory_words(cap))
    }

    /// Whether a table of `cap` slots fits the scheme: a chain's 32-bit entry numbers (two
    /// kept as NIL and the latch) address every entry.
    pub(crate) fn holds(self, cap: u64) -> bool {
        self == GlobalScheme::Slots || self.entries(cap) < u64::from(u32::MAX) - 1
    }
}

/// A hash or direct table on the device, array of structs: entry `e` holds its key words then
/// its state words at `slots[e * width ..]` (none of the former for direct tables), so one
/// row's update touches one or two cache lines; a chained table's directory follows its
/// entries ([`GlobalScheme`]).
pub struct DeviceTable {
    /// The entries' words, then the directory's.
    pub slots: CudaSlice<u64>,
    /// Slots (buckets of a chained table): the capacity kernels are passed.
    pub cap: u64,
    /// Entries (of `width` words): what read-back and merges scan.
    pub entries: u64,
}

impl DeviceTable {
    /// Allocates an uninitialised table of `cap` slots, entries only (the caller launches
    /// `init_table`).
    pub fn alloc(stream: &Arc<CudaStream>, width: usize, cap: u64) -> Result<Self> {
        Self::alloc_in(stream, width, cap, GlobalScheme::Slots)
    }

    /// Allocates an uninitialised table of `cap` slots laid out as `scheme` says.
    fn alloc_in(
        stream: &Arc<CudaStream>,
        width: usize,
        cap: u64,
        scheme: GlobalScheme,
    ) -> Result<Self> {
        let n = usize::try_from(scheme.words(width, cap).max(1))
            .map_err(|_| GrouperError::Gpu("the aggregation table is too large".into()))?;
        // SAFETY: `init_table` (and `init_directory`) write every element before use.
        let slots = unsafe { stream.alloc::<u64>(n) }
            .map_err(gpu_err("allocating the aggregation table"))?;
        Ok(Self {
            slots,
            cap,
            entries: scheme.entries(cap),
        })
    }
}

/// The global table's own kernels (compiled in the planned variant's module) and shape:
/// allocating and initialising a table, merging entries into one, growing it.
pub(crate) struct TableKernels {
    pub(crate) init_table: CudaFunction,
    pub(crate) merge_entries: CudaFunction,
    /// The global table's layout, and the kernel that empties its directory where it has one.
    pub(crate) scheme: GlobalScheme,
    /// How the global table maps hashes to buckets: power-of-two tables for the high bits.
    pub(crate) buckets: BucketMap,
    pub(crate) init_directory: Option<CudaFunction>,
    /// Words per slot: key words (none for a direct table), then state words.
    pub(crate) width: usize,
    /// Fill factor of hash tables before they grow.
    pub(crate) fill: f64,
    /// The grid the table kernels launch with.
    pub(crate) grid: LaunchConfig,
}

impl TableKernels {
    /// The global table's slots for at least `slots`: a power of two where hashes pick their
    /// bucket by the high bits, exactly `slots` under the modulo mapping (Karnagel's tables of
    /// twice the groups).
    pub(crate) fn capacity(&self, slots: u64) -> u64 {
        match self.buckets {
            BucketMap::HighBits => pow2_at_least(slots),
            BucketMap::Modulo => slots.max(1),
        }
    }

    /// A new global table of `cap` slots laid out as its scheme says, initialised empty,
    /// taken from `budget`.
    pub(crate) fn new_table(
        &self,
        stream: &Arc<CudaStream>,
        cap: u64,
        budget: &Budget,
    ) -> Result<DeviceTable> {
        self.new_in(stream, cap, self.scheme, budget)
    }

    /// A new table of `cap` slots, entries only (private tables), initialised empty.
    pub(crate) fn new_slots(
        &self,
        stream: &Arc<CudaStream>,
        cap: u64,
        budget: &Budget,
    ) -> Result<DeviceTable> {
        self.new_in(stream, cap, GlobalScheme::Slots, budget)
    }

    fn new_in(
        &self,
        stream: &Arc<CudaStream>,
        cap: u64,
        scheme: GlobalScheme,
        budget: &Budget,
    ) -> Result<DeviceTable> {
        if !scheme.holds(cap) {
            return Err(GrouperError::Gpu(format!(
                "a chained table of {cap} buckets: its 32-bit entry numbers address fewer (--probing linear has no such bound)"
            )));
        }
        budget.take(8 * scheme.words(self.width, cap), "the aggregation table")?;
        let mut t = DeviceTable::alloc_in(stream, self.width, cap, scheme)?;
        let entries = t.entries;
        let mut b = stream.launch_builder(&self.init_table);
        b.arg(&mut t.slots).arg(&entries);
        // SAFETY: init_table(u64*, u64) writes entries * GS words, which the table holds.
        unsafe { b.launch(self.grid) }.map_err(gpu_err("launching init_table"))?;
        if let (Some(f), true) = (&self.init_directory, scheme != GlobalScheme::Slots) {
            let mut b = stream.launch_builder(f);
            b.arg(&mut t.slots).arg(&cap);
            // SAFETY: init_directory(u64*, u64) writes the directory words after the entries
            // of a table of `cap` slots of the kernels' scheme, which `scheme.words` counted.
            unsafe { b.launch(self.grid) }.map_err(gpu_err("launching init_directory"))?;
        }
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
        let cap = self.capacity(((need as f64 / fill) as u64 + 1).max(table.cap * 2));
        let mut grown = self.new_table(stream, cap, budget)?;
        stream
            .memcpy_htod(&[0u64, 0, 0, 0], ctrl)
            .map_err(gpu_err("resetting counters"))?;
        let cap_list = scratch.len() as u64;
        self.merge(
            stream,
            table,
            table.entries,
            None,
            &mut grown,
            ctrl,
            scratch,
            cap_list,
        )?;
        let c = stream
            .clone_dtoh(ctrl)
            .map_err(gpu_err("reading counters"))?;
        if c[1] != 0 {
            return Err(GrouperError::Gpu("growing the table lost entries".into()));
        }
        budget.give(8 * self.scheme.words(self.width, table.cap));
        *table = grown;
        Ok(())
    }
}
