//! The overlapped streaming pipeline (Tomé §4.2, Karnagel §2): chunk images go from host memory
//! to the kernel while the previous chunk's kernel runs, and the aggregation table stays on the
//! GPU across chunks.
//!
//! ```text
//!  raw:        producer thread(s) ─ gather (CPU threads) ─▶ pinned staging slot ─┐
//!              (Parquet pages: several, each a chunk read into its own slot)    │
//!  compressed: encoded images, pinned once per table (the cache) ─────────────┤
//!                                                                              ▼
//!        copy stream: DMA into device slot i % SLOTS   (waits: kernel i - SLOTS done)
//!        compute stream: kernel on chunk i             (waits: copy i done)
//!  zero-copy:  no DMA; the kernel reads the pinned image over PCIe (mapped host memory)
//!  resident:   images uploaded once; only kernels run
//! ```
//!
//! Copies of up to `SLOTS - 1` chunks are in flight ahead of the kernel; no pageable copy is
//! on this path. Device memory taken here is counted against the caller's [`Budget`].

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::{
    CudaEvent, CudaSlice, CudaStream, DevicePtr, HostSlice, PinnedHostSlice, SyncOnDrop,
};

use crate::budget::Budget;
use crate::device::{alloc_pinned, gpu_err, Gpu};
use crate::image::ImageLayout;
use crate::table::ColPtrs;
use grouper_core::error::{GrouperError, Result};

/// Device buffers (and pinned staging buffers) the pipeline cycles through.
pub const SLOTS: usize = 3;

/// The device address of mapped pinned memory (for zero-copy kernels).
pub fn mapped_address(p: &PinnedHostSlice<u8>) -> Result<u64> {
    let host = p.as_ptr().map_err(gpu_err("reading pinned memory"))?;
    let mut dev = 0u64;
    // SAFETY: `host` is the start of a live allocation made with CU_MEMHOSTALLOC_DEVICEMAP in
    // this context; the driver writes the device address into `dev`.
    let r =
        unsafe { cudarc::driver::sys::cuMemHostGetDevicePointer_v2(&mut dev, host as *mut _, 0) };
    r.result().map_err(gpu_err("mapping pinned memory"))?;
    Ok(dev)
}

/// Staging buffers kept between queries: page-locking is slow (hundreds of ms per GiB), so a
/// process pins its staging memory once.
static STAGING: Mutex<Vec<PinnedHostSlice<u8>>> = Mutex::new(Vec::new());

/// A staging buffer of exactly `bytes` (a chunk's DMA copies the whole buffer, and the device
/// slots are sized to the largest chunk).
fn take_staging(gpu: &Gpu, bytes: usize) -> Result<PinnedHostSlice<u8>> {
    let bytes = bytes.max(8);
    let reused = STAGING.lock().ok().and_then(|mut pool| {
        let i = pool.iter().position(|p| p.len() == bytes)?;
        Some(pool.swap_remove(i))
    });
    match reused {
        Some(p) => Ok(p),
        None => alloc_pinned(gpu, bytes),
    }
}

fn return_staging(p: PinnedHostSlice<u8>) {
    if let Ok(mut pool) = STAGING.lock() {
        pool.push(p);
        // Keep the largest few.
        pool.sort_by_key(|p| std::cmp::Reverse(p.len()));
        pool.truncate(2 * SLOTS);
    }
}

