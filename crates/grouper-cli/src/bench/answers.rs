//! Comparing two engines' answers to the same query, each written as CSV: grouper's (`grouper
//! query --format csv`, with a header) and DuckDB's (`bench/duckdb_files.py`, without).
//!
//! Engines print the same number differently (DuckDB's AVG is a double, DataFusion's a decimal
//! of scale 6; a decimal division may round to another scale), so two cells are equal when they
//! are the same text, or both numbers within a unit of the last digit the shorter one prints
//! (and a relative 1e-9). Rows are compared in order, and when that fails, sorted: ties in an
//! ORDER BY may come out in any order.

use std::path::Path;

use anyhow::{Context, Result};

/// The rows of a CSV file, skipping a header row when `header`.
pub fn read(path: &Path, header: bool) -> Result<Vec<Vec<String>>> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(header)
        .flexible(true)
        .from_path(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    r.records()
        .map(|rec| Ok(rec?.iter().map(str::to_string).collect()))
        .collect()
}

/// `None` when `ours` and `theirs` hold the same answer, else what differs, in one line.
pub fn differ(ours: &[Vec<String>], theirs: &[Vec<String>]) -> Option<String> {
    if ours.len() != theirs.len() {
        return Some(format!("{} rows against {}", ours.len(), theirs.len()));
    }
    let first_diff =
        |a: &[Vec<String>], b: &[Vec<String>]| a.iter().zip(b).position(|(x, y)| !same_row(x, y));
    // In order first; then sorted (a `?` here: equal once sorted is equal).
    let i = first_diff(ours, theirs)?;
    let mut a = ours.to_vec();
    let mut b = theirs.to_vec();
    a.sort();
    b.sort();
    first_diff(&a, &b)?;
    Some(format!(
        "row {i}: [{}] against [{}]",
        ours.get(i).map(|r| r.join(", ")).unwrap_or_default(),
        theirs.get(i).map(|r| r.join(", ")).unwrap_or_default()
    ))
}

fn same_row(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_cell(x, y))
}

fn same_cell(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (Ok(x), Ok(y)) = (a.trim().parse::<f64>(), b.trim().parse::<f64>()) else {
        return false;
    };
    let digits = |s: &str| s.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
    let unit = 10f64.powi(-digits(a).min(digits(b)));
    (x - y).abs() <= unit.max(1e-9 * x.abs().max(y.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(t: &[&[&str]]) -> Vec<Vec<String>> {
        t.iter()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    #[test]
    fn numbers_printed_to_other_scales_are_equal() {
        let a = rows(&[&["A", "25.522006", "1995-03-15"]]);
        let b = rows(&[&["A", "25.52200585325734", "1995-03-15"]]);
        assert_eq!(differ(&a, &b), None);
    }

    #[test]
    fn a_different_value_string_or_count_differs() {
        let a = rows(&[&["A", "25.52"]]);
        assert!(differ(&a, &rows(&[&["A", "25.54"]])).is_some());
        assert!(differ(&a, &rows(&[&["B", "25.52"]])).is_some());
        assert!(differ(&a, &rows(&[&["A", "25.52"], &["A", "1"]])).is_some());
        assert!(differ(&a, &rows(&[&["A", ""]])).is_some());
    }

    #[test]
    fn ties_in_another_order_are_equal() {
        let a = rows(&[&["x", "1"], &["y", "1"]]);
        let b = rows(&[&["y", "1"], &["x", "1"]]);
        assert_eq!(differ(&a, &b), None);
    }
}
