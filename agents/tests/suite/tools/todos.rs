//! The todo tools write and read through the host.

use serde_json::{Value, json};

use super::Env;

#[tokio::test]
async fn todowrite_and_todoread_go_through_the_host() {
    let env = Env::new();
    let todos = json!([
        {"content": "Write tests", "status": "in_progress", "priority": "high", "id": "1"},
        {"content": "Ship", "status": "pending", "priority": "low", "id": "2"},
        {"content": "Plan", "status": "completed", "priority": "medium", "id": "3"}
    ]);
    let out = env.run("todowrite", json!({"todos": todos})).await.unwrap();
    assert_eq!(out.title, "2 todos");
    assert_eq!(serde_json::from_str::<Value>(&out.output).unwrap(), todos);
    assert_eq!(env.host.todos.lock().unwrap().len(), 3);
    let out = env.run("todoread", json!({})).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&out.output).unwrap(), todos);
    let asks: Vec<String> = env.asks().into_iter().map(|a| a.permission).collect();
    assert_eq!(asks, vec!["todowrite", "todoread"]);
}
