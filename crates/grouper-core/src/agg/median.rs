//! `MEDIAN(x)` over a numeric argument, as DataFusion's `MedianGroupsAccumulator` computes it:
//! the result has the argument's type; of an even count it is the two middle values' mean in
//! that type's arithmetic (integers and decimals divide truncating, with DataFusion's
//! overflow-free fallback); NULL for a group without a non-NULL value.
//!
//! The one *holistic* aggregate of the algebra: its state is the group's values themselves
//! (update appends, merge concatenates, finalize selects the middle), so its size grows with
//! the rows, which [`Aggregate::held_bytes`] reports for memory accounting, and it has no
//! word form (no GPU, no atomics).
//!
//! With few groups each holds many values (db-benchmark q6: 10,000 groups of 10,000 values at
//! 1e8 rows), so two steps must not run on one thread: merging the workers' states, and
//! selecting the middles. A state therefore keeps the runs merged into it as they came
//! ([`Values`]; [`Aggregate::merge_owned`] moves a run, where copying 1e8 values on the
//! merging thread took longer than the whole query on DuckDB), and finalize joins each
//! group's runs and selects its middle, groups in parallel.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, LargeListArray, PrimitiveArray};
use arrow::buffer::{OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{ArrowNativeType, ArrowNativeTypeOp, ArrowPrimitiveType, DataType, Field};
use rayon::prelude::*;

use super::columns::nth;
use super::{downcast_input, for_each_valid, Aggregate};
use crate::error::{GrouperError, Result};

/// Whether grouper computes MEDIAN over `t` (DataFusion's numeric argument types but
/// Float16 and the narrower decimals, which DataFusion's plans do not hand it here).
pub fn supports(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Int8 | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Float32
            | Float64
            | Decimal128(_, _)
    )
}

/// `MEDIAN` over values of Arrow type `T` (its declared `data_type`: a decimal's precision
/// and scale).
#[derive(Debug)]
pub struct Median<T: ArrowPrimitiveType> {
    data_type: DataType,
    _values: PhantomData<fn() -> T>,
}

impl<T: ArrowPrimitiveType> Median<T> {
    /// The median of values of `data_type` (whose Arrow type is `T`).
    pub fn new(data_type: DataType) -> Self {
        Self {
            data_type,
            _values: PhantomData,
        }
    }
}

/// A group's values: those folded into this state, and the runs other states gave up to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Values<N> {
    own: Vec<N>,
    runs: Vec<Vec<N>>,
}

impl<N: Copy> Values<N> {
    /// Values in all.
    pub fn len(&self) -> usize {
        self.own.len() + self.runs.iter().map(Vec::len).sum::<usize>()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values, runs after the own ones.
    fn iter(&self) -> impl Iterator<Item = &N> {
        self.own.iter().chain(self.runs.iter().flatten())
    }
}

/// The median of `values` (reordered), DataFusion's `calculate_median`: the middle value,
/// or of an even count the mean of the largest value left of the middle and the middle.
fn median<N: ArrowNativeTypeOp>(values: &mut [N]) -> Option<N> {
    let len = values.len();
    if len == 0 {
        return None;
    }
    let (low, high, _) = values.select_nth_unstable_by(len / 2, |a, b| a.compare(*b));
    let high = *high;
    if len % 2 == 1 {
        return Some(high);
    }
    let low = *low
        .iter()
        .max_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Less))?;
    let two = N::usize_as(2);
    Some(match low.add_checked(high) {
        Ok(sum) => sum.div_wrapping(two),
        // a/2 + b/2 + (a%2 + b%2)/2: no intermediate leaves the type.
        Err(_) => {
            let halves = low.div_wrapping(two).add_wrapping(high.div_wrapping(two));
            let odd = low.mod_wrapping(two).add_wrapping(high.mod_wrapping(two));
            halves.add_wrapping(odd.div_wrapping(two))
        }
    })
}

