//! Drawing the TUI: a header with the open session's place in its tree, the conversation, the
//! ask or the editor, a footer, and the open panel on top.

pub mod card;
mod conversation;
mod highlight;
pub mod markdown;
mod panels;
pub mod theme;
mod wrap;

#[cfg(test)]
mod tests;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::app::App;
use wrap::truncate;

/// Draws the whole screen; `now_ms` is the wall clock (epoch ms) for elapsed times, `tick`
/// turns the spinner.
pub fn draw(frame: &mut Frame<'_>, app: &App, now_ms: u64, tick: usize) {
    let area = frame.area();
    let bottom_height = bottom_height(app, area.width);
    let [header, body, bottom, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(bottom_height),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, app, header);
    draw_body(frame, app, body, now_ms, tick);
    if app.ask().is_some() {
        panels::ask(frame, app, bottom);
    } else if app.question().is_some() {
        panels::question(frame, app, bottom);
    } else {
        draw_editor(frame, app, bottom);
    }
    draw_footer(frame, app, footer, tick);
    panels::overlay(frame, app, body, bottom, now_ms);
}

fn bottom_height(app: &App, width: u16) -> u16 {
    if app.ask().is_some() {
        return 5;
    }
    if let Some(height) = panels::question_height(app) {
        return height;
    }
    let inner = usize::from(width.saturating_sub(4)).max(1);
    let lines: usize = app
        .editor
        .lines()
        .iter()
        .map(|l| wrap::text_width(l) / inner + 1)
        .sum();
    u16::try_from(lines.clamp(1, 8)).unwrap_or(8) + 2
}

fn draw_header(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let theme = &app.theme;
    let mut spans = Vec::new();
    match app.current.as_deref().and_then(|c| app.mirror.session(c)) {
        Some(view) => {
            let path = app.mirror.agent_path(view.info.id.as_str());
            spans.push(Span::styled(path.join(" › "), theme.strong()));
            spans.push(Span::styled(format!("  {}", view.info.title), theme.dim()));
        }
        None => spans.push(Span::styled("new session".to_string(), theme.strong())),
    }
    let line = Line::from(spans);
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_body(frame: &mut Frame<'_>, app: &App, area: Rect, now_ms: u64, tick: usize) {
    let width = area.width.saturating_sub(1).max(10);
    let mut lines = conversation::lines(app, width, now_ms);
    if let Some(view) = app.current.as_deref().and_then(|c| app.mirror.session(c))
        && !view.loaded
    {
        lines.push(Line::styled("loading…".to_string(), app.theme.dim()));
    }
    if app.tree_busy() {
        let spinner = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"][tick % 10];
        lines.push(Line::default());
        lines.push(Line::from(vec![
            Span::styled(
                format!("{spinner} working"),
                Style::default().fg(app.theme.warn),
            ),
            Span::styled(
                format!(
                    "  {} twice to interrupt",
                    app.keys.describe("session_interrupt")
                ),
                app.theme.dim(),
            ),
        ]));
    }
    let height = usize::from(area.height);
    let max_scroll = lines.len().saturating_sub(height);
    let scroll = app.scroll.min(max_scroll);
    let start = lines.len().saturating_sub(height + scroll);
    let end = (start + height).min(lines.len());
    let visible: Vec<Line<'static>> = lines[start..end].to_vec();
    frame.render_widget(Paragraph::new(visible), area);
}

fn draw_editor(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let theme = &app.theme;
    let agent = app.prompt_agent().unwrap_or("agent");
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(format!(" {agent} "), theme.strong()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = usize::from(inner.width).max(1);
    // Lines wrapped by characters, so that the cursor's place is known.
    let mut rows: Vec<String> = Vec::new();
    let (cursor_row, cursor_col) = app.editor.cursor();
    let mut cursor = (0usize, 0usize);
    for (i, line) in app.editor.lines().iter().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let pieces: Vec<String> = if chars.is_empty() {
            vec![String::new()]
        } else {
            chars.chunks(width).map(|c| c.iter().collect()).collect()
        };
        if i == cursor_row {
            let piece = (cursor_col / width).min(pieces.len());
            cursor = (rows.len() + piece, cursor_col - piece * width);
        }
        rows.extend(pieces);
    }
    let height = usize::from(inner.height).max(1);
    let first = (cursor.0 + 1).saturating_sub(height);
    let shown: Vec<Line<'static>> = rows
        .iter()
        .skip(first)
        .take(height)
        .map(|r| Line::raw(r.clone()))
        .collect();
    if app.editor.is_empty() {
        frame.render_widget(
            Paragraph::new(Line::styled(
                "ask anything… (/ for commands, @ for agents and files)".to_string(),
                theme.dim(),
            )),
            inner,
        );
    } else {
        frame.render_widget(Paragraph::new(shown), inner);
    }
    if !matches!(
        app.overlay,
        super::app::Overlay::Sessions { .. } | super::app::Overlay::Tree { .. }
    ) {
        let x = inner.x + u16::try_from(cursor.1).unwrap_or(0);
        let y = inner.y + u16::try_from(cursor.0 - first).unwrap_or(0);
        frame.set_cursor_position((x.min(inner.right().saturating_sub(1)), y));
    }
}

/// `950`, `4.1k`, `1.2M`.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1_000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

fn draw_footer(frame: &mut Frame<'_>, app: &App, area: Rect, _tick: usize) {
    let theme = &app.theme;
    let mut left: Vec<Span<'static>> = Vec::new();
    // A pending leader comes first: it is what the next key does.
    if app.leader.is_some() {
        left.push(Span::styled(
            format!("{} …", app.keys.leader_text()),
            theme.strong(),
        ));
    } else if let Some(notice) = app.notice() {
        left.push(Span::styled(
            notice.to_string(),
            Style::default().fg(theme.warn),
        ));
    } else if !app.connected {
        left.push(Span::styled(
            "connecting to the server…".to_string(),
            Style::default().fg(theme.error),
        ));
    } else {
        left.push(Span::styled(
            format!(
                "{} tree · {} sessions",
                app.keys.describe("session_tree"),
                app.keys.describe("session_list")
            ),
            theme.dim(),
        ));
    }
    let agent = app.agent_name().unwrap_or("-");
    let mut right = agent.to_string();
    if let Some(model) = &app.model {
        right.push_str(&format!(" · {model}"));
    }
    match app.context_use() {
        Some((used, Some(limit))) if limit > 0 => right.push_str(&format!(
            " · ctx {} ({}%)",
            tokens(used),
            used.saturating_mul(100) / limit
        )),
        Some((used, _)) => right.push_str(&format!(" · ctx {}", tokens(used))),
        None => {}
    }
    if let Some(root) = app.root()
        && let Some(tree) = app.mirror.tree(&root)
    {
        right.push_str(&format!(" · tree ${:.4}", tree.total_cost));
    }
    let right_width = wrap::text_width(&right);
    let left_text: String = left.iter().map(|s| s.content.to_string()).collect();
    let room = usize::from(area.width).saturating_sub(right_width + 1);
    let left_style = left.first().map(|s| s.style).unwrap_or_default();
    let left_text = truncate(&left_text, room);
    let gap = usize::from(area.width).saturating_sub(wrap::text_width(&left_text) + right_width);
    let line = Line::from(vec![
        Span::styled(left_text, left_style),
        Span::raw(" ".repeat(gap)),
        Span::styled(right, theme.dim()),
    ]);
    frame.render_widget(Paragraph::new(line), area);
}
