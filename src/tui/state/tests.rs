use std::sync::Arc;

use serde_json::json;
use taskforce_actors::bus::{Event, SessionStatus};

use super::Mirror;
use crate::tui::fixtures::{assistant, events, part, session, task_call, user};

fn tree() -> Mirror {
    let mut m = Mirror::default();
    m.put_session(session("ses_root", None, "root"));
    m.put_session(session("ses_a", Some("ses_root"), "a"));
    m.put_session(session("ses_b", Some("ses_root"), "b"));
    m.put_session(session("ses_a1", Some("ses_a"), "a1"));
    for id in ["ses_root", "ses_a", "ses_b", "ses_a1"] {
        m.put_messages(id, Vec::new());
    }
    m
}

#[test]
fn streamed_deltas_grow_the_text_of_their_part() {
    let mut m = tree();
    for e in events(
        assistant("ses_root", "msg_2", "build", 0.0),
        vec![part(
            "ses_root",
            "msg_2",
            "prt_1",
            json!({"type": "text", "text": "Hel"}),
        )],
    ) {
        m.apply(&e);
    }
    m.apply(&Event::PartDelta {
        session_id: "ses_root".parse().unwrap(),
        message_id: "msg_2".parse().unwrap(),
        part_id: "prt_1".parse().unwrap(),
        field: "text".into(),
        delta: "lo".into(),
    });
    let view = m.session("ses_root").unwrap();
    let text = match &view.messages[0].parts[0].kind {
        taskforce_agents::model::PartKind::Text(t) => t.text.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(text, "Hello");
}

#[test]
fn messages_and_parts_keep_id_order_whatever_order_they_arrive_in() {
    let mut m = tree();
    for e in events(assistant("ses_root", "msg_3", "build", 0.0), Vec::new()) {
        m.apply(&e);
    }
    for e in events(user("ses_root", "msg_1"), Vec::new()) {
        m.apply(&e);
    }
    let ids: Vec<String> = m
        .session("ses_root")
        .unwrap()
        .messages
        .iter()
        .map(|m| m.info.id().to_string())
        .collect();
    assert_eq!(ids, ["msg_1", "msg_3"]);
}

#[test]
fn a_load_keeps_what_events_brought_meanwhile() {
    let mut m = tree();
    for e in events(
        assistant("ses_a", "msg_2", "explore", 0.0),
        vec![part(
            "ses_a",
            "msg_2",
            "prt_1",
            json!({"type": "text", "text": "longer text"}),
        )],
    ) {
        m.apply(&e);
    }
    let stale = taskforce_actors::store::MessageWithParts {
        info: Arc::new(assistant("ses_a", "msg_2", "explore", 0.0)),
        parts: vec![Arc::new(part(
            "ses_a",
            "msg_2",
            "prt_1",
            json!({"type": "text", "text": "lon"}),
        ))],
    };
    m.put_messages("ses_a", vec![stale]);
    let view = m.session("ses_a").unwrap();
    assert!(
        matches!(&view.messages[0].parts[0].kind, taskforce_agents::model::PartKind::Text(t) if t.text == "longer text")
    );
}

#[test]
fn the_child_keys_cycle_through_a_parent_and_its_children_and_wrap() {
    let m = tree();
    assert_eq!(m.cycle_child("ses_root", true).as_deref(), Some("ses_a"));
    assert_eq!(m.cycle_child("ses_root", false).as_deref(), Some("ses_b"));
    assert_eq!(m.cycle_child("ses_a", true).as_deref(), Some("ses_b"));
    assert_eq!(m.cycle_child("ses_b", true).as_deref(), Some("ses_root"));
    // In a child with children of its own, the family is the child's parent and siblings.
    assert_eq!(m.cycle_child("ses_a1", true).as_deref(), Some("ses_a"));
    assert_eq!(m.parent_of("ses_a1").as_deref(), Some("ses_a"));
    assert_eq!(m.parent_of("ses_root"), None);
    assert_eq!(m.root_of("ses_a1"), "ses_root");
}

#[test]
fn the_tree_rolls_costs_up_and_shows_what_runs() {
    let mut m = tree();
    for (s, id, agent, cost) in [
        ("ses_root", "msg_1", "build", 0.5),
        ("ses_a", "msg_2", "explore", 0.25),
        ("ses_a1", "msg_3", "general", 0.125),
    ] {
        for e in events(assistant(s, id, agent, cost), Vec::new()) {
            m.apply(&e);
        }
    }
    for e in events(
        assistant("ses_a1", "msg_4", "general", 0.0),
        vec![part(
            "ses_a1",
            "msg_4",
            "prt_1",
            json!({"type": "tool", "callID": "c", "tool": "bash", "state": {"status": "running", "input": {"command": "ls"}, "time": {"start": 1}}}),
        )],
    ) {
        m.apply(&e);
    }
    m.apply(&Event::SessionStatus {
        session_id: "ses_a1".parse().unwrap(),
        status: SessionStatus::Busy,
    });
    let rows = m.tree_rows("ses_root");
    let summary: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.depth,
                r.node.agent.as_str(),
                r.node.cost,
                r.node.total_cost,
                r.node.busy,
                r.node.tool.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, "build", 0.5, 0.875, false, None::<&str>),
            (1, "explore", 0.25, 0.375, false, None),
            (2, "general", 0.125, 0.125, true, Some("bash")),
            (1, "?", 0.0, 0.0, false, None),
        ]
    );
    assert_eq!(m.agent_path("ses_a1"), ["build", "explore", "general"]);
}

#[test]
fn asks_come_and_go_with_their_events() {
    let mut m = tree();
    let request: taskforce_actors::permission::PermissionRequest = serde_json::from_value(json!({
        "id": "per_1", "sessionID": "ses_a1", "permission": "bash", "patterns": ["rm x"],
        "metadata": {}, "always": ["rm *"], "rootSessionID": "ses_root", "path": ["build", "explore", "general"]
    }))
    .unwrap();
    m.apply(&Event::PermissionAsked(Box::new(request.clone())));
    m.apply(&Event::PermissionAsked(Box::new(request)));
    assert_eq!(m.asks().len(), 1);
    m.apply(&Event::PermissionReplied {
        session_id: "ses_a1".parse().unwrap(),
        request_id: "per_1".parse().unwrap(),
        reply: taskforce_actors::permission::PermissionReply::Once,
    });
    assert!(m.asks().is_empty());
    let _ = task_call("ses_root", "msg_1", "prt_9", "ses_a");
}

#[test]
fn a_deleted_child_leaves_its_parents_children_and_a_busy_grandchild_makes_the_tree_busy() {
    let mut m = tree();
    assert!(!m.any_busy("ses_root"));
    m.apply(&Event::SessionStatus {
        session_id: "ses_a1".parse().unwrap(),
        status: SessionStatus::Busy,
    });
    assert!(m.any_busy("ses_root"));
    assert!(!m.any_busy("ses_b"));
    m.apply(&Event::SessionDeleted {
        info: Arc::new(session("ses_b", Some("ses_root"), "b")),
    });
    let children: Vec<&str> = m
        .children("ses_root")
        .iter()
        .map(|c| c.info.id.as_str())
        .collect();
    assert_eq!(children, ["ses_a"]);
}
