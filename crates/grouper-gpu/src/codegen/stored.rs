//! How a partitioned row keeps the 64-bit words `eval_row` builds (`placement::partitioned`):
//! whole, or in 32 bits where the word is known to be a 32-bit value widened. The partitioned
//! rows are written once by the scatter and read back by every key range of the fold, so their
//! bytes are most of those passes' traffic: a dense u32 key and an f32 sum took 16 bytes a row
//! as two words and take 8 in halves.
//!
//! A word is narrowed only where its value provably fits: a direct table's key (below its
//! domain, at most 2^32), an aggregate input read straight from a column of a 32-bit or
//! narrower type (an expression's C arithmetic may be wider than its planned type, so its
//! words stay whole), a wide sum's sign word, the NULL mask of at most 32 aggregates.

use arrow::datatypes::DataType;
use grouper_core::agg::words::{Input, Op};
use grouper_core::expr::Expr;

use super::{input_words, KernelSpec};

/// How one word of a partitioned row is stored, in 32-bit halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Both halves, low first.
    Whole,
    /// The low half; the high half is zero.
    ZeroExtended,
    /// The low half; the high half repeats its sign bit.
    SignExtended,
    /// A double that was a float (or a small integer) before its widening, kept as that float.
    Float32,
    /// Nothing: the word is a placeholder zero (`NIN`'s one input where no aggregate reads an
    /// argument).
    Omitted,
}

impl Stored {
    /// The 32-bit halves the word takes in a row.
    pub(crate) fn halves(self) -> u64 {
        match self {
            Stored::Whole => 2,
            Stored::Omitted => 0,
            _ => 1,
        }
    }

    /// CUDA that writes the word `v` (a `u64`) at halves `r[at..]` (an `unsigned*`); a whole
    /// word in one 64-bit store where `r + at` is 8-byte `aligned`.
    pub(crate) fn store(self, r: &str, at: u64, v: &str, aligned: bool) -> String {
        match self {
            Stored::Whole if aligned => format!("*(u64*)({r} + {at}) = ({v});"),
            Stored::Whole => {
                format!(
                    "{r}[{at}] = (unsigned)({v}); {r}[{}] = (unsigned)(({v}) >> 32);",
                    at + 1
                )
            }
            Stored::ZeroExtended | Stored::SignExtended => format!("{r}[{at}] = (unsigned)({v});"),
            Stored::Float32 => {
                format!("{r}[{at}] = __float_as_uint((float)__longlong_as_double((i64)({v})));")
            }
            Stored::Omitted => String::new(),
        }
    }

    /// A CUDA expression of the word (a `u64`) from halves `r[at..]`; a whole word in one
    /// 64-bit load where `r + at` is 8-byte `aligned`.
    pub(crate) fn load(self, r: &str, at: u64, aligned: bool) -> String {
        match self {
            Stored::Whole if aligned => format!("(*(const u64*)({r} + {at}))"),
            Stored::Whole => format!("((u64){r}[{at}] | ((u64){r}[{}] << 32))", at + 1),
            Stored::ZeroExtended => format!("(u64){r}[{at}]"),
            Stored::SignExtended => format!("(u64)(i64)(int){r}[{at}]"),
            Stored::Float32 => {
                format!("(u64)__double_as_longlong((double)__uint_as_float({r}[{at}]))")
            }
            Stored::Omitted => "0ULL".into(),
        }
    }
}

/// How a partitioned row stores each key word: a direct table's one key word is an index below
/// its domain, in 32 bits where the domain is at most 2^32; hashed keys' words whole.
pub(crate) fn key_storage(spec: &KernelSpec) -> Vec<Stored> {
    let narrow = spec.strategy.is_perfect() && spec.key_count() == 1 && spec.domain <= 1 << 32;
    let one = if narrow {
        Stored::ZeroExtended
    } else {
        Stored::Whole
    };
    vec![one; spec.key_count()]
}

/// How a partitioned row stores each aggregate input word, in `eval_row`'s order (`NIN` of
/// them: a placeholder where no aggregate reads an argument).
pub(crate) fn input_storage(spec: &KernelSpec) -> Vec<Stored> {
    let mut out = Vec::new();
    for (agg, arg) in spec.layout.aggs.iter().zip(&spec.args) {
        let Some(arg) = arg else { continue };
        let t = arg.data_type();
        let source = source_type(arg, spec);
        for f in agg.fields.iter().filter(|f| f.input.reads_argument()) {
            let words = match f.input {
                Input::Part(_) | Input::Product(..) => input_words(f.op, &DataType::Float64, "v"),
                _ => input_words(f.op, &t, "v"),
            };
            for w in 0..words.len() {
                out.push(match (&source, f.input) {
                    (Some(s), Input::Value) => stored(f.op, &t, s, w),
                    _ => Stored::Whole,
                });
            }
        }
    }
    if out.is_empty() {
        out.push(Stored::Omitted);
    }
    out
}

