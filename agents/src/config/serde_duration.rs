//! Serde for durations written as `"15m"`, `"90s"`, `"1h 30m"` (or a number of seconds).

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};

/// Writes the duration in the same human form it is read in.
pub fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*value).to_string())
}

/// Reads `"15m"`-style text or a whole number of seconds.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_any(DurationVisitor)
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"15m\", \"90s\" or \"1h 30m\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        humantime::parse_duration(v.trim()).map_err(|e| {
            E::custom(format!(
                "invalid duration \"{v}\": {e}; expected for example \"15m\", \"90s\" or \"1h 30m\""
            ))
        })
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        Ok(Duration::from_secs(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        u64::try_from(v)
            .map(Duration::from_secs)
            .map_err(|_| E::custom(format!("invalid duration {v}: must not be negative")))
    }
}

/// The same forms for an optional duration (absent or `null` is `None`).
pub mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the duration in the human form, or nothing.
    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => super::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    /// Reads `"15m"`-style text, a whole number of seconds, or nothing.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        /// One duration in either form.
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "super")] Duration);
        Ok(Option::<Wrapped>::deserialize(d)?.map(|Wrapped(d)| d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct T {
        #[serde(with = "super")]
        d: Duration,
    }

    #[test]
    fn reads_text_and_seconds() {
        let t: T = serde_json::from_str(r#"{"d":"15m"}"#).unwrap();
        assert_eq!(t.d, Duration::from_secs(900));
        let t: T = serde_json::from_str(r#"{"d":"1h 30m"}"#).unwrap();
        assert_eq!(t.d, Duration::from_secs(5400));
        let t: T = serde_json::from_str(r#"{"d":42}"#).unwrap();
        assert_eq!(t.d, Duration::from_secs(42));
    }

    #[derive(Deserialize)]
    struct O {
        #[serde(default, with = "super::option")]
        d: Option<Duration>,
    }

    #[test]
    fn optional_durations_read_both_forms_or_nothing() {
        let o: O = serde_json::from_str(r#"{"d":"200ms"}"#).unwrap();
        assert_eq!(o.d, Some(Duration::from_millis(200)));
        let o: O = serde_json::from_str(r#"{"d":3}"#).unwrap();
        assert_eq!(o.d, Some(Duration::from_secs(3)));
        let o: O = serde_json::from_str("{}").unwrap();
        assert_eq!(o.d, None);
        let err = serde_json::from_str::<O>(r#"{"d":"soon"}"#).err().unwrap();
        assert!(err.to_string().contains("\"15m\""), "{err}");
    }

    #[test]
    fn rejects_nonsense_with_an_example() {
        let err = serde_json::from_str::<T>(r#"{"d":"soon"}"#).err().unwrap();
        assert!(err.to_string().contains("\"15m\""), "{err}");
        assert!(serde_json::from_str::<T>(r#"{"d":-1}"#).is_err());
    }
}
