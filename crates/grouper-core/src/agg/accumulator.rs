//! [`GroupAccumulator`]: the object-safe, vectorised face of one aggregate's algebra, and the one
//! generic implementation [`Groups`] that every strategy and the reference use.
//!
//! A strategy maps rows to dense group ids (`u32`), then calls `update` with those ids; partial
//! accumulators from threads or partitions are combined with `merge`, which applies the
//! aggregate's scalar merge to selected pairs of groups.

use std::any::Any;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int16Type,
    Int32Type, Int64Type, Int8Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};

use super::{
    AggKind, Aggregate, AggregateSpec, Avg, AvgDecimal, Corr, Count, CountStar, Median, MinMaxBool,
    MinMaxBytes, MinMaxPrimitive, Runs, SumDecimal, SumF64, SumI64, SumU64, Variance,
};
use crate::error::{GrouperError, Result};

/// Per-group states of one aggregate, updated by group id.
pub trait GroupAccumulator: Send + Sync {
    /// Number of groups held.
    fn len(&self) -> usize;
    /// Whether no group is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes of state per group (for memory planning).
    fn state_bytes(&self) -> usize;
    /// Bytes the states hold beyond [`GroupAccumulator::state_bytes`] per group: a holistic
    /// aggregate's values ([`Aggregate::held_bytes`]), for memory accounting.
    fn held_bytes(&self) -> usize;
    /// Grows (never shrinks) to `n` groups, new ones in the `init` state.
    fn resize(&mut self, n: usize);
    /// Folds row `i` of `input` into group `gids[i]`; every id must be below `len()`.
    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()>;
    /// Folds every row of `input` (`rows` rows) into group `gid` ([`Aggregate::update_one`]).
    fn update_one(&mut self, gid: u32, rows: usize, input: Option<&ArrayRef>) -> Result<()>;
    /// Folds rows grouped by group ([`Aggregate::update_runs`]); false, with nothing folded,
    /// where the aggregate takes no runs for this input. Every id must be below `len()`.
    fn update_runs(&mut self, runs: &Runs<'_>, input: Option<&ArrayRef>) -> Result<bool>;
    /// Merges group `src[i]` of `other` (the same aggregate) into group `dst[i]` of `self`.
    fn merge(&mut self, other: &dyn GroupAccumulator, src: &[u32], dst: &[u32]) -> Result<()>;
    /// [`GroupAccumulator::merge`] from states `other` gives up: each of its groups `src[i]`
    /// is left empty (`init`), so a holistic state moves where `merge` would copy it
    /// ([`Aggregate::merge_owned`]). For merges whose source is dropped after.
    fn merge_take(
        &mut self,
        other: &mut dyn GroupAccumulator,
        src: &[u32],
        dst: &[u32],
    ) -> Result<()>;
    /// The SQL results for all groups, or for the groups in `select` in that order.
    fn finalize(self: Box<Self>, select: Option<&[u32]>) -> Result<ArrayRef>;
    /// The states of groups `rows` as Arrow columns (spilling; [`super::columns`]).
    fn save(&self, rows: &[u32]) -> Vec<ArrayRef>;
    /// Appends the groups whose states [`GroupAccumulator::save`] wrote.
    fn load(&mut self, columns: &[ArrayRef]) -> Result<()>;
    /// For `merge`'s downcast.
    fn as_any(&self) -> &dyn Any;
    /// For `merge_take`'s downcast.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The states of one aggregate for a run of groups.
pub struct Groups<A: Aggregate> {
    agg: Arc<A>,
    states: Vec<A::State>,
    /// Bytes the states hold outside themselves, kept as they grow (0 unless
    /// [`Aggregate::VALUE_BYTES`] is): counting them again after every batch would read
    /// every state.
    held: usize,
}

impl<A: Aggregate> Groups<A> {
    /// No groups yet.
    pub fn new(agg: A) -> Self {
        Self::from_states(agg, Vec::new())
    }

    /// Groups holding `states` (used where states were built elsewhere, e.g. from atomics).
    pub fn from_states(agg: A, states: Vec<A::State>) -> Self {
        let held = states.iter().map(|s| agg.held_bytes(s)).sum();
        Self {
            agg: Arc::new(agg),
            states,
            held,
        }
    }

    /// Counts the values of `input` a batch folds in (its non-NULL rows) toward
    /// [`Groups::held`], for an aggregate that keeps them.
    fn count_values(&mut self, input: Option<&ArrayRef>) {
        if A::VALUE_BYTES > 0 {
            let values = input.map_or(0, |a| a.len() - a.logical_null_count());
            self.held += values * A::VALUE_BYTES;
        }
    }
}

impl<A: Aggregate> GroupAccumulator for Groups<A> {
    fn len(&self) -> usize {
        self.states.len()
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<A::State>()
    }

    fn held_bytes(&self) -> usize {
        self.held
    }

    fn resize(&mut self, n: usize) {
        if n > self.states.len() {
            let init = self.agg.init();
            self.states.resize(n, init);
        }
    }

    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()> {
        self.count_values(input);
        self.agg.update_batch(&mut self.states, gids, input)
    }

    fn update_one(&mut self, gid: u32, rows: usize, input: Option<&ArrayRef>) -> Result<()> {
        self.count_values(input);
        self.agg
            .update_one(&mut self.states[gid as usize], rows, input)
    }

    fn update_runs(&mut self, runs: &Runs<'_>, input: Option<&ArrayRef>) -> Result<bool> {
        let folded = self.agg.update_runs(&mut self.states, runs, input)?;
        if folded {
            self.count_values(input);
        }
        Ok(folded)
    }

    fn merge(&mut self, other: &dyn GroupAccumulator, src: &[u32], dst: &[u32]) -> Result<()> {
        let other = other
            .as_any()
            .downcast_ref::<Self>()
            .ok_or_else(|| GrouperError::InvalidInput("merge of different aggregates".into()))?;
        for (&s, &d) in src.iter().zip(dst) {
            self.agg
                .merge(&mut self.states[d as usize], &other.states[s as usize])?;
        }
        if A::VALUE_BYTES > 0 {
            self.held += src
                .iter()
                .map(|&s| self.agg.held_bytes(&other.states[s as usize]))
                .sum::<usize>();
        }
        Ok(())
    }

    fn merge_take(
        &mut self,
        other: &mut dyn GroupAccumulator,
        src: &[u32],
        dst: &[u32],
    ) -> Result<()> {
        let other = other
            .as_any_mut()
            .downcast_mut::<Self>()
            .ok_or_else(|| GrouperError::InvalidInput("merge of different aggregates".into()))?;
        for (&s, &d) in src.iter().zip(dst) {
            let taken = std::mem::replace(&mut other.states[s as usize], self.agg.init());
            if A::VALUE_BYTES > 0 {
                let held = self.agg.held_bytes(&taken);
                self.held += held;
                other.held = other.held.saturating_sub(held);
            }
            self.agg.merge_owned(&mut self.states[d as usize], taken)?;
        }
        Ok(())
    }

    fn finalize(self: Box<Self>, select: Option<&[u32]>) -> Result<ArrayRef> {
        let states = match select {
            None => self.states,
            // Ascending ids (every strategy's selection): each state moves out once, where a
            // clone would copy a MEDIAN's values on this one thread (a third of db-benchmark
            // q6's time on 2 threads, most of it the kernel zeroing the copies' pages).
            Some(idx) if idx.windows(2).all(|w| w[0] < w[1]) => {
                let mut states = self.states;
                idx.iter()
                    .map(|&i| std::mem::replace(&mut states[i as usize], self.agg.init()))
                    .collect()
            }
            Some(idx) => idx
                .iter()
                .map(|&i| self.states[i as usize].clone())
                .collect(),
        };
        self.agg.finalize(states)
    }

    fn save(&self, rows: &[u32]) -> Vec<ArrayRef> {
        self.agg.save(&self.states, rows)
    }

    fn load(&mut self, columns: &[ArrayRef]) -> Result<()> {
        let states = self.agg.load(columns)?;
        self.held += states.iter().map(|s| self.agg.held_bytes(s)).sum::<usize>();
        self.states.extend(states);
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn boxed<A: Aggregate>(agg: A) -> Box<dyn GroupAccumulator> {
    Box::new(Groups::new(agg))
}

/// MIN/MAX over a primitive type, dispatched on the Arrow type.
fn min_max(is_max: bool, t: &DataType) -> Result<Box<dyn GroupAccumulator>> {
    macro_rules! prim {
        ($ty:ty) => {
            boxed(MinMaxPrimitive::<$ty>::new(is_max, t.clone()))
        };
    }
    Ok(match t {
        DataType::Int8 => prim!(Int8Type),
        DataType::Int16 => prim!(Int16Type),
        DataType::Int32 => prim!(Int32Type),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::Float32 => prim!(Float32Type),
        DataType::Float64 => prim!(Float64Type),
        DataType::Decimal128(_, _) => prim!(Decimal128Type),
        DataType::Date32 => prim!(Date32Type),
        DataType::Date64 => prim!(Date64Type),
        DataType::Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => prim!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => prim!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => prim!(TimestampNanosecondType),
        DataType::Time32(TimeUnit::Second) => prim!(Time32SecondType),
        DataType::Time32(TimeUnit::Millisecond) => prim!(Time32MillisecondType),
        DataType::Time64(TimeUnit::Microsecond) => prim!(Time64MicrosecondType),
        DataType::Time64(TimeUnit::Nanosecond) => prim!(Time64NanosecondType),
        DataType::Boolean => boxed(MinMaxBool::new(is_max)),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            boxed(MinMaxBytes::new(is_max, t.clone()))
        }
        other => {
            return Err(GrouperError::UnsupportedType {
                what: if is_max { "max" } else { "min" },
                data_type: other.clone(),
            })
        }
    })
}

/// The accumulator for one aggregate of a query: the factory every strategy calls.
pub fn new_accumulator(spec: &AggregateSpec) -> Result<Box<dyn GroupAccumulator>> {
    let output = spec.output_type()?;
    let input = spec.input_type.clone().unwrap_or(DataType::Null);
    Ok(match spec.kind {
        AggKind::CountStar => boxed(CountStar),
        AggKind::Count => boxed(Count),
        AggKind::Sum => match input {
            DataType::Int64 => boxed(SumI64::new(output)),
            DataType::UInt64 => boxed(SumU64::new(output)),
            DataType::Float64 => boxed(SumF64::new(output)),
            DataType::Decimal128(_, _) => boxed(SumDecimal::new(output)),
            _ => unreachable!("output_type rejected other SUM inputs"),
        },
        AggKind::Avg => match input {
            DataType::Float64 => boxed(Avg),
            DataType::Decimal128(_, s) => boxed(AvgDecimal::new(s, &output)?),
            _ => unreachable!("output_type rejected other AVG inputs"),
        },
        AggKind::Min => min_max(false, &input)?,
        AggKind::Max => min_max(true, &input)?,
        AggKind::Corr => boxed(Corr),
        AggKind::Var | AggKind::VarPop | AggKind::Stddev | AggKind::StddevPop => boxed(Variance {
            population: matches!(spec.kind, AggKind::VarPop | AggKind::StddevPop),
            root: matches!(spec.kind, AggKind::Stddev | AggKind::StddevPop),
        }),
        AggKind::Median => median(&input)?,
    })
}

/// MEDIAN over a numeric type ([`super::median::supports`]), dispatched on the Arrow type.
fn median(t: &DataType) -> Result<Box<dyn GroupAccumulator>> {
    let unsupported = || GrouperError::UnsupportedType {
        what: "median",
        data_type: t.clone(),
    };
    if !super::median::supports(t) {
        return Err(unsupported());
    }
    crate::with_ordinal_type!(t, T => Ok(boxed(Median::<T>::new(t.clone()))), _ => Err(unsupported()))
}
