//! What is drawn over or instead of the editor: the permission ask, the session list, the
//! session tree and the completion list.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use serde_json::Value;

use super::wrap::truncate;
use crate::tui::app::{App, Overlay};

/// The bordered box of an ask or a question, titled `title`, drawn over `area`; answers
/// what is inside the border.
fn asking_frame(frame: &mut Frame<'_>, app: &App, area: Rect, title: String) -> Rect {
    let warn = Style::default().fg(app.theme.warn);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(warn)
        .title(Span::styled(title, warn));
    let inner = block.inner(area);
    frame.render_widget(Clear, area);
    frame.render_widget(block, area);
    inner
}

/// The agents from the root down to the asking session: as the request says, else as the
/// mirror knows them.
fn asker(app: &App, path: &[String], session: &str) -> Vec<String> {
    if path.is_empty() {
        app.mirror.agent_path(session)
    } else {
        path.to_vec()
    }
}

/// The ask on screen: what is asked, by which path of agents, and the three answers.
pub fn ask(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let Some(request) = app.ask() else {
        return;
    };
    let theme = &app.theme;
    let inner = asking_frame(frame, app, area, " permission ".to_string());
    let width = usize::from(inner.width);
    let path = asker(app, &request.path, request.session_id.as_str());
    let what = request
        .metadata
        .get("command")
        .or_else(|| request.metadata.get("filepath"))
        .and_then(Value::as_str)
        .map_or_else(|| request.patterns.join(", "), str::to_string);
    let choices = ["once", "always", "reject"];
    let mut answers = vec![Span::raw("  ")];
    for (i, choice) in choices.iter().enumerate() {
        let style = if i == app.ask_choice {
            theme.selected()
        } else {
            theme.dim()
        };
        answers.push(Span::styled(
            format!(" [{}] {choice} ", &choice[..1]),
            style,
        ));
        answers.push(Span::raw(" "));
    }
    let lines = vec![
        Line::from(vec![
            Span::styled(format!("{} ", request.permission), theme.strong()),
            Span::raw(truncate(
                &what,
                width.saturating_sub(request.permission.len() + 1),
            )),
        ]),
        Line::styled(
            truncate(&format!("asked by {}", path.join(" › ")), width),
            theme.dim(),
        ),
        Line::from(answers),
    ];
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The question on screen: who asks, the question, its choices (the highlighted one marked,
/// picked ones checked) and how to answer.
pub fn question(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let Some(request) = app.question() else {
        return;
    };
    let state = app.answering();
    let Some(question) = request.questions.get(state.index) else {
        return;
    };
    let theme = &app.theme;
    let count = request.questions.len();
    let title = if count > 1 {
        format!(" question {}/{count} ", state.index + 1)
    } else {
        " question ".to_string()
    };
    let inner = asking_frame(frame, app, area, title);
    let width = usize::from(inner.width);
    let path = asker(app, &request.path, request.session_id.as_str());
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("[{}] ", question.header), theme.strong()),
            Span::raw(truncate(
                &question.question,
                width.saturating_sub(question.header.len() + 3),
            )),
        ]),
        Line::styled(
            truncate(&format!("asked by {}", path.join(" › ")), width),
            theme.dim(),
        ),
    ];
    for (i, option) in question.options.iter().enumerate() {
        let mark = match (question.is_multiple(), state.picked.contains(&i)) {
            (true, true) => "[x] ",
            (true, false) => "[ ] ",
            (false, _) => "",
        };
        let text = format!("{}. {mark}{} — {}", i + 1, option.label, option.description);
        let style = if i == state.cursor {
            theme.selected()
        } else {
            Style::default()
        };
        lines.push(Line::styled(truncate(&text, width), style));
    }
    if question.allows_custom() {
        let i = question.options.len();
        let text = match &state.typing {
            Some(typed) => format!("{}. {typed}▏", i + 1),
            None => format!("{}. Type your own answer", i + 1),
        };
        let style = if i == state.cursor {
            theme.selected()
        } else {
            theme.dim()
        };
        lines.push(Line::styled(truncate(&text, width), style));
    }
    let hint = if question.is_multiple() {
        "↑↓ move · space or number picks · enter sends · esc dismisses"
    } else {
        "↑↓ move · number or enter answers · esc dismisses"
    };
    lines.push(Line::styled(truncate(hint, width), theme.dim()));
    frame.render_widget(Paragraph::new(lines), inner);
}

/// How tall the question panel is: its text, choices and hint inside a border.
pub fn question_height(app: &App) -> Option<u16> {
    let request = app.question()?;
    let question = request.questions.get(app.answering().index)?;
    let rows = crate::tui::app::question_rows(question);
    u16::try_from(rows + 5).ok().map(|h| h.min(14))
}

