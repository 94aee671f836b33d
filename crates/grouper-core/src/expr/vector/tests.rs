//! The vectorised program against the reference interpreter: random well-typed expressions over
//! columns with NULLs and values at the edges of 64 bits (so the 128-bit fallback runs), random
//! selections, and the errors (decimal overflow, division by zero) only kept rows may raise.

use std::sync::Arc;

use arrow::array::{
    AsArray, BooleanArray, Decimal128Array, Float32Array, Float64Array, Int32Array, Int64Array,
};
use proptest::prelude::*;

use super::*;
use crate::expr::{decimal_result, read_scalar};

/// A tiny deterministic generator: the expression shapes come from one seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const D1: DataType = DataType::Decimal128(15, 2);
const D2: DataType = DataType::Decimal128(12, 2);

fn col(i: usize, t: DataType) -> Expr {
    Expr::column(i, t)
}

fn bin(op: BinOp, l: Expr, r: Expr, t: DataType) -> Expr {
    Expr::Binary {
        op,
        left: Box::new(l),
        right: Box::new(r),
        data_type: t,
    }
}

/// A decimal expression (its type is whatever DataFusion would plan).
fn decimal(r: &mut Rng, depth: u32) -> Expr {
    let leaf = depth == 0 || r.below(3) == 0;
    if leaf {
        return match r.below(5) {
            0 => col(0, D1),
            1 => col(1, D2),
            2 => Expr::Literal {
                value: Scalar::Int(r.below(300) as i128 - 100),
                data_type: D2,
            },
            3 => Expr::Cast {
                expr: Box::new(col(2, DataType::Int32)),
                to: D2,
            },
            _ => Expr::Literal {
                value: Scalar::Null,
                data_type: D1,
            },
        };
    }
    let (a, b) = (decimal(r, depth - 1), decimal(r, depth - 1));
    let op = [BinOp::Add, BinOp::Sub, BinOp::Mul][r.below(3) as usize];
    let (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) =
        (a.data_type(), b.data_type())
    else {
        unreachable!("decimal operands")
    };
    match (r.below(6), decimal_result(op, (p1, s1), (p2, s2))) {
        (0, _) => Expr::Negative(Box::new(a)),
        (_, Some((p, s))) => bin(op, a, b, DataType::Decimal128(p, s)),
        (_, None) => a,
    }
}

fn integer(r: &mut Rng, depth: u32) -> Expr {
    if depth == 0 || r.below(3) == 0 {
        return match r.below(4) {
            0 => col(3, DataType::Int64),
            1 => Expr::Cast {
                expr: Box::new(col(2, DataType::Int32)),
                to: DataType::Int64,
            },
            2 => Expr::Literal {
                value: Scalar::Int(r.below(7) as i128 - 3),
                data_type: DataType::Int64,
            },
            _ => Expr::Literal {
                value: Scalar::Int(i64::MIN as i128),
                data_type: DataType::Int64,
            },
        };
    }
    let op = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div][r.below(4) as usize];
    match r.below(5) {
        0 => Expr::Negative(Box::new(integer(r, depth - 1))),
        _ => bin(
            op,
            integer(r, depth - 1),
            integer(r, depth - 1),
            DataType::Int64,
        ),
    }
}

fn float(r: &mut Rng, depth: u32) -> Expr {
    if depth == 0 || r.below(3) == 0 {
        return match r.below(5) {
            0 => col(4, DataType::Float64),
            1 => Expr::Cast {
                expr: Box::new(col(5, DataType::Float32)),
                to: DataType::Float64,
            },
            2 => Expr::Cast {
                expr: Box::new(decimal(r, 1)),
                to: DataType::Float64,
            },
            3 => Expr::Cast {
                expr: Box::new(integer(r, 1)),
                to: DataType::Float64,
            },
            _ => Expr::Literal {
                value: Scalar::Float(0.5),
                data_type: DataType::Float64,
            },
        };
    }
    let op = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div][r.below(4) as usize];
    bin(
        op,
        float(r, depth - 1),
        float(r, depth - 1),
        DataType::Float64,
    )
}

fn same(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::Float(x), Scalar::Float(y)) => {
            x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan()
        }
        _ => a == b,
    }
}

