//! Streaming Parquet files into the GPU as pages ([`crate::parquet`]): a query prepared for a
//! scan ([`Prepared::streaming`], raw transfer) runs over the files' row groups, each a chunk.
//!
//! ```text
//!  page readers (rayon), a column chunk each: read, decompress, payload ─┐ into its place
//!  pipeline (pipeline.rs): pinned staging slot (program after payloads) ◀┘ ─▶ copy stream
//!                          ─▶ device slot
//!  compute stream: decode kernel ─▶ chunk image (one device buffer) ─▶ aggregation kernel
//! ```
//!
//! The plan is the stream's (key codec and encodings from the files' statistics): every key
//! value the CPU sees (dictionaries, PLAIN pages, chunks it decodes) is checked against it, and
//! a value outside it, or NULLs where the statistics counted none, stop the run with
//! [`GrouperError::OutsidePlan`] — the caller then reads the files another way.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::make_array;
use arrow::buffer::Buffer;
use arrow::datatypes::DataType;
use cudarc::driver::{CudaSlice, DevicePtr};
use rayon::prelude::*;

use crate::encode::Scheme;
use crate::image::{ColumnRegion, ImageLayout};
use crate::parquet::segments::{Segment, SEGMENT_BYTES};
use crate::parquet::{Check, Coder, Column, Decoder, PageImage, ParquetFile, Target};
use crate::prepare::PreparedInput;
use crate::report::GpuOutput;
use crate::run::Prepared;
use crate::table::ColPtrs;
use grouper_core::error::{GrouperError, Result};

/// Rows of row groups that share a chunk at most: enough that a launch's fixed cost is small
/// against its work and that the page readers have many column chunks to share (a chunk is
/// read in parallel straight into its staging slot), few enough that the pinned staging
/// buffers (six chunks' page images, page-locked in each process: hundreds of milliseconds
/// per gigabyte) stay small.
const CHUNK_ROWS: usize = 1 << 20;

/// Chunks read at once, each into a staging slot of its own by the page readers together: while
/// one chunk's last column chunks finish (and it is handed over), the readers start on the
/// others' (with one, they idled half the time).
const PRODUCERS: usize = 3;

/// A column chunk's place in its chunk's page image: which file, row group and read column,
/// the row group's first row in the chunk, and where its payload goes.
struct Unit {
    file: usize,
    rg: usize,
    column: usize,
    row: usize,
    at: usize,
    room: usize,
}

/// A chunk's page image as laid out before it is read: the payloads of its column chunks at
/// fixed offsets (each within its bound, so the readers write them in parallel), the program
/// after them.
struct Placement {
    rows: usize,
    units: Vec<Unit>,
    program_at: usize,
    bytes: usize,
}

/// The files of a scan and which Parquet column each of the query's input columns is.
#[derive(Clone)]
pub struct PageSource {
    /// The files.
    pub files: Vec<PathBuf>,
    /// Per input column of the query, its name in the files (flat schemas).
    pub columns: Vec<String>,
    /// Per file, the row groups to read in increasing order, where the scan's predicate pruned
    /// some by their statistics; `None` reads every row group.
    pub row_groups: Option<Vec<Vec<usize>>>,
    /// The rows of those row groups, where pruned.
    pub kept_rows: Option<u64>,
}

/// A [`PageSource`]'s files, opened (footers read): opened while the GPU starts, which takes
/// longer ([`PageSource::open`]).
pub struct OpenedFiles(Vec<ParquetFile>);

impl PageSource {
    /// Opens the files and reads their footers (no GPU needed).
    pub fn open(&self) -> Result<OpenedFiles> {
        self.files
            .par_iter()
            .map(|p| ParquetFile::open(p))
            .collect::<Result<Vec<_>>>()
            .map(OpenedFiles)
    }
}

fn unsupported(why: impl Into<String>) -> GrouperError {
    GrouperError::Unsupported(why.into())
}

