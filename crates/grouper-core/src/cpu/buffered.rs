//! The buffered strategies' run: `shared`, `sort` and `partitioned` read every kept batch
//! before they group, so the key codec is planned over all the keys at once, the keys are
//! encoded (interned rows coded once, as they are encoded), and the strategy runs over the
//! words. `partitioned` over keys too wide to pack skips the words: its partitions intern the
//! rows themselves ([`partitioned::run_interned`]).

use arrow::array::ArrayRef;

use super::key_words::KeyWords;
use super::{partitioned, Chunk, Intake, Params, Strategy};
use crate::error::{GrouperError, Result};
use crate::input::{morsels, InputBatch, QuerySpec};
use crate::keys::{KeyCodec, ROW_SHARDS};
use crate::trace;

/// Runs buffered `strategy` over the `kept` batches: result chunks and the codec planned over
/// all their keys.
pub fn run_kept(
    strategy: Strategy,
    spec: &QuerySpec,
    kept: &[InputBatch],
    params: &Params,
) -> Result<(Vec<Chunk>, KeyCodec)> {
    let morsels = morsels(kept);
    trace::event(|| format!("buffered: {} morsels kept", morsels.len()));
    let keys: Vec<&[ArrayRef]> = morsels.iter().map(|m| m.keys.as_slice()).collect();
    let rows = morsels.iter().map(InputBatch::num_rows).sum();
    let interned_partitions =
        (strategy == Strategy::Partitioned).then(|| partitioned::interned_partitions(rows, params));
    let codec = KeyCodec::plan_open(
        &spec.key_types,
        &keys,
        interned_partitions.unwrap_or(ROW_SHARDS),
    )?;
    trace::event(|| "buffered: codec planned over all keys".into());
    if interned_partitions.is_some() && codec.row_dictionary().is_some() {
        let chunks = partitioned::run_interned(spec, &morsels, &codec)?;
        return Ok((chunks, codec.sealed()));
    }
    let chunks = run(
        strategy,
        spec,
        &morsels,
        &KeyWords {
            codec: &codec,
            morsels: &morsels,
        },
        params,
    )?;
    trace::event(|| "buffered: grouped".into());
    Ok((chunks, codec.sealed()))
}

/// Runs a buffered strategy over all morsels and their key words.
pub fn run(
    strategy: Strategy,
    spec: &QuerySpec,
    morsels: &[InputBatch],
    words: &KeyWords<'_>,
    params: &Params,
) -> Result<Vec<Chunk>> {
    match strategy.descriptor().intake {
        Intake::Buffered(run) => run(spec, morsels, words, params),
        Intake::Streaming(_) => Err(GrouperError::InvalidOption(format!(
            "{strategy} streams; it does not run on buffered input"
        ))),
    }
}
