//! `SUM(x)`: state = (running sum, seen-a-value flag). 64-bit integers accumulate exactly in 128
//! bits ([`SumNative::Acc`]), so the total does not depend on the order of additions (threads, atomics,
//! the GPU) and only a final total outside the result type is an overflow; decimals add with
//! checked 128-bit addition; doubles add as IEEE does. An overflow is an error, never a wrap.

use std::marker::PhantomData;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, PrimitiveArray};
use arrow::datatypes::{
    ArrowNativeType, ArrowPrimitiveType, DataType, Decimal128Type, Float64Type, Int64Type,
    UInt64Type,
};

use super::columns::{load_pairs, save_pairs, StateValue};
use super::words::{overflow, FieldWords, Input, Op};
use super::{
    decimal_lanes, downcast_input, fold_runs, fold_valid, narrow_ints, update_one_by_ids,
    without_nulls, Aggregate, Runs,
};
use super::{AggregateSpec, GroupAccumulator, Groups};
use crate::error::{GrouperError, Result};

/// How a native type sums: in which accumulator, with what addition, and back again. 64-bit
/// integers accumulate in `i128` (exact whatever the order of additions: 2^64 additions of
/// 64-bit values cannot leave 128 bits), decimals in `i128` with checked addition, floats as
/// IEEE adds.
pub trait SumNative: Copy + Default + Send + Sync + 'static {
    /// The running sum's type.
    type Acc: Copy + Default + Send + Sync + std::fmt::Debug + PartialEq + StateValue + 'static;
    /// A value as an accumulator.
    fn widen(self) -> Self::Acc;
    /// `a + b`, or `None` on overflow.
    fn add_checked(a: Self::Acc, b: Self::Acc) -> Option<Self::Acc>;
    /// `a + b` (wrapped) and whether it overflowed: the branch-free form of
    /// [`SumNative::add_checked`] for batch loops.
    fn add_overflowing(a: Self::Acc, b: Self::Acc) -> (Self::Acc, bool);
    /// The total in the native type, or `None` when it does not fit.
    fn narrow(acc: Self::Acc) -> Option<Self>;
    /// A 64-bit lane of a decimal argument ([`super::AggregateSpec::lanes_type`]) as an
    /// accumulator.
    fn from_lane(v: i64) -> Self::Acc;
    /// `acc` plus every lane of `values` (none NULL), and whether an addition overflowed:
    /// [`SumNative::add_all`] for a decimal argument's 64-bit lanes.
    fn add_lanes(acc: Self::Acc, values: &[i64]) -> (Self::Acc, bool) {
        fold_sum(
            acc,
            values.iter().map(|&v| Self::from_lane(v)),
            Self::add_overflowing,
        )
    }
    /// `acc` plus `values[r]` for every `r` of `rows` (none NULL), in that order:
    /// [`SumNative::add_all`] over one group's rows of a morsel ([`super::Runs`]).
    fn add_at(acc: Self::Acc, values: &[Self], rows: &[u32]) -> (Self::Acc, bool) {
        let at = rows.iter().map(|&r| values[r as usize].widen());
        fold_sum(acc, at, Self::add_overflowing)
    }
    /// [`SumNative::add_at`] over a decimal argument's 64-bit lanes.
    fn add_lanes_at(acc: Self::Acc, values: &[i64], rows: &[u32]) -> (Self::Acc, bool) {
        let at = rows.iter().map(|&r| Self::from_lane(values[r as usize]));
        fold_sum(acc, at, Self::add_overflowing)
    }
    /// `acc` plus every value of a narrower integer argument (none NULL;
    /// [`super::AggregateSpec::narrow_type`]), and whether an addition overflowed.
    fn add_narrow(acc: Self::Acc, values: &[i32]) -> (Self::Acc, bool) {
        let widened = values.iter().map(|&v| Self::from_lane(v.into()));
        fold_sum(acc, widened, Self::add_overflowing)
    }
    /// [`SumNative::add_narrow`] of `values[r]` for every `r` of `rows`.
    fn add_narrow_at(acc: Self::Acc, values: &[i32], rows: &[u32]) -> (Self::Acc, bool) {
        let at = rows
            .iter()
            .map(|&r| Self::from_lane(values[r as usize].into()));
        fold_sum(acc, at, Self::add_overflowing)
    }
    /// `acc` plus every value of `values` (none NULL), and whether an addition overflowed:
    /// the rows of one group folded without a group id or a state in memory per row. The
    /// default adds in order from `acc`, as the row loop does (so float sums round alike).
    fn add_all(acc: Self::Acc, values: &[Self]) -> (Self::Acc, bool) {
        fold_sum(acc, values.iter().map(|v| v.widen()), Self::add_overflowing)
    }
}

