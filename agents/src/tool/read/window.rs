//! A window of a text file's lines: opening and reading it, telling a binary file, and the
//! message for a missing one.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::tool::truncate::MAX_BYTES;

/// Longer lines are cut and end with `...`.
const MAX_LINE_LENGTH: usize = 2000;

/// Extensions always treated as binary.
const BINARY_EXTENSIONS: &[&str] = &[
    "zip", "tar", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "exe", "dll", "so", "dylib",
    "class", "jar", "war", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "bin",
    "dat", "obj", "o", "a", "lib", "wasm", "pyc", "pyo", "png", "jpg", "jpeg", "gif", "bmp", "ico",
    "webp", "pdf", "mp3", "mp4", "mov", "avi", "ttf", "otf", "woff", "woff2", "sqlite", "db",
];

/// The lines of one read.
pub(super) struct Window {
    /// Raw lines (cut to [`MAX_LINE_LENGTH`]) from `offset`.
    pub lines: Vec<String>,
    /// Lines in the whole file.
    pub total: usize,
    /// Whether the byte budget stopped the read early.
    pub cut_by_bytes: bool,
}

/// Reads lines `offset..offset + limit` of `path`, counting every line of the file.
pub(super) fn read_window(path: &Path, offset: usize, limit: usize) -> Result<Window, String> {
    let (file, size) = open_file(path)?;
    window_of(path, file, size, offset, limit)
}

/// The error of a file that could not be opened or read.
pub(super) fn cannot_read(path: &Path, e: &std::io::Error) -> String {
    format!("Cannot read {}: {e}", path.display())
}

/// Opens `path` to read it: the file and its size, or why it cannot be read (missing, a
/// folder, unreadable).
fn open_file(path: &Path) -> Result<(std::fs::File, u64), String> {
    let cannot = |e: std::io::Error| cannot_read(path, &e);
    let is_dir = || {
        format!(
            "Path is a directory, not a file: {}. Use the list tool to see what it holds.",
            path.display()
        )
    };
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found(path)),
        Err(_) if path.is_dir() => return Err(is_dir()),
        Err(e) => return Err(cannot(e)),
    };
    let metadata = file.metadata().map_err(cannot)?;
    if metadata.is_dir() {
        return Err(is_dir());
    }
    Ok((file, metadata.len()))
}

/// Lines `offset..offset + limit` of `file` (opened from `path`, `size` bytes long when it
/// was opened), counting every line of the file.
pub(super) fn window_of(
    path: &Path,
    mut file: std::fs::File,
    size: u64,
    offset: usize,
    limit: usize,
) -> Result<Window, String> {
    let cannot = |e: std::io::Error| cannot_read(path, &e);
    // The first bytes (is it text?); a file that fits in them is read whole with no read past
    // its end. A size of 0 may be a file whose size is not known ahead (`/proc`): read on.
    // No more room than the file needs (a small file's few bytes, not a whole head to clear).
    let room = match usize::try_from(size) {
        Ok(known) if known > 0 => known.min(HEAD_BYTES),
        _ => HEAD_BYTES,
    };
    let mut head = vec![0; room];
    let mut filled = 0;
    let mut whole = false;
    while filled < room {
        match file.read(&mut head[filled..]) {
            Ok(0) => {
                whole = true;
                break;
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(cannot(e)),
        }
        if size > 0 && filled as u64 >= size {
            whole = true;
            break;
        }
    }
    head.truncate(filled);
    if has_binary_extension(path) || looks_binary(&head) {
        return Err(format!("Cannot read binary file: {}", path.display()));
    }
    let mut gathered = Gathering::new(offset, limit);
    if whole {
        // All of it is in hand: its lines are taken from there, with no reader around it.
        for raw in head.split_inclusive(|&b| b == b'\n') {
            gathered.take(raw);
        }
    } else {
        let mut reader = BufReader::new(std::io::Cursor::new(head).chain(file));
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = reader
                .read_until(b'\n', &mut buf)
                .map_err(|e| cannot_read(path, &e))?;
            if n == 0 {
                break;
            }
            gathered.take(&buf);
        }
    }
    let Window {
        lines,
        total,
        cut_by_bytes,
    } = gathered.window;
    if offset > 0 && offset >= total {
        return Err(format!(
            "Offset {offset} is beyond the end of {} ({total} lines)",
            path.display()
        ));
    }
    Ok(Window {
        lines,
        total,
        cut_by_bytes,
    })
}

/// The lines of a window being read, one raw line (with its newline, if any) at a time.
struct Gathering {
    window: Window,
    /// The bytes the window's lines take (with a newline between two).
    bytes: usize,
    offset: usize,
    limit: usize,
}

impl Gathering {
    fn new(offset: usize, limit: usize) -> Self {
        Gathering {
            window: Window {
                lines: Vec::new(),
                total: 0,
                cut_by_bytes: false,
            },
            bytes: 0,
            offset,
            limit,
        }
    }

