//! The writer task: it owns the one write connection and takes the queued [`Job`]s in order,
//! committing the upserts queued together as one batch (group commit) and running each
//! exclusive write alone; a waiter is answered only after its batch is committed.
//!
//! After a write nobody waits for, it lingers a little for the burst that usually follows, so
//! that the burst is committed in few transactions rather than one by one.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Mutex as AsyncMutex;
use tokio::sync::mpsc;

use crate::store::StoreError;

use super::jobs::{Batched, Job, Values};
use super::unflushed::Unflushed;
use super::upsert::Upsert;
use super::{WriteConn, apply};

/// The most upserts committed in one transaction.
pub(crate) const MAX_BATCH: usize = 1024;

/// The target of the writer's per-commit trace events (rows, microseconds), which the
/// benchmarks gather to tell how the store's time is spent.
const COMMIT_TRACE: &str = "taskforce_actors::store::commit";

/// How long the writer waits for more writes after one nobody waits for, before committing.
pub(crate) const LINGER: Duration = Duration::from_millis(20);

/// The longest the writer lingers in a burst of writes nobody waits for.
pub(crate) const MAX_LINGER: Duration = Duration::from_millis(250);

/// The longest the writer holds back a patient write (see `Job::Patient`): whoever hears of
/// its commit (a session's events follow it) hears at most this much later than at once.
pub(crate) const PATIENCE: Duration = Duration::from_millis(50);

/// Collects the burst that follows a write nobody waits for (a cancelled tree writing its end,
/// streaming text): until no write came in for [`LINGER`], [`MAX_LINGER`] has passed, or the
/// writes are asked for (a job somebody waits for, or a read: `Unflushed::hurry`). Meanwhile the
/// queue is not polled, so writes nobody waits for do not wake the writer one by one; the burst
/// is committed in few transactions, after it rather than in its middle.
async fn linger<C>(
    jobs: &mut mpsc::UnboundedReceiver<Job<C>>,
    buffered: &mut VecDeque<Job<C>>,
    unflushed: &Unflushed,
) {
    let now = tokio::time::Instant::now();
    let mut deadline = now + MAX_LINGER;
    if buffered.iter().any(Job::patient) {
        deadline = deadline.min(now + PATIENCE);
    }
    loop {
        let quiet = tokio::time::Instant::now() + LINGER;
        let hurried = tokio::select! {
            () = tokio::time::sleep_until(quiet.min(deadline)) => false,
            () = unflushed.hurried() => true,
        };
        let mut arrived = false;
        let mut urgent = false;
        while let Ok(job) = jobs.try_recv() {
            urgent |= job.urgent();
            if job.patient() {
                deadline = deadline.min(tokio::time::Instant::now() + PATIENCE);
            }
            buffered.push_back(job);
            arrived = true;
        }
        if hurried || urgent || !arrived || tokio::time::Instant::now() >= deadline {
            return;
        }
    }
}

/// The writer task: owns the write connection and commits queued upserts in batches, one
/// transaction each, answering after the commit; exclusive writes run alone, in queue order.
pub(super) async fn write_batches<C: WriteConn>(
    conn: Arc<AsyncMutex<C>>,
    in_flight: Arc<AtomicUsize>,
    unflushed: Arc<Unflushed>,
    mut jobs: mpsc::UnboundedReceiver<Job<C>>,
) {
    // Jobs taken off the queue and not yet done, in queue order.
    let mut buffered: VecDeque<Job<C>> = VecDeque::new();
    // Jobs are numbered in queue order from 1 (see `Unflushed`): this counts the ones done.
    let mut done: u64 = 0;
    loop {
        if buffered.is_empty() {
            unflushed.set_collecting(true);
            match jobs.recv().await {
                Some(job) => {
                    let urgent = job.urgent();
                    buffered.push_back(job);
                    if !urgent {
                        linger(&mut jobs, &mut buffered, &unflushed).await;
                    }
                }
                None => break,
            }
            unflushed.set_collecting(false);
        }
        let Some(first) = buffered.pop_front() else {
            continue;
        };
        // Where the batch's rows sent ahead are.
        let mut ahead: Vec<std::ops::Range<usize>> = Vec::new();
        let mut batch = match first {
            Job::Exclusive(work) => {
                let began = Instant::now();
                work(&mut *conn.lock().await).await;
                tracing::debug!(target: COMMIT_TRACE, exclusive = true, micros = micros(began), "exclusive write");
                in_flight.fetch_sub(1, Ordering::SeqCst);
                done += 1;
                unflushed.committed(done, std::iter::empty());
                continue;
            }
            Job::Batched(b) => vec![b],
            Job::Many(v) | Job::Patient(v) => v,
            Job::Ahead(v) => {
                ahead.push(0..v.len());
                v
            }
            Job::Values(v) => rows_of(*v, &in_flight),
        };
        let mut taken: u64 = 1;
        while batch.len() < MAX_BATCH {
            let next = match buffered.pop_front() {
                Some(job) => job,
                None => match jobs.try_recv() {
                    Ok(job) => job,
                    Err(_) => break,
                },
            };
            match next {
                Job::Exclusive(work) => {
                    buffered.push_front(Job::Exclusive(work));
                    break;
                }
                Job::Batched(b) => batch.push(b),
                Job::Many(v) | Job::Patient(v) => batch.extend(v),
                Job::Ahead(v) => {
                    ahead.push(batch.len()..batch.len() + v.len());
                    batch.extend(v);
                }
                Job::Values(v) => batch.extend(rows_of(*v, &in_flight)),
            }
            taken += 1;
        }
        let writes = batch.len();
        let began = Instant::now();
        let results = {
            let mut conn = conn.lock().await;
            apply(
                &mut *conn,
                batch.iter().map(|b| b.upsert.as_ref()).collect(),
            )
            .await
        };
        tracing::debug!(target: COMMIT_TRACE, rows = writes, micros = micros(began), "batch committed");
        in_flight.fetch_sub(writes, Ordering::SeqCst);
        done += taken;
        // The sessions written without a waiter, or sent ahead of their waiter, are clear once
        // committed (one with newer such writes still queued keeps its entry).
        let mut sent_ahead = vec![false; batch.len()];
        for rows in ahead {
            sent_ahead[rows].fill(true);
        }
        let mut last = None;
        let behind = batch
            .iter()
            .zip(sent_ahead)
            .filter(|(b, ahead)| b.done.is_none() || *ahead)
            .map(|(b, _)| b)
            .filter_map(|b| b.upsert.as_deref().map(Upsert::session))
            // Rows of a session come in runs: look each run up once.
            .filter(|&session| last.replace(session) != Some(session));
        unflushed.committed(done, behind);
        answer(batch, results);
    }
}

