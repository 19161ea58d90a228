//! The terminal UI: a conversation view of any session of the tree, navigation between a
//! session, its children and its parent, the tree panel, asks, and the prompt editor. It talks
//! to a runtime only through the HTTP/SSE API, so it drives `taskforce serve`, an embedded
//! server, or any OpenCode-compatible server alike.

mod app;
mod editor;
mod effects;
#[cfg(test)]
mod fixtures;
mod history;
mod keys;
mod state;
mod terminal;
mod view;

use std::time::{Duration, Instant};

use crossterm::event::{Event as TermEvent, EventStream, KeyEventKind};
use futures::StreamExt;
use serde_json::Value;

use crate::client::{Client, ServerEvent};
use app::App;
use effects::{Done, Effects};
use keys::Keybinds;
use view::theme::Theme;

/// How the TUI starts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Open this session instead of a new one.
    pub session: Option<String>,
    /// Keybind overrides from the local configuration (the server's come first).
    pub keybinds: Vec<(String, String)>,
    /// The project's directory, when known here (else the server is asked).
    pub project: Option<String>,
}

/// The shortest time between two frames while events stream in.
const FRAME: Duration = Duration::from_millis(16);

/// Runs the TUI against the server `client` reaches until the user quits.
pub async fn run(client: Client, options: Options) -> anyhow::Result<()> {
    let mut app = start(&client, &options).await?;
    let mut effects = Effects::new(client.clone());
    let mut events = client.events();
    let mut screen = terminal::Screen::enter()?;
    let mut input = EventStream::new();
    let mut signals = crate::cli::signals::StopSignals::new()?;
    if let Some(session) = options.session.clone() {
        for effect in app.open(session) {
            effects.run(effect);
        }
    }
    let mut tick = 0usize;
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_draw = Instant::now() - FRAME;
    let mut dirty = true;
    let mut files: Vec<String> = Vec::new();
    while !app.quit {
        if dirty && last_draw.elapsed() >= FRAME {
            let now = now_ms();
            screen
                .terminal
                .draw(|frame| view::draw(frame, &app, now, tick))?;
            last_draw = Instant::now();
            dirty = false;
        }
        tokio::select! {
            term = input.next() => match term {
                Some(Ok(TermEvent::Key(key))) if key.kind != KeyEventKind::Release => {
                    for effect in app.on_key(&key, &files) {
                        remember(&effect);
                        effects.run(effect);
                    }
                    dirty = true;
                }
                Some(Ok(TermEvent::Paste(text))) => {
                    app.on_paste(&text);
                    dirty = true;
                }
                Some(Ok(TermEvent::Resize(..))) => {
                    screen.terminal.autoresize()?;
                    dirty = true;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            server = events.next() => match server {
                Some(ServerEvent::Event(event)) => {
                    for effect in app.apply(&event) {
                        effects.run(effect);
                    }
                    dirty = true;
                }
                Some(ServerEvent::Connected) => {
                    if !app.connected {
                        app.connected = true;
                        // Whatever happened while the stream was closed.
                        effects.run(app::Effect::ListSessions);
                        if let Some(current) = app.current.clone() {
                            effects.run(app::Effect::Load(current));
                        }
                    }
                    dirty = true;
                }
                Some(ServerEvent::Disconnected(cause)) => {
                    app.connected = false;
                    tracing::debug!("event stream closed: {cause}");
                    dirty = true;
                }
                None => break,
            },
            done = effects.next() => {
                if let Some(done) = done {
                    if let Done::Files(query, found) = &done {
                        // Answers of older queries (typed past since) are dropped.
                        if app.completing_mention().as_deref() == Some(query.as_str()) {
                            files.clone_from(found);
                            app.refresh_completion(&files);
                        }
                    } else {
                        for effect in effects::apply(&mut app, done) {
                            effects.run(effect);
                        }
                    }
                    dirty = true;
                }
            },
            _ = ticker.tick() => {
                app.tick();
                tick = tick.wrapping_add(1);
                // The spinner and elapsed times move while something runs.
                dirty |= app.tree_busy() || app.leader.is_some() || app.notice().is_some();
            },
            _ = signals.recv() => break,
            () = tokio::time::sleep(FRAME), if dirty => {}
        }
    }
    drop(screen);
    Ok(())
}

/// Reads what the TUI needs before it draws: sessions, agents, commands, configuration.
async fn start(client: &Client, options: &Options) -> anyhow::Result<App> {
    client.health().await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let config = client.config().await.unwrap_or(Value::Null);
    // The server's keybinds, where this TUI can read them (another server may know actions
    // or keys this one does not).
    let mut overrides: Vec<(String, String)> = config
        .get("keybinds")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .filter(|(k, v)| Keybinds::new(&[(k.clone(), v.clone())]).is_ok())
                .collect()
        })
        .unwrap_or_default();
    overrides.extend(options.keybinds.iter().cloned());
    let keys = Keybinds::new(&overrides)?;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let project = match options.project.clone() {
        Some(project) => project,
        None => client
            .project_directory()
            .await
            .unwrap_or_else(|| client.base().to_string()),
    };
    let history = history::path(|k| std::env::var(k).ok())
        .map(|p| history::load(&p))
        .unwrap_or_default();
    let mut app = App::new(project, keys, Theme::new(no_color), history);
    app.set_config(&config);
    if let Ok(agents) = client.agents().await {
        app.set_agents(&agents);
    }
    let can_undo = client.can_revert().await;
    if let Ok(commands) = client.commands().await {
        app.set_commands(&commands, can_undo);
    }
    for session in client.sessions().await? {
        app.mirror.put_session(session);
    }
    if let Ok(asks) = client.permissions().await {
        app.mirror.put_asks(asks);
    }
    if let Ok(questions) = client.questions().await {
        app.mirror.put_questions(questions);
    }
    Ok(app)
}

/// Keeps a sent prompt or command in the history file.
fn remember(effect: &app::Effect) {
    let text = match effect {
        app::Effect::Prompt { text, .. } => text.clone(),
        app::Effect::Command {
            name, arguments, ..
        } if arguments.is_empty() => format!("/{name}"),
        app::Effect::Command {
            name, arguments, ..
        } => format!("/{name} {arguments}"),
        _ => return,
    };
    if let Some(path) = history::path(|k| std::env::var(k).ok()) {
        history::append(&path, &text);
    }
}

/// The wall clock in epoch milliseconds.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