/// `acc` plus every value in order with `add` (wrapping, and whether it overflowed), and
/// whether any addition overflowed.
#[inline(always)]
fn fold_sum<A: Copy>(
    acc: A,
    values: impl Iterator<Item = A>,
    add: impl Fn(A, A) -> (A, bool),
) -> (A, bool) {
    values.fold((acc, false), |(acc, overflow), v| {
        let (sum, o) = add(acc, v);
        (sum, overflow | o)
    })
}

/// The exact sum of 64-bit integers in 128 bits, vectorisable: each value splits into its high
/// 32 bits (`high`, signed for `i64`) and its low 32 bits (unsigned), summed apart in 64-bit
/// lanes, which cannot overflow over chunks of 2^30 values; the chunks join in 128 bits.
#[inline(always)]
fn split_sum<T: Copy>(values: &[T], high: impl Fn(T) -> i64, low: impl Fn(T) -> u64) -> i128 {
    values
        .chunks(1 << 30)
        .map(|c| {
            let hi: i64 = c.iter().map(|&v| high(v)).sum();
            let lo: u64 = c.iter().map(|&v| low(v)).sum();
            (i128::from(hi) << 32) + i128::from(lo)
        })
        .sum()
}

/// [`split_sum`] of `values[r]` for every `r` of `rows`: one group's rows of a morsel.
#[inline(always)]
fn split_sum_at<T: Copy>(
    values: &[T],
    rows: &[u32],
    high: impl Fn(T) -> i64,
    low: impl Fn(T) -> u64,
) -> i128 {
    rows.chunks(1 << 30)
        .map(|c| {
            let (hi, lo) = c.iter().fold((0i64, 0u64), |(hi, lo), &r| {
                let v = values[r as usize];
                (hi + high(v), lo + low(v))
            });
            (i128::from(hi) << 32) + i128::from(lo)
        })
        .sum()
}

macro_rules! exact_sum_native {
    ($t:ty $(, $high:expr, $low:expr)?) => {
        impl SumNative for $t {
            type Acc = i128;
            #[inline(always)]
            fn widen(self) -> i128 {
                self.into()
            }
            #[inline(always)]
            fn add_checked(a: i128, b: i128) -> Option<i128> {
                a.checked_add(b)
            }
            #[inline(always)]
            fn add_overflowing(a: i128, b: i128) -> (i128, bool) {
                a.overflowing_add(b)
            }
            #[inline(always)]
            fn narrow(acc: i128) -> Option<Self> {
                Self::try_from(acc).ok()
            }
            #[inline(always)]
            fn from_lane(v: i64) -> i128 {
                v.into()
            }
            /// The lanes summed apart first, exactly ([`split_sum`]).
            fn add_lanes(acc: i128, values: &[i64]) -> (i128, bool) {
                <i64 as SumNative>::add_all(acc, values)
            }
            fn add_lanes_at(acc: i128, values: &[i64], rows: &[u32]) -> (i128, bool) {
                <i64 as SumNative>::add_at(acc, values, rows)
            }
            $(
                /// Exact whatever the order, so the values are summed apart first (2^30 values
                /// of 64 bits sum to under 2^94: no overflow in 128 bits).
                fn add_all(acc: i128, values: &[Self]) -> (i128, bool) {
                    acc.overflowing_add(split_sum(values, $high, $low))
                }
                fn add_at(acc: i128, values: &[Self], rows: &[u32]) -> (i128, bool) {
                    acc.overflowing_add(split_sum_at(values, rows, $high, $low))
                }
                /// Summed in 64 bits first: 2^31 values of 32 bits cannot leave them.
                fn add_narrow(acc: i128, values: &[i32]) -> (i128, bool) {
                    let total = values
                        .chunks(1 << 31)
                        .map(|c| i128::from(c.iter().map(|&v| i64::from(v)).sum::<i64>()))
                        .sum();
                    acc.overflowing_add(total)
                }
                fn add_narrow_at(acc: i128, values: &[i32], rows: &[u32]) -> (i128, bool) {
                    let total = rows
                        .chunks(1 << 31)
                        .map(|c| {
                            i128::from(c.iter().map(|&r| i64::from(values[r as usize])).sum::<i64>())
                        })
                        .sum();
                    acc.overflowing_add(total)
                }
            )?
        }
    };
}
exact_sum_native!(i128);
exact_sum_native!(i64, |x: i64| x >> 32, |x: i64| x as u32 as u64);
exact_sum_native!(u64, |x: u64| (x >> 32) as i64, |x: u64| x as u32 as u64);

