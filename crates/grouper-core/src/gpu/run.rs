//! Running a query on the GPU: plan keys and strategy, compile, move data, launch, grow on
//! overflow, read the table back and finalize with the CPU's algebra.
//!
//! [`Prepared::new`] does everything that does not depend on the run (key codec over the input,
//! strategy, kernel compile, and for `resident` the upload), so a benchmark times
//! [`Prepared::run`] alone. Batched runs copy chunks of `batch_rows` rows on a copy stream
//! while the previous chunk's kernel runs (double buffering).

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::concat;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use rayon::prelude::*;

use super::cache::{self, InputKey};
use super::codegen::{self, KernelSpec, MAX_COLUMNS};
use super::compile::CacheHit;
use super::device::Gpu;
use super::encode::{native_bits, Encoding};
use super::image::ImageLayout;
use super::layout::{to_accumulator, Layout, ROWS_WORD};
use super::pipeline::{alloc_pinned, drive, Budget, Claim, Feed, Produce, SLOTS};
use super::replan::Replan;
use super::stream::{Batches, Chunker, ColumnBounds};
use super::table::{fill_limit, gpu_err, ColPtrs, DeviceTable};
use super::tuning::{GpuConfig, TuneReport, Tuning};
use super::variant::{Scratch, Variant};
use super::wide_keys::Split;
use super::{GpuParams, GpuStrategy};
use crate::agg::AggregateSpec;
use crate::error::{GrouperError, Result};
use crate::expr::Expr;
use crate::keys::{KeyCodec, PackedKind};
use crate::partial::PartialGroups;
use crate::planner;
use crate::profile::{KeyKind, Profile};
use crate::table::check_fill_factor;
use crate::tune::Hyper;

/// A query as the GPU runs it: over the columns of the input batches.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuQuery {
    /// Types of the input columns.
    pub columns: Vec<DataType>,
    /// Rows pass when true.
    pub filter: Option<Expr>,
    /// Group key columns (input column indices), in output order.
    pub keys: Vec<usize>,
    /// Aggregates with their arguments (`None` for COUNT(*)).
    pub aggregates: Vec<(AggregateSpec, Option<Expr>)>,
}

impl GpuQuery {
    /// Checks that the GPU runs this query with `opts` (types, expressions, parameters) and
    /// returns its state layout; the error says what is not supported.
    pub fn check(&self, opts: &GpuOptions) -> Result<Layout> {
        let query = self;
        check_fill_factor(opts.params.fill_factor)?;
        for &k in &query.keys {
            let t = query.columns.get(k).ok_or_else(|| {
                GrouperError::InvalidInput(format!("key column {k} out of range"))
            })?;
            if !crate::keys::supports(t) {
                return Err(GrouperError::UnsupportedType {
                    what: "group key",
                    data_type: t.clone(),
                });
            }
        }
        let p = &opts.params;
        if let Some(t) = p.threads_per_block {
            if !t.is_multiple_of(32) || !(32..=1024).contains(&t) {
                return Err(GrouperError::InvalidOption(format!(
                    "threads per block must be a multiple of 32 in 32..=1024, got {t}"
                )));
            }
        }
        if !(1..=16).contains(&p.items_per_thread) {
            return Err(GrouperError::InvalidOption(format!(
                "items per thread must be in 1..=16, got {}",
                p.items_per_thread
            )));
        }
        if query.columns.len() + 2 * query.keys.len() > MAX_COLUMNS {
            return Err(GrouperError::Unsupported(format!(
                "more than {MAX_COLUMNS} input columns on the GPU"
            )));
        }
        let specs: Vec<AggregateSpec> = query.aggregates.iter().map(|(s, _)| s.clone()).collect();
        if specs.len() > 64 {
            return Err(GrouperError::Unsupported(
                "more than 64 aggregates on the GPU".into(),
            ));
        }
        let layout = Layout::new(&specs)?;
        for e in query
            .filter
            .iter()
            .chain(query.aggregates.iter().filter_map(|(_, a)| a.as_ref()))
        {
            e.check()?;
            e.check_columns(&query.columns)?;
        }
        if let Some(f) = &query.filter {
            if f.data_type() != DataType::Boolean {
                return Err(GrouperError::InvalidInput(
                    "the filter is not boolean".into(),
                ));
            }
        }
        for (s, a) in &query.aggregates {
            if a.as_ref().map(Expr::data_type) != s.input_type {
                return Err(GrouperError::InvalidInput(format!(
                    "argument of {} does not have type {:?}",
                    s.kind, s.input_type
                )));
            }
        }
        Ok(layout)
    }
}

/// How to run.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuOptions {
    /// A forced strategy, or the planner's choice.
    pub strategy: Option<GpuStrategy>,
    /// Kernel parameters.
    pub params: GpuParams,
    /// Upload the columns once ([`Prepared::new`]) and time the query on device memory.
    pub resident: bool,
    /// Rows per copied batch (and per launch); lowered to fit `memory_limit`.
    pub batch_rows: usize,
    /// Send columns in their transfer encoding ([`super::encode`]) rather than as they are.
    pub compress: bool,
    /// Let the kernel read chunks from mapped pinned host memory instead of copying them.
    pub zero_copy: bool,
    /// Most device memory one query may take, bytes (`None`: what the device has).
    pub memory_limit: Option<u64>,
    /// Host bytes the prepared-input cache may own (encoded images, dictionary codes); 0
    /// turns it off. Only inputs whose arrays outlive a query (an in-memory table) gain.
    pub cache_bytes: u64,
    /// Filter precomputation (Tomé §3.6): evaluate the filter on the CPU and send one
    /// selection bit per row instead of the columns only the filter reads.
    pub cpu_filter: bool,
    /// The runtime tuner's hyper-parameters (`None`, the default: run the planner's launch
    /// shape). It tunes only what the options leave open: not a fixed block size or blocks per
    /// multiprocessor. Off by default until shapes compile in the background: each shape the
    /// search reaches is an NVRTC compile on the query's path (0.1 s, seconds for block_local
    /// on a cold kernel cache).
    pub tune: Option<Hyper>,
    /// This device's profile from `grouper calibrate`: where it measured near the estimate,
    /// its fastest strategy (and tuned launch shape) is the plan; elsewhere the rules decide.
    pub profile: Option<Arc<Profile>>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        Self {
            strategy: None,
            params: GpuParams::default(),
            resident: false,
            batch_rows: 1 << 22,
            compress: true,
            zero_copy: false,
            memory_limit: None,
            cache_bytes: 16 << 30,
            cpu_filter: false,
            tune: None,
            profile: None,
        }
    }
}

impl GpuOptions {
    /// How chunks reach the kernel, as reports name it.
    pub fn transfer(&self) -> &'static str {
        match (self.resident, self.zero_copy, self.compress) {
            (true, _, true) => "resident compressed",
            (true, _, false) => "resident",
            (false, true, true) => "zero-copy compressed",
            (false, true, false) => "zero-copy",
            (false, false, true) => "streaming compressed",
            (false, false, false) => "streaming",
        }
    }
}

/// What happened, for `--explain`, `--timing` and benchmarks.
#[derive(Debug, Clone)]
pub struct GpuReport {
    /// Device name.
    pub device: String,
    /// Strategy run.
    pub strategy: GpuStrategy,
    /// Why it was chosen.
    pub reason: String,
    /// Key words per group (1 unless keys are wider than 64 bits).
    pub key_words: usize,
    /// Key domain of the first word.
    pub domain: u64,
    /// Estimated groups.
    pub est_groups: u64,
    /// The estimate, its source, and the planned table's size against the device's shared
    /// memory per block, L2 and free memory (read when the query was planned).
    pub estimate: String,
    /// Groups found.
    pub groups: u64,
    /// Times the global table grew.
    pub grows: u32,
    /// Launch shape.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block.
    pub shared_bytes: u64,
    /// NVRTC compile and module load, ms.
    pub compile_ms: f64,
    /// Which cache served the kernels.
    pub cache: CacheHit,
    /// Host-to-device copies, ms (in `prepare` for resident runs).
    pub upload_ms: f64,
    /// How chunks reached the kernel (see [`GpuOptions::transfer`]).
    pub transfer: &'static str,
    /// Bytes per row the kernel's columns take as they are (dictionary keys as 32-bit codes).
    pub raw_bytes_per_row: f64,
    /// Bytes per row sent (after transfer compression; validity bits included).
    pub sent_bytes_per_row: f64,
    /// Per column read, its transfer encoding.
    pub encodings: Vec<String>,
    /// Whether the filter ran on the CPU (a selection bit per row was sent instead).
    pub cpu_filter: bool,
    /// Whether chunks were made as the scan delivered its batches (not collected first).
    pub from_scan: bool,
    /// Chunks and rows per chunk.
    pub chunks: usize,
    /// Rows per chunk (after the memory budget).
    pub batch_rows: usize,
    /// Host preparation (keys, codes, encoding), ms; 0 when served by the cache.
    pub prepare_ms: f64,
    /// Whether the prepared input came from the cache.
    pub cached: bool,
    /// Kernels of the last run, ms (CUDA events).
    pub kernel_ms: f64,
    /// Wall clock of the last run, ms.
    pub total_ms: f64,
    /// Rows of the input.
    pub rows: u64,
    /// Rows the GPU aggregated in the last run (all, unless co-processing split them).
    pub rows_run: u64,
    /// What the runtime tuner did (across this query's runs so far), if it ran.
    pub tuning: Option<TuneReport>,
    /// Strategy switches between chunks in the last run, when the groups seen outgrew the
    /// plan (each says after which chunk, from what to what, and why).
    pub switches: Vec<String>,
}

