//! AssistantError: why an assistant message failed, as OpenCode's `{name, data}` objects.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The error recorded on an assistant message and sent in `session.error`, tagged by `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "name", content = "data")]
pub enum AssistantError {
    /// `ProviderAuthError`: the provider rejected or lacks credentials.
    #[serde(rename = "ProviderAuthError")]
    #[error("ProviderAuthError: {}", .0.message)]
    ProviderAuth(ProviderAuthError),
    /// `UnknownError`: anything not classified otherwise.
    #[serde(rename = "UnknownError")]
    #[error("UnknownError: {}", .0.message)]
    Unknown(UnknownError),
    /// `MessageOutputLengthError`: the model hit its output token limit.
    #[serde(rename = "MessageOutputLengthError")]
    #[error("MessageOutputLengthError")]
    OutputLength(OutputLengthError),
    /// `MessageAbortedError`: the user or a parent cancelled the turn.
    #[serde(rename = "MessageAbortedError")]
    #[error("MessageAbortedError: {}", .0.message)]
    Aborted(AbortedError),
    /// `StructuredOutputError`: the model did not produce the requested structured output.
    #[serde(rename = "StructuredOutputError")]
    #[error("StructuredOutputError: {}", .0.message)]
    StructuredOutput(StructuredOutputError),
    /// `ContextOverflowError`: the conversation no longer fits the model's context.
    #[serde(rename = "ContextOverflowError")]
    #[error("ContextOverflowError: {}", .0.message)]
    ContextOverflow(ContextOverflowError),
    /// `APIError`: the provider's API answered with an error.
    #[serde(rename = "APIError")]
    #[error("APIError: {}", .0.message)]
    Api(ApiError),
}

/// The data of `ProviderAuthError`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProviderAuthError {
    /// The provider whose authentication failed.
    #[serde(rename = "providerID")]
    pub provider_id: String,
    /// What went wrong.
    pub message: String,
}

/// The data of `UnknownError`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UnknownError {
    /// What went wrong.
    pub message: String,
}

/// The data of `MessageOutputLengthError`: always the empty object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputLengthError {}

/// The data of `MessageAbortedError`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AbortedError {
    /// Why the turn was aborted.
    pub message: String,
}

/// The data of `StructuredOutputError`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StructuredOutputError {
    /// What went wrong.
    pub message: String,
    /// How many retries were made.
    pub retries: u32,
}

/// The data of `ContextOverflowError`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextOverflowError {
    /// What went wrong.
    pub message: String,
    /// The provider's response body, when there was one.
    #[serde(
        rename = "responseBody",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub response_body: Option<String>,
}

/// The data of `APIError`; also the `error` of a retry part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiError {
    /// What went wrong.
    pub message: String,
    /// The HTTP status, when the call got that far.
    #[serde(
        rename = "statusCode",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub status_code: Option<u16>,
    /// Whether retrying the same call may succeed.
    #[serde(rename = "isRetryable")]
    pub is_retryable: bool,
    /// The response headers, when there was a response.
    #[serde(
        rename = "responseHeaders",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub response_headers: Option<BTreeMap<String, String>>,
    /// The response body, when there was a response.
    #[serde(
        rename = "responseBody",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub response_body: Option<String>,
    /// Extra provider-specific details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

impl ApiError {
    /// An API error with only a message and whether it is retryable.
    pub fn new(message: impl Into<String>, is_retryable: bool) -> Self {
        ApiError {
            message: message.into(),
            status_code: None,
            is_retryable,
            response_headers: None,
            response_body: None,
            metadata: None,
        }
    }

    /// The same error with an HTTP status.
    pub fn with_status(mut self, status_code: u16) -> Self {
        self.status_code = Some(status_code);
        self
    }
}

impl AssistantError {
    /// `ProviderAuthError` for a provider.
    pub fn provider_auth(provider_id: impl Into<String>, message: impl Into<String>) -> Self {
        AssistantError::ProviderAuth(ProviderAuthError {
            provider_id: provider_id.into(),
            message: message.into(),
        })
    }

    /// `UnknownError` with a message.
    pub fn unknown(message: impl Into<String>) -> Self {
        AssistantError::Unknown(UnknownError {
            message: message.into(),
        })
    }

    /// `MessageOutputLengthError`.
    pub fn output_length() -> Self {
        AssistantError::OutputLength(OutputLengthError {})
    }

    /// `MessageAbortedError` with a message.
    pub fn aborted(message: impl Into<String>) -> Self {
        AssistantError::Aborted(AbortedError {
            message: message.into(),
        })
    }

    /// `StructuredOutputError` after some retries.
    pub fn structured_output(message: impl Into<String>, retries: u32) -> Self {
        AssistantError::StructuredOutput(StructuredOutputError {
            message: message.into(),
            retries,
        })
    }

    /// `ContextOverflowError` without a response body.
    pub fn context_overflow(message: impl Into<String>) -> Self {
        AssistantError::ContextOverflow(ContextOverflowError {
            message: message.into(),
            response_body: None,
        })
    }

