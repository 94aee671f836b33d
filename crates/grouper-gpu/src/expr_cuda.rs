//! The IR as CUDA C: each node becomes a value variable and a validity flag, in statements that
//! the kernel generator places inside its per-row loop. Column `i` is expected as `c{i}` (value)
//! and `c{i}_ok` (valid) in scope; errors (integer division by zero) set a bit in `*err`.

use std::fmt::Write;

use arrow::datatypes::DataType;

use grouper_core::expr::{BinOp, Expr, Scalar};

/// Error bit: integer division by zero.
pub const ERR_DIV_ZERO: u64 = 1;
/// Error bit: decimal arithmetic overflowed 128 bits.
pub const ERR_DECIMAL_OVERFLOW: u64 = 4;

/// Device helpers the emitted code calls: decimal arithmetic checked for i128 overflow (a
/// cheap range test first; the exact test only for operands beyond 2^62).
pub const HELPERS: &str = r#"
__device__ __forceinline__ __int128 dec_add(__int128 a, __int128 b, unsigned long long* err) {
  __int128 r = (__int128)((unsigned __int128)a + (unsigned __int128)b);
  if ((a < 0) == (b < 0) && (r < 0) != (a < 0)) atomicOr(err, 4ULL);
  return r;
}
__device__ __forceinline__ __int128 dec_mul(__int128 a, __int128 b, unsigned long long* err) {
  const __int128 lim = (__int128)1 << 62;
  if (a > -lim && a < lim && b > -lim && b < lim) return a * b;
  unsigned __int128 ua = a < 0 ? (unsigned __int128)0 - (unsigned __int128)a : (unsigned __int128)a;
  unsigned __int128 ub = b < 0 ? (unsigned __int128)0 - (unsigned __int128)b : (unsigned __int128)b;
  const unsigned __int128 max = ((unsigned __int128)1 << 127) - 1;
  if (ua != 0 && ub > max / ua) { atomicOr(err, 4ULL); return 0; }
  return (__int128)(ua * ub) * ((a < 0) != (b < 0) ? -1 : 1);
}
"#;

/// The C type holding values of `t` in registers.
pub fn c_type(t: &DataType) -> &'static str {
    match t {
        DataType::Boolean => "bool",
        DataType::Int8 => "signed char",
        DataType::Int16 => "short",
        DataType::Int32 | DataType::Date32 => "int",
        DataType::Int64 => "long long",
        DataType::UInt8 => "unsigned char",
        DataType::UInt16 => "unsigned short",
        DataType::UInt32 => "unsigned int",
        DataType::UInt64 => "unsigned long long",
        DataType::Float32 => "float",
        DataType::Float64 => "double",
        DataType::Decimal128(..) => "__int128",
        _ => "void",
    }
}

/// The unsigned type in which wrapping arithmetic on `t` is done.
fn wrap_type(t: &DataType) -> &'static str {
    match t {
        DataType::Decimal128(..) => "unsigned __int128",
        _ => "unsigned long long",
    }
}

/// A constant as a C expression of type `t`.
fn literal(v: &Scalar, t: &DataType) -> String {
    match (v, t) {
        (Scalar::Bool(b), _) => b.to_string(),
        (Scalar::Float(f), DataType::Float32) => {
            format!("__int_as_float({})", (*f as f32).to_bits() as i32)
        }
        (Scalar::Float(f), _) => format!("__longlong_as_double({}LL)", f.to_bits() as i64),
        (Scalar::Int(i), DataType::Decimal128(..)) => int128(*i),
        (Scalar::Int(i), t) => format!("(({})({}ULL))", c_type(t), *i as u64),
        (Scalar::Null, t) => format!("(({})0)", c_type(t)),
    }
}

/// An `__int128` constant (C has no 128-bit literals).
pub fn int128(v: i128) -> String {
    let hi = (v >> 64) as u64;
    let lo = v as u64;
    format!("((__int128)(((unsigned __int128){hi}ULL << 64) | (unsigned __int128){lo}ULL))")
}

/// Emits statements for expressions into one buffer, numbering temporaries.
#[derive(Default)]
pub struct Emitter {
    /// The statements so far.
    pub code: String,
    next: usize,
}

