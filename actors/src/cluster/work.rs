//! Placing child runs on other nodes through the cluster's JetStream work queue.
//!
//! A node whose task call finds it full hands the child's run ([`PlacedWork`]) to the stream
//! `PREFIX_WORK` (work-queue retention: each item goes to one taker). Every node takes items
//! from it through one shared durable pull consumer, only while it has room that none of its
//! own calls wants, and only as many as it has room for; an item is acknowledged (and the
//! acknowledgement confirmed) before its run starts, so no two nodes run it. The taking node
//! reports to the calling node on `PREFIX.placed.<calling node>` (stream `PREFIX_PLACED`,
//! which keeps reports while the caller reconnects): that it started it, then how it ended.
//! The caller reads the child's answer from the shared store.
//!
//! Cancelling a placed run is a message on `PREFIX.cancel` to every node: the node running it
//! cancels it, and a node that takes it later runs nothing (cancelled ids are remembered for a
//! while). A caller whose child's node is lost ends the call with an error naming the node; a
//! run whose caller's node is lost is cancelled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use async_trait::async_trait;
use dashmap::DashMap;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use taskforce_agents::id::{MessageId, SessionId};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{ClusterError, Names};
use crate::subagent::{PlacedEnd, PlacedWork, Placement, Share, Subagents};

/// How long one wait for work lasts before the taker asks again.
const TAKE_WAIT: Duration = Duration::from_secs(30);
/// How long an item taken but not yet acknowledged stays with its taker.
const ACK_WAIT: Duration = Duration::from_secs(5);
/// How long reports to a calling node are kept for it.
const REPORTS_KEPT: Duration = Duration::from_secs(60 * 60);
/// How long a cancelled id is remembered for work not taken yet.
const CANCEL_KEPT: Duration = Duration::from_secs(10 * 60);

/// What the taking node tells the calling node about a placed child's run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Report {
    /// Node `node` started the run.
    Started { child: SessionId, node: String },
    /// The run ended on node `node`.
    Ended {
        child: SessionId,
        node: String,
        end: Ended,
    },
}

/// How a placed run ended, as reported (the answer itself is in the store).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum Ended {
    /// It answered with this message.
    Answered { message: MessageId },
    /// It was cancelled first.
    Cancelled,
    /// It failed.
    Failed { error: String },
}

/// A cancel sent to every node.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Cancel {
    session: SessionId,
    /// A placed run's caller gave up on it: a node that takes its work later runs nothing.
    #[serde(default)]
    placed: bool,
}

/// Cancels the tree of a session if it runs on this node.
pub(crate) type CancelHere = Box<dyn Fn(&SessionId) + Send + Sync>;

/// Tells whether a node's lease has lapsed: resolves once `node` is known to be gone.
pub(crate) type LostWatch = Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>;

/// This node's side of the work queue: placing its calls' children, taking others' work.
pub(crate) struct WorkQueue {
    client: async_nats::Client,
    js: jetstream::Context,
    names: Names,
    node: String,
    subagents: Arc<Subagents>,
    lost: LostWatch,
    /// Calls of this node waiting for their placed child, by child.
    waiting: DashMap<SessionId, mpsc::UnboundedSender<Report>>,
    /// Placed runs this node runs, by child.
    running: DashMap<SessionId, CancellationToken>,
    /// Cancels a session's tree if it runs on this node (a cancel from another node).
    cancel_here: CancelHere,
    /// Recently cancelled ids, with when.
    cancelled: Mutex<HashMap<SessionId, Instant>>,
    /// Stops the queue's tasks.
    stop: CancellationToken,
}

