//! The aggregate algebra: the one place where aggregate semantics live.
//!
//! Every aggregate is a *state* with four operations (Karnagel §2.1):
//!
//! ```text
//!   init()            -> state            the empty aggregate (no rows seen)
//!   update(state, v)                      fold one non-NULL input value in
//!   merge(state, other)                   combine two partial states (threads, partitions)
//!   finalize(states)  -> Arrow array      the SQL result, NULL where SQL says so
//! ```
//!
//! Every CPU strategy, the reference executor and the GPU code generator use exactly these
//! operations; strategies differ only in *where* states live and *how* rows find their group.
//! Each aggregate also declares its state as 64-bit words with one atomic-friendly operation
//! per field ([`words`], numbered by [`layout`]): the form GPU code generation compiles and the
//! CPU's `shared` strategy interprets with atomics. Adding an aggregate is its file here (the
//! scalar algebra, its word fields and their conversion back to states) and its arms in
//! `AggKind`, [`layout`] and [`accumulator`].
//!
//! SQL semantics, matching what DataFusion plans: NULL inputs are skipped; `COUNT(*)` counts rows;
//! `COUNT(x)` counts non-NULL values; SUM/MIN/MAX/AVG of no non-NULL value is NULL. Result types are
//! DataFusion's (SUM of Int64 is Int64, of Decimal128(p, s) is Decimal128(min(38, p + 10), s), AVG of
//! Decimal128(p, s) is Decimal128(min(38, p + 4), min(38, s + 4)) with the sum scaled and divided
//! truncating). Where DataFusion wraps (integer and decimal SUM overflow) we raise
//! [`GrouperError::Overflow`] instead: a wrong answer is never returned silently.

mod accumulator;
pub mod avg;
pub mod columns;
pub mod corr;
mod count;
pub mod layout;
pub mod median;
mod min_max;
pub mod sum;
pub mod variance;
pub mod words;

use std::fmt;

use arrow::array::{ArrayRef, AsArray, Decimal64Array, Int32Array};
use arrow::datatypes::{DataType, Decimal64Type, Int32Type, DECIMAL64_MAX_PRECISION};

pub use accumulator::{new_accumulator, GroupAccumulator, Groups};
pub use avg::{Avg, AvgDecimal};
pub use corr::{pair_type, Corr};
pub use count::{Count, CountStar};
pub use median::Median;
pub use min_max::{MinMaxBool, MinMaxBytes, MinMaxPrimitive};
pub use sum::{SumDecimal, SumF64, SumI64, SumU64};
pub use variance::Variance;

use crate::error::{GrouperError, Result};

/// The aggregate functions grouper handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggKind {
    /// `COUNT(*)`: rows per group.
    CountStar,
    /// `COUNT(x)`: non-NULL values per group.
    Count,
    /// `SUM(x)`.
    Sum,
    /// `MIN(x)`.
    Min,
    /// `MAX(x)`.
    Max,
    /// `AVG(x)` = SUM / COUNT.
    Avg,
    /// `CORR(x, y)`: Pearson's coefficient; its argument is the pair
    /// ([`corr::pair_type`]).
    Corr,
    /// `VAR(x)` (`VAR_SAMP`): the sample variance ([`variance`]).
    Var,
    /// `VAR_POP(x)`: the population variance.
    VarPop,
    /// `STDDEV(x)` (`STDDEV_SAMP`): the sample standard deviation.
    Stddev,
    /// `STDDEV_POP(x)`: the population standard deviation.
    StddevPop,
    /// `MEDIAN(x)`: the holistic aggregate ([`median`]).
    Median,
}

impl AggKind {
    /// The SQL name.
    pub fn name(self) -> &'static str {
        match self {
            AggKind::CountStar => "count(*)",
            AggKind::Count => "count",
            AggKind::Sum => "sum",
            AggKind::Min => "min",
            AggKind::Max => "max",
            AggKind::Avg => "avg",
            AggKind::Corr => "corr",
            AggKind::Var => "var",
            AggKind::VarPop => "var_pop",
            AggKind::Stddev => "stddev",
            AggKind::StddevPop => "stddev_pop",
            AggKind::Median => "median",
        }
    }
}

