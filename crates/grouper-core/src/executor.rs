//! The engine's entry point: normalize keys, plan, run the chosen strategy, decode and finalize.

use arrow::array::ArrayRef;
use arrow::compute::concat;

use crate::cpu::{self, finalize_chunk_aggs, new_accumulators};
use crate::error::Result;
use crate::input::{morsels, InputBatch, QuerySpec};
use crate::keys;
use crate::planner::{self, Decision, Overrides};

/// How to run a query; the default lets the planner decide everything.
pub type Options = Overrides;

/// The result of a query: one array per key and per aggregate, and what the planner did.
#[derive(Debug)]
pub struct AggregateOutput {
    /// Key columns, then aggregate columns, all of `num_rows` rows.
    pub columns: Vec<ArrayRef>,
    /// Number of result groups.
    pub num_rows: usize,
    /// The planner's decision.
    pub decision: Decision,
}

/// Aggregates `batches` as `spec` says, in parallel on the current rayon pool.
pub fn aggregate(
    spec: &QuerySpec,
    batches: &[InputBatch],
    options: &Options,
) -> Result<AggregateOutput> {
    spec.output_types()?;
    let morsels = morsels(batches);
    let encoded = keys::encode(&morsels, &spec.key_types)?;
    let estimate = planner::estimate(&encoded.words, encoded.codec.domain());
    let decision = planner::choose(estimate, options)?;
    let chunks = cpu::run(
        decision.strategy,
        spec,
        &morsels,
        &encoded.words,
        encoded.codec.domain(),
        &decision.params,
    )?;
    let mut parts: Vec<Vec<ArrayRef>> = Vec::with_capacity(chunks.len());
    let mut num_rows = 0;
    for chunk in chunks {
        if chunk.words.is_empty() {
            continue;
        }
        num_rows += chunk.words.len();
        let mut cols = encoded.codec.decode(&chunk.words)?;
        cols.extend(finalize_chunk_aggs(chunk.accs, chunk.select.as_deref())?);
        parts.push(cols);
    }
    let columns = if parts.is_empty() {
        empty_result(spec, &encoded.codec)?
    } else if parts.len() == 1 {
        parts.pop().unwrap_or_default()
    } else {
        (0..parts[0].len())
            .map(|c| {
                let arrays: Vec<&dyn arrow::array::Array> =
                    parts.iter().map(|p| p[c].as_ref()).collect();
                concat(&arrays)
            })
            .collect::<std::result::Result<_, _>>()?
    };
    if spec.key_types.is_empty() && num_rows == 0 {
        num_rows = 1;
    }
    Ok(AggregateOutput {
        columns,
        num_rows,
        decision,
    })
}

/// No groups: zero rows, except that an aggregate without GROUP BY yields one row of empty
/// aggregates (`COUNT` 0, the others NULL), as SQL requires.
fn empty_result(spec: &QuerySpec, codec: &keys::KeyCodec) -> Result<Vec<ArrayRef>> {
    let groups = if spec.key_types.is_empty() { 1 } else { 0 };
    let mut cols = codec.decode(&[])?;
    let mut accs = new_accumulators(spec)?;
    accs.iter_mut().for_each(|a| a.resize(groups));
    cols.extend(finalize_chunk_aggs(accs, None)?);
    Ok(cols)
}
