//! A reference to one model of one provider, as in `"openai/gpt-4o-mini"`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A provider's model: `{providerID, modelID}` in JSON, `provider/model` in config.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelRef {
    /// The provider id used in config (`[provider.<id>]`).
    #[serde(rename = "providerID")]
    pub provider_id: String,
    /// The model id as the provider knows it; may itself contain `/`.
    #[serde(rename = "modelID")]
    pub model_id: String,
}

/// The error for a model string that is not `provider/model`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid model `{0}`: expected \"<provider>/<model>\", for example \"openai/gpt-4o-mini\"")]
pub struct InvalidModelRef(pub String);

impl ModelRef {
    /// A model reference from its provider id and model id.
    pub fn new(provider_id: impl Into<String>, model_id: impl Into<String>) -> Self {
        ModelRef {
            provider_id: provider_id.into(),
            model_id: model_id.into(),
        }
    }
}

impl FromStr for ModelRef {
    type Err = InvalidModelRef;

    /// Splits at the first `/`: the provider id never has one, a model id may.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('/') {
            Some((provider, model)) if !provider.trim().is_empty() && !model.trim().is_empty() => {
                Ok(ModelRef::new(provider.trim(), model.trim()))
            }
            _ => Err(InvalidModelRef(s.to_string())),
        }
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider_id, self.model_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_at_the_first_slash() {
        let m: ModelRef = "openrouter/anthropic/claude-3.5".parse().unwrap();
        assert_eq!(m.provider_id, "openrouter");
        assert_eq!(m.model_id, "anthropic/claude-3.5");
        assert_eq!(m.to_string(), "openrouter/anthropic/claude-3.5");
    }

    #[test]
    fn rejects_missing_parts() {
        for bad in ["gpt-4", "/gpt-4", "openai/", "", " / "] {
            assert!(bad.parse::<ModelRef>().is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn json_shape_uses_opencode_names() {
        let m = ModelRef::new("openai", "gpt-4");
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"providerID": "openai", "modelID": "gpt-4"})
        );
    }
}
