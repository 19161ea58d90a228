//! Batched wake-ups of bus subscribers.
//!
//! A subscriber waiting for events is woken by the first event published after it went to
//! sleep. When events are published in a burst from a session arbiter (a cancelled tree ends
//! hundreds of sessions at once), waking a subscriber that lives on another thread per event
//! costs a system call and, on a busy machine, a context switch each time. Instead, a wake that
//! happens on a session arbiter is held back until the publishing task yields: the first one
//! schedules a flush task on that thread, later ones join it. The subscriber then finds the
//! whole burst in its buffer. Elsewhere wakes go out at once.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::task::{Wake, Waker};

use tokio::runtime::Handle;

thread_local! {
    /// This thread is a session arbiter: wakes of subscribers are batched here.
    static BATCHING: Cell<bool> = const { Cell::new(false) };
    /// Wakes held back on this thread until its flush task runs.
    static HELD: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
}

/// Batches the wakes of bus subscribers on the calling thread (a session arbiter's).
pub(crate) fn batch_wakes_here() {
    BATCHING.set(true);
}

/// A subscriber's waker whose wakes on an arbiter thread wait for that thread's flush.
pub(super) struct Batched(Waker);

impl Batched {
    /// `waker` with its wakes batched.
    pub(super) fn waker(waker: Waker) -> Waker {
        Waker::from(Arc::new(Batched(waker)))
    }
}

impl Wake for Batched {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !BATCHING.get() {
            self.0.wake_by_ref();
            return;
        }
        let first = HELD.with(|held| {
            let mut held = held.borrow_mut();
            held.push(self.0.clone());
            held.len() == 1
        });
        if first {
            // Runs once the publishing task yields; wakes what it holds even if the task is
            // dropped unrun (the runtime shutting down), or at once without a runtime here.
            let flush = Flush;
            if let Ok(runtime) = Handle::try_current() {
                runtime.spawn(async move {
                    let _flush = flush;
                });
            }
        }
    }
}

/// Wakes every subscriber held back on this thread when dropped.
struct Flush;

impl Drop for Flush {
    fn drop(&mut self) {
        let held = HELD.with(|held| std::mem::take(&mut *held.borrow_mut()));
        for waker in held {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn wakes_on_a_current_thread_runtime_wait_for_the_task_to_yield() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let inner = Waker::from(count.clone());
        rt.block_on(async {
            batch_wakes_here();
            let batched = Batched::waker(inner.clone());
            batched.wake_by_ref();
            batched.wake_by_ref();
            assert_eq!(
                count.0.load(Ordering::SeqCst),
                0,
                "held until the task yields"
            );
            tokio::task::yield_now().await;
            assert_eq!(count.0.load(Ordering::SeqCst), 2);
        });
    }

    #[test]
    fn wakes_on_other_threads_go_out_at_once() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let batched = Batched::waker(Waker::from(count.clone()));
        batched.wake_by_ref();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async { batched.wake() });
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
    }
}
