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
    /// taking a quarter share: the caller's arbiter also lets every call in and ends its part,
    /// and its children start behind that work, so that they end late too; with a quarter
    /// share it finishes its children about when the others do. With two places, four
    /// children of five go to the other.
    pub(crate) fn next_beside(&self, own: usize) -> usize {
        let n = self.handles.len();
        if n < 2 || own >= n {
            return self.next();
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        beside(turn, own, n)
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

/// The place of round-robin turn `turn` for a child of a session at `own` among `n >= 2`
/// places: a cycle of `4(n - 1) + 1` turns, every other place four times, `own` once, in the
/// middle.
fn beside(turn: usize, own: usize, n: usize) -> usize {
    let others = n - 1;
    let slot = match turn % (4 * others + 1) {
        t if t < 2 * others => t % others,
        t if t == 2 * others => return own,
        t => (t - 2 * others - 1) % others,
    };
    // The `slot`-th place other than `own`.
    if slot < own { slot } else { slot + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_own_place_takes_a_quarter_share_of_its_children() {
        for n in 2..=4 {
            for own in 0..n {
                let cycle = 4 * (n - 1) + 1;
                let mut counts = vec![0; n];
                for turn in 0..cycle {
                    counts[beside(turn, own, n)] += 1;
                }
                for (place, count) in counts.iter().enumerate() {
                    let want = if place == own { 1 } else { 4 };
                    assert_eq!(*count, want, "{n} places, own {own}: {counts:?}");
                }
            }
        }
    }

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
        // Beside a caller at place 0, four children of five go to place 1.
        let beside: Vec<usize> = (0..10).map(|_| places.next_beside(0)).collect();
        assert_eq!(beside.iter().filter(|&&p| p == 1).count(), 8, "{beside:?}");
        for arbiter in &arbiters {
            arbiter.stop();
        }
        for arbiter in arbiters {
            arbiter.join().unwrap();
        }
        assert_eq!(places.run_at(0, async { 1 }).await, None, "stopped");
    }
}
