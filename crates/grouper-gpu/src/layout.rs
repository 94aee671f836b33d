//! The aggregate algebra in the GPU's terms: every state is a few 64-bit *words*, each combined
//! by one atomic-friendly operation, and the same operation serves `update` (the word built
//! from one row's value) and `merge` (the word of another partial state).
//!
//! ```text
//!  word 0 of every table: rows (add)  — presence of a group, and COUNT(*)
//!  COUNT(x)          count (add)
//!  SUM int / uint    2-word 128-bit sum (add with carry)          + seen
//!  SUM decimal       3-word 192-bit sum (add with carry)          + seen
//!  SUM float         f64 sum (atomic add)                         + seen
//!  AVG float         f64 sum, count
//!  AVG decimal       3-word sum, count
//!  MIN/MAX           ordinal as i64 (or u64) (atomic min/max)     + seen
//! ```
//!
//! Integer sums accumulate in 128 bits and decimal sums in 192 (Karnagel Table 1 has no 128-bit
//! atomics: a word-wise add with carry is exact under any interleaving, since addition commutes
//! and every carry is added once). The host checks the final sums against the result type, so an
//! overflow is an error exactly as on the CPU. After the kernel, [`to_accumulator`] turns the
//! words back into the CPU's states, and the CPU's `finalize` produces the SQL result: one
//! algebra, one finalize.

use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type,
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};

use grouper_core::agg::avg::AvgState;
use grouper_core::agg::sum::SumState;
use grouper_core::agg::{
    AggKind, AggregateSpec, Avg, AvgDecimal, Count, CountStar, GroupAccumulator, Groups,
    MinMaxBool, MinMaxPrimitive, SumDecimal, SumF64, SumI64, SumU64,
};
use grouper_core::error::{GrouperError, Result};
use grouper_core::keys::ordinal::Ordinal;

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

    /// Words an update reads from the row.
    pub fn inputs(self) -> usize {
        match self {
            Op::MinI128 | Op::MaxI128 => 2,
            op => op.width(),
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

/// The word layout of one aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct AggLayout {
    /// The aggregate.
    pub spec: AggregateSpec,
    /// Its fields (none for `COUNT(*)`, which reads word 0).
    pub fields: Vec<Field>,
}

/// The word layout of a whole query: word 0 counts rows, then each aggregate's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// One per aggregate, in query order.
    pub aggs: Vec<AggLayout>,
    /// Total words per group.
    pub words: usize,
}

/// The word of rows per group.
pub const ROWS_WORD: usize = 0;

fn gpu_unsupported(spec: &AggregateSpec) -> GrouperError {
    GrouperError::Unsupported(format!(
        "{}({}) on the GPU",
        spec.kind,
        spec.input_type
            .as_ref()
            .map_or("*".to_string(), |t| t.to_string())
    ))
}

/// Whether MIN/MAX of `t` fits a 64-bit ordinal word, and whether that word is unsigned.
fn min_max_word(t: &DataType) -> Option<bool> {
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

impl Layout {
    /// The layout of `aggs`, or [`GrouperError::Unsupported`] for an aggregate the GPU does not
    /// run (MIN/MAX of strings or of decimals wider than 18 digits).
    pub fn new(aggs: &[AggregateSpec]) -> Result<Self> {
        let mut next = 1;
        let mut out = Vec::with_capacity(aggs.len());
        for spec in aggs {
            spec.output_type()?;
            let input = spec.input_type.clone().unwrap_or(DataType::Null);
            let ops: Vec<(Op, Input)> = match (spec.kind, &input) {
                (AggKind::CountStar, _) => vec![],
                (AggKind::Count, _) => vec![(Op::AddU64, Input::One)],
                (AggKind::Sum, DataType::Int64) => vec![
                    (
                        Op::Wide {
                            words: 2,
                            signed: true,
                        },
                        Input::Value,
                    ),
                    (Op::Seen, Input::One),
                ],
                (AggKind::Sum, DataType::UInt64) => vec![
                    (
                        Op::Wide {
                            words: 2,
                            signed: false,
                        },
                        Input::Value,
                    ),
                    (Op::Seen, Input::One),
                ],
                (AggKind::Sum, DataType::Decimal128(..)) => vec![
                    (
                        Op::Wide {
                            words: 3,
                            signed: true,
                        },
                        Input::Value,
                    ),
                    (Op::Seen, Input::One),
                ],
                (AggKind::Sum, DataType::Float64) => {
                    vec![(Op::AddF64, Input::Value), (Op::Seen, Input::One)]
                }
                (AggKind::Avg, DataType::Float64) => {
                    vec![(Op::AddF64, Input::Value), (Op::AddU64, Input::One)]
                }
                (AggKind::Avg, DataType::Decimal128(..)) => vec![
                    (
                        Op::Wide {
                            words: 3,
                            signed: true,
                        },
                        Input::Value,
                    ),
                    (Op::AddU64, Input::One),
                ],
                (AggKind::Min | AggKind::Max, DataType::Decimal128(p, _)) if *p > 18 => {
                    let op = if spec.kind == AggKind::Max {
                        Op::MaxI128
                    } else {
                        Op::MinI128
                    };
                    vec![(op, Input::Value), (Op::Seen, Input::One)]
                }
                (AggKind::Min | AggKind::Max, t) => {
                    let unsigned = min_max_word(t).ok_or_else(|| gpu_unsupported(spec))?;
                    let op = match (spec.kind == AggKind::Max, unsigned) {
                        (false, false) => Op::MinI64,
                        (true, false) => Op::MaxI64,
                        (false, true) => Op::MinU64,
                        (true, true) => Op::MaxU64,
                    };
                    vec![(op, Input::Value), (Op::Seen, Input::One)]
                }
                _ => return Err(gpu_unsupported(spec)),
            };
            let fields = ops
                .into_iter()
                .map(|(op, input)| {
                    let f = Field {
                        op,
                        input,
                        word: next,
                    };
                    next += op.width();
                    f
                })
                .collect();
            out.push(AggLayout {
                spec: spec.clone(),
                fields,
            });
        }
        Ok(Layout {
            aggs: out,
            words: next,
        })
    }

    /// The identity of every word, in word order.
    pub fn identities(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.words];
        for f in self.aggs.iter().flat_map(|a| &a.fields) {
            for w in 0..f.op.width() {
                out[f.word + w] = f.op.identity(w);
            }
        }
        out
    }

    /// Every field, with word 0's row count first.
    pub fn all_fields(&self) -> Vec<Field> {
        let mut out = vec![Field {
            op: Op::AddU64,
            input: Input::One,
            word: ROWS_WORD,
        }];
        out.extend(self.aggs.iter().flat_map(|a| a.fields.iter().copied()));
        out
    }
}

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

