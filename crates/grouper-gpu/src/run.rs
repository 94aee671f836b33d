//! Running a prepared query on the GPU: [`Prepared`] holds the prepared input, the planner's
//! launch shape and (with `--tune`) the runtime tuner; a run drives the chunks through the
//! pipeline ([`crate::pipeline`]), each through its launch shape and the trap
//! ([`crate::trap`]), re-plans between chunks when the groups outgrow the plan
//! ([`crate::replan`]), and reads the table back ([`crate::readback`]).
//!
//! [`Prepared::new`] does everything that does not depend on the run (key codec over the input,
//! strategy, kernel compile, and for `resident` the upload), so a benchmark times
//! [`Prepared::run`] alone.

use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaSlice;

use crate::budget::Budget;
use crate::cache::{self, InputKey};
use crate::device::{gpu_err, Gpu};
use crate::pipeline::{drive, Claim, Feed, Produce};
use crate::prepare::{Piece, PreparedInput, Source};
use crate::query::{ColumnBounds, GpuOptions, GpuQuery};
use crate::readback::read_partial;
use crate::replan::Replan;
use crate::report::{GpuOutput, GpuReport};
use crate::strategy::GpuConfig;
use crate::stream::{Batches, Chunker};
use crate::table::{ColPtrs, DeviceTable, GlobalScheme, TableKernels};
use crate::trap::{kernel_error, run_chunk};
use crate::tuning::Tuning;
use crate::variant::{Scratch, Variant};
use grouper_core::error::{GrouperError, Result};
use grouper_core::partial::PartialGroups;

/// Turns a chunk that reached the device (its pointers, and the tag its producer gave it) into
/// the image the kernel reads: its rows and pointers.
pub(crate) type Decode<'a> = dyn FnMut(&ColPtrs, u64) -> Result<(usize, ColPtrs)> + 'a;

/// A decode step for chunks that are not yet the kernel's image, the largest chunk that
/// crosses PCIe before it, and how many threads produce chunks at once.
pub(crate) struct PageDecode<'a, 'b> {
    pub(crate) decode: &'a mut Decode<'b>,
    pub(crate) max_bytes: usize,
    pub(crate) producers: usize,
}

/// A query ready to run: planned, compiled, and (resident) uploaded.
pub struct Prepared {
    pub(crate) input: Arc<PreparedInput>,
    /// The planner's launch shape (and the table layout every tuned shape shares).
    planned: Variant,
    /// The runtime tuner, when the launch shape is left to it; it lives across runs.
    tuning: Option<Tuning>,
    /// The global table's kernels, from the planned variant's module.
    table: TableKernels,
    opts: GpuOptions,
    pub(crate) report: GpuReport,
    /// When the current run started.
    started: Option<Instant>,
}

impl Prepared {
    /// Plans, compiles and (resident) uploads `query` over `batches`. A streaming input seen
    /// before (the same arrays, query and transfer options) comes from the cache.
    pub fn new(query: &GpuQuery, batches: &[RecordBatch], opts: &GpuOptions) -> Result<Self> {
        Self::new_known_by(query, batches, || Ok(batches.to_vec()), opts)
    }

    /// [`Prepared::new`] over the batches `batches` makes, an input the cache knows by the
    /// arrays of `identity` (the same rows, in another form that stays the same from query to
    /// query: a narrowed in-memory table's stored batches, whose widened batches are new arrays
    /// each time). `batches` runs only when the cache does not hold the input.
    pub fn new_known_by(
        query: &GpuQuery,
        identity: &[RecordBatch],
        batches: impl FnOnce() -> Result<Vec<RecordBatch>>,
        opts: &GpuOptions,
    ) -> Result<Self> {
        let gpu = Gpu::get()?;
        let layout = query.check(opts)?;
        let key = (opts.cache_bytes > 0).then(|| InputKey::new(query, identity, opts));
        if let Some(input) = key.as_ref().and_then(cache::lookup) {
            return Self::for_options(input, opts, true);
        }
        if opts.resident {
            cache::drop_resident(); // its device memory before this input's upload
        }
        let batches = batches()?;
        let input = Arc::new(PreparedInput::build(
            gpu,
            query,
            layout,
            Source::Batches(&batches),
            opts,
        )?);
        if let Some(key) = key {
            cache::insert(
                key,
                Arc::clone(&input),
                input.cached_bytes(),
                opts.cache_bytes,
            );
        }
        Self::for_options(input, opts, false)
    }
}