/// Result columns (keys, then aggregates) and the report.
#[derive(Debug)]
pub struct GpuOutput {
    /// Keys then aggregates.
    pub columns: Vec<ArrayRef>,
    /// Result groups.
    pub num_rows: usize,
    /// What happened.
    pub report: GpuReport,
}

/// One key word: which keys it packs and the codec that packs them.
pub(super) struct KeyWord {
    positions: Vec<usize>,
    codec: KeyCodec,
}

/// Words of a packed key must leave the two sentinels (EMPTY, BUSY) free.
const MAX_WORD_DOMAIN: u64 = u64::MAX - 2;

fn packed_ok(codec: &KeyCodec) -> bool {
    codec.packed_columns().is_some() && codec.domain() <= MAX_WORD_DOMAIN
}

/// The exact codec of columns `cols` (indices into each input batch's columns, of `types`).
fn plan_columns(types: &[DataType], inputs: &[Vec<ArrayRef>], cols: &[usize]) -> Result<KeyCodec> {
    let types: Vec<DataType> = cols.iter().map(|&c| types[c].clone()).collect();
    let arrays: Vec<Vec<ArrayRef>> = inputs
        .iter()
        .map(|b| cols.iter().map(|&c| Arc::clone(&b[c])).collect())
        .collect();
    let refs: Vec<&[ArrayRef]> = arrays.iter().map(Vec::as_slice).collect();
    KeyCodec::plan_exact(&types, &refs)
}

/// Splits keys that do not pack into one word (checked by [`split_wide_keys`]) into as few
/// 64-bit words as their exact ranges allow, greedily in key order.
fn plan_keys(key_types: &[DataType], chunks: &[Vec<ArrayRef>]) -> Result<Vec<KeyWord>> {
    let plan = |pos: &[usize]| plan_columns(key_types, chunks, pos);
    let mut words = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut current_codec: Option<KeyCodec> = None;
    for (p, t) in key_types.iter().enumerate() {
        let mut candidate = current.clone();
        candidate.push(p);
        let c = plan(&candidate)?;
        if packed_ok(&c) {
            current = candidate;
            current_codec = Some(c);
            continue;
        }
        if let Some(done) = current_codec.take() {
            words.push(KeyWord {
                positions: std::mem::take(&mut current),
                codec: done,
            });
        }
        let single = plan(&[p])?;
        if !packed_ok(&single) {
            return Err(GrouperError::Unsupported(format!(
                "GPU group key of type {t} spans all 2^64 values"
            )));
        }
        current = vec![p];
        current_codec = Some(single);
    }
    if let Some(done) = current_codec {
        words.push(KeyWord {
            positions: current,
            codec: done,
        });
    }
    Ok(words)
}

/// Where an output key comes from: one key of the kernel, or the parts of a split one.
enum KeyOut {
    Direct(usize),
    Split(Split, Vec<usize>),
}

/// The kernel's key columns: each query key as is, or, when its exact range needs more than one
/// word, its 63-bit parts appended to every chunk as new columns (see [`Split`]).
fn split_wide_keys(
    query: &GpuQuery,
    chunks: &mut [Vec<ArrayRef>],
    columns: &mut Vec<DataType>,
) -> Result<(Vec<usize>, Vec<KeyOut>, Option<KeyCodec>)> {
    if query.keys.is_empty() {
        return Ok((vec![], vec![], None));
    }
    // The common case first: all keys pack into one word, nothing to split.
    let joint = plan_columns(&query.columns, chunks, &query.keys)?;
    if packed_ok(&joint) {
        let direct = (0..query.keys.len()).map(KeyOut::Direct).collect();
        return Ok((query.keys.clone(), direct, Some(joint)));
    }
    let mut ext = Vec::new();
    let mut out = Vec::new();
    for &k in &query.keys {
        let t = query.columns[k].clone();
        if packed_ok(&plan_columns(&query.columns, chunks, &[k])?) {
            out.push(KeyOut::Direct(ext.len()));
            ext.push(k);
            continue;
        }
        let arrays: Vec<ArrayRef> = chunks.iter().map(|c| Arc::clone(&c[k])).collect();
        let split = Split::plan(&t, &arrays).ok_or_else(|| {
            GrouperError::Unsupported(format!("GPU group key of type {t} wider than 64 bits"))
        })?;
        let mut positions = Vec::with_capacity(split.parts);
        for _ in 0..split.parts {
            positions.push(ext.len());
            ext.push(columns.len());
            columns.push(DataType::Int64);
        }
        for c in chunks.iter_mut() {
            let parts = split.parts(&c[k])?;
            c.extend(parts);
        }
        out.push(KeyOut::Split(split, positions));
    }
    Ok((ext, out, None))
}

