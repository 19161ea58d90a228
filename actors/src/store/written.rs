//! Sessions written and not read back yet: a session row whose payload is the very JSON a
//! session was written as holds that session, so reading the row back (a touch reads back every
//! session it moves) takes the written value instead of decoding the JSON again. A row written
//! by anything else (another runtime, an edit made in SQL) has another payload and is decoded.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use taskforce_agents::model::Session;

/// The most sessions kept; when a new one would pass it, those kept are forgotten (they are
/// decoded when read, as any other).
const KEPT: usize = 2048;

/// Each session kept, by id, with the JSON it was written as.
type Kept = HashMap<String, (String, Session), foldhash::fast::RandomState>;

static WRITTEN: LazyLock<Mutex<Kept>> = LazyLock::new(Mutex::default);

fn kept() -> MutexGuard<'static, Kept> {
    WRITTEN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `session` is being written with `data` as its payload.
pub(crate) fn written(session: &Session, data: &str) {
    let mut kept = kept();
    if kept.len() >= KEPT {
        kept.clear();
    }
    kept.insert(
        session.id.as_str().to_owned(),
        (data.to_owned(), session.clone()),
    );
}

/// The session of the row `id` whose payload is `data`, when it was written as that and not
/// read back since (it is read back once: a later read decodes).
pub(crate) fn read_back(id: &str, data: &str) -> Option<Session> {
    let mut kept = kept();
    match kept.get(id) {
        Some((written, _)) if written == data => kept.remove(id).map(|(_, session)| session),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use taskforce_agents::permission::{Action, Rule};

    use super::*;
    use crate::store::write::Upsert;

    #[test]
    fn a_session_is_read_back_once_and_only_from_the_payload_it_was_written_as() {
        let session = Session::new("proj", "/srv/p", "kept", 1_000);
        let data = serde_json::to_string(&session).unwrap();
        written(&session, &data);
        assert_eq!(
            read_back(session.id.as_str(), "{}"),
            None,
            "another payload"
        );
        assert_eq!(
            read_back(session.id.as_str(), &data).as_ref(),
            Some(&session)
        );
        assert_eq!(
            read_back(session.id.as_str(), &data),
            None,
            "read back already"
        );
    }

    #[test]
    fn the_session_read_back_is_what_decoding_its_row_gives() {
        let parent = Session::new("proj", "/srv/p", "parent", 1_000);
        let child = Session::child_of(&parent, "child (@general subagent)", 2_000)
            .with_permission(vec![Rule::new("task", "*", Action::Deny)])
            .delegated_by(
                "general",
                vec![
                    Rule::new("*", "*", Action::Allow),
                    Rule::new("read", "*.env", Action::Ask),
                ],
            );
        // Written as the store writes it: the shortcut stands for the decoding it skips.
        let Upsert::Session { data, .. } = Upsert::of_session(&child).unwrap() else {
            panic!("a session's row");
        };
        let decoded: Session = serde_json::from_str(&data).unwrap();
        assert_eq!(read_back(child.id.as_str(), &data), Some(decoded));
    }
}
