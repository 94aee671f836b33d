//! Admission: a bounded number of statements plan or run at once, a bounded number wait.
//!
//! Each query already uses every core (DataFusion's partitions, grouper's workers) and the GPU,
//! so running all of 32 clients' queries at once only divides the machine 32 ways and multiplies
//! the memory held; a few at a time finish sooner, each. Waiting is fair (first come, first
//! served: tokio's semaphore queues its waiters), and a queue past its bound answers at once
//! that the server is busy rather than letting calls pile up without end.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

/// The slots statements run in, and the queue before them.
#[derive(Debug)]
pub struct Admission {
    slots: Arc<Semaphore>,
    concurrency: usize,
    waiting: Arc<AtomicUsize>,
    queue: usize,
}

/// A statement's slot, held while it plans or until its result stream ends or is dropped.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

/// One place in the queue, given back however the wait ends (a slot, or a client gone).
struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Admission {
    /// `concurrency` slots (at least one) and a queue of `queue`.
    pub fn new(concurrency: usize, queue: usize) -> Admission {
        let concurrency = concurrency.max(1);
        Admission {
            slots: Arc::new(Semaphore::new(concurrency)),
            concurrency,
            waiting: Arc::new(AtomicUsize::new(0)),
            queue,
        }
    }

    /// A slot: at once if one is free, else after those queued before; `ResourceExhausted`
    /// if the queue is full.
    pub async fn admit(&self) -> Result<Slot, Status> {
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(Slot { _permit: permit });
        }
        let place = Waiting(Arc::clone(&self.waiting));
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.queue {
            drop(place);
            return Err(Status::resource_exhausted(format!(
                "the server is busy: {} statements running and {} waiting, its limits \
                 (grouper serve --concurrency, --queue); try again later",
                self.concurrency, self.queue
            )));
        }
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| Status::unavailable("the server is shutting down"))?;
        drop(place);
        Ok(Slot { _permit: permit })
    }

    /// Statements waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Statements holding a slot now.
    pub fn admitted(&self) -> usize {
        self.concurrency - self.slots.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_then_queue_then_busy() {
        let admission = Admission::new(2, 1);
        let a = admission.admit().await.unwrap();
        let _b = admission.admit().await.unwrap();
        assert_eq!(admission.admitted(), 2);
        // The third waits (the queue holds one); the fourth is turned away.
        let admission = Arc::new(admission);
        let third = tokio::spawn({
            let admission = Arc::clone(&admission);
            async move { admission.admit().await.map(|_| ()) }
        });
        while admission.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        let busy = admission.admit().await.unwrap_err();
        assert_eq!(busy.code(), tonic::Code::ResourceExhausted);
        assert!(busy.message().contains("busy"), "{}", busy.message());
        // A slot freed lets the waiting one in, and the queue empties.
        drop(a);
        third.await.unwrap().unwrap();
        assert_eq!(admission.waiting(), 0);
    }

    #[tokio::test]
    async fn a_client_gone_while_queued_gives_its_place_back() {
        let admission = Admission::new(1, 1);
        let _held = admission.admit().await.unwrap();
        let wait = admission.admit();
        let gone = tokio::time::timeout(std::time::Duration::from_millis(20), wait).await;
        assert!(gone.is_err(), "the wait should still be waiting");
        assert_eq!(admission.waiting(), 0);
        let wait = admission.admit();
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(20), wait)
                .await
                .is_err(),
            "the freed place is taken again, not refused as busy"
        );
    }
}
