//! Preparing a query's input for the GPU, whatever the strategy ([`PreparedInput::build`]):
//!
//! 1. key words: the keys' exact ranges (or, for a stream, the source's statistics) planned
//!    into 64-bit words ([`crate::key_words`]);
//! 2. the kernel's columns: what the filter, keys and arguments read, string keys as dictionary
//!    codes, the filter's selection bit when the CPU evaluates it ([`ColumnPrep`]);
//! 3. transfer encodings per column, from statistics of the whole input ([`crate::encode`]);
//! 4. chunks of at most `batch_rows` rows (fewer under a memory limit), each a run of slices of
//!    the input batches, with its image layout;
//! 5. the group estimate over the first rows' key words;
//! 6. for compressed streaming the chunk images encoded into pinned memory once, for resident
//!    runs uploaded to the device.
//!
//! What the planner then chooses ([`crate::plan`]) and compiles ([`crate::variant`]) depends on
//! this; the cache ([`crate::cache`]) keeps it between queries over the same in-memory table.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use cudarc::driver::{CudaSlice, PinnedHostSlice};
use rayon::prelude::*;

use crate::budget::Budget;
use crate::codegen::KernelSpec;
use crate::device::{alloc_pinned, gpu_err, Gpu};
use crate::encode::{native_bits, Encoding};
use crate::image::ImageLayout;
use crate::key_words::{estimate_groups, packed_ok, plan_keys, split_wide_keys, KeyOut, KeyWord};
use crate::pipeline::SLOTS;
use crate::plan::{Choice, Demand};
use crate::query::{ColumnBounds, GpuOptions, GpuQuery};
use crate::strategy::GpuStrategy;
use grouper_core::agg::layout::Layout;
use grouper_core::error::{GrouperError, Result};
use grouper_core::expr::select::selection;
use grouper_core::expr::Expr;
use grouper_core::keys::{KeyCodec, PackedColumn, PackedKind};
use grouper_core::planner;

/// A slice of one input batch that a chunk is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Which batch.
    pub batch: usize,
    /// First row in it.
    pub offset: usize,
    /// Rows.
    pub rows: usize,
}

/// A query's input made ready for the GPU, whatever the strategy: the planned key words, the
/// kernel's columns with their transfer encodings, the chunks (and, compressed or resident, their
/// images), and the group estimate the planner chooses from.
pub(crate) struct PreparedInput {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) query: GpuQuery,
    pub(crate) layout: Layout,
    pub(crate) key_words: Vec<KeyWord>,
    /// How the output keys come from the (possibly split) keys.
    pub(crate) key_out: Vec<KeyOut>,
    /// The kernel spec without the strategy's choices.
    pub(crate) template: KernelSpec,
    /// How an input batch's columns become the kernel's.
    pub(crate) prep: ColumnPrep,
    /// Per chunk, per column (`None`: unread), the chunk's slices (dictionary keys as codes).
    chunks: Vec<Vec<Option<Vec<ArrayRef>>>>,
    /// Per column, its transfer encoding (`None`: unread).
    pub(crate) encodings: Vec<Option<Encoding>>,
    /// Per chunk, its image's layout (none when the chunks are made as a scan streams in).
    pub(crate) layouts: Vec<ImageLayout>,
    /// Per chunk, its slices of the input batches: (batch, offset, rows).
    pub(crate) pieces: Vec<Vec<Piece>>,
    /// Compressed streaming: each chunk's encoded image, pinned once.
    pub(crate) images: Option<Vec<PinnedHostSlice<u8>>>,
    /// Resident: each chunk's image on the device.
    pub(crate) resident: Option<Vec<CudaSlice<u8>>>,
    /// The group-count estimate and what it rests on.
    pub(crate) estimate: planner::Estimate,
    pub(crate) rows: u64,
    /// Rows per chunk (the largest chunk's).
    pub(crate) batch_rows: usize,
    pub(crate) raw_bytes_per_row: f64,
    pub(crate) sent_bytes_per_row: f64,
    pub(crate) prepare_ms: f64,
    pub(crate) upload_ms: f64,
    /// Host bytes this input owns (images, codes): what the cache counts.
    pub(crate) owned_bytes: u64,
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
    pub(crate) selection: Option<(Expr, usize)>,
    /// Per column, the key word and position whose dictionary codes it becomes.
    pub(crate) dictionary_of: Vec<Option<(usize, usize)>>,
    /// Per key word, the columns of its positions (checked against the codec for streams).
    key_columns: Vec<Vec<usize>>,
}

