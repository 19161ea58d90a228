//! `taskforce` with no subcommand (the TUI on this project, with a runtime of its own) and
//! `taskforce attach URL` (the TUI against a running server).

use clap::Args;
use taskforce_server::{Server, ServerOptions};

use super::{Context, UsageError};
use crate::client::{Client, ClientError};
use crate::tui;

/// Flags of the TUI on this project.
#[derive(Debug, Default, Args)]
pub struct TuiArgs {
    /// Open this session instead of a new one.
    #[arg(long, short, value_name = "ID")]
    pub session: Option<String>,
}

/// `taskforce attach` arguments.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The server, as http://HOST:PORT.
    pub url: String,
    /// Open this session instead of a new one.
    #[arg(long, short, value_name = "ID")]
    pub session: Option<String>,
}

/// A client of the server at `url`, with its password when one is set: taskforce's
/// (`TASKFORCE_SERVER_PASSWORD`, as user `taskforce`), else OpenCode's
/// (`OPENCODE_SERVER_PASSWORD`, as `OPENCODE_SERVER_USERNAME`, by default `opencode`).
pub(super) fn server_client(url: &str) -> Result<Client, ClientError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(password) = var("TASKFORCE_SERVER_PASSWORD") {
        return Client::new(url, Some(password));
    }
    let client = Client::new(url, var("OPENCODE_SERVER_PASSWORD"))?;
    Ok(client.with_user(&var("OPENCODE_SERVER_USERNAME").unwrap_or_else(|| "opencode".into())))
}

/// The keybind overrides of the local configuration.
fn keybinds(context: &Context) -> Vec<(String, String)> {
    context
        .loaded
        .config
        .keybinds
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Runs the TUI against the server at `args.url`.
pub fn attach(context: Option<&Context>, args: AttachArgs) -> anyhow::Result<()> {
    let client = server_client(&args.url).map_err(UsageError::new)?;
    let options = tui::Options {
        session: args.session,
        keybinds: context.map(keybinds).unwrap_or_default(),
        project: None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(tui::run(client, options))
}

/// Runs the TUI on this project with a runtime of its own, served on a private loopback port
/// that only this process knows the password of.
pub fn run(context: &Context, args: TuiArgs) -> anyhow::Result<()> {
    let keybinds = keybinds(context);
    let project = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    context.with_runtime(move |runtime| async move {
        let password = ulid::Ulid::new().to_string();
        let options = ServerOptions {
            hostname: "127.0.0.1".into(),
            port: 0,
            password: Some(password.clone()),
            ..ServerOptions::default()
        };
        let server = Server::bind(runtime, &options).await?;
        let addr = server.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(server.run_until(async move {
            let _ = stopped.await;
        }));
        let client = Client::new(&format!("http://{addr}"), Some(password))?;
        let result = tui::run(
            client,
            tui::Options {
                session: args.session,
                keybinds,
                project: Some(project),
            },
        )
        .await;
        let _ = stop.send(());
        // Open streams end with the runtime; the server is not waited for beyond that.
        serving.abort();
        result
    })
}
