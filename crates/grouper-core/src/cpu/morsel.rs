//! Morsel-driven scheduling (Leis et al.): one worker per pool thread, each pulling the next
//! morsel index from a shared counter, so fast threads take more morsels and skew balances out.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{GrouperError, Result};

/// Runs `work(state, index)` for every index in `0..n` on all threads of the current rayon pool,
/// each thread with its own state from `init`. Returns the states of the threads, or the first
/// error (after which remaining work is skipped).
pub fn run_workers<S, I, W>(n: usize, init: I, work: W) -> Result<Vec<S>>
where
    S: Send,
    I: Fn() -> Result<S> + Sync,
    W: Fn(&mut S, usize) -> Result<()> + Sync,
{
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<GrouperError>> = Mutex::new(None);
    let threads = rayon::current_num_threads().min(n.max(1));
    let states: Vec<Option<S>> = rayon::broadcast(|ctx| {
        if ctx.index() >= threads {
            return None;
        }
        let fail = |e: GrouperError| {
            failed.store(true, Ordering::Relaxed);
            first_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        };
        let mut state = match init() {
            Ok(s) => s,
            Err(e) => {
                fail(e);
                return None;
            }
        };
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            if let Err(e) = work(&mut state, i) {
                fail(e);
                break;
            }
        }
        Some(state)
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok(states.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_once() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let states = pool
            .install(|| {
                run_workers(
                    1000,
                    || Ok(Vec::new()),
                    |s: &mut Vec<usize>, i| {
                        s.push(i);
                        Ok(())
                    },
                )
            })
            .unwrap();
        let mut all: Vec<usize> = states.into_iter().flatten().collect();
        all.sort();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn first_error_wins() {
        let r = run_workers(
            100,
            || Ok(()),
            |_, i| {
                if i == 7 {
                    Err(GrouperError::InvalidInput("seven".into()))
                } else {
                    Ok(())
                }
            },
        );
        assert!(matches!(r, Err(GrouperError::InvalidInput(m)) if m == "seven"));
    }
}
