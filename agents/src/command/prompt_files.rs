//! Files and directories referenced in a prompt, as the pieces of the user message that carry
//! them.
//!
//! For a file the model sees what the read tool would have shown it: a synthetic note that the
//! read tool was called, the tool's output, then the original file part. A directory gets the
//! list tool's listing instead. The runtime turns these pieces into message parts; agent
//! references become agent parts there and produce no pieces here.

use std::path::Path;

use serde_json::json;

use super::Reference;
use crate::tool::{ListTool, ReadTool};

/// The mime type of a file part for a referenced file.
pub const FILE_MIME: &str = "text/plain";

/// The mime type of a file part for a referenced directory.
pub const DIRECTORY_MIME: &str = "application/x-directory";

/// One piece of a user message built from a prompt reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptPiece {
    /// A text part; `synthetic` ones were written by the runtime, not the user.
    Text {
        /// The text.
        text: String,
        /// Whether the runtime wrote it.
        synthetic: bool,
    },
    /// A file part pointing at the referenced file or directory.
    File {
        /// `text/plain` for a file, `application/x-directory` for a directory.
        mime: String,
        /// `file://` and the absolute path.
        url: String,
        /// The last component of the path.
        filename: String,
    },
}

impl PromptPiece {
    /// A synthetic text piece.
    fn synthetic(text: impl Into<String>) -> Self {
        PromptPiece::Text {
            text: text.into(),
            synthetic: true,
        }
    }
}

/// What reading a reference gave.
enum Contents {
    /// The tool's output.
    Text(String),
    /// A binary file, not read.
    Binary,
}

/// The pieces that carry `reference` into a prompt: the tool call note, the tool's output and
/// the file part; a single synthetic error text when it cannot be read; nothing for an agent.
/// Relative paths resolve against `cwd` (references from `find_references` are absolute).
pub async fn file_pieces(reference: &Reference, cwd: &Path) -> Vec<PromptPiece> {
    let (path, directory) = match reference {
        Reference::File(path) => (cwd.join(path), false),
        Reference::Directory(path) => (cwd.join(path), true),
        Reference::Agent(_) => return Vec::new(),
    };
    let shown = path.display().to_string();
    let target = path.clone();
    let read = tokio::task::spawn_blocking(move || {
        if directory {
            ListTool::list_for_prompt(&target).map(Contents::Text)
        } else {
            ReadTool::read_for_prompt(&target)
                .map(|text| text.map_or(Contents::Binary, Contents::Text))
        }
    })
    .await
    .unwrap_or_else(|e| Err(format!("the read was interrupted: {e}")));
    let contents = match read {
        Ok(contents) => contents,
        Err(message) => {
            return vec![PromptPiece::synthetic(format!(
                "Read tool failed to read {shown} with the following error: {message}"
            ))];
        }
    };

    let (call, mime) = if directory {
        (
            format!(
                "Called the list tool with the following input: {}",
                json!({"path": shown})
            ),
            DIRECTORY_MIME,
        )
    } else {
        (
            format!(
                "Called the Read tool with the following input: {}",
                json!({"filePath": shown})
            ),
            FILE_MIME,
        )
    };
    let output = match contents {
        Contents::Text(text) => text,
        Contents::Binary => format!("{shown} is a binary file; its contents are not shown."),
    };
    let filename = path
        .file_name()
        .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
    vec![
        PromptPiece::synthetic(call),
        PromptPiece::synthetic(output),
        PromptPiece::File {
            mime: mime.to_string(),
            url: format!("file://{shown}"),
            filename,
        },
    ]
}

/// The most bytes of an attached binary file (an image) carried to the model.
const MAX_ATTACHMENT: u64 = 10 * 1024 * 1024;

