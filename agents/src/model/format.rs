//! OutputFormat: whether a prompt asks for plain text or structured (JSON schema) output.

use serde::{Deserialize, Serialize};

use super::JsonObject;

/// How many times the model is re-asked for structured output when `retryCount` is absent.
pub const DEFAULT_RETRY_COUNT: u32 = 2;

/// The output format asked of the model, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type")]
pub enum OutputFormat {
    /// Free text (the default).
    #[serde(rename = "text")]
    Text,
    /// A JSON value matching `schema`, captured through the StructuredOutput tool.
    #[serde(rename = "json_schema")]
    JsonSchema {
        /// The JSON schema the output must match.
        #[cfg_attr(feature = "openapi", schema(value_type = Object))]
        schema: JsonObject,
        /// Retries before `StructuredOutputError`; absent means [`DEFAULT_RETRY_COUNT`].
        #[serde(
            rename = "retryCount",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        retry_count: Option<u32>,
    },
}

impl OutputFormat {
    /// The number of retries for structured output, with the default applied (0 for text).
    pub fn retries(&self) -> u32 {
        match self {
            OutputFormat::Text => 0,
            OutputFormat::JsonSchema { retry_count, .. } => {
                retry_count.unwrap_or(DEFAULT_RETRY_COUNT)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::testing::round_trip;

    #[test]
    fn both_formats_round_trip() {
        let text: OutputFormat = round_trip(&json!({"type": "text"}));
        assert_eq!(text, OutputFormat::Text);
        let schema: OutputFormat = round_trip(&json!({
            "type": "json_schema",
            "schema": {"type": "object", "properties": {"x": {"type": "number"}}},
            "retryCount": 5
        }));
        assert_eq!(schema.retries(), 5);
        let default: OutputFormat = round_trip(&json!({"type": "json_schema", "schema": {}}));
        assert_eq!(default.retries(), DEFAULT_RETRY_COUNT);
    }

    #[test]
    fn unknown_format_is_rejected() {
        let err = serde_json::from_value::<OutputFormat>(json!({"type": "yaml"})).unwrap_err();
        assert!(err.to_string().contains("yaml"), "{err}");
    }
}
