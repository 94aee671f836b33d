//! `MIN(x)` / `MAX(x)`: state = the best value so far (or none); update keeps the better of the
//! two; merge is the same comparison; finalize emits NULL for groups that saw no value.
//! Floats compare in IEEE total order (NaN above +inf), as Arrow's kernels do. Strings compare
//! byte-wise, which is code-point order for UTF-8.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, BooleanArray, PrimitiveArray};
use arrow::datatypes::{ArrowNativeTypeOp, ArrowPrimitiveType, DataType};

use super::columns::nth;
use super::words::{FieldWords, Input, Op};
use super::{downcast_input, for_each_valid, Aggregate};
use super::{AggKind, AggregateSpec, GroupAccumulator, Groups};
use crate::error::{GrouperError, Result};
use crate::keys::ordinal::Ordinal;
use crate::strings::{string_array, ByteColumn};
use crate::with_ordinal_type;
use arrow::datatypes::Decimal128Type;

/// Whether MIN/MAX handle arguments of this type.
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
            | Date32
            | Date64
            | Timestamp(_, _)
            | Time32(_)
            | Time64(_)
            | Boolean
            | Utf8
            | LargeUtf8
            | Utf8View
    )
}

/// Keeps `candidate` in `state` when it is better (smaller for MIN, larger for MAX).
#[inline(always)]
pub fn keep_better<V: Clone, Q: ?Sized + ToOwnedInto<V>>(
    state: &mut Option<V>,
    candidate: &Q,
    is_max: bool,
    cmp: impl Fn(&Q, &V) -> Ordering,
) {
    let replace = match state {
        None => true,
        Some(cur) => {
            let o = cmp(candidate, cur);
            if is_max {
                o == Ordering::Greater
            } else {
                o == Ordering::Less
            }
        }
    };
    if replace {
        *state = Some(candidate.to_owned_into());
    }
}

/// Conversion of a borrowed candidate into the owned state value.
pub trait ToOwnedInto<V> {
    /// The owned copy.
    fn to_owned_into(&self) -> V;
}

impl<T: Copy> ToOwnedInto<T> for T {
    fn to_owned_into(&self) -> T {
        *self
    }
}

impl ToOwnedInto<Box<[u8]>> for [u8] {
    fn to_owned_into(&self) -> Box<[u8]> {
        self.into()
    }
}

/// MIN or MAX over a primitive Arrow type (integers, floats, decimals, dates, times).
#[derive(Debug, Clone)]
pub struct MinMaxPrimitive<T: ArrowPrimitiveType> {
    is_max: bool,
    data_type: DataType,
    _t: PhantomData<fn() -> T>,
}

impl<T: ArrowPrimitiveType> MinMaxPrimitive<T> {
    /// MIN (`is_max == false`) or MAX over values of `data_type`.
    pub fn new(is_max: bool, data_type: DataType) -> Self {
        Self {
            is_max,
            data_type,
            _t: PhantomData,
        }
    }

    /// Scalar update.
    #[inline(always)]
    pub fn update(&self, state: &mut Option<T::Native>, value: T::Native) {
        keep_better(state, &value, self.is_max, |a, b| a.compare(*b));
    }
}

impl<T: ArrowPrimitiveType> Aggregate for MinMaxPrimitive<T> {
    type State = Option<T::Native>;
    fn init(&self) -> Self::State {
        None
    }
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let array = downcast_input::<PrimitiveArray<T>>(input, "min/max")?;
        let values = array.values();
        match (array.nulls().filter(|n| n.null_count() > 0), self.is_max) {
            (None, true) => fold_best::<T, true>(states, gids, values),
            (None, false) => fold_best::<T, false>(states, gids, values),
            (Some(_), _) => for_each_valid(array.nulls(), gids, |g, row| {
                self.update(&mut states[g], values[row]);
                Ok(())
            })?,
        }
        Ok(())
    }
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        if let Some(v) = other {
            self.update(state, *v);
        }
        Ok(())
    }
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        let array: PrimitiveArray<T> = states.into_iter().collect();
        Ok(Arc::new(array.with_data_type(self.data_type.clone())))
    }
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        let array: PrimitiveArray<T> = rows.iter().map(|&r| states[r as usize]).collect();
        vec![Arc::new(array)]
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        let array = downcast_input::<PrimitiveArray<T>>(Some(nth(columns, 0)?), "min/max")?;
        Ok(array.iter().collect())
    }
}