impl fmt::Display for AggKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One aggregate of a query: the function and the type of its argument (none for `COUNT(*)`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AggregateSpec {
    /// Which function.
    pub kind: AggKind,
    /// The argument's type; `None` only for [`AggKind::CountStar`].
    pub input_type: Option<DataType>,
}

impl AggregateSpec {
    /// `COUNT(*)`.
    pub fn count_star() -> Self {
        Self {
            kind: AggKind::CountStar,
            input_type: None,
        }
    }

    /// An aggregate over an argument of type `input_type`.
    pub fn new(kind: AggKind, input_type: DataType) -> Self {
        Self {
            kind,
            input_type: Some(input_type),
        }
    }

    /// The type of the 64-bit lanes this aggregate also reads for its argument, where it has
    /// one: a SUM or AVG of `Decimal128(p, s)` takes `Decimal64` values of scale `s` (the fused
    /// pipeline's decimals while they fit in 64 bits, [`crate::expr::vector`]), adding each
    /// into its 128-bit state without a 128-bit array between them.
    pub fn lanes_type(&self) -> Option<DataType> {
        match (&self.kind, &self.input_type) {
            (AggKind::Sum | AggKind::Avg, Some(DataType::Decimal128(_, s))) => {
                Some(DataType::Decimal64(DECIMAL64_MAX_PRECISION, *s))
            }
            _ => None,
        }
    }

    /// The narrower integer type this aggregate also reads for its argument, where it has one:
    /// a SUM of Int64 or an AVG of Float64 takes the Int32 column DataFusion casts to those
    /// (`CAST(v AS BIGINT)` for SUM, `CAST(v AS DOUBLE)` for AVG), widening each value as it
    /// adds it, so the cast's array is never written and read back (db-benchmark q4 on 16
    /// threads, three AVGs of which two over Int32 columns, moved 52 bytes a row where 20 are
    /// the input). Exact: every Int32 is an Int64 and a Float64.
    pub fn narrow_type(&self) -> Option<DataType> {
        match (&self.kind, &self.input_type) {
            (AggKind::Sum, Some(DataType::Int64)) | (AggKind::Avg, Some(DataType::Float64)) => {
                Some(DataType::Int32)
            }
            _ => None,
        }
    }

    /// Whether `t` is this aggregate's argument type, the type of its
    /// [lanes](Self::lanes_type) or its [narrower type](Self::narrow_type).
    pub fn accepts(&self, t: &DataType) -> bool {
        self.input_type.as_ref() == Some(t)
            || self.narrow_type().as_ref() == Some(t)
            || matches!((t, self.lanes_type()), (DataType::Decimal64(_, s), Some(DataType::Decimal64(_, ls))) if *s == ls)
    }

    /// The result type, or an error when grouper does not handle this aggregate over this type.
    pub fn output_type(&self) -> Result<DataType> {
        let unsupported = |t: &DataType| GrouperError::UnsupportedType {
            what: self.kind.name(),
            data_type: t.clone(),
        };
        let input = match (&self.kind, &self.input_type) {
            (AggKind::CountStar, _) => return Ok(DataType::Int64),
            (_, None) => {
                return Err(GrouperError::InvalidInput(format!(
                    "{} needs an argument",
                    self.kind
                )))
            }
            (_, Some(t)) => t,
        };
        match self.kind {
            AggKind::CountStar | AggKind::Count => Ok(DataType::Int64),
            AggKind::Sum => match input {
                DataType::Int64 | DataType::UInt64 | DataType::Float64 => Ok(input.clone()),
                DataType::Decimal128(p, s) => Ok(DataType::Decimal128((*p + 10).min(38), *s)),
                t => Err(unsupported(t)),
            },
            AggKind::Avg => match input {
                DataType::Float64 => Ok(DataType::Float64),
                DataType::Decimal128(p, s) => {
                    Ok(DataType::Decimal128((*p + 4).min(38), (*s + 4).min(38)))
                }
                t => Err(unsupported(t)),
            },
            AggKind::Min | AggKind::Max => {
                if min_max::supports(input) {
                    Ok(input.clone())
                } else {
                    Err(unsupported(input))
                }
            }
            AggKind::Corr if *input == pair_type() => Ok(DataType::Float64),
            AggKind::Corr => Err(unsupported(input)),
            AggKind::Var | AggKind::VarPop | AggKind::Stddev | AggKind::StddevPop => match input {
                DataType::Float64 => Ok(DataType::Float64),
                t => Err(unsupported(t)),
            },
            AggKind::Median if median::supports(input) => Ok(input.clone()),
            AggKind::Median => Err(unsupported(input)),
        }
    }
}

/// The scalar algebra of one aggregate over one input type.
///
/// `update_batch` is the vectorised form of `update`: it folds row `i` of `input` into
/// `states[gids[i]]`, skipping NULLs, by calling the aggregate's scalar `update` (each
/// implementation keeps that scalar function next to it, so the algebra is written once).
pub trait Aggregate: Send + Sync + 'static {
    /// The per-group state.
    type State: Clone + Send + Sync + 'static;
    /// The empty state.
    fn init(&self) -> Self::State;
    /// Folds rows of `input` into the states their group ids name. `input` is `None` for
    /// `COUNT(*)`, whose rows are counted from `gids` alone.
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()>;
    /// Folds every row of `input` (`rows` of them: `COUNT(*)` has no input) into one state:
    /// `update_batch` for a batch whose rows all fall in one group (a constant key, a run of
    /// sorted keys, no GROUP BY). Sums and counts override it with a reduction that reads no
    /// group ids and keeps no state in memory between rows; the default is `update_batch`
    /// with every id 0.
    fn update_one(
        &self,
        state: &mut Self::State,
        rows: usize,
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        update_one_by_ids(self, state, rows, input)
    }
    /// Folds the rows of each of `runs`' groups into that group's state: `update_batch` for a
    /// morsel whose rows were first grouped by group ([`Runs`]: few groups, many rows each),
    /// each group's rows a reduction in registers rather than a store into its state per row.
    /// `Ok(false)`, with no state touched, where the aggregate has no such form for this input
    /// (the default; the caller then runs `update_batch`).
    fn update_runs(
        &self,
        _states: &mut [Self::State],
        _runs: &Runs<'_>,
        _input: Option<&ArrayRef>,
    ) -> Result<bool> {
        Ok(false)
    }
    /// Combines a partial state into another.
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()>;
    /// [`Aggregate::merge`] of a state the caller gives up: a holistic state moves its values
    /// instead of copying them. The default is `merge`.
    fn merge_owned(&self, state: &mut Self::State, other: Self::State) -> Result<()> {
        self.merge(state, &other)
    }
    /// Bytes each folded non-NULL value adds to a state: 0 for the algebraic aggregates,
    /// whose states have a fixed size; a holistic one (MEDIAN) keeps its values. With
    /// [`Aggregate::held_bytes`] it lets memory accounting see states that grow.
    const VALUE_BYTES: usize = 0;
    /// Bytes `state` holds outside itself (a holistic aggregate's values).
    fn held_bytes(&self, _state: &Self::State) -> usize {
        0
    }
    /// The SQL results of a list of states, in order.
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef>;
    /// The states `states[i]` for each `i` of `rows`, as Arrow columns ([`columns`]): how
    /// partial groups are spilled. Always the same number of columns for one aggregate.
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef>;
    /// The states [`Aggregate::save`] wrote, in order.
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>>;
}

