//! A client of OpenCode's HTTP/SSE API, as `taskforce serve` (or OpenCode's own server) speaks
//! it: what the TUI and `run --attach` use to reach a runtime they do not hold.

mod events;

use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use taskforce_actors::permission::{PermissionReply, PermissionRequest};
use taskforce_actors::question::QuestionRequest;
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, SessionTree};
use taskforce_agents::model::Session;

pub use events::{EventStream, ServerEvent};

/// Why a call to the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL is not an http(s) URL.
    #[error("not a server URL: {0} (expected http://HOST:PORT)")]
    BadUrl(String),
    /// The server could not be reached.
    #[error("cannot reach {url}: {cause}")]
    Unreachable {
        /// What was called.
        url: String,
        /// Why it failed.
        cause: String,
    },
    /// The server answered with an error status.
    #[error("{method} {path}: {status}: {message}")]
    Status {
        /// The request's method.
        method: Method,
        /// The request's path.
        path: String,
        /// The status.
        status: StatusCode,
        /// The server's error message (or its body).
        message: String,
    },
    /// The answer was not what the route promises.
    #[error("{path}: unexpected answer: {cause}")]
    Decode {
        /// The request's path.
        path: String,
        /// Why it could not be read.
        cause: String,
    },
}

/// A connection to one server (cheap to clone).
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    password: Option<String>,
    /// The basic-auth user sent with the password.
    user: String,
}

/// The basic-auth user of `taskforce serve`.
pub const TASKFORCE_USER: &str = taskforce_server::AUTH_USER;