/// MIN (`MAX` false) or MAX of every value of a column without NULLs into its group's state,
/// without a branch a row: the state's value, or the row's own for a group not seen yet, and
/// the better of it and the row's kept by a select. [`keep_better`]'s two branches a row (seen?
/// better?) and the MIN-or-MAX test cost db-benchmark q7 (MAX and MIN by 100,000 strings, 1e7
/// rows in memory, H200 host) 4-16% of its time under grouper's CPU at 2 to 16 threads
/// (`bench/results/groupby-h200-threads-minmax.json`).
#[inline]
fn fold_best<T: ArrowPrimitiveType, const MAX: bool>(
    states: &mut [Option<T::Native>],
    gids: &[u32],
    values: &[T::Native],
) {
    debug_assert_eq!(gids.len(), values.len(), "a group id a row");
    for (&g, &v) in gids.iter().zip(values) {
        let state = &mut states[g as usize];
        let cur = state.unwrap_or(v);
        let better = if MAX { v.is_gt(cur) } else { v.is_lt(cur) };
        *state = Some(if better { v } else { cur });
    }
}

/// MIN or MAX over booleans (false < true).
#[derive(Debug, Clone, Copy)]
pub struct MinMaxBool {
    is_max: bool,
}

impl MinMaxBool {
    /// MIN (`is_max == false`) or MAX.
    pub fn new(is_max: bool) -> Self {
        Self { is_max }
    }
}

impl Aggregate for MinMaxBool {
    type State = Option<bool>;
    fn init(&self) -> Self::State {
        None
    }
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let array = downcast_input::<BooleanArray>(input, "min/max")?;
        for_each_valid(array.nulls(), gids, |g, row| {
            keep_better(&mut states[g], &array.value(row), self.is_max, |a, b| {
                a.cmp(b)
            });
            Ok(())
        })
    }
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        if let Some(v) = other {
            keep_better(state, v, self.is_max, |a, b| a.cmp(b));
        }
        Ok(())
    }
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        Ok(Arc::new(states.into_iter().collect::<BooleanArray>()))
    }
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        let array: BooleanArray = rows.iter().map(|&r| states[r as usize]).collect();
        vec![Arc::new(array)]
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        let array = downcast_input::<BooleanArray>(Some(nth(columns, 0)?), "min/max")?;
        Ok(array.iter().collect())
    }
}

/// MIN or MAX over strings (Utf8, LargeUtf8, Utf8View); the result has the input's type.
#[derive(Debug, Clone)]
pub struct MinMaxBytes {
    is_max: bool,
    data_type: DataType,
}

impl MinMaxBytes {
    /// MIN (`is_max == false`) or MAX over strings of `data_type`.
    pub fn new(is_max: bool, data_type: DataType) -> Self {
        Self { is_max, data_type }
    }
}

