//! The MCP fixture server on stdio, for tests that configure a local MCP server (see
//! `taskforce_testkit::mcp`).

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    taskforce_testkit::mcp::serve_stdio().await
}
