//! An MCP tool result as the model and the user see it: its texts joined for the model, its
//! images, audio and binary resources kept as file attachments (as OpenCode does).

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use taskforce_agents::model::FilePart;

/// What a result holds: the text for the model (its pieces joined by blank lines) and the
/// files.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Mapped {
    /// The texts, joined.
    pub text: String,
    /// The files.
    pub attachments: Vec<FilePart>,
}

/// Maps `result`'s content: text and text resources become text; images, audio and binary
/// resources become `data:` URL files; a resource link becomes a line naming it. A result with
/// no text but structured content answers that content as JSON.
pub(super) fn map(result: &CallToolResult) -> Mapped {
    let mut texts: Vec<String> = Vec::new();
    let mut attachments = Vec::new();
    let mut attach = |mime: &str, data: &str, filename: Option<String>| {
        attachments.push(FilePart {
            mime: mime.to_string(),
            filename,
            url: format!("data:{mime};base64,{data}"),
            source: None,
        });
    };
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => texts.push(t.text.clone()),
            ContentBlock::Image(i) => attach(&i.mime_type, &i.data, None),
            ContentBlock::Audio(a) => attach(&a.mime_type, &a.data, None),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { text, .. } => texts.push(text.clone()),
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => {
                    let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
                    attach(mime, blob, Some(uri.clone()));
                }
                _ => {}
            },
            ContentBlock::ResourceLink(link) => {
                texts.push(format!("Resource link: {} ({})", link.name, link.uri));
            }
            _ => {}
        }
    }
    let mut text = texts.join("\n\n");
    if text.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    Mapped { text, attachments }
}

#[cfg(test)]
mod tests {
    use rmcp::model::Resource;
    use serde_json::json;

    use super::*;

    #[test]
    fn texts_join_and_files_become_data_url_attachments() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("iVBO", "image/png"),
            ContentBlock::resource(ResourceContents::text("two", "file:///a.txt")),
            ContentBlock::resource(ResourceContents::blob("AAAA", "file:///b.bin")),
        ]);
        let mapped = map(&result);
        assert_eq!(mapped.text, "one\n\ntwo");
        assert_eq!(mapped.attachments.len(), 2);
        let image = &mapped.attachments[0];
        assert_eq!(image.mime, "image/png");
        assert_eq!(image.url, "data:image/png;base64,iVBO");
        assert_eq!(image.filename, None);
        let blob = &mapped.attachments[1];
        assert_eq!(blob.mime, "application/octet-stream");
        assert_eq!(blob.filename.as_deref(), Some("file:///b.bin"));
    }

    #[test]
    fn structured_content_answers_when_there_is_no_text() {
        let mut result = CallToolResult::success(vec![]);
        result.structured_content = Some(json!({"n": 1}));
        assert_eq!(map(&result).text, r#"{"n":1}"#);
        let link = ContentBlock::resource_link(Resource::new("file:///x", "x"));
        let result = CallToolResult::success(vec![link]);
        assert_eq!(map(&result).text, "Resource link: x (file:///x)");
    }
}
