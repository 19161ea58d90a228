mod agents_cli;
mod permission_cli;
mod support;
