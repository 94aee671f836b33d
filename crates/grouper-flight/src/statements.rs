//! What the server keeps between a client's calls: prepared statements (their SQL, under a
//! handle), planned queries waiting for their `DoGet` (the physical plan, under a one-use
//! ticket), and running queries (a switch that cancels each).
//!
//! Handles and tickets are numbers from one counter, sent as 8 bytes. A client may prepare
//! statements and plan queries it never runs; both maps keep at most their bound, the oldest
//! entries going first, so that such a client cannot make the server grow without end.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use datafusion::physical_plan::ExecutionPlan;
use tokio::sync::oneshot;

/// Prepared statements kept at most.
const MOST_PREPARED: usize = 4096;
/// Planned queries kept at most while they wait for their `DoGet`.
const MOST_PLANNED: usize = 1024;

/// A handle or ticket number.
pub(crate) type Id = u64;

/// `id` as the bytes a client holds.
pub(crate) fn to_bytes(id: Id) -> Vec<u8> {
    id.to_be_bytes().to_vec()
}

/// The number in `bytes`, if they are one of ours.
pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Id> {
    Some(Id::from_be_bytes(bytes.try_into().ok()?))
}

/// The server's statements.
#[derive(Default)]
pub(crate) struct Statements {
    next: AtomicU64,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    prepared: BTreeMap<Id, Arc<str>>,
    planned: BTreeMap<Id, Arc<dyn ExecutionPlan>>,
    running: HashMap<Id, oneshot::Sender<()>>,
}

/// What a cancel request found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cancel {
    /// A planned query (now dropped) or a running one (now told to stop).
    Cancelled,
    /// Nothing under that ticket: it finished, was never ours, or was cancelled before.
    NotFound,
}

/// A running query's place in the registry: dropped when its stream ends or is dropped, which
/// takes the query out of the running ones.
pub(crate) struct Running {
    statements: Arc<Statements>,
    ticket: Id,
    /// Fires when the query is cancelled.
    pub(crate) cancelled: oneshot::Receiver<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.statements.kept().running.remove(&self.ticket);
    }
}

impl Statements {
    fn kept(&self) -> MutexGuard<'_, Kept> {
        // The maps stay consistent whatever panicked while holding them (every change is one
        // insert or remove), so a poisoned lock is taken as it is.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn id(&self) -> Id {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Keeps `sql` as a prepared statement; its handle.
    pub(crate) fn prepare(&self, sql: &str) -> Id {
        let id = self.id();
        let mut kept = self.kept();
        kept.prepared.insert(id, Arc::from(sql));
        while kept.prepared.len() > MOST_PREPARED {
            kept.prepared.pop_first();
        }
        id
    }

    /// The SQL of prepared statement `handle`.
    pub(crate) fn prepared(&self, handle: Id) -> Option<Arc<str>> {
        self.kept().prepared.get(&handle).cloned()
    }

    /// Forgets prepared statement `handle`.
    pub(crate) fn close(&self, handle: Id) {
        self.kept().prepared.remove(&handle);
    }

    /// Keeps a planned query until its `DoGet`; its ticket.
    pub(crate) fn plan(&self, plan: Arc<dyn ExecutionPlan>) -> Id {
        let id = self.id();
        let mut kept = self.kept();
        kept.planned.insert(id, plan);
        while kept.planned.len() > MOST_PLANNED {
            kept.planned.pop_first();
        }
        id
    }

    /// Takes the planned query under `ticket` to run it (a ticket runs once).
    pub(crate) fn start(self: &Arc<Self>, ticket: Id) -> Option<(Arc<dyn ExecutionPlan>, Running)> {
        let mut kept = self.kept();
        let plan = kept.planned.remove(&ticket)?;
        let (tx, rx) = oneshot::channel();
        kept.running.insert(ticket, tx);
        let running = Running {
            statements: Arc::clone(self),
            ticket,
            cancelled: rx,
        };
        Some((plan, running))
    }

    /// Cancels the query under `ticket`, planned or running.
    pub(crate) fn cancel(&self, ticket: Id) -> Cancel {
        let mut kept = self.kept();
        if kept.planned.remove(&ticket).is_some() {
            return Cancel::Cancelled;
        }
        match kept.running.remove(&ticket) {
            Some(stop) => {
                // The stream may have ended since; then there is nothing left to stop.
                let _ = stop.send(());
                Cancel::Cancelled
            }
            None => Cancel::NotFound,
        }
    }

    /// Queries running now.
    pub(crate) fn running(&self) -> usize {
        self.kept().running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::physical_plan::empty::EmptyExec;

    fn plan() -> Arc<dyn ExecutionPlan> {
        Arc::new(EmptyExec::new(Arc::new(arrow::datatypes::Schema::empty())))
    }

    #[test]
    fn a_ticket_runs_once_and_cancels_while_planned_or_running() {
        let s = Arc::new(Statements::default());
        let t = s.plan(plan());
        let (_, mut running) = s.start(t).unwrap();
        assert!(s.start(t).is_none(), "a ticket runs once");
        assert_eq!(s.running(), 1);
        assert_eq!(s.cancel(t), Cancel::Cancelled);
        assert!(running.cancelled.try_recv().is_ok());
        drop(running);
        assert_eq!(s.running(), 0);
        assert_eq!(s.cancel(t), Cancel::NotFound);
        let t = s.plan(plan());
        assert_eq!(s.cancel(t), Cancel::Cancelled);
        assert!(s.start(t).is_none(), "a cancelled ticket does not run");
        // A stream that ends takes itself out of the running ones.
        let t = s.plan(plan());
        drop(s.start(t).unwrap());
        assert_eq!((s.running(), s.cancel(t)), (0, Cancel::NotFound));
    }

    #[test]
    fn kept_statements_are_bounded_oldest_first() {
        let s = Statements::default();
        let first = s.prepare("SELECT 1");
        let ids: Vec<Id> = (0..MOST_PREPARED).map(|_| s.prepare("SELECT 2")).collect();
        assert!(s.prepared(first).is_none());
        assert_eq!(s.prepared(ids[0]).as_deref(), Some("SELECT 2"));
        s.close(ids[0]);
        assert!(s.prepared(ids[0]).is_none());
        let first = s.plan(plan());
        for _ in 0..MOST_PLANNED {
            s.plan(plan());
        }
        assert_eq!(s.cancel(first), Cancel::NotFound);
        assert_eq!(from_bytes(&to_bytes(77)), Some(77));
        assert_eq!(from_bytes(b"short"), None);
    }
}
