//! Web addresses as webfetch takes them, and the one spelling of each that permission rules
//! are matched against.
//!
//! The rules' wildcards are case-sensitive text, so an address is put in its normal form first
//! (WHATWG URL parsing: lower-case scheme and host, IDNA, numeric IPv4 forms, default ports
//! dropped, `.` and `..` segments resolved), then `%XX` escapes of characters that need none
//! are decoded and the others upper-cased (RFC 3986, 6.2.2), and credentials and the fragment
//! are left out: `HTTPS://Evil.COM:443/%61dmin#x` is checked as `https://evil.com/admin`, so a
//! rule on that address is not outrun by another spelling of it.

use reqwest::Url;

/// The address `input` names, when it is an `http://` or `https://` URL.
pub(crate) fn parse(input: &str) -> Result<Url, String> {
    let trimmed = input.trim();
    let scheme_ok = ["http://", "https://"].iter().any(|prefix| {
        trimmed
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    });
    if !scheme_ok {
        return Err("URL must start with http:// or https://".into());
    }
    let url = Url::parse(trimmed).map_err(|e| format!("Invalid URL {trimmed:?}: {e}"))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("Invalid URL {trimmed:?}: no host"));
    }
    Ok(url)
}

/// The spelling of `url` that `webfetch` rules are matched against (see the module docs).
pub(crate) fn pattern(url: &Url) -> String {
    let mut url = url.clone();
    // Neither fails on an http(s) URL with a host.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_fragment(None);
    let path = normal_escapes(url.path());
    url.set_path(&path);
    if let Some(query) = url.query().map(normal_escapes) {
        url.set_query(Some(&query));
    }
    url.to_string()
}

/// The permission pattern of `input`: its normal spelling when it is a web address, else the
/// text as given (for `permission explain`).
pub fn webfetch_pattern(input: &str) -> String {
    parse(input).map_or_else(|_| input.to_string(), |url| pattern(&url))
}

/// `text` with `%XX` escapes of unreserved characters decoded and the rest upper-cased.
fn normal_escapes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escape {
            Some(b) if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => {
                out.push(char::from(b));
                i += 3;
            }
            Some(b) => {
                out.push_str(&format!("%{b:02X}"));
                i += 3;
            }
            None => {
                // Not an escape: copy the whole character.
                let len = text[i..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&text[i..i + len]);
                i += len;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(input: &str) -> String {
        pattern(&parse(input).unwrap())
    }

    #[test]
    fn only_http_and_https_are_fetched() {
        for bad in [
            "ftp://x.org/",
            "file:///etc/passwd",
            "example.com",
            "javascript:x",
        ] {
            assert_eq!(
                parse(bad).unwrap_err(),
                "URL must start with http:// or https://",
                "{bad}"
            );
        }
        assert!(parse("http://").unwrap_err().starts_with("Invalid URL"));
        assert!(parse("HTTPS://example.com").is_ok());
    }

    #[test]
    fn spellings_of_one_address_share_one_pattern() {
        let normal = "https://evil.com/admin";
        for spelling in [
            "HTTPS://EVIL.COM/admin",
            "https://Evil.Com:443/admin",
            "https://evil.com/%61dmin",
            "https://evil.com/x/../admin",
            "https://evil.com/admin#frag",
            "https://user:secret@evil.com/admin",
            "  https://evil.com/admin ",
        ] {
            assert_eq!(pat(spelling), normal, "{spelling}");
        }
        assert_eq!(pat("http://0x7f.1/"), "http://127.0.0.1/");
        assert_eq!(pat("https://example.com"), "https://example.com/");
        assert_eq!(
            pat("https://x.org/a%2fb?q=%7e%2f"),
            "https://x.org/a%2Fb?q=~%2F"
        );
        assert_eq!(pat("https://x.org/caf%C3%A9"), "https://x.org/caf%C3%A9");
    }

    #[test]
    fn explain_shows_what_is_not_a_web_address_as_given() {
        assert_eq!(webfetch_pattern("HTTP://A.ORG"), "http://a.org/");
        assert_eq!(webfetch_pattern("*.org"), "*.org");
    }
}
