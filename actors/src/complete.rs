//! One model call outside the agent loop, answered as plain text: agent generation now, session
//! titles later.

use futures::StreamExt;
use taskforce_agents::model::ModelRef;
use taskforce_agents::provider::{ChatMessage, ModelEvent, ModelRequest, Role};

use crate::RuntimeError;
use crate::core::Core;

/// Sends `system` and one user message `prompt` to `model` as `agent`; answers the text.
pub(crate) async fn complete_text(
    core: &Core,
    model: &ModelRef,
    agent: &str,
    system: Vec<String>,
    prompt: String,
    temperature: Option<f64>,
) -> Result<String, RuntimeError> {
    let language = core.providers.model(model)?;
    let request = ModelRequest {
        model: model.model_id.clone(),
        agent: agent.to_string(),
        system,
        messages: vec![ChatMessage::text(Role::User, prompt)],
        temperature,
        max_output_tokens: core.providers.model_config(model).and_then(|m| m.output),
        ..Default::default()
    };
    let mut stream = language.stream(&request).await?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event? {
            ModelEvent::TextDelta(delta) => text.push_str(&delta),
            ModelEvent::Finish(_) => break,
            _ => {}
        }
    }
    Ok(text)
}