/// Where the chunks' images come from.
pub enum Feed<'a> {
    /// Uploaded once, on the device.
    Resident(&'a [CudaSlice<u8>]),
    /// Already in pinned host memory (the encoded cache).
    Pinned(&'a [PinnedHostSlice<u8>]),
    /// Gathered per run into pinned staging by `fill(chunk, buffer)`.
    Gather(&'a (dyn Fn(usize, &mut [u8]) -> Result<()> + Sync)),
    /// Made as the input arrives (a scan streaming into the GPU): `produce` fills the next
    /// chunk's image (at most `max_bytes`) into a pinned staging buffer and gives its layout,
    /// or says that the input is done; `producers` threads call it at once (each with a
    /// staging buffer of its own).
    Stream {
        /// The largest image a chunk may have.
        max_bytes: usize,
        /// The chunk source.
        produce: Produce<'a>,
        /// Threads filling staging buffers at once.
        producers: usize,
    },
}

/// Fills the next chunk's image into the buffer: its layout and a tag that the chunk's
/// `on_chunk` receives (which chunk it is, where chunks finish out of order), or `None` at the
/// end. Several producer threads may call it at once.
pub type Produce<'a> = &'a (dyn Fn(&mut [u8]) -> Result<Option<(ImageLayout, u64)>> + Sync);

/// Runs a chunk that reached the device: its rows, its image's pointers and its tag.
pub type OnChunk<'a> = dyn FnMut(usize, &ColPtrs, u64) -> Result<()> + 'a;

/// A filled staging slot on its way to the kernel: the chunk's layout and tag, and the slot.
type Ready = (ImageLayout, u64, PinnedHostSlice<u8>);

/// The chunks this GPU takes, in order: all of them, or (co-processing) those it claims from
/// a queue shared with CPU workers, as it gets to them.
pub type Claim<'a> = &'a (dyn Fn() -> Option<usize> + Sync);

/// Runs `on_chunk(rows, pointers, tag)` for every chunk `claim` hands out, in order, on the compute
/// `stream`, with each chunk's image where the kernel can read it. `on_chunk` enqueues the
/// chunk's kernels (and may wait for them, e.g. to handle a full hash table); the pipeline
/// keeps the next chunks' copies in flight meanwhile.
#[allow(clippy::too_many_arguments)]
pub fn drive(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    feed: Feed<'_>,
    layouts: &[ImageLayout],
    zero_copy: bool,
    budget: &Budget,
    claim: Claim<'_>,
    on_chunk: &mut OnChunk<'_>,
) -> Result<()> {
    let err = gpu_err;
    let missing = || GrouperError::Gpu("a chunk image is missing".into());
    let max_bytes = layouts.iter().map(|l| l.bytes).max().unwrap_or(8);
    match feed {
        Feed::Resident(images) => {
            while let Some(i) = claim() {
                let (img, layout) = images.get(i).zip(layouts.get(i)).ok_or_else(missing)?;
                let (base, _g) = img.device_ptr(stream);
                on_chunk(layout.rows, &layout.pointers(base), i as u64)?;
            }
            Ok(())
        }
        Feed::Pinned(images) if zero_copy => {
            while let Some(i) = claim() {
                let (img, layout) = images.get(i).zip(layouts.get(i)).ok_or_else(missing)?;
                on_chunk(
                    layout.rows,
                    &layout.pointers(mapped_address(img)?),
                    i as u64,
                )?;
            }
            stream.synchronize().map_err(err("running the aggregation"))
        }
        Feed::Pinned(images) => {
            let slots = DeviceSlots::new(gpu, stream, max_bytes, layouts.len(), budget)?;
            let result = (|| {
                let mut slots = slots;
                // (position in this run, chunk) of the copies in flight.
                let mut ahead: std::collections::VecDeque<(usize, usize)> = Default::default();
                let mut next = 0usize;
                loop {
                    while ahead.len() < SLOTS {
                        let Some(i) = claim() else { break };
                        let image = images.get(i).ok_or_else(missing)?;
                        slots.copy_in(next, image, image.len())?;
                        ahead.push_back((next, i));
                        next += 1;
                    }
                    let Some((k, i)) = ahead.pop_front() else {
                        break;
                    };
                    let base = slots.ready(k)?;
                    let layout = layouts.get(i).ok_or_else(missing)?;
                    on_chunk(layout.rows, &layout.pointers(base), i as u64)?;
                    slots.consumed(k)?;
                }
                stream
                    .synchronize()
                    .map_err(err("running the aggregation"))?;
                Ok(slots)
            })();
            result.map(|slots| slots.release(budget))
        }
        Feed::Gather(fill) => {
            let produce = |out: &mut [u8]| -> Result<Option<(ImageLayout, u64)>> {
                let Some(i) = claim() else { return Ok(None) };
                let layout = layouts.get(i).ok_or_else(missing)?;
                fill(i, out)?;
                Ok(Some((layout.clone(), i as u64)))
            };
            let shape = (max_bytes, layouts.len());
            gather(gpu, stream, &produce, 1, shape, zero_copy, budget, on_chunk)
        }
        Feed::Stream {
            max_bytes,
            produce,
            producers,
        } => gather(
            gpu,
            stream,
            produce,
            producers.max(1),
            (max_bytes, SLOTS),
            zero_copy,
            budget,
            on_chunk,
        ),
    }
}

/// Device buffers chunks are copied into, with the events that order copies and kernels.
struct DeviceSlots {
    copy: Arc<CudaStream>,
    compute: Arc<CudaStream>,
    buffers: Vec<CudaSlice<u8>>,
    copied: Vec<CudaEvent>,
    consumed: Vec<Option<CudaEvent>>,
    bytes: u64,
}

impl DeviceSlots {
    /// Device slots for images of at most `max` bytes, as many as `chunks` (up to SLOTS) need.
    fn new(
        gpu: &Gpu,
        compute: &Arc<CudaStream>,
        max: usize,
        chunks: usize,
        budget: &Budget,
    ) -> Result<Self> {
        let err = gpu_err;
        let n = SLOTS.min(chunks).max(1);
        let bytes = (n * max) as u64;
        budget.take(bytes, "the streaming buffers")?;
        let made = (|| {
            let copy = gpu
                .ctx
                .new_stream()
                .map_err(err("creating a copy stream"))?;
            let mut buffers = Vec::with_capacity(n);
            let mut copied = Vec::with_capacity(n);
            for _ in 0..n {
                // SAFETY: a slot is written by a copy before the kernel that reads it runs
                // (the kernel's stream waits for the copy's event).
                buffers.push(
                    unsafe { compute.alloc::<u8>(max) }
                        .map_err(err("allocating the streaming buffers"))?,
                );
                copied.push(gpu.ctx.new_event(None).map_err(err("creating events"))?);
            }
            Ok(Self {
                copy,
                compute: Arc::clone(compute),
                buffers,
                copied,
                consumed: (0..n).map(|_| None).collect(),
                bytes,
            })
        })();
        if made.is_err() {
            budget.give(bytes);
        }
        made
    }

    fn slot(&self, position: usize) -> usize {
        position % self.buffers.len()
    }

    /// Enqueues the copy of the image at run position `position`, after the kernel that last
    /// read its slot.
    /// Enqueues the copy of `image`'s first `bytes` (what its chunk filled) into the slot
    /// of `position`.
    fn copy_in(
        &mut self,
        position: usize,
        image: &PinnedHostSlice<u8>,
        bytes: usize,
    ) -> Result<()> {
        let err = gpu_err;
        let s = self.slot(position);
        if let Some(e) = self.consumed.get(s).and_then(Option::as_ref) {
            self.copy
                .wait(e)
                .map_err(err("ordering a copy after a kernel"))?;
        }
        let dst = self
            .buffers
            .get_mut(s)
            .ok_or_else(|| GrouperError::Gpu("no streaming slot".into()))?;
        let bytes = bytes.min(image.len());
        let mut view = dst.slice_mut(0..bytes);
        self.copy
            .memcpy_htod(&Prefix { image, bytes }, &mut view)
            .map_err(err("copying a chunk to the GPU"))?;
        if let Some(e) = self.copied.get(s) {
            e.record(&self.copy).map_err(err("recording an event"))?;
        }
        Ok(())
    }

    /// Makes the compute stream wait for the copy at `position`; its slot's device address.
    fn ready(&self, position: usize) -> Result<u64> {
        let err = gpu_err;
        let s = self.slot(position);
        let (Some(e), Some(b)) = (self.copied.get(s), self.buffers.get(s)) else {
            return Err(GrouperError::Gpu("no streaming slot".into()));
        };
        self.compute.wait(e).map_err(err("waiting for a copy"))?;
        Ok(b.device_ptr(&self.compute).0)
    }

    /// Marks the kernels at `position` enqueued: its slot may be overwritten after them.
    fn consumed(&mut self, position: usize) -> Result<()> {
        let s = self.slot(position);
        let e = self
            .compute
            .record_event(None)
            .map_err(gpu_err("recording an event"))?;
        if let Some(c) = self.consumed.get_mut(s) {
            *c = Some(e);
        }
        Ok(())
    }

    fn release(self, budget: &Budget) {
        budget.give(self.bytes);
    }
}

/// Raw streaming and streaming from a scan: `producers` threads make chunk images in pinned
/// staging slots (each its copies spread over the CPU's threads); the caller's thread sends
/// them on, in the order they are ready. `(max, chunks)`: the largest image, and how many
/// chunks there are (at least; for the device slots).
#[allow(clippy::too_many_arguments)]
fn gather(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    produce: Produce<'_>,
    producers: usize,
    (max, chunks): (usize, usize),
    zero_copy: bool,
    budget: &Budget,
    on_chunk: &mut OnChunk<'_>,
) -> Result<()> {
    let err = gpu_err;
    // A staging slot for each producer beyond the chunks the sender holds (SLOTS copies in
    // flight): the producers fill the next chunks meanwhile, and each always has a slot with
    // which to find that no chunk is left (with fewer, a sender waiting for a fourth chunk of
    // three and a producer waiting for a free slot would wait on each other).
    let (free_tx, free_rx) = mpsc::channel::<(PinnedHostSlice<u8>, Option<CudaEvent>)>();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<Ready>>();
    // The producers' slots first; the sender's are page-locked (tens of milliseconds in a fresh
    // process) while the producers fill theirs.
    for _ in 0..producers {
        let _ = free_tx.send((take_staging(gpu, max)?, None));
    }
    let free_rx = Mutex::new(free_rx);
    let mut device = if zero_copy {
        None
    } else {
        Some(DeviceSlots::new(gpu, stream, max, chunks, budget)?)
    };
    let result = std::thread::scope(|scope| {
        for _ in 0..producers {
            let (free_rx, ready_tx) = (&free_rx, ready_tx.clone());
            scope.spawn(move || loop {
                let next = free_rx
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .recv();
                let Ok((mut slot, after)) = next else { break };
                let filled = (|| {
                    if let Some(e) = after {
                        e.synchronize().map_err(err("waiting for a kernel"))?;
                    }
                    let buf = slot.as_mut_slice().map_err(err("writing pinned memory"))?;
                    produce(buf)
                })();
                let filled = match filled {
                    Ok(Some((layout, tag))) => Ok((layout, tag, slot)),
                    Ok(None) => {
                        return_staging(slot);
                        break;
                    }
                    Err(e) => {
                        return_staging(slot);
                        Err(e)
                    }
                };
                let failed = filled.is_err();
                if ready_tx.send(filled).is_err() || failed {
                    break;
                }
            });
        }
        // The channel closes when the last producer is done.
        drop(ready_tx);
        let staged = (0..SLOTS).try_for_each(|_| {
            let _ = free_tx.send((take_staging(gpu, max)?, None));
            Ok::<_, GrouperError>(())
        });
        // (position in this run, chunk layout, tag, staging slot) of the chunks received.
        let mut ahead: std::collections::VecDeque<(usize, ImageLayout, u64, PinnedHostSlice<u8>)> =
            Default::default();
        // The sender's time waiting for the producer, queueing copies, and running kernels
        // (`on_chunk`), for the timeline.
        let (mut waited, mut queued, mut ran) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let run = (|| {
            staged?;
            let mut next = 0usize;
            let mut done = false;
            loop {
                // Keep up to SLOTS copies in flight (zero-copy: one chunk at a time).
                let want = if device.is_some() { SLOTS } else { 1 };
                while !done && ahead.len() < want {
                    let t = Instant::now();
                    let r = ready_rx.recv();
                    waited += t.elapsed();
                    match r {
                        Ok(r) => {
                            let (layout, tag, slot) = r?;
                            let t = Instant::now();
                            if let Some(slots) = device.as_mut() {
                                slots.copy_in(next, &slot, layout.bytes)?;
                            }
                            queued += t.elapsed();
                            ahead.push_back((next, layout, tag, slot));
                            next += 1;
                        }
                        Err(_) => done = true,
                    }
                }
                let Some((k, layout, tag, slot)) = ahead.pop_front() else {
                    break;
                };
                let base = match device.as_ref() {
                    Some(slots) => slots.ready(k)?,
                    None => mapped_address(&slot)?,
                };
                let t = Instant::now();
                on_chunk(layout.rows, &layout.pointers(base), tag)?;
                ran += t.elapsed();
                let read = stream
                    .record_event(None)
                    .map_err(err("recording an event"))?;
                if let Some(slots) = device.as_mut() {
                    slots.consumed(k)?;
                }
                // The staging slot goes back once nothing reads it: its copy (recorded by the
                // copy's own event, which `as_mut_slice` waits for) or, zero-copy, the kernel.
                let _ = free_tx.send((slot, zero_copy.then_some(read)));
            }
            let t = Instant::now();
            let synced = stream.synchronize().map_err(err("running the aggregation"));
            grouper_core::trace::event(|| {
                format!(
                    "stream sender: waited {:.1} ms for staged chunks, {:.1} ms queueing copies, {:.1} ms in decode and aggregation calls, {:.1} ms in the last synchronize",
                    waited.as_secs_f64() * 1e3,
                    queued.as_secs_f64() * 1e3,
                    ran.as_secs_f64() * 1e3,
                    t.elapsed().as_secs_f64() * 1e3
                )
            });
            synced
        })();
        // Unblock the producers (their next recv fails) and take the slots back.
        drop(free_tx);
        for (_, _, _, slot) in ahead {
            return_staging(slot);
        }
        run
    });
    // The producers are done: the slots they left, or the sender gave back, return to the pool
    // once nothing reads them.
    let free_rx = free_rx
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while let Ok((slot, after)) = free_rx.try_recv() {
        if let Some(e) = after {
            let _ = e.synchronize();
        }
        return_staging(slot);
    }
    while let Ok(Ok((_, _, slot))) = ready_rx.try_recv() {
        return_staging(slot);
    }
    if let Some(slots) = device {
        slots.release(budget);
    }
    result
}

/// The first `bytes` of a pinned staging buffer, copied asynchronously as the whole buffer
/// would be (cudarc's `[u8]` copies synchronize the stream; a pinned buffer's record an
/// event instead): a chunk's DMA moves what it filled, not its slot's bound.
struct Prefix<'a> {
    image: &'a PinnedHostSlice<u8>,
    bytes: usize,
}

impl HostSlice<u8> for Prefix<'_> {
    fn len(&self) -> usize {
        self.bytes
    }

    unsafe fn stream_synced_slice<'a>(
        &'a self,
        stream: &'a CudaStream,
    ) -> (&'a [u8], SyncOnDrop<'a>) {
        // SAFETY: as the caller's contract for the whole buffer, of which this is a prefix
        // (`bytes` is at most its length, `copy_in` makes sure).
        let (all, sync) = unsafe { self.image.stream_synced_slice(stream) };
        (&all[..self.bytes.min(all.len())], sync)
    }

    unsafe fn stream_synced_mut_slice<'a>(
        &'a mut self,
        _stream: &'a CudaStream,
    ) -> (&'a mut [u8], SyncOnDrop<'a>) {
        // A copy source only: nothing writes through it. Were it a copy's destination, the
        // copy would be of the empty slice's zero bytes (cudarc sizes it by this slice).
        (&mut [], SyncOnDrop::Sync(None))
    }
}
