//! Errors of loading configuration; each names the file (or variable) and the key.

use std::path::PathBuf;

use crate::markdown::MarkdownError;

/// Why the configuration could not be loaded. None of these is retryable without a fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file is not valid TOML or JSON.
    #[error("{origin}: {message}")]
    Syntax {
        /// The file, as shown to the user.
        origin: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A key has a value of the wrong type or an unknown name.
    #[error("{origin}: key `{key}`: {message}")]
    Invalid {
        /// The file or environment variable, as shown to the user.
        origin: String,
        /// The dotted key path, for example `agent.reviewer.mode`.
        key: String,
        /// What is wrong, with the allowed values where there is a fixed set.
        message: String,
    },
    /// A key its section does not have (a misspelling, or a key of another section).
    #[error(transparent)]
    UnknownKey(Box<UnknownKey>),
    /// A model names a provider the configuration does not have.
    #[error(transparent)]
    UnconfiguredProvider(Box<UnconfiguredProvider>),
    /// An agent or command markdown file cannot be read or its frontmatter does not parse.
    #[error(transparent)]
    Markdown(#[from] MarkdownError),
    /// The file named by `--config` or `TASKFORCE_CONFIG` does not exist.
    #[error("config file {path} (named by {named_by}) does not exist")]
    MissingFile {
        /// The missing file.
        path: PathBuf,
        /// `--config` or `TASKFORCE_CONFIG`.
        named_by: &'static str,
    },
    /// The working directory cannot be determined.
    #[error("cannot determine the working directory: {0}")]
    Cwd(std::io::Error),
}

/// A key its section does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown key \"{key}\" in {section} of {origin}; {}",
    super::keys::hint(.suggestion.as_deref(), .valid)
)]
pub struct UnknownKey {
    /// The file, as shown to the user.
    pub origin: String,
    /// Where in the file: `[subagent]`, `[agent.build]`, `the top level`, `the frontmatter`.
    pub section: String,
    /// The key as written.
    pub key: String,
    /// The valid key closest to it, when one is close.
    pub suggestion: Option<String>,
    /// Every key the section has.
    pub valid: Vec<String>,
}

/// A model whose provider the configuration does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{origin}: key `{key}`: model \"{model}\" needs provider \"{provider}\", which is unknown; configure [provider.{provider}] with type and base_url (known providers: {})",
    .known.join(", ")
)]
pub struct UnconfiguredProvider {
    /// The file or environment variable, as shown to the user.
    pub origin: String,
    /// The dotted key path, for example `agent.reviewer.model`.
    pub key: String,
    /// The model as written.
    pub model: String,
    /// Its provider id.
    pub provider: String,
    /// The providers that are configured or known by name (the built-in `scripted` included).
    pub known: Vec<String>,
}
