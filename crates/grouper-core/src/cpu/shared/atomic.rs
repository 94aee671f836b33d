//! Aggregate states as arrays of atomics, for the `shared` strategy: the word form each aggregate
//! declares in [`crate::agg`] ([`crate::agg::words`]), interpreted with hardware atomics (Karnagel
//! Table 1) exactly as GPU code generation compiles it — counts with `fetch_add`, exact sums as
//! word-wise adds with carry, Float64 sums with a compare-and-swap loop, MIN/MAX with
//! `fetch_min`/`fetch_max` on ordinals (128-bit decimals under a latch word). Aggregates without
//! a word form (MIN/MAX of strings) take striped locks around the scalar algebra. At the end the
//! words convert into the algebra's own states ([`to_accumulator`]), so finalization is shared
//! with every other strategy.

use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::Mutex;

use arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use arrow::datatypes::Float64Type;

use crate::agg::layout::{to_accumulator, AggLayout, Layout};
use crate::agg::words::{Field, Input, Op, ROWS_WORD};
use crate::agg::{new_accumulator, AggKind, AggregateSpec, GroupAccumulator};
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

/// Flips the sign bit: signed order becomes unsigned order, so signed MIN/MAX words use the
/// unsigned `fetch_min`/`fetch_max` (the stored form only; [`WordStates::into_groups`] flips
/// back).
#[inline(always)]
fn flip(w: u64) -> u64 {
    w ^ (1 << 63)
}

/// Whether `op`'s word is stored flipped.
fn flipped(op: Op) -> bool {
    matches!(op, Op::MinI64 | Op::MaxI64)
}

/// One aggregate's word fields as arrays of atomics, one array per word, each updated by its
/// [`Op`]. Measured on two threads (`SUM(v), COUNT(*)`, 2^22 rows, against the hand-written
/// atomic forms this replaced): one array with a group's words side by side, as the GPU's
/// global table keeps them, was 11% slower at 2^24 groups — every update pulls a sum's rarely
/// written high word into cache —, and one table for all aggregates slower still; one array per
/// word is even with the hand-written forms there, faster up to 2^10 groups, and 17% slower at
/// 2^16 (the seen flag's load; an atomic `or` instead was slower).
struct WordStates {
    layout: AggLayout,
    /// Word 0, the row count, is kept only for `COUNT(*)` (which has no field of its own); the
    /// stored words start at word `first`.
    first: usize,
    /// Word `first + w` of group `g` at `words[w][g]`.
    words: Vec<Vec<AtomicU64>>,
    /// The stored form of each stored word's identity.
    identities: Vec<u64>,
}

impl WordStates {
    fn new(layout: Layout) -> Option<Self> {
        let mut identities = layout.identities();
        let agg = layout.aggs.into_iter().next()?;
        for f in agg.fields.iter().filter(|f| flipped(f.op)) {
            identities[f.word] = flip(identities[f.word]);
        }
        let first = usize::from(!agg.fields.is_empty());
        Some(Self {
            first,
            words: (first..layout.words).map(|_| Vec::new()).collect(),
            identities: identities[first..].to_vec(),
            layout: agg,
        })
    }

    /// Folds `v` (the field's input: a value's ordinal, bits or exact integer) into group `g`.
    #[inline(always)]
    fn apply(&self, f: &Field, g: usize, v: i128) {
        let first = f.word - self.first;
        let at = |w: usize| &self.words[first + w][g];
        match f.op {
            Op::AddU64 => {
                at(0).fetch_add(v as u64, Relaxed);
            }
            Op::AddF64 => {
                let x = f64::from_bits(v as u64);
                let _ = at(0).fetch_update(Relaxed, Relaxed, |b| {
                    Some((f64::from_bits(b) + x).to_bits())
                });
            }
            Op::Wide { words, .. } => {
                // Word-wise add with carry: exact under any interleaving of threads.
                let top = if v < 0 { u64::MAX } else { 0 };
                let parts = [v as u64, (v >> 64) as u64, top];
                let mut carry = 0u64;
                for (i, &part) in parts.iter().enumerate().take(words) {
                    let add = part.wrapping_add(carry);
                    let c1 = u64::from(add < carry);
                    let mut c2 = 0;
                    if add != 0 {
                        let old = at(i).fetch_add(add, Relaxed);
                        c2 = u64::from(old.wrapping_add(add) < old);
                    }
                    carry = c1 + c2;
                }
            }
            Op::MinI64 => {
                at(0).fetch_min(flip(v as i64 as u64), Relaxed);
            }
            Op::MaxI64 => {
                at(0).fetch_max(flip(v as i64 as u64), Relaxed);
            }
            Op::MinU64 => {
                at(0).fetch_min(v as u64, Relaxed);
            }
            Op::MaxU64 => {
                at(0).fetch_max(v as u64, Relaxed);
            }
            Op::Seen => {
                if at(0).load(Relaxed) == 0 {
                    at(0).store(1, Relaxed);
                }
            }
            Op::MinI128 | Op::MaxI128 => {
                // No 128-bit atomics: compare and replace under the field's latch word.
                let latch = at(2);
                while latch.compare_exchange_weak(0, 1, Acquire, Relaxed).is_err() {
                    std::hint::spin_loop();
                }
                let cur =
                    (at(0).load(Relaxed) as u128 | (at(1).load(Relaxed) as u128) << 64) as i128;
                if (f.op == Op::MaxI128 && v > cur) || (f.op == Op::MinI128 && v < cur) {
                    at(0).store(v as u64, Relaxed);
                    at(1).store((v >> 64) as u64, Relaxed);
                }
                latch.store(0, Release);
            }
        }
    }
}

