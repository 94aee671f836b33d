//! Processes the tests start and stop as a user would.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Runs `grouper` with `args` to its end, asserting success.
pub fn grouper(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_grouper"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "grouper {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A temporary folder holding TPC-H at `sf` (`lineitem/`, ...) and db-benchmark's group-by
/// table of `rows` rows with NULLs (`x.parquet`), as `grouper gen` writes them.
pub fn tpch_and_groupby(sf: &str, rows: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    grouper(&["gen", "tpch", "--sf", sf, "-o", d]);
    let x = format!("{d}/x.parquet");
    grouper(&[
        "gen", "groupby", "--rows", rows, "--k", "10", "--nas", "5", "-o", &x,
    ]);
    dir
}

/// Sends `child` SIGINT (Ctrl-C) and waits for it to end, failing the test if it runs on past
/// `within`; its exit status.
pub fn interrupt(child: &mut Child, within: Duration) -> ExitStatus {
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            t.elapsed() < within,
            "still running {within:?} after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