/// The open panel, over the conversation (lists) or just above the editor (completion).
pub fn overlay(frame: &mut Frame<'_>, app: &App, body: Rect, editor: Rect, now_ms: u64) {
    match &app.overlay {
        Overlay::None => {}
        Overlay::Sessions { selected } => sessions(frame, app, body, *selected, now_ms),
        Overlay::Tree { selected } => tree(frame, app, body, *selected),
        Overlay::Completion(c) => {
            let height = u16::try_from(c.items.len().min(8)).unwrap_or(8) + 2;
            let area = Rect {
                x: editor.x,
                y: editor.y.saturating_sub(height),
                width: editor.width.min(70),
                height: height.min(editor.y),
            };
            let first = c.selected.saturating_sub(7);
            let width = usize::from(area.width.saturating_sub(2));
            let lines: Vec<Line<'static>> = c
                .items
                .iter()
                .enumerate()
                .skip(first)
                .take(8)
                .map(|(i, item)| {
                    let label = format!("{:<20} ", item.label);
                    let text = truncate(&format!("{label}{}", item.detail), width);
                    let style = if i == c.selected {
                        app.theme.selected()
                    } else {
                        Style::default()
                    };
                    Line::styled(text, style)
                })
                .collect();
            boxed(frame, app, area, "", lines);
        }
    }
}

fn centered(body: Rect) -> Rect {
    let width = body.width.saturating_sub(4).min(90).max(20.min(body.width));
    let height = body.height.saturating_sub(2).max(3.min(body.height));
    Rect {
        x: body.x + (body.width.saturating_sub(width)) / 2,
        y: body.y + 1.min(body.height),
        width,
        height,
    }
}

fn boxed(frame: &mut Frame<'_>, app: &App, area: Rect, title: &str, lines: Vec<Line<'static>>) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(app.theme.strong())
        .title(Span::styled(title.to_string(), app.theme.strong()));
    let inner = block.inner(area);
    frame.render_widget(Clear, area);
    frame.render_widget(block, area);
    frame.render_widget(Paragraph::new(lines), inner);
}

/// Rows `first..` that keep `selected` in a list of `height` rows.
fn window(selected: usize, height: usize) -> usize {
    (selected + 1).saturating_sub(height.max(1))
}

fn sessions(frame: &mut Frame<'_>, app: &App, body: Rect, selected: usize, now_ms: u64) {
    let area = centered(body);
    let width = usize::from(area.width.saturating_sub(2));
    let height = usize::from(area.height.saturating_sub(2));
    let roots = app.mirror.roots();
    let lines: Vec<Line<'static>> = if roots.is_empty() {
        vec![Line::styled("no sessions yet".to_string(), app.theme.dim())]
    } else {
        roots
            .iter()
            .enumerate()
            .skip(window(selected, height))
            .take(height)
            .map(|(i, s)| {
                let age = ago(now_ms.saturating_sub(s.info.time.updated));
                let busy = if s.busy() { "● " } else { "  " };
                let text = truncate(&format!("{busy}{:<8} {}", age, s.info.title), width);
                let style = if i == selected {
                    app.theme.selected()
                } else if Some(s.info.id.as_str()) == app.current.as_deref() {
                    app.theme.strong()
                } else {
                    Style::default()
                };
                Line::styled(text, style)
            })
            .collect()
    };
    boxed(
        frame,
        app,
        area,
        " sessions (enter: open, esc: close) ",
        lines,
    );
}

fn tree(frame: &mut Frame<'_>, app: &App, body: Rect, selected: usize) {
    let area = centered(body);
    let width = usize::from(area.width.saturating_sub(2));
    let height = usize::from(area.height.saturating_sub(2));
    let rows = app
        .root()
        .map(|r| app.mirror.tree_rows(&r))
        .unwrap_or_default();
    let lines: Vec<Line<'static>> = rows
        .iter()
        .enumerate()
        .skip(window(selected, height))
        .take(height)
        .map(|(i, row)| {
            let node = &row.node;
            let status = if node.busy { "●" } else { "○" };
            let doing = node
                .tool
                .as_deref()
                .map_or_else(String::new, |t| format!(" running {t}"));
            let costs = if row.node.total_cost > row.node.cost {
                format!("${:.4} / ${:.4}", node.cost, node.total_cost)
            } else {
                format!("${:.4}", node.cost)
            };
            let text = format!(
                "{}{status} {} {costs}{doing}  {}",
                "  ".repeat(row.depth),
                node.agent,
                node.title
            );
            let style = if i == selected {
                app.theme.selected()
            } else if Some(node.id.as_str()) == app.current.as_deref() {
                app.theme.strong()
            } else if node.busy {
                Style::default().fg(app.theme.warn)
            } else {
                Style::default()
            };
            Line::styled(truncate(&text, width), style)
        })
        .collect();
    boxed(
        frame,
        app,
        area,
        " session tree (own / with children) ",
        lines,
    );
}

/// `3m ago`, `2h ago`, `5d ago`.
fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => "just now".to_string(),
        60..3600 => format!("{}m ago", s / 60),
        3600..86_400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}
