//! The Python package `grouper` (crates/grouper-python) as a user installs and drives it: built
//! by maturin into the project's venv, next to datafusion 55 from the package registry, then
//! its tests (crates/grouper-python/tests/test_grouper.py, unittest) run TPC-H Q1 and the
//! group-by questions through `grouper.install` and `grouper.sql`, every answer against
//! DuckDB's, and check `EXPLAIN` for grouper's operator.

use std::path::Path;
use std::process::Command;

use crate::process::tpch_and_groupby;
use crate::venv;

/// The cargo profile this test binary was built with (target/<dir>/deps/it-…), which maturin
/// builds the extension with, sharing the compiled workspace.
fn profile() -> String {
    let exe = std::env::current_exe().unwrap();
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name);
    match dir.and_then(|d| d.to_str()).unwrap() {
        "debug" => "dev".into(),
        other => other.into(),
    }
}

#[test]
fn the_python_package_gets_duckdbs_answers() {
    let modules = ["duckdb", "pyarrow", "datafusion", "maturin"];
    if std::env::var("GROUPER_REQUIRE_GPU").is_ok()
        && !venv::imports(
            &grouper_cli::difftest::duckdb::python(&venv::root()),
            &modules,
        )
    {
        // The GPU machine has no Rust to build the package with (nor the packages).
        eprintln!("skipped: no datafusion or maturin on this machine");
        return;
    }
    let python = venv::python(&modules);
    let root = venv::root();
    let build = Command::new(&python)
        .args([
            "-m",
            "maturin",
            "develop",
            "--quiet",
            "--profile",
            &profile(),
        ])
        .arg("-m")
        .arg(root.join("crates/grouper-python/Cargo.toml"))
        .env("VIRTUAL_ENV", python.parent().unwrap().parent().unwrap())
        .status()
        .unwrap();
    assert!(build.success(), "maturin develop failed");

    let dir = tpch_and_groupby("0.02", "5e4");
    let d = dir.path().to_str().unwrap();
    let out = Command::new(&python)
        .arg(root.join("crates/grouper-python/tests/test_grouper.py"))
        .arg("-v")
        .env("GROUPER_TEST_DATA", d)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    eprintln!("{report}");
    assert!(out.status.success(), "the Python package's tests failed");
    assert!(report.contains("OK"), "{report}");
}
