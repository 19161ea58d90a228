//! Prefixed, time-ordered identifiers: `ses_…`, `msg_…`, `prt_…`, `per_…`, `que_…`, `call_…`.
//!
//! An id is `<prefix>_<body>`, and generated ids follow OpenCode's scheme, so that they sort
//! together with the ids OpenCode's clients make themselves: the body is 12 hexadecimal digits
//! of the time (milliseconds × 4096 plus a counter, its low 48 bits) and 14 random base-62
//! characters. Message, part and other ids are *ascending* (a later id compares greater, even
//! within one millisecond in one process); session ids are *descending*, as OpenCode's: the
//! newest session sorts first. Parsing is more lenient: any non-empty run of ASCII letters and
//! digits is accepted as a body, so ids stored by earlier versions (a 26-character ULID body)
//! and ids minted by clients round-trip.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use ulid::Ulid;

/// The error for a string that is not a valid id of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id {input:?}: expected \"{prefix}_\" followed by ASCII letters and digits")]
pub struct IdError {
    /// What the id names (`session`, `message`, …).
    pub kind: &'static str,
    /// The prefix the id must start with, without the underscore (`ses`).
    pub prefix: &'static str,
    /// The rejected input.
    pub input: String,
}

/// The last time-and-counter value handed out in this process.
static LAST: Mutex<u64> = Mutex::new(0);

/// The low 48 bits: what the 12 hexadecimal digits of a body hold.
const MASK_48: u64 = (1 << 48) - 1;

/// A time-and-counter value greater than every one this function returned before in this
/// process: the current millisecond × 4096 plus a counter.
fn next_value() -> u64 {
    // A poisoned lock only means another thread panicked while holding it; the value stays valid.
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    let now = now_ms().saturating_mul(0x1000).saturating_add(1);
    let next = now.max(last.saturating_add(1));
    *last = next;
    next
}

/// The digits of a body's random tail.
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Appends 14 base-62 characters from 80 random bits: two halves of 40 bits, 7 characters
/// each (62⁷ > 2⁴⁰), so that only 64-bit arithmetic is needed.
fn push_random_tail(out: &mut String) {
    const MASK_40: u128 = (1 << 40) - 1;
    let bits = Ulid::new().random();
    for half in [bits & MASK_40, (bits >> 40) & MASK_40] {
        let mut half = u64::try_from(half).unwrap_or(0);
        for _ in 0..7 {
            let digit = usize::try_from(half % 62).unwrap_or(0);
            out.push(char::from(BASE62[digit]));
            half /= 62;
        }
    }
}

/// A fresh id `<prefix>_<body>`, the body ascending, or descending (newer sorts first) as
/// OpenCode's session ids.
fn fresh(prefix: &str, descending: bool) -> Arc<str> {
    const HEX: &[u8] = b"0123456789abcdef";
    thread_local! {
        /// Where ids are spelled before their shared copy is made (one allocation per id).
        static SPELLING: RefCell<String> = const { RefCell::new(String::new()) };
    }
    let value = next_value();
    let time = if descending { !value } else { value } & MASK_48;
    SPELLING.with_borrow_mut(|out| {
        out.clear();
        out.push_str(prefix);
        out.push('_');
        for shift in (0..12).rev() {
            let nibble = usize::try_from((time >> (shift * 4)) & 0xf).unwrap_or(0);
            out.push(char::from(HEX[nibble]));
        }
        push_random_tail(out);
        Arc::from(out.as_str())
    })
}

/// Checks `input` against `<prefix>_<ASCII alphanumerics>`.
fn validate(input: &str, kind: &'static str, prefix: &'static str) -> Result<(), IdError> {
    let valid = input
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|body| !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric()));
    if valid {
        Ok(())
    } else {
        Err(IdError {
            kind,
            prefix,
            input: input.to_string(),
        })
    }
}

/// The creation time of a canonical ULID body (26 upper-case Crockford base32 characters), as
/// earlier versions generated.
fn ulid_timestamp_ms(body: &str) -> Option<u64> {
    const CROCKFORD: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let bytes = body.as_bytes();
    // 26 characters carry 130 bits; a first character above `7` would not fit in 128.
    if bytes.len() != 26 || bytes[0] > b'7' || !bytes.iter().all(|b| CROCKFORD.contains(b)) {
        return None;
    }
    Ulid::from_string(body).ok().map(|u| u.timestamp_ms())
}

