//! The fault battery: every failure a user can cause, each with its exact outcome — a result,
//! or one clear line on stderr with exit code 2 — and never a panic, a hang or a wrong answer.
//! Run through the `grouper` binary, as a user meets them. GPU faults (out of memory, injected
//! NVRTC failure) run on a GPU machine from `scripts/device-test.sh faults`; without a GPU the
//! GPU backend's clear error and `auto`'s CPU fallback are checked here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn grouper() -> Command {
    Command::new(env!("CARGO_BIN_EXE_grouper"))
}

/// A scratch directory of files for the battery.
fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("grouper-faults-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &Path, name: &str, bytes: &[u8]) -> String {
    let p = d.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

fn query(args: &[&str]) -> Output {
    grouper().arg("query").args(args).output().unwrap()
}

/// Asserts a clean failure: exit code 2, one line on stderr starting `error: ` and containing
/// `want`, nothing on stdout, no panic.
#[track_caller]
fn fails_with(out: &Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.starts_with("error: ") && err.lines().count() == 1,
        "not one line: {err}"
    );
    assert!(err.contains(want), "expected '{want}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Asserts success with exactly `csv` on stdout.
#[track_caller]
fn answers(out: &Output, csv: &str) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), csv);
}

#[test]
fn sql_errors_are_one_clear_line() {
    let d = dir();
    let csv = write(&d, "t.csv", b"k,v,s\n1,10,a\n1,20,b\n2,5,c\n");
    let t = format!("t={csv}");
    for (sql, want) in [
        ("SELEC k FROM t", "SQL error"),
        (
            "SELECT k FROM nope",
            "table 'datafusion.public.nope' not found",
        ),
        ("SELECT nope FROM t", "No field named nope"),
        (
            "SELECT sum(s) FROM t",
            "Function 'sum' failed to match any signature",
        ),
        (
            "SELECT k, v, count(*) FROM t GROUP BY k",
            "must appear in the GROUP BY clause",
        ),
        (
            "SELECT k, sum(v / 0) FROM t GROUP BY k",
            "Divide by zero error",
        ),
    ] {
        let out = query(&[sql, "--table", &t]);
        fails_with(&out, want);
        // The same failure on every CPU strategy and on DataFusion's own aggregation.
        for extra in [["--strategy", "sort"], ["--backend", "datafusion"]] {
            let out = query(&[sql, "--table", &t, extra[0], extra[1]]);
            fails_with(&out, want);
        }
    }
    // Float division by zero is IEEE (DataFusion's semantics; DuckDB answers NULL).
    answers(
        &query(&[
            "SELECT k, sum(v / 0.0) AS s FROM t GROUP BY k ORDER BY k",
            "--table",
            &t,
            "--format",
            "csv",
        ]),
        "k,s\n1,inf\n2,inf\n",
    );
    // NULLIF keeps the divisor from being zero: the portable form.
    answers(
        &query(&[
            "SELECT k, sum(v / NULLIF(v - v, 0)) AS s FROM t GROUP BY k ORDER BY k",
            "--table",
            &t,
            "--format",
            "csv",
        ]),
        "k,s\n1,\n2,\n",
    );
}

