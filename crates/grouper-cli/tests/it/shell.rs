//! The shell as a person uses it: `grouper` on a terminal (a pseudo-terminal, read through
//! rexpect), typing statements, reading what they print, cancelling a long one with Ctrl-C and
//! going on; and the same session without a prompt (`-c`, `-f`, standard input).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rexpect::reader::Options;
use rexpect::session::{spawn_with_options, PtySession};

/// The prompt the shell prints.
const PROMPT: &str = "grouper> ";

/// `grouper` on a pseudo-terminal, its history in `history`, and its process id.
fn terminal(history: &std::path::Path) -> (PtySession, i32) {
    // Through a shell that prints its process id and becomes grouper (rexpect keeps the pid
    // to itself). grouper's own operator for every aggregation, so that the statement
    // cancelled below is grouper's (`auto` may leave it to DataFusion's).
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "echo pid=$$; exec \"$0\" --grouper-only",
        env!("CARGO_BIN_EXE_grouper"),
    ])
    .env("TERM", "xterm")
    .env("GROUPER_HISTORY", history);
    let options = Options::new()
        .timeout_ms(Some(60_000))
        .strip_ansi_escape_codes(true);
    let mut p = spawn_with_options(cmd, options).expect("start grouper on a pseudo-terminal");
    let (_, line) = p.exp_regex(r"pid=\d+").unwrap();
    let pid = line.trim_start_matches("pid=").parse().unwrap();
    (p, pid)
}

/// Types `line` and Enter.
fn type_line(p: &mut PtySession, line: &str) {
    p.send(line).unwrap();
    p.send("\r").unwrap();
    p.flush().unwrap();
}

#[test]
fn a_person_types_statements_cancels_one_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let (mut p, pid) = terminal(&history);
    p.exp_string("Ctrl-C cancels a statement").unwrap();
    p.exp_string(PROMPT).unwrap();

    // A table kept in memory across statements.
    type_line(
        &mut p,
        "CREATE TABLE t AS SELECT value % 7 AS k, value AS v FROM generate_series(1, 100000);",
    );
    p.exp_string(PROMPT).unwrap();
    // A statement over three lines runs once its ';' is typed.
    type_line(&mut p, "SELECT k, count(*) AS n, sum(v) AS s");
    type_line(&mut p, "FROM t GROUP BY k");
    type_line(&mut p, "ORDER BY k;");
    p.exp_string("| 0 | 14285 | 714264285 |").unwrap();
    p.exp_string("| 6 | 14285 | 714250000 |").unwrap();
    p.exp_string(PROMPT).unwrap();

    // A statement that would run for minutes, cancelled by Ctrl-C once its spinner shows.
    type_line(
        &mut p,
        "SELECT value % 7 AS k, count(*) AS n FROM generate_series(1, 100000000000) GROUP BY k;",
    );
    p.exp_string("running (Ctrl-C cancels)").unwrap();
    let pressed = Instant::now();
    p.send_control('c').unwrap();
    p.exp_string("error: cancelled").unwrap();
    p.exp_string(PROMPT).unwrap();
    assert!(
        pressed.elapsed() < Duration::from_secs(10),
        "cancelling took {:?}",
        pressed.elapsed()
    );
    // And its workers stopped: the idle shell uses no CPU time.
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_millis(1500));
    let spent = cpu_seconds(pid) - before;
    assert!(
        spent < 0.3,
        "the cancelled statement still ran: {spent:.2} s of CPU in 1.5 s"
    );

    // The shell goes on, its table still there.
    type_line(
        &mut p,
        "SELECT sum(n) AS total FROM (SELECT count(*) AS n FROM t GROUP BY k);",
    );
    p.exp_string("| 100000 |").unwrap();
    p.exp_string(PROMPT).unwrap();

    // Ctrl-C while typing drops the line, not the shell.
    p.send("SELECT garbage").unwrap();
    p.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    p.send_control('c').unwrap();
    // The prompt comes back empty (keys typed before it would be flushed with the line).
    p.exp_string(PROMPT).unwrap();
    type_line(&mut p, ".tables");
    let (before, _) = p.exp_regex(r"\bt\r?\n").unwrap();
    assert!(!before.contains("error"), "{before}");
    p.exp_string(PROMPT).unwrap();

    // A bad statement prints one error line, and the shell goes on.
    type_line(&mut p, "SELECT nope FROM t;");
    p.exp_string("error: ").unwrap();
    p.exp_string(PROMPT).unwrap();

    // Dot-commands change the output.
    type_line(&mut p, ".mode csv");
    p.exp_string(PROMPT).unwrap();
    type_line(&mut p, ".timer on");
    p.exp_string(PROMPT).unwrap();
    type_line(
        &mut p,
        "SELECT k, max(v) AS m FROM t WHERE k = 3 GROUP BY k;",
    );
    p.exp_string("k,m").unwrap();
    p.exp_string("3,99998").unwrap();
    p.exp_string("Run Time: ").unwrap();
    p.exp_string(PROMPT).unwrap();
    type_line(&mut p, ".schema t");
    p.exp_string("CREATE TABLE t(k Int64 NOT NULL, v Int64 NOT NULL);")
        .unwrap();
    p.exp_string(PROMPT).unwrap();

    // A co-processed batch is cancelled by Ctrl-C too.
    type_line(&mut p, ".coprocess on");
    p.exp_string(PROMPT).unwrap();
    type_line(
        &mut p,
        "SELECT value % 7 AS k, count(*) AS n FROM generate_series(1, 100000000000) GROUP BY k;",
    );
    std::thread::sleep(Duration::from_millis(1500));
    let pressed = Instant::now();
    p.send_control('c').unwrap();
    p.exp_string("error: cancelled").unwrap();
    p.exp_string(PROMPT).unwrap();
    assert!(
        pressed.elapsed() < Duration::from_secs(10),
        "cancelling the batch took {:?}",
        pressed.elapsed()
    );
    type_line(&mut p, ".coprocess off");
    p.exp_string(PROMPT).unwrap();

    type_line(&mut p, ".quit");
    p.exp_eof().unwrap();
    let kept = std::fs::read_to_string(&history).unwrap();
    assert!(kept.contains("SELECT nope FROM t;"), "{kept}");
}

