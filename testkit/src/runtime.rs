//! Waiting on a runtime's state: the check runs again after every event the runtime publishes
//! (the `runtime` feature).

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use taskforce_actors::Runtime;
use taskforce_actors::bus::{BusItem, Event, Filter, Subscription};
use taskforce_actors::permission::PermissionRequest;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;

/// Waits until `check` (given a handle to `rt`) holds, looking again after each of `rt`'s
/// events (and every few milliseconds for state without an event); fails naming `what` after
/// the test kit's patience.
#[track_caller]
pub fn until<F, Fut>(rt: &Runtime, what: &str, mut check: F) -> impl Future<Output = ()>
where
    F: FnMut(Runtime) -> Fut,
    Fut: Future<Output = bool>,
{
    let events = rt.subscribe(Filter::All).map(|_| ());
    let rt = rt.clone();
    crate::until_event(what, events, move || check(rt.clone()))
}

/// Waits until `parent`'s first child is running; answers the child.
pub async fn until_first_child_runs(rt: &Runtime, parent: &SessionId) -> Session {
    until(rt, "the first child to run", |rt| async move {
        children(&rt, parent)
            .await
            .first()
            .is_some_and(|child| rt.statuses().contains_key(&child.id))
    })
    .await;
    children(rt, parent).await.remove(0)
}

/// Waits until no session of `rt` is running.
#[track_caller]
pub fn until_idle(rt: &Runtime) -> impl Future<Output = ()> {
    until(rt, "every session to be idle", |rt| async move {
        rt.statuses().is_empty()
    })
}

/// The next `permission.asked` event on `events`; fails when none comes within ten seconds or
/// the subscriber lagged.
pub async fn next_ask(events: &mut Subscription) -> PermissionRequest {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
            Ok(Some(BusItem::Event(e))) => {
                if let Event::PermissionAsked(request) = &e.event {
                    return (**request).clone();
                }
            }
            Ok(Some(BusItem::Lagged(n))) => panic!("lagged by {n}"),
            other => panic!("no permission ask came: {other:?}"),
        }
    }
}

/// The children of `parent`, oldest first; fails when the runtime cannot list them.
async fn children(rt: &Runtime, parent: &SessionId) -> Vec<Session> {
    rt.children(parent)
        .await
        .unwrap_or_else(|e| panic!("listing the children of {parent}: {e}"))
}