/// A morsel's rows grouped by group: `order` lists row indices group after group (each group's
/// rows in row order), and `runs` each group's id and where its rows end in `order`.
#[derive(Debug, Clone, Copy)]
pub struct Runs<'a> {
    /// Row indices, group after group.
    pub order: &'a [u32],
    /// `(group id, end)`: the group's rows are `order[previous end..end]`.
    pub runs: &'a [(u32, u32)],
}

impl<'a> Runs<'a> {
    /// Each group's id (as a state index) and its rows.
    pub fn groups(&self) -> impl Iterator<Item = (usize, &'a [u32])> + 'a {
        let order = self.order;
        self.runs.iter().scan(0usize, move |start, &(g, end)| {
            let rows = order.get(*start..end as usize).unwrap_or(&[]);
            *start = end as usize;
            Some((g as usize, rows))
        })
    }
}

/// Folds each run of `runs` into its group's state with `fold` (the state and the run's rows;
/// false on an overflow), every run however the others went; whether none overflowed.
#[inline(always)]
pub(crate) fn fold_runs<S>(
    states: &mut [S],
    runs: &Runs<'_>,
    mut fold: impl FnMut(&mut S, &[u32]) -> bool,
) -> bool {
    runs.groups()
        .fold(true, |ok, (g, rows)| fold(&mut states[g], rows) & ok)
}

/// [`Aggregate::update_one`] through `update_batch` with every group id 0 (the default, and
/// the overrides' path for inputs with NULLs).
pub(crate) fn update_one_by_ids<A: Aggregate + ?Sized>(
    agg: &A,
    state: &mut A::State,
    rows: usize,
    input: Option<&ArrayRef>,
) -> Result<()> {
    let gids = vec![0u32; rows];
    agg.update_batch(std::slice::from_mut(state), &gids, input)
}

/// `input` as the array type an aggregate reads when it holds no NULL (an `update_one` sums
/// it whole), or `None` when it does (the row loop skips them).
pub(crate) fn without_nulls<'a, T: arrow::array::Array + 'static>(
    input: Option<&'a ArrayRef>,
    name: &'static str,
) -> Result<Option<&'a T>> {
    let array = downcast_input::<T>(input, name)?;
    Ok((array.null_count() == 0).then_some(array))
}

