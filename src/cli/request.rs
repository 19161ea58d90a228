//! What `taskforce run` asks for: the message (from the arguments, else from stdin), the files
//! attached to it, or a slash command.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use taskforce_actors::{PartInput, PromptInput, Runtime, RuntimeError};
use taskforce_agents::command::{Commands, Reference, UnknownCommand, file_pieces};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::ModelRef;

use super::{Context, UsageError};

/// What `run` asks the runtime for.
pub(super) enum Request {
    /// A prompt, with files attached after its text.
    Prompt {
        /// The prompt.
        input: PromptInput,
        /// The attached files and directories, as absolute paths.
        files: Vec<Reference>,
    },
    /// A slash command.
    Command {
        name: String,
        arguments: String,
        agent: Option<String>,
        model: Option<ModelRef>,
    },
}

impl Request {
    /// A prompt of `input` alone.
    pub fn prompt(input: PromptInput) -> Self {
        Request::Prompt {
            input,
            files: Vec::new(),
        }
    }

    /// Sends the request to `session` and waits for its answer.
    pub async fn send(
        self,
        runtime: &Runtime,
        session: &SessionId,
    ) -> Result<taskforce_actors::store::MessageWithParts, RuntimeError> {
        match self {
            Request::Prompt { mut input, files } => {
                // `@path` and `@agent` in the text become file and agent parts.
                if let [PartInput::Text { text, .. }] = input.parts.as_slice() {
                    input.parts = runtime.resolve_prompt(session, &text.clone()).await?;
                }
                let directory = runtime.session(session).await?.directory;
                attach_files(&mut input, &files, &directory).await;
                runtime.prompt(session, input).await
            }
            Request::Command {
                name,
                arguments,
                agent,
                model,
            } => {
                runtime
                    .command(session, &name, &arguments, agent.as_deref(), model)
                    .await
            }
        }
    }
}

/// Adds `files` to `input`, read on this machine: their contents go in the prompt's text (so
/// that a server on another machine gets them too), each followed by a file part naming it.
pub(super) async fn attach_files(input: &mut PromptInput, files: &[Reference], cwd: &Path) {
    for file in files {
        input.parts.extend(
            file_pieces(file, cwd)
                .await
                .into_iter()
                .map(PartInput::from),
        );
    }
}

/// The slash commands of the local configuration, for [`build`].
pub(super) fn local_commands(context: &Context) -> impl Fn(&str) -> Result<(), UnknownCommand> {
    let commands = Commands::new(&context.loaded.config);
    move |name| commands.get(name).map(|_| ())
}

/// The request of a `run`: `words` (else stdin, when it is no terminal) as a prompt with
/// `files` attached, or as a slash command, which `command_exists` checks.
pub(super) fn build(
    command_exists: impl Fn(&str) -> Result<(), UnknownCommand>,
    words: &[String],
    files: &[PathBuf],
    agent: Option<String>,
    model: Option<ModelRef>,
) -> anyhow::Result<Request> {
    let text = message(words)?;
    let files = attachments(files)?;
    match text.strip_prefix('/') {
        // `/name args` runs a command; an unknown name is a usage error listing the known ones.
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => {
            if !files.is_empty() {
                return Err(UsageError::new(anyhow::anyhow!(
                    "--file cannot be used with a slash command"
                ))
                .into());
            }
            let (name, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            command_exists(name).map_err(UsageError::new)?;
            Ok(Request::Command {
                name: name.to_string(),
                arguments: arguments.trim().to_string(),
                agent,
                model,
            })
        }
        _ => Ok(Request::Prompt {
            input: PromptInput {
                agent,
                model,
                ..PromptInput::text(text)
            },
            files,
        }),
    }
}

/// The message: the words given, else what stdin holds when it is not a terminal.
fn message(words: &[String]) -> anyhow::Result<String> {
    if !words.is_empty() {
        return Ok(words.join(" "));
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut text = String::new();
        stdin.lock().read_to_string(&mut text).map_err(|e| {
            UsageError::new(anyhow::anyhow!("cannot read the message from stdin: {e}"))
        })?;
        let text = text.trim_end_matches(['\n', '\r']);
        if !text.trim().is_empty() {
            return Ok(text.to_string());
        }
    }
    Err(UsageError::new(anyhow::anyhow!(
        "no message: pass it as arguments (`taskforce run \"explain this project\"`) or on stdin (`echo \"explain this project\" | taskforce run`)"
    ))
    .into())
}

/// The files to attach, checked: each must exist.
fn attachments(paths: &[PathBuf]) -> anyhow::Result<Vec<Reference>> {
    let cwd = std::env::current_dir()?;
    paths.iter().map(|p| attachment(&cwd, p)).collect()
}

fn attachment(cwd: &Path, path: &Path) -> anyhow::Result<Reference> {
    let absolute = cwd.join(path);
    match std::fs::metadata(&absolute) {
        Ok(meta) if meta.is_dir() => Ok(Reference::Directory(absolute)),
        Ok(_) => Ok(Reference::File(absolute)),
        Err(e) => Err(UsageError::new(anyhow::anyhow!(
            "--file {}: {}",
            path.display(),
            if e.kind() == std::io::ErrorKind::NotFound {
                "no such file or directory".to_string()
            } else {
                e.to_string()
            }
        ))
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_attachment_is_a_usage_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here.txt"), "x").unwrap();
        assert!(matches!(
            attachment(dir.path(), Path::new("here.txt")),
            Ok(Reference::File(p)) if p == dir.path().join("here.txt")
        ));
        assert!(matches!(
            attachment(dir.path(), Path::new(".")),
            Ok(Reference::Directory(_))
        ));
        let error = attachment(dir.path(), Path::new("gone.txt")).unwrap_err();
        assert!(error.downcast_ref::<UsageError>().is_some());
        assert_eq!(
            error.to_string(),
            "--file gone.txt: no such file or directory"
        );
    }
}
