//! Where sessions run: the supervisor's arbiter threads, known by their place in its list.
//! Each arbiter thread knows its own place, so that a task call moved to an arbiter starts
//! its child beside it.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix::ArbiterHandle;
use tokio::sync::oneshot;

thread_local! {
    /// The place of the arbiter the current thread runs, if it runs one of a supervisor's.
    static HERE: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The arbiters sessions run on, by place, and the next place round robin.
pub(crate) struct Places {
    handles: Vec<ArbiterHandle>,
    next: AtomicUsize,
}

impl Places {
    /// The arbiters of `handles`, the first place taken first.
    pub(super) fn new(handles: Vec<ArbiterHandle>) -> Arc<Places> {
        Arc::new(Places {
            handles,
            next: AtomicUsize::new(0),
        })
    }

    /// Records that the current thread runs the arbiter at `place` (on each arbiter as it
    /// starts).
    pub(super) fn mark_here(place: usize) {
        HERE.set(Some(place));
    }

    /// The place of the arbiter the current thread runs, if any.
    pub(crate) fn here() -> Option<usize> {
        HERE.get()
    }

    /// How many arbiters there are.
    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    /// The next place, round robin.
    pub(crate) fn next(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len().max(1)
    }

    /// The next place for a child of a session that runs at `own`, round robin with `own`
    /// taking half a share: the caller's arbiter also carries the calls themselves (letting
    /// them in, following the children, ending their parts), measured at about as much work as
    /// half its children. With two places, two children of three go to the other.
    pub(crate) fn next_beside(&self, own: usize) -> usize {
        let n = self.handles.len();
        if n < 2 || own >= n {
            return self.next();
        }
        // A cycle of `2n - 1` turns: every other place twice, `own` once, in the middle.
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % (2 * n - 1);
        let others = n - 1;
        let slot = match turn {
            t if t < others => t,
            t if t == others => return own,
            t => t - others - 1,
        };
        // The `slot`-th place other than `own`.
        if slot < own { slot } else { slot + 1 }
    }

    /// Runs `work` on the arbiter at `place` and answers its output, or `None` when that
    /// arbiter stopped before `work` was done.
    pub(crate) async fn run_at<T: Send + 'static>(
        &self,
        place: usize,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        let spawned = self.handles.get(place)?.spawn(async move {
            let _ = tx.send(work.await);
        });
        if !spawned {
            return None;
        }
        rx.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn work_runs_on_the_arbiter_of_its_place_which_knows_it() {
        let arbiters: Vec<actix::Arbiter> = (0..2).map(|_| actix::Arbiter::new()).collect();
        let places = Places::new(arbiters.iter().map(actix::Arbiter::handle).collect());
        for (place, arbiter) in arbiters.iter().enumerate() {
            arbiter.spawn_fn(move || Places::mark_here(place));
        }
        assert_eq!(
            Places::here(),
            None,
            "the test's own thread runs no arbiter"
        );
        let caller = std::thread::current().id();
        for place in [1, 0, 1] {
            let (seen, thread) = places
                .run_at(place, async {
                    (Places::here(), std::thread::current().id())
                })
                .await
                .unwrap();
            assert_eq!(seen, Some(place));
            assert_ne!(thread, caller);
        }
        assert_eq!(
            (0..4).map(|_| places.next()).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
        // Beside a caller at place 0, two children of three go to place 1.
        let beside: Vec<usize> = (0..6).map(|_| places.next_beside(0)).collect();
        assert_eq!(beside.iter().filter(|&&p| p == 1).count(), 4, "{beside:?}");
        for arbiter in &arbiters {
            arbiter.stop();
        }
        for arbiter in arbiters {
            arbiter.join().unwrap();
        }
        assert_eq!(places.run_at(0, async { 1 }).await, None, "stopped");
    }
}
