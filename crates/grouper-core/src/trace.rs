//! `GROUPER_TRACE=1`: a timeline on standard error of where a query's time goes — GPU start,
//! compiles, the page stream's readers and copies — in milliseconds since the process began
//! tracing ([`start`], called first thing by the CLI). A fresh process's fixed costs and a
//! stream's bound are found with it, not guessed; off, each call is one relaxed load.

use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Option<Instant>> = OnceLock::new();

fn origin() -> Option<Instant> {
    *START.get_or_init(|| std::env::var_os("GROUPER_TRACE").map(|_| Instant::now()))
}

/// Anchors the timeline (the CLI calls it as it starts; otherwise the first event does).
pub fn start() {
    let _ = origin();
}

/// Whether the timeline is printed.
pub fn enabled() -> bool {
    origin().is_some()
}

/// Prints `what()` at its time on the timeline, when tracing.
pub fn event(what: impl FnOnce() -> String) {
    if let Some(t) = origin() {
        eprintln!(
            "[trace {:>9.1} ms] {}",
            t.elapsed().as_secs_f64() * 1e3,
            what()
        );
    }
}