fn columns(vals: &[(Option<i64>, Option<i32>, Option<f64>)], wide: bool) -> Vec<ArrayRef> {
    let big = |v: i64| {
        if wide {
            v as i128 * 1_000_000_000_000
        } else {
            v as i128
        }
    };
    vec![
        Arc::new(
            vals.iter()
                .map(|v| v.0.map(big))
                .collect::<Decimal128Array>()
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
        Arc::new(
            vals.iter()
                .map(|v| v.1.map(|x| x as i128 * 3))
                .collect::<Decimal128Array>()
                .with_precision_and_scale(12, 2)
                .unwrap(),
        ),
        Arc::new(vals.iter().map(|v| v.1).collect::<Int32Array>()),
        Arc::new(vals.iter().map(|v| v.0).collect::<Int64Array>()),
        Arc::new(vals.iter().map(|v| v.2).collect::<Float64Array>()),
        Arc::new(
            vals.iter()
                .map(|v| v.2.map(|f| f as f32))
                .collect::<Float32Array>(),
        ),
    ]
}

fn value() -> impl Strategy<Value = (Option<i64>, Option<i32>, Option<f64>)> {
    let int = prop_oneof![
        8 => -1000i64..1000,
        1 => Just(i64::MAX),
        1 => Just(i64::MIN),
        1 => Just(0i64),
    ];
    (
        proptest::option::weighted(0.85, int),
        proptest::option::weighted(0.85, -50i32..50),
        proptest::option::weighted(0.85, -4.0f64..4.0),
    )
}

proptest! {
    /// Every compiled program equals the reference on the selected rows, errors included.
    #[test]
    fn program_equals_the_reference(
        vals in proptest::collection::vec(value(), 1..300),
        keep in proptest::collection::vec(any::<bool>(), 300),
        seed in 1u64..u64::MAX,
        select in any::<bool>(),
        wide in any::<bool>(),
        lanes in any::<bool>(),
        narrow in any::<bool>(),
    ) {
        let mut r = Rng(seed);
        // Columns passed through twice (as Q1's SUM and AVG of a column): an integer, and a
        // decimal (a node of its own under lanes).
        let exprs: Vec<Expr> = (0..7)
            .map(|i| match i {
                0 => decimal(&mut r, 3),
                1 => integer(&mut r, 3),
                2 => float(&mut r, 3),
                3 | 4 => col(2, DataType::Int32),
                _ => col(0, DataType::Decimal128(15, 2)),
            })
            .collect();
        let exprs: Vec<Expr> = exprs.into_iter().filter(|e| e.check().is_ok()).collect();
        let cols = columns(&vals, wide);
        let n = vals.len();
        let keep = BooleanArray::from(keep[..n].to_vec());
        let sel = select.then(|| Selection::new(&keep));
        let kept: Vec<ArrayRef> = match &sel {
            Some(s) => cols.iter().map(|c| s.predicate.filter(c).unwrap()).collect(),
            None => cols.clone(),
        };
        let m = sel.as_ref().map_or(n, |s| s.len());
        let refs: Vec<Option<&Expr>> = exprs.iter().map(Some).chain([None]).collect();
        // With lanes, every decimal argument may leave as 64-bit lanes; read back in 128 bits
        // they are the reference's values.
        let program = Program::compile_with_lanes(&refs, &vec![lanes; refs.len()])
            .expect("every generated node compiles");
        // A scan may hand the columns read only as lanes over as Decimal64 (values of 64 bits).
        let cols: Vec<ArrayRef> = match narrow && !wide {
            false => cols,
            true => {
                let lane = program.lane_columns();
                cols.iter()
                    .enumerate()
                    .map(|(i, c)| match c.data_type() {
                        DataType::Decimal128(p, s) if lane.contains(&i) => Arc::new(
                            c.as_primitive::<Decimal128Type>()
                                .unary::<_, Decimal64Type>(|v| v as i64)
                                .with_precision_and_scale(*p, *s)
                                .unwrap(),
                        ) as ArrayRef,
                        _ => Arc::clone(c),
                    })
                    .collect()
            }
        };
        let got = program.run(&mut Scratch::default(), &cols, sel.as_ref(), n);
        let want: Result<Vec<ArrayRef>> = exprs.iter().map(|e| e.evaluate(&kept, m)).collect();
        match (got, want) {
            (Ok(got), Ok(want)) => {
                prop_assert_eq!(got.len(), want.len() + 1);
                prop_assert!(got.last().is_some_and(Option::is_none));
                for ((g, w), e) in got.iter().zip(&want).zip(&exprs) {
                    let g = match (g.as_ref().unwrap(), w.data_type()) {
                        (g, DataType::Decimal128(_, s)) if lanes && g.data_type() != w.data_type() => {
                            prop_assert_eq!(g.data_type(), &DataType::Decimal64(18, *s));
                            Arc::new(g.as_primitive::<Decimal64Type>().unary::<_, Decimal128Type>(i128::from).with_data_type(w.data_type().clone())) as ArrayRef
                        }
                        (g, _) => Arc::clone(g),
                    };
                    let g = &g;
                    prop_assert_eq!(g.data_type(), w.data_type());
                    prop_assert_eq!(g.len(), m);
                    for row in 0..m {
                        let (a, b) = (read_scalar(g, row), read_scalar(w, row));
                        prop_assert!(same(a, b), "row {}: {:?} vs {:?} in {:?}", row, a, b, e);
                    }
                }
            }
            (Err(_), Err(_)) => {}
            (g, w) => prop_assert!(false, "program {:?} but reference {:?}", g.map(|_| ()), w.map(|_| ())),
        }
    }
}

#[test]
fn common_subexpressions_compile_once() {
    // Q1: price * (1 - disc) and price * (1 - disc) * (1 + tax) share their first product.
    let d = |i| col(i, D1);
    let one = Expr::Literal {
        value: Scalar::Int(100),
        data_type: D1,
    };
    let t16 = DataType::Decimal128(16, 2);
    let disc = bin(BinOp::Sub, one.clone(), d(1), t16.clone());
    let disc_price = bin(BinOp::Mul, d(0), disc, DataType::Decimal128(32, 4));
    let tax = bin(BinOp::Add, one, d(2), t16);
    let charge = bin(
        BinOp::Mul,
        disc_price.clone(),
        tax,
        DataType::Decimal128(38, 6),
    );
    charge.check().unwrap();
    let p = Program::compile(&[Some(&disc_price), Some(&charge), Some(&d(0))]).unwrap();
    // price, 1, disc, 1 - disc, product, tax, 1 + tax, charge: 8 nodes, not 11.
    assert_eq!(p.node_count(), 8);
    let cols: Vec<ArrayRef> = (0..3)
        .map(|_| {
            Arc::new(
                Decimal128Array::from(vec![Some(5), None, Some(7)])
                    .with_precision_and_scale(15, 2)
                    .unwrap(),
            ) as ArrayRef
        })
        .collect();
    let out = p.run(&mut Scratch::default(), &cols, None, 3).unwrap();
    let charge_out = out[1].as_ref().unwrap();
    assert_eq!(read_scalar(charge_out, 0), Scalar::Int(5 * 95 * 105));
    assert_eq!(read_scalar(charge_out, 1), Scalar::Null);
    // The pass-through column is the input array itself.
    assert!(Arc::ptr_eq(out[2].as_ref().unwrap(), &cols[0]));
    // Discount and tax are read only as lanes; the price is also passed through as it is.
    assert_eq!(p.lane_columns(), vec![1, 2]);
    let lanes = Program::compile_with_lanes(&[Some(&disc_price), Some(&d(0))], &[true, true]);
    assert_eq!(lanes.unwrap().lane_columns(), vec![0, 1]);
}

#[test]
fn an_overflow_on_a_dropped_row_is_not_an_error() {
    let big = Decimal128Array::from(vec![Some(i128::MAX / 2), Some(3)])
        .with_precision_and_scale(38, 0)
        .unwrap();
    let cols: Vec<ArrayRef> = vec![Arc::new(big)];
    let t = DataType::Decimal128(38, 0);
    let twice = bin(BinOp::Mul, col(0, t.clone()), col(0, t.clone()), t);
    let p = Program::compile(&[Some(&twice)]).unwrap();
    assert!(p.run(&mut Scratch::default(), &cols, None, 2).is_err());
    let sel = Selection::new(&BooleanArray::from(vec![false, true]));
    let out = p
        .run(&mut Scratch::default(), &cols, Some(&sel), 2)
        .unwrap();
    assert_eq!(read_scalar(out[0].as_ref().unwrap(), 0), Scalar::Int(9));
}

#[test]
fn what_has_no_vectorised_form_does_not_compile() {
    let case = Expr::Case {
        whens: vec![(
            Expr::IsNull {
                expr: Box::new(col(0, DataType::Int64)),
                negated: false,
            },
            col(0, DataType::Int64),
        )],
        otherwise: None,
        data_type: DataType::Int64,
    };
    assert!(Program::compile(&[Some(&case)]).is_none());
    let u = bin(
        BinOp::Add,
        col(0, DataType::UInt64),
        col(0, DataType::UInt64),
        DataType::UInt64,
    );
    assert!(Program::compile(&[Some(&u)]).is_none());
    // A plain column of any type passes through.
    assert!(Program::compile(&[Some(&col(0, DataType::Utf8))]).is_some());
}

proptest! {
    /// A selection's indices are the kept rows, ascending, for any length and bit offset.
    #[test]
    fn selection_indices_are_the_set_bits(
        keep in proptest::collection::vec(any::<bool>(), 0..400),
        offset in 0usize..70,
    ) {
        let all = BooleanArray::from(keep.clone());
        let offset = offset.min(keep.len());
        let sliced = all.slice(offset, keep.len() - offset);
        let want: Vec<u32> = (0..sliced.len()).filter(|&i| sliced.value(i)).map(|i| i as u32).collect();
        prop_assert_eq!(Selection::new(&sliced).indices, want);
    }
}

#[test]
fn narrowing_tells_which_values_fit_64_bits() {
    let fits = [0, -1, 1, i64::MIN as i128, i64::MAX as i128];
    let misfits = [
        i64::MAX as i128 + 1,
        i64::MIN as i128 - 1,
        1 << 64,
        -(1 << 64),
        i128::MAX,
    ];
    let mut out = Vec::new();
    assert!(narrow(&mut out, &fits, None));
    assert_eq!(out, fits.iter().map(|&v| v as i64).collect::<Vec<_>>());
    for m in misfits {
        let wide = [3, m, 5];
        assert!(!narrow(&mut out, &wide, None), "{m} fits?");
        // Selected away, the misfit does not count; selected, it does.
        let drop = Selection::new(&BooleanArray::from(vec![true, false, true]));
        assert!(narrow(&mut out, &wide, Some(&drop)));
        assert_eq!(out, vec![3, 5]);
        let keep = Selection::new(&BooleanArray::from(vec![false, true, true]));
        assert!(!narrow(&mut out, &wide, Some(&keep)), "{m} selected fits?");
    }
}

#[test]
fn a_tuple_argument_is_its_parts_null_where_any_is() {
    // CORR(f, CAST(i AS DOUBLE) * 2) beside a SUM of the same cast: the tuple's parts are
    // outputs of their own, sharing the cast's node with the SUM's argument.
    let vals: Vec<(Option<i64>, Option<i32>, Option<f64>)> = (0..40)
        .map(|i| {
            let f = (i % 3 != 0).then_some(f64::from(i) / 4.0);
            let n = (i % 5 != 0).then_some(i - 20);
            (Some(i64::from(i)), n, f)
        })
        .collect();
    let cols = columns(&vals, false);
    let cast = Expr::Cast {
        expr: Box::new(col(2, DataType::Int32)),
        to: DataType::Float64,
    };
    let tuple = Expr::Tuple(vec![
        col(4, DataType::Float64),
        bin(
            BinOp::Mul,
            cast.clone(),
            Expr::Literal {
                value: Scalar::Float(2.0),
                data_type: DataType::Float64,
            },
            DataType::Float64,
        ),
    ]);
    tuple.check().unwrap();
    let program = Program::compile(&[Some(&tuple), Some(&cast)]).expect("compiles");
    let keep = BooleanArray::from((0..40).map(|i| i % 4 != 1).collect::<Vec<_>>());
    let sel = Selection::new(&keep);
    let got = program
        .run(&mut Scratch::default(), &cols, Some(&sel), 40)
        .unwrap();
    assert_eq!(got.len(), 2);
    let kept: Vec<ArrayRef> = cols
        .iter()
        .map(|c| sel.predicate.filter(c).unwrap())
        .collect();
    let want = tuple.evaluate(&kept, sel.len()).unwrap();
    let (g, w) = (got[0].as_ref().unwrap().as_struct(), want.as_struct());
    assert_eq!(
        g.data_type(),
        &crate::expr::tuple_type(&[DataType::Float64, DataType::Float64])
    );
    assert_eq!(g.nulls(), w.nulls());
    assert!(g.null_count() > 0 && g.null_count() < g.len());
    for part in 0..2 {
        let (gp, wp) = (
            g.column(part).as_primitive::<Float64Type>(),
            w.column(part).as_primitive::<Float64Type>(),
        );
        for row in (0..g.len()).filter(|&r| g.is_valid(r)) {
            assert_eq!(gp.value(row), wp.value(row), "part {part} row {row}");
        }
    }
    assert!(Expr::Binary {
        op: BinOp::Add,
        left: Box::new(tuple.clone()),
        right: Box::new(tuple),
        data_type: DataType::Float64,
    }
    .check()
    .is_err());
}
