//! Waiting in tests: a test waits until the state it needs holds (or an event arrives), with a
//! generous deadline that only a broken program reaches, never for a fixed time.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{Stream, StreamExt};
use tokio::time::{Instant, MissedTickBehavior, interval, timeout_at};

/// How long a test waits for something before it fails: long enough for a loaded 2-core
/// machine, reached only when the awaited state never comes.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How often state without an event of its own is looked at again.
const RECHECK: Duration = Duration::from_millis(20);

/// Waits until `check` holds, looking again every few milliseconds; panics naming `what` when it
/// has not held within [`PATIENCE`].
#[track_caller]
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) -> impl Future<Output = ()> {
    eventually_async(what, move || std::future::ready(check()))
}

/// [`eventually`] for a check that has to await (a query to a runtime, a store, a server).
#[track_caller]
pub fn eventually_async<F, Fut>(what: &str, check: F) -> impl Future<Output = ()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    until_event(what, futures::stream::pending::<()>(), check)
}

/// Waits until `check` holds, looking again whenever `events` yields (and every few
/// milliseconds, for state that changes without an event); panics naming `what` when it has
/// not held within [`PATIENCE`] or when `events` ends with the check still false.
#[track_caller]
pub fn until_event<S, F, Fut>(what: &str, events: S, mut check: F) -> impl Future<Output = ()>
where
    S: Stream,
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let caller = std::panic::Location::caller();
    let what = what.to_string();
    async move {
        let deadline = Instant::now() + PATIENCE;
        let mut events = std::pin::pin!(events.fuse());
        let mut tick = interval(RECHECK);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut ended = false;
        loop {
            if check().await {
                return;
            }
            let woke = timeout_at(deadline, async {
                tokio::select! {
                    item = events.next(), if !ended => item.is_some(),
                    _ = tick.tick() => true,
                }
            })
            .await;
            match woke {
                Ok(true) => {}
                Ok(false) => ended = true,
                Err(_) => panic!("{caller}: timed out after {PATIENCE:?} waiting for {what}"),
            }
        }
    }
}

/// Waits until the wall clock's millisecond has moved on, so that two records made before and
/// after the call carry different millisecond timestamps.
pub async fn next_millisecond() {
    let now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    };
    let start = now();
    while now() == start {
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn eventually_returns_once_the_state_holds() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        eventually("three looks", move || {
            seen.fetch_add(1, Ordering::SeqCst) >= 2
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "timed out after 30s waiting for a state that never comes")]
    async fn eventually_fails_naming_what_never_came() {
        eventually("a state that never comes", || false).await;
    }

    #[tokio::test]
    async fn an_event_wakes_the_check_at_once() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        let flag = Arc::new(AtomicUsize::new(0));
        let reader = flag.clone();
        let waiter = tokio::spawn(async move {
            let events = tokio_stream_from(rx);
            until_event("the flag", events, move || {
                let value = reader.load(Ordering::SeqCst);
                async move { value == 1 }
            })
            .await;
        });
        flag.store(1, Ordering::SeqCst);
        tx.send(1).unwrap();
        waiter.await.unwrap();
    }

    fn tokio_stream_from(
        mut rx: tokio::sync::mpsc::UnboundedReceiver<u32>,
    ) -> impl Stream<Item = u32> {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }

    #[tokio::test]
    async fn the_next_millisecond_is_a_later_timestamp() {
        let before = SystemTime::now();
        next_millisecond().await;
        let after = SystemTime::now();
        assert!(after.duration_since(before).unwrap() > Duration::ZERO);
    }
}
