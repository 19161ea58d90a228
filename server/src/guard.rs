//! Refusals that keep a web page from driving the server: a foreign `Origin` (403), a `Host`
//! that does not name this server (403: DNS rebinding), and a state-changing request that is
//! not JSON (415: a page's `text/plain` form post).
//!
//! Requests without `Origin` (curl, SDKs) pass the origin check. When the server is bound to a
//! wildcard address (`0.0.0.0`, `::`) its own addresses are not known, so any IP literal is
//! accepted as `Host`: a DNS rebinding attack always arrives under a domain name.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::auth::is_local_origin;
use super::error::ApiError;

/// The host names a request may carry in `Host`.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// Lowercase names without port or brackets (`localhost`, `127.0.0.1`, `::1`, …).
    names: Arc<[String]>,
    /// Whether any IP literal passes (the server is bound to a wildcard address).
    any_ip: bool,
}

impl Hosts {
    /// The names allowed for a server bound to `bound` with `[server] allowed_hosts` `extra`.
    pub fn new(bound: &str, extra: &[String]) -> Hosts {
        let bound = normalize(bound);
        let any_ip = bound.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified());
        let names: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(String::from)
            .chain(std::iter::once(bound))
            .chain(extra.iter().map(|h| normalize(host_name(h))))
            .filter(|n| !n.is_empty())
            .collect();
        Hosts {
            names: names.into(),
            any_ip,
        }
    }

    /// Whether a `Host` value (with or without port) names this server.
    pub fn allows(&self, host: &str) -> bool {
        let name = normalize(host_name(host));
        self.names.contains(&name) || (self.any_ip && name.parse::<IpAddr>().is_ok())
    }
}

/// The name part of a `Host` value: `[::1]:80` -> `[::1]`, `example.com:80` -> `example.com`.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        // More than one colon without brackets: a bare IPv6 address, no port.
        Some((name, _)) if !name.contains(':') => name,
        _ => host,
    }
}

/// Lowercase, without IPv6 brackets or a trailing dot.
fn normalize(name: &str) -> String {
    let name = name.trim();
    let name = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether a `Content-Type` value is JSON (`application/json`, parameters allowed).
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Whether the request says it carries a body.
fn has_body(headers: &HeaderMap) -> bool {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    headers.contains_key(header::TRANSFER_ENCODING) || length.is_some_and(|n| n > 0)
}

fn forbidden(message: String) -> Response {
    ApiError {
        status: StatusCode::FORBIDDEN,
        name: "Forbidden",
        message,
    }
    .into_response()
}

/// Why `request` is refused, if it is.
fn refusal(hosts: &Hosts, request: &Request) -> Option<Response> {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_string()));
    if let Some(host) = host.filter(|h| !hosts.allows(h)) {
        return Some(forbidden(format!(
            "the Host `{host}` does not name this server; add its name to [server] allowed_hosts \
             to accept it"
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        if !is_local_origin(&origin) {
            return Some(forbidden(format!(
                "the Origin `{origin}` is not allowed: only pages from localhost, 127.0.0.1 or \
                 [::1] may call this server"
            )));
        }
    }
    let changes_state = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if changes_state {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let refused = match &content_type {
            Some(ct) => !is_json(ct),
            None => has_body(headers),
        };
        if refused {
            let given = content_type.map_or("none".to_string(), |ct| format!("`{ct}`"));
            return Some(
                ApiError {
                    status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    name: "UnsupportedMediaType",
                    message: format!(
                        "{} {} needs Content-Type: application/json (given: {given})",
                        request.method(),
                        request.uri().path()
                    ),
                }
                .into_response(),
            );
        }
    }
    None
}

/// Refuses foreign hosts and origins and non-JSON state-changing requests.
pub async fn check(State(hosts): State<Hosts>, request: Request, next: Next) -> Response {
    match refusal(&hosts, &request) {
        Some(response) => response,
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_compared_without_port_case_or_brackets() {
        let hosts = Hosts::new("127.0.0.1", &["My.Box:8080".into()]);
        for ok in [
            "localhost",
            "LOCALHOST:4096",
            "localhost.",
            "127.0.0.1:4096",
            "[::1]:4096",
            "[::1]",
            "my.box",
            "my.box:1",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for bad in [
            "evil.com",
            "evil.com:4096",
            "localhost.evil.com",
            "127.0.0.1.nip.io",
            "10.0.0.1",
            "[::2]:80",
            "",
        ] {
            assert!(!hosts.allows(bad), "{bad}");
        }
    }

    #[test]
    fn a_wildcard_bind_accepts_ip_literals_but_not_names() {
        for bound in ["0.0.0.0", "::", "[::]"] {
            let hosts = Hosts::new(bound, &[]);
            assert!(hosts.allows("192.168.1.20:4096"), "{bound}");
            assert!(hosts.allows("[fe80::1]:4096"), "{bound}");
            assert!(hosts.allows("localhost:4096"), "{bound}");
            assert!(!hosts.allows("attacker.example:4096"), "{bound}");
        }
    }

    #[test]
    fn the_bound_name_is_allowed() {
        let hosts = Hosts::new("devbox.lan", &[]);
        assert!(hosts.allows("devbox.lan:4096"));
        assert!(!hosts.allows("10.1.2.3"));
    }

    #[test]
    fn json_content_types_pass_with_parameters() {
        for ok in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
        ] {
            assert!(is_json(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonp",
            "",
        ] {
            assert!(!is_json(bad), "{bad}");
        }
    }
}