/// The current time in milliseconds since the Unix epoch, as OpenCode stores times.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Today's date `(year, month, day)` in UTC.
pub fn today_utc() -> (i64, u32, u32) {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    civil_from_days(i64::try_from(days).unwrap_or(0))
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

/// The OpenAPI schema of an id: a string of the prefix, `_`, then ASCII letters and digits.
#[cfg(feature = "openapi")]
fn id_schema(prefix: &str, kind: &str) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!("^{prefix}_[A-Za-z0-9]+$")))
        .description(Some(format!(
            "The id of a {kind}: `{prefix}_` then ASCII letters and digits."
        )))
        .into()
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal, $descending:literal) => {
        $(#[$doc])*
        ///
        /// Shared text: a copy of the id costs a reference count, not an allocation.
        #[derive(Debug, Clone, Eq, PartialOrd, Ord)]
        pub struct $name(::std::sync::Arc<str>);

        impl ::std::hash::Hash for $name {
            fn hash<H: ::std::hash::Hasher>(&self, state: &mut H) {
                // As the text hashes, so that maps keyed by ids can be searched by `&str`.
                (*self.0).hash(state)
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                // Copies of one id share their text: no need to compare it.
                ::std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
            }
        }

        impl $name {
            /// The prefix every id of this kind starts with, without the underscore.
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id that sorts after (or, for sessions, before) every id of its kind
            /// generated before it in this process.
            #[allow(clippy::new_without_default)] // a fresh unique id is not a "default" value
            pub fn new() -> Self {
                $name(fresh($prefix, $descending))
            }

            /// Validates an id received from outside: the prefix, then letters and digits.
            pub fn parse(input: &str) -> Result<Self, IdError> {
                validate(input, $kind, $prefix)?;
                Ok($name(input.into()))
            }

            /// The id as a string, prefix included.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The part after `<prefix>_`.
            pub fn body(&self) -> &str {
                self.0.get($prefix.len() + 1..).unwrap_or_default()
            }

            /// The creation time in epoch milliseconds, when the body is a ULID (an id stored by
            /// an earlier version).
            pub fn timestamp_ms(&self) -> Option<u64> {
                ulid_timestamp_ms(self.body())
            }

            /// The id as an owned string.
            pub fn into_string(self) -> String {
                self.0.to_string()
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::parse(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                validate(&s, $kind, $prefix)?;
                Ok($name(s.into()))
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;

            fn try_from(s: &str) -> Result<Self, Self::Error> {
                $name::parse(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0.to_string()
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        #[cfg(feature = "openapi")]
        impl ::utoipa::PartialSchema for $name {
            fn schema() -> ::utoipa::openapi::RefOr<::utoipa::openapi::schema::Schema> {
                id_schema($prefix, $kind)
            }
        }

        #[cfg(feature = "openapi")]
        impl ::utoipa::ToSchema for $name {
            fn name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(stringify!($name))
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // Straight from the text read to the shared copy.
                struct Text;
                impl ::serde::de::Visitor<'_> for Text {
                    type Value = $name;

                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", $kind, " id"))
                    }

                    fn visit_str<E: ::serde::de::Error>(self, text: &str) -> Result<$name, E> {
                        $name::parse(text).map_err(E::custom)
                    }
                }
                deserializer.deserialize_str(Text)
            }
        }
    };
}

prefixed_id!(
    /// The id of a session: `ses_…`.
    SessionId,
    "ses",
    "session",
    true
);
prefixed_id!(
    /// The id of a message (user or assistant): `msg_…`.
    MessageId,
    "msg",
    "message",
    false
);
prefixed_id!(
    /// The id of a part of a message: `prt_…`.
    PartId,
    "prt",
    "part",
    false
);
prefixed_id!(
    /// The id of a pending permission request: `per_…`.
    PermissionId,
    "per",
    "permission",
    false
);
prefixed_id!(
    /// The id of a pending question to the user: `que_…`.
    QuestionId,
    "que",
    "question",
    false
);
prefixed_id!(
    /// The id of a tool call minted by taskforce: `call_…` (providers' own call ids are plain strings).
    CallId,
    "call",
    "call",
    false
);

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn generated_ids_have_prefix_and_opencodes_body() {
        let id = SessionId::new();
        assert!(id.as_str().starts_with("ses_"));
        assert_eq!(id.body().len(), 26);
        assert!(
            id.body()[..12]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert!(id.body()[12..].bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(SessionId::parse(id.as_str()).unwrap(), id);
        assert!(MessageId::new().as_str().starts_with("msg_"));
        assert!(PartId::new().as_str().starts_with("prt_"));
        assert!(PermissionId::new().as_str().starts_with("per_"));
        assert!(QuestionId::new().as_str().starts_with("que_"));
        assert!(CallId::new().as_str().starts_with("call_"));
    }

    #[test]
    fn generated_ids_strictly_increase() {
        let mut prev = PartId::new();
        for _ in 0..10_000 {
            let next = PartId::new();
            assert!(next > prev, "{next} should sort after {prev}");
            prev = next;
        }
        // Ids of different kinds share one generator, so their bodies interleave in order too.
        let a = MessageId::new();
        let b = PartId::new();
        assert!(a.body() < b.body());
    }

    /// The time part of an OpenCode-scheme body: milliseconds × 4096 plus a counter, low 48 bits.
    fn time_part(body: &str) -> u64 {
        u64::from_str_radix(&body[..12], 16).unwrap()
    }

    #[test]
    fn the_time_part_is_now_in_milliseconds_times_4096_plus_a_counter() {
        let before = now_ms();
        let id = MessageId::new();
        let after = now_ms();
        let ms = time_part(id.body()) >> 12;
        let window = (1u64 << 36) - 1;
        assert!(
            (before & window) <= ms && ms <= (after & window) + 1,
            "{before} <= {ms} <= {after} (low 36 bits)"
        );
    }

    #[test]
    fn session_ids_descend_and_an_id_a_client_makes_later_sorts_after_ours() {
        let older = SessionId::new();
        let newer = SessionId::new();
        assert!(
            newer < older,
            "the newest session sorts first: {newer} {older}"
        );
        let ours = MessageId::new();
        // A client's id made a moment later, by OpenCode's formula.
        let later = ((now_ms() + 5) * 0x1000 + 1) & MASK_48;
        let theirs = MessageId::parse(&format!("msg_{later:012x}{}", "a".repeat(14))).unwrap();
        assert!(ours < theirs, "{ours} < {theirs}");
    }

    #[test]
    fn ids_of_other_schemes_parse_but_have_no_ulid_timestamp() {
        let id = SessionId::parse("ses_0a1b2c3d4e5f6ABCDEFghijkl").unwrap();
        assert_eq!(id.to_string(), "ses_0a1b2c3d4e5f6ABCDEFghijkl");
        assert_eq!(id.timestamp_ms(), None);
        let id: MessageId = "msg_1".parse().unwrap();
        assert_eq!(id.body(), "1");
    }

    #[test]
    fn parse_rejects_bad_prefixes_and_bodies() {
        for bad in [
            "",
            "ses",
            "ses_",
            "msg_01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "sesX01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "ses_01ARZ3NDEKTSV4RRFFQ69G5FA-",
            "ses_../etc/passwd",
            "ses_ abc",
            "SES_abc",
            "ses_é",
        ] {
            assert!(SessionId::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        // `call` must not accept `callX_…` nor `ca_…`.
        assert!(CallId::parse("callx_abc").is_err());
        assert!(CallId::parse("call_abc").is_ok());
    }

    #[test]
    fn error_names_kind_prefix_and_input() {
        let err = PartId::parse("msg_123").unwrap_err();
        assert_eq!(err.prefix, "prt");
        let text = err.to_string();
        assert!(text.contains("part"), "{text}");
        assert!(text.contains("\"prt_\""), "{text}");
        assert!(text.contains("msg_123"), "{text}");
    }

    #[test]
    fn serde_is_a_plain_validated_string() {
        let id = PermissionId::parse("per_abc123").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"per_abc123\"");
        let back: PermissionId = serde_json::from_str("\"per_abc123\"").unwrap();
        assert_eq!(back, id);
        let err = serde_json::from_str::<PermissionId>("\"ses_abc123\"").unwrap_err();
        assert!(err.to_string().contains("per_"), "{err}");
        assert!(serde_json::from_str::<PermissionId>("42").is_err());
    }

    #[test]
    fn ids_work_as_map_keys_looked_up_by_str() {
        let id = SessionId::new();
        let mut map = HashMap::new();
        map.insert(id.clone(), 1);
        assert_eq!(map.get(id.as_str()), Some(&1));
        assert!(id == id.as_str());
    }

    #[test]
    fn timestamp_requires_canonical_ulid() {
        let id = MessageId::parse("msg_01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
        assert_eq!(id.timestamp_ms(), Some(1_469_922_850_259));
        // Lower case, wrong length, or an out-of-range first character: not treated as ULIDs.
        for body in [
            "01arz3ndektsv4rrffq69g5fav",
            "01ARZ3NDEKTSV4RRFFQ69G5FA",
            "81ARZ3NDEKTSV4RRFFQ69G5FAV",
        ] {
            let id = MessageId::parse(&format!("msg_{body}")).unwrap();
            assert_eq!(id.timestamp_ms(), None, "{body}");
        }
    }
}
