//! One launch shape of a query's aggregation kernels, and the device buffers a shape needs.
//!
//! A prepared query has the planner's shape; with the runtime tuner it compiles others as the
//! search reaches them. Every shape of one query writes the same global table (direct or hashed,
//! fixed by the plan), so consecutive chunks may run different shapes.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};

use crate::budget::Budget;
use crate::codegen::{self, KernelSpec};
use crate::compile::{self, Compiled};
use crate::device::gpu_err;
use crate::placement;
use crate::plan::{Choice, Demand};
use crate::prepare::PreparedInput;
use crate::query::GpuOptions;
use crate::sort::{RadixSort, SortBuffers};
use crate::strategy::Placement;
use crate::table::{DeviceTable, TableKernels};
use crate::DeviceInfo;
use grouper_core::error::{GrouperError, Result};

/// The partitioned placement's kernels: the partitions' sizes, the scatter, and where the fold
/// takes key ranges, the split of each partition's rows by range (`placement::partitioned`).
#[derive(Clone)]
pub(crate) struct Partitioning {
    pub(crate) hist: CudaFunction,
    pub(crate) scatter: CudaFunction,
    pub(crate) split: Option<CudaFunction>,
}

/// A compiled launch shape: the kernel spec (strategy, threads, items per thread, shared
/// tables), its aggregation kernels, and the grid it launches.
#[derive(Clone)]
pub(crate) struct Variant {
    pub(crate) spec: KernelSpec,
    pub(crate) agg_rows: CudaFunction,
    pub(crate) agg_list: CudaFunction,
    /// The sorted placement's kernels: each row's sort key, and the radix sort.
    pub(crate) sorting: Option<(CudaFunction, Arc<RadixSort>)>,
    /// The partitioned placement's kernels.
    pub(crate) partitioning: Option<Partitioning>,
    /// Blocks in the grid.
    pub(crate) blocks: u32,
    /// Dynamic shared bytes of `agg_rows` and `agg_list` (`placement::shared_bytes` of the
    /// spec, which each launch passes).
    pub(crate) shared: u64,
    /// Rows of the input's largest chunk, which bound the partitioned placement's spills.
    pub(crate) chunk_rows: u64,
}

impl Variant {
    /// Chooses the strategy for `opts` and `demand` (or checks the forced one), generates and
    /// compiles its kernels; the module also holds the table kernels (`merge_entries`,
    /// `init_table`).
    pub(crate) fn compile(
        input: &PreparedInput,
        opts: &GpuOptions,
        demand: Demand,
    ) -> Result<(Variant, Choice, Compiled)> {
        let info = &input.gpu.info;
        let p = &opts.params;
        let choice = input.choose(opts, demand)?;
        let spec = KernelSpec {
            strategy: choice.strategy,
            threads: choice.threads,
            items_per_thread: p.items_per_thread,
            hash: p.hash,
            probing: p.probing,
            buckets: p.buckets,
            copies: choice.copies,
            local_slots: choice.local_slots,
            fill_factor: p.fill_factor,
            ..input.template.clone()
        };
        let shared = placement::shared_bytes(&spec);
        // Refused before the compile; `allow_dynamic_shared` checks again after it, with the
        // kernel's own `__shared__` arrays, which only the compiled kernel tells.
        if shared > info.shared_per_block as u64 {
            return Err(GrouperError::InvalidOption(format!(
                "{} needs {shared} bytes of shared memory per block; {} has {}",
                choice.strategy, info.name, info.shared_per_block
            )));
        }
        let source = codegen::generate(&spec);
        if std::env::var_os("GROUPER_DUMP_KERNEL").is_some() {
            eprintln!("{source}");
        }
        let compiled: Compiled = compile::compile(&input.gpu, &source)?;
        let agg_rows = compiled.function("agg_rows")?;
        let agg_list = compiled.function("agg_list")?;
        let sorting = match choice.strategy.placement() {
            Placement::Sorted => Some((
                compiled.function("sort_keys")?,
                Arc::new(RadixSort::new(&input.gpu)?),
            )),
            _ => None,
        };
        let partitioning = match choice.strategy.placement() {
            Placement::Partitioned => Some(Partitioning {
                hist: compiled.function("part_hist")?,
                scatter: compiled.function("part_scatter")?,
                split: match placement::partition_splits(&spec) {
                    true => Some(compiled.function("part_split")?),
                    false => None,
                },
            }),
            _ => None,
        };
        // part_hist counts ranges in shared memory (up to 64 KiB), and the scatter and the
        // split stage a tile of rows there (up to 56 KiB).
        if let Some(Partitioning {
            hist,
            scatter,
            split,
        }) = &partitioning
        {
            let counts = placement::hist_shared_bytes(&spec);
            allow_dynamic_shared(hist, "part_hist", counts, info)?;
            let bytes = placement::scatter_shared_bytes(&spec);
            allow_dynamic_shared(scatter, "part_scatter", bytes, info)?;
            if let Some(split) = split {
                allow_dynamic_shared(split, "part_split", bytes, info)?;
            }
        }
        for (f, name) in [(&agg_rows, "agg_rows"), (&agg_list, "agg_list")] {
            allow_dynamic_shared(f, name, shared, info)?;
        }
        // As many blocks as the compiled kernel keeps resident (its registers and shared
        // memory decide, as the occupancy calculator says): one full wave, no partial one.
        let resident = agg_rows
            .occupancy_max_active_blocks_per_multiprocessor(spec.threads, shared as usize, None)
            .map_err(gpu_err("reading the kernel's occupancy"))?
            .max(1);
        let blocks_per_sm = p
            .blocks_per_sm
            .unwrap_or(choice.strategy.placement().blocks_per_sm(resident));
        let blocks = (info.sms * blocks_per_sm).max(1);
        let variant = Variant {
            spec,
            agg_rows,
            agg_list,
            sorting,
            partitioning,
            blocks,
            shared,
            chunk_rows: input.batch_rows as u64,
        };
        Ok((variant, choice, compiled))
    }