/// The pieces that carry a file part a client attached, as the model should see it: a
/// `file://` text file or directory as [`file_pieces`] gives it (read now), the text of a
/// textual `data:` URL inline, and any other `file://` file (an image) as a `data:` URL file
/// part, which providers that take images send as image content. `None` leaves the part as it
/// is (a `data:` URL of an image already is what providers take).
pub async fn attachment_pieces(
    mime: &str,
    url: &str,
    filename: Option<&str>,
) -> Option<Vec<PromptPiece>> {
    if let Some(path) = url.strip_prefix("file://") {
        let path = std::path::PathBuf::from(crate::model::data_url::percent_decode(path));
        let is_dir = tokio::fs::metadata(&path).await.is_ok_and(|m| m.is_dir());
        if is_dir || mime == DIRECTORY_MIME {
            return Some(file_pieces(&Reference::Directory(path), Path::new("/")).await);
        }
        if mime == FILE_MIME || crate::model::data_url::is_textual(mime) {
            return Some(file_pieces(&Reference::File(path), Path::new("/")).await);
        }
        let shown = path.display().to_string();
        let read = match tokio::fs::metadata(&path).await {
            Ok(m) if m.len() > MAX_ATTACHMENT => Err(format!(
                "it is larger than {} MB",
                MAX_ATTACHMENT / 1024 / 1024
            )),
            Ok(_) => tokio::fs::read(&path).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        return Some(match read {
            Ok(bytes) => vec![PromptPiece::File {
                mime: mime.to_string(),
                url: crate::model::data_url::data_url(mime, &bytes),
                filename: filename.map_or_else(
                    || {
                        path.file_name()
                            .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned())
                    },
                    str::to_string,
                ),
            }],
            Err(message) => vec![PromptPiece::synthetic(format!(
                "Read tool failed to read {shown} with the following error: {message}"
            ))],
        });
    }
    if crate::model::data_url::is_textual(mime)
        && let Some(text) = crate::model::data_url::data_url_text(url)
    {
        let name = filename.unwrap_or("attachment");
        return Some(vec![
            PromptPiece::synthetic(format!(
                "Called the Read tool with the following input: {}",
                json!({ "filePath": name })
            )),
            PromptPiece::synthetic(text),
            PromptPiece::File {
                mime: mime.to_string(),
                url: url.to_string(),
                filename: name.to_string(),
            },
        ]);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(piece: &PromptPiece) -> &str {
        match piece {
            PromptPiece::Text { text, synthetic } => {
                assert!(synthetic, "{text}");
                text
            }
            PromptPiece::File { .. } => panic!("not a text piece: {piece:?}"),
        }
    }

    #[tokio::test]
    async fn a_file_is_read_like_the_read_tool() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.rs");
        std::fs::write(&path, "fn a() {}\nfn b() {}\n").unwrap();
        let pieces = file_pieces(&Reference::File(path.clone()), dir.path()).await;
        assert_eq!(pieces.len(), 3, "{pieces:?}");
        assert_eq!(
            text(&pieces[0]),
            format!(
                "Called the Read tool with the following input: {{\"filePath\":\"{}\"}}",
                path.display()
            )
        );
        assert_eq!(
            text(&pieces[1]),
            "<file>\n00001| fn a() {}\n00002| fn b() {}\n\n(End of file - total 2 lines)\n</file>"
        );
        assert_eq!(
            pieces[2],
            PromptPiece::File {
                mime: "text/plain".into(),
                url: format!("file://{}", path.display()),
                filename: "a.rs".into(),
            }
        );
    }

    #[tokio::test]
    async fn a_relative_reference_resolves_against_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("n.txt"), "x").unwrap();
        let pieces = file_pieces(&Reference::File("n.txt".into()), dir.path()).await;
        assert_eq!(pieces.len(), 3, "{pieces:?}");
        assert!(text(&pieces[1]).contains("00001| x\n"));
    }

    #[tokio::test]
    async fn a_binary_file_gets_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob.bin");
        std::fs::write(&path, [0u8, 159, 146, 150]).unwrap();
        let pieces = file_pieces(&Reference::File(path.clone()), dir.path()).await;
        assert_eq!(pieces.len(), 3, "{pieces:?}");
        assert_eq!(
            text(&pieces[1]),
            format!(
                "{} is a binary file; its contents are not shown.",
                path.display()
            )
        );
        assert!(matches!(&pieces[2], PromptPiece::File { filename, .. } if filename == "blob.bin"));
    }

    #[tokio::test]
    async fn a_directory_is_listed_like_the_list_tool() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
        std::fs::write(root.join("src/main.rs"), "").unwrap();
        std::fs::write(root.join("node_modules/x/i.js"), "").unwrap();
        std::fs::write(root.join("README.md"), "").unwrap();
        let pieces = file_pieces(&Reference::Directory(root.clone()), dir.path()).await;
        assert_eq!(pieces.len(), 3, "{pieces:?}");
        assert_eq!(
            text(&pieces[0]),
            format!(
                "Called the list tool with the following input: {{\"path\":\"{}\"}}",
                root.display()
            )
        );
        assert_eq!(
            text(&pieces[1]),
            format!("{}/\n  src/\n    main.rs\n  README.md\n", root.display())
        );
        assert_eq!(
            pieces[2],
            PromptPiece::File {
                mime: "application/x-directory".into(),
                url: format!("file://{}", root.display()),
                filename: "proj".into(),
            }
        );
    }

    #[tokio::test]
    async fn a_read_failure_is_one_synthetic_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone.txt");
        let pieces = file_pieces(&Reference::File(path.clone()), dir.path()).await;
        assert_eq!(pieces.len(), 1, "{pieces:?}");
        assert_eq!(
            text(&pieces[0]),
            format!(
                "Read tool failed to read {0} with the following error: File not found: {0}",
                path.display()
            )
        );
        let missing = dir.path().join("no-dir");
        let pieces = file_pieces(&Reference::Directory(missing.clone()), dir.path()).await;
        assert_eq!(
            pieces,
            [PromptPiece::synthetic(format!(
                "Read tool failed to read {0} with the following error: Directory not found: {0}",
                missing.display()
            ))]
        );
    }

    #[tokio::test]
    async fn an_agent_reference_has_no_pieces() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            file_pieces(&Reference::Agent("general".into()), dir.path())
                .await
                .is_empty()
        );
    }

    #[tokio::test]
    async fn attached_directories_are_listed_missing_files_say_so_and_images_stay_data_urls() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.rs"), "fn a() {}").unwrap();
        let folder = format!("file://{}", dir.path().display());
        let pieces = attachment_pieces("application/x-directory", &folder, None)
            .await
            .unwrap();
        assert!(text(&pieces[0]).starts_with("Called the list tool"));
        assert!(text(&pieces[1]).contains("a.rs"));
        let gone = format!("file://{}/gone%20file.png", dir.path().display());
        let pieces = attachment_pieces("image/png", &gone, None).await.unwrap();
        assert_eq!(pieces.len(), 1);
        assert!(text(&pieces[0]).contains("gone file.png"), "{pieces:?}");
        assert!(
            attachment_pieces("image/png", "data:image/png;base64,AA==", None)
                .await
                .is_none(),
            "an image already in a data: URL is what providers take"
        );
    }
}