/// User and system CPU time of process `pid` so far, in seconds (Linux's /proc, in USER_HZ
/// ticks of 1/100 s).
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which may hold spaces) start at the state, field 3;
    // utime and stime are fields 14 and 15.
    let after = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// `grouper` with `args`, `stdin` on its standard input: (exit code, stdout, stderr).
fn grouper(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_grouper"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn scripts_run_without_a_prompt_and_stop_at_the_first_error() {
    let script = "CREATE TABLE t AS SELECT value % 3 AS k FROM generate_series(1, 30);\n\
                  .mode csv\n\
                  SELECT k, count(*) AS n FROM t GROUP BY k ORDER BY k;\n\
                  SELECT 'a;b' AS s -- no ';' ends the last statement";
    let expected = "k,n\n0,10\n1,10\n2,10\ns\na;b\n";
    let (code, out, err) = grouper(&["-c", script], "");
    assert_eq!((code, out.as_str(), err.as_str()), (0, expected, ""));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.sql");
    std::fs::write(&file, script).unwrap();
    let (code, out, _) = grouper(&["-f", file.to_str().unwrap()], "");
    assert_eq!((code, out.as_str()), (0, expected));
    let (code, out, _) = grouper(&[], script);
    assert_eq!((code, out.as_str()), (0, expected));
    // `.read` runs a file inside a session.
    let (code, out, _) = grouper(&["--format", "csv"], &format!(".read {}\n", file.display()));
    assert_eq!((code, out.as_str()), (0, expected));

    // The first error ends the script with one line and exit code 2; nothing after it runs.
    let (code, out, err) = grouper(
        &["--format", "csv"],
        "SELECT 1 AS a;\nSELECT nope;\nSELECT 2 AS b;\n",
    );
    assert_eq!(code, 2);
    assert_eq!(out, "a\n1\n");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: ") && err.contains("nope"), "{err}");
    let (code, _, err) = grouper(&[], ".mode xml\n");
    assert_eq!(
        (code, err.trim()),
        (2, "error: .mode takes table, csv or json, not 'xml'")
    );
    let (code, _, err) = grouper(&["-f", "/no/such/file.sql"], "");
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: cannot read /no/such/file.sql"),
        "{err}"
    );
}

#[test]
fn backend_switches_keep_the_tables() {
    let script =
        "CREATE TABLE t AS SELECT value % 5 AS k, value AS v FROM generate_series(1, 1000);\n\
                  .mode csv\n\
                  .backend datafusion\n\
                  SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k;\n\
                  .backend cpu\n\
                  SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k;\n";
    let (code, out, err) = grouper(&[], script);
    assert_eq!(code, 0, "{err}");
    let one = "k,s\n0,100500\n1,99700\n2,99900\n3,100100\n4,100300\n";
    assert_eq!(out, format!("{one}{one}"));
}

/// `--coprocess` (and `.coprocess on`): consecutive queries run as one batch, results in the
/// script's order and equal to running them one by one; statements that change the session
/// end a batch. Without a GPU the CPU runs the batch, saying so once; with one (the device
/// machine, GROUPER_REQUIRE_GPU) the GPU takes the costliest query.
#[test]
fn a_coprocessed_batch_answers_in_order() {
    let queries = "SELECT k, count(*) AS n FROM t GROUP BY k ORDER BY k;\n\
                   SELECT sum(v) AS s FROM t;\n\
                   SELECT k, max(v) AS m FROM big GROUP BY k ORDER BY k;\n";
    let script = format!(
        "CREATE TABLE t AS SELECT value % 3 AS k, value AS v FROM generate_series(1, 30);\n\
         CREATE TABLE big AS SELECT value % 4 AS k, value AS v FROM generate_series(1, 200000);\n\
         .mode csv\n{queries}\
         CREATE TABLE u AS SELECT 1 AS x;\n\
         SELECT x FROM u;\n"
    );
    let (code, alone, err) = grouper(&[], &script);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = grouper(&["--coprocess"], &script);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, alone);
    assert!(
        out.starts_with("k,n\n0,10\n1,10\n2,10\ns\n465\nk,m\n"),
        "{out}"
    );
    if std::env::var("GROUPER_REQUIRE_GPU").is_err() && !err.is_empty() {
        assert_eq!(err.lines().count(), 1, "said once: {err}");
        assert!(err.contains("the batch runs on the CPU"), "{err}");
    }
    // With the timer: each query's side, and the batch.
    let (code, out, err) = grouper(&[], &format!(".coprocess on\n.timer on\n{script}"));
    assert_eq!(code, 0, "{err}");
    let sides = out.lines().filter(|l| l.starts_with("Run Time:")).count();
    assert!(sides >= 4, "{out}");
    let batch = out
        .lines()
        .find(|l| l.starts_with("Batch: 3 queries"))
        .unwrap_or_default();
    let split = if std::env::var("GROUPER_REQUIRE_GPU").is_ok() {
        "on the CPU and"
    } else {
        "all on the CPU (no GPU)"
    };
    assert!(batch.contains(split), "{out}");
    if std::env::var("GROUPER_REQUIRE_GPU").is_ok() {
        assert!(
            out.contains("s on the gpu (estimated cost: 200000 rows"),
            "{out}"
        );
    }
}
