//! Serde for `Option<ModelRef>` written as a `"provider/model"` string in config files.

use serde::{Deserialize, Deserializer, Serializer};

use crate::model::ModelRef;

/// Writes the model as `provider/model`.
pub fn serialize<S: Serializer>(value: &Option<ModelRef>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(m) => s.serialize_str(&m.to_string()),
        None => s.serialize_none(),
    }
}

/// Reads `provider/model`; anything else is an error naming the expected form.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ModelRef>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    text.map(|t| t.parse().map_err(serde::de::Error::custom))
        .transpose()
}
