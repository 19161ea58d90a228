//! What the store reported while a benchmark ran: the writer's commits (rows, time) and how
//! long the sessions' batches of saves took to commit, gathered from the runtime's trace
//! events.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// The writer's event for each commit (`rows`, `micros`) and each exclusive write
/// (`exclusive`, `micros`).
const COMMIT: &str = "taskforce_actors::store::commit";
/// A session's event for each batch of its saves committed (`micros`: from its hand-over to the
/// store to its commit).
const SAVE: &str = "taskforce_actors::session::save";

/// Counts gathered from the store's trace events; see [`StoreTrace::install`].
#[derive(Default)]
pub struct StoreTrace {
    batches: AtomicU64,
    rows: AtomicU64,
    batch_micros: AtomicU64,
    exclusive: AtomicU64,
    exclusive_micros: AtomicU64,
    saves: AtomicU64,
    save_micros: AtomicU64,
    save_max: AtomicU64,
    /// Each commit: when it began, how long it took, its rows.
    commits: Mutex<Vec<(Instant, Duration, u64)>>,
}

impl StoreTrace {
    /// Installs the process's trace subscriber, which gathers the store's events from now on.
    pub fn install() -> Arc<StoreTrace> {
        let trace = Arc::new(StoreTrace::default());
        let layer = Gather(trace.clone())
            .with_filter(filter_fn(|m| m.target() == COMMIT || m.target() == SAVE));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::set_global_default(subscriber).expect("no subscriber yet");
        trace
    }

    /// Forgets what was gathered so far.
    pub fn reset(&self) {
        for counter in self.counters() {
            counter.store(0, Ordering::Relaxed);
        }
        self.commits.lock().unwrap().clear();
    }

    /// One line on the writer's commits that began in `from..to`: how long of that window it
    /// was committing (a writer busy all along is what the window waited for), their rows,
    /// and the time a row took.
    pub fn window(&self, from: Instant, to: Instant) -> String {
        let within = self.commits_in(from, to);
        let busy: Duration = within.iter().map(|(_, took, _)| *took).sum();
        let rows: u64 = within.iter().map(|(_, _, rows)| rows).sum();
        format!(
            "the store's writer was committing {:.1} ms of those {:.1} ms ({} commits, {rows} rows, {:.1} µs a row)",
            busy.as_secs_f64() * 1000.0,
            to.saturating_duration_since(from).as_secs_f64() * 1000.0,
            within.len(),
            busy.as_secs_f64() * 1e6 / rows.max(1) as f64,
        )
    }

    /// Each commit that began in `from..to`: its start and length (ms after `from`) and rows.
    pub fn list(&self, from: Instant, to: Instant) -> String {
        self.commits_in(from, to)
            .iter()
            .map(|(began, took, rows)| {
                format!(
                    "{:.1}+{:.1}:{rows}",
                    began.duration_since(from).as_secs_f64() * 1000.0,
                    took.as_secs_f64() * 1000.0
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The commits that began in `from..to`.
    fn commits_in(&self, from: Instant, to: Instant) -> Vec<(Instant, Duration, u64)> {
        let commits = self.commits.lock().unwrap();
        commits
            .iter()
            .filter(|(began, _, _)| *began >= from && *began < to)
            .copied()
            .collect()
    }

    fn counters(&self) -> [&AtomicU64; 8] {
        [
            &self.batches,
            &self.rows,
            &self.batch_micros,
            &self.exclusive,
            &self.exclusive_micros,
            &self.saves,
            &self.save_micros,
            &self.save_max,
        ]
    }

    /// One line: the commits, their rows and time, the exclusive writes, and the sessions'
    /// batches of saves (per child of `n`).
    pub fn summary(&self, n: usize) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let (batches, rows, saves) = (get(&self.batches), get(&self.rows), get(&self.saves));
        format!(
            "store: {batches} commits of {:.0} rows on average ({:.1} ms committing, {:.0} rows per child), {} exclusive writes ({:.1} ms); {saves} batches of sessions' saves ({:.1} per child), each committed in {:.2} ms on average, {:.1} ms at most",
            rows as f64 / batches.max(1) as f64,
            get(&self.batch_micros) as f64 / 1000.0,
            rows as f64 / n as f64,
            get(&self.exclusive),
            get(&self.exclusive_micros) as f64 / 1000.0,
            saves as f64 / n as f64,
            get(&self.save_micros) as f64 / 1000.0 / saves.max(1) as f64,
            get(&self.save_max) as f64 / 1000.0,
        )
    }
}

/// The layer that feeds a [`StoreTrace`].
struct Gather(Arc<StoreTrace>);

impl<S: tracing::Subscriber> Layer<S> for Gather {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let t = &self.0;
        if event.metadata().target() == SAVE {
            t.saves.fetch_add(1, Ordering::Relaxed);
            t.save_micros.fetch_add(fields.micros, Ordering::Relaxed);
            t.save_max.fetch_max(fields.micros, Ordering::Relaxed);
        } else if fields.exclusive {
            t.exclusive.fetch_add(1, Ordering::Relaxed);
            t.exclusive_micros
                .fetch_add(fields.micros, Ordering::Relaxed);
        } else {
            t.batches.fetch_add(1, Ordering::Relaxed);
            t.rows.fetch_add(fields.rows, Ordering::Relaxed);
            t.batch_micros.fetch_add(fields.micros, Ordering::Relaxed);
            let took = Duration::from_micros(fields.micros);
            let began = Instant::now()
                .checked_sub(took)
                .unwrap_or_else(Instant::now);
            t.commits.lock().unwrap().push((began, took, fields.rows));
        }
    }
}

/// The fields of one event.
#[derive(Default)]
struct Fields {
    rows: u64,
    micros: u64,
    exclusive: bool,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "rows" => self.rows = value,
            "micros" => self.micros = value,
            _ => {}
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "exclusive" {
            self.exclusive = value;
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}