#[test]
fn file_errors_name_the_problem() {
    let d = dir();
    let missing = d.join("missing.parquet").display().to_string();
    fails_with(
        &query(&[&format!("SELECT count(*) FROM '{missing}'")]),
        "no file matches",
    );
    let glob = format!("{}/nothing-*.parquet", d.display());
    fails_with(
        &query(&[&format!("SELECT count(*) FROM '{glob}'")]),
        "no file matches",
    );
    fails_with(
        &query(&["SELECT count(*) FROM t", "--table", &format!("t={missing}")]),
        "cannot register table 't'",
    );
    fails_with(
        &query(&["SELECT 1", "--table", "no-equals-sign"]),
        "--table expects NAME=PATH",
    );
    // Parquet: a real file, then truncated (no footer) and with its footer overwritten.
    let good = d.join("good.parquet");
    let out = grouper()
        .args(["gen", "synthetic", "--rows", "2000", "--groups", "10", "-o"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success());
    let bytes = std::fs::read(&good).unwrap();
    let trunc = write(&d, "trunc.parquet", &bytes[..bytes.len() / 2]);
    fails_with(
        &query(&[&format!("SELECT k, sum(v) FROM '{trunc}' GROUP BY k")]),
        "Parquet error",
    );
    let mut corrupt = bytes.clone();
    let n = corrupt.len();
    corrupt[n - 40..n - 8].fill(0xAB);
    let corrupt = write(&d, "corrupt.parquet", &corrupt);
    fails_with(
        &query(&[&format!("SELECT k, sum(v) FROM '{corrupt}' GROUP BY k")]),
        "Parquet error",
    );
    // Found by the battery: the Parquet reader panics on this footer; the CLI turns the panic
    // into one error line.
    let garbage = write(
        &d,
        "garbage.parquet",
        b"this is not parquet at all, not even close PAR1",
    );
    fails_with(
        &query(&[&format!("SELECT count(*) FROM '{garbage}'")]),
        "internal error",
    );
    // CSV: ragged rows and invalid UTF-8.
    let ragged = write(&d, "ragged.csv", b"k,v\n1,2\n3\n4,5\n");
    fails_with(
        &query(&[&format!("SELECT k, count(*) FROM '{ragged}' GROUP BY k")]),
        "unequal lengths",
    );
    let utf8 = write(&d, "utf8.csv", b"k,v\n1,\xff\xfe\n");
    fails_with(
        &query(&[&format!("SELECT v, count(*) FROM '{utf8}' GROUP BY v")]),
        "UTF-8",
    );
}

#[test]
fn empty_inputs_and_all_null_columns_answer_sql_results() {
    let d = dir();
    // An empty file and a header-only CSV are empty tables: COUNT 0, no groups.
    let empty = write(&d, "empty.csv", b"");
    answers(
        &query(&[
            &format!("SELECT count(*) AS n FROM '{empty}'"),
            "--format",
            "csv",
        ]),
        "n\n0\n",
    );
    let header = write(&d, "header.csv", b"k,v\n");
    answers(
        &query(&[
            &format!("SELECT k, sum(CAST(v AS BIGINT)) AS s FROM '{header}' GROUP BY k"),
            "--format",
            "csv",
        ]),
        "k,s\n",
    );
    answers(
        &query(&[
            &format!("SELECT count(*) AS n, sum(CAST(v AS BIGINT)) AS s FROM '{header}'"),
            "--format",
            "csv",
        ]),
        "n,s\n0,\n",
    );
    // All-NULL value and key columns: COUNT(x) 0, SUM/MIN/MAX/AVG NULL, one NULL group. A CSV
    // column with no value at all has type Null, which SUM rejects by name; typed, it answers.
    let nulls = write(&d, "nulls.csv", b"k,v,w\n,,1\n,,2\n");
    let t = format!("t={nulls}");
    fails_with(
        &query(&["SELECT sum(v) FROM t", "--table", &t]),
        "SUM not supported for Null",
    );
    for strategy in ["perfect", "thread_local", "shared", "sort"] {
        answers(
            &query(&[
                "SELECT CAST(k AS INT) AS k, count(*) AS n, count(v) AS c, sum(CAST(v AS BIGINT)) AS s, min(CAST(v AS DOUBLE)) AS lo, max(CAST(v AS VARCHAR)) AS hi, avg(CAST(v AS DECIMAL(10,2))) AS a, sum(w) AS sw FROM t GROUP BY 1",
                "--table", &t, "--format", "csv", "--strategy", strategy,
            ]),
            "k,n,c,s,lo,hi,a,sw\n,2,0,,,,,3\n",
        );
    }
}

#[test]
fn integer_sum_overflow_is_an_error_never_a_wrap() {
    let d = dir();
    let csv = write(&d, "o.csv", b"k,v\n1,9223372036854775807\n1,1\n2,5\n");
    let t = format!("t={csv}");
    for strategy in ["perfect", "thread_local", "shared", "sort"] {
        fails_with(
            &query(&[
                "SELECT k, sum(v) FROM t GROUP BY k",
                "--table",
                &t,
                "--strategy",
                strategy,
            ]),
            "arithmetic overflow in sum: the result does not fit Int64",
        );
    }
    // A running sum that leaves Int64 and comes back is exact (128-bit accumulators in every
    // strategy; found by the operator fuzz target, where `shared` answered and the others
    // raised).
    let csv = write(
        &d,
        "o2.csv",
        b"k,v\n1,9223372036854775807\n1,9223372036854775807\n1,-9223372036854775807\n",
    );
    for strategy in ["perfect", "thread_local", "shared", "sort"] {
        answers(
            &query(&[
                &format!("SELECT k, sum(v) AS s FROM '{csv}' GROUP BY k"),
                "--format",
                "csv",
                "--strategy",
                strategy,
            ]),
            "k,s\n1,9223372036854775807\n",
        );
    }
}

#[test]
fn a_memory_budget_spills_and_answers_as_without_it() {
    let d = dir();
    let data = d.join("many.parquet");
    let out = grouper()
        .args([
            "gen",
            "synthetic",
            "--rows",
            "400000",
            "--groups",
            "300000",
            "--key-type",
            "str",
            "-o",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success());
    // Integers only, so the answer does not depend on the order of additions.
    let sql = format!(
        "SELECT count(*) AS n, sum(c) AS rows, min(k) AS lo, max(k) AS hi, sum(m) AS m \
         FROM (SELECT k, count(*) AS c, max(length(k)) AS m FROM '{}' GROUP BY k)",
        data.display()
    );
    let whole = query(&[&sql, "--backend", "cpu", "--format", "csv"]);
    assert!(
        whole.status.success(),
        "{}",
        String::from_utf8_lossy(&whole.stderr)
    );
    let want = String::from_utf8_lossy(&whole.stdout).to_string();
    assert!(want.contains("400000"), "{want}");
    // 300,000 groups of string keys under 4 MB: every strategy spills and answers the same.
    for strategy in ["thread_local", "shared", "sort"] {
        let args = [
            &sql,
            "--backend",
            "cpu",
            "--memory-limit",
            "4M",
            "--strategy",
            strategy,
        ];
        answers(&query(&[&args[..], &["--format", "csv"]].concat()), &want);
        let explained = query(&[&args[..], &["--explain"]].concat());
        let text = String::from_utf8_lossy(&explained.stdout);
        assert!(text.contains("spilled"), "{strategy}: {text}");
    }
    // A direct-index table wider than the budget cannot spill its way through: one clear line.
    let wide = format!(
        "SELECT k, sum(v) FROM '{}' GROUP BY k",
        d.join("wide.parquet").display()
    );
    let out = grouper()
        .args([
            "gen",
            "synthetic",
            "--rows",
            "100000",
            "--groups",
            "1000000",
            "-o",
        ])
        .arg(d.join("wide.parquet"))
        .output()
        .unwrap();
    assert!(out.status.success());
    fails_with(
        &query(&[
            &wide,
            "--backend",
            "cpu",
            "--memory-limit",
            "2M",
            "--strategy",
            "perfect",
        ]),
        "memory limit exceeded",
    );
    fails_with(
        &query(&["SELECT 1", "--memory-limit", "lots"]),
        "invalid size 'lots'",
    );
}

#[test]
fn a_static_hybrid_share_must_be_a_fraction() {
    fails_with(
        &query(&["SELECT 1", "--hybrid-cpu-share", "1.5"]),
        "a CPU share is a fraction from 0 to 1, not 1.5",
    );
    fails_with(
        &query(&["SELECT 1", "--hybrid-cpu-share", "half"]),
        "'half' is not a number",
    );
}

#[test]
fn identity_hashing_refuses_the_modulo_mapping() {
    // Bit-reversed small keys are all zero in the bits modulo reads: one bucket, quadratic.
    let d = dir();
    let csv = write(&d, "m.csv", b"k,v\n1,10\n2,5\n");
    let t = format!("t={csv}");
    let sql = "SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k";
    let args = [sql, "--table", &t, "--backend", "cpu", "--hash", "identity"];
    fails_with(
        &query(&[&args[..], &["--bucket-map", "modulo"]].concat()),
        "the identity hash is for the high_bits bucket mapping",
    );
    let out = query(&[&args[..], &["--bucket-map", "high_bits", "--format", "csv"]].concat());
    answers(&out, "k,s\n1,10\n2,5\n");
}

#[test]
fn distributed_options_are_checked() {
    fails_with(
        &query(&["SELECT 1", "--workers", "notaurl"]),
        "--workers: 'notaurl' is not a URL such as http://host:50061",
    );
    fails_with(
        &query(&["SELECT 1", "--bytes-per-task", "64M"]),
        "--bytes-per-task needs --workers",
    );
}

#[test]
fn gpu_faults_without_a_gpu() {
    if grouper_gpu::Gpu::get().is_ok() {
        eprintln!("a GPU is present: scripts/device-test.sh faults covers this machine");
        return;
    }
    let d = dir();
    let csv = write(&d, "g.csv", b"k,v\n1,10\n1,20\n2,5\n");
    let t = format!("t={csv}");
    let sql = "SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k";
    fails_with(
        &query(&[sql, "--table", &t, "--backend", "gpu"]),
        "no GPU available",
    );
    fails_with(
        &query(&[
            sql,
            "--table",
            &t,
            "--backend",
            "gpu",
            "--strategy",
            "block_local",
        ]),
        "no GPU available",
    );
    // auto with a GPU strategy falls back to the CPU, and --explain says why.
    answers(
        &query(&[
            sql,
            "--table",
            &t,
            "--strategy",
            "block_local",
            "--format",
            "csv",
        ]),
        "k,s\n1,30\n2,5\n",
    );
    let out = query(&[sql, "--table", &t, "--strategy", "global", "--explain"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("backend=cpu (no GPU available"), "{text}");
}

#[test]
fn ctrl_c_stops_a_long_query_promptly() {
    let mut child = grouper()
        .args(["demo", "--sf", "20"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let status = crate::process::interrupt(&mut child, Duration::from_secs(5));
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        err.contains("error: interrupted") && !err.contains("panicked"),
        "{err}"
    );
}

/// A CPU without an extension the build enabled (x86-64-v3's, `.cargo/config.toml`) is told
/// so in one line before anything runs, and the same command runs where it has them.
#[test]
fn a_cpu_lacking_the_builds_extensions_is_told_so() {
    let built_for_v3 = cfg!(all(
        target_os = "linux",
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "bmi2"
    ));
    for lacking in ["avx2", "bmi2"] {
        let out = grouper()
            .env("GROUPER_CPU_ASSUME_MISSING", lacking)
            .arg("--version")
            .output()
            .unwrap();
        if built_for_v3 {
            fails_with(
                &out,
                &format!("built for CPUs with {lacking}, which this one lacks"),
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("target-cpu=native"), "{err}");
        } else {
            assert!(out.status.success());
        }
    }
    let out = grouper().arg("--version").output().unwrap();
    assert!(out.status.success());
}

#[test]
fn gen_tpch_writes_every_generated_row_and_refuses_a_bad_scale_factor() {
    let d = dir().join("tpch");
    let out = grouper()
        .args(["gen", "tpch", "--sf", "0.01", "-o"])
        .arg(&d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The files hold exactly the rows the in-memory generator makes.
    let rows: usize = grouper_cli::tpch::lineitem(0.01, 2, &|_| {})
        .unwrap()
        .iter()
        .flatten()
        .map(|b| b.num_rows())
        .sum();
    let sql = format!(
        "SELECT count(*) AS n FROM '{}/lineitem/*.parquet'",
        d.display()
    );
    answers(&query(&[&sql, "--format", "csv"]), &format!("n\n{rows}\n"));
    let bad = d.join("bad");
    let out = grouper()
        .args(["gen", "tpch", "--sf", "0", "-o"])
        .arg(&bad)
        .output()
        .unwrap();
    fails_with(&out, "scale factor must be positive");
    assert!(!bad.exists(), "nothing made for a refused scale factor");
    std::fs::remove_dir_all(&d).ok();
}
