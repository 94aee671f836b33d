//! Aggregate states as arrays of atomics, for the `shared` strategy.
//!
//! Each form implements the same algebra as [`crate::agg`] with hardware atomics (Karnagel
//! Table 1): COUNT with `fetch_add`; exact SUMs (Int64, UInt64, Decimal128) as 128 bits in two
//! 64-bit words, the low word's carry added to the high word (the scheme the GPU uses); Float64 SUM
//! and AVG with a compare-and-swap loop; MIN/MAX of primitives with `fetch_min`/`fetch_max` on
//! order-preserving ordinals. Everything else (decimal, boolean and string MIN/MAX) takes striped
//! locks around the scalar algebra. At the end, states convert into the algebra's own
//! [`Groups`](crate::agg::Groups), so finalization is shared with every other strategy.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use arrow::array::{Array, ArrayRef, PrimitiveArray, UInt32Array};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Float64Type, Int64Type, UInt64Type,
};

use crate::agg::avg::AvgState;
use crate::agg::sum::SumState;
use crate::agg::{
    new_accumulator, AggKind, AggregateSpec, Avg, AvgDecimal, Count, CountStar, GroupAccumulator,
    Groups, MinMaxPrimitive, SumDecimal, SumF64, SumI64, SumU64,
};
use crate::error::{GrouperError, Result};
use crate::keys::ordinal::Ordinal;
use crate::with_ordinal_type;

/// Per-group states that many threads update at once.
pub trait AtomicAccumulator: Send + Sync {
    /// Grows to hold `n` groups (only between rounds, when no thread updates).
    fn grow(&mut self, n: usize);
    /// Folds row `i` of `input` into group `gids[i]`.
    fn update(&self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()>;
    /// The first `n` groups as the algebra's ordinary states.
    fn into_groups(self: Box<Self>, n: usize) -> Result<Box<dyn GroupAccumulator>>;
}

fn grow_atomics<T: Default>(v: &mut Vec<T>, n: usize) {
    if n > v.len() {
        v.resize_with(n, T::default);
    }
}

/// Calls `f(gid, row)` for every valid row (atomic variant of `agg::for_each_valid`).
#[inline]
fn each_valid(
    nulls: Option<&arrow::buffer::NullBuffer>,
    gids: &[u32],
    mut f: impl FnMut(usize, usize),
) {
    let _ = crate::agg::for_each_valid(nulls, gids, |g, r| {
        f(g, r);
        Ok(())
    });
}

/// COUNT(*) and COUNT(x).
struct AtomicCount {
    star: bool,
    counts: Vec<AtomicI64>,
}

impl AtomicAccumulator for AtomicCount {
    fn grow(&mut self, n: usize) {
        grow_atomics(&mut self.counts, n);
    }
    fn update(&self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()> {
        let nulls = if self.star {
            None
        } else {
            input.and_then(|a| a.logical_nulls())
        };
        each_valid(nulls.as_ref(), gids, |g, _| {
            self.counts[g].fetch_add(1, Relaxed);
        });
        Ok(())
    }
    fn into_groups(self: Box<Self>, n: usize) -> Result<Box<dyn GroupAccumulator>> {
        let states: Vec<i64> = self
            .counts
            .into_iter()
            .take(n)
            .map(|c| c.into_inner())
            .collect();
        Ok(if self.star {
            Box::new(Groups::from_states(CountStar, states))
        } else {
            Box::new(Groups::from_states(Count, states))
        })
    }
}

/// Exact 128-bit sums in two words: SUM of Int64/UInt64/Decimal128 and AVG of Decimal128.
struct WideSum {
    spec: AggregateSpec,
    lo: Vec<AtomicU64>,
    hi: Vec<AtomicI64>,
    count: Vec<AtomicI64>,
    overflow: AtomicBool,
}

impl WideSum {
    #[inline(always)]
    fn add(&self, g: usize, v: i128) {
        let (vl, vh) = (v as u64, (v >> 64) as i64);
        let old = self.lo[g].fetch_add(vl, Relaxed);
        let carry = old.overflowing_add(vl).1 as i64;
        let dh = vh + carry;
        if dh != 0 && self.hi[g].fetch_add(dh, Relaxed).overflowing_add(dh).1 {
            self.overflow.store(true, Relaxed);
        }
        self.count[g].fetch_add(1, Relaxed);
    }

