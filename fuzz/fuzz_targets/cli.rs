//! The CLI's argument and file handling: the fuzzer's bytes become a data file (Parquet, CSV,
//! JSON or Arrow by the first byte) and an argument list, run through the `grouper` binary
//! ($GROUPER_BIN). Any outcome but success or one `error:` line with exit code 2 is a crash:
//! a panic (reported as "internal error"), a signal, or a multi-line error.
#![no_main]

use std::process::Command;

use libfuzzer_sys::fuzz_target;

const EXT: [&str; 4] = ["parquet", "csv", "json", "arrow"];
const WORDS: [&str; 14] = [
    "--strategy", "sort", "--backend", "cpu", "--format", "csv", "--threads", "0", "--memory-limit",
    "1K", "--fill-factor", "2", "--hash", "--batch-rows",
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let split = rest.len() / 2;
    let (file_bytes, arg_bytes) = rest.split_at(split);
    let dir = std::env::temp_dir().join(format!("grouper-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("input.{}", EXT[usize::from(sel) % 4]));
    if std::fs::write(&path, file_bytes).is_err() {
        return;
    }
    let mut args = vec![
        "query".to_string(),
        "SELECT count(*), count(DISTINCT 1) FROM t GROUP BY 1".into(),
        "--table".into(),
        format!("t={}", path.display()),
    ];
    for &b in arg_bytes.iter().take(6) {
        args.push(WORDS[usize::from(b) % WORDS.len()].to_string());
    }
    let bin = std::env::var("GROUPER_BIN").unwrap_or_else(|_| "target/release/grouper".into());
    let Ok(out) = Command::new(bin).args(&args).output() else { return };
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {}
        Some(2) => assert!(
            err.starts_with("error: ") && err.lines().count() == 1 && !err.contains("internal error"),
            "{args:?}: {err}"
        ),
        code => panic!("{args:?}: exit {code:?}: {err}"),
    }
});