impl Client {
    /// A client of the server at `base` (`http://HOST:PORT`), with the server's password if it
    /// has one (`TASKFORCE_SERVER_PASSWORD` on its side), sent as user `taskforce`.
    pub fn new(base: &str, password: Option<String>) -> Result<Client, ClientError> {
        let base = base.trim_end_matches('/');
        let rest = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"));
        if rest.is_none_or(str::is_empty) {
            return Err(ClientError::BadUrl(base.to_string()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| ClientError::Unreachable {
                url: base.to_string(),
                cause: e.to_string(),
            })?;
        Ok(Client {
            base: base.to_string(),
            http,
            password,
            user: TASKFORCE_USER.to_string(),
        })
    }

    /// The same client sending its password as `user` (OpenCode's server expects `opencode`).
    pub fn with_user(mut self, user: &str) -> Client {
        self.user = user.to_string();
        self
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.password {
            Some(password) => request.basic_auth(&self.user, Some(password)),
            None => request,
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, ClientError> {
        let mut request = self.request(method.clone(), path);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.unreachable(path, &e))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.unreachable(path, &e))?;
        if !status.is_success() {
            return Err(ClientError::Status {
                method,
                path: path.to_string(),
                status,
                message: error_message(&bytes),
            });
        }
        // A route without content (204) answers nothing: read as `null`.
        let body: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
        serde_json::from_slice(body).map_err(|e| ClientError::Decode {
            path: path.to_string(),
            cause: e.to_string(),
        })
    }

    fn unreachable(&self, path: &str, error: &reqwest::Error) -> ClientError {
        let mut cause = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(inner) = source {
            cause = format!("{cause}: {inner}");
            source = inner.source();
        }
        ClientError::Unreachable {
            url: format!("{}{path}", self.base),
            cause,
        }
    }

    /// `GET /global/health`: the server's version, once it answers.
    pub async fn health(&self) -> Result<Value, ClientError> {
        self.call(Method::GET, "/global/health", None::<&()>).await
    }

    /// The directory of the project the server serves (`GET /path`, else a session's).
    pub async fn project_directory(&self) -> Option<String> {
        if let Ok(path) = self.call::<Value>(Method::GET, "/path", None::<&()>).await
            && let Some(directory) = path.get("directory").and_then(Value::as_str)
        {
            return Some(directory.to_string());
        }
        let sessions = self.sessions().await.ok()?;
        sessions.first().map(|s| s.directory.display().to_string())
    }

    /// `GET /session`: every root and child session of the project.
    pub async fn sessions(&self) -> Result<Vec<Session>, ClientError> {
        self.call(Method::GET, "/session", None::<&()>).await
    }

    /// `GET /session/:id`.
    pub async fn session(&self, id: &str) -> Result<Session, ClientError> {
        self.call(Method::GET, &format!("/session/{id}"), None::<&()>)
            .await
    }

    /// `POST /session`: a new root session.
    pub async fn create_session(&self, title: Option<&str>) -> Result<Session, ClientError> {
        let body = match title {
            Some(title) => json!({ "title": title }),
            None => json!({}),
        };
        self.call(Method::POST, "/session", Some(&body)).await
    }

    /// `GET /session/:id/tree`: the session's tree with each node's status and usage.
    pub async fn tree(&self, id: &str) -> Result<SessionTree, ClientError> {
        self.call(Method::GET, &format!("/session/{id}/tree"), None::<&()>)
            .await
    }

    /// `GET /session/:id/children`.
    pub async fn children(&self, id: &str) -> Result<Vec<Session>, ClientError> {
        self.call(Method::GET, &format!("/session/{id}/children"), None::<&()>)
            .await
    }

    /// `GET /session/:id/message`: the messages with their parts, oldest first.
    pub async fn messages(&self, id: &str) -> Result<Vec<MessageWithParts>, ClientError> {
        self.call(Method::GET, &format!("/session/{id}/message"), None::<&()>)
            .await
    }

    /// `POST /session/:id/prompt_async`: starts a prompt; its progress comes as events.
    pub async fn prompt_async(&self, id: &str, prompt: &PromptInput) -> Result<(), ClientError> {
        self.call_empty(Method::POST, &format!("/session/{id}/prompt_async"), prompt)
            .await
    }

    /// `POST /session/:id/command`: runs a slash command and waits for its answer.
    pub async fn command(
        &self,
        id: &str,
        command: &str,
        arguments: &str,
        agent: Option<&str>,
    ) -> Result<MessageWithParts, ClientError> {
        self.command_on(id, command, arguments, agent, None).await
    }

    /// [`Client::command`] on `model` (`provider/model`) when one is given.
    pub async fn command_on(
        &self,
        id: &str,
        command: &str,
        arguments: &str,
        agent: Option<&str>,
        model: Option<&str>,
    ) -> Result<MessageWithParts, ClientError> {
        let mut body = json!({ "command": command, "arguments": arguments });
        if let Some(agent) = agent {
            body["agent"] = json!(agent);
        }
        if let Some(model) = model {
            body["model"] = json!(model);
        }
        self.call(Method::POST, &format!("/session/{id}/command"), Some(&body))
            .await
    }

    /// `POST /session/:id/abort`: cancels the session's run and its whole subtree.
    pub async fn abort(&self, id: &str) -> Result<(), ClientError> {
        self.call_empty(Method::POST, &format!("/session/{id}/abort"), &json!({}))
            .await
    }

    /// `POST /session/:id/summarize`: compacts the session's history.
    pub async fn summarize(&self, id: &str) -> Result<(), ClientError> {
        self.call_empty(
            Method::POST,
            &format!("/session/{id}/summarize"),
            &json!({}),
        )
        .await
    }

    /// `GET /agent`: the configured agents, in OpenCode's shape.
    pub async fn agents(&self) -> Result<Vec<Value>, ClientError> {
        self.call(Method::GET, "/agent", None::<&()>).await
    }

    /// `GET /command`: the slash commands, in OpenCode's shape.
    pub async fn commands(&self) -> Result<Vec<Value>, ClientError> {
        self.call(Method::GET, "/command", None::<&()>).await
    }

    /// `GET /config`: the server's configuration, in OpenCode's shape.
    pub async fn config(&self) -> Result<Value, ClientError> {
        self.call(Method::GET, "/config", None::<&()>).await
    }

    /// `GET /permission`: every pending permission ask.
    pub async fn permissions(&self) -> Result<Vec<PermissionRequest>, ClientError> {
        self.call(Method::GET, "/permission", None::<&()>).await
    }

    /// `POST /permission/:id/reply`.
    pub async fn reply(&self, id: &str, reply: PermissionReply) -> Result<(), ClientError> {
        self.reply_with(id, reply, None).await
    }

    /// `POST /permission/:id/reply` with a message for the model (why an ask was refused).
    pub async fn reply_with(
        &self,
        id: &str,
        reply: PermissionReply,
        message: Option<&str>,
    ) -> Result<(), ClientError> {
        let mut body = json!({ "reply": reply });
        if let Some(message) = message {
            body["message"] = json!(message);
        }
        self.call_empty(Method::POST, &format!("/permission/{id}/reply"), &body)
            .await
    }

    /// `GET /question`: the questions waiting for the user.
    pub async fn questions(&self) -> Result<Vec<QuestionRequest>, ClientError> {
        self.call(Method::GET, "/question", None::<&()>).await
    }

    /// `POST /question/:id/reply`: answers a question (the labels picked, one list per
    /// question).
    pub async fn answer_question(
        &self,
        id: &str,
        answers: &[Vec<String>],
    ) -> Result<(), ClientError> {
        let body = json!({ "answers": answers });
        self.call_empty(Method::POST, &format!("/question/{id}/reply"), &body)
            .await
    }

    /// `POST /question/:id/reject`: dismisses a question.
    pub async fn dismiss_question(&self, id: &str) -> Result<(), ClientError> {
        self.call_empty(Method::POST, &format!("/question/{id}/reject"), &json!({}))
            .await
    }

    /// `POST /session/:id/revert`: rolls the session back to before `message`.
    pub async fn revert(&self, id: &str, message: &str) -> Result<(), ClientError> {
        self.call_empty(
            Method::POST,
            &format!("/session/{id}/revert"),
            &json!({ "messageID": message }),
        )
        .await
    }

    /// `POST /session/:id/unrevert`: brings back what the session's revert undid.
    pub async fn unrevert(&self, id: &str) -> Result<(), ClientError> {
        self.call_empty(Method::POST, &format!("/session/{id}/unrevert"), &json!({}))
            .await
    }

    /// `GET /find/file?query=`: project files whose path matches `query`.
    pub async fn find_files(&self, query: &str) -> Result<Vec<String>, ClientError> {
        let path = format!("/find/file?query={}", encode_query(query));
        self.call(Method::GET, &path, None::<&()>).await
    }

    /// Whether the server can undo a turn (its OpenAPI document has the revert route).
    pub async fn can_revert(&self) -> bool {
        self.call::<Value>(Method::GET, "/doc", None::<&()>)
            .await
            .ok()
            .and_then(|doc| doc.get("paths").cloned())
            .is_some_and(|paths| paths.get("/session/{sessionID}/revert").is_some())
    }

    /// A call whose answer does not matter beyond its status.
    async fn call_empty(
        &self,
        method: Method,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<(), ClientError> {
        self.call::<serde::de::IgnoredAny>(method, path, Some(body))
            .await
            .map(|_| ())
    }

    /// `GET /event`: the project's events, reconnecting with `Last-Event-ID` when the stream
    /// drops.
    pub fn events(&self) -> EventStream {
        EventStream::new(self.clone())
    }
}

/// `text` percent-encoded for a query string.
fn encode_query(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~/".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The message of an error answer: OpenCode's `{data: {message}}`, `{message}` or the text.
fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return text.trim().to_string();
    };
    value
        .pointer("/data/message")
        .or_else(|| value.get("message"))
        .or_else(|| value.pointer("/error/message"))
        .and_then(Value::as_str)
        .map_or_else(|| text.trim().to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_that_is_not_http_is_refused_by_name() {
        let error = Client::new("localhost:4096", None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "not a server URL: localhost:4096 (expected http://HOST:PORT)"
        );
        assert!(Client::new("http://", None).is_err());
        assert!(Client::new("http://127.0.0.1:4096/", None).is_ok());
    }

    #[test]
    fn query_text_is_percent_encoded() {
        assert_eq!(encode_query("src/ma in&x"), "src/ma%20in%26x");
        assert_eq!(encode_query("é"), "%C3%A9");
    }

    #[test]
    fn an_error_answer_gives_its_message() {
        assert_eq!(
            error_message(br#"{"name":"NotFoundError","data":{"message":"no session"}}"#),
            "no session"
        );
        assert_eq!(error_message(br#"{"message":"bad"}"#), "bad");
        assert_eq!(error_message(b"plain words\n"), "plain words");
    }
}