impl Prepared {
    /// The same prepared input (planned keys, uploaded columns) run with other options:
    /// another strategy or kernel parameters, without planning or uploading again. The input
    /// keeps the chunks it was cut into, by the options it was prepared with: a resident input
    /// prepared untuned launches whole, so the runtime tuner retargeted onto it sees one chunk
    /// a pass (prepare tuned for the tuner's batches; `bench tuner` does).
    pub fn retarget(&self, opts: &GpuOptions) -> Result<Self> {
        if opts.resident != self.opts.resident
            || opts.batch_rows != self.opts.batch_rows
            || opts.compress != self.opts.compress
            || opts.memory_limit != self.opts.memory_limit
            || opts.cpu_filter != self.opts.cpu_filter
        {
            return Err(GrouperError::InvalidOption(
                "retargeting cannot change residency, batch size, compression, memory limit or where the filter runs"
                    .into(),
            ));
        }
        self.input.query.check(opts)?;
        Self::for_options(Arc::clone(&self.input), opts, self.report.cached)
    }

    /// Chooses the strategy, generates and compiles its kernels.
    fn for_options(input: Arc<PreparedInput>, opts: &GpuOptions, cached: bool) -> Result<Self> {
        // This may be a thread that has not used the device yet (a cached input and a cached
        // kernel make no call that binds it), and occupancy queries need a current context.
        input
            .gpu
            .ctx
            .bind_to_thread()
            .map_err(gpu_err("binding the CUDA context"))?;
        let info = &input.gpu.info;
        let (planned, choice, compiled) = Variant::compile(&input, opts, input.demand())?;
        let tuning = Tuning::new(&input, opts, &planned);
        let report = GpuReport {
            device: info.name.clone(),
            strategy: choice.strategy,
            reason: choice.reason,
            key_words: input.key_words.len().max(1),
            domain: input.template.domain,
            est_groups: input.estimate.groups,
            estimate: format!(
                "{}; {}",
                input.estimate,
                input.table_fit(opts, choice.strategy.is_perfect())
            ),
            groups: 0,
            grows: 0,
            blocks: planned.blocks,
            threads: planned.spec.threads,
            shared_bytes: crate::placement::shared_bytes(&planned.spec),
            copies: planned.spec.copies,
            compile_ms: compiled.compile_ms,
            cache: compiled.source,
            upload_ms: if cached { 0.0 } else { input.upload_ms },
            transfer: opts.transfer(),
            raw_bytes_per_row: input.raw_bytes_per_row,
            sent_bytes_per_row: input.sent_bytes_per_row,
            encodings: input
                .encodings
                .iter()
                .enumerate()
                .filter_map(|(c, e)| e.as_ref().map(|e| format!("#{c} {e}")))
                .collect(),
            cpu_filter: input.prep.selection.is_some(),
            from_scan: false,
            chunks: input.layouts.len(),
            batch_rows: input.batch_rows,
            prepare_ms: if cached { 0.0 } else { input.prepare_ms },
            cached,
            kernel_ms: 0.0,
            total_ms: 0.0,
            rows: input.rows,
            rows_run: 0,
            tuning: tuning.as_ref().map(Tuning::report),
            switches: Vec::new(),
        };
        // Words per slot of the global table: key words (none when direct), then state words.
        let key_words = match planned.spec.strategy.is_perfect() {
            true => 0,
            false => planned.spec.key_count(),
        };
        let scheme = GlobalScheme::of(opts.params.probing, planned.spec.strategy.is_perfect());
        let table = TableKernels {
            init_table: compiled.function("init_table")?,
            merge_entries: compiled.function("merge_entries")?,
            scheme,
            buckets: opts.params.buckets,
            init_directory: match scheme {
                GlobalScheme::Slots => None,
                _ => Some(compiled.function("init_directory")?),
            },
            width: key_words + input.layout.words,
            fill: opts.params.fill_factor,
            grid: planned.launch_cfg(0),
        };
        Ok(Prepared {
            table,
            planned,
            tuning,
            input,
            opts: opts.clone(),
            report,
            started: None,
        })
    }

    /// The report of the last run (planning fields before any run).
    pub fn report(&self) -> &GpuReport {
        &self.report
    }

    /// Runs the query once.
    pub fn run(&mut self) -> Result<GpuOutput> {
        let table = self.execute(&self.all_chunks(), None, None)?;
        self.finish(&table)
    }

