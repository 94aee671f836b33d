//! The `grouper` command-line tool. Errors print as one line on stderr with exit code 2.
//! No `unwrap`, `expect`, `panic!` or unchecked indexing outside tests (clippy, in CI).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use std::process::ExitCode;
use std::sync::Mutex;

/// mimalloc, as datafusion-cli uses: glibc's malloc maps and unmaps each large buffer (a
/// decompressed Parquet page, a column chunk), so that every read faults fresh zeroed pages
/// in; on one core, building the page images of TPC-H lineitem's Q1 columns ran at 0.80 GB/s
/// with glibc and 1.42 GB/s with mimalloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The message and place of the last panic, for the one-line error (see `main`).
static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// mimalloc's `purge_delay` option (its index in mimalloc 3's `mi_option_e`, which
/// libmimalloc-sys 0.1.49 builds but does not name).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long memory a query freed stays mapped for the next one (ms). mimalloc returns it to
/// the OS after a second by default, and the next query with many groups then faults every
/// page in again (and has the kernel zero it): `bench cpu-sweep` on 2 threads here, 2^24
/// rows, engines in turns with seconds of DuckDB between them, ran `auto` 899 and 537 ms at
/// 2^24 uniform and zipf groups, 502 and 381 with this delay (DataFusion alone 959 and 346,
/// unchanged). A query in a fresh process pays its first touch of every page either way.
const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

/// The purge delay for this process: none under `--memory-limit`, where freed memory must leave
/// the resident set at once. A spilling aggregation frees its groups at every spill and grows
/// them again: db-benchmark q10's shape at 1e7 rows under `--memory-limit 512M` on 2 threads
/// here peaked at 1.22-1.28 GiB with the delay, 0.80-0.87 GiB without, taking 25-35% longer
/// (the kernel zeroes the pages again; DataFusion alone: 1.09 GiB). Read from the arguments
/// before any thread starts, since the option must be set then.
fn purge_delay_ms() -> std::ffi::c_long {
    let bounded =
        std::env::args().any(|a| a == "--memory-limit" || a.starts_with("--memory-limit="));
    if bounded {
        0
    } else {
        PURGE_DELAY_MS
    }
}

fn main() -> ExitCode {
    // SAFETY: `mi_option_set` stores a value in mimalloc's option table, which is valid for
    // the whole process; it is called before any thread but this one runs, and option 15 is
    // `purge_delay` in the mimalloc that libmimalloc-sys 0.1.49 compiles (checked by
    // `purge_delay_is_mimallocs_option_15` below).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, purge_delay_ms()) };
    grouper_core::trace::start();
    // A panic is a bug, ours or a dependency's (the Parquet reader panics on some malformed
    // footers): it must still end as one clear error line and exit code 2, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("unknown cause");
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut p) = PANIC.lock() {
            p.get_or_insert_with(|| format!("{msg}{at}"));
        }
    }));
    let result =
        std::panic::catch_unwind(grouper_cli::cli::run).unwrap_or_else(|_| Err(panicked()));
    grouper_core::trace::event(|| "main returns".into());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", grouper_shell::one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// The error for a caught panic.
fn panicked() -> anyhow::Error {
    let what = PANIC
        .lock()
        .ok()
        .and_then(|p| p.clone())
        .unwrap_or_else(|| "unknown cause".into());
    anyhow::anyhow!("internal error (malformed input reached a check that should have reported it; please report this): {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_delay_is_mimallocs_option_15() {
        // mimalloc's default purge delay is 1000 ms and no other option defaults to 1000: a
        // renumbered option table would read another value here.
        // SAFETY: reads an entry of mimalloc's option table (valid for the process).
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert!(default == 1000 || default == PURGE_DELAY_MS, "{default}");
    }
}