/// The type an argument's values come from where they are a column's values, read as the
/// column stores them, or widened exactly by a cast (`SUM(v)` of an f32 `v` reads
/// `CAST(v AS DOUBLE)`); `None` for any other expression, whose C arithmetic may be wider
/// than its planned type.
fn source_type(arg: &Expr, spec: &KernelSpec) -> Option<DataType> {
    let (index, read) = match arg {
        Expr::Column { index, data_type } => (index, data_type),
        Expr::Cast { expr, to } => match &**expr {
            Expr::Column { index, data_type } if widens(data_type, to) => (index, data_type),
            _ => return None,
        },
        _ => return None,
    };
    (spec.columns.get(*index)?.as_ref()? == read).then(|| read.clone())
}

/// Whether every value of `from` is a value of `to` (the casts that only widen).
fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let bits = |t: &DataType| match t {
        Int8 | UInt8 => 8,
        Int16 | UInt16 => 16,
        Int32 | UInt32 => 32,
        Int64 | UInt64 => 64,
        _ => 0,
    };
    let signed = |t: &DataType| matches!(t, Int8 | Int16 | Int32 | Int64);
    let unsigned = |t: &DataType| matches!(t, UInt8 | UInt16 | UInt32 | UInt64);
    match (from, to) {
        _ if from == to => true,
        (Float32, Float64) => true,
        // Exact in a float's 24-bit significand, or a double's 53.
        (Int8 | Int16 | UInt8 | UInt16, Float32 | Float64) | (Int32 | UInt32, Float64) => true,
        _ if signed(from) => signed(to) && bits(to) > bits(from),
        _ if unsigned(from) => (unsigned(to) || signed(to)) && bits(to) > bits(from),
        _ => false,
    }
}

