//! Re-planning between chunks: when the groups a run has seen outgrow what its plan was sized
//! for (the estimate was low), the planner chooses again with the count seen, and the next
//! chunks run its choice — say per-block shared tables giving way to the one device-memory
//! table once the groups no longer fit shared memory (Karnagel §4: the region boundaries are
//! group counts). Hash strategies all write the same global table, so the groups aggregated so
//! far carry over and switching costs only the new kernels' compile (cached on disk after the
//! first time).

use crate::prepare::PreparedInput;
use crate::query::GpuOptions;
use crate::variant::Variant;
use grouper_core::error::Result;

/// How far the groups seen must outgrow the count the current plan was made for before the
/// planner is asked again: a doubling, so a run re-plans at most log2(groups) times.
const GROWTH: u64 = 2;

/// The re-planner of one run.
pub(crate) struct Replan {
    /// Groups the current plan was made for.
    planned_for: u64,
    /// Chunks run so far.
    chunks: u64,
    /// What changed, for `--explain`.
    pub(crate) switches: Vec<String>,
}

impl Replan {
    /// A re-planner for a run of `planned` over `input`, unless its strategy is fixed: forced,
    /// tuned (the tuner owns the choice), or a direct table (its size is the key domain, known
    /// up front).
    pub(crate) fn new(opts: &GpuOptions, planned: &Variant, input: &PreparedInput) -> Option<Self> {
        let s = planned.spec.strategy;
        if opts.strategy.is_some() || opts.tune.is_some() || s.is_perfect() {
            return None;
        }
        Some(Replan {
            planned_for: input.estimate.groups.max(1),
            chunks: 0,
            switches: Vec::new(),
        })
    }

    /// After a chunk, with `groups` in the table: the kernels the next chunks run, if the
    /// planner now chooses another hash strategy.
    pub(crate) fn after_chunk(
        &mut self,
        input: &PreparedInput,
        opts: &GpuOptions,
        current: &Variant,
        groups: u64,
    ) -> Result<Option<Variant>> {
        self.chunks += 1;
        if groups <= self.planned_for.saturating_mul(GROWTH) {
            return Ok(None);
        }
        self.planned_for = groups;
        let demand = input.demand().grown(groups);
        let c = input.choose(opts, demand)?;
        // Only another strategy is worth new kernels mid-run (an NVRTC compile when the disk
        // cache has not seen them: measured 2–6 s on an H100); a larger shared table for the
        // same strategy is left to the next query's plan.
        if c.strategy.is_perfect() || c.strategy == current.spec.strategy {
            return Ok(None);
        }
        let (v, _, compiled) = Variant::compile(input, opts, demand)?;
        self.switches.push(format!(
            "after chunk {} ({groups} groups seen, ~{} planned): {} -> {} ({}; compile {:.0} ms)",
            self.chunks,
            input.estimate.groups,
            describe(current),
            describe(&v),
            c.reason,
            compiled.compile_ms
        ));
        Ok(Some(v))
    }
}

/// A variant in a few words: strategy, and its shared table's slots where it has one.
fn describe(v: &Variant) -> String {
    match v.spec.local_slots {
        0 => v.spec.strategy.to_string(),
        slots => format!("{} ({slots} slots)", v.spec.strategy),
    }
}