fn overflow(spec: &AggregateSpec) -> GrouperError {
    GrouperError::Overflow {
        aggregate: spec.kind.name(),
        data_type: spec.output_type().unwrap_or(DataType::Null),
    }
}

/// One group's words of the table (`word(w)`), converted into the CPU accumulator of `agg`
/// for all groups at once. `rows` and `cols[w][g]` come from the table read back.
pub fn to_accumulator(agg: &AggLayout, cols: &[Vec<u64>]) -> Result<Box<dyn GroupAccumulator>> {
    let spec = &agg.spec;
    let out = spec.output_type()?;
    let n = cols[ROWS_WORD].len();
    let col = |i: usize| &cols[agg.fields[i].word];
    let wide = |i: usize, g: usize| -> Vec<u64> {
        let f = agg.fields[i];
        (0..f.op.width()).map(|w| cols[f.word + w][g]).collect()
    };
    let seen = |i: usize, g: usize| col(i)[g] != 0;
    let input = spec.input_type.clone().unwrap_or(DataType::Null);
    Ok(match (spec.kind, &input) {
        (AggKind::CountStar, _) => Box::new(Groups::from_states(
            CountStar,
            cols[ROWS_WORD].iter().map(|&c| c as i64).collect(),
        )),
        (AggKind::Count, _) => Box::new(Groups::from_states(
            Count,
            col(0).iter().map(|&c| c as i64).collect(),
        )),
        (AggKind::Sum, DataType::Int64) => {
            let states = (0..n)
                .map(|g| {
                    // The exact total; finalize narrows it to Int64 (or reports overflow).
                    let sum = wide_to_i128(&wide(0, g)).ok_or_else(|| overflow(spec))?;
                    Ok(SumState {
                        sum,
                        seen: seen(1, g),
                    })
                })
                .collect::<Result<_>>()?;
            Box::new(Groups::from_states(SumI64::new(out), states))
        }
        (AggKind::Sum, DataType::UInt64) => {
            let states = (0..n)
                .map(|g| {
                    let w = wide(0, g);
                    if w[1] != 0 {
                        return Err(overflow(spec));
                    }
                    Ok(SumState {
                        sum: i128::from(w[0]),
                        seen: seen(1, g),
                    })
                })
                .collect::<Result<_>>()?;
            Box::new(Groups::from_states(SumU64::new(out), states))
        }
        (AggKind::Sum, DataType::Decimal128(..)) => {
            let states = (0..n)
                .map(|g| {
                    let sum = wide_to_i128(&wide(0, g)).ok_or_else(|| overflow(spec))?;
                    Ok(SumState {
                        sum,
                        seen: seen(1, g),
                    })
                })
                .collect::<Result<_>>()?;
            Box::new(Groups::from_states(SumDecimal::new(out), states))
        }
        (AggKind::Sum, DataType::Float64) => {
            let states = (0..n)
                .map(|g| SumState {
                    sum: f64::from_bits(col(0)[g]),
                    seen: seen(1, g),
                })
                .collect();
            Box::new(Groups::from_states(SumF64::new(out), states))
        }
        (AggKind::Avg, DataType::Float64) => {
            let states = (0..n)
                .map(|g| AvgState {
                    sum: f64::from_bits(col(0)[g]),
                    count: col(1)[g] as i64,
                })
                .collect();
            Box::new(Groups::from_states(Avg, states))
        }
        (AggKind::Avg, DataType::Decimal128(_, s)) => {
            let states = (0..n)
                .map(|g| {
                    let sum = wide_to_i128(&wide(0, g)).ok_or_else(|| overflow(spec))?;
                    Ok(AvgState {
                        sum,
                        count: col(1)[g] as i64,
                    })
                })
                .collect::<Result<_>>()?;
            Box::new(Groups::from_states(AvgDecimal::new(*s, &out)?, states))
        }
        (AggKind::Min | AggKind::Max, DataType::Decimal128(p, _)) if *p > 18 => {
            let states = (0..n)
                .map(|g| {
                    let w = wide(0, g);
                    seen(1, g).then(|| (w[0] as u128 | (w[1] as u128) << 64) as i128)
                })
                .collect();
            Box::new(Groups::from_states(
                MinMaxPrimitive::<Decimal128Type>::new(spec.kind == AggKind::Max, input.clone()),
                states,
            ))
        }
        (AggKind::Min | AggKind::Max, t) => {
            min_max_states(spec.kind == AggKind::Max, t, col(0), col(1))?
        }
        _ => return Err(gpu_unsupported(spec)),
    })
}