    /// Counts the file's next line and keeps it when it falls in the window and the byte
    /// budget: cut to [`MAX_LINE_LENGTH`] characters, without its line ending.
    fn take(&mut self, raw: &[u8]) {
        let window = &mut self.window;
        let index = window.total;
        window.total += 1;
        if index < self.offset || window.lines.len() >= self.limit || window.cut_by_bytes {
            return;
        }
        let text = String::from_utf8_lossy(raw);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let line = if text.chars().count() > MAX_LINE_LENGTH {
            let end = text
                .char_indices()
                .nth(MAX_LINE_LENGTH)
                .map_or(text.len(), |(i, _)| i);
            format!("{}...", &text[..end])
        } else {
            text.to_string()
        };
        let size = line.len() + usize::from(!window.lines.is_empty());
        if self.bytes + size > MAX_BYTES {
            window.cut_by_bytes = true;
            return;
        }
        self.bytes += size;
        window.lines.push(line);
    }
}

/// The message for a missing file, with up to three similar names from its folder.
fn not_found(path: &Path) -> String {
    let mut message = format!("File not found: {}", path.display());
    let (Some(dir), Some(base)) = (path.parent(), path.file_name()) else {
        return message;
    };
    let base = base.to_string_lossy().to_lowercase();
    let stem = Path::new(&base)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| s.len() >= 3);
    let mut similar: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().to_lowercase();
            name.contains(&base)
                || base.contains(&name)
                || stem.as_ref().is_some_and(|s| name.contains(s.as_str()))
        })
        .map(|entry| entry.path())
        .collect();
    similar.sort();
    similar.truncate(3);
    if !similar.is_empty() {
        message.push_str("\n\nDid you mean one of these?");
        for s in similar {
            message.push('\n');
            message.push_str(&s.display().to_string());
        }
    }
    message
}

/// Whether `path` looks binary: a known binary extension, a NUL byte in its first 4 KB, or
/// more than 30% control characters there.
pub(super) fn is_binary(path: &Path) -> std::io::Result<bool> {
    if has_binary_extension(path) {
        return Ok(true);
    }
    let mut head = Vec::with_capacity(HEAD_BYTES);
    std::fs::File::open(path)?
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(looks_binary(&head))
}

/// How many of a file's first bytes tell whether it is binary.
const HEAD_BYTES: usize = 4096;

/// Whether `path`'s extension is one of a binary format.
fn has_binary_extension(path: &Path) -> bool {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    BINARY_EXTENSIONS.contains(&ext.as_str())
}

/// Whether a file's first bytes look binary (a NUL byte, or over 30% control characters).
pub fn looks_binary(head: &[u8]) -> bool {
    if head.is_empty() {
        return false;
    }
    if head.contains(&0) {
        return true;
    }
    let control = head
        .iter()
        .filter(|&&b| b < 9 || (b > 13 && b < 32))
        .count();
    control * 10 > head.len() * 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::testing::Project;

    #[test]
    fn a_file_read_whole_and_one_read_on_give_the_same_lines() {
        let p = Project::new();
        let text = "one\r\ntwo\n\nfour without an end";
        let path = p.file("lines.txt", text);
        let whole = |offset, limit| {
            let file = std::fs::File::open(&path).unwrap();
            window_of(&path, file, text.len() as u64, offset, limit).unwrap()
        };
        // A size of 0 (unknown) reads on past the head, through the reader.
        let read_on = |offset, limit| {
            let file = std::fs::File::open(&path).unwrap();
            window_of(&path, file, 0, offset, limit).unwrap()
        };
        for (offset, limit) in [(0, 10), (1, 2), (3, 1)] {
            let (a, b) = (whole(offset, limit), read_on(offset, limit));
            assert_eq!((&a.lines, a.total), (&b.lines, b.total));
        }
        assert_eq!(
            whole(0, 10).lines,
            ["one", "two", "", "four without an end"]
        );
        assert_eq!(whole(1, 2).lines, ["two", ""]);
    }

    #[test]
    fn files_around_the_first_look_and_of_unknown_size_read_whole() {
        let p = Project::new();
        for len in [HEAD_BYTES - 1, HEAD_BYTES, HEAD_BYTES + 1, 3 * HEAD_BYTES] {
            // Lines of 8 bytes, the last one cut where the length ends.
            let text: String = "line ab\n".repeat(len / 8 + 1)[..len].to_string();
            let path = p.file(&format!("f{len}.txt"), &text);
            let lines = text.lines().count();
            let window = read_window(&path, 0, usize::MAX).unwrap();
            assert_eq!(window.total, lines, "{len} bytes");
            // A size of 0 is what `/proc` answers for files that are not empty: read on.
            let file = std::fs::File::open(&path).unwrap();
            let window = window_of(&path, file, 0, 0, usize::MAX).unwrap();
            assert_eq!(window.total, lines, "{len} bytes of unknown size");
        }
    }

    #[test]
    fn binary_heuristic() {
        assert!(!looks_binary(b"hello\tworld\n"));
        assert!(looks_binary(b"a\0b"));
        assert!(looks_binary(&[1, 2, 3, 4, b'a']));
        assert!(!looks_binary(b""));
    }
}
