//! Reading the global table back: the occupied slots' key words decoded into the output keys
//! (split keys joined again), their state words turned into the CPU's accumulators, so the
//! GPU's groups finalize — or merge with a CPU worker's — through the one aggregate algebra.

use std::sync::Arc;

use arrow::array::ArrayRef;

use crate::codegen;
use crate::device::gpu_err;
use crate::key_words::KeyOut;
use crate::prepare::PreparedInput;
use crate::table::DeviceTable;
use crate::variant::Variant;
use grouper_core::agg::layout::to_accumulator;
use grouper_core::agg::words::ROWS_WORD;
use grouper_core::error::Result;
use grouper_core::partial::PartialGroups;

/// Reads `table` (of `width` words a slot) back: its groups' keys and states, in the CPU's
/// accumulators.
pub(crate) fn read_partial(
    input: &PreparedInput,
    planned: &Variant,
    width: usize,
    table: &DeviceTable,
) -> Result<PartialGroups> {
    let stream = &input.gpu.stream;
    let err = gpu_err("reading the table back");
    let entries = table.entries as usize;
    let slots = stream.clone_dtoh(&table.slots).map_err(&err)?;
    let perfect = planned.spec.strategy.is_perfect();
    let gk = if perfect { 0 } else { planned.spec.key_count() };
    let mut selected: Vec<usize> = (0..entries)
        .filter(|&s| slots[s * width + gk + ROWS_WORD] != 0)
        .collect();
    if selected.is_empty() && input.query.keys.is_empty() {
        selected.push(0); // a global aggregate has one row, even over no input
    }
    let mut cols: Vec<Vec<u64>> = (0..input.layout.words)
        .map(|w| {
            selected
                .iter()
                .map(|&s| slots[s * width + gk + w])
                .collect()
        })
        .collect();
    codegen::derive_counts(&input.layout, &planned.spec.non_null_args, &mut cols);
    let ext_count: usize = input.key_words.iter().map(|k| k.positions.len()).sum();
    let mut key_arrays: Vec<Option<ArrayRef>> = vec![None; ext_count];
    for (wi, kw) in input.key_words.iter().enumerate() {
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
    let mut out: Vec<ArrayRef> = Vec::with_capacity(input.key_out.len());
    for k in &input.key_out {
        out.push(match k {
            KeyOut::Direct(i) => Arc::clone(&ext[*i]),
            KeyOut::Split(split, parts) => {
                let arrays: Vec<ArrayRef> = parts.iter().map(|&i| Arc::clone(&ext[i])).collect();
                split.join(&arrays)?
            }
        });
    }
    let accs = input
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
