//! `question {questions}`: asks the user and waits for the answers; the run goes on with them.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::run::parse_args;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::question::{QuestionAnswer, QuestionInfo};

/// The question tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuestionTool;

#[derive(Debug, Deserialize)]
struct Args {
    questions: Vec<QuestionInfo>,
}

/// What the model reads: each question with its answer, as OpenCode words it.
fn answered(questions: &[QuestionInfo], answers: &[QuestionAnswer]) -> String {
    let pairs: Vec<String> = questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let answer = match answers.get(i) {
                Some(a) if !a.is_empty() => a.join(", "),
                _ => "Unanswered".to_string(),
            };
            format!("\"{}\"=\"{answer}\"", q.question)
        })
        .collect();
    format!(
        "User has answered your questions: {}. You can now continue with the user's answers in mind.",
        pairs.join(", ")
    )
}

#[async_trait]
impl Tool for QuestionTool {
    fn id(&self) -> &'static str {
        "question"
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/question.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "description": "Questions to ask",
                    "items": {
                        "type": "object",
                        "properties": {
                            "question": {"type": "string", "description": "Complete question"},
                            "header": {"type": "string", "description": "Very short label (max 30 chars)"},
                            "options": {
                                "type": "array",
                                "description": "Available choices",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "label": {"type": "string", "description": "Display text (1-5 words, concise)"},
                                        "description": {"type": "string", "description": "Explanation of choice"}
                                    },
                                    "required": ["label", "description"]
                                }
                            },
                            "multiple": {"type": "boolean", "description": "Allow selecting multiple choices"}
                        },
                        "required": ["question", "header", "options"]
                    }
                }
            },
            "required": ["questions"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.id(), args)?;
        if args.questions.is_empty() {
            return Err(ToolError::InvalidArguments {
                tool: self.id().into(),
                message: "questions: at least one question is needed".into(),
            });
        }
        let answers = tokio::select! {
            a = ctx.host.question(ctx, args.questions.clone()) => a?,
            () = ctx.abort.cancelled() => return Err(ToolError::Aborted),
        };
        let n = args.questions.len();
        let mut metadata = Map::new();
        metadata.insert("answers".into(), json!(answers));
        Ok(ToolOutput {
            title: format!("Asked {n} question{}", if n > 1 { "s" } else { "" }),
            output: answered(&args.questions, &answers),
            metadata: metadata.into(),
            attachments: Vec::new(),
        })
    }

    fn changes_files(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::QuestionOption;

    fn q(text: &str) -> QuestionInfo {
        QuestionInfo {
            question: text.into(),
            header: "H".into(),
            options: vec![QuestionOption {
                label: "A".into(),
                description: "first".into(),
            }],
            multiple: None,
            custom: None,
        }
    }

    #[test]
    fn answers_read_as_question_answer_pairs_and_missing_ones_as_unanswered() {
        let text = answered(
            &[q("Which color?"), q("Which size?"), q("Why?")],
            &[vec!["Red".into(), "Blue".into()], vec![]],
        );
        assert_eq!(
            text,
            "User has answered your questions: \"Which color?\"=\"Red, Blue\", \"Which size?\"=\"Unanswered\", \"Why?\"=\"Unanswered\". You can now continue with the user's answers in mind."
        );
    }
}