impl SumNative for f64 {
    type Acc = f64;
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
    #[inline(always)]
    fn add_checked(a: f64, b: f64) -> Option<f64> {
        Some(a + b)
    }
    #[inline(always)]
    fn add_overflowing(a: f64, b: f64) -> (f64, bool) {
        (a + b, false)
    }
    #[inline(always)]
    fn narrow(acc: f64) -> Option<f64> {
        Some(acc)
    }
    #[inline(always)]
    fn from_lane(v: i64) -> f64 {
        v as f64
    }
    /// Four partial sums ([`f64_sum_at`]).
    fn add_at(acc: f64, values: &[f64], rows: &[u32]) -> (f64, bool) {
        (f64_sum_at(acc, values, rows, |v| v), false)
    }
    /// Four partial sums, as [`SumNative::add_at`] adds the cast values.
    fn add_narrow_at(acc: f64, values: &[i32], rows: &[u32]) -> (f64, bool) {
        (f64_sum_at(acc, values, rows, f64::from), false)
    }
}

/// `acc` plus `to_f64(values[r])` for every `r` of `rows`, in four partial sums joined at the
/// end: one chain of additions waits ~4 cycles a row on the last. The rounding differs from
/// adding in row order, as float sums do between strategies, threads and the GPU.
#[inline(always)]
fn f64_sum_at<V: Copy>(acc: f64, values: &[V], rows: &[u32], to_f64: impl Fn(V) -> f64) -> f64 {
    let mut parts = [0.0f64; 4];
    let quads = rows.chunks_exact(4);
    let tail = quads
        .remainder()
        .iter()
        .fold(0.0, |a, &r| a + to_f64(values[r as usize]));
    for q in quads {
        for (p, &r) in parts.iter_mut().zip(q) {
            *p += to_f64(values[r as usize]);
        }
    }
    acc + ((parts[0] + parts[1]) + (parts[2] + parts[3]) + tail)
}

/// A SUM's or AVG's argument holding no NULL, as their reductions over many rows read it: its
/// native values, or a decimal argument's 64-bit lanes ([`super::AggregateSpec::lanes_type`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Dense<'a, N> {
    /// The values in the argument's own type.
    Values(&'a [N]),
    /// A decimal argument's values in 64 bits.
    Lanes(&'a [i64]),
    /// A narrower integer argument's values ([`super::AggregateSpec::narrow_type`]).
    Narrow(&'a [i32]),
}

impl<'a, N: SumNative> Dense<'a, N> {
    /// `input` (of type `T`, or its lanes) when it holds no NULL; `None` when it does (the
    /// caller's row loop skips them).
    pub(super) fn of<T: ArrowPrimitiveType<Native = N>>(
        input: Option<&'a ArrayRef>,
        name: &'static str,
    ) -> Result<Option<Self>>
    where
        N: ArrowNativeType,
    {
        if let Some(lanes) = decimal_lanes(input) {
            return Ok((lanes.null_count() == 0).then(|| Dense::Lanes(lanes.values())));
        }
        if let Some(narrow) = narrow_ints(input) {
            return Ok((narrow.null_count() == 0).then(|| Dense::Narrow(narrow.values())));
        }
        let array = without_nulls::<PrimitiveArray<T>>(input, name)?;
        Ok(array.map(|a| Dense::Values(&a.values()[..])))
    }

    /// Whether there is no value.
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Dense::Values(v) => v.is_empty(),
            Dense::Lanes(v) => v.is_empty(),
            Dense::Narrow(v) => v.is_empty(),
        }
    }

    /// `acc` plus every value, and whether an addition overflowed ([`SumNative::add_all`],
    /// [`SumNative::add_lanes`]).
    pub(super) fn add_all(self, acc: N::Acc) -> (N::Acc, bool) {
        match self {
            Dense::Values(v) => N::add_all(acc, v),
            Dense::Lanes(v) => N::add_lanes(acc, v),
            Dense::Narrow(v) => N::add_narrow(acc, v),
        }
    }

    /// `acc` plus the values at `rows` ([`SumNative::add_at`], [`SumNative::add_lanes_at`]).
    pub(super) fn add_at(self, acc: N::Acc, rows: &[u32]) -> (N::Acc, bool) {
        match self {
            Dense::Values(v) => N::add_at(acc, v, rows),
            Dense::Lanes(v) => N::add_lanes_at(acc, v, rows),
            Dense::Narrow(v) => N::add_narrow_at(acc, v, rows),
        }
    }
}