/// Groups batches of the given row counts into chunks of at most `limit` rows: each chunk is a
/// list of (batch, offset, length) slices.
fn chunk_pieces(
    batch_rows: impl Iterator<Item = usize>,
    limit: usize,
) -> Vec<Vec<(usize, usize, usize)>> {
    let mut out: Vec<Vec<(usize, usize, usize)>> = Vec::new();
    let mut current = Vec::new();
    let mut filled = 0;
    for (b, n) in batch_rows.enumerate() {
        let mut off = 0;
        while off < n {
            let take = (limit - filled).min(n - off);
            current.push((b, off, take));
            filled += take;
            off += take;
            if filled == limit {
                out.push(std::mem::take(&mut current));
                filled = 0;
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The strategy and its sizes.
#[derive(Debug)]
pub(super) struct Choice {
    pub(super) strategy: GpuStrategy,
    pub(super) reason: String,
    pub(super) threads: u32,
    pub(super) copies: u32,
    pub(super) local_slots: u64,
}

/// A query ready to run: planned, compiled, and (resident) uploaded.
pub struct Prepared {
    pub(super) base: Arc<Base>,
    /// The planner's launch shape (and the table layout every tuned shape shares).
    pub(super) planned: Variant,
    /// The runtime tuner, when the launch shape is left to it; it lives across runs.
    tuning: Option<Tuning>,
    merge_entries: CudaFunction,
    init_table: CudaFunction,
    pub(super) opts: GpuOptions,
    report: GpuReport,
    /// When the current run started.
    started: Option<Instant>,
}

/// What does not depend on the strategy: the planned keys and the input's chunk images.
pub(crate) struct Base {
    pub(super) gpu: Arc<Gpu>,
    pub(super) query: GpuQuery,
    pub(super) layout: Layout,
    pub(super) key_words: Vec<KeyWord>,
    /// How the output keys come from the (possibly split) keys.
    key_out: Vec<KeyOut>,
    /// The kernel spec without the strategy's choices.
    pub(super) template: KernelSpec,
    /// How an input batch's columns become the kernel's.
    pub(super) prep: ColumnPrep,
    /// Per chunk, per column (`None`: unread), the chunk's slices (dictionary keys as codes).
    chunks: Vec<Vec<Option<Vec<ArrayRef>>>>,
    /// Per column, its transfer encoding (`None`: unread).
    pub(super) encodings: Vec<Option<Encoding>>,
    /// Per chunk, its image's layout (none when the chunks are made as a scan streams in).
    layouts: Vec<ImageLayout>,
    /// Per chunk, its slices of the input batches: (batch, offset, rows).
    pieces: Vec<Vec<(usize, usize, usize)>>,
    /// Compressed streaming: each chunk's encoded image, pinned once.
    images: Option<Vec<PinnedHostSlice<u8>>>,
    /// Resident: each chunk's image on the device.
    resident: Option<Vec<CudaSlice<u8>>>,
    /// The group-count estimate and what it rests on.
    pub(super) estimate: planner::Estimate,
    pub(super) rows: u64,
    /// Rows per chunk (the largest chunk's).
    pub(super) batch_rows: usize,
    raw_bytes_per_row: f64,
    sent_bytes_per_row: f64,
    prepare_ms: f64,
    upload_ms: f64,
    /// Host bytes this input owns (images, codes): what the cache counts.
    owned_bytes: u64,
}

/// Where a query's rows come from when it is planned.
pub(crate) enum Source<'a> {
    /// The whole input, in memory.
    Batches(&'a [RecordBatch]),
    /// A scan still delivering: the batches read so far (string dictionaries and the group
    /// estimate come from them), each column's bounds from the source's statistics, and the
    /// rows the statistics expect.
    Stream {
        first: &'a [RecordBatch],
        bounds: &'a [ColumnBounds],
        rows: Option<u64>,
    },
}

/// How one input batch's columns become the columns the kernel reads: the filter's selection
/// appended (filter precomputation), string keys replaced by their dictionary codes; for a
/// stream, each checked against the plan made from statistics.
pub(crate) struct ColumnPrep {
    /// The filter the CPU evaluates, when precomputed; its result is column `selection_at`.
    selection: Option<(Expr, usize)>,
    /// Per column, the key word and position whose dictionary codes it becomes.
    dictionary_of: Vec<Option<(usize, usize)>>,
    /// Per key word, the columns of its positions (checked against the codec for streams).
    key_columns: Vec<Vec<usize>>,
}

impl ColumnPrep {
    /// The kernel's columns of one batch of `rows` rows. `check` (a stream planned from
    /// statistics; per kernel column, whether the plan allows NULLs): verify that the batch
    /// lies within the plan, failing with [`GrouperError::OutsidePlan`] where it does not.
    pub(super) fn apply(
        &self,
        mut cols: Vec<ArrayRef>,
        rows: usize,
        key_words: &[KeyWord],
        check: Option<&[bool]>,
    ) -> Result<Vec<ArrayRef>> {
        let outside = |what: String| GrouperError::OutsidePlan(what);
        if check.is_some() {
            for (kw, columns) in key_words.iter().zip(&self.key_columns) {
                for (i, &c) in columns.iter().enumerate() {
                    if !cols.get(c).is_some_and(|a| kw.codec.covers(i, a)) {
                        return Err(outside(format!(
                            "a group key of column {c} lies outside the source's statistics"
                        )));
                    }
                }
            }
        }
        if let Some((filter, at)) = &self.selection {
            let selected = crate::expr::select::selection(filter, &cols, rows)?;
            if cols.len() != *at {
                return Err(GrouperError::Gpu("selection column out of place".into()));
            }
            cols.push(Arc::new(selected));
        }
        for (c, a) in cols.iter_mut().enumerate() {
            let Some(&Some((wi, i))) = self.dictionary_of.get(c) else {
                continue;
            };
            let codec = &key_words
                .get(wi)
                .ok_or_else(|| GrouperError::Gpu("no key word".into()))?
                .codec;
            let codes = codec.dictionary_codes(i, a)?.ok_or_else(|| {
                outside(format!(
                    "string key column {c} has more distinct values than its dictionary holds"
                ))
            })?;
            *a = Arc::new(UInt32Array::new(codes.into(), a.logical_nulls()));
        }
        if let Some(nullable) = check {
            for (c, a) in cols.iter().enumerate() {
                if !nullable.get(c).copied().unwrap_or(true) && a.logical_null_count() > 0 {
                    return Err(outside(format!(
                        "column {c} has NULLs the source's statistics did not count"
                    )));
                }
            }
        }
        Ok(cols)
    }
}

fn pow2_at_least(n: u64) -> u64 {
    n.max(1).checked_next_power_of_two().unwrap_or(1 << 63)
}

impl Prepared {
    /// Plans, compiles and (resident) uploads `query` over `batches`. A streaming input seen
    /// before (the same arrays, query and transfer options) comes from the cache.
    pub fn new(query: &GpuQuery, batches: &[RecordBatch], opts: &GpuOptions) -> Result<Self> {
        let gpu = Gpu::get()?;
        let layout = query.check(opts)?;
        let cacheable = opts.cache_bytes > 0 && !opts.resident;
        let key = cacheable.then(|| InputKey::new(query, batches, opts));
        if let Some(base) = key.as_ref().and_then(cache::lookup) {
            return Self::for_options(base, opts, true);
        }
        let base = Arc::new(Base::build(
            gpu,
            query,
            layout,
            Source::Batches(batches),
            opts,
        )?);
        if let Some(key) = key {
            cache::insert(key, Arc::clone(&base), base.owned_bytes, opts.cache_bytes);
        }
        Self::for_options(base, opts, false)
    }
}

impl Base {
    /// Bytes of one table slot as `--explain` and the tuner size tables: key and state
    /// words, 8 bytes each.
    fn slot_bytes(&self) -> u64 {
        8 * (self.layout.words + self.key_words.len().max(1)) as u64
    }

    /// Bytes of the expected hash table at fill factor `fill`.
    pub(super) fn hash_table_bytes(&self, fill: f64) -> u64 {
        let slots = (self.estimate.groups as f64 / fill.max(0.01)) as u64;
        slots.saturating_mul(self.slot_bytes())
    }

    pub(super) fn build(
        gpu: Arc<Gpu>,
        query: &GpuQuery,
        layout: Layout,
        source: Source<'_>,
        opts: &GpuOptions,
    ) -> Result<Self> {
        let start = Instant::now();
        let p = &opts.params;
        let (batches, stream) = match source {
            Source::Batches(b) => (b, None),
            Source::Stream {
                first,
                bounds,
                rows,
            } => (first, Some((bounds, rows))),
        };
        let seen: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let rows = stream.and_then(|s| s.1).unwrap_or(seen);
        // The input's columns as they are (no copy); device chunks are runs of batch slices.
        let mut inputs: Vec<Vec<ArrayRef>> = batches.iter().map(|b| b.columns().to_vec()).collect();
        let mut columns_ext = query.columns.clone();
        let (ext_keys, key_out, joint) = match stream {
            None => split_wide_keys(query, &mut inputs, &mut columns_ext)?,
            Some((bounds, _)) if !query.keys.is_empty() => {
                // Planned from the statistics, one word (no split: that needs every value).
                let types: Vec<DataType> = query
                    .keys
                    .iter()
                    .map(|&k| query.columns[k].clone())
                    .collect();
                let of = |k: usize| bounds.get(k).cloned().unwrap_or_default();
                let ranges: Vec<_> = query.keys.iter().map(|&k| of(k).range).collect();
                let nulls: Vec<bool> = query.keys.iter().map(|&k| of(k).may_null).collect();
                let sample: Vec<Vec<ArrayRef>> = inputs
                    .iter()
                    .map(|b| query.keys.iter().map(|&k| Arc::clone(&b[k])).collect())
                    .collect();
                let refs: Vec<&[ArrayRef]> = sample.iter().map(Vec::as_slice).collect();
                let codec = KeyCodec::plan_bounded(&types, &ranges, &nulls, &refs)?;
                if !packed_ok(&codec) {
                    return Err(GrouperError::Unsupported(
                        "streamed group keys must pack into 64 bits".into(),
                    ));
                }
                let direct = (0..query.keys.len()).map(KeyOut::Direct).collect();
                (query.keys.clone(), direct, Some(codec))
            }
            Some(_) => (vec![], vec![], None),
        };
        let key_types: Vec<DataType> = ext_keys.iter().map(|&k| columns_ext[k].clone()).collect();
        let key_inputs: Vec<Vec<ArrayRef>> = inputs
            .iter()
            .map(|c| ext_keys.iter().map(|&k| Arc::clone(&c[k])).collect())
            .collect();
        let key_words = match joint {
            Some(codec) => vec![KeyWord {
                positions: (0..ext_keys.len()).collect(),
                codec,
            }],
            None => plan_keys(&key_types, &key_inputs)?,
        };

        // Filter precomputation: the kernel's filter becomes the selection column.
        let selection = match (&query.filter, opts.cpu_filter) {
            (Some(f), true) => {
                columns_ext.push(DataType::Boolean);
                Some((f.clone(), columns_ext.len() - 1))
            }
            _ => None,
        };
        let kernel_filter = match &selection {
            Some((_, at)) => Some(Expr::column(*at, DataType::Boolean)),
            None => query.filter.clone(),
        };
        // Device columns: dictionary codes for string keys, the values otherwise.
        let mut used = vec![false; columns_ext.len()];
        let mut reads = Vec::new();
        for e in kernel_filter
            .iter()
            .chain(query.aggregates.iter().filter_map(|(_, a)| a.as_ref()))
        {
            e.columns(&mut reads);
        }
        reads.iter().for_each(|&c| used[c] = true);
        ext_keys.iter().for_each(|&c| used[c] = true);
        let mut dictionary_of = vec![None; columns_ext.len()];
        let mut terms = Vec::with_capacity(key_words.len());
        for (wi, kw) in key_words.iter().enumerate() {
            let cols = kw.codec.packed_columns().unwrap_or_default();
            let mut word = Vec::new();
            for (i, (&pos, col)) in kw.positions.iter().zip(cols).enumerate() {
                let c = ext_keys[pos];
                if col.kind == PackedKind::Dictionary {
                    dictionary_of[c] = Some((wi, i));
                }
                word.push((c, col));
            }
            terms.push(word);
        }
        let columns: Vec<Option<DataType>> = (0..columns_ext.len())
            .map(|c| {
                used[c].then(|| match dictionary_of[c] {
                    Some(_) => DataType::UInt32,
                    None => columns_ext[c].clone(),
                })
            })
            .collect();
        let prep = ColumnPrep {
            selection,
            dictionary_of,
            key_columns: key_words
                .iter()
                .map(|kw| kw.positions.iter().map(|&p| ext_keys[p]).collect())
                .collect(),
        };
        // Columns that may hold NULLs: any in the input, or (a stream) what the statistics
        // allow; the selection never does.
        let selection_at = prep.selection.as_ref().map(|s| s.1);
        let nullable: Vec<bool> = (0..columns_ext.len())
            .map(|c| {
                used[c]
                    && Some(c) != selection_at
                    && match stream {
                        Some((bounds, _)) => bounds.get(c).is_none_or(|b| b.may_null),
                        None => inputs.iter().any(|b| b[c].logical_null_count() > 0),
                    }
            })
            .collect();
        // Kernel columns of the collected input, batch by batch in parallel (a stream's
        // batches go through the same preparation as they arrive).
        let mut owned_bytes = 0u64;
        let inputs: Vec<Vec<ArrayRef>> = match stream {
            Some(_) => Vec::new(),
            None => inputs
                .into_par_iter()
                .zip(batches.par_iter())
                .map(|(b, batch)| prep.apply(b, batch.num_rows(), &key_words, None))
                .collect::<Result<_>>()?,
        };
        if stream.is_none() {
            owned_bytes += 4 * rows * prep.dictionary_of.iter().flatten().count() as u64;
            owned_bytes += rows.div_ceil(8) * selection_at.is_some() as u64;
        }
        let column_of =
            |c: usize| -> Vec<ArrayRef> { inputs.iter().map(|b| Arc::clone(&b[c])).collect() };
        let encodings: Vec<Option<Encoding>> = columns
            .iter()
            .enumerate()
            .map(|(c, t)| {
                t.as_ref()
                    .map(|t| match (opts.compress, stream) {
                        (false, _) => Ok(Encoding::plain(t)),
                        (true, None) => Encoding::choose(t, &column_of(c)),
                        (true, Some((bounds, _))) => Ok(Encoding::for_range(
                            t,
                            match prep.dictionary_of[c] {
                                Some((wi, i)) => key_words[wi]
                                    .codec
                                    .dictionary_capacity(i)
                                    .map(|cap| (0, cap as i128)),
                                None => bounds.get(c).and_then(|b| b.range),
                            },
                        )),
                    })
                    .transpose()
            })
            .collect::<Result<_>>()?;
        let bits = |raw: bool| -> u64 {
            columns
                .iter()
                .zip(&encodings)
                .zip(&nullable)
                .filter_map(|((t, e), &n)| {
                    let b = if raw {
                        native_bits(t.as_ref()?)
                    } else {
                        e.as_ref()?.bits
                    };
                    Some(b as u64 + n as u64)
                })
                .sum()
        };
        let (raw_bits, sent_bits) = (bits(true), bits(false));
        // Chunk rows: at most 2^30 (a launch counts rows in 32 bits); streaming buffers take at
        // most half of the memory budget, the aggregation table the rest. Resident inputs are
        // launched in chunks too: they are the batches the runtime tuner measures.
        let mut batch_rows = opts.batch_rows.clamp(1, 1 << 30);
        if let (Some(limit), false) = (opts.memory_limit, opts.resident) {
            let fit = (limit / 2).saturating_mul(8) / (SLOTS as u64 * sent_bits.max(1) + 64 * 8);
            batch_rows = batch_rows.min((fit as usize).max(1024));
        }
        let pieces = match stream {
            Some(_) => Vec::new(),
            None => chunk_pieces(batches.iter().map(RecordBatch::num_rows), batch_rows),
        };
        let chunks: Vec<Vec<Option<Vec<ArrayRef>>>> = pieces
            .iter()
            .map(|chunk| {
                (0..columns_ext.len())
                    .map(|c| {
                        used[c].then(|| {
                            chunk
                                .iter()
                                .map(|&(b, off, len)| inputs[b][c].slice(off, len))
                                .collect()
                        })
                    })
                    .collect()
            })
            .collect();
        let layouts: Vec<ImageLayout> = pieces
            .iter()
            .map(|c| ImageLayout::new(c.iter().map(|p| p.2).sum(), &encodings, &nullable))
            .collect();
        if stream.is_none() {
            // The largest chunk, for the overflow lists.
            batch_rows = layouts.iter().map(|l| l.rows).max().unwrap_or(0).max(1);
        }

        let domain = key_words.first().map_or(1, |k| k.codec.domain());
        let estimate = estimate_groups(&key_words, &key_inputs, domain, rows)?;
        let non_null_args = query
            .aggregates
            .iter()
            .map(|(_, a)| a.as_ref().is_some_and(|e| !e.may_be_null(&|c| nullable[c])))
            .collect();
        let template = KernelSpec {
            columns,
            encodings: encodings.clone(),
            nullable,
            filter: kernel_filter,
            key_words: terms,
            non_null_args,
            args: query.aggregates.iter().map(|(_, a)| a.clone()).collect(),
            layout: layout.clone(),
            strategy: GpuStrategy::Global,
            threads: p.threads_per_block.unwrap_or(256),
            items_per_thread: p.items_per_thread,
            hash: p.hash,
            domain,
            copies: 0,
            local_slots: 0,
            fill_factor: p.fill_factor,
        };
        let mut upload_ms = 0.0;
        let mut images = None;
        let mut resident = None;
        if opts.resident {
            let total: u64 = layouts.iter().map(|l| l.bytes as u64).sum();
            Budget::new(opts.memory_limit).take(total, "the resident input")?;
            let t = Instant::now();
            let stream = Arc::clone(&gpu.stream);
            let mut all = Vec::with_capacity(layouts.len());
            for (l, ch) in layouts.iter().zip(&chunks) {
                let mut host = vec![0u8; l.bytes];
                l.fill(ch, &encodings, &mut host)?;
                all.push(
                    stream
                        .clone_htod(&host)
                        .map_err(gpu_err("uploading columns"))?,
                );
            }
            stream.synchronize().map_err(gpu_err("uploading columns"))?;
            upload_ms = t.elapsed().as_secs_f64() * 1e3;
            resident = Some(all);
        } else if opts.compress && stream.is_none() {
            // Encoded once, chunks in parallel, straight into pinned memory.
            let pinned = layouts
                .par_iter()
                .zip(&chunks)
                .map(|(l, ch)| {
                    let mut img = alloc_pinned(&gpu, l.bytes)?;
                    let buf = img
                        .as_mut_slice()
                        .map_err(gpu_err("writing pinned memory"))?;
                    l.fill(ch, &encodings, buf)?;
                    Ok(img)
                })
                .collect::<Result<Vec<_>>>()?;
            owned_bytes += layouts.iter().map(|l| l.bytes as u64).sum::<u64>();
            images = Some(pinned);
        }
        Ok(Self {
            gpu,
            query: query.clone(),
            layout,
            key_words,
            key_out,
            template,
            prep,
            chunks,
            encodings,
            layouts,
            pieces,
            images,
            resident,
            estimate,
            rows,
            batch_rows,
            raw_bytes_per_row: raw_bits as f64 / 8.0,
            sent_bytes_per_row: sent_bits as f64 / 8.0,
            prepare_ms: start.elapsed().as_secs_f64() * 1e3 - upload_ms,
            upload_ms,
            owned_bytes,
        })
    }

    /// The largest image a chunk may have: the collected input's largest, or a full chunk
    /// of a stream.
    pub(super) fn max_image_bytes(&self) -> usize {
        match self.layouts.iter().map(|l| l.bytes).max() {
            Some(b) => b,
            None => {
                ImageLayout::new(self.batch_rows, &self.encodings, &self.template.nullable).bytes
            }
        }
    }

    /// Fills the raw image of chunk `i` (raw streaming's producer).
    fn fill(&self, i: usize, out: &mut [u8]) -> Result<()> {
        match (self.layouts.get(i), self.chunks.get(i)) {
            (Some(l), Some(ch)) => l.fill(ch, &self.encodings, out),
            _ => Err(GrouperError::Gpu(format!("no chunk {i}"))),
        }
    }
}

impl Prepared {
    /// The same prepared input (planned keys, uploaded columns) run with other options:
    /// another strategy or kernel parameters, without planning or uploading again.
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
        self.base.query.check(opts)?;
        Self::for_options(Arc::clone(&self.base), opts, self.report.cached)
    }

    /// Chooses the strategy, generates and compiles its kernels.
    fn for_options(base: Arc<Base>, opts: &GpuOptions, cached: bool) -> Result<Self> {
        // This may be a thread that has not used the device yet (a cached input and a cached
        // kernel make no call that binds it), and occupancy queries need a current context.
        base.gpu
            .ctx
            .bind_to_thread()
            .map_err(gpu_err("binding the CUDA context"))?;
        let info = &base.gpu.info;
        let (planned, choice, compiled) = Variant::compile(&base, opts, Demand::of(&base))?;
        let tuning = Tuning::new(&base, opts, &planned);
        let report = GpuReport {
            device: info.name.clone(),
            strategy: choice.strategy,
            reason: choice.reason,
            key_words: base.key_words.len().max(1),
            domain: base.template.domain,
            est_groups: base.estimate.groups,
            estimate: format!(
                "{}; {}",
                base.estimate,
                table_fit(&base, opts, choice.strategy.is_perfect())
            ),
            groups: 0,
            grows: 0,
            blocks: planned.blocks,
            threads: planned.spec.threads,
            shared_bytes: planned.spec.shared_bytes(),
            compile_ms: compiled.compile_ms,
            cache: compiled.source,
            upload_ms: base.upload_ms,
            transfer: opts.transfer(),
            raw_bytes_per_row: base.raw_bytes_per_row,
            sent_bytes_per_row: base.sent_bytes_per_row,
            encodings: base
                .encodings
                .iter()
                .enumerate()
                .filter_map(|(c, e)| e.as_ref().map(|e| format!("#{c} {e}")))
                .collect(),
            cpu_filter: base.prep.selection.is_some(),
            from_scan: false,
            chunks: base.layouts.len(),
            batch_rows: base.batch_rows,
            prepare_ms: if cached { 0.0 } else { base.prepare_ms },
            cached,
            kernel_ms: 0.0,
            total_ms: 0.0,
            rows: base.rows,
            rows_run: 0,
            tuning: tuning.as_ref().map(Tuning::report),
            switches: Vec::new(),
        };
        Ok(Prepared {
            merge_entries: compiled.function("merge_entries")?,
            init_table: compiled.function("init_table")?,
            planned,
            tuning,
            base,
            opts: opts.clone(),
            report,
            started: None,
        })
    }

    /// The report of the last run (planning fields before any run).
    pub fn report(&self) -> &GpuReport {
        &self.report
    }

    fn launch_cfg(&self, shared: u64) -> LaunchConfig {
        self.planned.launch_cfg(shared)
    }

    /// Words per slot of the global table (key words, none when direct, then state words).
    pub(super) fn width(&self) -> usize {
        let k = if self.planned.spec.strategy.is_perfect() {
            0
        } else {
            self.planned.spec.key_count()
        };
        k + self.base.layout.words
    }

    pub(super) fn new_table(
        &self,
        stream: &Arc<CudaStream>,
        cap: u64,
        budget: &Budget,
    ) -> Result<DeviceTable> {
        budget.take(8 * self.width() as u64 * cap, "the aggregation table")?;
        let mut t = DeviceTable::alloc(stream, self.width(), cap)?;
        let mut b = stream.launch_builder(&self.init_table);
        b.arg(&mut t.slots).arg(&cap);
        // SAFETY: init_table(u64*, u64) writes cap * GS words, which the table holds.
        unsafe { b.launch(self.launch_cfg(0)) }.map_err(gpu_err("launching init_table"))?;
        Ok(t)
    }

    /// Runs the query once.
    pub fn run(&mut self) -> Result<GpuOutput> {
        let table = self.execute(&self.all_chunks(), None)?;
        self.finish(&table)
    }

    /// Reads `table` back, finalizes its groups and reports the run.
    fn finish(&mut self, table: &DeviceTable) -> Result<GpuOutput> {
        let (columns, num_rows) = self.read_partial(table)?.finalize()?;
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
        let base = Base::build(gpu, query, layout, source, opts)?;
        let mut prepared = Self::for_options(Arc::new(base), opts, false)?;
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
        let base = Arc::clone(&self.base);
        let mut chunker = Chunker::new(&base, first, next);
        let mut produce = |out: &mut [u8]| chunker.produce(out);
        let table = self.execute(&|| None, Some(&mut produce))?;
        self.report.chunks = chunker.chunks;
        self.report.rows = self.report.rows_run;
        self.finish(&table)
    }

    /// Runs the query over the chunks `claim` hands out (co-processing: a queue shared with
    /// CPU workers), returning its groups unfinalized for merging with theirs.
    pub fn run_partial(&mut self, claim: Claim<'_>) -> Result<(PartialGroups, GpuReport)> {
        let table = self.execute(claim, None)?;
        let partial = self.read_partial(&table)?;
        self.report.groups = partial.len as u64;
        self.report.total_ms = self.started_ms();
        Ok((partial, self.report.clone()))
    }

    /// Rows of each chunk, for the co-processing queue (a chunk is a run of input rows).
    pub fn chunk_rows(&self) -> Vec<usize> {
        self.base.layouts.iter().map(|l| l.rows).collect()
    }

    /// Which slices of the input batches chunk `i` is made of: (batch, offset, rows).
    pub fn chunk_pieces(&self, i: usize) -> &[(usize, usize, usize)] {
        self.base.pieces.get(i).map_or(&[], Vec::as_slice)
    }

    /// Every chunk, in order.
    fn all_chunks(&self) -> impl Fn() -> Option<usize> + Sync {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let n = self.base.layouts.len();
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
        self.execute(&self.all_chunks(), None)?;
        self.report.total_ms = self.started_ms();
        Ok(&self.report)
    }

    /// Runs the kernels over the chunks `claim` hands out (or, with `produce`, those a scan's
    /// stream makes); the table they filled. With a tuner, each chunk runs the launch shape
    /// the tuner picks and reports its kernel time back; the table carries across shapes.
    pub(super) fn execute(
        &mut self,
        claim: Claim<'_>,
        produce: Option<Produce<'_>>,
    ) -> Result<DeviceTable> {
        let mut tuning = self.tuning.take();
        let result = self.execute_with(claim, produce, &mut tuning);
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
        tuning: &mut Option<Tuning>,
    ) -> Result<DeviceTable> {
        self.started = Some(Instant::now());
        let base = Arc::clone(&self.base);
        // A run may be on another thread than its preparation (co-processing).
        base.gpu
            .ctx
            .bind_to_thread()
            .map_err(gpu_err("binding the CUDA context"))?;
        let stream = Arc::clone(&base.gpu.stream);
        let ctx = Arc::clone(&base.gpu.ctx);
        let err = gpu_err;
        let perfect = self.planned.spec.strategy.is_perfect();
        let fill = self.opts.params.fill_factor;
        let budget = Budget::new(self.opts.memory_limit);
        if let Some(res) = &base.resident {
            budget.take(
                res.iter().map(|r| r.len() as u64).sum(),
                "the resident input",
            )?;
        }
        let max_rows = base.batch_rows.max(1);

        // The global table (every launch shape of the run shares it).
        let mut table = if perfect {
            self.new_table(&stream, self.planned.spec.domain, &budget)?
        } else {
            let want = self
                .opts
                .params
                .initial_groups
                .unwrap_or(self.base.estimate.table_groups() * 2);
            let cap = pow2_at_least(((want as f64 / fill) as u64).max(16));
            self.new_table(&stream, cap, &budget)?
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
        let mut scratch = Scratch::new(&stream, self.width())?;

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
        let fill = |i: usize, out: &mut [u8]| base.fill(i, out);
        let feed = match (produce, &base.resident, &base.images) {
            (Some(produce), ..) => Feed::Stream {
                max_bytes: base.max_image_bytes(),
                produce,
            },
            (None, Some(r), _) => Feed::Resident(r),
            (None, None, Some(images)) => Feed::Pinned(images),
            (None, None, None) => Feed::Gather(&fill),
        };
        let mut rows_run = 0u64;
        // Without the tuner, the planner may switch kernels between chunks as groups grow.
        let mut replan = match tuning {
            None => Replan::new(self),
            Some(_) => None,
        };
        let mut current = self.planned.clone();
        let mut on_chunk = |rows: usize, cols: &ColPtrs| -> Result<()> {
            let rows = rows as u64;
            rows_run += rows;
            // The launch shape: the tuner's pick (timed while it searches), else the plan's.
            let (config, v) = match tuning.as_mut() {
                Some(t) => t.pick(self, |v| scratch.fit(self, &stream, v, &budget))?,
                None => {
                    if let Err(e) = scratch.fit(self, &stream, &current, &budget) {
                        // Under a tight memory limit, fewer blocks (the resident ones of a lean
                        // kernel can be many) need less spill room.
                        let fewer = budget
                            .left()
                            .map(|left| current.blocks_within(left, self.width() as u64))
                            .filter(|&b| b < current.blocks)
                            .ok_or(e)?;
                        current.blocks = fewer;
                        scratch.fit(self, &stream, &current, &budget)?;
                    }
                    (None, current.clone())
                }
            };
            let before = groups;
            self.run_chunk(
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
                if let Some(next) = r.after_chunk(self, &current, groups)? {
                    current = next;
                }
            }
            Ok(())
        };
        drive(
            &base.gpu,
            &stream,
            feed,
            &base.layouts,
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

    /// One chunk through launch shape `v`: its rows, then (hash tables) the trap: rows and
    /// spilled slots that found the table full are listed, the table grows, and they run again.
    /// `timed`: events to record around the rows' aggregation kernel.
    #[allow(clippy::too_many_arguments)]
    fn run_chunk(
        &self,
        stream: &Arc<CudaStream>,
        v: &Variant,
        cols: &ColPtrs,
        rows: u64,
        (table, ctrl, lists, scratch): (
            &mut DeviceTable,
            &mut CudaSlice<u64>,
            &mut [CudaSlice<u32>; 2],
            &mut Scratch,
        ),
        (groups, grows): (&mut u64, &mut u32),
        budget: &Budget,
        timed: Option<&(CudaEvent, CudaEvent)>,
    ) -> Result<()> {
        let err = gpu_err;
        // Direct tables never fill up: no per-chunk counters, nothing to wait for.
        let perfect = v.spec.strategy.is_perfect();
        if !perfect {
            stream
                .memcpy_htod(&[*groups, 0, 0, 0], ctrl)
                .map_err(err("resetting counters"))?;
        }
        let mark = |e: Option<&CudaEvent>| -> Result<()> {
            e.map_or(Ok(()), |e| {
                e.record(stream).map_err(err("recording an event"))
            })
        };
        mark(timed.map(|t| &t.0))?;
        self.launch_rows(
            stream,
            v,
            cols,
            rows,
            None,
            table,
            ctrl,
            &mut lists[0],
            scratch,
        )?;
        mark(timed.map(|t| &t.1))?;
        if perfect {
            return Ok(());
        }
        let spill_cap = scratch.spill.cap;
        let mut current_list = 0usize;
        loop {
            let c = stream.clone_dtoh(ctrl).map_err(err("reading counters"))?;
            if c[3] != 0 {
                return Err(kernel_error(c[3]));
            }
            *groups = c[0];
            let (overflow, spilled) = (c[1], c[2]);
            if overflow == 0 && spilled == 0 {
                return Ok(());
            }
            let need = c[0] + overflow.max(spilled);
            self.grow(
                stream,
                table,
                need,
                ctrl,
                &mut scratch.spill_list[0],
                budget,
            )?;
            *grows += 1;
            if spilled > 0 {
                let mut pending = spilled;
                let mut which: Option<usize> = None;
                while pending > 0 {
                    reset_counters(stream, ctrl)?;
                    let out = which.map_or(0, |i| 1 - i);
                    let (src_list, dst_list) = read_write(&mut scratch.spill_list, 1 - out);
                    self.merge(
                        stream,
                        &scratch.spill,
                        pending,
                        which.map(|_| src_list),
                        table,
                        ctrl,
                        dst_list,
                        spill_cap,
                    )?;
                    let c = stream.clone_dtoh(ctrl).map_err(err("reading counters"))?;
                    pending = c[1];
                    which = Some(out);
                    if pending > 0 {
                        self.grow(
                            stream,
                            table,
                            c[0] + pending,
                            ctrl,
                            &mut scratch.spill_list[1 - out],
                            budget,
                        )?;
                        *grows += 1;
                    }
                }
            }
            reset_counters(stream, ctrl)?;
            if overflow > 0 {
                let (src, dst) = read_write(lists, current_list);
                self.launch_rows(
                    stream,
                    v,
                    cols,
                    overflow,
                    Some(src),
                    table,
                    ctrl,
                    dst,
                    scratch,
                )?;
                current_list = 1 - current_list;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_rows(
        &self,
        stream: &Arc<CudaStream>,
        v: &Variant,
        cols: &ColPtrs,
        n: u64,
        list: Option<&CudaSlice<u32>>,
        table: &mut DeviceTable,
        ctrl: &mut CudaSlice<u64>,
        overflow: &mut CudaSlice<u32>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let cap = table.cap;
        let limit = if v.spec.strategy.is_perfect() {
            cap
        } else {
            fill_limit(cap, self.opts.params.fill_factor)
        };
        let null = 0u64;
        let mut b = stream.launch_builder(if list.is_some() {
            &v.agg_list
        } else {
            &v.agg_rows
        });
        b.arg(cols).arg(&n);
        match list {
            Some(l) => b.arg(l),
            None => b.arg(&null),
        };
        b.arg(&mut table.slots)
            .arg(&cap)
            .arg(&limit)
            .arg(ctrl)
            .arg(overflow)
            .arg(&mut scratch.spill.slots)
            .arg(&scratch.spill.cap);
        match scratch.private.as_mut() {
            Some(p) => b.arg(&mut p.slots),
            None => b.arg(&null),
        };
        // SAFETY: the arguments match the parameters of agg_rows and agg_list in codegen (ColPtrs
        // by value, u64 counts, device pointers); every pointer in `cols` addresses a live column
        // of at least `n` rows (or of the rows `list` names), the tables hold `cap` slots, and
        // `scratch` was fitted to `v` (spill slots for its blocks, a private table per thread).
        unsafe { b.launch(v.launch_cfg(v.spec.shared_bytes())) }
            .map_err(gpu_err("launching agg_rows"))?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn merge(
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
        let limit = fill_limit(dcap, self.opts.params.fill_factor);
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
        unsafe { b.launch(self.launch_cfg(0)) }.map_err(gpu_err("launching merge_entries"))?;
        Ok(())
    }

    /// Replaces `table` by one large enough for `need` groups holding its entries (Karnagel's
    /// grow).
    fn grow(
        &self,
        stream: &Arc<CudaStream>,
        table: &mut DeviceTable,
        need: u64,
        ctrl: &mut CudaSlice<u64>,
        scratch: &mut CudaSlice<u32>,
        budget: &Budget,
    ) -> Result<()> {
        let fill = self.opts.params.fill_factor;
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
        budget.give(8 * self.width() as u64 * table.cap);
        *table = grown;
        Ok(())
    }

    /// Reads the table back: its groups' keys and states, in the CPU's accumulators.
    fn read_partial(&self, table: &DeviceTable) -> Result<PartialGroups> {
        let stream = &self.base.gpu.stream;
        let err = gpu_err("reading the table back");
        let cap = table.cap as usize;
        let slots = stream.clone_dtoh(&table.slots).map_err(&err)?;
        let perfect = self.planned.spec.strategy.is_perfect();
        let width = self.width();
        let gk = if perfect {
            0
        } else {
            self.planned.spec.key_count()
        };
        let mut selected: Vec<usize> = (0..cap)
            .filter(|&s| slots[s * width + gk + ROWS_WORD] != 0)
            .collect();
        if selected.is_empty() && self.base.query.keys.is_empty() {
            selected.push(0); // a global aggregate has one row, even over no input
        }
        let mut cols: Vec<Vec<u64>> = (0..self.base.layout.words)
            .map(|w| {
                selected
                    .iter()
                    .map(|&s| slots[s * width + gk + w])
                    .collect()
            })
            .collect();
        codegen::derive_counts(
            &self.base.layout,
            &self.planned.spec.non_null_args,
            &mut cols,
        );
        let ext_count: usize = self.base.key_words.iter().map(|k| k.positions.len()).sum();
        let mut key_arrays: Vec<Option<ArrayRef>> = vec![None; ext_count];
        for (wi, kw) in self.base.key_words.iter().enumerate() {
            let kwords: Vec<u64> = if perfect {
                selected.iter().map(|&s| s as u64).collect()
            } else {
                selected.iter().map(|&s| slots[s * width + wi]).collect()
            };
            for (pos, array) in kw.positions.iter().zip(kw.codec.decode(&kwords)?) {
                key_arrays[*pos] = Some(array);
            }
        }
        let ext: Vec<ArrayRef> = key_arrays.into_iter().flatten().collect();
        let mut out: Vec<ArrayRef> = Vec::with_capacity(self.base.key_out.len());
        for k in &self.base.key_out {
            out.push(match k {
                KeyOut::Direct(i) => Arc::clone(&ext[*i]),
                KeyOut::Split(split, parts) => {
                    let arrays: Vec<ArrayRef> =
                        parts.iter().map(|&i| Arc::clone(&ext[i])).collect();
                    split.join(&arrays)?
                }
            });
        }
        let accs = self
            .base
            .layout
            .aggs
            .iter()
            .map(|agg| to_accumulator(agg, &cols))
            .collect::<Result<Vec<_>>>()?;
        Ok(PartialGroups {
            keys: out,
            accs,
            len: selected.len(),
        })
    }
}

/// Reads the group count and zeroes the other counters, before a launch that fills them.
fn reset_counters(stream: &Arc<CudaStream>, ctrl: &mut CudaSlice<u64>) -> Result<u64> {
    let groups = stream
        .clone_dtoh(ctrl)
        .map_err(gpu_err("reading counters"))?[0];
    stream
        .memcpy_htod(&[groups, 0, 0, 0], ctrl)
        .map_err(gpu_err("resetting counters"))?;
    Ok(groups)
}

/// Of a pair of lists, the one at `from` to read and the other to write.
fn read_write<T>(pair: &mut [CudaSlice<T>; 2], from: usize) -> (&CudaSlice<T>, &mut CudaSlice<T>) {
    let (a, b) = pair.split_at_mut(1);
    if from == 0 {
        (&a[0], &mut b[0])
    } else {
        (&b[0], &mut a[0])
    }
}

fn kernel_error(bits: u64) -> GrouperError {
    if bits & crate::expr::cuda::ERR_DIV_ZERO != 0 {
        GrouperError::InvalidInput("division by zero".into())
    } else if bits & crate::expr::cuda::ERR_DECIMAL_OVERFLOW != 0 {
        GrouperError::InvalidInput("decimal overflow in an expression".into())
    } else {
        GrouperError::Gpu(format!("kernel reported error bits {bits:#x}"))
    }
}

/// The group-count estimate (`planner::estimate`) over the key words of the first batches,
/// up to [`planner::SKETCH_ROWS`] rows, for `total` input rows; keys of several words are
/// hashed into one (their domain is then unbounded).
fn estimate_groups(
    words: &[KeyWord],
    inputs: &[Vec<ArrayRef>],
    domain: u64,
    total: u64,
) -> Result<planner::Estimate> {
    let hints = planner::Hints {
        rows: Some(total),
        distinct: None,
    };
    if words.is_empty() || inputs.is_empty() {
        return Ok(planner::estimate(&[vec![0]], 1, hints));
    }
    let mut taken = 0;
    let mut sample: Vec<&Vec<ArrayRef>> = Vec::new();
    for b in inputs {
        if taken >= planner::SKETCH_ROWS {
            break;
        }
        taken += b.first().map_or(0, |a| a.len());
        sample.push(b);
    }
    let mut combined: Vec<u64> = Vec::with_capacity(taken);
    let keys_of = |kw: &KeyWord, p: usize| -> Result<ArrayRef> {
        let parts: Vec<&dyn arrow::array::Array> =
            sample.iter().map(|b| b[kw.positions[p]].as_ref()).collect();
        Ok(concat(&parts)?)
    };
    for (i, kw) in words.iter().enumerate() {
        let keys = (0..kw.positions.len())
            .map(|p| keys_of(kw, p))
            .collect::<Result<Vec<_>>>()?;
        let w = kw.codec.encode(&keys, taken)?.unwrap_or_default();
        if i == 0 {
            combined = w;
        } else {
            for (c, x) in combined.iter_mut().zip(w) {
                *c = crate::hash::murmur3(*c ^ x);
            }
        }
    }
    let domain = if words.len() == 1 { domain } else { u64::MAX };
    let mut est = planner::estimate(&[combined], domain, hints);
    est.groups = est.groups.max(1);
    Ok(est)
}

/// The expected table's size against the device's memory tiers, read now (free memory changes
/// between queries): shared memory per block, L2, free device memory.
fn table_fit(base: &Base, opts: &GpuOptions, direct: bool) -> String {
    let info = &base.gpu.info;
    let (bytes, what) = if direct {
        (
            base.template.domain.saturating_mul(base.slot_bytes()),
            "direct table",
        )
    } else {
        (
            base.hash_table_bytes(opts.params.fill_factor),
            "hash table at the fill factor",
        )
    };
    // A driver query on the context the caller bound.
    let free = cudarc::driver::result::mem_get_info().map_or(0, |(f, _)| f as u64);
    let tier = if bytes <= info.shared_per_block as u64 {
        "fits shared memory per block"
    } else if bytes <= info.l2_bytes {
        "exceeds shared memory, fits L2"
    } else if bytes <= free {
        "exceeds L2, fits free device memory"
    } else {
        "exceeds free device memory"
    };
    format!(
        "{what} ~{} KiB: {tier} (shared/block {} KiB, L2 {} MiB, free {} MiB)",
        bytes >> 10,
        info.shared_per_block >> 10,
        info.l2_bytes >> 20,
        free >> 20
    )
}

/// Slots of a `thread_private` table at most: one per thread in device memory, so only few.
const PRIVATE_SLOTS: u64 = 64;

/// Whether `groups` fit `thread_private` tables at fill factor `fill`: beyond, every thread's
/// table overflows and the strategy only adds a pass.
pub(super) fn private_tables_hold(groups: u64, fill: f64) -> bool {
    groups as f64 / fill <= PRIVATE_SLOTS as f64
}

/// What the planner knows of a query's keys when it chooses: their domain, the groups and
/// rows expected, and how hot the hottest key is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Demand {
    /// Key domain (`u64::MAX` when unbounded).
    pub(super) domain: u64,
    /// Expected groups.
    pub(super) groups: u64,
    /// Input rows.
    pub(super) rows: u64,
    /// Share of the rows the hottest key takes.
    pub(super) top_share: f64,
    /// Whether the keys are skewed ([`planner::Estimate::skewed`]).
    pub(super) skewed: bool,
}

impl Demand {
    /// The demand of a prepared input, from its estimate.
    pub(super) fn of(base: &Base) -> Self {
        Demand {
            domain: base.template.domain,
            groups: base.estimate.groups,
            rows: base.rows,
            top_share: base.estimate.top_share(),
            skewed: base.estimate.skewed(),
        }
    }

    /// The demand once `groups` have been seen, more than planned for: uniform keys' hottest
    /// share shrinks with the groups; a skewed input's hot keys stay as hot.
    pub(super) fn grown(self, groups: u64) -> Self {
        let top_share = match self.skewed {
            true => self.top_share,
            false => self.top_share * self.groups.max(1) as f64 / groups.max(1) as f64,
        };
        Demand {
            groups,
            top_share: top_share.min(self.top_share),
            ..self
        }
    }

    /// Uniform keys: no key hotter than its share of `groups`.
    #[cfg(test)]
    pub(super) fn uniform(domain: u64, groups: u64, rows: u64) -> Self {
        Demand {
            domain,
            groups,
            rows,
            top_share: 1.0 / groups.max(1) as f64,
            skewed: false,
        }
    }
}

/// The planner's choice (or the forced strategy, checked), sized from the device.
pub(super) fn choose(
    opts: &GpuOptions,
    layout: &Layout,
    key_words: usize,
    demand: Demand,
    info: &super::DeviceInfo,
) -> Result<Choice> {
    let Demand {
        domain,
        groups,
        rows,
        top_share,
        skewed,
    } = demand;
    let w = layout.words as u64;
    let k = key_words.max(1) as u64;
    let fill = opts.params.fill_factor;
    let single = key_words <= 1;
    let smem = info.shared_per_block as u64;
    // Block sizes to consider: the user's, or 256, 512 and 1024 threads. Larger blocks share
    // one shared-memory table among more threads, so a large table still leaves the SM full
    // of threads (occupancy hides the input's memory latency).
    let block_sizes: Vec<u32> = match opts.params.threads_per_block {
        Some(t) => vec![t],
        None => vec![256, 512, 1024],
    };
    let largest = *block_sizes.last().unwrap_or(&256);
    // Shared bytes a block of `t` threads may use while the SM stays fully occupied (the
    // driver reserves 1 KiB per block).
    let at_full = |t: u32| -> u64 {
        let blocks = (info.threads_per_sm / t).max(1) as u64;
        (info.shared_per_sm as u64 / blocks)
            .saturating_sub(1024)
            .min(smem)
    };
    let pow2_floor = |x: u64| {
        if x == 0 {
            0
        } else {
            1u64 << (63 - x.leading_zeros())
        }
    };
    // perfect_shared: (threads, copies). The smallest block that holds at least one copy at
    // full occupancy, with as many interleaved copies as fit (fewer conflicts on hot slots),
    // up to one per thread; else one copy in a block of the largest size.
    let shared_plan = |bytes_per_copy: u64| -> (u32, u32) {
        let bytes_per_copy = bytes_per_copy.max(1);
        block_sizes
            .iter()
            .map(|&t| {
                (
                    t,
                    pow2_floor((at_full(t) / bytes_per_copy).min(t as u64)) as u32,
                )
            })
            .find(|&(_, c)| c > 0)
            .unwrap_or((largest, (bytes_per_copy <= smem) as u32))
    };
    let registers_ok = single && domain <= 8 && domain * w <= 48;
    let (shared_threads, shared_copies) = if single {
        shared_plan(domain.saturating_mul(8 * w))
    } else {
        (largest, 0)
    };
    // A direct table in device memory: within a quarter of the device, and half of the
    // memory limit (the rest streams the input).
    let direct_room = (info.memory_bytes / 4).min(opts.memory_limit.map_or(u64::MAX, |l| l / 2));
    let global_direct_ok = single && domain.saturating_mul(8 * w) <= direct_room;
    // block_local: (threads, slots). The smallest block whose table holds ~groups / fill slots
    // at full occupancy; else the largest table that keeps the SM full with the largest blocks.
    let block_plan = |g: u64| -> (u32, u64) {
        let want = pow2_at_least(((g as f64 / fill) as u64).max(64));
        let bytes = 8 * (w + k);
        block_sizes
            .iter()
            .find(|&&t| want * bytes <= at_full(t))
            .map(|&t| (t, want))
            .unwrap_or((largest, pow2_floor(at_full(largest) / bytes).min(want)))
    };
    let block_slots = |g: u64| block_plan(g).1;
    let private_slots = pow2_at_least(((groups as f64 / fill) as u64).clamp(16, PRIVATE_SLOTS));
    let pick = |strategy: GpuStrategy, reason: String| -> Result<Choice> {
        let default_threads = opts.params.threads_per_block.unwrap_or(256);
        let (threads, copies, local_slots) = match strategy {
            GpuStrategy::PerfectShared => (shared_threads, shared_copies, 0),
            GpuStrategy::BlockLocal => {
                let (t, slots) = block_plan(groups);
                (t, 0, slots)
            }
            GpuStrategy::ThreadPrivate => (default_threads, 0, private_slots),
            _ => (default_threads, 0, 0),
        };
        let fits = match strategy {
            GpuStrategy::PerfectRegisters => single && domain.saturating_mul(w) <= 64,
            GpuStrategy::PerfectShared => shared_copies > 0,
            GpuStrategy::PerfectGlobal => global_direct_ok,
            GpuStrategy::BlockLocal => local_slots >= 16,
            _ => true,
        };
        if !fits {
            return Err(GrouperError::InvalidOption(format!(
                "GPU strategy {strategy} does not apply: key domain {domain} with {w} state words{}",
                if single { "" } else { " (keys wider than 64 bits)" }
            )));
        }
        Ok(Choice {
            strategy,
            reason,
            threads,
            copies,
            local_slots,
        })
    };
    if let Some(s) = opts.strategy {
        return pick(s, "forced".into());
    }
    // The device profile, where it measured near the estimate: the fastest strategy there
    // that applies to this query (a direct table needs dense keys in a small domain).
    let dense = global_direct_ok && domain <= groups.saturating_mul(4).max(1 << 16);
    let kind = if dense {
        KeyKind::Dense
    } else {
        KeyKind::Hashed
    };
    if let Some(advice) = opts
        .profile
        .as_deref()
        .and_then(|p| p.advise(kind, skewed, groups))
    {
        for (name, _) in &advice.ranked {
            let Ok(s) = name.parse::<GpuStrategy>() else {
                continue;
            };
            if s == GpuStrategy::ThreadPrivate && !private_tables_hold(groups, fill) {
                continue;
            }
            if let Ok(c) = pick(s, advice.to_string()) {
                return Ok(c);
            }
        }
    }
    if registers_ok {
        return pick(
            GpuStrategy::PerfectRegisters,
            format!("key domain {domain} fits registers"),
        );
    }
    if shared_copies >= 32.min(shared_threads) || (shared_copies > 0 && domain <= 4096) {
        return pick(
            GpuStrategy::PerfectShared,
            format!("key domain {domain} fits shared memory ({shared_copies} copies per block)"),
        );
    }
    // A key this hot funnels its rows' atomics into one address of a device-memory table,
    // which serializes them; per-block shared tables take them in parallel on every SM.
    let hot_limit = info.hot_key_share();
    let contended = top_share >= hot_limit;
    if contended {
        return pick(
            GpuStrategy::BlockLocal,
            format!(
                "the hottest key takes {:.2}% of the rows (≥ {:.3}%): in one device-memory table its atomics serialize; per-block shared tables absorb it, the rest overflows",
                100.0 * top_share,
                100.0 * hot_limit
            ),
        );
    }
    if global_direct_ok && domain <= groups.saturating_mul(4).max(rows).max(1 << 16) {
        return pick(
            GpuStrategy::PerfectGlobal,
            format!(
                "dense keys: domain {domain} for ~{groups} groups, direct index in device memory"
            ),
        );
    }
    if block_slots(groups) as f64 * fill >= groups as f64 && block_slots(groups) >= 64 {
        return pick(
            GpuStrategy::BlockLocal,
            format!("~{groups} groups fit a shared-memory hash table per block"),
        );
    }
    pick(
        GpuStrategy::Global,
        format!("~{groups} groups: one hash table in device memory"),
    )
}

#[cfg(test)]
mod tests {
    //! The planner's sizing needs no GPU: it reads only the device's properties.
    use super::*;
    use crate::agg::AggKind;

    /// An H100's properties, as the driver reports them.
    fn h100() -> super::super::DeviceInfo {
        super::super::DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: (9, 0),
            sms: 132,
            l2_bytes: 50 << 20,
            shared_per_block: 227 * 1024,
            shared_per_sm: 228 * 1024,
            threads_per_sm: 2048,
            blocks_per_sm: 32,
            threads_per_block: 1024,
            memory_bytes: 80 << 30,
            driver_version: 13000,
        }
    }

    fn layout(sums: usize) -> Layout {
        let mut aggs = vec![AggregateSpec::count_star()];
        aggs.extend((0..sums).map(|_| AggregateSpec::new(AggKind::Sum, DataType::Float64)));
        Layout::new(&aggs).unwrap()
    }

    /// Blocks of `threads` threads with `shared` bytes each that one SM holds.
    fn resident(info: &super::super::DeviceInfo, threads: u32, shared: u64) -> u64 {
        (info.shared_per_sm as u64 / (shared + 1024)).min((info.threads_per_sm / threads) as u64)
    }

    #[test]
    fn shared_tables_leave_the_multiprocessor_full() {
        let info = h100();
        let opts = GpuOptions::default();
        for sums in 0..3 {
            let layout = layout(sums);
            let w = layout.words as u64;
            for log in 0..=12 {
                let domain = 1u64 << log;
                let forced = GpuOptions {
                    strategy: Some(GpuStrategy::PerfectShared),
                    ..opts.clone()
                };
                let c = choose(
                    &forced,
                    &layout,
                    1,
                    Demand::uniform(domain, domain, 1 << 28),
                    &info,
                )
                .unwrap();
                let shared = 8 * w * domain * c.copies as u64;
                assert!(c.copies >= 1 && c.copies <= c.threads, "{domain}: {c:?}");
                if 8 * w * domain + 1024 > info.shared_per_sm as u64 / 2 {
                    // Not even two blocks of 1024 threads hold a copy each: one large block.
                    assert_eq!((c.threads, c.copies), (1024, 1), "{domain}");
                    continue;
                }
                assert_eq!(
                    resident(&info, c.threads, shared) * c.threads as u64,
                    info.threads_per_sm as u64,
                    "domain {domain}, {w} words: {c:?} leaves the SM part empty"
                );
                // More copies would no longer fit at full occupancy.
                let more = 2 * shared;
                assert!(
                    c.copies == c.threads
                        || resident(&info, c.threads, more) * (c.threads as u64)
                            < info.threads_per_sm as u64,
                    "domain {domain}: room for more copies than {c:?}"
                );
            }
            let auto = choose(
                &opts,
                &layout,
                1,
                Demand::uniform(4096, 4096, 1 << 28),
                &info,
            )
            .unwrap();
            assert_eq!(auto.strategy, GpuStrategy::PerfectShared, "{auto:?}");
        }
        // A block size the user fixed is kept: the table then costs occupancy.
        let fixed = GpuOptions {
            strategy: Some(GpuStrategy::PerfectShared),
            params: GpuParams {
                threads_per_block: Some(256),
                ..Default::default()
            },
            ..opts.clone()
        };
        let c = choose(
            &fixed,
            &layout(1),
            1,
            Demand::uniform(4096, 4096, 1 << 28),
            &info,
        )
        .unwrap();
        assert_eq!((c.threads, c.copies), (256, 1));
        // block_local: 1024 groups at fill 0.5 need 2048 slots of 4 words (key, rows, sum,
        // seen): 64 KiB, which only blocks of 1024 threads may take at full occupancy.
        let forced = GpuOptions {
            strategy: Some(GpuStrategy::BlockLocal),
            ..opts.clone()
        };
        let c = choose(
            &forced,
            &layout(1),
            1,
            Demand::uniform(u64::MAX, 1024, 1 << 28),
            &info,
        )
        .unwrap();
        assert_eq!((c.threads, c.local_slots), (1024, 2048));
        let c = choose(
            &forced,
            &layout(1),
            1,
            Demand::uniform(u64::MAX, 64, 1 << 28),
            &info,
        )
        .unwrap();
        assert_eq!((c.threads, c.local_slots), (256, 128));
    }

    #[test]
    fn hot_keys_keep_out_of_one_device_memory_table() {
        let info = h100();
        let opts = GpuOptions::default();
        // Dense keys over 2^16 values, uniform: a direct table in device memory.
        let uniform = Demand::uniform(1 << 16, 1 << 16, 1 << 28);
        let c = choose(&opts, &layout(1), 1, uniform, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::PerfectGlobal, "{c:?}");
        // The same keys zipf-distributed: the hottest takes ~11% of the rows.
        let zipf = Demand {
            top_share: 0.11,
            skewed: true,
            ..uniform
        };
        let c = choose(&opts, &layout(1), 1, zipf, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::BlockLocal, "{c:?}");
        assert!(
            c.reason.contains("hottest key takes 11.00%"),
            "{}",
            c.reason
        );
        // Hashed keys, many groups: the global hash table unless a key is hot.
        let wide = Demand::uniform(u64::MAX, 1 << 20, 1 << 28);
        let c = choose(&opts, &layout(1), 1, wide, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::Global, "{c:?}");
        let hot = Demand {
            top_share: 2.0 * info.hot_key_share(),
            ..wide
        };
        let c = choose(&opts, &layout(1), 1, hot, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::BlockLocal, "{c:?}");
        // Shared-memory strategies already spread hot keys: the rules keep them.
        let small = Demand {
            top_share: 0.3,
            skewed: true,
            ..Demand::uniform(1024, 1024, 1 << 28)
        };
        let c = choose(&opts, &layout(1), 1, small, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::PerfectShared, "{c:?}");
        // Re-planned for more groups than estimated: uniform keys cool down, skewed stay hot.
        let few = Demand {
            top_share: 1.0 / 40.0,
            ..Demand::uniform(u64::MAX, 40, 1 << 28)
        };
        let c = choose(&opts, &layout(1), 1, few, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::BlockLocal, "{c:?}");
        let grown = few.grown(1 << 20);
        assert!(grown.top_share < 1e-4, "{grown:?}");
        let c = choose(&opts, &layout(1), 1, grown, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::Global, "{c:?}");
        let skewed = Demand {
            skewed: true,
            ..few
        };
        assert_eq!(skewed.grown(1 << 20).top_share, skewed.top_share);
        // A forced strategy stays forced.
        let forced = GpuOptions {
            strategy: Some(GpuStrategy::Global),
            ..opts
        };
        let c = choose(&forced, &layout(1), 1, hot, &info).unwrap();
        assert_eq!(c.strategy, GpuStrategy::Global);
    }
}
