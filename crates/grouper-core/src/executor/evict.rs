//! Eviction: a worker's groups leave it as [`PartialGroups`] (decoded keys and un-finalized
//! states) for the caller to spill ([`crate::spill`]) when the aggregation outgrows its memory
//! budget.
//!
//! The key codec's dictionaries (string columns, interned composite keys) are shared by every
//! worker and only grow, so evicting one worker's groups would free little: a spill starts a
//! new *generation* instead ([`Aggregation::start_generation`]), whose codec has the same
//! layout over empty dictionaries. Each worker meets it at its next batch ([`Worker::sync`])
//! and sets its groups aside for [`Worker::evict`]; the old dictionaries go when the last
//! worker's groups keyed by them have been evicted.

use std::sync::{Arc, PoisonError};

use super::{Aggregation, Worker};
use crate::cpu::streaming::Partial;
use crate::cpu::{buffered, new_accumulators};
use crate::error::Result;
use crate::keys::KeyCodec;
use crate::partial::PartialGroups;
use crate::planner::Decision;

impl Aggregation {
    /// Starts a new generation of groups: every worker evicts the groups it holds at its next
    /// batch, and keys are coded afresh over empty dictionaries.
    pub fn start_generation(&self) {
        let mut guard = self.plan.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(plan) = guard.as_mut() {
            plan.codec = Arc::new(plan.codec.emptied());
            plan.version += 1;
            plan.generation += 1;
        }
    }

    /// Bytes of the current codec's dictionaries, which no worker's
    /// [`Worker::memory_bytes`] counts.
    pub fn dictionary_bytes(&self) -> usize {
        // Under the read lock, without cloning the plan: the glue asks after every batch.
        self.plan
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(0, |p| p.codec.dictionary_bytes())
    }

    /// The planner's decision, once the first batch made one.
    pub fn planned(&self) -> Option<Decision> {
        self.current().map(|p| p.decision)
    }
}

impl Worker {
    /// Whether groups of an older generation wait to be evicted.
    pub fn has_evicted(&self) -> bool {
        !self.evicted.is_empty()
    }

    /// Takes every group this worker holds (those set aside at a new generation, the current
    /// ones, and for `shared` and `sort` the kept batches aggregated), leaving it empty; the
    /// rows it counted stay counted.
    pub fn evict(&mut self) -> Result<Vec<PartialGroups>> {
        let agg = Arc::clone(&self.agg);
        let mut out = Vec::new();
        let current = self.partial.take().zip(self.seen.take().map(|s| s.0));
        for (partial, codec) in std::mem::take(&mut self.evicted).into_iter().chain(current) {
            out.push(agg.groups_of(partial, &codec)?);
        }
        if !self.kept.is_empty() {
            let kept = std::mem::take(&mut self.kept);
            self.kept_bytes = 0;
            if let Some(decision) = agg.planned() {
                let (chunks, codec) =
                    buffered::run_kept(decision.strategy, &agg.spec, &kept, &decision.params)?;
                out.push(PartialGroups::from_chunks(
                    chunks,
                    &codec,
                    &agg.spec.key_types,
                    new_accumulators(&agg.spec)?,
                )?);
            }
        }
        self.gids = Vec::new();
        Ok(out)
    }
}

impl Aggregation {
    /// A worker's groups keyed by `codec`, decoded.
    fn groups_of(&self, partial: Partial, codec: &KeyCodec) -> Result<PartialGroups> {
        let (words, accs) = partial.into_words(&self.spec)?;
        Ok(PartialGroups {
            keys: codec.decode(&words)?,
            len: words.len(),
            accs,
        })
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::DataType;

    use super::*;
    use crate::agg::{AggKind, AggregateSpec};
    use crate::compare::same_groups;
    use crate::cpu::Strategy;
    use crate::planner::Overrides;
    use crate::{reference, InputBatch, QuerySpec};

    fn input(spec: &QuerySpec, b: u64) -> InputBatch {
        let ids: Vec<u64> = (0..700).map(|i| (b * 389 + i * 7) % 2000).collect();
        let k: ArrayRef = Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| format!("id{i}")),
        ));
        let n: ArrayRef = Arc::new(Int64Array::from_iter_values(
            ids.iter().map(|&i| i as i64 % 3),
        ));
        let v: ArrayRef = Arc::new(Int64Array::from_iter_values(ids.iter().map(|&i| i as i64)));
        InputBatch::try_new(spec, vec![k, n], vec![None, Some(v)], ids.len()).unwrap()
    }

    /// Two workers, a new generation after every few batches (as a memory budget would start
    /// them), every eviction merged at the end: equal to the reference, for each strategy.
    #[test]
    fn generations_of_evicted_groups_merge_to_the_whole() {
        let spec = QuerySpec {
            key_types: vec![DataType::Utf8, DataType::Int64],
            aggregates: vec![
                AggregateSpec::count_star(),
                AggregateSpec::new(AggKind::Sum, DataType::Int64),
            ],
        };
        let batches: Vec<InputBatch> = (0..12).map(|b| input(&spec, b)).collect();
        let want = reference::aggregate(&spec, &batches).unwrap();
        for strategy in Strategy::ALL {
            let overrides = Overrides {
                strategy: Some(strategy),
                ..Overrides::default()
            };
            let agg = Aggregation::new(spec.clone(), overrides).unwrap();
            let mut workers = [agg.worker(), agg.worker()];
            let mut spilled = Vec::new();
            for (i, b) in batches.iter().enumerate() {
                let w = &mut workers[i % 2];
                w.push(b).unwrap();
                if i % 5 == 4 {
                    agg.start_generation();
                    spilled.extend(w.evict().unwrap());
                } else if w.has_evicted() {
                    spilled.extend(w.evict().unwrap());
                }
            }
            for w in &mut workers {
                spilled.extend(w.evict().unwrap());
                assert!(!w.has_evicted());
            }
            assert!(
                spilled.len() > 3,
                "{strategy:?}: {} evictions",
                spilled.len()
            );
            let (got, _) = PartialGroups::merge_all(spilled, &spec.key_types)
                .unwrap()
                .finalize()
                .unwrap();
            assert_eq!(same_groups(&want, &got, 2), Ok(()), "{strategy:?}");
        }
    }
}