    /// The launch of its aggregation kernels with `shared` bytes of dynamic shared memory.
    pub(crate) fn launch_cfg(&self, shared: u64) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.blocks, 1, 1),
            block_dim: (self.spec.threads, 1, 1),
            shared_mem_bytes: shared as u32,
        }
    }

    /// Slots of spilled entries (shared or private tables that filled) one launch may write,
    /// and slots of per-thread private tables.
    fn scratch_slots(&self) -> (u64, u64) {
        self.spec.strategy.placement().scratch_slots(
            self.blocks as u64,
            &self.spec,
            self.chunk_rows,
        )
    }

    /// Blocks of this shape whose scratch buffers fit in `bytes` of GPU memory, at least one
    /// and at most its own: where a memory limit is tight a smaller grid still covers every
    /// row (the kernels stride over the chunk), while each block keeps its spill room.
    pub(crate) fn blocks_within(&self, bytes: u64, width: u64) -> u32 {
        // The partitioned placement's spill room is the chunk's, whatever the blocks.
        if self.spec.strategy.placement() == Placement::Partitioned {
            return self.blocks;
        }
        let (spill, private) = self.scratch_slots();
        let blocks = u64::from(self.blocks.max(1));
        let per_block = (8 * (width + 1) * spill + 8 * width * private).div_ceil(blocks);
        if per_block == 0 {
            return self.blocks;
        }
        (bytes / per_block).clamp(1, blocks) as u32
    }
}

/// The buffers launches write besides the global table: spilled entries with their two lists,
/// and the per-thread private tables. Sized for the largest shape run so far; their contents
/// live within one chunk (spills are merged, private tables flushed and reset by the launch).
pub(crate) struct Scratch {
    pub(crate) spill: DeviceTable,
    pub(crate) spill_list: [CudaSlice<u32>; 2],
    pub(crate) private: Option<DeviceTable>,
    /// The sorted placement's keys and row ids (twice: the sort's passes alternate).
    pub(crate) sort: Held<SortBuffers>,
    /// The partitioned placement's rows, after a head of per-partition counters.
    pub(crate) parts: Held<CudaSlice<u64>>,
    /// Where in `parts` the rows split by key range start (`placement::partition_split_at`;
    /// 0: not split), which the aggregation, and the re-run of rows it listed, read.
    pub(crate) split_at: usize,
    /// Bytes taken from the budget for the spill buffers.
    spill_bytes: u64,
}

/// Lets `f` (`name`) launch with `bytes` of dynamic shared memory: past 48 KiB in all a kernel
/// must opt in. Its own `__shared__` arrays count too: where both pass the device's limit the
/// launch would fail with an unexplained invalid argument, so a plan that sized a table
/// without leaving them room is an error that says so.
fn allow_dynamic_shared(f: &CudaFunction, name: &str, bytes: u64, info: &DeviceInfo) -> Result<()> {
    let fixed = f
        .shared_size_bytes()
        .map_err(gpu_err("reading a kernel's static shared memory"))? as u64;
    if fixed + bytes > info.shared_per_block as u64 {
        return Err(GrouperError::InvalidOption(format!(
            "{name} needs {bytes} bytes of dynamic and {fixed} of static shared memory per \
             block; {} has {}",
            info.name, info.shared_per_block
        )));
    }
    // The 48 KiB without opting in hold static and dynamic together: 49,152 dynamic bytes
    // and the partitioned fold's 6 KiB of arrays failed to launch without it.
    if fixed + bytes > 48 * 1024 {
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
        .map_err(gpu_err("raising the shared memory limit"))?;
    }
    Ok(())
}

