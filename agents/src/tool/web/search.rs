//! `websearch {query, numResults?, livecrawl?, type?, contextMaxCharacters?}` and
//! `codesearch {query, tokensNum?}` over the configured [`SearchBackend`].

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{exa, searxng};
use crate::agent::{AgentInfo, Registry};
use crate::config::{EXA_BASE_URL, SearchConfig, SearchEngine};
use crate::tool::run::{lenient_u64, parse_args};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Results a web search returns when the call names no count.
pub(super) const DEFAULT_NUM_RESULTS: u64 = 8;

/// Tokens of context a code search returns when the call names no count, and the bounds.
const DEFAULT_TOKENS: u64 = 5000;
const MIN_TOKENS: u64 = 1000;
const MAX_TOKENS: u64 = 50_000;

const NO_RESULTS: &str = "No search results found. Please try a different query.";
const NO_CODE: &str = "No code snippets or documentation found. Please try a different query, be more specific about the library or programming concept, or check the spelling of framework names.";

/// Where `websearch` and `codesearch` send their queries, built once from `[search]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchBackend {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// An Exa-compatible MCP endpoint and its key: none, or why the named one is missing.
    Exa {
        endpoint: String,
        key: Result<Option<String>, String>,
    },
    /// A SearXNG instance's address.
    Searxng { url: String },
}

impl SearchBackend {
    /// The backend `config` configures, with its key read from `env`; `None` when no engine is
    /// set (the search tools are then not offered). A key variable that is named but not set
    /// fails each call, saying so.
    pub fn from_config(config: &SearchConfig, env: &BTreeMap<String, String>) -> Option<Self> {
        let kind = match config.engine? {
            SearchEngine::Exa => Kind::Exa {
                endpoint: config
                    .base_url
                    .clone()
                    .unwrap_or_else(|| EXA_BASE_URL.to_string()),
                key: match &config.api_key_env {
                    None => Ok(None),
                    Some(var) => match env.get(var).filter(|v| !v.trim().is_empty()) {
                        Some(key) => Ok(Some(key.trim().to_string())),
                        None => Err(format!(
                            "the environment variable {var} (named by search.api_key_env) is not set"
                        )),
                    },
                },
            },
            SearchEngine::Searxng => Kind::Searxng {
                url: config.url.clone().unwrap_or_default(),
            },
        };
        Some(SearchBackend { kind })
    }

    /// The engine answering.
    pub fn engine(&self) -> SearchEngine {
        match self.kind {
            Kind::Exa { .. } => SearchEngine::Exa,
            Kind::Searxng { .. } => SearchEngine::Searxng,
        }
    }

    /// The tools this backend serves: `websearch` and `codesearch`.
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(WebSearchTool {
                backend: self.clone(),
            }),
            Arc::new(CodeSearchTool {
                backend: self.clone(),
            }),
        ]
    }
}

/// The websearch tool.
#[derive(Debug, Clone)]
pub struct WebSearchTool {
    pub(super) backend: Arc<SearchBackend>,
}

/// The codesearch tool.
#[derive(Debug, Clone)]
pub struct CodeSearchTool {
    pub(super) backend: Arc<SearchBackend>,
}

/// Arguments of a web search, as OpenCode names them.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WebArgs {
    pub query: String,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub num_results: Option<u64>,
    #[serde(default)]
    pub livecrawl: Option<Livecrawl>,
    #[serde(default, rename = "type")]
    pub kind: Option<SearchType>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub context_max_characters: Option<u64>,
}

/// Exa's live-crawl mode.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Livecrawl {
    Fallback,
    Preferred,
}

/// Exa's search depth.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum SearchType {
    Auto,
    Fast,
    Deep,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CodeArgs {
    query: String,
    #[serde(default, deserialize_with = "lenient_u64")]
    tokens_num: Option<u64>,
}

/// The description with this year (and the one before) filled in.
fn with_year(text: &str) -> String {
    let year = crate::id::today_utc().0;
    text.replace("{{year}}", &year.to_string())
        .replace("{{previous_year}}", &(year - 1).to_string())
}