/// What each of the query's columns becomes in the decoded image; `None` where unread.
fn targets(input: &Arc<PreparedInput>) -> Result<Vec<Option<Target>>> {
    if input.prep.selection.is_some() {
        return Err(unsupported("filter precomputation reads decoded rows"));
    }
    let mut out = Vec::with_capacity(input.template.columns.len());
    for (c, t) in input.template.columns.iter().enumerate() {
        let Some(t) = t else {
            out.push(None);
            continue;
        };
        if input
            .encodings
            .get(c)
            .and_then(Option::as_ref)
            .map(|e| e.scheme)
            != Some(Scheme::Plain)
        {
            return Err(unsupported("pages decode into plain columns only"));
        }
        let width = t
            .primitive_width()
            .filter(|w| [1, 2, 4, 8, 16].contains(w) && *t != DataType::Boolean)
            .ok_or_else(|| unsupported(format!("{t} columns")))? as u8;
        let dictionary = input.prep.dictionary_of.get(c).copied().flatten();
        let coder = dictionary.map(|(wi, i)| -> Coder {
            let input = Arc::clone(input);
            Arc::new(move |values: &[&[u8]]| {
                let strings: Vec<&str> = values
                    .iter()
                    .map(|v| std::str::from_utf8(v))
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| GrouperError::InvalidInput("a string key is not UTF-8".into()))?;
                let array: arrow::array::ArrayRef =
                    Arc::new(arrow::array::StringArray::from(strings));
                let codec = &input
                    .key_words
                    .get(wi)
                    .ok_or_else(|| GrouperError::Gpu("no key word".into()))?
                    .codec;
                codec.dictionary_codes(i, &array)?.ok_or_else(|| {
                    GrouperError::OutsidePlan(format!(
                        "string key column {c} has more distinct values than its dictionary holds"
                    ))
                })
            })
        });
        let check = key_check(input, c, t)?;
        out.push(Some(Target {
            width,
            signed: !t.is_unsigned_integer(),
            coder,
            check,
        }));
    }
    Ok(out)
}

/// For an ordinal group key column `c` (of kernel type `t`), the check of its values against
/// the codec planned from statistics.
fn key_check(input: &Arc<PreparedInput>, c: usize, t: &DataType) -> Result<Option<Check>> {
    let Some((wi, i)) = input.prep.key_position(c) else {
        return Ok(None);
    };
    if input.prep.dictionary_of.get(c).copied().flatten().is_some() {
        return Ok(None);
    }
    let (input, t) = (Arc::clone(input), t.clone());
    Ok(Some(Arc::new(move |native: &[u8], count: usize| {
        let data = arrow::array::ArrayData::try_new(
            t.clone(),
            count,
            None,
            0,
            vec![Buffer::from(native.to_vec())],
            vec![],
        )
        .map_err(|e| GrouperError::Gpu(format!("a decoded key column: {e}")))?;
        let covered = input
            .key_words
            .get(wi)
            .is_some_and(|kw| kw.codec.covers(i, &make_array(data)));
        match covered {
            true => Ok(()),
            false => Err(GrouperError::OutsidePlan(format!(
                "a group key of column {c} lies outside the files' statistics"
            ))),
        }
    })))
}

