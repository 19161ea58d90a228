//! The contents of file parts: which types a model reads as text, `data:` URLs, and the
//! `%XX` escapes of URLs.

use base64::Engine;
use base64::engine::general_purpose::{GeneralPurposeConfig, STANDARD};
use base64::engine::{DecodePaddingMode, GeneralPurpose};

/// Whether a file of this MIME type is text a model can read inline.
pub fn is_textual(mime: &str) -> bool {
    let mime = mime.split(';').next().unwrap_or("").trim();
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/javascript"
                | "application/x-sh"
        )
}

/// The bytes of a `data:` URL (base64, standard or URL-safe with padding optional, or plain).
pub fn data_url_bytes(url: &str) -> Option<Vec<u8>> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    if !meta.ends_with(";base64") {
        return Some(data.as_bytes().to_vec());
    }
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let compact: String = data
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            other => other,
        })
        .collect();
    GeneralPurpose::new(&base64::alphabet::STANDARD, config)
        .decode(compact)
        .ok()
}

/// The text of a `data:` URL, when it is UTF-8.
pub fn data_url_text(url: &str) -> Option<String> {
    String::from_utf8(data_url_bytes(url)?).ok()
}

/// `bytes` as a base64 `data:` URL of type `mime`.
pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!("data:{mime};base64,{}", STANDARD.encode(bytes))
}

/// `text` with its `%XX` escapes decoded (a URL's path or query); invalid UTF-8 is replaced.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |b: Option<&u8>| b.and_then(|b| char::from(*b).to_digit(16));
    while i < bytes.len() {
        match (bytes[i], hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_decode_standard_url_safe_unpadded_and_plain() {
        assert_eq!(
            data_url_text("data:text/plain;base64,aGVsbG8=").unwrap(),
            "hello"
        );
        assert_eq!(
            data_url_text("data:text/plain;base64,aGVsbG8").unwrap(),
            "hello"
        );
        assert_eq!(data_url_bytes("data:x;base64,-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(
            data_url_text("data:text/plain,plain words").unwrap(),
            "plain words"
        );
        assert!(data_url_bytes("data:x;base64,a*b").is_none());
        assert!(data_url_bytes("file:///x").is_none());
        assert_eq!(data_url("image/png", b"hi"), "data:image/png;base64,aGk=");
        assert!(is_textual("application/json; charset=utf-8"));
        assert!(!is_textual("image/png"));
        assert_eq!(percent_decode("/a%20b/%C3%A9%2"), "/a b/é%2");
    }
}
