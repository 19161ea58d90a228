//! `webfetch {url, format?, timeout?}`: one web page as markdown, text or HTML, or an image as
//! an attachment.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{ACCEPT, ACCEPT_LANGUAGE, CONTENT_TYPE, LOCATION};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use tokio::time::Instant;

use super::{address, client, html, read_capped};
use crate::agent::{AgentInfo, Registry};
use crate::model::FilePart;
use crate::model::data_url::{data_url, is_textual};
use crate::tool::run::parse_args;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, looks_binary};

const ID: &str = "webfetch";

/// The most bytes of a response body.
const MAX_RESPONSE_SIZE: usize = 5 * 1024 * 1024;

/// How long a fetch may take when the call names no timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest timeout a call may ask for.
const MAX_TIMEOUT: Duration = Duration::from_secs(120);

/// The most redirects followed.
const MAX_REDIRECTS: usize = 5;

const TOO_LARGE: &str = "Response too large (exceeds 5MB limit)";

/// The webfetch tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebFetchTool;

/// What the page is returned as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Markdown,
    Text,
    Html,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::Markdown => "markdown",
            Format::Text => "text",
            Format::Html => "html",
        }
    }

    /// The `Accept` header: the asked format first, the others as fallbacks (OpenCode's).
    fn accept(self) -> &'static str {
        match self {
            Format::Markdown => {
                "text/markdown;q=1.0, text/x-markdown;q=0.9, text/plain;q=0.8, text/html;q=0.7, */*;q=0.1"
            }
            Format::Text => "text/plain;q=1.0, text/markdown;q=0.9, text/html;q=0.8, */*;q=0.1",
            Format::Html => {
                "text/html;q=1.0, application/xhtml+xml;q=0.9, text/plain;q=0.8, text/markdown;q=0.7, */*;q=0.1"
            }
        }
    }
}

#[derive(Debug, Deserialize)]
struct Args {
    url: String,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    timeout: Option<Value>,
}

/// The fetched body and what it is.
struct Page {
    /// The `Content-Type` header as sent.
    content_type: String,
    /// Its MIME type, lower-cased, without parameters.
    mime: String,
    body: Vec<u8>,
}

#[async_trait]
impl Tool for WebFetchTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("../descriptions/webfetch.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The URL to fetch content from"},
                "format": {
                    "type": "string",
                    "enum": ["text", "markdown", "html"],
                    "default": "markdown",
                    "description": "The format to return the content in (text, markdown, or html). Defaults to markdown."
                },
                "timeout": {"type": "number", "description": "Optional timeout in seconds (max 120)"}
            },
            "required": ["url"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        let format = args.format.unwrap_or_default();
        let limit = timeout(args.timeout.as_ref())?;
        let url = address::parse(&args.url).map_err(ToolError::Failed)?;
        let shown = address::pattern(&url);
        ask(ctx, &shown, format, limit, None).await?;
        let page = fetch(ctx, url, format, limit).await?;
        let title = format!("{shown} ({})", page.content_type);
        if is_image(&page.mime) {
            let attachment = FilePart {
                mime: page.mime.clone(),
                filename: None,
                url: data_url(&page.mime, &page.body),
                source: None,
            };
            return Ok(ToolOutput {
                title,
                output: "Image fetched successfully".into(),
                metadata: Default::default(),
                attachments: vec![attachment],
            });
        }
        let text = text_of(&shown, &page)?;
        let html = matches!(page.mime.as_str(), "text/html" | "application/xhtml+xml");
        let output = match format {
            Format::Markdown if html => convert(text, html::to_markdown).await?,
            Format::Text if html => convert(text, html::to_text).await?,
            _ => text,
        };
        Ok(ToolOutput {
            title,
            output,
            metadata: Default::default(),
            attachments: Vec::new(),
        })
    }

    fn changes_files(&self) -> bool {
        false
    }
}

/// The call's time limit: `timeout` seconds (at most two minutes), else 30 s.
fn timeout(given: Option<&Value>) -> Result<Duration, ToolError> {
    let Some(value) = given.filter(|v| !v.is_null()) else {
        return Ok(DEFAULT_TIMEOUT);
    };
    let seconds = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match seconds {
        Some(s) if s.is_finite() && s > 0.0 => {
            Ok(Duration::from_secs_f64(s.min(MAX_TIMEOUT.as_secs_f64())))
        }
        _ => Err(ToolError::InvalidArguments {
            tool: ID.into(),
            message: format!("timeout: expected a positive number of seconds, got {value}"),
        }),
    }
}

/// Asks for the `webfetch` permission on `pattern` (the address's normal spelling); a
/// redirect names where it came from.
async fn ask(
    ctx: &ToolContext,
    pattern: &str,
    format: Format,
    limit: Duration,
    redirected_from: Option<&str>,
) -> Result<(), ToolError> {
    let mut metadata = Map::new();
    metadata.insert("url".into(), json!(pattern));
    metadata.insert("format".into(), json!(format.as_str()));
    metadata.insert("timeout".into(), json!(limit.as_secs_f64()));
    if let Some(from) = redirected_from {
        metadata.insert("redirectedFrom".into(), json!(from));
    }
    super::ask(ctx, ID, pattern, metadata).await
}