/// `input` as a decimal argument's 64-bit lanes ([`AggregateSpec::lanes_type`]), when it is.
pub(crate) fn decimal_lanes(input: Option<&ArrayRef>) -> Option<&Decimal64Array> {
    input.and_then(|a| a.as_primitive_opt::<Decimal64Type>())
}

/// `input` as a SUM's or AVG's narrower integer argument ([`AggregateSpec::narrow_type`]),
/// when it is one.
pub(crate) fn narrow_ints(input: Option<&ArrayRef>) -> Option<&Int32Array> {
    input.and_then(|a| a.as_primitive_opt::<Int32Type>())
}

/// Downcasts `input` to the concrete array type an aggregate reads, or explains the mismatch.
pub(crate) fn downcast_input<'a, T: 'static>(
    input: Option<&'a ArrayRef>,
    name: &'static str,
) -> Result<&'a T> {
    let array = input.ok_or_else(|| GrouperError::InvalidInput(format!("{name} needs input")))?;
    array.as_any().downcast_ref::<T>().ok_or_else(|| {
        GrouperError::InvalidInput(format!("{name} got an input of type {}", array.data_type()))
    })
}

/// Folds `values` into the states `gids` name, skipping NULLs, with `f` returning false on
/// overflow: the flags are and-ed and reported once after the loop as `overflow()`, so the loop
/// has no early exit and no branch per row besides validity.
#[inline]
pub(crate) fn fold_valid<S, V: Copy>(
    states: &mut [S],
    gids: &[u32],
    values: &[V],
    nulls: Option<&arrow::buffer::NullBuffer>,
    f: impl Fn(&mut S, V) -> bool,
    overflow: impl FnOnce() -> GrouperError,
) -> Result<()> {
    let mut ok = true;
    match nulls.filter(|n| n.null_count() > 0) {
        None => {
            for (&g, &v) in gids.iter().zip(values) {
                ok &= f(&mut states[g as usize], v);
            }
        }
        Some(n) => {
            for (row, (&g, &v)) in gids.iter().zip(values).enumerate() {
                if n.is_valid(row) {
                    ok &= f(&mut states[g as usize], v);
                }
            }
        }
    }
    if ok {
        Ok(())
    } else {
        Err(overflow())
    }
}