/// The accumulator type of a SUM over `T`.
type Acc<T> = <<T as ArrowPrimitiveType>::Native as SumNative>::Acc;

/// Per-group state of a SUM.
///
/// Packed to 8-byte alignment: a 128-bit sum (integers, decimals) and its flag take 24 bytes
/// instead of the 32 that `i128`'s 16-byte alignment pads them to. A direct-index table is read
/// at random, one state a row and aggregate, so its bytes are its cost once it leaves the
/// cache: db-benchmark q5 (three SUMs over 100,000 groups, 2 threads, in memory) went from
/// 0.76-0.97x to 1.0-1.15x DataFusion alone. Fields are read and written by value (a packed
/// field may not be borrowed), which the algebra does anyway.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C, packed(8))]
pub struct SumState<N> {
    /// The running sum of the values seen.
    pub sum: N,
    /// Whether any non-NULL value was seen (SUM of none is NULL).
    pub seen: bool,
}

/// `SUM` over an Arrow primitive type whose native values add in place.
#[derive(Debug, Clone)]
pub struct Sum<T: ArrowPrimitiveType> {
    output_type: DataType,
    _t: PhantomData<fn() -> T>,
}

/// SUM of Int64 (the type DataFusion casts every signed integer to), exact in 128 bits.
pub type SumI64 = Sum<Int64Type>;
/// SUM of UInt64 (the type DataFusion casts every unsigned integer to), exact in 128 bits.
pub type SumU64 = Sum<UInt64Type>;
/// SUM of Float64.
pub type SumF64 = Sum<Float64Type>;
/// SUM of Decimal128, exact in 128 bits.
pub type SumDecimal = Sum<Decimal128Type>;

impl<T: ArrowPrimitiveType> Sum<T> {
    /// A SUM producing `output_type` (which carries a decimal's precision and scale).
    pub fn new(output_type: DataType) -> Self {
        Self {
            output_type,
            _t: PhantomData,
        }
    }
}