impl Prepared {
    /// Runs a [`Prepared::streaming`] query (raw transfer) over `source`'s files (`opened`)
    /// as Parquet pages decoded on the GPU.
    pub fn run_pages(&mut self, source: &PageSource, opened: OpenedFiles) -> Result<GpuOutput> {
        let input = Arc::clone(&self.input);
        if !self.report.from_scan {
            return Err(GrouperError::InvalidOption(
                "run_pages needs a query prepared with Prepared::streaming".into(),
            ));
        }
        let targets = targets(&input)?;
        if targets.len() != source.columns.len() {
            return Err(unsupported("split wide keys"));
        }
        let files = opened.0;
        if files.len() != source.files.len() {
            return Err(GrouperError::Gpu(
                "the opened files are not the page source's".into(),
            ));
        }
        // Per file, the leaf of each read column.
        let mut columns: Vec<Vec<Column>> = Vec::with_capacity(files.len());
        let string =
            |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        for f in &files {
            let schema = f.arrow_schema();
            let mut cols = Vec::new();
            for (c, (name, target)) in source.columns.iter().zip(&targets).enumerate() {
                let Some(target) = target else {
                    cols.push(None);
                    continue;
                };
                // The file's values must be the scan's type (a file of another type would be
                // cast by the scan: those go through it).
                let want = input.query.columns.get(c);
                let have = schema.field_with_name(name).ok().map(|f| f.data_type());
                let same = match (want, have) {
                    (Some(w), Some(h)) => w == h || (string(w) && string(h)),
                    _ => false,
                };
                if !same {
                    return Err(unsupported(format!(
                        "column {name} is stored as another type than the scan reads"
                    )));
                }
                let leaf = f
                    .leaf(name)
                    .ok_or_else(|| unsupported(format!("column {name} is not a flat leaf")))?;
                cols.push(Some(Column {
                    leaf,
                    target: target.clone(),
                }));
            }
            columns.push(cols.into_iter().flatten().collect());
        }
        let read: Vec<usize> = (0..targets.len())
            .filter(|&c| targets[c].is_some())
            .collect();
        // The decoded layout of `rows` rows: the read columns only, in order.
        let encodings: Vec<_> = read.iter().map(|&c| input.encodings[c].clone()).collect();
        let nullable: Vec<bool> = read.iter().map(|&c| input.template.nullable[c]).collect();
        let layout_of = |rows: usize| ImageLayout::new(rows, &encodings, &nullable);
        let kept = |f: usize, rg: usize| {
            source
                .row_groups
                .as_ref()
                .is_none_or(|k| k.get(f).is_some_and(|k| k.binary_search(&rg).is_ok()))
        };
        let groups: Vec<(usize, usize)> = files
            .iter()
            .enumerate()
            .flat_map(|(f, file)| (0..file.row_groups()).map(move |rg| (f, rg)))
            .collect();
        let work: Vec<(usize, usize)> = groups
            .iter()
            .copied()
            .filter(|&(f, rg)| kept(f, rg) && files[f].rows(rg) > 0)
            .collect();
        let pruned = groups.iter().filter(|&&(f, rg)| !kept(f, rg)).count();
        // Chunks of whole row groups, up to CHUNK_ROWS: a launch per row group costs more than
        // it decodes (tpchgen-cli's are 114k rows). Row groups share a chunk
        // only where no column has validity bits (those start at byte boundaries).
        let widths: Vec<usize> = encodings
            .iter()
            .map(|e| e.as_ref().map_or(0, |e| e.bits as usize / 8))
            .collect();
        let share = !nullable.iter().any(|&n| n);
        let mut chunks: Vec<Vec<(usize, usize)>> = Vec::new();
        let mut rows_in = 0usize;
        for &(f, rg) in &work {
            let rows = files[f].rows(rg);
            match chunks.last_mut() {
                Some(last) if share && rows_in + rows <= CHUNK_ROWS.min(input.batch_rows) => {
                    last.push((f, rg));
                    rows_in += rows;
                }
                _ => {
                    chunks.push(vec![(f, rg)]);
                    rows_in = rows;
                }
            }
        }
        let placements: Vec<Placement> = chunks
            .iter()
            .map(|chunk| {
                let (mut units, mut row, mut at, mut program) = (Vec::new(), 0, 0, 0);
                for &(f, rg) in chunk {
                    for (column, c) in columns[f].iter().enumerate() {
                        let (room, code) = files[f].column_bound(rg, c);
                        let room = room.div_ceil(256) * 256;
                        units.push(Unit {
                            file: f,
                            rg,
                            column,
                            row,
                            at,
                            room,
                        });
                        at += room;
                        program += code;
                    }
                    row += files[f].rows(rg);
                }
                Placement {
                    rows: row,
                    units,
                    program_at: at,
                    bytes: at + program + 256,
                }
            })
            .collect();
        let max_decoded = placements
            .iter()
            .map(|p| layout_of(p.rows).bytes)
            .max()
            .unwrap_or(0);
        let max_image = placements.iter().map(|p| p.bytes).max().unwrap_or(0);
        let on_cpu: Mutex<Vec<String>> = Mutex::default();
        // Each chunk's program length, set by its producer before the chunk is sent.
        let programs: Vec<AtomicUsize> = placements.iter().map(|_| AtomicUsize::new(0)).collect();
        let gpu = Arc::clone(&input.gpu);
        grouper_core::trace::event(|| {
            format!(
                "pages: {} row groups in {} chunks, waiting for the decoder",
                work.len(),
                chunks.len()
            )
        });
        let decoder = Decoder::new(&gpu)?;
        grouper_core::trace::event(|| "pages: decoder ready".into());
        self.report.compile_ms += decoder.compile_ms;
        let stream = Arc::clone(&gpu.stream);
        // SAFETY: the decode kernel writes the image of each chunk before the aggregation
        // kernel that reads it (both on the compute stream).
        let decoded: CudaSlice<u8> = unsafe { stream.alloc(max_decoded.max(1)) }
            .map_err(crate::device::gpu_err("allocating the decoded chunk"))?;
        let mut flags: CudaSlice<u64> = stream
            .alloc_zeros(1)
            .map_err(crate::device::gpu_err("allocating the decode flags"))?;
        let (decoded_at, _guard) = decoded.device_ptr(&stream);
        // Chunk by chunk, the page readers read its column chunks in parallel, each straight
        // into its place in the pinned staging slot the pipeline hands over (no copy of the
        // whole image after it is made); the program goes after the payloads.
        let next = AtomicUsize::new(0);
        let sent_bytes = AtomicU64::new(0);
        let clock = StreamClock::default();
        let readers = rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|i| format!("grouper-pages-{i}"))
            .build()
            .map_err(|e| GrouperError::Gpu(format!("starting page readers: {e}")))?;
        let table = {
            let (files, columns) = (&files, &columns);
            let on_cpu = &on_cpu;
            let produce = |out: &mut [u8]| -> Result<Option<(ImageLayout, u64)>> {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(placed) = placements.get(i) else {
                    return Ok(None);
                };
                let layout = layout_of(placed.rows);
                let over = || unsupported("a chunk's page image over its bound");
                let (mut payload, program) = out
                    .get_mut(..placed.bytes)
                    .ok_or_else(over)?
                    .split_at_mut(placed.program_at);
                let mut regions = Vec::with_capacity(placed.units.len());
                for u in &placed.units {
                    let (region, rest) = std::mem::take(&mut payload).split_at_mut(u.room);
                    regions.push(region);
                    payload = rest;
                }
                let read = |(u, region): (&Unit, &mut [u8])| {
                    let file = &files[u.file];
                    let col = &columns[u.file][u.column];
                    let part = layout.rows_at(u.row, file.rows(u.rg), &widths);
                    let Some(Some(place)) = part.columns.get(u.column).copied() else {
                        return Ok((Vec::new(), None));
                    };
                    let (image, why) = clock.time(&clock.reading, || {
                        file.column_image(u.rg, col, place, layout.bytes as u64)
                    })?;
                    if image.payload_len() > region.len() {
                        return Err(over());
                    }
                    let program = image.place(region, u.at as u64)?;
                    Ok((program, why.map(|why| format!("leaf {}: {why}", col.leaf))))
                };
                let made = clock.time(&clock.waiting, || {
                    readers.install(|| {
                        placed
                            .units
                            .par_iter()
                            .zip(regions.into_par_iter())
                            .map(read)
                            .collect::<Result<Vec<_>>>()
                    })
                })?;
                let segments: Vec<Segment> =
                    made.iter().flat_map(|(p, _)| p.iter().copied()).collect();
                if segments.len() * SEGMENT_BYTES > program.len() {
                    return Err(over());
                }
                PageImage::write_program(&segments, program)?;
                let used = placed.program_at + segments.len() * SEGMENT_BYTES;
                sent_bytes.fetch_add(used as u64, Ordering::Relaxed);
                on_cpu
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(made.into_iter().filter_map(|(_, why)| why));
                if let Some(n) = programs.get(i) {
                    n.store(segments.len(), Ordering::Release);
                }
                // The copy's "layout": the page image as one region at its start; the tag,
                // which chunk it is (producers finish out of order).
                Ok(Some((
                    ImageLayout {
                        rows: layout.rows,
                        columns: vec![Some(ColumnRegion {
                            values: 0,
                            validity: None,
                        })],
                        bytes: used,
                    },
                    i as u64,
                )))
            };
            let mut decode = |copied: &ColPtrs, tag: u64| -> Result<(usize, ColPtrs)> {
                let i = tag as usize;
                let (Some(placed), Some(segments)) = (placements.get(i), programs.get(i)) else {
                    return Err(GrouperError::Gpu(format!(
                        "no chunk {i} of the page stream"
                    )));
                };
                let layout = layout_of(placed.rows);
                // SAFETY: the slot at `copied.0[0]` holds the whole page image (payload at its
                // start, program at `program_at`), whose segments were checked against its
                // payload and `layout`, which `decoded` (the largest layout) holds; both
                // outlive the run (the stream is synchronized before they are dropped).
                unsafe {
                    decoder.launch(
                        &stream,
                        copied.0[0] + placed.program_at as u64,
                        segments.load(Ordering::Acquire),
                        copied.0[0],
                        decoded_at,
                        &mut flags,
                    )?;
                }
                // The read columns' pointers, at the query's column positions.
                let mut ptrs = ColPtrs([0; 64]);
                let dense = layout.pointers(decoded_at);
                for (k, &c) in read.iter().enumerate() {
                    if let (Some(dst), Some(src)) = (
                        ptrs.0.get_mut(2 * c..2 * c + 2),
                        dense.0.get(2 * k..2 * k + 2),
                    ) {
                        dst.copy_from_slice(src);
                    }
                }
                Ok((layout.rows, ptrs))
            };
            self.report.chunks = chunks.len();
            let shape = max_image.max(64);
            let table = self.run_with_decode(shape, PRODUCERS, &produce, &mut decode);
            clock.report(
                chunks.len(),
                sent_bytes.load(Ordering::Relaxed),
                readers.current_num_threads(),
            );
            table
        }?;
        let raised = stream
            .clone_dtoh(&flags)
            .map_err(crate::device::gpu_err("reading the decode flags"))?;
        match raised.first().copied().unwrap_or(0) {
            0 => {}
            f if f & 2 != 0 => {
                return Err(GrouperError::InvalidInput(
                    "corrupt Parquet page: a run of dictionary indices past the page's end".into(),
                ))
            }
            _ => {
                return Err(GrouperError::InvalidInput(
                    "corrupt Parquet page: a dictionary index past its dictionary".into(),
                ))
            }
        }
        let on_cpu = on_cpu.into_inner().unwrap_or_else(PoisonError::into_inner);
        self.report.reason += &format!(
            "; Parquet pages decoded on the GPU ({} row groups in {} chunks{}{})",
            work.len(),
            chunks.len(),
            match pruned {
                0 => String::new(),
                n => format!(
                    "; {n} of {} pruned by the filter's statistics",
                    groups.len()
                ),
            },
            match on_cpu.len() {
                0 => String::new(),
                n => format!(
                    "; {n} column chunks decoded on the CPU: {}",
                    on_cpu
                        .iter()
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        );
        self.report.rows = self.report.rows_run;
        self.report.transfer = "parquet pages";
        self.report.sent_bytes_per_row =
            sent_bytes.load(Ordering::Relaxed) as f64 / self.report.rows.max(1) as f64;
        self.finish(&table)
    }
}

/// Where a page stream's time went, for the timeline (`GROUPER_TRACE=1`): the readers' busy
/// time over all of them, and the producers' (the threads handing chunks to the pipeline)
/// waits for their chunks' parallel reads. Readers busy far less than their threads' share of
/// the wall time are starved by the producers' turns; producers that wait little are held by
/// the GPU side.
#[derive(Default)]
struct StreamClock {
    start: std::sync::OnceLock<std::time::Instant>,
    reading: AtomicU64,
    waiting: AtomicU64,
}

impl StreamClock {
    /// Runs `f`, adding its time to `into` (nanoseconds).
    fn time<T>(&self, into: &AtomicU64, f: impl FnOnce() -> T) -> T {
        self.start.get_or_init(std::time::Instant::now);
        let t = std::time::Instant::now();
        let out = f();
        into.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    fn report(&self, chunks: usize, bytes: u64, threads: usize) {
        let ms = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e6;
        let wall = self.start.get().map_or(0.0, |t| t.elapsed().as_secs_f64());
        grouper_core::trace::event(|| {
            format!(
                "pages: {chunks} chunks, {:.1} MB of page images in {:.1} ms ({:.2} GB/s); readers busy {:.1} ms over {threads} threads; {PRODUCERS} producers waited {:.1} ms in all for their chunks' reads",
                bytes as f64 / 1e6,
                wall * 1e3,
                bytes as f64 / wall.max(1e-9) / 1e9,
                ms(&self.reading),
                ms(&self.waiting),
            )
        });
    }
}