fn output(title: String, found: Option<String>, none: &str) -> ToolOutput {
    ToolOutput {
        title,
        output: found
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| none.to_string()),
        metadata: Default::default(),
        attachments: Vec::new(),
    }
}

#[async_trait]
impl Tool for WebSearchTool {
    fn id(&self) -> &'static str {
        "websearch"
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        with_year(match self.backend.engine() {
            SearchEngine::Exa => include_str!("../descriptions/websearch.txt"),
            SearchEngine::Searxng => include_str!("../descriptions/websearch_searxng.txt"),
        })
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Websearch query"},
                "numResults": {"type": "number", "description": "Number of search results to return (default: 8)"},
                "livecrawl": {
                    "type": "string",
                    "enum": ["fallback", "preferred"],
                    "description": "Live crawl mode - 'fallback': use live crawling as backup if cached content unavailable, 'preferred': prioritize live crawling (default: 'fallback')"
                },
                "type": {
                    "type": "string",
                    "enum": ["auto", "fast", "deep"],
                    "description": "Search type - 'auto': balanced search (default), 'fast': quick results, 'deep': comprehensive search"
                },
                "contextMaxCharacters": {"type": "number", "description": "Maximum characters for context string optimized for LLMs (default: 10000)"}
            },
            "required": ["query"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let shown = args.as_object().cloned().unwrap_or_default();
        let args: WebArgs = parse_args(self.id(), args)?;
        super::ask(ctx, "websearch", &args.query, shown).await?;
        let found = match &self.backend.kind {
            Kind::Exa { endpoint, key } => exa::web(endpoint, key, &args).await?,
            Kind::Searxng { url } => searxng::web(url, &args).await?,
        };
        Ok(output(
            format!("Web search: {}", args.query),
            found,
            NO_RESULTS,
        ))
    }

    fn changes_files(&self) -> bool {
        false
    }
}

#[async_trait]
impl Tool for CodeSearchTool {
    fn id(&self) -> &'static str {
        "codesearch"
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        match self.backend.engine() {
            SearchEngine::Exa => include_str!("../descriptions/codesearch.txt"),
            SearchEngine::Searxng => include_str!("../descriptions/codesearch_searxng.txt"),
        }
        .to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Search query to find relevant context for APIs, Libraries, and SDKs. For example, 'React useState hook examples', 'Python pandas dataframe filtering', 'Express.js middleware', 'Next js partial prerendering configuration'"
                },
                "tokensNum": {
                    "type": "number",
                    "minimum": MIN_TOKENS,
                    "maximum": MAX_TOKENS,
                    "default": DEFAULT_TOKENS,
                    "description": "Number of tokens to return (1000-50000). Default is 5000 tokens. Adjust this value based on how much context you need - use lower values for focused queries and higher values for comprehensive documentation."
                }
            },
            "required": ["query"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: CodeArgs = parse_args(self.id(), args)?;
        let tokens = args.tokens_num.unwrap_or(DEFAULT_TOKENS);
        if !(MIN_TOKENS..=MAX_TOKENS).contains(&tokens) {
            return Err(ToolError::InvalidArguments {
                tool: self.id().into(),
                message: format!(
                    "tokensNum: must be between {MIN_TOKENS} and {MAX_TOKENS}, got {tokens}"
                ),
            });
        }
        let mut shown = Map::new();
        shown.insert("query".into(), json!(args.query));
        shown.insert("tokensNum".into(), json!(tokens));
        super::ask(ctx, "codesearch", &args.query, shown).await?;
        let found = match &self.backend.kind {
            Kind::Exa { endpoint, key } => exa::code(endpoint, key, &args.query, tokens).await?,
            Kind::Searxng { url } => searxng::code(url, &args.query, tokens).await?,
        };
        Ok(output(
            format!("Code search: {}", args.query),
            found,
            NO_CODE,
        ))
    }

    fn changes_files(&self) -> bool {
        false
    }
}