fn min_max_states(
    is_max: bool,
    t: &DataType,
    values: &[u64],
    seen: &[u64],
) -> Result<Box<dyn GroupAccumulator>> {
    fn prim<T: ArrowPrimitiveType>(
        is_max: bool,
        t: &DataType,
        values: &[u64],
        seen: &[u64],
        unsigned: bool,
    ) -> Box<dyn GroupAccumulator>
    where
        T::Native: Ordinal,
    {
        let states = values
            .iter()
            .zip(seen)
            .map(|(&v, &s)| {
                let ord = if unsigned {
                    v as i128
                } else {
                    v as i64 as i128
                };
                (s != 0).then(|| T::Native::from_ord(ord))
            })
            .collect();
        Box::new(Groups::from_states(
            MinMaxPrimitive::<T>::new(is_max, t.clone()),
            states,
        ))
    }
    Ok(match t {
        DataType::Int8 => prim::<Int8Type>(is_max, t, values, seen, false),
        DataType::Int16 => prim::<Int16Type>(is_max, t, values, seen, false),
        DataType::Int32 => prim::<Int32Type>(is_max, t, values, seen, false),
        DataType::Int64 => prim::<Int64Type>(is_max, t, values, seen, false),
        DataType::UInt8 => prim::<UInt8Type>(is_max, t, values, seen, false),
        DataType::UInt16 => prim::<UInt16Type>(is_max, t, values, seen, false),
        DataType::UInt32 => prim::<UInt32Type>(is_max, t, values, seen, false),
        DataType::UInt64 => prim::<UInt64Type>(is_max, t, values, seen, true),
        DataType::Float32 => prim::<Float32Type>(is_max, t, values, seen, false),
        DataType::Float64 => prim::<Float64Type>(is_max, t, values, seen, false),
        DataType::Date32 => prim::<Date32Type>(is_max, t, values, seen, false),
        DataType::Date64 => prim::<Date64Type>(is_max, t, values, seen, false),
        DataType::Decimal128(..) => prim::<Decimal128Type>(is_max, t, values, seen, false),
        DataType::Boolean => {
            let states = values
                .iter()
                .zip(seen)
                .map(|(&v, &s)| (s != 0).then_some(v != 0))
                .collect();
            Box::new(Groups::from_states(MinMaxBool::new(is_max), states))
        }
        other => {
            return Err(GrouperError::UnsupportedType {
                what: "min/max on the GPU",
                data_type: other.clone(),
            })
        }
    })
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

    #[test]
    fn layout_numbers_words_after_rows() {
        let l = Layout::new(&[
            AggregateSpec::count_star(),
            AggregateSpec::new(AggKind::Sum, DataType::Decimal128(15, 2)),
            AggregateSpec::new(AggKind::Min, DataType::Float32),
        ])
        .unwrap();
        assert_eq!(l.words, 1 + 4 + 2);
        assert_eq!(l.identities()[5], i64::MAX as u64);
        assert!(Layout::new(&[AggregateSpec::new(AggKind::Max, DataType::Utf8)]).is_err());
        let wide = Layout::new(&[AggregateSpec::new(
            AggKind::Min,
            DataType::Decimal128(38, 2),
        )])
        .unwrap();
        assert_eq!(wide.words, 1 + 3 + 1);
        assert_eq!(wide.identities()[1..4], [u64::MAX, i64::MAX as u64, 0]);
    }
}
