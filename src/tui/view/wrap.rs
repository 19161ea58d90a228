//! Wrapping styled text to a width by words (and cutting a word longer than a line), measured
//! in terminal cells.

use ratatui::text::Span;
use unicode_width::UnicodeWidthChar;

/// `spans` broken into lines of at most `width` cells, the first `lead` cells narrower (they
/// hold a marker or an indent). Words stay whole where they fit.
pub fn wrap_spans(spans: Vec<Span<'static>>, width: u16, lead: usize) -> Vec<Vec<Span<'static>>> {
    let width = usize::from(width).saturating_sub(lead).max(4);
    // Words with their style; a word carries the spaces before it.
    let mut words: Vec<(String, ratatui::style::Style, bool)> = Vec::new();
    for span in spans {
        let style = span.style;
        let mut current = String::new();
        let mut space_before = false;
        for c in span.content.chars() {
            if c == ' ' || c == '\n' {
                if !current.is_empty() {
                    words.push((std::mem::take(&mut current), style, space_before));
                }
                space_before = true;
            } else {
                current.push(c);
            }
        }
        if !current.is_empty() {
            words.push((current, style, space_before));
        } else if space_before {
            // A trailing space: the next span's first word is a new word.
            words.push((String::new(), style, true));
        }
    }
    let mut lines: Vec<Vec<Span<'static>>> = vec![Vec::new()];
    let mut used = 0usize;
    for (word, style, space) in words {
        let w = text_width(&word);
        let gap = usize::from(space && used > 0);
        if word.is_empty() {
            if used > 0 && used < width {
                push(&mut lines, " ".to_string(), style);
                used += 1;
            }
            continue;
        }
        if used + gap + w <= width {
            let text = if gap == 1 { format!(" {word}") } else { word };
            used += gap + w;
            push(&mut lines, text, style);
            continue;
        }
        // A new line; a word longer than a whole line is cut into pieces.
        let mut rest = word.as_str();
        if used > 0 {
            lines.push(Vec::new());
            used = 0;
        }
        loop {
            let (piece, tail) = split_at_width(rest, width - used);
            used += text_width(piece);
            push(&mut lines, piece.to_string(), style);
            if tail.is_empty() {
                break;
            }
            lines.push(Vec::new());
            used = 0;
            rest = tail;
        }
    }
    // Trailing spaces are no use at a line's end.
    for line in &mut lines {
        if let Some(last) = line.last_mut() {
            let trimmed = last.content.trim_end().to_string();
            last.content = trimmed.into();
        }
    }
    lines
}

fn push(lines: &mut [Vec<Span<'static>>], text: String, style: ratatui::style::Style) {
    if let Some(line) = lines.last_mut() {
        match line.last_mut() {
            Some(last) if last.style == style => {
                let joined = format!("{}{text}", last.content);
                last.content = joined.into();
            }
            _ => line.push(Span::styled(text, style)),
        }
    }
}

/// The cells `text` takes.
pub fn text_width(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `text` cut after at most `width` cells (at least one character), and the rest.
fn split_at_width(text: &str, width: usize) -> (&str, &str) {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > width && i > 0 {
            return text.split_at(i);
        }
        used += w;
    }
    (text, "")
}

/// `spans` cut to `width` cells, with `…` where something was cut.
pub fn truncate_spans(spans: Vec<Span<'static>>, width: u16) -> Vec<Span<'static>> {
    let width = usize::from(width).max(1);
    let total: usize = spans.iter().map(|s| text_width(&s.content)).sum();
    if total <= width {
        return spans;
    }
    let mut out = Vec::new();
    let mut used = 0;
    for span in spans {
        let room = width - 1 - used;
        let (piece, rest) = split_at_width(&span.content, room);
        let piece = if text_width(piece) > room { "" } else { piece };
        used += text_width(piece);
        out.push(Span::styled(piece.to_string(), span.style));
        if !rest.is_empty() || used >= width - 1 {
            break;
        }
    }
    out.push(Span::raw("…"));
    out
}

/// `text` cut to `width` cells, with `…` where something was cut.
pub fn truncate(text: &str, width: usize) -> String {
    if text_width(text) <= width {
        return text.to_string();
    }
    let (piece, _) = split_at_width(text, width.saturating_sub(1));
    format!("{piece}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Vec<Span<'_>>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn words_wrap_and_a_long_word_is_cut() {
        let lines = wrap_spans(vec![Span::raw("a bb ccc dddddddddd e")], 6, 0);
        assert_eq!(plain(&lines), vec!["a bb", "ccc", "dddddd", "dddd e"]);
    }

    #[test]
    fn styles_stay_with_their_words_across_spans() {
        let bold = ratatui::style::Style::default().add_modifier(ratatui::style::Modifier::BOLD);
        let lines = wrap_spans(
            vec![
                Span::raw("one "),
                Span::styled("two", bold),
                Span::raw(" three"),
            ],
            9,
            0,
        );
        assert_eq!(plain(&lines), vec!["one two", "three"]);
        assert_eq!(lines[0][1].style, bold);
    }

    #[test]
    fn wide_characters_count_two_cells() {
        assert_eq!(text_width("日本"), 4);
        assert_eq!(truncate("日本語のテキスト", 5), "日本…");
        let cut = truncate_spans(vec![Span::raw("abcdefgh")], 5);
        assert_eq!(
            cut.iter().map(|s| s.content.as_ref()).collect::<String>(),
            "abcd…"
        );
    }
}