impl WorkQueue {
    /// Sets up the streams and starts reading cancels and reports for `node`, and taking work
    /// when `takes_work` (its store is shared with the other nodes).
    pub(crate) async fn start(
        client: async_nats::Client,
        names: &Names,
        node: &str,
        subagents: Arc<Subagents>,
        lost: LostWatch,
        cancel_here: CancelHere,
        takes_work: bool,
    ) -> Result<Arc<WorkQueue>, ClusterError> {
        let js = jetstream::new(client.clone());
        let names = names.clone();
        let work = js
            .get_or_create_stream(stream::Config {
                name: names.work_stream(),
                subjects: vec![names.work_subject()],
                retention: stream::RetentionPolicy::WorkQueue,
                ..Default::default()
            })
            .await
            .map_err(|e| ClusterError::jetstream("the work stream", e))?;
        let placed = js
            .get_or_create_stream(stream::Config {
                name: names.placed_stream(),
                subjects: vec![names.placed_subjects()],
                max_age: REPORTS_KEPT,
                ..Default::default()
            })
            .await
            .map_err(|e| ClusterError::jetstream("the reports stream", e))?;
        let takers = work
            .get_or_create_consumer(
                "takers",
                consumer::pull::Config {
                    durable_name: Some("takers".into()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: ACK_WAIT,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| ClusterError::jetstream("the work consumer", e))?;
        let reports = placed
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: names.placed_subject(node),
                deliver_policy: consumer::DeliverPolicy::New,
                ..Default::default()
            })
            .await
            .map_err(|e| ClusterError::jetstream("the reports consumer", e))?
            .messages()
            .await
            .map_err(|e| ClusterError::jetstream("the reports consumer", e))?;
        let cancels = client
            .subscribe(names.cancel_subject())
            .await
            .map_err(|e| ClusterError::jetstream("the cancel subject", e))?;
        let queue = Arc::new(WorkQueue {
            client,
            js,
            names,
            node: node.to_string(),
            subagents,
            lost,
            cancel_here,
            waiting: DashMap::new(),
            running: DashMap::new(),
            cancelled: Mutex::default(),
            stop: CancellationToken::new(),
        });
        if takes_work {
            tokio::spawn(queue.clone().take(takers));
        }
        tokio::spawn(queue.clone().read_reports(reports));
        tokio::spawn(queue.clone().read_cancels(cancels));
        Ok(queue)
    }

