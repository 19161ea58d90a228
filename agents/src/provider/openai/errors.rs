//! HTTP error statuses and in-stream error objects → [`ProviderError`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::provider::ProviderError;

/// Phrases providers use when a request does not fit the context window (lowercase).
const OVERFLOW_PHRASES: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "too many tokens",
    "prompt is too long",
    "exceeds the context",
];

/// The error for an HTTP error response (`status` ≥ 400) with its headers and body.
pub(crate) fn from_status(
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    body: String,
) -> ProviderError {
    let overflow = mentions_overflow(&body);
    status_error(provider, status, headers, body, message_of, overflow)
}

/// The error a status stands for, as every adapter reads it: 401/403 → `Auth` and a 400/413
/// whose body talks about the context length (`overflow`) → `ContextOverflow`, both with the
/// `message` the body gives; any other → `Http` with the body and the wait the headers ask for.
pub(crate) fn status_error(
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    body: String,
    message: impl FnOnce(&str) -> String,
    overflow: bool,
) -> ProviderError {
    match status {
        401 | 403 => ProviderError::Auth {
            provider: provider.to_string(),
            message: message(&body),
        },
        400 | 413 if overflow => ProviderError::ContextOverflow {
            message: message(&body),
        },
        _ => ProviderError::Http {
            provider: provider.to_string(),
            status,
            body,
            retry_after: retry_after(headers, SystemTime::now()),
        },
    }
}

/// The error for an `{"error": …}` object sent inside the event stream.
pub(crate) fn from_stream_error(provider: &str, error: &Value) -> ProviderError {
    let body = serde_json::json!({ "error": error }).to_string();
    if mentions_overflow(&body) {
        return ProviderError::ContextOverflow {
            message: message_of(&body),
        };
    }
    let code = error
        .get("code")
        .and_then(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
        })
        .filter(|c| (400..600).contains(c))
        .and_then(|c| u16::try_from(c).ok());
    match code {
        Some(401 | 403) => ProviderError::Auth {
            provider: provider.to_string(),
            message: message_of(&body),
        },
        code => ProviderError::Http {
            provider: provider.to_string(),
            status: code.unwrap_or(500),
            body,
            retry_after: None,
        },
    }
}

/// Whether an error body says the context window was exceeded.
fn mentions_overflow(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    OVERFLOW_PHRASES.iter().any(|p| lower.contains(p))
}

/// `error.message` of an OpenAI-style error body, else the body itself.
fn message_of(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            let m = v.get("error")?;
            match m {
                Value::String(s) => Some(s.clone()),
                _ => m.get("message")?.as_str().map(str::to_string),
            }
        })
        .unwrap_or_else(|| body.trim().to_string())
}

/// The longest wait a `retry-after` header is followed for: a server asking for more (a
/// quota reset hours away, a garbled value) is waited on this long, then retried.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// What `retry-after-ms` (milliseconds) or `retry-after` (seconds or an HTTP date) ask for,
/// at most [`MAX_RETRY_AFTER`].
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    asked_wait(headers, now).map(|d| d.min(MAX_RETRY_AFTER))
}

/// The wait the headers ask for, unbounded (saturating at [`Duration::MAX`]).
fn asked_wait(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let wait = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX);
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(wait(ms / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| wait(secs));
    }
    let at = http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP dates take.
fn http_date(s: &str) -> Option<SystemTime> {
    let (_, rest) = s.split_once(',')?;
    let mut it = rest.split_whitespace();
    let day: u64 = it.next()?.parse().ok()?;
    let month = match it.next()?.to_ascii_lowercase().as_str() {
        "jan" => 1,
        "feb" => 2,
        "mar" => 3,
        "apr" => 4,
        "may" => 5,
        "jun" => 6,
        "jul" => 7,
        "aug" => 8,
        "sep" => 9,
        "oct" => 10,
        "nov" => 11,
        "dec" => 12,
        _ => return None,
    };
    let year: i64 = it.next()?.parse().ok()?;
    if !(1..=9999).contains(&year) {
        return None;
    }
    let mut hms = it.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day as i64);
    let secs = u64::try_from(days).ok()? * 86_400 + h * 3600 + m * 60 + sec;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderName, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn retry_after_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770);
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "1500")]), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")]), now),
            Some(Duration::from_secs(7))
        );
        // 1994-11-06 08:49:37 UTC is 784111777.
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                now
            ),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                now + Duration::from_secs(60)
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        // Waits past an hour (or past what a duration holds) are an hour; no panic.
        for huge in ["1e20", "86400", "1e300"] {
            assert_eq!(
                retry_after(&headers(&[("retry-after", huge)]), now),
                Some(MAX_RETRY_AFTER),
                "{huge}"
            );
            assert_eq!(
                retry_after(&headers(&[("retry-after-ms", huge)]), now),
                Some(if huge == "86400" {
                    Duration::from_millis(86_400)
                } else {
                    MAX_RETRY_AFTER
                }),
                "{huge} ms"
            );
        }
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")]),
                now
            ),
            Some(MAX_RETRY_AFTER)
        );
        // Years no HTTP date has are not dates.
        for year in ["0", "10000", "-5", "99999999999999999"] {
            let date = format!("Fri, 31 Dec {year} 23:59:59 GMT");
            assert_eq!(
                retry_after(&headers(&[("retry-after", &date)]), now),
                None,
                "{date}"
            );
        }
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
        // retry-after-ms wins over retry-after.
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "9"), ("retry-after-ms", "20")]),
                now
            ),
            Some(Duration::from_millis(20))
        );
    }

    #[test]
    fn days_from_civil_matches_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn statuses_are_classified() {
        let h = HeaderMap::new();
        assert!(matches!(
            from_status("p", 401, &h, r#"{"error":{"message":"bad key"}}"#.into()),
            ProviderError::Auth { message, .. } if message == "bad key"
        ));
        assert!(matches!(
            from_status("p", 400, &h, r#"{"error":{"code":"context_length_exceeded","message":"too long"}}"#.into()),
            ProviderError::ContextOverflow { message } if message == "too long"
        ));
        assert!(matches!(
            from_status("p", 400, &h, "bad request".into()),
            ProviderError::Http { status: 400, .. }
        ));
        assert!(matches!(
            from_status("p", 503, &h, "busy".into()),
            ProviderError::Http { status: 503, .. }
        ));
    }

    #[test]
    fn stream_errors_are_classified() {
        let e = from_stream_error(
            "p",
            &serde_json::json!({"message": "overloaded", "code": 529}),
        );
        assert!(matches!(e, ProviderError::Http { status: 529, .. }));
        assert!(e.is_retryable());
        let e = from_stream_error(
            "p",
            &serde_json::json!({"message": "This model's maximum context length is 10"}),
        );
        assert!(matches!(e, ProviderError::ContextOverflow { .. }));
        let e = from_stream_error("p", &serde_json::json!("boom"));
        assert!(matches!(e, ProviderError::Http { status: 500, .. }));
    }
}
