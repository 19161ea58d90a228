//! Permission asks during a run: allowed with `--yes`, asked on the terminal when the run is
//! interactive, else refused with a message that says how to allow them; the same for a run
//! in this process and a run on a server (`run --attach`).

use std::io::{BufRead, Write};

use taskforce_actors::Runtime;
use taskforce_actors::permission::{PermissionReply, PermissionRequest};

/// Answers `request` on `runtime`: allowed once with `yes`, asked on the terminal when
/// `interactive`, else refused (and said so on stderr).
pub(super) async fn answer(
    runtime: &Runtime,
    request: &PermissionRequest,
    yes: bool,
    interactive: bool,
) {
    let (reply, message) = decide(request, yes, interactive).await;
    runtime.reply_permission(&request.id, reply, message).await;
}

/// The reply to `request` and the message for the model: allowed once with `yes`, asked on
/// the terminal when `interactive`, else refused (and said so on stderr).
pub(super) async fn decide(
    request: &PermissionRequest,
    yes: bool,
    interactive: bool,
) -> (PermissionReply, Option<String>) {
    if yes {
        return (PermissionReply::Once, None);
    }
    if interactive {
        return ask_terminal(request.clone()).await;
    }
    eprintln!(
        "denied: {} (not interactive; pass --yes to allow)",
        describe_ask(request)
    );
    (
        PermissionReply::Reject,
        Some(format!(
            "permission `{}` for {:?} needs approval and this run is not interactive; rerun with --yes to allow it, or allow it in the config",
            request.permission, request.patterns
        )),
    )
}

/// Who asks for what, for people: `build › explore asks: bash "ls"` (the agents from the
/// run's root session down to the asking one, then the permission and its patterns).
fn describe_ask(request: &PermissionRequest) -> String {
    let patterns: Vec<String> = request.patterns.iter().map(|p| format!("{p:?}")).collect();
    let what = format!("{} {}", request.permission, patterns.join(", "));
    if request.path.is_empty() {
        what
    } else {
        format!("{} asks: {what}", request.path.join(" › "))
    }
}

/// Asks on the terminal: once, always, or reject.
async fn ask_terminal(request: PermissionRequest) -> (PermissionReply, Option<String>) {
    tokio::task::spawn_blocking(move || {
        eprint!(
            "{} (allow? [y]es once / [a]lways / [n]o): ",
            describe_ask(&request)
        );
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        match line.trim().to_lowercase().as_str() {
            "y" | "yes" => (PermissionReply::Once, None),
            "a" | "always" => (PermissionReply::Always, None),
            _ => (PermissionReply::Reject, None),
        }
    })
    .await
    .unwrap_or((PermissionReply::Reject, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskforce_agents::id::{PermissionId, SessionId};

    fn request(path: &[&str], patterns: &[&str]) -> PermissionRequest {
        let session = SessionId::new();
        PermissionRequest {
            id: PermissionId::new(),
            session_id: session.clone(),
            permission: "bash".into(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            metadata: Default::default(),
            always: Vec::new(),
            tool: None,
            root_session_id: session,
            path: path.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn an_ask_names_the_agents_down_to_the_asker() {
        assert_eq!(
            describe_ask(&request(&["build", "explore"], &["ls"])),
            r#"build › explore asks: bash "ls""#
        );
        assert_eq!(
            describe_ask(&request(&["build"], &["git status", "echo \"hi\""])),
            r#"build asks: bash "git status", "echo \"hi\"""#
        );
        assert_eq!(describe_ask(&request(&[], &["ls"])), r#"bash "ls""#);
    }
}