impl<T: ArrowPrimitiveType> Sum<T>
where
    T::Native: SumNative,
{
    /// Scalar update: adds one value; false when the accumulator overflowed (the batch then
    /// fails: no early exit in the loop).
    #[inline(always)]
    pub fn update(
        &self,
        state: &mut SumState<<T::Native as SumNative>::Acc>,
        value: T::Native,
    ) -> bool {
        self.update_acc(state, value.widen())
    }

    /// Scalar update by a value already in the accumulator's type (a widened 64-bit lane).
    #[inline(always)]
    fn update_acc(
        &self,
        state: &mut SumState<<T::Native as SumNative>::Acc>,
        value: <T::Native as SumNative>::Acc,
    ) -> bool {
        let (sum, overflow) = T::Native::add_overflowing(state.sum, value);
        state.sum = sum;
        state.seen = true;
        !overflow
    }

    #[inline(always)]
    fn add(
        &self,
        state: &mut SumState<<T::Native as SumNative>::Acc>,
        value: <T::Native as SumNative>::Acc,
    ) -> Result<()> {
        state.sum = T::Native::add_checked(state.sum, value).ok_or_else(|| self.overflow())?;
        state.seen = true;
        Ok(())
    }

    /// Stores a run's total; false when it overflowed.
    #[inline(always)]
    fn after_run(&self, state: &mut SumState<Acc<T>>, sum: Acc<T>, overflow: bool) -> bool {
        state.sum = sum;
        state.seen = true;
        !overflow
    }

    /// Stores an `update_one`'s total, or reports its overflow.
    fn after_one(
        &self,
        state: &mut SumState<<T::Native as SumNative>::Acc>,
        sum: <T::Native as SumNative>::Acc,
        overflow: bool,
    ) -> Result<()> {
        state.sum = sum;
        state.seen = true;
        match overflow {
            true => Err(self.overflow()),
            false => Ok(()),
        }
    }

    fn overflow(&self) -> GrouperError {
        GrouperError::Overflow {
            aggregate: "sum",
            data_type: self.output_type.clone(),
        }
    }
}

impl<T: ArrowPrimitiveType> Aggregate for Sum<T>
where
    T::Native: SumNative,
{
    type State = SumState<<T::Native as SumNative>::Acc>;

    fn init(&self) -> Self::State {
        SumState::default()
    }

    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        if let Some(lanes) = decimal_lanes(input) {
            return fold_valid(
                states,
                gids,
                lanes.values(),
                lanes.nulls(),
                |s, v| self.update_acc(s, T::Native::from_lane(v)),
                || self.overflow(),
            );
        }
        if let Some(narrow) = narrow_ints(input) {
            return fold_valid(
                states,
                gids,
                narrow.values(),
                narrow.nulls(),
                |s, v| self.update_acc(s, T::Native::from_lane(v.into())),
                || self.overflow(),
            );
        }
        let array = downcast_input::<PrimitiveArray<T>>(input, "sum")?;
        fold_valid(
            states,
            gids,
            array.values(),
            array.nulls(),
            |s, v| self.update(s, v),
            || self.overflow(),
        )
    }

    fn update_one(
        &self,
        state: &mut Self::State,
        rows: usize,
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let Some(values) = Dense::of::<T>(input, "sum")? else {
            return update_one_by_ids(self, state, rows, input);
        };
        if values.is_empty() {
            return Ok(());
        }
        let (sum, overflow) = values.add_all(state.sum);
        self.after_one(state, sum, overflow)
    }

    fn update_runs(
        &self,
        states: &mut [Self::State],
        runs: &Runs<'_>,
        input: Option<&ArrayRef>,
    ) -> Result<bool> {
        let Some(values) = Dense::of::<T>(input, "sum")? else {
            return Ok(false);
        };
        let ok = fold_runs(states, runs, |s, rows| {
            let (sum, overflow) = values.add_at(s.sum, rows);
            self.after_run(s, sum, overflow)
        });
        match ok {
            true => Ok(true),
            false => Err(self.overflow()),
        }
    }

    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        if other.seen {
            self.add(state, other.sum)?;
        }
        Ok(())
    }

    /// Narrows each total to the result type; a total that does not fit is the overflow.
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        let values = states
            .into_iter()
            .map(|s| {
                s.seen
                    .then(|| T::Native::narrow(s.sum).ok_or_else(|| self.overflow()))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        let array: PrimitiveArray<T> = values.into_iter().collect();
        Ok(Arc::new(array.with_data_type(self.output_type.clone())))
    }
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        save_pairs(states, rows, |s| (s.sum, s.seen))
    }

    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        load_pairs(columns, |sum, seen| SumState { sum, seen })
    }
}

/// `SUM(x)` in words: the exact sum — 128 bits for Int64 and UInt64, 192 for decimals (add with
/// carry), an f64 for Float64 — and a flag that a value was seen (SUM of none is NULL).
pub(super) fn fields(input: &DataType) -> Option<Vec<(Op, Input)>> {
    Some(vec![(sum_op(input)?, Input::Value), (Op::Seen, Input::One)])
}