    /// Reads `table` back, finalizes its groups and reports the run.
    pub(crate) fn finish(&mut self, table: &DeviceTable) -> Result<GpuOutput> {
        let (columns, num_rows) =
            read_partial(&self.input, &self.planned, self.table.width, table)?.finalize()?;
        self.report.groups = num_rows as u64;
        self.report.total_ms = self.started_ms();
        Ok(GpuOutput {
            columns,
            num_rows,
            report: self.report.clone(),
        })
    }

    /// Plans and compiles `query` for a scan still delivering its batches: `first` (already
    /// read; they seed string dictionaries and the group estimate), each input column's
    /// `bounds` from the source's statistics, and the `rows` they expect. Run it with
    /// [`Prepared::run_stream`].
    pub fn streaming(
        query: &GpuQuery,
        first: &[RecordBatch],
        bounds: &[ColumnBounds],
        rows: Option<u64>,
        opts: &GpuOptions,
    ) -> Result<Self> {
        if opts.resident {
            return Err(GrouperError::InvalidOption(
                "a resident input is collected, not streamed".into(),
            ));
        }
        let gpu = Gpu::get()?;
        let layout = query.check(opts)?;
        let source = Source::Stream {
            first,
            bounds,
            rows,
        };
        let input = PreparedInput::build(gpu, query, layout, source, opts)?;
        let mut prepared = Self::for_options(Arc::new(input), opts, false)?;
        prepared.report.from_scan = true;
        Ok(prepared)
    }

    /// Runs a [`Prepared::streaming`] query over `first` and then every batch `next` delivers,
    /// chunking, encoding, copying and aggregating as they arrive.
    pub fn run_stream(&mut self, first: Vec<RecordBatch>, next: Batches<'_>) -> Result<GpuOutput> {
        if !self.report.from_scan {
            return Err(GrouperError::InvalidOption(
                "run_stream needs a query prepared with Prepared::streaming".into(),
            ));
        }
        let input = Arc::clone(&self.input);
        // One producer: the scan's batches come one after another.
        let chunker = std::sync::Mutex::new(Chunker::new(&input, first, next));
        let produce = |out: &mut [u8]| {
            let mut chunker = chunker
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Ok(chunker
                .produce(out)?
                .map(|layout| (layout, chunker.chunks as u64)))
        };
        let table = self.execute(&|| None, Some(&produce), None)?;
        self.report.chunks = chunker
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .chunks;
        self.report.rows = self.report.rows_run;
        self.finish(&table)
    }

    /// Runs the query over the chunks `produce` makes, each turned by `decode` into the image
    /// the kernel reads once on the device ([`crate::pages`]); `max_bytes`: the largest chunk.
    pub(crate) fn run_with_decode(
        &mut self,
        max_bytes: usize,
        producers: usize,
        produce: Produce<'_>,
        decode: &mut Decode<'_>,
    ) -> Result<DeviceTable> {
        let table = self.execute(
            &|| None,
            Some(produce),
            Some(PageDecode {
                decode,
                max_bytes,
                producers,
            }),
        )?;
        Ok(table)
    }

    /// Runs the query over the chunks `claim` hands out (co-processing: a queue shared with
    /// CPU workers), returning its groups unfinalized for merging with theirs.
    pub fn run_partial(&mut self, claim: Claim<'_>) -> Result<(PartialGroups, GpuReport)> {
        let table = self.execute(claim, None, None)?;
        let partial = read_partial(&self.input, &self.planned, self.table.width, &table)?;
        self.report.groups = partial.len as u64;
        self.report.total_ms = self.started_ms();
        Ok((partial, self.report.clone()))
    }

    /// The planner's estimate of the groups (the co-processing queue prices a CPU worker's
    /// first chunk by it).
    pub fn est_groups(&self) -> u64 {
        self.report.est_groups
    }

    /// Rows of each chunk, for the co-processing queue (a chunk is a run of input rows).
    pub fn chunk_rows(&self) -> Vec<usize> {
        self.input.layouts.iter().map(|l| l.rows).collect()
    }

    /// Which slices of the input batches chunk `i` is made of.
    pub fn chunk_pieces(&self, i: usize) -> &[Piece] {
        self.input.pieces.get(i).map_or(&[], Vec::as_slice)
    }

    /// Every chunk, in order.
    fn all_chunks(&self) -> impl Fn() -> Option<usize> + Sync {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let n = self.input.layouts.len();
        move || {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (i < n).then_some(i)
        }
    }

