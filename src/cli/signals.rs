//! The signals that stop a command cleanly: SIGINT (Ctrl-C) and SIGTERM.

use std::time::Duration;

/// How long a stopping command gives its runtime to cancel its runs, commit their end and
/// release its lock (the whole stop stays within 5 s of the signal).
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// A signal that asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl StopSignal {
    /// The exit status of a command it stopped: 128 plus the signal's number.
    pub fn exit_code(self) -> u8 {
        match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
        }
    }

    /// What it did to a run, for messages: `interrupted` or `terminated`.
    pub fn verb(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "interrupted",
            StopSignal::Terminate => "terminated",
        }
    }

    /// Its name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }
}

/// Listens for the stop signals from the moment it is made (they no longer end the process by
/// themselves).
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Starts listening; must be called inside a tokio runtime.
    pub fn new() -> std::io::Result<StopSignals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(StopSignals {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(StopSignals {})
        }
    }

    /// The next stop signal.
    pub async fn recv(&mut self) -> StopSignal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => StopSignal::Interrupt,
                _ = self.terminate.recv() => StopSignal::Terminate,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            StopSignal::Interrupt
        }
    }
}
