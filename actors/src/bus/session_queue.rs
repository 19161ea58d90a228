//! One-session subscriptions: each has its own small queue of its session's events.
//!
//! A queue holds what its reader has not taken yet, up to [`SESSION_CAPACITY`] events; a
//! reader that falls further behind loses the oldest and is told how many. Unlike a broadcast
//! channel, a queue takes memory only for what is waiting (a task call follows each child, and a
//! cancelled tree ends 1,110 of them at once), and it is removed from the bus as soon as its
//! subscription is dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use taskforce_agents::id::SessionId;

use super::Envelope;
use crate::id_map::IdMap;

/// The most events a one-session reader may fall behind before it loses the oldest. A
/// session's events come in bursts of a few dozen at most (a step's parts and its end).
pub(super) const SESSION_CAPACITY: usize = 64;

/// The queues of every one-session subscription, by session.
pub(super) type SessionQueues = Arc<IdMap<Vec<Arc<Queue>>>>;

/// What a reader takes from its queue.
#[derive(Debug)]
pub(super) enum Taken {
    /// The next event.
    Event(Arc<Envelope>),
    /// This many events were lost since the last take (the reader fell behind).
    Lagged(u64),
    /// The bus is gone: nothing more will come.
    Closed,
}

/// One subscriber's queue.
#[derive(Debug, Default)]
pub(super) struct Queue(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    events: VecDeque<Arc<Envelope>>,
    /// Events lost to a full queue and not reported yet.
    lost: u64,
    /// The reader waiting for the next event.
    waker: Option<Waker>,
    closed: bool,
}

impl Queue {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `envelope` (dropping the oldest when full) and wakes the reader.
    pub(super) fn push(&self, envelope: Arc<Envelope>) {
        let waker = {
            let mut state = self.state();
            if state.events.len() >= SESSION_CAPACITY {
                state.events.pop_front();
                state.lost += 1;
            }
            state.events.push_back(envelope);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Ends the queue: its reader gets what is queued, then `Closed`.
    pub(super) fn close(&self) {
        let waker = {
            let mut state = self.state();
            state.closed = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The next thing for the reader, or `Pending` with `cx`'s waker kept for the next push.
    pub(super) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Taken> {
        let mut state = self.state();
        if state.lost > 0 {
            return Poll::Ready(Taken::Lagged(std::mem::take(&mut state.lost)));
        }
        if let Some(envelope) = state.events.pop_front() {
            return Poll::Ready(Taken::Event(envelope));
        }
        if state.closed {
            return Poll::Ready(Taken::Closed);
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A reader's hold on its queue: the queue leaves the bus when it is dropped.
pub(super) struct Reader {
    queue: Arc<Queue>,
    session: SessionId,
    queues: SessionQueues,
}

impl Reader {
    /// A new queue for `session`'s events, registered in `queues`.
    pub(super) fn open(queues: &SessionQueues, session: SessionId) -> Reader {
        let queue = Arc::new(Queue::default());
        queues
            .entry(session.clone())
            .or_default()
            .push(queue.clone());
        Reader {
            queue,
            session,
            queues: queues.clone(),
        }
    }

    /// See [`Queue::poll_take`].
    pub(super) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Taken> {
        self.queue.poll_take(cx)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.queues.remove_if_mut(&self.session, |_, readers| {
            readers.retain(|q| !Arc::ptr_eq(q, &self.queue));
            readers.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;

    fn envelope(seq: u64) -> Arc<Envelope> {
        crate::bus::test_envelope(seq)
    }

    fn take(reader: &Reader) -> Poll<Taken> {
        reader.poll_take(&mut Context::from_waker(Waker::noop()))
    }

    fn seq(taken: Poll<Taken>) -> Option<u64> {
        match taken {
            Poll::Ready(Taken::Event(e)) => Some(e.seq),
            _ => None,
        }
    }

    #[test]
    fn a_reader_gets_its_events_in_order_and_leaves_the_bus_when_dropped() {
        let queues = SessionQueues::default();
        let id = SessionId::parse("ses_queue").unwrap();
        let first = Reader::open(&queues, id.clone());
        let second = Reader::open(&queues, id.clone());
        for q in queues.get(&id).unwrap().iter() {
            q.push(envelope(1));
            q.push(envelope(2));
        }
        assert_eq!(seq(take(&first)), Some(1));
        assert_eq!(seq(take(&first)), Some(2));
        assert!(take(&first).is_pending());
        assert_eq!(seq(take(&second)), Some(1));
        drop(first);
        assert_eq!(queues.get(&id).map(|r| r.len()), Some(1));
        drop(second);
        assert!(queues.get(&id).is_none());
    }

    #[test]
    fn a_reader_that_falls_behind_loses_the_oldest_and_is_told_how_many() {
        let queues = SessionQueues::default();
        let id = SessionId::parse("ses_queue").unwrap();
        let reader = Reader::open(&queues, id);
        for n in 1..=(SESSION_CAPACITY as u64 + 3) {
            reader.queue.push(envelope(n));
        }
        assert!(matches!(take(&reader), Poll::Ready(Taken::Lagged(3))));
        assert_eq!(seq(take(&reader)), Some(4));
    }

    #[test]
    fn a_closed_queue_gives_what_it_holds_then_closed() {
        let queues = SessionQueues::default();
        let reader = Reader::open(&queues, SessionId::parse("ses_queue").unwrap());
        reader.queue.push(envelope(1));
        reader.queue.close();
        assert_eq!(seq(take(&reader)), Some(1));
        assert!(matches!(take(&reader), Poll::Ready(Taken::Closed)));
    }
}