    fn started_ms(&self) -> f64 {
        self.started
            .map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3)
    }

    /// Runs the query's kernels once and reports, without reading the table back or
    /// finalizing (for benchmarks: with millions of groups, finalizing on the host takes longer
    /// than the kernels; `report().groups` is then the hash table's count, 0 for direct tables).
    pub fn run_kernels(&mut self) -> Result<&GpuReport> {
        self.execute(&self.all_chunks(), None, None)?;
        self.report.total_ms = self.started_ms();
        Ok(&self.report)
    }

    /// Runs the kernels over the chunks `claim` hands out (or, with `produce`, those a scan's
    /// stream makes); the table they filled. With a tuner, each chunk runs the launch shape
    /// the tuner picks and reports its kernel time back; the table carries across shapes.
    /// With `decode`, each chunk that reaches the device is first turned into the image the
    /// kernel reads (Parquet pages decoded on the GPU, [`crate::pages`]).
    pub(crate) fn execute(
        &mut self,
        claim: Claim<'_>,
        produce: Option<Produce<'_>>,
        decode: Option<PageDecode<'_, '_>>,
    ) -> Result<DeviceTable> {
        let mut tuning = self.tuning.take();
        let result = self.execute_with(claim, produce, decode, &mut tuning);
        if let Some(t) = &tuning {
            self.report.tuning = Some(t.report());
        }
        self.tuning = tuning;
        result
    }

    fn execute_with(
        &mut self,
        claim: Claim<'_>,
        produce: Option<Produce<'_>>,
        decode: Option<PageDecode<'_, '_>>,
        tuning: &mut Option<Tuning>,
    ) -> Result<DeviceTable> {
        self.started = Some(Instant::now());
        let input = Arc::clone(&self.input);
        // A run may be on another thread than its preparation (co-processing).
        input
            .gpu
            .ctx
            .bind_to_thread()
            .map_err(gpu_err("binding the CUDA context"))?;
        let stream = Arc::clone(&input.gpu.stream);
        let ctx = Arc::clone(&input.gpu.ctx);
        let err = gpu_err;
        let perfect = self.planned.spec.strategy.is_perfect();
        let fill = self.opts.params.fill_factor;
        let budget = Budget::new(self.opts.memory_limit);
        if let Some(res) = &input.resident {
            budget.take(
                res.iter().map(|r| r.len() as u64).sum(),
                "the resident input",
            )?;
        }
        let max_rows = input.batch_rows.max(1);

        // The global table (every launch shape of the run shares it).
        let mut table = if perfect {
            self.table
                .new_table(&stream, self.planned.spec.domain, &budget)?
        } else {
            let want = self
                .opts
                .params
                .initial_groups
                .unwrap_or(self.input.estimate.table_groups() * 2);
            let cap = self.table.capacity(((want as f64 / fill) as u64).max(16));
            self.table.new_table(&stream, cap, &budget)?
        };
        let mut ctrl: CudaSlice<u64> = stream.alloc_zeros(4).map_err(err("allocating"))?;
        // Overflow lists exist only where a table can fill up (hash strategies).
        let list_rows = if perfect { 1 } else { max_rows };
        budget.take(8 * list_rows as u64, "the overflow lists")?;
        // SAFETY: the kernels write list entries before anything reads them (a list is read
        // only up to the count the kernel that wrote it reports).
        let mut lists: [CudaSlice<u32>; 2] = unsafe {
            [
                stream
                    .alloc(list_rows)
                    .map_err(err("allocating the overflow lists"))?,
                stream
                    .alloc(list_rows)
                    .map_err(err("allocating the overflow lists"))?,
            ]
        };
        let mut scratch = Scratch::new(&stream, self.table.width)?;

        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let event = || ctx.new_event(timing).map_err(err("creating events"));
        let (t0, t1) = (event()?, event()?);
        // Chunk timing for the tuner, one chunk behind: a chunk's events are read after the
        // next chunk's kernel is queued, so waiting for them never leaves the stream idle. The
        // events enclose the chunk's aggregation kernel only (as Rosenfeld times a block's
        // AGGREGATE kernel): a hash table's overflow check waits on the host, whose wake-up
        // jitter (~10 µs against kernels of 50–300 µs) would otherwise dominate the noise the
        // tuner's windows must sit out, and growing the table costs the same whatever the shape.
        let marks = [(event()?, event()?), (event()?, event()?)];
        let mut pending: Option<(GpuConfig, u64, usize)> = None;
        let mut mark = 0usize;
        let settle = |pending: &mut Option<(GpuConfig, u64, usize)>,
                      tuning: &mut Option<Tuning>|
         -> Result<()> {
            if let (Some((c, rows, k)), Some(t)) = (pending.take(), tuning.as_mut()) {
                let (a, b) = &marks[k];
                b.synchronize().map_err(err("timing a chunk"))?;
                t.record(
                    c,
                    rows,
                    a.elapsed_ms(b).map_err(err("reading events"))? as f64,
                );
            }
            Ok(())
        };
        t0.record(&stream).map_err(err("recording an event"))?;
        let mut grows = 0u32;
        let mut groups = 0u64;
        let fill = |i: usize, out: &mut [u8]| input.fill(i, out);
        let feed = match (produce, &input.resident, &input.images) {
            (Some(produce), ..) => Feed::Stream {
                max_bytes: decode
                    .as_ref()
                    .map_or_else(|| input.max_image_bytes(), |d| d.max_bytes),
                produce,
                producers: decode.as_ref().map_or(1, |d| d.producers),
            },
            (None, Some(r), _) => Feed::Resident(r),
            (None, None, Some(images)) => Feed::Pinned(images),
            (None, None, None) => Feed::Gather(&fill),
        };
        let mut rows_run = 0u64;
        // Without the tuner, the planner may switch kernels between chunks as groups grow.
        let mut decode = decode;
        let mut replan = match tuning {
            None => Replan::new(&self.opts, &self.planned, &self.input),
            Some(_) => None,
        };
        let mut current = self.planned.clone();
        let mut on_chunk = |rows: usize, cols: &ColPtrs, tag: u64| -> Result<()> {
            let decoded;
            let (rows, cols) = match decode.as_mut() {
                Some(d) => {
                    let (r, c) = (d.decode)(cols, tag)?;
                    decoded = c;
                    (r, &decoded)
                }
                None => (rows, cols),
            };
            let rows = rows as u64;
            rows_run += rows;
            // The launch shape: the tuner's pick (timed while it searches), else the plan's.
            let (config, v) = match tuning.as_mut() {
                Some(t) => t.pick(&input, &self.opts, &self.planned, |v| {
                    scratch.fit(&self.table, &stream, v, &budget)
                })?,
                None => {
                    if let Err(e) = scratch.fit(&self.table, &stream, &current, &budget) {
                        // Under a tight memory limit, fewer blocks (the resident ones of a lean
                        // kernel can be many) need less spill room.
                        let fewer = budget
                            .left()
                            .map(|left| current.blocks_within(left, self.table.width as u64))
                            .filter(|&b| b < current.blocks)
                            .ok_or(e)?;
                        current.blocks = fewer;
                        scratch.fit(&self.table, &stream, &current, &budget)?;
                    }
                    (None, current.clone())
                }
            };
            let before = groups;
            run_chunk(
                &self.table,
                &stream,
                &v,
                cols,
                rows,
                (&mut table, &mut ctrl, &mut lists, &mut scratch),
                (&mut groups, &mut grows),
                &budget,
                config.map(|_| &marks[mark]),
            )?;
            // A hash table's count is read after every chunk; a direct table never grows.
            if let (Some(t), false) = (tuning.as_mut(), perfect) {
                t.grew(rows, groups.saturating_sub(before));
            }
            if let Some(c) = config {
                settle(&mut pending, tuning)?;
                pending = Some((c, rows, mark));
                mark = 1 - mark;
            } else {
                settle(&mut pending, tuning)?;
            }
            if let Some(r) = replan.as_mut() {
                if let Some(next) = r.after_chunk(&input, &self.opts, &current, groups)? {
                    current = next;
                }
            }
            Ok(())
        };
        drive(
            &input.gpu,
            &stream,
            feed,
            &input.layouts,
            self.opts.zero_copy,
            &budget,
            claim,
            &mut on_chunk,
        )?;
        settle(&mut pending, tuning)?;
        t1.record(&stream).map_err(err("recording an event"))?;
        stream
            .synchronize()
            .map_err(err("running the aggregation"))?;
        let c = stream.clone_dtoh(&ctrl).map_err(err("reading counters"))?;
        if c[3] != 0 {
            return Err(kernel_error(c[3]));
        }
        self.report.kernel_ms = t0.elapsed_ms(&t1).map_err(err("reading events"))? as f64;
        self.report.grows = grows;
        self.report.groups = groups;
        self.report.switches = replan.map(|r| r.switches).unwrap_or_default();
        self.report.rows_run = rows_run;
        Ok(table)
    }
}
