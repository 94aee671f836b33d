//! The IR's interpreter against DataFusion's semantics: decimal result types and exact
//! arithmetic, Kleene logic, wrapping integers, CASE.

use super::*;
use arrow::array::Int64Array;

fn col(i: usize, t: DataType) -> Box<Expr> {
    Box::new(Expr::column(i, t))
}

#[test]
fn decimal_arithmetic_is_exact_and_typed_like_datafusion() {
    // price * (1 - disc): Decimal(15,2) * Decimal(16,2) = Decimal(32,4)
    assert_eq!(decimal_result(BinOp::Mul, (15, 2), (16, 2)), Some((32, 4)));
    assert_eq!(decimal_result(BinOp::Mul, (30, 2), (16, 2)), Some((38, 4))); // capped
    let price: ArrayRef = Arc::new(
        Decimal128Array::from(vec![Some(12345), None])
            .with_precision_and_scale(15, 2)
            .unwrap(),
    );
    let e = Expr::Binary {
        op: BinOp::Mul,
        left: col(0, DataType::Decimal128(15, 2)),
        right: col(0, DataType::Decimal128(15, 2)),
        data_type: DataType::Decimal128(31, 4),
    };
    e.check().unwrap();
    assert_eq!(
        e.eval(std::slice::from_ref(&price), 0).unwrap(),
        Scalar::Int(12345 * 12345)
    );
    assert_eq!(e.eval(&[price], 1).unwrap(), Scalar::Null);
}

#[test]
fn kleene_logic_and_wrapping() {
    let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(i64::MAX), None]));
    let gt = Expr::Binary {
        op: BinOp::Gt,
        left: col(0, DataType::Int64),
        right: Box::new(Expr::Literal {
            value: Scalar::Int(0),
            data_type: DataType::Int64,
        }),
        data_type: DataType::Boolean,
    };
    let f = Expr::Literal {
        value: Scalar::Bool(false),
        data_type: DataType::Boolean,
    };
    let and = Expr::Binary {
        op: BinOp::And,
        left: Box::new(gt.clone()),
        right: Box::new(f),
        data_type: DataType::Boolean,
    };
    assert_eq!(
        and.eval(std::slice::from_ref(&a), 1).unwrap(),
        Scalar::Bool(false)
    ); // NULL AND false
    assert_eq!(gt.eval(std::slice::from_ref(&a), 1).unwrap(), Scalar::Null);
    let add = Expr::Binary {
        op: BinOp::Add,
        left: col(0, DataType::Int64),
        right: col(0, DataType::Int64),
        data_type: DataType::Int64,
    };
    assert_eq!(add.eval(&[a], 0).unwrap(), Scalar::Int(-2)); // wraps like DataFusion
    assert!(Expr::Cast {
        expr: col(0, DataType::Int64),
        to: DataType::Int32
    }
    .check()
    .is_err());
    // NULL-ness: IS NULL never is; a CASE without ELSE may be; columns as declared.
    assert!(!gt.may_be_null(&|_| false) && gt.may_be_null(&|_| true));
    let is_null = Expr::IsNull {
        expr: col(0, DataType::Int64),
        negated: false,
    };
    assert!(!is_null.may_be_null(&|_| true));
    let case = Expr::Case {
        whens: vec![(is_null, Expr::column(0, DataType::Int64))],
        otherwise: None,
        data_type: DataType::Int64,
    };
    assert!(case.may_be_null(&|_| false));
}