impl WordStates {
    /// Folds every valid row into its group, all fields of a row at once (a group's words are
    /// touched while they are in cache); `value(input, r)` is row `r`'s input to a field that
    /// reads the argument (`input` says which part: a pair's fields read different ones).
    #[inline(always)]
    fn fold(
        &self,
        nulls: Option<&arrow::buffer::NullBuffer>,
        gids: &[u32],
        value: impl Fn(Input, usize) -> i128,
    ) {
        each_valid(nulls, gids, |g, r| {
            for f in &self.layout.fields {
                let v = match f.input {
                    Input::One => 1,
                    input => value(input, r),
                };
                self.apply(f, g, v);
            }
        });
    }
}

impl AtomicAccumulator for WordStates {
    fn grow(&mut self, n: usize) {
        for (words, &init) in self.words.iter_mut().zip(&self.identities) {
            if n > words.len() {
                words.reserve(n - words.len());
                words.extend((words.len()..n).map(|_| AtomicU64::new(init)));
            }
        }
    }

    fn update(&self, gids: &[u32], input: Option<&ArrayRef>) -> Result<()> {
        if self.first == ROWS_WORD {
            // COUNT(*): the row count, one word per group.
            for &g in gids {
                self.words[0][g as usize].fetch_add(1, Relaxed);
            }
            return Ok(());
        }
        let input = input.ok_or_else(|| {
            GrouperError::InvalidInput(format!("{} needs input", self.layout.spec.kind))
        })?;
        if self.layout.spec.kind == AggKind::Corr {
            // A pair: each field adds the double its part or product gives.
            let (x, y, nulls) = crate::agg::corr::pair(Some(input))?;
            self.fold(nulls.as_ref(), gids, |f, r| {
                f.of_pair([x[r], y[r]]).unwrap_or(1.0).to_bits() as i128
            });
            return Ok(());
        }
        let nulls = input.logical_nulls();
        let nulls = nulls.as_ref();
        if self.layout.fields.iter().all(|f| f.input == Input::One) {
            // COUNT(x): the argument's validity is all it reads.
            self.fold(nulls, gids, |_, _| 1);
            return Ok(());
        }
        // The argument's input to its field, read in place: raw bits for a double sum,
        // otherwise the value's ordinal (the integer itself for integers and decimals).
        if self.layout.fields.iter().any(|f| f.op == Op::AddF64) {
            let a = crate::agg::downcast_input::<arrow::array::PrimitiveArray<Float64Type>>(
                Some(input),
                "sum",
            )?;
            let v = a.values();
            self.fold(nulls, gids, |_, r| v[r].to_bits() as i128);
            return Ok(());
        }
        if let Some(b) = input.as_boolean_opt() {
            self.fold(nulls, gids, |_, r| i128::from(b.value(r)));
            return Ok(());
        }
        with_ordinal_type!(input.data_type(), T => {
            let v = input.as_primitive::<T>().values();
            self.fold(nulls, gids, |_, r| v[r].to_ord());
            Ok(())
        }, _ => Err(GrouperError::UnsupportedType {
            what: "an atomic aggregate",
            data_type: input.data_type().clone(),
        }))
    }

    fn into_groups(self: Box<Self>, n: usize) -> Result<Box<dyn GroupAccumulator>> {
        let mut cols: Vec<Vec<u64>> = Vec::with_capacity(self.first + self.words.len());
        if self.first != ROWS_WORD {
            cols.push(vec![0; n]);
        }
        cols.extend(
            self.words
                .into_iter()
                .map(|w| w.into_iter().take(n).map(AtomicU64::into_inner).collect()),
        );
        for f in self.layout.fields.iter().filter(|f| flipped(f.op)) {
            cols[f.word].iter_mut().for_each(|w| *w = flip(*w));
        }
        to_accumulator(&self.layout, &cols)
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

/// The atomic form of one aggregate: its word form where it has one, else striped locks.
pub fn new_atomic_accumulator(spec: &AggregateSpec) -> Result<Box<dyn AtomicAccumulator>> {
    spec.output_type()?;
    if let Some(states) = Layout::new(std::slice::from_ref(spec))
        .ok()
        .and_then(WordStates::new)
    {
        return Ok(Box::new(states));
    }
    let stripes = (0..STRIPES)
        .map(|_| new_accumulator(spec).map(Mutex::new))
        .collect::<Result<_>>()?;
    Ok(Box::new(Striped {
        spec: spec.clone(),
        stripes,
    }))
}