/// The word operation of a sum of `input` (AVG's sum too).
pub(super) fn sum_op(input: &DataType) -> Option<Op> {
    Some(match input {
        DataType::Int64 => Op::Wide {
            words: 2,
            signed: true,
        },
        DataType::UInt64 => Op::Wide {
            words: 2,
            signed: false,
        },
        DataType::Decimal128(..) => Op::Wide {
            words: 3,
            signed: true,
        },
        DataType::Float64 => Op::AddF64,
        _ => return None,
    })
}

/// `SUM(x)`'s states from its words: the exact totals (finalize narrows them to the result
/// type, or reports the overflow).
pub(super) fn from_words(
    spec: &AggregateSpec,
    words: &FieldWords,
) -> Result<Box<dyn GroupAccumulator>> {
    let out = spec.output_type()?;
    let n = words.groups();
    let exact = |g: usize| -> Result<SumState<i128>> {
        let sum = match spec.input_type {
            Some(DataType::UInt64) if words.wide(0, g)[1] != 0 => None,
            _ => words.exact(0, g),
        };
        Ok(SumState {
            sum: sum.ok_or_else(|| overflow(spec))?,
            seen: words.seen(1, g),
        })
    };
    Ok(match spec.input_type {
        Some(DataType::Int64) => Box::new(Groups::from_states(
            SumI64::new(out),
            (0..n).map(exact).collect::<Result<_>>()?,
        )),
        Some(DataType::UInt64) => Box::new(Groups::from_states(
            SumU64::new(out),
            (0..n).map(exact).collect::<Result<_>>()?,
        )),
        Some(DataType::Float64) => Box::new(Groups::from_states(
            SumF64::new(out),
            (0..n)
                .map(|g| SumState {
                    sum: f64::from_bits(words.word(0)[g]),
                    seen: words.seen(1, g),
                })
                .collect(),
        )),
        _ => Box::new(Groups::from_states(
            SumDecimal::new(out),
            (0..n).map(exact).collect::<Result<_>>()?,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};

    /// A direct table's bytes are its cost: 128-bit states stay packed (24 bytes, not 32).
    #[test]
    fn wide_states_take_24_bytes() {
        assert_eq!(std::mem::size_of::<SumState<i128>>(), 24);
        assert_eq!(std::mem::size_of::<crate::agg::avg::AvgState<i128>>(), 24);
        assert_eq!(std::mem::size_of::<SumState<f64>>(), 16);
        let t = Groups::new(SumDecimal::new(DataType::Decimal128(38, 2)));
        assert_eq!(t.state_bytes(), 24);
    }

    #[test]
    fn sums_skip_nulls_and_null_when_empty() {
        let sum = SumI64::new(DataType::Int64);
        let mut states = vec![sum.init(); 3];
        let input: ArrayRef = Arc::new(Int64Array::from(vec![Some(5), None, Some(-2), None]));
        sum.update_batch(&mut states, &[0, 0, 0, 1], Some(&input))
            .unwrap();
        let out = sum.finalize(states).unwrap();
        let out = out.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(out.value(0), 3);
        assert!(out.is_null(1) && out.is_null(2));
    }

    #[test]
    fn integer_overflow_is_an_error_of_the_total_only() {
        let sum = SumI64::new(DataType::Int64);
        let mut states = vec![sum.init(); 2];
        // Group 0 leaves Int64 on the way and comes back; group 1 ends outside it.
        let input: ArrayRef = Arc::new(Int64Array::from(vec![
            i64::MAX,
            i64::MAX,
            -i64::MAX,
            i64::MAX,
            1,
        ]));
        sum.update_batch(&mut states, &[0, 0, 0, 1, 1], Some(&input))
            .unwrap();
        let err = sum.finalize(states.clone()).unwrap_err();
        assert!(matches!(err, GrouperError::Overflow { .. }), "{err}");
        let out = sum.finalize(vec![states[0]]).unwrap();
        let out = out.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(out.value(0), i64::MAX);
        // merge keeps the exact total too
        let mut a = states[0];
        sum.merge(&mut a, &SumState { sum: 1, seen: true }).unwrap();
        assert!(sum.finalize(vec![a]).is_err());
    }
}