    /// Stops taking work and reading reports (placed runs under way go on).
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }

    /// Tells every node to cancel the placed run of `session`, also if it is not taken yet.
    async fn cancel_placed(&self, session: &SessionId) {
        send(&self.client, &self.names, session, true).await;
    }

    /// Takes work while this node has room: as many items as it has room for at a time.
    async fn take(self: Arc<Self>, takers: consumer::Consumer<consumer::pull::Config>) {
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = self.subagents.room() => {}
            }
            let want = self.subagents.free_room().max(1);
            let batch = takers
                .batch()
                .max_messages(want)
                .expires(TAKE_WAIT)
                .messages();
            let mut batch = tokio::select! {
                () = self.stop.cancelled() => return,
                batch = batch => match batch {
                    Ok(batch) => batch,
                    Err(e) => {
                        tracing::warn!("cannot ask the cluster for work: {e}");
                        // The connection reconnects on its own; ask again a moment later
                        // rather than spin while it is away.
                        tokio::select! {
                            () = self.stop.cancelled() => return,
                            () = tokio::time::sleep(super::RETRY_AFTER) => {}
                        }
                        continue;
                    }
                },
            };
            while let Some(message) = tokio::select! {
                () = self.stop.cancelled() => None,
                m = batch.next() => m,
            } {
                match message {
                    Ok(message) => self.clone().take_one(message).await,
                    Err(e) => tracing::warn!("reading work from the cluster failed: {e}"),
                }
            }
        }
    }

    /// Takes one item if this node still has room (else hands it back for another): the room
    /// is taken at once, the rest goes on in a task of its own, so that the items of a batch
    /// are confirmed and started side by side.
    async fn take_one(self: Arc<Self>, message: jetstream::Message) {
        let work: PlacedWork = match serde_json::from_slice(&message.payload) {
            Ok(work) => work,
            Err(e) => {
                tracing::error!("dropping unreadable work from the cluster: {e}");
                let _ = message.ack_with(jetstream::AckKind::Term).await;
                return;
            }
        };
        let Some(share) = self.subagents.try_share() else {
            // Room went to this node's own calls meanwhile: another node takes it.
            let _ = message
                .ack_with(jetstream::AckKind::Nak(Some(Duration::from_millis(20))))
                .await;
            return;
        };
        tokio::spawn(self.start_one(message, work, share));
    }

    /// Confirms taking `work` and runs it in `share`, reporting to its caller.
    async fn start_one(
        self: Arc<Self>,
        message: jetstream::Message,
        work: PlacedWork,
        share: Share,
    ) {
        if let Err(e) = message.double_ack().await {
            // Not confirmed: the item may go to another node, so it does not run here.
            tracing::warn!(child = %work.session.id, "cannot confirm taking work: {e}");
            return;
        }
        let child = work.session.id.clone();
        let origin = work.origin.clone();
        if self.was_cancelled(&child) {
            self.report(
                &origin,
                Report::Ended {
                    child,
                    node: self.node.clone(),
                    end: Ended::Cancelled,
                },
            )
            .await;
            return;
        }
        let token = CancellationToken::new();
        self.running.insert(child.clone(), token.clone());
        self.report(
            &origin,
            Report::Started {
                child: child.clone(),
                node: self.node.clone(),
            },
        )
        .await;
        // A run whose caller's node is lost has nobody left to answer: it stops.
        let origin_lost = (self.lost)(origin.clone());
        let watched = token.clone();
        let run_over = CancellationToken::new();
        let over = run_over.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = origin_lost => watched.cancel(),
                () = over.cancelled() => {}
            }
        });
        tokio::spawn(async move {
            let end = self.subagents.run_taken(work, share, token).await;
            run_over.cancel();
            self.running.remove(&child);
            let end = match end {
                PlacedEnd::Answered(message) => Ended::Answered {
                    message: message.info.id().clone(),
                },
                PlacedEnd::Cancelled => Ended::Cancelled,
                PlacedEnd::Failed(error) => Ended::Failed { error },
            };
            self.report(
                &origin,
                Report::Ended {
                    child,
                    node: self.node.clone(),
                    end,
                },
            )
            .await;
        });
    }

    /// Sends `report` to node `origin`, stored until it reads it.
    async fn report(&self, origin: &str, report: Report) {
        let body = match serde_json::to_vec(&report) {
            Ok(body) => body,
            Err(e) => return tracing::error!("cannot encode a report: {e}"),
        };
        let sent = match self
            .js
            .publish(self.names.placed_subject(origin), body.into())
            .await
        {
            Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = sent {
            tracing::warn!(node = origin, "cannot report to the calling node: {e}");
        }
    }

    /// Hands reports to the calls waiting for them.
    async fn read_reports(self: Arc<Self>, mut reports: consumer::pull::Ordered) {
        loop {
            let next = tokio::select! {
                () = self.stop.cancelled() => return,
                next = reports.next() => next,
            };
            match next {
                None => return,
                Some(Err(e)) => tracing::warn!("reading reports from the cluster failed: {e}"),
                Some(Ok(message)) => match serde_json::from_slice::<Report>(&message.payload) {
                    Ok(report) => {
                        let child = match &report {
                            Report::Started { child, .. } | Report::Ended { child, .. } => child,
                        };
                        if let Some(call) = self.waiting.get(child) {
                            let _ = call.send(report);
                        }
                    }
                    Err(e) => tracing::warn!("dropping an unreadable report: {e}"),
                },
            }
        }
    }

    /// Cancels runs of this node when any node asks.
    async fn read_cancels(self: Arc<Self>, mut cancels: async_nats::Subscriber) {
        loop {
            let next = tokio::select! {
                () = self.stop.cancelled() => return,
                next = cancels.next() => next,
            };
            let Some(message) = next else { return };
            let Ok(Cancel { session, placed }) = serde_json::from_slice(&message.payload) else {
                tracing::warn!("dropping an unreadable cancel");
                continue;
            };
            if placed {
                self.remember_cancelled(&session);
            }
            if let Some(token) = self.running.get(&session) {
                token.cancel();
            }
            (self.cancel_here)(&session);
        }
    }

    fn remember_cancelled(&self, session: &SessionId) {
        let now = Instant::now();
        let mut cancelled = self
            .cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        cancelled.retain(|_, at| now.duration_since(*at) < CANCEL_KEPT);
        cancelled.insert(session.clone(), now);
    }

    /// Whether the caller of `session`'s placed run gave up on it (forgotten once asked).
    fn was_cancelled(&self, session: &SessionId) -> bool {
        self.cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session)
            .is_some()
    }

    /// Reads the placed child's answer `message` from the shared store.
    async fn answer(&self, child: &SessionId, message: &MessageId) -> PlacedEnd {
        match self.subagents.stored_answer(child, message).await {
            Ok(Some(answer)) => PlacedEnd::Answered(answer),
            Ok(None) => PlacedEnd::Failed(format!(
                "subagent session {child} answered elsewhere but its answer is not in the store"
            )),
            Err(e) => PlacedEnd::Failed(format!(
                "cannot read the answer of subagent session {child}: {e}"
            )),
        }
    }
}

