//! Markdown to terminal lines: headings, emphasis, inline code, lists, quotes and fenced code
//! blocks (highlighted), wrapped to a width so that the conversation scrolls by exact lines.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::highlight;
use super::theme::Theme;
use super::wrap::wrap_spans;

/// Rendered text parts by part id, kept while their text and the width stay the same (a
/// streaming answer re-renders only the part that grows).
#[derive(Debug, Default)]
pub struct Cache {
    parts: std::collections::HashMap<String, (usize, u16, Vec<Line<'static>>)>,
}

impl Cache {
    /// The lines of part `id` holding `text` at `width`, rendered once per change.
    pub fn render(
        &mut self,
        id: &str,
        text: &str,
        width: u16,
        theme: &Theme,
    ) -> Vec<Line<'static>> {
        if let Some((len, w, lines)) = self.parts.get(id)
            && *len == text.len()
            && *w == width
        {
            return lines.clone();
        }
        let lines = render(text, width, theme);
        self.parts
            .insert(id.to_string(), (text.len(), width, lines.clone()));
        lines
    }
}

/// `text` as lines at most `width` cells wide.
pub fn render(text: &str, width: u16, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = Renderer {
        theme,
        width: width.max(8),
        lines: Vec::new(),
        spans: Vec::new(),
        styles: vec![Style::default()],
        lists: Vec::new(),
        quote: 0,
        code: None,
        pending_item: None,
    };
    let parser = Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES);
    for event in parser {
        out.event(event);
    }
    out.flush();
    while out.lines.last().is_some_and(|l| l.spans.is_empty()) {
        out.lines.pop();
    }
    out.lines
}

struct Renderer<'t> {
    theme: &'t Theme,
    width: u16,
    lines: Vec<Line<'static>>,
    spans: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// The open lists: the next number of an ordered list, `None` for bullets.
    lists: Vec<Option<u64>>,
    quote: usize,
    /// The open code block: its language and text so far.
    code: Option<(String, String)>,
    /// The marker of a list item whose first line is not written yet.
    pending_item: Option<String>,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let style = f(self.style());
        self.styles.push(style);
    }

    fn indent(&self) -> String {
        let mut indent = "│ ".repeat(self.quote);
        indent.push_str(&"  ".repeat(self.lists.len().saturating_sub(1)));
        indent
    }

    /// Ends the paragraph so far: wraps its spans into lines.
    fn flush(&mut self) {
        if self.spans.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.spans);
        let indent = self.indent();
        let first = match self.pending_item.take() {
            Some(marker) => format!("{indent}{marker}"),
            None => indent.clone(),
        };
        let rest = " ".repeat(first.chars().count());
        let quote_style = Style::default().fg(self.theme.muted);
        for (i, line) in wrap_spans(spans, self.width, first.chars().count())
            .into_iter()
            .enumerate()
        {
            let lead = if i == 0 { first.clone() } else { rest.clone() };
            let mut all = Vec::with_capacity(line.len() + 1);
            if !lead.is_empty() {
                all.push(Span::styled(lead, quote_style));
            }
            all.extend(line);
            self.lines.push(Line::from(all));
        }
    }

    fn blank(&mut self) {
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) {
            self.lines.push(Line::default());
        }
    }

    fn event(&mut self, event: Event<'_>) {
        if let Some((_, code)) = &mut self.code {
            match event {
                Event::Text(text) => code.push_str(&text),
                Event::End(TagEnd::CodeBlock) => self.end_code(),
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => {
                let style = self.style();
                self.spans.push(Span::styled(text.into_string(), style));
            }
            Event::Code(code) => {
                let style = Style::default().fg(self.theme.code);
                self.spans.push(Span::styled(code.into_string(), style));
            }
            Event::SoftBreak => self.spans.push(Span::raw(" ")),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.flush();
                self.blank();
                let rule = "─".repeat(usize::from(self.width.min(40)));
                self.lines
                    .push(Line::styled(rule, Style::default().fg(self.theme.muted)));
                self.lines.push(Line::default());
            }
            Event::TaskListMarker(done) => {
                self.spans
                    .push(Span::raw(if done { "[x] " } else { "[ ] " }));
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                let style = self.style();
                self.spans.push(Span::styled(html.into_string(), style));
            }
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { level, .. } => {
                self.flush();
                self.blank();
                let accent = self.theme.accent;
                self.push_style(|s| {
                    let s = s.add_modifier(Modifier::BOLD).fg(accent);
                    if level == HeadingLevel::H1 {
                        s.add_modifier(Modifier::UNDERLINED)
                    } else {
                        s
                    }
                });
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote += 1;
                self.push_style(|s| s.add_modifier(Modifier::ITALIC));
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                let lang = match kind {
                    CodeBlockKind::Fenced(lang) => {
                        lang.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(start) => {
                self.flush();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ => "• ".to_string(),
                };
                self.pending_item = Some(marker);
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { .. } => {
                let link = self.theme.link;
                self.push_style(|s| s.fg(link).add_modifier(Modifier::UNDERLINED));
            }
            _ => self.push_style(|s| s),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush();
                if self.lists.is_empty() {
                    self.lines.push(Line::default());
                }
            }
            TagEnd::Heading(_) => {
                self.flush();
                self.styles.pop();
                self.lines.push(Line::default());
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
                self.styles.pop();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.lines.push(Line::default());
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::CodeBlock => self.end_code(),
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Link
            | TagEnd::Image
            | TagEnd::Table
            | TagEnd::TableHead
            | TagEnd::TableRow
            | TagEnd::TableCell
            | TagEnd::FootnoteDefinition
            | TagEnd::MetadataBlock(_)
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::HtmlBlock => {
                if self.styles.len() > 1 {
                    self.styles.pop();
                }
            }
        }
    }

    fn end_code(&mut self) {
        let Some((lang, code)) = self.code.take() else {
            return;
        };
        let indent = self.indent();
        let gutter = Style::default().fg(self.theme.muted);
        for spans in highlight::code(&code, &lang, self.theme) {
            let mut all = vec![Span::styled(format!("{indent}▎ "), gutter)];
            let width = self
                .width
                .saturating_sub(u16::try_from(indent.chars().count() + 2).unwrap_or(u16::MAX));
            // Long code lines are cut, not wrapped, as an editor shows them.
            all.extend(super::wrap::truncate_spans(spans, width));
            self.lines.push(Line::from(all));
        }
        self.lines.push(Line::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn paragraphs_lists_and_code_become_lines_within_the_width() {
        let theme = Theme::plain();
        let lines = render(
            "# Title\n\nSome *long* paragraph that wraps around.\n\n- one\n- two\n\n```rust\nfn main() {}\n```\n",
            20,
            &theme,
        );
        assert_eq!(
            text(&lines),
            vec![
                "Title",
                "",
                "Some long paragraph",
                "that wraps around.",
                "",
                "• one",
                "• two",
                "",
                "▎ fn main() {}",
            ]
        );
        assert!(lines.iter().all(|l| l.width() <= 20));
    }

    #[test]
    fn ordered_lists_count_and_quotes_keep_their_bar() {
        let theme = Theme::plain();
        let lines = render("1. a\n2. b\n\n> said\n", 30, &theme);
        assert_eq!(text(&lines), vec!["1. a", "2. b", "", "│ said"]);
    }
}