impl Aggregate for MinMaxBytes {
    type State = Option<Box<[u8]>>;
    fn init(&self) -> Self::State {
        None
    }
    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let array =
            input.ok_or_else(|| GrouperError::InvalidInput("min/max needs input".into()))?;
        let col = ByteColumn::new(array, "min/max")?;
        for (r, &g) in gids.iter().enumerate() {
            if let Some(v) = col.get(r) {
                keep_better(&mut states[g as usize], v, self.is_max, |a, b| a.cmp(&**b));
            }
        }
        Ok(())
    }
    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        if let Some(v) = other {
            keep_better(state, &**v, self.is_max, |a, b| a.cmp(&**b));
        }
        Ok(())
    }
    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        string_array(&self.data_type, states.iter().map(|s| s.as_deref()))
    }
    /// As binary: the saved bytes are the state's own, whatever the string type.
    fn save(&self, states: &[Self::State], rows: &[u32]) -> Vec<ArrayRef> {
        let array: BinaryArray = rows
            .iter()
            .map(|&r| states[r as usize].as_deref())
            .collect();
        vec![Arc::new(array)]
    }
    fn load(&self, columns: &[ArrayRef]) -> Result<Vec<Self::State>> {
        let array = downcast_input::<BinaryArray>(Some(nth(columns, 0)?), "min/max")?;
        Ok(array.iter().map(|v| v.map(Box::from)).collect())
    }
}

/// `MIN(x)`/`MAX(x)` in words: the best value's ordinal — one word, signed or unsigned, where it
/// fits 64 bits; a 128-bit value and a latch word for decimals over 18 digits — and a flag that
/// a value was seen. Strings have no word form.
pub(super) fn fields(is_max: bool, input: &DataType) -> Option<Vec<(Op, Input)>> {
    let best = match (input, ordinal_word(input)) {
        (DataType::Decimal128(p, _), _) if *p > 18 => match is_max {
            true => Op::MaxI128,
            false => Op::MinI128,
        },
        (_, Some(unsigned)) => match (is_max, unsigned) {
            (false, false) => Op::MinI64,
            (true, false) => Op::MaxI64,
            (false, true) => Op::MinU64,
            (true, true) => Op::MaxU64,
        },
        (_, None) => return None,
    };
    Some(vec![(best, Input::Value), (Op::Seen, Input::One)])
}

/// Whether MIN/MAX of `t` fits a 64-bit ordinal word, and whether that word is unsigned.
fn ordinal_word(t: &DataType) -> Option<bool> {
    match t {
        DataType::UInt64 | DataType::Boolean => Some(true),
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::Float32
        | DataType::Float64
        | DataType::Date32
        | DataType::Date64 => Some(false),
        DataType::Decimal128(p, _) if *p <= 18 => Some(false),
        _ => None,
    }
}

