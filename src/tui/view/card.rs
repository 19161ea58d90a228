//! A `task` call drawn as a card: the child's agent and description, what it runs now, how long
//! it has run, and its subtree's tokens and cost, live.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use taskforce_agents::model::{ToolPart, ToolState};

use super::theme::Theme;
use super::wrap::truncate;
use crate::tui::state::Mirror;

/// The child session a task call runs, once the call has started it.
pub fn child_id(tool: &ToolPart) -> Option<String> {
    let metadata = match &tool.state {
        ToolState::Running(r) => r.metadata.as_ref(),
        ToolState::Completed(c) => Some(&c.metadata),
        ToolState::Error(e) => e.metadata.as_ref(),
        ToolState::Pending(_) => None,
    }?;
    metadata
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// What a card shows, gathered from the part and the child's subtree.
struct Facts {
    agent: String,
    description: String,
    status: &'static str,
    /// The child's current tool, or the outcome.
    doing: String,
    elapsed_ms: u64,
    tokens: u64,
    cost: f64,
}

fn facts(tool: &ToolPart, mirror: &Mirror, now_ms: u64) -> Facts {
    let input = tool.state.input();
    let text = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let child = child_id(tool);
    let (tokens, cost, running) =
        child
            .as_deref()
            .and_then(|id| mirror.tree(id))
            .map_or((0, 0.0, None), |node| {
                let tokens = subtree_tokens(mirror, &node);
                let running = deepest_running(&node);
                (tokens, node.total_cost, running)
            });
    let (status, doing, elapsed_ms) = match &tool.state {
        ToolState::Pending(_) => ("pending", "starting".to_string(), 0),
        ToolState::Running(r) => (
            "running",
            running.unwrap_or_else(|| "thinking".to_string()),
            now_ms.saturating_sub(r.time.start),
        ),
        ToolState::Completed(c) => (
            "done",
            String::new(),
            c.time.end.saturating_sub(c.time.start),
        ),
        ToolState::Error(e) => (
            "error",
            e.error.lines().next().unwrap_or("failed").to_string(),
            e.time.end.saturating_sub(e.time.start),
        ),
    };
    Facts {
        agent: text("subagent_type"),
        description: text("description"),
        status,
        doing,
        elapsed_ms,
        tokens,
        cost,
    }
}

fn subtree_tokens(mirror: &Mirror, node: &crate::tui::state::TreeNode) -> u64 {
    mirror.session(&node.id).map_or(0, |s| s.tokens())
        + node
            .children
            .iter()
            .map(|c| subtree_tokens(mirror, c))
            .sum::<u64>()
}

/// The tool run deepest in the subtree, named with its agent when below the child.
fn deepest_running(node: &crate::tui::state::TreeNode) -> Option<String> {
    for child in &node.children {
        if let Some(inner) = deepest_running(child) {
            return Some(inner);
        }
    }
    node.tool.as_ref().map(|t| {
        if node.children.is_empty() {
            t.clone()
        } else {
            format!("{t} ({})", node.agent)
        }
    })
}

/// The card's lines, `width` cells wide; `selected` when Enter opens it.
pub fn lines(
    tool: &ToolPart,
    mirror: &Mirror,
    theme: &Theme,
    width: u16,
    selected: bool,
    now_ms: u64,
) -> Vec<Line<'static>> {
    let f = facts(tool, mirror, now_ms);
    let inner = usize::from(width).saturating_sub(4).max(10);
    let border = if selected {
        theme.strong()
    } else {
        theme.dim()
    };
    let status_style = match f.status {
        "done" => Style::default().fg(theme.ok),
        "error" => Style::default().fg(theme.error),
        _ => Style::default().fg(theme.warn),
    };
    let title = truncate(
        &format!(
            " task · {} ",
            if f.agent.is_empty() { "?" } else { &f.agent }
        ),
        inner,
    );
    let top_fill = inner.saturating_sub(super::wrap::text_width(&title));
    let mut out = vec![Line::from(vec![
        Span::styled("╭─".to_string(), border),
        Span::styled(title, theme.strong()),
        Span::styled(format!("{}╮", "─".repeat(top_fill)), border),
    ])];
    let row = |spans: Vec<Span<'static>>| {
        let used: usize = spans
            .iter()
            .map(|s| super::wrap::text_width(&s.content))
            .sum();
        let mut all = vec![Span::styled("│ ".to_string(), border)];
        all.extend(spans);
        all.push(Span::raw(" ".repeat(inner.saturating_sub(used))));
        all.push(Span::styled("│".to_string(), border));
        Line::from(all)
    };
    out.push(row(vec![Span::styled(
        truncate(&f.description, inner.saturating_sub(1)),
        Style::default().add_modifier(Modifier::BOLD),
    )]));
    let status = if f.doing.is_empty() {
        f.status.to_string()
    } else {
        format!("{} · ", f.status)
    };
    let doing = truncate(
        &f.doing,
        inner.saturating_sub(super::wrap::text_width(&status) + 1),
    );
    out.push(row(vec![
        Span::styled(status, status_style),
        Span::raw(doing),
    ]));
    let stats = format!(
        "{} · {} tokens · ${:.4}",
        elapsed(f.elapsed_ms),
        f.tokens,
        f.cost
    );
    out.push(row(vec![Span::styled(
        truncate(&stats, inner.saturating_sub(1)),
        theme.dim(),
    )]));
    let hint = if selected { " enter: open " } else { "" };
    let fill = inner.saturating_sub(super::wrap::text_width(hint));
    out.push(Line::from(vec![
        Span::styled(format!("╰─{}", "─".repeat(fill)), border),
        Span::styled(hint.to_string(), theme.dim()),
        Span::styled("╯".to_string(), border),
    ]));
    out
}

/// `12.3s`, `4m05s`.
pub fn elapsed(ms: u64) -> String {
    let seconds = ms / 1000;
    if seconds < 60 {
        format!("{}.{}s", seconds, (ms % 1000) / 100)
    } else {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_time_reads_as_seconds_then_minutes() {
        assert_eq!(elapsed(1234), "1.2s");
        assert_eq!(elapsed(245_000), "4m05s");
    }
}
