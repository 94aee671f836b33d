//! `SUM(x)`: state = (running sum, seen-a-value flag). Integers and decimals use checked addition
//! so that an overflow is an error, never a wrapped result; doubles add as IEEE does.

use std::marker::PhantomData;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, PrimitiveArray};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Float64Type, Int64Type, UInt64Type,
};

use super::{downcast_input, for_each_valid, Aggregate};
use crate::error::{GrouperError, Result};

/// Addition that reports overflow for the exact types and never fails for floats.
pub trait SumNative: Copy + Default + Send + Sync + 'static {
    /// `self + other`, or `None` on overflow.
    fn add_checked(self, other: Self) -> Option<Self>;
}

macro_rules! exact_sum_native {
    ($($t:ty),*) => {$(
        impl SumNative for $t {
            #[inline(always)]
            fn add_checked(self, other: Self) -> Option<Self> {
                self.checked_add(other)
            }
        }
    )*};
}
exact_sum_native!(i64, u64, i128);

impl SumNative for f64 {
    #[inline(always)]
    fn add_checked(self, other: Self) -> Option<Self> {
        Some(self + other)
    }
}

/// Per-group state of a SUM.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
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

/// SUM of Int64 (the type DataFusion casts every signed integer to).
pub type SumI64 = Sum<Int64Type>;
/// SUM of UInt64 (the type DataFusion casts every unsigned integer to).
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
    /// Scalar update: adds one value, failing on overflow.
    #[inline(always)]
    pub fn update(&self, state: &mut SumState<T::Native>, value: T::Native) -> Result<()> {
        state.sum = state
            .sum
            .add_checked(value)
            .ok_or_else(|| self.overflow())?;
        state.seen = true;
        Ok(())
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
    type State = SumState<T::Native>;

    fn init(&self) -> Self::State {
        SumState::default()
    }

    fn update_batch(
        &self,
        states: &mut [Self::State],
        gids: &[u32],
        input: Option<&ArrayRef>,
    ) -> Result<()> {
        let array = downcast_input::<PrimitiveArray<T>>(input, "sum")?;
        let values = array.values();
        for_each_valid(array.nulls(), gids, |g, row| {
            self.update(&mut states[g], values[row])
        })
    }

    fn merge(&self, state: &mut Self::State, other: &Self::State) -> Result<()> {
        if other.seen {
            self.update(state, other.sum)?;
        }
        Ok(())
    }

    fn finalize(&self, states: Vec<Self::State>) -> Result<ArrayRef> {
        let array: PrimitiveArray<T> = states
            .into_iter()
            .map(|s| s.seen.then_some(s.sum))
            .collect();
        Ok(Arc::new(array.with_data_type(self.output_type.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};

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
    fn integer_overflow_is_an_error() {
        let sum = SumI64::new(DataType::Int64);
        let mut states = vec![sum.init()];
        let input: ArrayRef = Arc::new(Int64Array::from(vec![i64::MAX, 1]));
        let err = sum
            .update_batch(&mut states, &[0, 0], Some(&input))
            .unwrap_err();
        assert!(matches!(err, GrouperError::Overflow { .. }), "{err}");
        // merge overflows the same way
        let mut a = SumState {
            sum: i64::MAX,
            seen: true,
        };
        assert!(sum.merge(&mut a, &SumState { sum: 1, seen: true }).is_err());
    }
}
