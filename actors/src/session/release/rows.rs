//! The rows a session's queue saves: owned, sorted by table, each in its last state, the
//! events that publish them, and writing again those whose commit failed.

use std::collections::HashSet;
use std::sync::Arc;

use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, Part, Session};

use crate::bus::Event;
use crate::core::Core;
use crate::store::StoreError;

/// A row to save, owned (see `writer::Item` for the borrowed form).
#[derive(Clone)]
pub(crate) enum Saved {
    /// A session stored for the first time (published as created, then updated).
    NewSession(Arc<Session>),
    /// A message, published as the shared copy it is.
    Message(Arc<Message>),
    Part(Arc<Part>),
}

/// Saved rows sorted by table, in order.
#[derive(Default)]
pub(super) struct Rows<'a> {
    pub sessions: Vec<&'a Arc<Session>>,
    pub messages: Vec<&'a Arc<Message>>,
    pub parts: Vec<&'a Arc<Part>>,
}

impl<'a> Rows<'a> {
    /// Sorts `saved` in, after the rows already added.
    pub fn add(&mut self, saved: &'a [Saved]) {
        for row in saved {
            match row {
                Saved::NewSession(s) => self.sessions.push(s),
                Saved::Message(m) => self.messages.push(m),
                Saved::Part(p) => self.parts.push(p),
            }
        }
    }
}

/// `rows` without those a later row of the same key replaces, in the order of the rows kept.
pub(super) fn last_of_each<T: ?Sized, K: Eq + std::hash::Hash + ?Sized>(
    rows: Vec<&T>,
    key: impl Fn(&T) -> &K,
) -> Vec<&T> {
    // A batch is mostly a handful of rows, where a scan beats hashing.
    if rows.len() <= 16 {
        let mut kept = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            if !rows[i + 1..].iter().any(|later| key(later) == key(row)) {
                kept.push(*row);
            }
        }
        return kept;
    }
    let mut seen: HashSet<&K, foldhash::fast::RandomState> = HashSet::default();
    let mut kept: Vec<&T> = rows
        .iter()
        .rev()
        .filter(|row| seen.insert(key(row)))
        .copied()
        .collect();
    kept.reverse();
    kept
}

/// The values `rows` share.
pub(super) fn refs<'a, T>(rows: &[&'a Arc<T>]) -> Vec<&'a T> {
    rows.iter().map(|r| &***r).collect()
}

/// Shared copies of `rows`.
pub(super) fn owned<T>(rows: &[&Arc<T>]) -> Vec<Arc<T>> {
    rows.iter().map(|&r| Arc::clone(r)).collect()
}

/// Writes `failed` again (rows handed over whose commit failed), waited for, each in its last
/// state, except those the batch wrote anew (`messages`, `parts`).
pub(super) async fn write_again(
    core: &Core,
    failed: &[Saved],
    messages: &[&Arc<Message>],
    parts: &[&Arc<Part>],
) -> Result<(), StoreError> {
    let mut rows = Rows::default();
    rows.add(failed);
    let mut again_messages = last_of_each(rows.messages, |m| m.id());
    again_messages.retain(|m| !messages.iter().any(|newer| newer.id() == m.id()));
    let mut again_parts = last_of_each(rows.parts, |p| &p.id);
    again_parts.retain(|p| !parts.iter().any(|newer| newer.id == p.id));
    let (again_messages, again_parts) = (refs(&again_messages), refs(&again_parts));
    core.store
        .put_many(&[], &again_messages, &again_parts)
        .await
}

/// The session a saved row belongs to.
pub(super) fn session_of(row: &Saved) -> SessionId {
    match row {
        Saved::NewSession(s) => s.id.clone(),
        Saved::Message(m) => m.session_id().clone(),
        Saved::Part(p) => p.session_id.clone(),
    }
}

/// The events that publish a saved row.
pub(super) fn events_of(row: &Saved) -> impl Iterator<Item = Event> + use<> {
    let (first, second) = match row {
        Saved::NewSession(s) => (
            Event::SessionCreated {
                info: Arc::clone(s),
            },
            Some(Event::SessionUpdated {
                info: Arc::clone(s),
            }),
        ),
        Saved::Message(m) => (
            Event::MessageUpdated {
                info: Arc::clone(m),
            },
            None,
        ),
        Saved::Part(p) => (
            Event::PartUpdated {
                part: Arc::clone(p),
            },
            None,
        ),
    };
    std::iter::once(first).chain(second)
}

#[cfg(test)]
mod tests {
    use super::last_of_each;

    #[test]
    fn a_row_saved_twice_is_kept_in_its_last_state_and_place() {
        let rows = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2)];
        let kept = last_of_each(rows.iter().collect(), |r: &(&str, i32)| r.0);
        assert_eq!(kept, [&("a", 2), &("c", 1), &("b", 2)]);
    }

    #[test]
    fn a_large_batch_keeps_the_last_state_of_each_row_in_order() {
        let rows: Vec<(u32, u32)> = (0..40).map(|i| (i % 25, i)).collect();
        let kept = last_of_each(rows.iter().collect(), |r: &(u32, u32)| &r.0);
        let expected: Vec<&(u32, u32)> = rows.iter().filter(|r| r.1 + 25 >= 40).collect();
        assert_eq!(kept.len(), 25);
        assert_eq!(kept, expected);
    }
}
