//! Waiting on a runtime's state: the check runs again after every event the runtime publishes.

use std::future::Future;

use futures::StreamExt;
use taskforce_actors::Runtime;
use taskforce_actors::bus::Filter;

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
    taskforce_testkit::until_event(what, events, move || check(rt.clone()))
}

/// Waits until `parent`'s first child is running; answers the child.
pub async fn until_first_child_runs(
    rt: &Runtime,
    parent: &taskforce_agents::id::SessionId,
) -> taskforce_agents::model::Session {
    until(rt, "the first child to run", |rt| async move {
        let children = rt.children(parent).await.unwrap();
        children
            .first()
            .is_some_and(|child| rt.statuses().contains_key(&child.id))
    })
    .await;
    rt.children(parent).await.unwrap().remove(0)
}

/// Waits until no session of `rt` is running.
#[track_caller]
pub fn until_idle(rt: &Runtime) -> impl Future<Output = ()> {
    until(rt, "every session to be idle", |rt| async move {
        rt.statuses().is_empty()
    })
}