    fn fold<T: ArrowPrimitiveType>(
        &self,
        gids: &[u32],
        input: Option<&ArrayRef>,
        widen: impl Fn(T::Native) -> i128,
    ) -> Result<()> {
        let a = crate::agg::downcast_input::<PrimitiveArray<T>>(input, "sum")?;
        let values = a.values();
        each_valid(a.nulls(), gids, |g, r| self.add(g, widen(values[r])));
        Ok(())
    }
}

impl AtomicAccumulator for WideSum {
    fn grow(&mut self, n: usize) {
        grow_atomics(&mut self.lo, n);
        grow_atomics(&mut self.hi, n);
        grow_atomics(&mut self.count, n);
    }
    fn update(&self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()> {
        match self.spec.input_type {
            Some(DataType::Int64) => self.fold::<Int64Type>(gids, input, |v| v as i128),
            Some(DataType::UInt64) => self.fold::<UInt64Type>(gids, input, |v| v as i128),
            _ => self.fold::<Decimal128Type>(gids, input, |v| v),
        }
    }
    fn into_groups(self: Box<Self>, n: usize) -> Result<Box<dyn GroupAccumulator>> {
        let output = self.spec.output_type()?;
        let overflow = GrouperError::Overflow {
            aggregate: self.spec.kind.name(),
            data_type: output.clone(),
        };
        if self.overflow.load(Relaxed) {
            return Err(overflow);
        }
        let totals: Vec<(i128, i64)> = (0..n)
            .map(|g| {
                let lo = self.lo[g].load(Relaxed) as i128;
                let hi = self.hi[g].load(Relaxed) as i128;
                ((hi << 64) | lo, self.count[g].load(Relaxed))
            })
            .collect();
        // SUM states are the exact 128-bit totals; finalize narrows them to the result type.
        let sums = || {
            totals
                .iter()
                .map(|&(sum, c)| SumState { sum, seen: c > 0 })
                .collect()
        };
        Ok(match (&self.spec.kind, &self.spec.input_type) {
            (AggKind::Avg, Some(DataType::Decimal128(_, s))) => {
                let states = totals
                    .iter()
                    .map(|&(sum, count)| AvgState { sum, count })
                    .collect();
                Box::new(Groups::from_states(AvgDecimal::new(*s, &output)?, states))
            }
            (_, Some(DataType::Int64)) => {
                Box::new(Groups::from_states(SumI64::new(output), sums()))
            }
            (_, Some(DataType::UInt64)) => {
                Box::new(Groups::from_states(SumU64::new(output), sums()))
            }
            _ => Box::new(Groups::from_states(SumDecimal::new(output), sums())),
        })
    }
}

/// SUM and AVG of Float64 with a compare-and-swap loop on the bits.
struct F64Sum {
    avg: bool,
    bits: Vec<AtomicU64>,
    count: Vec<AtomicI64>,
}

impl AtomicAccumulator for F64Sum {
    fn grow(&mut self, n: usize) {
        grow_atomics(&mut self.bits, n);
        grow_atomics(&mut self.count, n);
    }
    fn update(&self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()> {
        let a = crate::agg::downcast_input::<PrimitiveArray<Float64Type>>(input, "sum")?;
        let values = a.values();
        each_valid(a.nulls(), gids, |g, r| {
            let _ = self.bits[g].fetch_update(Relaxed, Relaxed, |b| {
                Some((f64::from_bits(b) + values[r]).to_bits())
            });
            self.count[g].fetch_add(1, Relaxed);
        });
        Ok(())
    }
    fn into_groups(self: Box<Self>, n: usize) -> Result<Box<dyn GroupAccumulator>> {
        let states = (0..n).map(|g| {
            (
                f64::from_bits(self.bits[g].load(Relaxed)),
                self.count[g].load(Relaxed),
            )
        });
        Ok(if self.avg {
            Box::new(Groups::from_states(
                Avg,
                states.map(|(sum, count)| AvgState { sum, count }).collect(),
            ))
        } else {
            let states = states
                .map(|(sum, c)| SumState { sum, seen: c > 0 })
                .collect();
            Box::new(Groups::from_states(SumF64::new(DataType::Float64), states))
        })
    }
}

/// MIN/MAX of a primitive whose ordinal fits 64 bits, with `fetch_min`/`fetch_max`.
struct OrdMinMax<T: ArrowPrimitiveType> {
    is_max: bool,
    data_type: DataType,
    /// Subtracted from ordinals so that UInt64's fit `i64`.
    bias: i128,
    best: Vec<AtomicI64>,
    seen: Vec<AtomicBool>,
    _t: PhantomData<fn() -> T>,
}

impl<T: ArrowPrimitiveType> AtomicAccumulator for OrdMinMax<T>
where
    T::Native: Ordinal,
{
    fn grow(&mut self, n: usize) {
        let init = if self.is_max { i64::MIN } else { i64::MAX };
        while self.best.len() < n {
            self.best.push(AtomicI64::new(init));
        }
        grow_atomics(&mut self.seen, n);
    }
    fn update(&self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()> {
        let a = crate::agg::downcast_input::<PrimitiveArray<T>>(input, "min/max")?;
        let values = a.values();
        each_valid(a.nulls(), gids, |g, r| {
            let v = (values[r].to_ord() - self.bias) as i64;
            if self.is_max {
                self.best[g].fetch_max(v, Relaxed);
            } else {
                self.best[g].fetch_min(v, Relaxed);
            }
            if !self.seen[g].load(Relaxed) {
                self.seen[g].store(true, Relaxed);
            }
        });
        Ok(())
    }
    fn into_groups(self: Box<Self>, n: usize) -> Result<Box<dyn GroupAccumulator>> {
        let states = (0..n)
            .map(|g| {
                self.seen[g]
                    .load(Relaxed)
                    .then(|| T::Native::from_ord(self.best[g].load(Relaxed) as i128 + self.bias))
            })
            .collect();
        Ok(Box::new(Groups::from_states(
            MinMaxPrimitive::<T>::new(self.is_max, self.data_type.clone()),
            states,
        )))
    }
}

/// Any aggregate, through the scalar algebra, with one lock per stripe of groups
/// (group `g` lives in stripe `g % STRIPES` at index `g / STRIPES`).
struct Striped {
    spec: AggregateSpec,
    stripes: Vec<Mutex<Box<dyn GroupAccumulator>>>,
}

const STRIPES: usize = 64;

impl AtomicAccumulator for Striped {
    fn grow(&mut self, n: usize) {
        for (s, m) in self.stripes.iter_mut().enumerate() {
            let len = n / STRIPES + usize::from(s < n % STRIPES);
            m.get_mut().unwrap_or_else(|p| p.into_inner()).resize(len);
        }
    }
    fn update(&self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()> {
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); STRIPES];
        for (r, &g) in gids.iter().enumerate() {
            rows[g as usize % STRIPES].push(r as u32);
        }
        for (s, rows) in rows.into_iter().enumerate() {
            if rows.is_empty() {
                continue;
            }
            let local: Vec<u32> = rows
                .iter()
                .map(|&r| gids[r as usize] / STRIPES as u32)
                .collect();
            let taken = input
                .map(|a| arrow::compute::take(a.as_ref(), &UInt32Array::from(rows), None))
                .transpose()?;
            let mut acc = self.stripes[s].lock().unwrap_or_else(|p| p.into_inner());
            acc.update(&local, taken.as_ref())?;
        }
        Ok(())
    }
    fn into_groups(self: Box<Self>, n: usize) -> Result<Box<dyn GroupAccumulator>> {
        let mut out = new_accumulator(&self.spec)?;
        out.resize(n);
        for (s, m) in self.stripes.into_iter().enumerate() {
            let acc = m.into_inner().unwrap_or_else(|p| p.into_inner());
            let len = acc.len().min(n.saturating_sub(s).div_ceil(STRIPES));
            let src: Vec<u32> = (0..len as u32).collect();
            let dst: Vec<u32> = src.iter().map(|&i| i * STRIPES as u32 + s as u32).collect();
            out.merge(acc.as_ref(), &src, &dst)?;
        }
        Ok(out)
    }
}

/// The atomic form of one aggregate.
pub fn new_atomic_accumulator(spec: &AggregateSpec) -> Result<Box<dyn AtomicAccumulator>> {
    spec.output_type()?;
    let input = spec.input_type.clone().unwrap_or(DataType::Null);
    let wide = || -> Box<dyn AtomicAccumulator> {
        Box::new(WideSum {
            spec: spec.clone(),
            lo: Vec::new(),
            hi: Vec::new(),
            count: Vec::new(),
            overflow: AtomicBool::new(false),
        })
    };
    let striped = || -> Result<Box<dyn AtomicAccumulator>> {
        let stripes = (0..STRIPES)
            .map(|_| new_accumulator(spec).map(Mutex::new))
            .collect::<Result<_>>()?;
        Ok(Box::new(Striped {
            spec: spec.clone(),
            stripes,
        }))
    };
    Ok(match (spec.kind, &input) {
        (AggKind::CountStar, _) => Box::new(AtomicCount {
            star: true,
            counts: Vec::new(),
        }),
        (AggKind::Count, _) => Box::new(AtomicCount {
            star: false,
            counts: Vec::new(),
        }),
        (AggKind::Sum | AggKind::Avg, DataType::Float64) => Box::new(F64Sum {
            avg: spec.kind == AggKind::Avg,
            bits: Vec::new(),
            count: Vec::new(),
        }),
        (AggKind::Sum, _) | (AggKind::Avg, DataType::Decimal128(_, _)) => wide(),
        (AggKind::Min | AggKind::Max, DataType::Decimal128(_, _)) => striped()?,
        (AggKind::Min | AggKind::Max, t) => {
            let is_max = spec.kind == AggKind::Max;
            let bias = if *t == DataType::UInt64 {
                1i128 << 63
            } else {
                0
            };
            with_ordinal_type!(t, T => {
                Box::new(OrdMinMax::<T> { is_max, data_type: t.clone(), bias, best: Vec::new(), seen: Vec::new(), _t: PhantomData }) as Box<dyn AtomicAccumulator>
            }, _ => striped()?)
        }
        (AggKind::Avg, t) => {
            return Err(GrouperError::UnsupportedType {
                what: "avg",
                data_type: t.clone(),
            })
        }
    })
}
