mod agents_cli;
mod config_cli;
mod openapi_doc;
mod permission_cli;
mod run_cli;
mod sdk;
mod server;
mod support;
