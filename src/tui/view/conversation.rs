//! The open session's conversation as lines: the user's prompts, the answers rendered as
//! markdown, reasoning folded, each tool call on one line with its state, and task calls as
//! cards.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use taskforce_agents::model::{Message, Part, PartKind, ToolPart, ToolState};

use super::card;
use super::theme::Theme;
use super::wrap::{truncate, wrap_spans};
use crate::tui::app::App;

/// Every line of the open session's conversation at `width`.
pub fn lines(app: &App, width: u16, now_ms: u64) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let Some(view) = app.current.as_deref().and_then(|c| app.mirror.session(c)) else {
        return welcome(app);
    };
    let mut out: Vec<Line<'static>> = Vec::new();
    let cards = app.task_children();
    let selected_card = cards.get(app.card).cloned();
    let reverted = view.info.revert.as_ref().map(|r| &r.message_id);
    for (i, message) in view.messages.iter().enumerate() {
        // What a revert undid is hidden until redone (or dropped by the next prompt).
        if reverted == Some(message.info.id()) {
            let prompts = view.messages[i..]
                .iter()
                .filter(|m| matches!(m.info.as_ref(), Message::User(_)))
                .count();
            out.push(Line::default());
            out.push(Line::styled(
                format!("{prompts} undone prompt(s) hidden · /redo brings them back"),
                theme.dim(),
            ));
            break;
        }
        match message.info.as_ref() {
            Message::User(_) => {
                out.push(Line::default());
                let text: String = message
                    .parts
                    .iter()
                    .filter_map(|p| match &p.kind {
                        PartKind::Text(t) if !t.synthetic.unwrap_or(false) => Some(t.text.clone()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let bar = Span::styled("▌ ".to_string(), Style::default().fg(theme.user));
                for line in text.lines() {
                    for wrapped in wrap_spans(vec![Span::raw(line.to_string())], width, 2) {
                        let mut spans = vec![bar.clone()];
                        spans.extend(wrapped);
                        out.push(Line::from(spans));
                    }
                }
                for part in &message.parts {
                    if let PartKind::File(f) = &part.kind {
                        let name = f.filename.clone().unwrap_or_else(|| f.url.clone());
                        out.push(Line::from(vec![
                            bar.clone(),
                            Span::styled(format!("📎 {name}"), theme.dim()),
                        ]));
                    }
                }
            }
            Message::Assistant(a) => {
                out.push(Line::default());
                out.push(Line::from(vec![
                    Span::styled(a.agent.clone(), theme.strong()),
                    Span::styled(format!(" · {}/{}", a.provider_id, a.model_id), theme.dim()),
                ]));
                for part in &message.parts {
                    part_lines(part, app, width, now_ms, selected_card.as_deref(), &mut out);
                }
                if let Some(error) = &a.error {
                    for line in wrap_spans(
                        vec![Span::styled(
                            format!("error: {error}"),
                            Style::default().fg(theme.error),
                        )],
                        width,
                        0,
                    ) {
                        out.push(Line::from(line));
                    }
                }
            }
        }
    }
    if let Some(error) = &view.error
        && !view
            .messages
            .iter()
            .any(|m| matches!(m.info.as_ref(), Message::Assistant(a) if a.error.is_some()))
    {
        out.push(Line::styled(
            format!("error: {error}"),
            Style::default().fg(theme.error),
        ));
    }
    out
}

fn part_lines(
    part: &Part,
    app: &App,
    width: u16,
    now_ms: u64,
    selected_card: Option<&str>,
    out: &mut Vec<Line<'static>>,
) {
    let theme = &app.theme;
    match &part.kind {
        PartKind::Text(t) if !t.synthetic.unwrap_or(false) => {
            let lines = app
                .rendered
                .borrow_mut()
                .render(part.id.as_str(), &t.text, width, theme);
            out.extend(lines);
        }
        PartKind::Reasoning(r) if app.show_thinking => {
            let style = theme.dim().add_modifier(Modifier::ITALIC);
            out.push(Line::styled("▾ thinking".to_string(), style));
            for line in r.text.lines() {
                for wrapped in wrap_spans(vec![Span::styled(line.to_string(), style)], width, 2) {
                    let mut spans = vec![Span::styled("  ".to_string(), style)];
                    spans.extend(wrapped);
                    out.push(Line::from(spans));
                }
            }
        }
        PartKind::Reasoning(r) => {
            let lines = r.text.lines().filter(|l| !l.trim().is_empty()).count();
            let first = r.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            out.push(Line::styled(
                truncate(
                    &format!("▸ thinking ({lines} lines) {first}"),
                    usize::from(width),
                ),
                theme.dim().add_modifier(Modifier::ITALIC),
            ));
        }
        PartKind::Tool(tool) if tool.tool == "task" => {
            let child = card::child_id(tool);
            let selected = child.is_some() && child.as_deref() == selected_card;
            out.extend(card::lines(
                tool,
                &app.mirror,
                theme,
                width,
                selected,
                now_ms,
            ));
        }
        PartKind::Tool(tool) => out.push(tool_line(tool, theme, width)),
        PartKind::Retry(r) => out.push(Line::styled(
            truncate(
                &format!("⟳ retrying (attempt {}): {}", r.attempt, r.error.message),
                usize::from(width),
            ),
            Style::default().fg(theme.warn),
        )),
        PartKind::Subtask(s) => out.push(Line::styled(
            truncate(
                &format!("↳ subtask @{}: {}", s.agent, s.description),
                usize::from(width),
            ),
            theme.dim(),
        )),
        PartKind::Compaction(_) => {
            out.push(Line::styled("── compacted ──".to_string(), theme.dim()));
        }
        _ => {}
    }
}

/// One tool call on one line: its state, name and what it works on.
pub fn tool_line(tool: &ToolPart, theme: &Theme, width: u16) -> Line<'static> {
    let (mark, style) = match &tool.state {
        ToolState::Pending(_) => ("○", Style::default().fg(theme.muted)),
        ToolState::Running(_) => ("◐", Style::default().fg(theme.warn)),
        ToolState::Completed(_) => ("✓", Style::default().fg(theme.ok)),
        ToolState::Error(_) => ("✗", Style::default().fg(theme.error)),
    };
    let summary = summary(tool);
    let mut text = format!("{} {summary}", tool.tool);
    if let ToolState::Error(e) = &tool.state {
        text.push_str(" — ");
        text.push_str(e.error.lines().next().unwrap_or(""));
    }
    Line::from(vec![
        Span::styled(format!("{mark} "), style),
        Span::raw(truncate(&text, usize::from(width).saturating_sub(2))),
    ])
}

/// What a tool call works on, in a few words (`src/main.rs`, `ls -la`, `"needle" in src`).
fn summary(tool: &ToolPart) -> String {
    if let ToolState::Completed(c) = &tool.state
        && !c.title.is_empty()
    {
        return c.title.clone();
    }
    if let ToolState::Running(r) = &tool.state
        && let Some(title) = &r.title
    {
        return title.clone();
    }
    let input = tool.state.input();
    let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    s("command")
        .or_else(|| s("filePath"))
        .or_else(|| s("path"))
        .or_else(|| s("pattern"))
        .or_else(|| s("url"))
        .or_else(|| s("description"))
        .unwrap_or_default()
}

fn welcome(app: &App) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let keys = &app.keys;
    let hint = |action: &str, what: &str| {
        Line::from(vec![
            Span::styled(format!("  {:<18}", keys.describe(action)), theme.strong()),
            Span::styled(what.to_string(), theme.dim()),
        ])
    };
    vec![
        Line::default(),
        Line::styled("  taskforce".to_string(), theme.strong()),
        Line::styled(format!("  {}", app.project), theme.dim()),
        Line::default(),
        hint("input_submit", "send the prompt"),
        hint("agent_cycle", "switch the primary agent"),
        hint("session_list", "sessions of this project"),
        hint("session_tree", "the session tree"),
        hint("session_child_cycle", "into a child session"),
        hint("session_parent", "back to the parent"),
        hint("session_interrupt", "interrupt (twice when busy)"),
        hint("app_exit", "quit"),
        Line::styled(
            "  / for commands, @ for agents and files".to_string(),
            theme.dim(),
        ),
    ]
}