/// `MIN(x)`/`MAX(x)`'s states from its words.
pub(super) fn from_words(
    spec: &AggregateSpec,
    words: &FieldWords,
) -> Result<Box<dyn GroupAccumulator>> {
    let is_max = spec.kind == AggKind::Max;
    let t = spec.input_type.clone().unwrap_or(DataType::Null);
    let values = words.word(0);
    let seen = words.word(1);
    let unsigned = ordinal_word(&t) == Some(true);
    fn prim<T: ArrowPrimitiveType>(
        is_max: bool,
        t: &DataType,
        states: Vec<Option<T::Native>>,
    ) -> Box<dyn GroupAccumulator> {
        Box::new(Groups::from_states(
            MinMaxPrimitive::<T>::new(is_max, t.clone()),
            states,
        ))
    }
    if let DataType::Decimal128(p, _) = t {
        if p > 18 {
            let states = (0..words.groups())
                .map(|g| {
                    let w = words.wide(0, g);
                    words
                        .seen(1, g)
                        .then(|| (w[0] as u128 | (w[1] as u128) << 64) as i128)
                })
                .collect();
            return Ok(prim::<Decimal128Type>(is_max, &t, states));
        }
    }
    if t == DataType::Boolean {
        let states = values
            .iter()
            .zip(seen)
            .map(|(&v, &s)| (s != 0).then_some(v != 0))
            .collect();
        return Ok(Box::new(Groups::from_states(
            MinMaxBool::new(is_max),
            states,
        )));
    }
    let ord = |v: u64| {
        if unsigned {
            v as i128
        } else {
            v as i64 as i128
        }
    };
    with_ordinal_type!(&t, T => {
        let states = values
            .iter()
            .zip(seen)
            .map(|(&v, &s)| (s != 0).then(|| <T as ArrowPrimitiveType>::Native::from_ord(ord(v))))
            .collect();
        Ok(prim::<T>(is_max, &t, states))
    }, _ => Err(GrouperError::UnsupportedType {
        what: "min/max in words",
        data_type: t.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Float64Array, StringViewArray};
    use arrow::datatypes::Float64Type;

    #[test]
    fn float_min_max_use_total_order() {
        let max = MinMaxPrimitive::<Float64Type>::new(true, DataType::Float64);
        let min = MinMaxPrimitive::<Float64Type>::new(false, DataType::Float64);
        let input: ArrayRef = Arc::new(Float64Array::from(vec![1.0, f64::NAN, -3.0]));
        let (mut a, mut b) = (vec![None], vec![None]);
        max.update_batch(&mut a, &[0, 0, 0], Some(&input)).unwrap();
        min.update_batch(&mut b, &[0, 0, 0], Some(&input)).unwrap();
        assert!(a[0].unwrap().is_nan());
        assert_eq!(b[0], Some(-3.0));
    }

    /// The column fold without NULLs ([`fold_best`]) keeps what the scalar update keeps row by
    /// row, groups not seen staying `None`: integers, and floats with NaN, ±0 and infinities
    /// (total order tells -0 from +0 and puts NaN above +inf).
    fn fold_equals_scalar<T: ArrowPrimitiveType>(values: Vec<T::Native>, gids: Vec<u32>)
    where
        PrimitiveArray<T>: From<Vec<T::Native>>,
    {
        let input: ArrayRef = Arc::new(PrimitiveArray::<T>::from(values.clone()));
        for is_max in [false, true] {
            let agg = MinMaxPrimitive::<T>::new(is_max, T::DATA_TYPE);
            let mut folded = vec![None; 9];
            agg.update_batch(&mut folded, &gids, Some(&input)).unwrap();
            let mut scalar = vec![None; 9];
            for (&g, &v) in gids.iter().zip(&values) {
                agg.update(&mut scalar[g as usize], v);
            }
            let bits = |s: &[Option<T::Native>]| -> Vec<Option<String>> {
                s.iter().map(|v| v.map(|v| format!("{v:?}"))).collect()
            };
            assert_eq!(bits(&folded), bits(&scalar), "is_max {is_max}");
        }
    }

    proptest::proptest! {
        #[test]
        fn folds_without_nulls_equal_the_scalar_update(
            rows in proptest::collection::vec((0u32..8, proptest::prelude::any::<i32>(), 0usize..8), 0..200)
        ) {
            let gids: Vec<u32> = rows.iter().map(|r| r.0).collect();
            let ints: Vec<i32> = rows.iter().map(|r| r.1).collect();
            fold_equals_scalar::<arrow::datatypes::Int32Type>(ints, gids.clone());
            let specials = [f64::NAN, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, -1.5, 2.5, 1e300];
            let floats: Vec<f64> = rows.iter().map(|r| specials[r.2]).collect();
            fold_equals_scalar::<Float64Type>(floats, gids);
        }
    }

    #[test]
    fn string_min_max_keep_the_input_type() {
        let input: ArrayRef = Arc::new(StringViewArray::from(vec![
            Some("pear"),
            None,
            Some("apple"),
            Some("zebra-long-string-beyond-twelve-bytes"),
        ]));
        for (is_max, want) in [
            (false, "apple"),
            (true, "zebra-long-string-beyond-twelve-bytes"),
        ] {
            let agg = MinMaxBytes::new(is_max, DataType::Utf8View);
            let mut states = vec![None, None];
            agg.update_batch(&mut states, &[0, 0, 0, 0], Some(&input))
                .unwrap();
            let out = agg.finalize(states).unwrap();
            let out = out.as_string_view();
            assert_eq!(out.value(0), want);
            assert!(out.is_null(1));
        }
    }
}
