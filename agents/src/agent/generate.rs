//! Agent generation (OpenCode's `Agent.generate`): the request that asks a model for a new
//! agent from a description, the checks on its answer, and the markdown file it becomes.

use serde::{Deserialize, Serialize};

/// The instructions the model gets for designing an agent.
pub const GENERATE_PROMPT: &str = include_str!("prompts/generate.txt");

/// The longest identifier accepted.
const MAX_IDENTIFIER: usize = 64;

/// An agent designed by a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratedAgent {
    /// The agent's name: lowercase letters, digits and hyphens.
    pub identifier: String,
    /// When the main agent should hand work to it (becomes its `description`).
    #[serde(rename = "whenToUse")]
    pub when_to_use: String,
    /// Its system prompt (becomes the file's body).
    #[serde(rename = "systemPrompt")]
    pub system_prompt: String,
}

/// Why a model's answer is not a usable agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// The description is empty.
    #[error("describe what the agent should do")]
    EmptyDescription,
    /// The answer holds no JSON object with the three fields.
    #[error("the model did not answer with {{identifier, whenToUse, systemPrompt}}: {0}")]
    NotAnAgent(String),
    /// The identifier is not lowercase letters, digits and hyphens.
    #[error(
        "the model chose the identifier {0:?}: an identifier is 1-64 lowercase letters, digits and single hyphens"
    )]
    BadIdentifier(String),
    /// The identifier names an agent that exists.
    #[error("the model chose {0:?}, which is already an agent")]
    Taken(String),
    /// A field is empty.
    #[error("the model left `{0}` empty")]
    EmptyField(&'static str),
}

/// The user message asking for an agent: the description and the names that are taken.
pub fn generation_request(description: &str, existing: &[String]) -> Result<String, GenerateError> {
    let description = description.trim();
    if description.is_empty() {
        return Err(GenerateError::EmptyDescription);
    }
    Ok(format!(
        "Create an agent configuration based on this request: \"{description}\"\n\nIMPORTANT: The following identifiers already exist and must NOT be used:\n{}\n\nReturn ONLY the JSON object, no other text, do not wrap in backticks",
        existing.join(", ")
    ))
}

/// Reads and checks the model's answer (a JSON object, possibly wrapped in prose or fences).
pub fn parse_generated(answer: &str, existing: &[String]) -> Result<GeneratedAgent, GenerateError> {
    let json = json_object(answer).ok_or_else(|| GenerateError::NotAnAgent(preview(answer)))?;
    let agent: GeneratedAgent = serde_json::from_str(json)
        .map_err(|e| GenerateError::NotAnAgent(format!("{e}: {}", preview(json))))?;
    let agent = GeneratedAgent {
        identifier: agent.identifier.trim().to_string(),
        when_to_use: agent.when_to_use.trim().to_string(),
        system_prompt: agent.system_prompt.trim().to_string(),
    };
    if !valid_identifier(&agent.identifier) {
        return Err(GenerateError::BadIdentifier(agent.identifier));
    }
    if existing.iter().any(|e| e == &agent.identifier) {
        return Err(GenerateError::Taken(agent.identifier));
    }
    if agent.when_to_use.is_empty() {
        return Err(GenerateError::EmptyField("whenToUse"));
    }
    if agent.system_prompt.is_empty() {
        return Err(GenerateError::EmptyField("systemPrompt"));
    }
    Ok(agent)
}

/// The agent's markdown file: frontmatter with `description` and `mode: subagent`, then the
/// system prompt.
pub fn agent_markdown(agent: &GeneratedAgent) -> String {
    #[derive(Serialize)]
    struct Front<'a> {
        description: &'a str,
        mode: &'a str,
    }
    let front = serde_yaml_ng::to_string(&Front {
        description: &agent.when_to_use,
        mode: "subagent",
    })
    .unwrap_or_else(|_| format!("description: {:?}\nmode: subagent\n", agent.when_to_use));
    format!("---\n{front}---\n\n{}\n", agent.system_prompt)
}

fn valid_identifier(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_IDENTIFIER
        && id.split('-').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// The outermost `{...}` of `text`.
fn json_object(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    (end > start).then(|| &text[start..=end])
}

fn preview(text: &str) -> String {
    let t: String = text.chars().take(200).collect();
    if t.len() < text.len() {
        format!("{t}…")
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn existing() -> Vec<String> {
        vec!["build".into(), "explore".into()]
    }

    #[test]
    fn the_request_names_the_taken_identifiers() {
        let request = generation_request("  reviews SQL  ", &existing()).unwrap();
        assert!(request.contains("\"reviews SQL\""));
        assert!(request.contains("must NOT be used:\nbuild, explore\n"));
        assert_eq!(
            generation_request(" ", &existing()),
            Err(GenerateError::EmptyDescription)
        );
    }

    #[test]
    fn answers_in_fences_or_prose_parse() {
        let answer = "Here you go:\n```json\n{\"identifier\": \"sql-reviewer\", \"whenToUse\": \"Use this agent when SQL changes.\", \"systemPrompt\": \"You are a SQL reviewer.\"}\n```";
        let agent = parse_generated(answer, &existing()).unwrap();
        assert_eq!(agent.identifier, "sql-reviewer");
        assert_eq!(agent.when_to_use, "Use this agent when SQL changes.");
    }

    #[test]
    fn bad_answers_are_refused_with_the_reason() {
        let with = |id: &str, when: &str, prompt: &str| {
            serde_json::json!({"identifier": id, "whenToUse": when, "systemPrompt": prompt})
                .to_string()
        };
        assert!(matches!(
            parse_generated("no json here", &existing()),
            Err(GenerateError::NotAnAgent(_))
        ));
        assert!(matches!(
            parse_generated("{\"identifier\": \"x\"}", &existing()),
            Err(GenerateError::NotAnAgent(_))
        ));
        for bad in [
            "SQL-Reviewer",
            "sql reviewer",
            "sql--reviewer",
            "-sql",
            "../etc",
            "",
        ] {
            assert_eq!(
                parse_generated(&with(bad, "w", "p"), &existing()),
                Err(GenerateError::BadIdentifier(bad.to_string())),
                "{bad}"
            );
        }
        assert_eq!(
            parse_generated(&with("explore", "w", "p"), &existing()),
            Err(GenerateError::Taken("explore".into()))
        );
        assert_eq!(
            parse_generated(&with("a-b", " ", "p"), &existing()),
            Err(GenerateError::EmptyField("whenToUse"))
        );
        assert_eq!(
            parse_generated(&with("a-b", "w", ""), &existing()),
            Err(GenerateError::EmptyField("systemPrompt"))
        );
    }

    #[test]
    fn the_markdown_has_the_frontmatter_and_the_prompt_as_body() {
        let agent = GeneratedAgent {
            identifier: "sql-reviewer".into(),
            when_to_use:
                "Use this agent when SQL changes.\n<example>\nuser: \"check: this\"\n</example>"
                    .into(),
            system_prompt: "You are a SQL reviewer.\n\n- Check joins.".into(),
        };
        let md = agent_markdown(&agent);
        assert!(md.starts_with("---\n"));
        let (front, body) = md[4..].split_once("---\n").unwrap();
        let front: serde_yaml_ng::Value = serde_yaml_ng::from_str(front).unwrap();
        assert_eq!(
            front["description"].as_str(),
            Some(agent.when_to_use.as_str())
        );
        assert_eq!(front["mode"].as_str(), Some("subagent"));
        assert_eq!(body.trim(), agent.system_prompt);
    }
}
