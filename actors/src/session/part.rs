//! A part cell: one live part of an answer, shared between the step that streams it and the
//! tool call it records, and changed in place while nothing else holds its current state.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};
use taskforce_agents::model::{Part, PartKind};

/// The key of a reasoning part's metadata holding its provider signature (as OpenCode stores
/// the AI SDK's provider metadata: `{"anthropic": {"signature": …}}`).
pub(crate) const REASONING_PROVIDER: &str = "anthropic";

/// A part shared between the processor and a running tool's host. Its states are shared too:
/// each is handed to the bus and the store as is, and a change copies the part only while an
/// earlier state is still held somewhere.
#[derive(Clone)]
pub(crate) struct SharedPart(Arc<Mutex<Arc<Part>>>);

impl SharedPart {
    pub fn new(part: Part) -> Self {
        SharedPart(Arc::new(Mutex::new(Arc::new(part))))
    }

    /// The part as it is now.
    pub fn lock(&self) -> Arc<Part> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The part as it ended.
    pub fn into_part(self) -> Arc<Part> {
        match Arc::try_unwrap(self.0) {
            Ok(cell) => cell.into_inner().unwrap_or_else(PoisonError::into_inner),
            Err(shared) => shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    /// What `look` finds in the part as it is now.
    pub fn peek<R>(&self, look: impl FnOnce(&Part) -> R) -> R {
        look(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Changes the part in place when nothing else holds its current state (`change` gets
    /// `Ok`), else replaces it by the copy `change` makes from it (`Err`); returns the new state.
    pub fn change_or_copy(
        &self,
        change: impl FnOnce(Result<&mut Part, &Part>) -> Option<Part>,
    ) -> Arc<Part> {
        let mut part = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(owned) = Arc::get_mut(&mut part) {
            if let Some(next) = change(Ok(owned)) {
                *owned = next;
            }
        } else if let Some(next) = change(Err(&part)) {
            *part = Arc::new(next);
        }
        part.clone()
    }

    /// Changes the part and returns its new state.
    pub fn update(&self, change: impl FnOnce(&mut Part)) -> Arc<Part> {
        let mut part = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        change(Arc::make_mut(&mut part));
        part.clone()
    }

    /// Records the provider's `signature` on a reasoning part.
    pub fn sign(&self, signature: String) {
        self.update(|p| {
            if let PartKind::Reasoning(r) = &mut p.kind {
                r.metadata
                    .get_or_insert_with(Map::new)
                    .insert(REASONING_PROVIDER.into(), signed(signature));
            }
        });
    }
}

/// The metadata value recording a reasoning signature.
fn signed(signature: String) -> Value {
    let mut m = Map::new();
    m.insert("signature".into(), Value::String(signature));
    Value::Object(m)
}