/// Calls `f(gid, row)` for every row of `gids` whose input value is valid.
#[inline]
pub(crate) fn for_each_valid(
    nulls: Option<&arrow::buffer::NullBuffer>,
    gids: &[u32],
    mut f: impl FnMut(usize, usize) -> Result<()>,
) -> Result<()> {
    match nulls {
        Some(n) if n.null_count() > 0 => {
            for (row, &g) in gids.iter().enumerate() {
                if n.is_valid(row) {
                    f(g as usize, row)?;
                }
            }
        }
        _ => {
            for (row, &g) in gids.iter().enumerate() {
                f(g as usize, row)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{Array, Decimal128Array, Float64Array, Int32Array, Int64Array, UInt64Array};
    use proptest::prelude::*;

    /// `rows` values drawn from `v` (NULL where `null` is set) as a column of type `t`.
    fn column(t: &DataType, v: &[(i64, bool)]) -> ArrayRef {
        let opt = |&(x, null): &(i64, bool)| (!null).then_some(x);
        match t {
            DataType::Int64 => Arc::new(v.iter().map(opt).collect::<Int64Array>()),
            DataType::UInt64 => Arc::new(
                v.iter()
                    .map(|p| opt(p).map(|x| x as u64))
                    .collect::<UInt64Array>(),
            ),
            DataType::Float64 => Arc::new(
                v.iter()
                    .map(|p| opt(p).map(|x| x as f64 / 7.0))
                    .collect::<Float64Array>(),
            ),
            _ => Arc::new(
                v.iter()
                    .map(|p| opt(p).map(|x| i128::from(x) * 1_000_000_007))
                    .collect::<Decimal128Array>()
                    .with_data_type(t.clone()),
            ),
        }
    }

    proptest! {
        /// Every aggregate's `update_one` (one group's rows at once) leaves the state that
        /// `update` with every group id 0 leaves, from an empty state and after a first batch:
        /// the same sums (exact, 64-bit values at their limits), counts, NULLs skipped, and the
        /// same overflow errors.
        #[test]
        fn one_group_updates_equal_the_row_loop(
            first in prop::collection::vec((any::<i64>(), any::<bool>()), 0..50),
            values in prop::collection::vec(
                (prop_oneof![any::<i64>(), Just(i64::MAX), Just(i64::MIN), -1000i64..1000], prop::bool::weighted(0.2)),
                0..300,
            ),
            nulls in any::<bool>(),
        ) {
            let values: Vec<(i64, bool)> = values.into_iter().map(|(x, n)| (x, n && nulls)).collect();
            let types = [
                DataType::Int64,
                DataType::UInt64,
                DataType::Float64,
                DataType::Decimal128(38, 2),
            ];
            for t in &types {
                for kind in [AggKind::CountStar, AggKind::Count, AggKind::Sum, AggKind::Avg] {
                    let spec = if kind == AggKind::CountStar {
                        AggregateSpec::count_star()
                    } else {
                        AggregateSpec::new(kind, t.clone())
                    };
                    if spec.output_type().is_err() {
                        continue;
                    }
                    let input = (kind != AggKind::CountStar).then(|| column(t, &values));
                    let start = (kind != AggKind::CountStar).then(|| column(t, &first));
                    let run = |one: bool| -> Result<ArrayRef> {
                        let mut acc = new_accumulator(&spec)?;
                        acc.resize(1);
                        acc.update(&vec![0; first.len()], start.as_ref())?;
                        if one {
                            acc.update_one(0, values.len(), input.as_ref())?;
                        } else {
                            acc.update(&vec![0; values.len()], input.as_ref())?;
                        }
                        acc.finalize(None)
                    };
                    match (run(true), run(false)) {
                        (Ok(a), Ok(b)) => prop_assert_eq!(a.to_data(), b.to_data(), "{:?} {:?}", kind, t),
                        (a, b) => prop_assert_eq!(a.is_err(), b.is_err(), "{:?} {:?}: {:?} / {:?}", kind, t, a.err(), b.err()),
                    }
                }
            }
        }
    }

    proptest! {
        /// A decimal SUM or AVG over 64-bit lanes ([`AggregateSpec::lanes_type`]) leaves the
        /// states the same values as Decimal128 leave, by group id and one group at once,
        /// NULLs skipped, sums exact at the 64-bit limits; other aggregates take no lanes.
        #[test]
        fn decimal_lanes_update_as_their_128_bit_values(
            values in prop::collection::vec(
                (prop_oneof![any::<i64>(), Just(i64::MAX), Just(i64::MIN), -1000i64..1000], prop::bool::weighted(0.2)),
                0..300,
            ),
            groups in 1u32..5,
        ) {
            let t = DataType::Decimal128(15, 2);
            let opt = |&(x, null): &(i64, bool)| (!null).then_some(x);
            let lanes: ArrayRef = Arc::new(
                values.iter().map(opt).collect::<Decimal64Array>()
                    .with_data_type(DataType::Decimal64(DECIMAL64_MAX_PRECISION, 2)),
            );
            let wide: ArrayRef = Arc::new(
                values.iter().map(|p| opt(p).map(i128::from)).collect::<Decimal128Array>()
                    .with_data_type(t.clone()),
            );
            let gids: Vec<u32> = (0..values.len() as u32).map(|i| i % groups).collect();
            for kind in [AggKind::Sum, AggKind::Avg] {
                let spec = AggregateSpec::new(kind, t.clone());
                prop_assert!(spec.accepts(lanes.data_type()));
                let run = |input: &ArrayRef, one: bool| -> Result<ArrayRef> {
                    let mut acc = new_accumulator(&spec)?;
                    acc.resize(groups as usize);
                    if one {
                        acc.update_one(1 % groups, values.len(), Some(input))?;
                    } else {
                        acc.update(&gids, Some(input))?;
                    }
                    acc.finalize(None)
                };
                for one in [false, true] {
                    match (run(&lanes, one), run(&wide, one)) {
                        (Ok(a), Ok(b)) => prop_assert_eq!(a.to_data(), b.to_data(), "{:?} one={}", kind, one),
                        (a, b) => prop_assert_eq!(a.is_err(), b.is_err(), "{:?} one={}: {:?} / {:?}", kind, one, a.err(), b.err()),
                    }
                }
            }
            for spec in [AggregateSpec::new(AggKind::Min, t.clone()), AggregateSpec::new(AggKind::Count, t.clone()), AggregateSpec::new(AggKind::Sum, DataType::Int64)] {
                prop_assert!(!spec.accepts(lanes.data_type()));
            }
        }
    }

    proptest! {
        /// A SUM of Int64 or an AVG of Float64 over the Int32 column DataFusion would have cast
        /// ([`AggregateSpec::narrow_type`]) leaves the values the cast column leaves, by group
        /// id, one group at once and run by run, NULLs skipped (then no runs), Int32's limits
        /// included; no other aggregate takes Int32 in place of its type.
        #[test]
        fn narrow_integers_update_as_their_cast(
            values in prop::collection::vec(
                (prop_oneof![any::<i32>(), Just(i32::MAX), Just(i32::MIN), -1000i32..1000], prop::bool::weighted(0.2)),
                0..300,
            ),
            groups in 1u32..5,
            nulls in any::<bool>(),
        ) {
            let opt = |&(x, null): &(i32, bool)| (!(null && nulls)).then_some(x);
            let narrow: ArrayRef = Arc::new(values.iter().map(opt).collect::<Int32Array>());
            let gids: Vec<u32> = (0..values.len() as u32).map(|i| i % groups).collect();
            // Rows group after group, in row order within each: the runs of `gids`.
            let order: Vec<u32> = (0..groups)
                .flat_map(|g| (g..values.len() as u32).step_by(groups as usize))
                .collect();
            let ends: Vec<(u32, u32)> = (0..groups)
                .scan(0u32, |end, g| {
                    *end += (g..values.len() as u32).step_by(groups as usize).count() as u32;
                    Some((g, *end))
                })
                .collect();
            let runs = Runs { order: &order, runs: &ends };
            for (kind, t) in [(AggKind::Sum, DataType::Int64), (AggKind::Avg, DataType::Float64)] {
                let spec = AggregateSpec::new(kind, t.clone());
                prop_assert!(spec.accepts(narrow.data_type()));
                let cast = arrow::compute::cast(&narrow, &t).unwrap();
                let run = |input: &ArrayRef, how: u8| -> Result<Option<ArrayRef>> {
                    let mut acc = new_accumulator(&spec)?;
                    acc.resize(groups as usize);
                    match how {
                        0 => acc.update(&gids, Some(input))?,
                        1 => acc.update_one(1 % groups, values.len(), Some(input))?,
                        _ if !acc.update_runs(&runs, Some(input))? => return Ok(None),
                        _ => {}
                    }
                    acc.finalize(None).map(Some)
                };
                for how in 0..3 {
                    let (a, b) = (run(&narrow, how).unwrap(), run(&cast, how).unwrap());
                    prop_assert_eq!(a.is_some(), b.is_some(), "{:?} how={}: runs taken alike", kind, how);
                    if let (Some(a), Some(b)) = (a, b) {
                        prop_assert_eq!(a.to_data(), b.to_data(), "{:?} how={}", kind, how);
                    }
                }
            }
            for spec in [
                AggregateSpec::new(AggKind::Min, DataType::Int64),
                AggregateSpec::new(AggKind::Count, DataType::Int64),
                AggregateSpec::new(AggKind::Sum, DataType::Float64),
                AggregateSpec::new(AggKind::Sum, DataType::Decimal128(15, 2)),
                AggregateSpec::new(AggKind::Avg, DataType::Decimal128(15, 2)),
            ] {
                prop_assert!(!spec.accepts(narrow.data_type()));
            }
        }
    }

    #[test]
    fn output_types_follow_datafusion() {
        let sum = |t| AggregateSpec::new(AggKind::Sum, t).output_type().unwrap();
        assert_eq!(sum(DataType::Int64), DataType::Int64);
        assert_eq!(sum(DataType::UInt64), DataType::UInt64);
        assert_eq!(
            sum(DataType::Decimal128(15, 2)),
            DataType::Decimal128(25, 2)
        );
        assert_eq!(
            sum(DataType::Decimal128(35, 2)),
            DataType::Decimal128(38, 2)
        );
        let avg = |t| AggregateSpec::new(AggKind::Avg, t).output_type().unwrap();
        assert_eq!(
            avg(DataType::Decimal128(15, 2)),
            DataType::Decimal128(19, 6)
        );
        assert_eq!(avg(DataType::Float64), DataType::Float64);
        assert!(AggregateSpec::new(AggKind::Sum, DataType::Utf8)
            .output_type()
            .is_err());
        assert!(AggregateSpec::new(AggKind::Sum, DataType::Int32)
            .output_type()
            .is_err());
        assert_eq!(
            AggregateSpec::new(AggKind::Min, DataType::Utf8View)
                .output_type()
                .unwrap(),
            DataType::Utf8View
        );
        assert_eq!(
            AggregateSpec::count_star().output_type().unwrap(),
            DataType::Int64
        );
    }
}