/// A buffer kept from chunk to chunk and the bytes it took from the budget: made again, larger,
/// when a chunk needs more (the old one's bytes given back first).
pub(crate) struct Held<T> {
    pub(crate) buf: Option<T>,
    bytes: u64,
}

impl<T> Held<T> {
    fn none() -> Self {
        Held {
            buf: None,
            bytes: 0,
        }
    }

    /// The buffer, made by `make` (`bytes` of the budget, for `what`) unless the one held
    /// `holds` what the chunk needs.
    fn fit(
        &mut self,
        holds: impl Fn(&T) -> bool,
        bytes: u64,
        budget: &Budget,
        what: &str,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<&mut T> {
        if self.buf.as_ref().is_none_or(|b| !holds(b)) {
            budget.take(bytes, what)?;
            self.buf = None;
            budget.give(std::mem::take(&mut self.bytes));
            let made = make().inspect_err(|_| budget.give(bytes))?;
            (self.buf, self.bytes) = (Some(made), bytes);
        }
        self.buf
            .as_mut()
            .ok_or_else(|| GrouperError::Gpu(format!("{what} are missing")))
    }
}

impl Scratch {
    /// Buffers of one slot (shapes without spills need none, but the launch takes pointers).
    pub(crate) fn new(stream: &Arc<CudaStream>, width: usize) -> Result<Self> {
        let err = gpu_err("allocating the spill buffers");
        Ok(Self {
            spill: DeviceTable::alloc(stream, width, 1)?,
            spill_list: [
                stream.alloc_zeros(1).map_err(&err)?,
                stream.alloc_zeros(1).map_err(&err)?,
            ],
            private: None,
            sort: Held::none(),
            parts: Held::none(),
            split_at: 0,
            spill_bytes: 0,
        })
    }

    /// A buffer of `words` words for the partitioned rows (kept, and grown, from chunk to
    /// chunk).
    pub(crate) fn fit_parts(
        &mut self,
        stream: &Arc<CudaStream>,
        words: u64,
        budget: &Budget,
    ) -> Result<&mut CudaSlice<u64>> {
        let holds = |b: &CudaSlice<u64>| words <= b.len() as u64;
        self.parts
            .fit(holds, 8 * words, budget, "the partitioned rows", || {
                // SAFETY: part_scatter writes every row the aggregation then reads (rows_in bounds
                // them by the count part_hist wrote), and the launch zeroes the head first; where
                // the fold splits its rows, part_split writes the second head's words the fold
                // reads and every row of the second copy.
                unsafe { stream.alloc::<u64>(words as usize) }
                    .map_err(gpu_err("allocating the partitioned rows"))
            })
    }

    /// Sort buffers for a chunk of `rows` rows (kept, and grown, from chunk to chunk).
    pub(crate) fn fit_sort(
        &mut self,
        stream: &Arc<CudaStream>,
        rows: u64,
        budget: &Budget,
    ) -> Result<&mut SortBuffers> {
        let rows = rows as usize;
        let holds = |b: &SortBuffers| rows <= b.cap();
        self.sort.fit(
            holds,
            SortBuffers::bytes(rows),
            budget,
            "the sort's buffers",
            || SortBuffers::new(stream, rows),
        )
    }

    /// Grows the buffers to what `v` needs (private tables are made by `table`'s kernels).
    pub(crate) fn fit(
        &mut self,
        table: &TableKernels,
        stream: &Arc<CudaStream>,
        v: &Variant,
        budget: &Budget,
    ) -> Result<()> {
        let (spill, private) = v.scratch_slots();
        let width = table.width as u64;
        if spill > self.spill.cap {
            let bytes = 8 * spill * (width + 1);
            budget.take(bytes, "the overflow lists")?;
            let err = gpu_err("allocating the spill buffers");
            let made = (|| -> Result<_> {
                Ok((
                    DeviceTable::alloc(stream, width as usize, spill)?,
                    [
                        stream.alloc_zeros(spill as usize).map_err(&err)?,
                        stream.alloc_zeros(spill as usize).map_err(&err)?,
                    ],
                ))
            })();
            let (table, lists) = made.inspect_err(|_| budget.give(bytes))?;
            budget.give(self.spill_bytes);
            (self.spill, self.spill_list, self.spill_bytes) = (table, lists, bytes);
        }
        let held = self.private.as_ref().map_or(0, |t| t.cap);
        if private > held {
            let private_table = table.new_slots(stream, private, budget)?;
            budget.give(8 * width * held);
            self.private = Some(private_table);
        }
        Ok(())
    }
}