impl Emitter {
    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("t{}", self.next)
    }

    /// Emits an aggregate's argument: the names of each part's value (one, unless `e` is a
    /// [`Expr::Tuple`]) and of the validity of all together (a tuple is NULL where any part is).
    pub fn emit_parts(&mut self, e: &Expr) -> (Vec<String>, String) {
        let Expr::Tuple(parts) = e else {
            let (v, ok) = self.emit(e);
            return (vec![v], ok);
        };
        let (values, oks): (Vec<String>, Vec<String>) = parts.iter().map(|p| self.emit(p)).unzip();
        let ok = self.fresh();
        let all = if oks.is_empty() {
            "true".to_string()
        } else {
            oks.join(" && ")
        };
        let _ = writeln!(self.code, "const bool {ok} = {all};");
        (values, ok)
    }

    /// Emits `e`; returns the names of its value and validity variables.
    pub fn emit(&mut self, e: &Expr) -> (String, String) {
        match e {
            // Only an aggregate's whole argument is a tuple (`Expr::check`): its parts, NULL
            // together, the first standing for the value.
            Expr::Tuple(_) => {
                let (values, ok) = self.emit_parts(e);
                (values.into_iter().next().unwrap_or_else(|| "0".into()), ok)
            }
            Expr::Column { index, .. } => (format!("c{index}"), format!("c{index}_ok")),
            Expr::Literal { value, data_type } => {
                let v = self.fresh();
                let ok = *value != Scalar::Null;
                let _ = writeln!(
                    self.code,
                    "const {} {v} = {}; const bool {v}_ok = {ok};",
                    c_type(data_type),
                    literal(value, data_type)
                );
                (v.clone(), format!("{v}_ok"))
            }
            Expr::Not(inner) => {
                let (a, aok) = self.emit(inner);
                let v = self.fresh();
                let _ = writeln!(
                    self.code,
                    "const bool {v} = !{a}; const bool {v}_ok = {aok};"
                );
                (v.clone(), format!("{v}_ok"))
            }
            Expr::IsNull { expr, negated } => {
                let (_, aok) = self.emit(expr);
                let v = self.fresh();
                let test = if *negated { aok } else { format!("!{aok}") };
                let _ = writeln!(
                    self.code,
                    "const bool {v} = {test}; const bool {v}_ok = true;"
                );
                (v.clone(), format!("{v}_ok"))
            }
            Expr::Negative(inner) => {
                let t = inner.data_type();
                let (a, aok) = self.emit(inner);
                let v = self.fresh();
                let val = match t {
                    DataType::Float32 | DataType::Float64 => format!("-{a}"),
                    _ => format!(
                        "({})(({})0 - ({}){a})",
                        c_type(&t),
                        wrap_type(&t),
                        wrap_type(&t)
                    ),
                };
                let _ = writeln!(
                    self.code,
                    "const {} {v} = {val}; const bool {v}_ok = {aok};",
                    c_type(&t)
                );
                (v.clone(), format!("{v}_ok"))
            }
            Expr::Cast { expr, to } => {
                let from = expr.data_type();
                let (a, aok) = self.emit(expr);
                let v = self.fresh();
                let val = match (&from, to) {
                    (DataType::Decimal128(_, s), DataType::Float64) => {
                        format!("((double){a} / {:?})", 10f64.powi(*s as i32))
                    }
                    (DataType::Decimal128(_, s1), DataType::Decimal128(_, s2)) => {
                        format!(
                            "((__int128){a} * {})",
                            int128(10i128.pow((*s2 - *s1) as u32))
                        )
                    }
                    (_, DataType::Decimal128(_, s)) => {
                        format!("((__int128){a} * {})", int128(10i128.pow(*s as u32)))
                    }
                    _ => format!("(({}){a})", c_type(to)),
                };
                let _ = writeln!(
                    self.code,
                    "const {} {v} = {val}; const bool {v}_ok = {aok};",
                    c_type(to)
                );
                (v.clone(), format!("{v}_ok"))
            }
            Expr::Binary {
                op,
                left,
                right,
                data_type,
            } => self.binary(*op, left, right, data_type),
            Expr::Case {
                whens,
                otherwise,
                data_type,
            } => {
                let v = self.fresh();
                let _ = writeln!(
                    self.code,
                    "{} {v} = 0; bool {v}_ok = false;",
                    c_type(data_type)
                );
                // Nested blocks so that a branch is evaluated only for rows that take it
                // (its division by zero must not fail rows that do not).
                let mut closes = 0;
                for (cond, val) in whens {
                    let (c, cok) = self.emit(cond);
                    let _ = writeln!(self.code, "if ({cok} && {c}) {{");
                    let (x, xok) = self.emit(val);
                    let _ = writeln!(self.code, "{v} = {x}; {v}_ok = {xok};\n}} else {{");
                    closes += 1;
                }
                if let Some(o) = otherwise {
                    let (x, xok) = self.emit(o);
                    let _ = writeln!(self.code, "{v} = {x}; {v}_ok = {xok};");
                }
                self.code.push_str(&"}\n".repeat(closes));
                (v.clone(), format!("{v}_ok"))
            }
        }
    }

    fn binary(&mut self, op: BinOp, left: &Expr, right: &Expr, out: &DataType) -> (String, String) {
        let (lt, rt) = (left.data_type(), right.data_type());
        let (a, aok) = self.emit(left);
        let (b, bok) = self.emit(right);
        let v = self.fresh();
        let ct = c_type(out);
        if matches!(op, BinOp::And | BinOp::Or) {
            // Kleene: the dominant value (false for AND, true for OR) wins over NULL.
            let d = if op == BinOp::Or { "true" } else { "false" };
            let _ = writeln!(
                self.code,
                "const bool {v}_ok = ({aok} && {bok}) || ({aok} && {a} == {d}) || ({bok} && {b} == {d});\n\
                 const bool {v} = ({aok} && {a} == {d}) || ({bok} && {b} == {d}) ? {d} : !{d};"
            );
            return (v.clone(), format!("{v}_ok"));
        }
        if !matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div) {
            let (x, y) = match lt {
                DataType::Float32 => (format!("ford32({a})"), format!("ford32({b})")),
                DataType::Float64 => (format!("ford64({a})"), format!("ford64({b})")),
                _ => (a.clone(), b.clone()),
            };
            let sym = match op {
                BinOp::Eq => "==",
                BinOp::NotEq => "!=",
                BinOp::Lt => "<",
                BinOp::LtEq => "<=",
                BinOp::Gt => ">",
                _ => ">=",
            };
            let _ = writeln!(
                self.code,
                "const bool {v} = {x} {sym} {y}; const bool {v}_ok = {aok} && {bok};"
            );
            return (v.clone(), format!("{v}_ok"));
        }
        let sym = match op {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            _ => "/",
        };
        let val = match (&lt, &rt, out) {
            (DataType::Float32 | DataType::Float64, _, _) => format!("({a} {sym} {b})"),
            (
                DataType::Decimal128(_, s1),
                DataType::Decimal128(_, s2),
                DataType::Decimal128(_, s),
            ) => {
                // 128-bit arithmetic failing on overflow, as Arrow's checked decimal kernels.
                let scaled = |v: &str, k: i8| {
                    if k == 0 {
                        v.to_string()
                    } else {
                        format!("dec_mul({v}, {}, err)", int128(10i128.pow(k as u32)))
                    }
                };
                match op {
                    BinOp::Mul => format!("dec_mul({a}, {b}, err)"),
                    BinOp::Add => format!(
                        "dec_add({}, {}, err)",
                        scaled(&a, *s - *s1),
                        scaled(&b, *s - *s2)
                    ),
                    _ => format!(
                        "dec_add({}, (__int128)0 - {}, err)",
                        scaled(&a, *s - *s1),
                        scaled(&b, *s - *s2)
                    ),
                }
            }
            _ if op == BinOp::Div => {
                let _ = writeln!(
                    self.code,
                    "if ({aok} && {bok} && {b} == 0) atomicOr(err, {ERR_DIV_ZERO}ULL);"
                );
                format!("({b} == 0 ? ({ct})0 : ({ct})({a} / {b}))")
            }
            _ => {
                let w = wrap_type(out);
                format!("({ct})(({w}){a} {sym} ({w}){b})")
            }
        };
        let _ = writeln!(
            self.code,
            "const {ct} {v} = {aok} && {bok} ? {val} : ({ct})0; const bool {v}_ok = {aok} && {bok};"
        );
        (v.clone(), format!("{v}_ok"))
    }
}
