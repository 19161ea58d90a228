//! Highlighting of fenced code blocks by language, with syntect's grammars (loaded on first use)
//! and a few colours of the TUI's theme.

use std::str::FromStr;
use std::sync::OnceLock;

use ratatui::style::{Color, Style};
use ratatui::text::Span;
use syntect::easy::HighlightLines;
use syntect::highlighting::{
    Color as SynColor, ScopeSelectors, StyleModifier, Theme as SynTheme, ThemeItem, ThemeSettings,
};
use syntect::parsing::SyntaxSet;

use super::theme::Theme;

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn syntect_theme() -> &'static SynTheme {
    static THEME: OnceLock<SynTheme> = OnceLock::new();
    THEME.get_or_init(|| {
        // Terminal palette indices, carried in the red channel with alpha 0 (see `to_color`).
        let rules: &[(&str, u8)] = &[
            ("comment", 8),
            ("string", 2),
            ("constant.numeric, constant.language, constant.character", 5),
            ("keyword, storage", 4),
            ("entity.name.function, support.function", 6),
            ("entity.name.type, support.type, entity.name.class", 3),
            ("variable.parameter", 1),
        ];
        let scopes = rules
            .iter()
            .filter_map(|(selector, index)| {
                Some(ThemeItem {
                    scope: ScopeSelectors::from_str(selector).ok()?,
                    style: StyleModifier {
                        foreground: Some(SynColor {
                            r: *index,
                            g: 0,
                            b: 0,
                            a: 0,
                        }),
                        background: None,
                        font_style: None,
                    },
                })
            })
            .collect();
        SynTheme {
            name: Some("taskforce".into()),
            author: None,
            settings: ThemeSettings::default(),
            scopes,
        }
    })
}

fn to_color(color: SynColor) -> Option<Color> {
    (color.a == 0).then_some(Color::Indexed(color.r))
}

/// The lines of `code` as styled spans: highlighted when `lang` is known and colours are on,
/// else in the theme's code colour.
pub fn code(code: &str, lang: &str, theme: &Theme) -> Vec<Vec<Span<'static>>> {
    let plain = |line: &str| {
        vec![Span::styled(
            line.to_string(),
            Style::default().fg(theme.code),
        )]
    };
    let code = code.strip_suffix('\n').unwrap_or(code);
    if !theme.color || lang.is_empty() {
        return code.lines().map(plain).collect();
    }
    let set = syntaxes();
    let Some(syntax) = set
        .find_syntax_by_token(lang)
        .or_else(|| set.find_syntax_by_extension(lang))
    else {
        return code.lines().map(plain).collect();
    };
    let mut lines = HighlightLines::new(syntax, syntect_theme());
    code.split('\n')
        .map(|line| {
            let with_newline = format!("{line}\n");
            match lines.highlight_line(&with_newline, set) {
                Ok(pieces) => pieces
                    .into_iter()
                    .map(|(style, text)| {
                        let mut s = Style::default();
                        if let Some(fg) = to_color(style.foreground) {
                            s = s.fg(fg);
                        }
                        Span::styled(text.trim_end_matches('\n').to_string(), s)
                    })
                    .filter(|s| !s.content.is_empty())
                    .collect(),
                Err(_) => plain(line),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_languages_get_colours_and_unknown_ones_stay_plain() {
        let theme = Theme::new(false);
        let lines = code("fn main() { let x = 1; } // done\n", "rust", &theme);
        assert_eq!(lines.len(), 1);
        let text: String = lines[0].iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "fn main() { let x = 1; } // done");
        let colours: std::collections::HashSet<_> = lines[0].iter().map(|s| s.style.fg).collect();
        assert!(
            colours.len() >= 3,
            "keyword, number and comment differ: {colours:?}"
        );

        let plain = code("anything\n", "no-such-language", &theme);
        assert_eq!(plain[0].len(), 1);
        let no_color = code("fn main() {}\n", "rust", &Theme::plain());
        assert!(no_color[0].iter().all(|s| s.style.fg == Some(Color::Reset)));
    }
}
