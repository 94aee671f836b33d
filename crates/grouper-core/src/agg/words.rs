//! The aggregate algebra's *word* vocabulary: a state is a few 64-bit words, each combined by
//! one atomic-friendly operation ([`Op`]); the same operation serves `update` (the word built
//! from one row's value) and `merge` (the word of another partial state). Aggregates declare
//! their fields in these terms ([`super::layout`] numbers them); `grouper-gpu`'s code
//! generation maps each [`Op`] to one CUDA function, and the CPU's `shared` strategy applies
//! each with atomics ([`crate::cpu::shared::atomic`]).
//!
//! Integer sums accumulate in 128 bits and decimal sums in 192 (Karnagel Table 1 has no 128-bit
//! atomics: a word-wise add with carry is exact under any interleaving, since addition commutes
//! and every carry is added once). The final sums are checked against the result type, so an
//! overflow is an error exactly as in the scalar algebra.

use arrow::datatypes::DataType;

use super::AggregateSpec;
use crate::error::GrouperError;

/// How one field's words combine (update and merge alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Unsigned 64-bit add (counts).
    AddU64,
    /// IEEE double add.
    AddF64,
    /// Multi-word two's-complement add with carry; the input is sign-extended when `signed`.
    Wide {
        /// Words (2 or 3), least significant first.
        words: usize,
        /// Whether inputs are signed.
        signed: bool,
    },
    /// Signed 64-bit minimum.
    MinI64,
    /// Signed 64-bit maximum.
    MaxI64,
    /// Unsigned 64-bit minimum.
    MinU64,
    /// Unsigned 64-bit maximum.
    MaxU64,
    /// Set to 1 (a flag: a non-NULL value was seen).
    Seen,
    /// 128-bit signed minimum (decimals wider than 18 digits): words low, high, and a lock
    /// (no 128-bit atomics, so the compare-and-replace runs under a per-slot latch).
    MinI128,
    /// 128-bit signed maximum, as [`Op::MinI128`].
    MaxI128,
}

impl Op {
    /// Words the field occupies.
    pub fn width(self) -> usize {
        match self {
            Op::Wide { words, .. } => words,
            Op::MinI128 | Op::MaxI128 => 3,
            _ => 1,
        }
    }

    /// The identity (the empty state) of word `w` of the field.
    pub fn identity(self, w: usize) -> u64 {
        match (self, w) {
            (Op::MinI64, _) => i64::MAX as u64,
            (Op::MaxI64, _) => i64::MIN as u64,
            (Op::MinU64, _) => u64::MAX,
            (Op::MinI128, 0) => u64::MAX,
            (Op::MinI128, 1) => i64::MAX as u64,
            (Op::MaxI128, 1) => i64::MIN as u64,
            _ => 0,
        }
    }
}

/// What a field's update reads from the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// The constant 1 (counts, flags).
    One,
    /// The argument converted to the field's representation.
    Value,
    /// Part `i` of a pair argument ([`super::corr::pair_type`]), as a double.
    Part(u8),
    /// The product of parts `i` and `j` of a pair argument, as a double.
    Product(u8, u8),
}

impl Input {
    /// Whether the field reads the row's argument (anything but the constant 1).
    pub fn reads_argument(self) -> bool {
        self != Input::One
    }

    /// The double a [`Input::Part`] or [`Input::Product`] field adds for a row whose pair is
    /// `v`; `None` for the other inputs.
    #[inline(always)]
    pub fn of_pair(self, v: [f64; 2]) -> Option<f64> {
        let part = |i: u8| v[usize::from(i & 1)];
        match self {
            Input::Part(i) => Some(part(i)),
            Input::Product(i, j) => Some(part(i) * part(j)),
            Input::One | Input::Value => None,
        }
    }
}

/// One field of an aggregate's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// How it combines.
    pub op: Op,
    /// What the update adds.
    pub input: Input,
    /// Index of its first word in the table.
    pub word: usize,
}

/// The word of rows per group.
pub const ROWS_WORD: usize = 0;

/// Sign- or zero-extended multi-word value as an i128 check: the words of a wide sum, least
/// significant first, as a 192-bit two's-complement number narrowed to `i128` if it fits.
fn wide_to_i128(words: &[u64]) -> Option<i128> {
    let lo = words[0] as u128 | (words.get(1).copied().unwrap_or(0) as u128) << 64;
    let v = lo as i128;
    match words.get(2) {
        None => Some(v),
        Some(&top) => {
            let sign_ext = if v < 0 { u64::MAX } else { 0 };
            (top == sign_ext).then_some(v)
        }
    }
}

pub(crate) fn overflow(spec: &AggregateSpec) -> GrouperError {
    GrouperError::Overflow {
        aggregate: spec.kind.name(),
        data_type: spec.output_type().unwrap_or(DataType::Null),
    }
}

/// One aggregate's fields in a table's words.
pub(crate) struct FieldWords<'a> {
    /// The aggregate's fields.
    pub(crate) fields: &'a [Field],
    /// Word `w` of group `g` at `cols[w][g]`.
    pub(crate) cols: &'a [Vec<u64>],
}

impl FieldWords<'_> {
    /// Groups in the table.
    pub(crate) fn groups(&self) -> usize {
        self.cols[ROWS_WORD].len()
    }

    /// Field `i`'s (first) word of every group.
    pub(crate) fn word(&self, i: usize) -> &[u64] {
        &self.cols[self.fields[i].word]
    }

    /// Field `i`'s (up to three) words of group `g`, least significant first, zero beyond
    /// its width.
    pub(crate) fn wide(&self, i: usize, g: usize) -> [u64; 3] {
        let f = self.fields[i];
        let mut out = [0; 3];
        for (w, o) in out.iter_mut().enumerate().take(f.op.width()) {
            *o = self.cols[f.word + w][g];
        }
        out
    }

    /// Field `i` (a multi-word sum) of group `g` as an `i128`, `None` when it does not fit.
    pub(crate) fn exact(&self, i: usize, g: usize) -> Option<i128> {
        let w = self.wide(i, g);
        wide_to_i128(&w[..self.fields[i].op.width().min(3)])
    }

    /// Whether field `i` (a [`Op::Seen`] flag) is set for group `g`.
    pub(crate) fn seen(&self, i: usize, g: usize) -> bool {
        self.word(i)[g] != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_words_narrow_exactly() {
        let words = |v: i128| {
            let top = if v < 0 { u64::MAX } else { 0 };
            vec![v as u64, (v >> 64) as u64, top]
        };
        for v in [0i128, 1, -1, i128::MAX, i128::MIN, 12345678901234567890123] {
            assert_eq!(wide_to_i128(&words(v)), Some(v));
        }
        // 2^127 does not fit i128
        assert_eq!(wide_to_i128(&[0, 1 << 63, 0]), None);
        assert_eq!(wide_to_i128(&[5, 0]), Some(5));
    }
}
