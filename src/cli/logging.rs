//! Log lines on stderr, with every credential of the loaded configuration (provider keys,
//! header values, URL credentials) and any credential inside a URL replaced by `[redacted]`,
//! whichever crate wrote the line.

use std::io::Write;
use std::sync::{Arc, PoisonError, RwLock};

use taskforce_agents::config::redact::Redactor;
use tracing_subscriber::fmt::MakeWriter;

/// The credentials hidden from log lines, once the configuration is loaded.
static REDACTOR: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// Logs go to stderr: warnings by default, `-v` debug, `-vv` trace; `RUST_LOG` overrides.
pub fn init(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    // Colours only on a terminal, and not when `NO_COLOR` is set.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Scrubbed::new(std::io::stderr, current))
        .with_ansi(ansi)
        .init();
}

/// Logs go to the file at `path` (appended) instead of stderr, for the TUI, which owns the
/// terminal: warnings by default, `-v` debug, `-vv` trace; `RUST_LOG` overrides. Nothing is
/// logged when the file cannot be opened.
pub fn init_file(verbose: u8, path: &std::path::Path) {
    let level = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Scrubbed::new(std::sync::Mutex::new(file), current))
        .with_ansi(false)
        .init();
}

/// Hides `secrets` from every later log line and from [`redact`].
pub fn protect(secrets: Vec<String>) {
    let redactor = Arc::new(Redactor::new(secrets));
    *REDACTOR.write().unwrap_or_else(PoisonError::into_inner) = Some(redactor);
}

/// `text` without the protected secrets or URL credentials (for messages printed directly).
pub fn redact(text: &str) -> String {
    current().redact(text).into_owned()
}

fn current() -> Arc<Redactor> {
    REDACTOR
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or_default()
}

/// A writer maker whose lines are redacted before they reach `inner`.
struct Scrubbed<M> {
    inner: M,
    redactor: fn() -> Arc<Redactor>,
}

impl<M> Scrubbed<M> {
    fn new(inner: M, redactor: fn() -> Arc<Redactor>) -> Self {
        Scrubbed { inner, redactor }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Scrubbed<M> {
    type Writer = Line<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Line {
            inner: self.inner.make_writer(),
            redactor: self.redactor,
            buffer: Vec::new(),
        }
    }
}

/// One log event, collected whole and redacted when dropped (a secret split across two
/// writes is still found).
struct Line<W: Write> {
    inner: W,
    redactor: fn() -> Arc<Redactor>,
    buffer: Vec<u8>,
}

impl<W: Write> Write for Line<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for Line<W> {
    fn drop(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.buffer);
        let redacted = (self.redactor)().redact(&text).into_owned();
        // Nowhere to report a failed log write.
        let _ = self.inner.write_all(redacted.as_bytes());
        let _ = self.inner.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A shared buffer the subscriber writes into.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn secrets() -> Arc<Redactor> {
        Arc::new(Redactor::new(["sk-live-123456", "hdr-value-987"]))
    }

    #[test]
    fn log_lines_show_no_key_header_value_or_url_credential() {
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(Scrubbed::new(move || sink.clone(), secrets))
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(key = "sk-live-123456", "calling with hdr-value-987");
            tracing::error!("cannot reach https://alice:pa55word@proxy.example/v1/chat");
            tracing::info!("an ordinary line");
        });
        let logged = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        for secret in ["sk-live-123456", "hdr-value-987", "pa55word", "alice"] {
            assert!(!logged.contains(secret), "{secret} in {logged}");
        }
        assert!(
            logged.contains("https://[redacted]@proxy.example/v1/chat"),
            "{logged}"
        );
        assert!(logged.contains("an ordinary line"), "{logged}");
        assert_eq!(logged.lines().count(), 3, "{logged}");
    }
}