impl<T> Aggregate for Median<T>
where
    T: ArrowPrimitiveType,
    T::Native: ArrowNativeTypeOp,
{
    type State = Values<T::Native>;
    const VALUE_BYTES: usize = std::mem::size_of::<T::Native>();
    fn init(&self) -> Self::State {
        Values {
            own: Vec::new(),
            runs: Vec::new(),
        }
    }
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let values = downcast_input::<PrimitiveArray<T>>(input, "median")?;
        let v = values.values();
        for_each_valid(values.nulls(), gids, |g, row| {
            states[g].own.push(v[row]);
            Ok(())
        })
    }
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        state.own.extend(other.iter());
        Ok(())
    }
    fn merge_owned(&self, state: &mut Self::State, other: Self::State) -> Result<()> {
        if state.is_empty() {
            *state = other;
            return Ok(());
        }
        if !other.own.is_empty() {
            state.runs.push(other.own);
        }
        state
            .runs
            .extend(other.runs.into_iter().filter(|r| !r.is_empty()));
        Ok(())
    }
    fn held_bytes(&self, state: &Self::State) -> usize {
        let runs: usize = state.runs.iter().map(Vec::capacity).sum();
        (state.own.capacity() + runs) * Self::VALUE_BYTES
    }
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        // A group of several runs is joined in a scratch buffer each task reuses: joining
        // into a fresh allocation per group faulted in as many new pages as there are values.
        let medians: Vec<Option<T::Native>> = states
            .into_par_iter()
            .with_min_len(64)
            .map_init(Vec::new, |scratch, mut v| {
                if v.runs.is_empty() {
                    return median(&mut v.own);
                }
                scratch.clear();
                scratch.extend(v.iter().copied());
                median(scratch)
            })
            .collect();
        let out = medians
            .into_iter()
            .collect::<PrimitiveArray<T>>()
            .with_data_type(self.data_type.clone());
        Ok(Arc::new(out))
    }
    /// One `LargeList` column of the groups' values (64-bit offsets: a spilled run may hold
    /// more than 2^31 values).
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        let lengths = rows.iter().map(|&r| states[r as usize].len());
        let offsets = OffsetBuffer::<i64>::from_lengths(lengths);
        let values: Vec<T::Native> = rows
            .iter()
            .flat_map(|&r| states[r as usize].iter().copied())
            .collect();
        let values = PrimitiveArray::<T>::new(ScalarBuffer::from(values), None)
            .with_data_type(self.data_type.clone());
        let field = Arc::new(Field::new("item", self.data_type.clone(), false));
        vec![Arc::new(LargeListArray::new(
            field,
            offsets,
            Arc::new(values),
            None,
        ))]
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        let column = nth(columns, 0)?;
        let mismatch = || {
            GrouperError::InvalidInput(format!(
                "a saved median state of type {} where LargeList({}) was expected",
                column.data_type(),
                self.data_type
            ))
        };
        let list = column.as_list_opt::<i64>().ok_or_else(mismatch)?;
        let values = list
            .values()
            .as_primitive_opt::<T>()
            .ok_or_else(mismatch)?
            .values();
        Ok(list
            .offsets()
            .windows(2)
            .map(|w| Values {
                own: values[w[0].as_usize()..w[1].as_usize()].to_vec(),
                runs: Vec::new(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Decimal128Array, Float64Array, Int32Array, Int64Array};
    use arrow::datatypes::{Decimal128Type, Float64Type, Int32Type, Int64Type};

    fn run<T>(agg: &Median<T>, input: ArrayRef, gids: &[u32], groups: usize) -> ArrayRef
    where
        T: ArrowPrimitiveType,
        T::Native: ArrowNativeTypeOp,
    {
        let mut states = vec![agg.init(); groups];
        agg.update_batch(&mut states, gids, Some(&input)).unwrap();
        agg.finalize(states).unwrap()
    }

    #[test]
    fn middles_means_and_nulls_follow_datafusion() {
        let agg = Median::<Int64Type>::new(DataType::Int64);
        let input: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(5),
            Some(1),
            None,
            Some(3),
            Some(4),
            Some(-7),
            Some(-2),
            None,
        ]));
        // Group 0: 5, 1, NULL, 3 -> 3. Group 1: 4, -7, -2 -> -2.
        // Group 2: only NULL -> NULL. Group 3: no row -> NULL.
        let out = run(&agg, input, &[0, 0, 0, 0, 1, 1, 1, 2], 4);
        let out = out.as_primitive::<Int64Type>();
        assert_eq!(
            out.iter().collect::<Vec<_>>(),
            [Some(3), Some(-2), None, None]
        );
        // Integer means truncate toward zero: 1 and 2 -> 1; -1 and -2 -> -1.
        let ints = Median::<Int32Type>::new(DataType::Int32);
        let input: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, -1, -2]));
        let out = run(&ints, input, &[0, 0, 1, 1], 2);
        let out = out.as_primitive::<Int32Type>();
        assert_eq!(out.values().to_vec(), [1, -1]);
        // Beside the type's end the sum would overflow: the halves are added instead.
        let input: ArrayRef = Arc::new(Int32Array::from(vec![i32::MAX, i32::MAX - 2]));
        let out = run(&ints, input, &[0, 0], 1);
        assert_eq!(out.as_primitive::<Int32Type>().value(0), i32::MAX - 1);
        let floats = Median::<Float64Type>::new(DataType::Float64);
        let input: ArrayRef = Arc::new(Float64Array::from(vec![0.5, 0.25, 2.0, 1.0]));
        let out = run(&floats, input, &[0, 0, 0, 0], 1);
        assert_eq!(out.as_primitive::<Float64Type>().value(0), 0.75);
    }

    #[test]
    fn a_decimal_median_keeps_its_precision_and_scale() {
        let t = DataType::Decimal128(12, 2);
        let agg = Median::<Decimal128Type>::new(t.clone());
        let input: ArrayRef =
            Arc::new(Decimal128Array::from(vec![105, 100, 301, 7]).with_data_type(t.clone()));
        let out = run(&agg, input, &[0, 0, 0, 0], 1);
        assert_eq!(out.data_type(), &t);
        // 1.00 and 1.05: 2.05 / 2 = 1.02 (raw 205 / 2, truncated).
        assert_eq!(out.as_primitive::<Decimal128Type>().value(0), 102);
    }

    proptest::proptest! {
        /// Split over two partial states, saved and loaded, merged: the median of the sorted
        /// values, for any order of the rows.
        #[test]
        fn merged_partials_give_the_sorted_middle(
            values in proptest::collection::vec(proptest::option::weighted(0.9, -50i64..50), 0..200),
            split in 0usize..200,
        ) {
            let agg = Median::<Int64Type>::new(DataType::Int64);
            let split = split.min(values.len());
            let gids: Vec<u32> = (0..values.len()).map(|i| u32::from(i >= split)).collect();
            let input: ArrayRef = Arc::new(values.iter().copied().collect::<Int64Array>());
            let mut parts = vec![agg.init(), agg.init()];
            agg.update_batch(&mut parts, &gids, Some(&input)).unwrap();
            let mut back = agg.load(&agg.save(&parts, &[0, 1])).unwrap();
            proptest::prop_assert_eq!(&back, &parts);
            let other = back.pop().unwrap();
            // Copied, and moved as a run (then saved with its runs).
            let mut copied = back[0].clone();
            agg.merge(&mut copied, &other).unwrap();
            agg.merge_owned(&mut back[0], other).unwrap();
            proptest::prop_assert_eq!(back[0].len(), copied.len());
            let back = agg.load(&agg.save(&back, &[0])).unwrap();
            let out = agg.finalize(vec![back[0].clone(), copied]).unwrap();
            let mut sorted: Vec<i64> = values.iter().flatten().copied().collect();
            sorted.sort_unstable();
            let n = sorted.len();
            let want = match n {
                0 => None,
                n if n % 2 == 1 => Some(sorted[n / 2]),
                n => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2),
            };
            let out = out.as_primitive::<Int64Type>();
            for g in 0..2 {
                proptest::prop_assert_eq!(out.is_valid(g).then(|| out.value(g)), want);
            }
        }
    }
}
