mod agents_cli;
mod openapi_doc;
mod permission_cli;
mod run_cli;
mod sdk;
mod secrets_cli;
mod server;
mod support;
