//! `Runtime::generate_agent`: a model designs a subagent from a description, and it is written
//! to `.taskforce/agent/<identifier>.md` in the project.

use std::path::PathBuf;

use taskforce_agents::agent::{
    GENERATE_PROMPT, GeneratedAgent, agent_markdown, generation_request, parse_generated,
};
use taskforce_agents::model::ModelRef;

use super::Runtime;
use crate::RuntimeError;
use crate::complete::complete_text;

/// A generated agent and the file it was written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedAgentFile {
    /// The agent.
    pub agent: GeneratedAgent,
    /// Its markdown file.
    pub path: PathBuf,
}

impl Runtime {
    /// Asks `model` (else the configured default) for an agent doing what `description` says,
    /// checks the answer (a new lowercase-hyphen identifier, non-empty fields) and writes the
    /// agent file. The running registry does not change; the agent is loaded on the next start.
    pub async fn generate_agent(
        &self,
        description: &str,
        model: Option<ModelRef>,
    ) -> Result<GeneratedAgentFile, RuntimeError> {
        let existing: Vec<String> = self.core.registry.list().map(|a| a.name.clone()).collect();
        let prompt = generation_request(description, &existing)
            .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
        let model = model
            .or_else(|| self.core.config.model.clone())
            .ok_or_else(|| {
                RuntimeError::InvalidInput(
                    "no model configured: pass a model, or set `model = \"provider/model\"`".into(),
                )
            })?;
        let answer = complete_text(
            &self.core,
            &model,
            "generate",
            vec![GENERATE_PROMPT.to_string()],
            prompt,
            Some(0.3),
        )
        .await?;
        let agent = parse_generated(&answer, &existing)
            .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
        let dir = self
            .core
            .paths
            .project_root
            .join(".taskforce")
            .join("agent");
        let path = dir.join(format!("{}.md", agent.identifier));
        let io = |e: std::io::Error| {
            RuntimeError::InvalidInput(if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!(
                    "{} exists already (an agent file that is not loaded); nothing was written",
                    path.display()
                )
            } else {
                format!("cannot write {}: {e}", path.display())
            })
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io)?;
        std::io::Write::write_all(&mut file, agent_markdown(&agent).as_bytes()).map_err(io)?;
        Ok(GeneratedAgentFile { agent, path })
    }
}