    /// OpenCode's name for this error (the `name` tag), e.g. `"APIError"`.
    pub fn name(&self) -> &'static str {
        match self {
            AssistantError::ProviderAuth(_) => "ProviderAuthError",
            AssistantError::Unknown(_) => "UnknownError",
            AssistantError::OutputLength(_) => "MessageOutputLengthError",
            AssistantError::Aborted(_) => "MessageAbortedError",
            AssistantError::StructuredOutput(_) => "StructuredOutputError",
            AssistantError::ContextOverflow(_) => "ContextOverflowError",
            AssistantError::Api(_) => "APIError",
        }
    }

    /// The human-readable message; `None` for `MessageOutputLengthError`, which has none.
    pub fn message(&self) -> Option<&str> {
        match self {
            AssistantError::ProviderAuth(e) => Some(&e.message),
            AssistantError::Unknown(e) => Some(&e.message),
            AssistantError::OutputLength(_) => None,
            AssistantError::Aborted(e) => Some(&e.message),
            AssistantError::StructuredOutput(e) => Some(&e.message),
            AssistantError::ContextOverflow(e) => Some(&e.message),
            AssistantError::Api(e) => Some(&e.message),
        }
    }

    /// Whether this is an `APIError` marked retryable.
    pub fn is_retryable(&self) -> bool {
        matches!(self, AssistantError::Api(e) if e.is_retryable)
    }
}

impl From<ApiError> for AssistantError {
    fn from(e: ApiError) -> Self {
        AssistantError::Api(e)
    }
}

/// Serde for a bare [`ApiError`] in its named form `{"name": "APIError", "data": {…}}`.
pub(crate) mod named_api_error {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::ApiError;

    #[derive(Serialize)]
    #[serde(tag = "name", content = "data")]
    enum Ref<'a> {
        #[serde(rename = "APIError")]
        Api(&'a ApiError),
    }

    #[derive(Deserialize)]
    #[serde(tag = "name", content = "data")]
    enum Owned {
        #[serde(rename = "APIError")]
        Api(ApiError),
    }

    /// OpenCode's `APIError` as a named error: `{"name": "APIError", "data": ApiError}`.
    #[cfg(feature = "openapi")]
    #[derive(utoipa::ToSchema)]
    #[serde(tag = "name", content = "data")]
    #[schema(as = NamedApiError)]
    #[allow(dead_code)] // never built: only its schema is used
    pub(crate) enum Named {
        /// `APIError`: the provider's API answered with an error.
        #[serde(rename = "APIError")]
        Api(ApiError),
    }

    /// Writes `{"name": "APIError", "data": error}`.
    pub(crate) fn serialize<S: Serializer>(error: &ApiError, s: S) -> Result<S::Ok, S::Error> {
        Ref::Api(error).serialize(s)
    }

    /// Reads `{"name": "APIError", "data": …}`; any other name is an error.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ApiError, D::Error> {
        let Owned::Api(error) = Owned::deserialize(d)?;
        Ok(error)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::model::testing::{round_trip, sample};

    #[test]
    fn every_sample_error_round_trips() {
        let samples = sample(include_str!("../../tests/samples/errors.json"));
        let mut names = Vec::new();
        for json in samples.as_array().unwrap() {
            let error: AssistantError = round_trip(json);
            assert_eq!(json["name"], error.name());
            names.push(error.name());
        }
        for name in [
            "ProviderAuthError",
            "UnknownError",
            "MessageOutputLengthError",
            "MessageAbortedError",
            "StructuredOutputError",
            "ContextOverflowError",
            "APIError",
        ] {
            assert!(names.contains(&name), "no sample for {name}");
        }
    }

    #[test]
    fn absent_optionals_are_not_emitted() {
        let v = serde_json::to_value(AssistantError::Api(ApiError::new("boom", true))).unwrap();
        assert_eq!(
            v,
            json!({"name": "APIError", "data": {"message": "boom", "isRetryable": true}})
        );
        let v = serde_json::to_value(AssistantError::output_length()).unwrap();
        assert_eq!(v, json!({"name": "MessageOutputLengthError", "data": {}}));
        let v = serde_json::to_value(AssistantError::context_overflow("too long")).unwrap();
        assert_eq!(
            v,
            json!({"name": "ContextOverflowError", "data": {"message": "too long"}})
        );
    }

    #[test]
    fn unknown_name_is_a_clear_error() {
        let err = serde_json::from_value::<AssistantError>(
            json!({"name": "TeapotError", "data": {"message": "short and stout"}}),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("TeapotError"), "{text}");
        assert!(text.contains("APIError"), "{text}");
    }

    #[test]
    fn display_and_accessors() {
        let e = AssistantError::aborted("The operation was aborted.");
        assert_eq!(
            e.to_string(),
            "MessageAbortedError: The operation was aborted."
        );
        assert_eq!(e.message(), Some("The operation was aborted."));
        assert!(!e.is_retryable());
        let api: AssistantError = ApiError::new("overloaded", true).with_status(529).into();
        assert!(api.is_retryable());
        assert_eq!(AssistantError::output_length().message(), None);
    }

    #[test]
    fn named_api_error_accepts_only_api_errors() {
        #[derive(Serialize, Deserialize)]
        struct Holder {
            #[serde(with = "named_api_error")]
            error: ApiError,
        }
        let json =
            json!({"error": {"name": "APIError", "data": {"message": "x", "isRetryable": false}}});
        let h: Holder = round_trip(&json);
        assert_eq!(h.error.message, "x");
        let bad: Value = json!({"error": {"name": "UnknownError", "data": {"message": "x"}}});
        assert!(serde_json::from_value::<Holder>(bad).is_err());
    }
}