/// How word `w` of an input to `op` of type `t` (the argument's, which `input_words` builds
/// the word from) whose values are those of a `source` type is stored: a small integer's
/// value widened with its sign or zeros, a float's order-preserving bits (`ford32`) as a
/// sign-extended int, a double that was a float or small integer as that float, a wide sum's
/// sign word.
fn stored(op: Op, t: &DataType, source: &DataType, w: usize) -> Stored {
    use DataType::*;
    let small_signed = matches!(source, Int8 | Int16 | Int32 | Date32);
    let small_unsigned = matches!(source, UInt8 | UInt16 | UInt32 | Boolean);
    let integer = matches!(
        t,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Date32 | Boolean
    );
    let unsigned_t = matches!(t, UInt8 | UInt16 | UInt32 | UInt64 | Boolean);
    // A small integer's value as the word `(u64)(v)` or `(u64)(i64)(v)` of an integer `t`.
    let widened = || match () {
        _ if small_unsigned => Stored::ZeroExtended,
        _ if small_signed && !unsigned_t => Stored::SignExtended,
        _ => Stored::Whole,
    };
    match op {
        Op::MinI128 | Op::MaxI128 => Stored::Whole,
        Op::AddF64 if w == 0 && matches!(source, Float32 | Int8 | Int16 | UInt8 | UInt16) => {
            Stored::Float32
        }
        Op::AddF64 => Stored::Whole,
        // Past the first word: 0 or all ones (a sign), except a decimal's high word.
        Op::Wide { .. } if w > 0 && integer => Stored::SignExtended,
        Op::Wide { .. } if integer => widened(),
        Op::Wide { .. } => Stored::Whole,
        // `ford32` gives a float's order as a sign-extended int; a double's takes 64 bits.
        _ if *t == Float32 => Stored::SignExtended,
        _ if integer => widened(),
        _ => Stored::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grouper_core::agg::layout::Layout;
    use grouper_core::agg::{AggKind, AggregateSpec};

    fn column(index: usize, t: DataType) -> Expr {
        Expr::Column {
            index,
            data_type: t,
        }
    }

    /// A spec over columns of `types`, one aggregate per (kind, argument).
    fn spec(types: &[DataType], aggs: &[(AggKind, Option<Expr>)]) -> KernelSpec {
        let specs: Vec<AggregateSpec> = aggs
            .iter()
            .map(|(k, a)| match a {
                Some(e) => AggregateSpec::new(*k, e.data_type()),
                None => AggregateSpec::count_star(),
            })
            .collect();
        KernelSpec {
            columns: types.iter().cloned().map(Some).collect(),
            args: aggs.iter().map(|(_, a)| a.clone()).collect(),
            layout: Layout::new(&specs).unwrap(),
            ..crate::codegen::tests::spec(crate::GpuStrategy::HASH_PARTITIONED, 1)
        }
    }

    fn cast(index: usize, from: DataType, to: DataType) -> Expr {
        Expr::Cast {
            expr: Box::new(column(index, from)),
            to,
        }
    }

    #[test]
    fn inputs_from_narrow_columns_take_one_half_and_the_rest_two() {
        use DataType::*;
        let types = [Float32, Int32, Int64, Float64, UInt32];
        let s = spec(
            &types,
            &[
                (AggKind::CountStar, None),
                // As DataFusion plans SUM of an f32 and of an i32.
                (AggKind::Sum, Some(cast(0, Float32, Float64))),
                (AggKind::Sum, Some(cast(1, Int32, Int64))),
                (AggKind::Sum, Some(column(2, Int64))),
                (AggKind::Min, Some(column(3, Float64))),
                (AggKind::Max, Some(column(4, UInt32))),
                (AggKind::Min, Some(column(0, Float32))),
                // A double that was a float: its order bits take 64.
                (AggKind::Max, Some(cast(0, Float32, Float64))),
            ],
        );
        let got = input_storage(&s);
        // As many as eval_row writes.
        assert_eq!(got.len(), crate::codegen::input_count(&s.layout), "{got:?}");
        let halves: u64 = got.iter().map(|x| x.halves()).sum();
        // f32 sum: 1; i32 sum (value, sign): 1 + 1; i64 sum: 2 + 1; f64 min: 2; u32 max: 1;
        // f32 min: 1; max of the widened f32: 2.
        assert_eq!(halves, 1 + 2 + 3 + 2 + 1 + 1 + 2, "{got:?}");
        assert_eq!(got[0], Stored::Float32);
    }

    #[test]
    fn only_widening_casts_of_columns_narrow() {
        use DataType::*;
        assert!(widens(&Int32, &Int64) && widens(&UInt32, &Int64) && widens(&Int16, &Float32));
        assert!(!widens(&Int64, &Int32) && !widens(&Int32, &UInt64) && !widens(&Int32, &Float32));
        assert!(!widens(&Float64, &Float32) && !widens(&Float32, &Int64));
        // A float cast to an integer: its values are not the float's.
        let s = spec(&[Float32], &[(AggKind::Sum, Some(cast(0, Float32, Int64)))]);
        assert!(input_storage(&s).iter().all(|x| *x == Stored::Whole));
        // A column read as another type than it is stored as: whole.
        let s = spec(&[Int64], &[(AggKind::Sum, Some(cast(0, Int32, Int64)))]);
        assert_eq!(input_storage(&s)[0], Stored::Whole);
    }

    #[test]
    fn expressions_keep_whole_words_and_count_star_a_placeholder() {
        use DataType::*;
        // Arithmetic's C type need not be the planned type's: whole.
        let sum = Expr::Negative(Box::new(column(0, Int64)));
        let s = spec(&[Int64], &[(AggKind::Sum, Some(sum))]);
        assert_eq!(input_storage(&s)[0], Stored::Whole);
        // COUNT(*) alone: NIN's placeholder, stored in nothing.
        let s = spec(&[Int32], &[(AggKind::CountStar, None)]);
        assert_eq!(input_storage(&s), vec![Stored::Omitted]);
        // Hashed keys whole; a direct key within 2^32 in one half.
        assert_eq!(key_storage(&s), vec![Stored::Whole]);
        let direct = KernelSpec {
            strategy: crate::GpuStrategy::PERFECT_PARTITIONED,
            domain: 1 << 32,
            ..s.clone()
        };
        assert_eq!(key_storage(&direct), vec![Stored::ZeroExtended]);
        let wider = KernelSpec {
            domain: (1 << 32) + 1,
            ..direct
        };
        assert_eq!(key_storage(&wider), vec![Stored::Whole]);
    }
}
