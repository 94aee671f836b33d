//! One chunk through the aggregation kernels, and Karnagel's trap: rows that find the global
//! hash table full are listed (and entries of shared or private tables that could not be
//! flushed are spilled), the table grows, and only those run again — none lost, none counted
//! twice. A direct table never fills, so its chunks launch once and never wait on the host.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PushKernelArg};

use crate::budget::Budget;
use crate::device::gpu_err;
use crate::placement;
use crate::table::{fill_limit, ColPtrs, DeviceTable, TableKernels};
use crate::variant::{Scratch, Variant};
use grouper_core::error::{GrouperError, Result};

/// One chunk through launch shape `v`: its rows, then (hash tables) the trap: rows and
/// spilled slots that found the table full are listed, the table grows, and they run again.
/// `timed`: events to record around the rows' aggregation kernel.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_chunk(
    ops: &TableKernels,
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
    launch_rows(
        ops,
        stream,
        v,
        cols,
        rows,
        None,
        table,
        ctrl,
        &mut lists[0],
        scratch,
        budget,
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
        ops.grow(
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
                ops.merge(
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
                    ops.grow(
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
            launch_rows(
                ops,
                stream,
                v,
                cols,
                overflow,
                Some(src),
                table,
                ctrl,
                dst,
                scratch,
                budget,
            )?;
            current_list = 1 - current_list;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn launch_rows(
    ops: &TableKernels,
    stream: &Arc<CudaStream>,
    v: &Variant,
    cols: &ColPtrs,
    n: u64,
    list: Option<&CudaSlice<u32>>,
    table: &mut DeviceTable,
    ctrl: &mut CudaSlice<u64>,
    overflow: &mut CudaSlice<u32>,
    scratch: &mut Scratch,
    budget: &Budget,
) -> Result<()> {
    // The sorted placement sorts a chunk's rows first, then folds them in sorted order: the
    // rows its table could not take come back listed in that order, and run as they are.
    let sorted = match (list, &v.sorting) {
        (None, Some((sort_keys, sorter))) => {
            let bufs = scratch.fit_sort(stream, n, budget)?;
            let mut b = stream.launch_builder(sort_keys);
            b.arg(cols).arg(&n).arg(&mut bufs.keys[0]).arg(&mut *ctrl);
            // SAFETY: sort_keys(ColPtrs, u64, unsigned*, Ctrl*) evaluates the chunk's n rows
            // (every pointer in `cols` addresses a live column of at least n rows) and writes n
            // sort keys, which the buffers fitted to n rows hold.
            unsafe { b.launch(v.launch_cfg(0)) }.map_err(gpu_err("launching sort_keys"))?;
            Some(sorter.sort(stream, bufs, n as usize)?.buffer)
        }
        _ => None,
    };
    // The partitioned placement scatters a chunk's rows into partitions first; the
    // aggregation (and the re-run of rows a full table listed) reads them there.
    if let (None, Some(parts)) = (list, &v.partitioning) {
        let words = placement::partition_buffer_words(&v.spec, n);
        let split_at = placement::partition_split_at(&v.spec, n) as usize;
        let rows = scratch.fit_parts(stream, words, budget)?;
        let err = gpu_err("partitioning rows");
        stream
            .memset_zeros(&mut rows.slice_mut(0..placement::PARTITION_HEAD_WORDS as usize))
            .map_err(&err)?;
        let shift: u32 = if v.spec.strategy.is_perfect() {
            placement::partition_shift(table.cap)
        } else {
            0
        };
        let staged = placement::scatter_shared_bytes(&v.spec);
        let counts = placement::hist_shared_bytes(&v.spec);
        for (f, shared) in [(&parts.hist, counts), (&parts.scatter, staged)] {
            let mut b = stream.launch_builder(f);
            b.arg(cols)
                .arg(&n)
                .arg(&mut *rows)
                .arg(&mut *ctrl)
                .arg(&shift);
            // SAFETY: part_hist and part_scatter(ColPtrs, u64, u64*, Ctrl*, unsigned) evaluate
            // the chunk's n rows (every pointer in `cols` addresses a live column of at least
            // n rows); the buffer, fitted to n rows of the spec's width after its head, holds
            // every row they write.
            unsafe { b.launch(v.launch_cfg(shared)) }.map_err(&err)?;
        }
        let mut split_at_done = 0;
        if let Some(split) = &parts.split {
            let (mut from, mut to) = rows.split_at_mut(split_at);
            let mut b = stream.launch_builder(split);
            b.arg(cols)
                .arg(&n)
                .arg(&mut from)
                .arg(&mut *ctrl)
                .arg(&shift)
                .arg(&mut to);
            // SAFETY: part_split(ColPtrs, u64, u64*, Ctrl*, unsigned, u64*) reads the rows
            // part_scatter wrote before `split_at` and writes as many after it, with the head
            // words the fold reads (below CUR2): the buffer was fitted to twice that. Its stage
            // is the scatter's size (the same tile of the same rows), allowed as the variant
            // was built.
            unsafe { b.launch(v.launch_cfg(staged)) }.map_err(&err)?;
            split_at_done = split_at;
        }
        scratch.split_at = split_at_done;
    }
    let list = match (sorted, scratch.sort.buf.as_ref()) {
        (Some(i), Some(bufs)) => Some(&bufs.vals[i]),
        _ => list,
    };
    let cap = table.cap;
    let limit = if v.spec.strategy.is_perfect() {
        cap
    } else {
        fill_limit(cap, ops.fill)
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
    // The split rows where the fold takes them by key range, else the partitioned rows or
    // the private tables.
    let at = scratch.split_at;
    let (mut split, aux) = match &v.partitioning {
        Some(p) if p.split.is_some() && at > 0 => {
            (scratch.parts.buf.as_mut().map(|r| r.slice_mut(at..)), None)
        }
        Some(_) => (None, scratch.parts.buf.as_mut()),
        None => (None, scratch.private.as_mut().map(|p| &mut p.slots)),
    };
    match (&mut split, aux) {
        (Some(s), _) => b.arg(s),
        (None, Some(a)) => b.arg(a),
        (None, None) => b.arg(&null),
    };
    // SAFETY: the arguments match the parameters of agg_rows and agg_list in codegen (ColPtrs
    // by value, u64 counts, device pointers); every pointer in `cols` addresses a live column
    // of at least `n` rows (or of the rows `list` names), the tables hold `cap` slots, and
    // `scratch` was fitted to `v` (spill slots for its blocks, a private table per thread,
    // or the rows partitioned above, which `aux` then addresses).
    unsafe { b.launch(v.launch_cfg(v.shared)) }.map_err(|e| {
        // Its shape, which a failed launch (an invalid argument) does not name.
        GrouperError::Gpu(format!(
            "launching agg_rows of {} ({} blocks of {} threads, {} bytes of shared memory, {} \
             slots, {} copies or key ranges): {e}",
            v.spec.strategy, v.blocks, v.spec.threads, v.shared, v.spec.local_slots, v.spec.copies
        ))
    })?;
    Ok(())
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

pub(crate) fn kernel_error(bits: u64) -> GrouperError {
    if bits & crate::expr_cuda::ERR_DIV_ZERO != 0 {
        GrouperError::InvalidInput("division by zero".into())
    } else if bits & crate::expr_cuda::ERR_DECIMAL_OVERFLOW != 0 {
        GrouperError::InvalidInput("decimal overflow in an expression".into())
    } else {
        GrouperError::Gpu(format!("kernel reported error bits {bits:#x}"))
    }
}
