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

    #[test]
    fn rejects_nonsense_with_an_example() {
        let err = serde_json::from_str::<T>(r#"{"d":"soon"}"#).err().unwrap();
        assert!(err.to_string().contains("\"15m\""), "{err}");
        assert!(serde_json::from_str::<T>(r#"{"d":-1}"#).is_err());
    }
}
