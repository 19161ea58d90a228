mod agents_cli;
mod permission_cli;
mod run_cli;
mod server;
mod support;