impl ColumnPrep {
    /// The key word and position of group key column `c`, if it is one.
    pub(crate) fn key_position(&self, c: usize) -> Option<(usize, usize)> {
        self.key_columns
            .iter()
            .enumerate()
            .find_map(|(wi, cols)| cols.iter().position(|&k| k == c).map(|i| (wi, i)))
    }

    /// The kernel's columns of one batch of `rows` rows. `check` (a stream planned from
    /// statistics; per kernel column, whether the plan allows NULLs): verify that the batch
    /// lies within the plan, failing with [`GrouperError::OutsidePlan`] where it does not.
    pub(crate) fn apply(
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
            let selected = selection(filter, &cols, rows)?;
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

/// The keys the kernel reads: which columns (the query's keys, or the parts a wide key was
/// split into, appended as columns), how the output keys come back from them, and the words.
struct PlannedKeys {
    /// Per kernel key, its column (among the input's columns and the appended parts).
    columns: Vec<usize>,
    /// Per output key, where it comes from.
    out: Vec<KeyOut>,
    /// The key words.
    words: Vec<KeyWord>,
}

/// The columns the kernel reads, and how each input batch's columns become them.
struct KernelColumns {
    /// Per column (input columns, split key parts, the selection): its type as the kernel
    /// reads it (dictionary keys as codes), `None` when unread.
    types: Vec<Option<DataType>>,
    /// Per column, whether it may hold NULLs.
    nullable: Vec<bool>,
    /// The filter the kernel evaluates: the query's, or the precomputed selection column.
    filter: Option<Expr>,
    /// Per key word, per packed key: its column and how it packs.
    terms: Vec<Vec<(usize, PackedColumn)>>,
    prep: ColumnPrep,
}

impl PreparedInput {
    /// Bytes of one table slot as `--explain` and the tuner size tables: key and state
    /// words, 8 bytes each.
    fn slot_bytes(&self) -> u64 {
        8 * (self.layout.words + self.key_words.len().max(1)) as u64
    }

    /// Bytes of the expected hash table at fill factor `fill`.
    pub(crate) fn hash_table_bytes(&self, fill: f64) -> u64 {
        let slots = (self.estimate.groups as f64 / fill.max(0.01)) as u64;
        slots.saturating_mul(self.slot_bytes())
    }

    /// What the planner knows of this input's keys, from its estimate.
    pub(crate) fn demand(&self) -> Demand {
        Demand {
            domain: self.template.domain,
            groups: self.estimate.groups,
            rows: self.rows,
            top_share: self.estimate.top_share(),
            hot_share: self.estimate.hot_share(self.gpu.info.hot_key_share()),
            skewed: self.estimate.skewed(),
        }
    }

    /// The planner's choice for this input's query under `opts`, given `demand`.
    pub(crate) fn choose(&self, opts: &GpuOptions, demand: Demand) -> Result<Choice> {
        crate::plan::choose(
            opts,
            &self.layout,
            &self.template.non_null_args,
            self.key_words.len(),
            demand,
            &self.gpu.info,
        )
    }

    /// Prepares `query`'s input from `source` (the steps in the module's doc).
    pub(crate) fn build(
        gpu: Arc<Gpu>,
        query: &GpuQuery,
        layout: Layout,
        source: Source<'_>,
        opts: &GpuOptions,
    ) -> Result<Self> {
        let start = Instant::now();
        let (batches, stream) = match source {
            Source::Batches(b) => (b, None),
            Source::Stream {
                first,
                bounds,
                rows,
            } => (first, Some((bounds, rows))),
        };
        let bounds = stream.map(|s| s.0);
        let seen: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let rows = stream.and_then(|s| s.1).unwrap_or(seen);
        // The input's columns as they are (no copy); device chunks are runs of batch slices.
        let mut inputs: Vec<Vec<ArrayRef>> = batches.iter().map(|b| b.columns().to_vec()).collect();
        let mut columns_ext = query.columns.clone();
        let keys = plan_key_words(query, bounds, &mut inputs, &mut columns_ext)?;
        let key_inputs: Vec<Vec<ArrayRef>> = inputs
            .iter()
            .map(|c| keys.columns.iter().map(|&k| Arc::clone(&c[k])).collect())
            .collect();
        let kernel = KernelColumns::plan(query, opts, &keys, columns_ext, bounds, &inputs);

        // Kernel columns of the collected input, batch by batch in parallel (a stream's
        // batches go through the same preparation as they arrive).
        let mut owned_bytes = 0u64;
        let inputs: Vec<Vec<ArrayRef>> = match stream {
            Some(_) => Vec::new(),
            None => inputs
                .into_par_iter()
                .zip(batches.par_iter())
                .map(|(b, batch)| kernel.prep.apply(b, batch.num_rows(), &keys.words, None))
                .collect::<Result<_>>()?,
        };
        if stream.is_none() {
            let selection_at = kernel.prep.selection.as_ref().map(|s| s.1);
            owned_bytes += 4 * rows * kernel.prep.dictionary_of.iter().flatten().count() as u64;
            owned_bytes += rows.div_ceil(8) * selection_at.is_some() as u64;
        }
        let encodings = choose_encodings(&kernel, &keys.words, &inputs, opts.compress, bounds)?;
        let bits = |raw: bool| -> u64 {
            kernel
                .types
                .iter()
                .zip(&encodings)
                .zip(&kernel.nullable)
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
        // most half of the memory budget, the aggregation table the rest.
        let mut batch_rows = launch_rows(opts).clamp(1, 1 << 30);
        if let (Some(limit), false) = (opts.memory_limit, opts.resident) {
            let fit = (limit / 2).saturating_mul(8) / (SLOTS as u64 * sent_bits.max(1) + 64 * 8);
            batch_rows = batch_rows.min((fit as usize).max(1024));
        }
        let pieces = match stream {
            Some(_) => Vec::new(),
            None => chunk_pieces(batches.iter().map(RecordBatch::num_rows), batch_rows),
        };
        let chunks = slice_chunks(&pieces, &inputs, &kernel.types);
        let layouts: Vec<ImageLayout> = pieces
            .iter()
            .map(|c| {
                let rows = c.iter().map(|p| p.rows).sum();
                ImageLayout::new(rows, &encodings, &kernel.nullable)
            })
            .collect();
        if stream.is_none() {
            // The largest chunk, for the overflow lists.
            batch_rows = layouts.iter().map(|l| l.rows).max().unwrap_or(0).max(1);
        }

        let domain = keys.words.first().map_or(1, |k| k.codec.domain());
        let estimate = estimate_groups(&keys.words, &key_inputs, domain, rows)?;
        let p = &opts.params;
        let template = KernelSpec {
            non_null_args: query
                .aggregates
                .iter()
                .map(|(_, a)| {
                    a.as_ref()
                        .is_some_and(|e| !e.may_be_null(&|c| kernel.nullable[c]))
                })
                .collect(),
            columns: kernel.types,
            encodings: encodings.clone(),
            nullable: kernel.nullable,
            filter: kernel.filter,
            key_words: kernel.terms,
            args: query.aggregates.iter().map(|(_, a)| a.clone()).collect(),
            layout: layout.clone(),
            strategy: GpuStrategy::GLOBAL,
            threads: p.threads_per_block.unwrap_or(256),
            items_per_thread: p.items_per_thread,
            hash: p.hash,
            probing: p.probing,
            buckets: p.buckets,
            domain,
            copies: 0,
            local_slots: 0,
            fill_factor: p.fill_factor,
        };
        let staged = stage(&gpu, opts, stream.is_some(), &layouts, &chunks, &encodings)?;
        owned_bytes += staged.pinned_bytes;
        Ok(Self {
            gpu,
            query: query.clone(),
            layout,
            key_words: keys.words,
            key_out: keys.out,
            template,
            prep: kernel.prep,
            chunks,
            encodings,
            layouts,
            pieces,
            images: staged.images,
            resident: staged.resident,
            estimate,
            rows,
            batch_rows,
            raw_bytes_per_row: raw_bits as f64 / 8.0,
            sent_bytes_per_row: sent_bits as f64 / 8.0,
            prepare_ms: start.elapsed().as_secs_f64() * 1e3 - staged.upload_ms,
            upload_ms: staged.upload_ms,
            owned_bytes,
        })
    }

    /// Bytes the cache counts for this input: what it owns on the host and, resident, its
    /// device copy.
    pub(crate) fn cached_bytes(&self) -> u64 {
        let device = self.resident.iter().flatten().map(|r| r.len() as u64);
        self.owned_bytes + device.sum::<u64>()
    }

    /// The largest image a chunk may have: the collected input's largest, or a full chunk
    /// of a stream.
    pub(crate) fn max_image_bytes(&self) -> usize {
        match self.layouts.iter().map(|l| l.bytes).max() {
            Some(b) => b,
            None => {
                ImageLayout::new(self.batch_rows, &self.encodings, &self.template.nullable).bytes
            }
        }
    }

    /// Fills the raw image of chunk `i` (raw streaming's producer).
    pub(crate) fn fill(&self, i: usize, out: &mut [u8]) -> Result<()> {
        match (self.layouts.get(i), self.chunks.get(i)) {
            (Some(l), Some(ch)) => l.fill(ch, &self.encodings, out),
            _ => Err(GrouperError::Gpu(format!("no chunk {i}"))),
        }
    }

    /// The expected table's size against the device's memory tiers, read now (free memory changes
    /// between queries): shared memory per block, L2, free device memory.
    pub(crate) fn table_fit(&self, opts: &GpuOptions, direct: bool) -> String {
        let base = self;
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
}

/// Step 1: the key words. Collected input: each key's exact range, wide keys split into
/// parts appended to `columns` (and to every batch in `inputs`). A stream: one word planned
/// from the source's statistics (`bounds`), string keys from the first batches' dictionary.
fn plan_key_words(
    query: &GpuQuery,
    bounds: Option<&[ColumnBounds]>,
    inputs: &mut [Vec<ArrayRef>],
    columns: &mut Vec<DataType>,
) -> Result<PlannedKeys> {
    let (ext_keys, out, joint) = match bounds {
        None => split_wide_keys(query, inputs, columns)?,
        Some(bounds) if !query.keys.is_empty() => {
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
    let words = match joint {
        Some(codec) => vec![KeyWord {
            positions: (0..ext_keys.len()).collect(),
            codec,
        }],
        None => {
            let types: Vec<DataType> = ext_keys.iter().map(|&k| columns[k].clone()).collect();
            let key_inputs: Vec<Vec<ArrayRef>> = inputs
                .iter()
                .map(|c| ext_keys.iter().map(|&k| Arc::clone(&c[k])).collect())
                .collect();
            plan_keys(&types, &key_inputs)?
        }
    };
    Ok(PlannedKeys {
        columns: ext_keys,
        out,
        words,
    })
}

impl KernelColumns {
    /// Step 2: the columns the kernel reads. With filter precomputation the filter becomes a
    /// selection column appended to `columns`; string keys read dictionary codes. A column
    /// may hold NULLs when any input batch has one, or (a stream) when its statistics allow
    /// them; the selection never does.
    fn plan(
        query: &GpuQuery,
        opts: &GpuOptions,
        keys: &PlannedKeys,
        mut columns: Vec<DataType>,
        bounds: Option<&[ColumnBounds]>,
        inputs: &[Vec<ArrayRef>],
    ) -> Self {
        let selection = match (&query.filter, opts.cpu_filter) {
            (Some(f), true) => {
                columns.push(DataType::Boolean);
                Some((f.clone(), columns.len() - 1))
            }
            _ => None,
        };
        let filter = match &selection {
            Some((_, at)) => Some(Expr::column(*at, DataType::Boolean)),
            None => query.filter.clone(),
        };
        let mut used = vec![false; columns.len()];
        let mut reads = Vec::new();
        for e in filter
            .iter()
            .chain(query.aggregates.iter().filter_map(|(_, a)| a.as_ref()))
        {
            e.columns(&mut reads);
        }
        reads.iter().for_each(|&c| used[c] = true);
        keys.columns.iter().for_each(|&c| used[c] = true);
        let mut dictionary_of = vec![None; columns.len()];
        let mut terms = Vec::with_capacity(keys.words.len());
        for (wi, kw) in keys.words.iter().enumerate() {
            let packed = kw.codec.packed_columns().unwrap_or_default();
            let mut word = Vec::new();
            for (i, (&pos, col)) in kw.positions.iter().zip(packed).enumerate() {
                let c = keys.columns[pos];
                if col.kind == PackedKind::Dictionary {
                    dictionary_of[c] = Some((wi, i));
                }
                word.push((c, col));
            }
            terms.push(word);
        }
        let types: Vec<Option<DataType>> = (0..columns.len())
            .map(|c| {
                used[c].then(|| match dictionary_of[c] {
                    Some(_) => DataType::UInt32,
                    None => columns[c].clone(),
                })
            })
            .collect();
        let selection_at = selection.as_ref().map(|s| s.1);
        let nullable: Vec<bool> = (0..columns.len())
            .map(|c| {
                used[c]
                    && Some(c) != selection_at
                    && match bounds {
                        Some(bounds) => bounds.get(c).is_none_or(|b| b.may_null),
                        None => inputs.iter().any(|b| b[c].logical_null_count() > 0),
                    }
            })
            .collect();
        let prep = ColumnPrep {
            selection,
            dictionary_of,
            key_columns: keys
                .words
                .iter()
                .map(|kw| kw.positions.iter().map(|&p| keys.columns[p]).collect())
                .collect(),
        };
        Self {
            types,
            nullable,
            filter,
            terms,
            prep,
        }
    }
}

/// Step 3: each read column's transfer encoding: as it is (`compress` off); from the whole
/// collected input's statistics; or, for a stream, from the source's bounds (a dictionary
/// key's codes from its dictionary's capacity).
fn choose_encodings(
    kernel: &KernelColumns,
    words: &[KeyWord],
    inputs: &[Vec<ArrayRef>],
    compress: bool,
    bounds: Option<&[ColumnBounds]>,
) -> Result<Vec<Option<Encoding>>> {
    let column_of =
        |c: usize| -> Vec<ArrayRef> { inputs.iter().map(|b| Arc::clone(&b[c])).collect() };
    kernel
        .types
        .iter()
        .enumerate()
        .map(|(c, t)| {
            t.as_ref()
                .map(|t| match (compress, bounds) {
                    (false, _) => Ok(Encoding::plain(t)),
                    (true, None) => Encoding::choose(t, &column_of(c)),
                    (true, Some(bounds)) => Ok(Encoding::for_range(
                        t,
                        match kernel.prep.dictionary_of[c] {
                            Some((wi, i)) => words[wi]
                                .codec
                                .dictionary_capacity(i)
                                .map(|cap| (0, cap as i128)),
                            None => bounds.get(c).and_then(|b| b.range),
                        },
                    )),
                })
                .transpose()
        })
        .collect()
}

/// Step 4: per chunk, per read column, the chunk's slices of the prepared input.
fn slice_chunks(
    pieces: &[Vec<Piece>],
    inputs: &[Vec<ArrayRef>],
    types: &[Option<DataType>],
) -> Vec<Vec<Option<Vec<ArrayRef>>>> {
    pieces
        .iter()
        .map(|chunk| {
            types
                .iter()
                .enumerate()
                .map(|(c, t)| {
                    t.as_ref().map(|_| {
                        chunk
                            .iter()
                            .map(|p| inputs[p.batch][c].slice(p.offset, p.rows))
                            .collect()
                    })
                })
                .collect()
        })
        .collect()
}

/// The chunk images made ahead of any run.
struct Staged {
    images: Option<Vec<PinnedHostSlice<u8>>>,
    resident: Option<Vec<CudaSlice<u8>>>,
    pinned_bytes: u64,
    upload_ms: f64,
}

/// Step 6: resident inputs uploaded to the device; compressed streaming's images encoded once,
/// chunks in parallel, straight into pinned memory. Raw streaming and streams fill their
/// images as they run.
fn stage(
    gpu: &Arc<Gpu>,
    opts: &GpuOptions,
    streamed: bool,
    layouts: &[ImageLayout],
    chunks: &[Vec<Option<Vec<ArrayRef>>>],
    encodings: &[Option<Encoding>],
) -> Result<Staged> {
    let mut staged = Staged {
        images: None,
        resident: None,
        pinned_bytes: 0,
        upload_ms: 0.0,
    };
    if opts.resident {
        let total: u64 = layouts.iter().map(|l| l.bytes as u64).sum();
        Budget::new(opts.memory_limit).take(total, "the resident input")?;
        let t = Instant::now();
        let stream = Arc::clone(&gpu.stream);
        let mut all = Vec::with_capacity(layouts.len());
        for (l, ch) in layouts.iter().zip(chunks) {
            let mut host = vec![0u8; l.bytes];
            l.fill(ch, encodings, &mut host)?;
            all.push(
                stream
                    .clone_htod(&host)
                    .map_err(gpu_err("uploading columns"))?,
            );
        }
        stream.synchronize().map_err(gpu_err("uploading columns"))?;
        staged.upload_ms = t.elapsed().as_secs_f64() * 1e3;
        staged.resident = Some(all);
    } else if opts.compress && !streamed {
        let pinned = layouts
            .par_iter()
            .zip(chunks)
            .map(|(l, ch)| {
                let mut img = alloc_pinned(gpu, l.bytes)?;
                let buf = img
                    .as_mut_slice()
                    .map_err(gpu_err("writing pinned memory"))?;
                l.fill(ch, encodings, buf)?;
                Ok(img)
            })
            .collect::<Result<Vec<_>>>()?;
        staged.pinned_bytes = layouts.iter().map(|l| l.bytes as u64).sum::<u64>();
        staged.images = Some(pinned);
    }
    Ok(staged)
}

/// Rows a resident input launches at least, unless the runtime tuner times its chunks.
const RESIDENT_LAUNCH_ROWS: usize = 1 << 26;

/// Rows per chunk of `opts`' input. A resident input is on the device already, so its chunks
/// exist only for the launches: each costs the host ~50 µs (a launch, its arguments' stream
/// events, the per-chunk bookkeeping), more than a 2^22-row chunk's kernel at the roofline
/// (12 µs at 345 Grows/s). In such chunks (519cc6c) the GPU waited on the host three quarters
/// of the time: 88 Grows/s at one group on the H200 whatever the strategy (issue 25's
/// regression). The tuner keeps `batch_rows`: its chunks are what it measures.
pub(crate) fn launch_rows(opts: &GpuOptions) -> usize {
    match (opts.resident, &opts.tune) {
        (true, None) => opts.batch_rows.max(RESIDENT_LAUNCH_ROWS),
        _ => opts.batch_rows,
    }
}

/// Groups batches of the given row counts into chunks of at most `limit` rows: each chunk is a
/// list of slices of the batches.
fn chunk_pieces(batch_rows: impl Iterator<Item = usize>, limit: usize) -> Vec<Vec<Piece>> {
    let mut out: Vec<Vec<Piece>> = Vec::new();
    let mut current = Vec::new();
    let mut filled = 0;
    for (b, n) in batch_rows.enumerate() {
        let mut off = 0;
        while off < n {
            let take = (limit - filled).min(n - off);
            current.push(Piece {
                batch: b,
                offset: off,
                rows: take,
            });
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

#[cfg(test)]
mod tests {
    use super::*;
    use grouper_core::tune::Hyper;

    /// A resident input launches in chunks of at least 2^26 rows (2^22-row chunks left the GPU
    /// waiting on the host); the tuner's chunks and a copied input's stay `batch_rows`.
    #[test]
    fn resident_inputs_launch_in_large_chunks_unless_tuned() {
        let resident = GpuOptions {
            resident: true,
            ..Default::default()
        };
        assert_eq!(launch_rows(&resident), 1 << 26);
        let larger = GpuOptions {
            batch_rows: 1 << 28,
            ..resident.clone()
        };
        assert_eq!(launch_rows(&larger), 1 << 28);
        let tuned = GpuOptions {
            tune: Some(Hyper::default()),
            ..resident
        };
        assert_eq!(launch_rows(&tuned), 1 << 22);
        assert_eq!(launch_rows(&GpuOptions::default()), 1 << 22);
    }
}