/// GETs `url`, following at most [`MAX_REDIRECTS`] redirects, each to an address the rules
/// allow (asked for like the first); returns the final page's body. The exchange takes at most
/// `limit`, not counting time spent waiting for a permission reply.
async fn fetch(
    ctx: &ToolContext,
    start: Url,
    format: Format,
    limit: Duration,
) -> Result<Page, ToolError> {
    let client = client()?;
    let mut deadline = Instant::now() + limit;
    let mut url = start;
    let mut hops = 0;
    let response = loop {
        let request = client
            .get(url.clone())
            .header(ACCEPT, format.accept())
            .header(ACCEPT_LANGUAGE, "en-US,en;q=0.9")
            .send();
        let response = by(deadline, limit, async {
            request.await.map_err(|e| {
                ToolError::Failed(format!(
                    "Request to {} failed: {}",
                    address::pattern(&url),
                    e.without_url()
                ))
            })
        })
        .await?;
        let Some(next) = redirect(&url, &response)? else {
            break response;
        };
        hops += 1;
        if hops > MAX_REDIRECTS {
            return Err(ToolError::Failed(format!(
                "Too many redirects (more than {MAX_REDIRECTS})"
            )));
        }
        let from = address::pattern(&url);
        let asked = Instant::now();
        ask(ctx, &address::pattern(&next), format, limit, Some(&from)).await?;
        deadline += asked.elapsed();
        url = next;
    };
    let status = response.status();
    if !status.is_success() {
        return Err(ToolError::Failed(format!(
            "Request failed with status code: {}",
            status.as_u16()
        )));
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let body = by(
        deadline,
        limit,
        read_capped(response, MAX_RESPONSE_SIZE, TOO_LARGE),
    )
    .await?;
    Ok(Page {
        content_type,
        mime,
        body,
    })
}

/// Runs `work` until `deadline`; past it the call fails naming the time `limit`.
async fn by<T>(
    deadline: Instant,
    limit: Duration,
    work: impl std::future::Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    tokio::time::timeout_at(deadline, work)
        .await
        .unwrap_or_else(|_| {
            Err(ToolError::Failed(format!(
                "Request timed out after {} seconds",
                limit.as_secs_f64()
            )))
        })
}

/// Where a redirect response leads (`None` for any other response); only to `http(s)`.
fn redirect(from: &Url, response: &reqwest::Response) -> Result<Option<Url>, ToolError> {
    if !matches!(response.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return Ok(None);
    }
    let Some(location) = response
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    let next = from.join(location).map_err(|e| {
        ToolError::Failed(format!("Redirected to an invalid URL {location:?}: {e}"))
    })?;
    address::parse(next.as_str())
        .map(Some)
        .map_err(|e| ToolError::Failed(format!("Redirected to {location:?}: {e}")))
}

/// Whether a MIME type is an image a model can look at (SVG is text).
fn is_image(mime: &str) -> bool {
    mime.starts_with("image/") && mime != "image/svg+xml" && mime != "image/vnd.fastbidsheet"
}

/// The page's text: declared text, or an undeclared body that reads as text; anything else is
/// an error naming its type.
fn text_of(url: &str, page: &Page) -> Result<String, ToolError> {
    let mime = page.mime.as_str();
    let declared = is_textual(mime)
        || mime.ends_with("+xml")
        || mime.ends_with("+json")
        || mime.contains("javascript")
        || mime.contains("ecmascript");
    let head = &page.body[..page.body.len().min(8192)];
    if declared || (!looks_binary(head) && std::str::from_utf8(&page.body).is_ok()) {
        return Ok(String::from_utf8_lossy(&page.body).into_owned());
    }
    let kind = if page.content_type.is_empty() {
        "binary data without a Content-Type".to_string()
    } else {
        page.content_type.clone()
    };
    Err(ToolError::Failed(format!(
        "The content at {url} is not text ({kind}); webfetch returns text and images only"
    )))
}

/// Converts `html` on a blocking thread (a large page takes a while).
async fn convert(html: String, how: fn(&str) -> String) -> Result<String, ToolError> {
    tokio::task::spawn_blocking(move || how(&html))
        .await
        .map_err(|e| ToolError::Failed(format!("converting the page failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_default_cap_and_reject_nonsense() {
        assert_eq!(timeout(None).unwrap(), DEFAULT_TIMEOUT);
        assert_eq!(timeout(Some(&json!(5))).unwrap(), Duration::from_secs(5));
        assert_eq!(
            timeout(Some(&json!("2.5"))).unwrap(),
            Duration::from_millis(2500)
        );
        assert_eq!(timeout(Some(&json!(600))).unwrap(), MAX_TIMEOUT);
        for bad in [json!(0), json!(-1), json!("soon"), json!([])] {
            assert!(
                matches!(timeout(Some(&bad)), Err(ToolError::InvalidArguments { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn images_are_attachments_but_svg_is_text() {
        assert!(is_image("image/png"));
        assert!(!is_image("image/svg+xml"));
        assert!(!is_image("text/html"));
    }

    #[test]
    fn undeclared_text_passes_and_binary_is_refused() {
        let page = |mime: &str, body: &[u8]| Page {
            content_type: mime.into(),
            mime: mime.into(),
            body: body.to_vec(),
        };
        assert_eq!(
            text_of("u", &page("", b"plain words")).unwrap(),
            "plain words"
        );
        assert_eq!(
            text_of("u", &page("application/ld+json", b"{}")).unwrap(),
            "{}"
        );
        let err = text_of("u", &page("application/octet-stream", b"\x00\x01\xff"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not text (application/octet-stream)"), "{err}");
    }
}
