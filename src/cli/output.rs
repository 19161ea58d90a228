//! Shared rendering of messages for the command line.

use taskforce_actors::store::MessageWithParts;
use taskforce_agents::model::PartKind;

/// The text parts of a message joined, as the final answer.
pub fn final_text(message: &MessageWithParts) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Text(t) if t.synthetic != Some(true) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