/// The rows of `values`; those that could not be encoded no longer count as in flight.
fn rows_of(values: Values, in_flight: &AtomicUsize) -> Vec<Batched> {
    let counted = values.len();
    let rows = values.into_batched();
    in_flight.fetch_sub(counted - rows.len(), Ordering::SeqCst);
    rows
}

/// The microseconds since `began`.
fn micros(began: Instant) -> u64 {
    u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Tells each upsert's waiter how it went; failures nobody waits for are logged.
fn answer(batch: Vec<Batched>, results: Vec<Result<(), StoreError>>) {
    for (Batched { done, .. }, outcome) in batch.into_iter().zip(results) {
        match done {
            Some(done) => {
                let _ = done.send(outcome);
            }
            None => {
                if let Err(e) = outcome {
                    tracing::warn!("a queued write failed: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lingers as the writer does after taking `first`, while a write nobody waits for comes
    /// in every 10 ms (more often than [`LINGER`]); answers how long it lingered.
    async fn linger_in_a_burst(first: Job<()>, hurry_after: Option<Duration>) -> Duration {
        let unflushed = Arc::new(Unflushed::default());
        let (tx, mut jobs) = mpsc::unbounded_channel::<Job<()>>();
        let feeder = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if tx.send(Job::Values(Box::default())).is_err() {
                    break;
                }
            }
        });
        let hurrier = hurry_after.map(|after| {
            let unflushed = unflushed.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                unflushed.hurry();
            })
        });
        let mut buffered = VecDeque::from([first]);
        let began = tokio::time::Instant::now();
        linger(&mut jobs, &mut buffered, &unflushed).await;
        let lingered = began.elapsed();
        feeder.abort();
        if let Some(hurrier) = hurrier {
            hurrier.abort();
        }
        lingered
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_nobody_waits_for_is_collected_until_the_longest_linger() {
        let lingered = linger_in_a_burst(Job::Values(Box::default()), None).await;
        assert!(lingered >= MAX_LINGER, "{lingered:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_patient_write_is_held_back_for_its_burst_no_longer_than_its_patience() {
        let lingered = linger_in_a_burst(Job::Patient(Vec::new()), None).await;
        assert!(
            lingered >= PATIENCE && lingered < PATIENCE + LINGER,
            "{lingered:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_patient_write_asked_for_is_committed_without_waiting_for_its_patience() {
        let asked = Duration::from_millis(15);
        let lingered = linger_in_a_burst(Job::Patient(Vec::new()), Some(asked)).await;
        assert!(lingered >= asked && lingered < PATIENCE, "{lingered:?}");
    }

    #[test]
    fn a_patient_write_is_waited_for_but_not_urgent() {
        let patient: Job<()> = Job::Patient(Vec::new());
        assert!(patient.patient() && !patient.urgent());
        let values: Job<()> = Job::Values(Box::new(Values {
            waiting: Some(Vec::new()),
            ..Values::default()
        }));
        assert!(values.patient() && !values.urgent());
        let nobody: Job<()> = Job::Values(Box::default());
        assert!(!nobody.patient() && !nobody.urgent());
        let (done, _answer) = tokio::sync::oneshot::channel();
        let many: Job<()> = Job::Many(vec![Batched {
            upsert: None,
            done: Some(done),
        }]);
        assert!(many.urgent() && !many.patient());
    }
}