#[async_trait]
impl Placement for WorkQueue {
    async fn place(&self, work: PlacedWork, abort: CancellationToken) -> PlacedEnd {
        let child = work.session.id.clone();
        let (tx, mut reports) = mpsc::unbounded_channel();
        self.waiting.insert(child.clone(), tx);
        let _waiting = Unwait(&self.waiting, &child);
        let body = match serde_json::to_vec(&work) {
            Ok(body) => body,
            Err(e) => return PlacedEnd::Failed(format!("cannot encode subagent work: {e}")),
        };
        let queued = match self
            .js
            .publish(self.names.work_subject(), body.into())
            .await
        {
            Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = queued {
            return PlacedEnd::Failed(format!(
                "cannot hand subagent session {child} to the cluster: {e}"
            ));
        }
        let mut runner: Option<String> = None;
        let mut lost: Option<BoxFuture<'static, ()>> = None;
        let mut cancel_sent = false;
        loop {
            tokio::select! {
                () = abort.cancelled(), if !cancel_sent => {
                    cancel_sent = true;
                    self.cancel_placed(&child).await;
                }
                () = async { match &mut lost { Some(l) => l.await, None => std::future::pending().await } } => {
                    let node = runner.take().unwrap_or_default();
                    return PlacedEnd::Failed(format!(
                        "node {node} was lost while it ran subagent session {child}"
                    ));
                }
                report = reports.recv() => match report {
                    None => return PlacedEnd::Failed("the cluster connection stopped".into()),
                    Some(Report::Started { node, .. }) => {
                        lost = Some((self.lost)(node.clone()));
                        runner = Some(node);
                    }
                    Some(Report::Ended { end, .. }) => {
                        return match end {
                            Ended::Answered { message } => self.answer(&child, &message).await,
                            Ended::Cancelled => PlacedEnd::Cancelled,
                            Ended::Failed { error } => PlacedEnd::Failed(error),
                        };
                    }
                },
            }
        }
    }
}

/// Removes a call from the waiting calls when it ends.
struct Unwait<'a>(
    &'a DashMap<SessionId, mpsc::UnboundedSender<Report>>,
    &'a SessionId,
);

impl Drop for Unwait<'_> {
    fn drop(&mut self) {
        self.0.remove(self.1);
    }
}

/// Tells every node to cancel what it runs of `session`'s tree.
pub(crate) async fn send_cancel(client: &async_nats::Client, names: &Names, session: &SessionId) {
    send(client, names, session, false).await;
}

async fn send(client: &async_nats::Client, names: &Names, session: &SessionId, placed: bool) {
    let body = serde_json::to_vec(&Cancel {
        session: session.clone(),
        placed,
    })
    .unwrap_or_default();
    if let Err(e) = client.publish(names.cancel_subject(), body.into()).await {
        tracing::warn!(session = %session, "cannot send a cancel to the cluster: {e}");
    }
}
