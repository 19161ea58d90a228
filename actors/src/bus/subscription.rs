//! Subscriptions: a filtered stream of bus events that reports how many it missed when slow.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures::Stream;
use taskforce_agents::id::SessionId;
use tokio::sync::broadcast;

use super::receiving::Receiving;
use super::session_queue::{Reader, Taken};
use super::wake::Batched;
use super::{Envelope, ParentMap};

/// Which events a subscription receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Every event.
    All,
    /// Events of one session.
    Session(SessionId),
    /// Events of one session and all its descendants.
    Subtree(SessionId),
}

/// What a subscription yields.
#[derive(Debug, Clone, PartialEq)]
pub enum BusItem {
    /// The next event that passes the filter.
    Event(Arc<Envelope>),
    /// The subscriber fell behind and this many events (of all sessions) were dropped for it;
    /// resync from the store.
    Lagged(u64),
}

/// A stream of bus events passing a filter.
pub struct Subscription {
    inner: Source,
    filter: Passing,
    /// The waker last given to the stream and its batched wrapper (see [`super::wake`]).
    waker: Option<(Waker, Waker)>,
}

/// Where a subscription's events come from.
pub(super) enum Source {
    /// The bus's channel of every event (subscriptions to all events or a subtree).
    Shared(Receiving),
    /// A queue of one session's events, its own.
    Own(Reader),
}

impl Source {
    /// A reader of the bus's channel of every event.
    pub(super) fn shared(receiver: broadcast::Receiver<Arc<Envelope>>) -> Self {
        Source::Shared(Receiving::new(receiver))
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Taken> {
        match self {
            Source::Shared(receiving) => receiving.poll_recv(cx).map(|r| match r {
                Ok(envelope) => Taken::Event(envelope),
                Err(broadcast::error::RecvError::Lagged(n)) => Taken::Lagged(n),
                Err(broadcast::error::RecvError::Closed) => Taken::Closed,
            }),
            Source::Own(reader) => reader.poll_take(cx),
        }
    }
}

/// A subscription's filter and what it has learned of the tree it follows.
struct Passing {
    filter: Filter,
    parents: ParentMap,
    /// Sessions known to be inside a subtree filter's tree (a session never changes parent;
    /// only membership is remembered, since a parent link may be learned later).
    members: HashSet<SessionId, foldhash::fast::RandomState>,
}

/// The most tree members a subscription remembers before it starts over.
const MAX_MEMBERS: usize = 65_536;

impl Subscription {
    pub(super) fn new(inner: Source, filter: Filter, parents: ParentMap) -> Self {
        Subscription {
            inner,
            filter: Passing {
                filter,
                parents,
                members: HashSet::default(),
            },
            waker: None,
        }
    }
}

impl Passing {
    fn passes(&mut self, envelope: &Envelope) -> bool {
        match &self.filter {
            Filter::All => true,
            Filter::Session(id) => envelope.event.session_id() == Some(id),
            Filter::Subtree(root) => {
                let Some(session) = envelope.event.session_id() else {
                    return false;
                };
                if self.members.contains(session) {
                    return true;
                }
                let within = is_within(&self.parents, session, root);
                if within {
                    if self.members.len() >= MAX_MEMBERS {
                        self.members.clear();
                    }
                    self.members.insert(session.clone());
                }
                within
            }
        }
    }
}

/// Whether `session` is `root` or one of its descendants.
fn is_within(parents: &ParentMap, session: &SessionId, root: &SessionId) -> bool {
    let mut current = session.clone();
    // A depth cap guards against a corrupt cycle.
    for _ in 0..256 {
        if &current == root {
            return true;
        }
        match parents.get(&current) {
            Some(parent) => current = parent.value().clone(),
            None => return false,
        }
    }
    false
}

impl Stream for Subscription {
    type Item = BusItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<BusItem>> {
        // Wakes from a burst of publishes on an arbiter come as one (see `super::wake`); the
        // wrapper is made once per waker and lent, not cloned, on every poll.
        let Subscription {
            inner,
            filter,
            waker,
        } = &mut *self;
        let wrapper = match waker {
            Some((given, wrapper)) if given.will_wake(cx.waker()) => wrapper,
            slot => {
                let wrapper = Batched::waker(cx.waker().clone());
                &slot.insert((cx.waker().clone(), wrapper)).1
            }
        };
        let mut batched = Context::from_waker(wrapper);
        loop {
            match std::task::ready!(inner.poll_recv(&mut batched)) {
                Taken::Event(envelope) => {
                    if filter.passes(&envelope) {
                        return Poll::Ready(Some(BusItem::Event(envelope)));
                    }
                }
                Taken::Lagged(n) => return Poll::Ready(Some(BusItem::Lagged(n))),
                Taken::Closed => return Poll::Ready(None),
            }
        }
    }
}
