//! The supervisor: starts session actors on a pool of arbiters, keeps the live tree, and
//! cancels whole subtrees.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use actix::prelude::*;
use indexmap::IndexSet;
use taskforce_agents::id::SessionId;
use tokio_util::sync::CancellationToken;

use crate::core::Core;
use crate::id_map::IdMap;
use crate::session::{Cancel, RunHandle, Seed, SessionActor, Shutdown};

mod places;

pub(crate) use places::Places;

/// Owns the session actors of one runtime.
pub(crate) struct Supervisor {
    core: Arc<Core>,
    live: HashMap<SessionId, LiveSession, foldhash::fast::RandomState>,
    /// Each parent's children in the order they were recorded (a set: a thousand children of
    /// one call are recorded without a search through those before).
    children: HashMap<SessionId, Kids, foldhash::fast::RandomState>,
    arbiters: Vec<Arbiter>,
    /// The arbiters by place, shared with the task calls that move to one of them.
    places: Arc<Places>,
    /// The list a cancel fills with the descendants to check once the root is cancelled, kept
    /// between cancels so that a large tree's list does not grow from nothing each time.
    spare: Vec<(SessionId, RunHandle)>,
    /// How many parent-to-child links `children` holds.
    links: usize,
    /// Children waiting for a running slot before their actor starts (shared with the
    /// subagents, who add and remove them): cancelling their tree cancels these.
    queued: Arc<IdMap<CancellationToken>>,
}

/// A session's children, in the order they were recorded.
type Kids = IndexSet<SessionId, foldhash::fast::RandomState>;

/// A session actor the supervisor started, and where it runs.
struct LiveSession {
    addr: Addr<SessionActor>,
    /// Its loop, to see whether a cancel reached it.
    run: RunHandle,
    /// The index of its arbiter.
    arbiter: usize,
    /// It is a child session: its own children are placed on its arbiter.
    keeps_children: bool,
}

impl Supervisor {
    /// A supervisor placing sessions on `arbiters` new arbiter threads (see [`Activate`]),
    /// each pinned to its own core when `pin` and there are as many cores as arbiters; a
    /// cancelled tree's children in `queued` are cancelled with it.
    pub(crate) fn new(
        core: Arc<Core>,
        arbiters: usize,
        pin: bool,
        queued: Arc<IdMap<CancellationToken>>,
    ) -> Self {
        let count = arbiters.max(1);
        let cores = if pin {
            core_affinity::get_core_ids().filter(|cores| cores.len() == count)
        } else {
            None
        };
        let arbiters: Vec<Arbiter> = (0..count)
            .map(|index| {
                let arbiter = Arbiter::new();
                let home = cores.as_ref().and_then(|cores| cores.get(index).copied());
                arbiter.spawn_fn(move || {
                    Places::mark_here(index);
                    crate::bus::batch_wakes_here();
                    if let Some(home) = home
                        && !core_affinity::set_for_current(home)
                    {
                        tracing::debug!(core = home.id, "could not pin an arbiter thread");
                    }
                });
                arbiter
            })
            .collect();
        Supervisor {
            core,
            live: HashMap::default(),
            children: HashMap::default(),
            places: Places::new(arbiters.iter().map(Arbiter::handle).collect()),
            arbiters,
            spare: Vec::new(),
            links: 0,
            queued,
        }
    }
}

impl Supervisor {
    /// The arbiters sessions run on, by place.
    pub(crate) fn places(&self) -> Arc<Places> {
        self.places.clone()
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn stopped(&mut self, _: &mut Self::Context) {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
    }
}

/// The actor of a session, started from the store if it is not live. The caller has checked
/// that the session exists. Deeper sessions are placed on their parent's arbiter; roots and
/// their children on the arbiter `near` names (the one their task call runs on), else round
/// robin.
#[derive(Message)]
#[rtype(result = "Addr<SessionActor>")]
pub(crate) struct Activate {
    /// The session.
    pub id: SessionId,
    /// Its parent, to record in the live tree (task calls).
    pub parent: Option<SessionId>,
    /// What a newly started actor knows already (ignored when the actor is live).
    pub seed: Option<Seed>,
    /// The place of the arbiter to start it on, unless it goes beside its parent.
    pub near: Option<usize>,
}

impl Handler<Activate> for Supervisor {
    type Result = MessageResult<Activate>;

    fn handle(&mut self, msg: Activate, _: &mut Self::Context) -> Self::Result {
        if let Some(parent) = &msg.parent {
            let kids = self.children.entry(parent.clone()).or_default();
            if kids.insert(msg.id.clone()) {
                self.links += 1;
            }
        }
        if let Some(live) = self.live.get(&msg.id)
            && live.addr.connected()
        {
            if let Some(seed) = &msg.seed {
                live.run.rebound(&seed.session);
            }
            return MessageResult(live.addr.clone());
        }
        // Roots and their children are spread over the arbiters; deeper sessions live on
        // their parent's, so a nested tree's traffic (replies, events, cancels) stays on one
        // thread while the top-level children still run side by side.
        let inherited = msg
            .parent
            .as_ref()
            .and_then(|p| self.live.get(p))
            .filter(|l| l.keeps_children)
            .map(|l| l.arbiter);
        let index = inherited
            .or(msg.near.filter(|&place| place < self.arbiters.len()))
            .unwrap_or_else(|| self.places.next());
        let arbiter = &self.arbiters[index];
        let core = self.core.clone();
        let id = msg.id.clone();
        let run = RunHandle::new(msg.seed);
        let actor_run = run.clone();
        let addr = SessionActor::start_in_arbiter(&arbiter.handle(), move |_| {
            SessionActor::new(id, core, actor_run)
        });
        self.live.insert(
            msg.id,
            LiveSession {
                addr: addr.clone(),
                run,
                arbiter: index,
                keeps_children: msg.parent.is_some(),
            },
        );
        MessageResult(addr)
    }
}

/// Records `id` as a child of `parent` in the live tree before its actor starts (a background
/// child waiting for a slot), so that cancelling the parent's tree reaches it.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Adopt {
    /// The child.
    pub id: SessionId,
    /// Its parent.
    pub parent: SessionId,
}

impl Handler<Adopt> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: Adopt, _: &mut Self::Context) {
        if self.children.entry(msg.parent).or_default().insert(msg.id) {
            self.links += 1;
        }
    }
}

/// Stops the actors of deleted sessions and forgets them.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Forget {
    /// The deleted sessions.
    pub ids: Vec<SessionId>,
}

impl Handler<Forget> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: Forget, _: &mut Self::Context) {
        for id in &msg.ids {
            if let Some(live) = self.live.remove(id) {
                live.addr.do_send(Shutdown);
            }
            self.children.remove(id);
        }
        // A set: each child is looked up once, not compared with every deleted session.
        let deleted: HashSet<&SessionId> = msg.ids.iter().collect();
        for kids in self.children.values_mut() {
            kids.retain(|k| !deleted.contains(k));
        }
        self.links = self.children.values().map(IndexSet::len).sum();
    }
}

/// The actor of a session if it is live.
#[derive(Message)]
#[rtype(result = "Option<Addr<SessionActor>>")]
pub(crate) struct Live {
    /// The session.
    pub id: SessionId,
}

impl Handler<Live> for Supervisor {
    type Result = Option<Addr<SessionActor>>;

    fn handle(&mut self, msg: Live, _: &mut Self::Context) -> Self::Result {
        self.live
            .get(&msg.id)
            .filter(|l| l.addr.connected())
            .map(|l| l.addr.clone())
    }
}

/// Cancels a session and every live descendant; answers how many sessions were told.
#[derive(Message)]
#[rtype(result = "usize")]
pub(crate) struct CancelTree {
    /// The subtree's root.
    pub id: SessionId,
}

impl Handler<CancelTree> for Supervisor {
    type Result = usize;

    fn handle(&mut self, msg: CancelTree, ctx: &mut Self::Context) -> usize {
        // The root's loop is cancelled first, before the tree is walked: most descendants'
        // loops hang off its token (a task call's child runs under the call's) and end with it,
        // with no message each.
        let root = self.live.get(&msg.id).map(|l| l.addr.send(Cancel));
        // Children waiting for a running slot are rare: their map is only searched when some are.
        let any_queued = !self.queued.is_empty();
        let mut told = 0;
        let mut descendants = std::mem::take(&mut self.spare);
        // Breadth first, parents before their children (in the order the arbiters end them),
        // in a list sized like the last walk's (the kept list's room). A session continued by
        // one of its own descendants is listed below it too: the walk lists no more sessions
        // than the tree has links, so such a loop cannot hold it forever.
        let limit = self.links + 1;
        let mut order: Vec<&SessionId> =
            Vec::with_capacity((descendants.capacity() + 1).min(limit));
        order.push(&msg.id);
        let mut next = 0;
        while let Some(&id) = order.get(next) {
            next += 1;
            if let Some(kids) = self.children.get(id) {
                let room = limit.saturating_sub(order.len());
                order.extend(kids.iter().take(room));
            }
            let queued = any_queued
                && self
                    .queued
                    .remove(id)
                    .map(|(_, waiting)| waiting.cancel())
                    .is_some();
            if let Some(live) = self.live.get(id) {
                if next > 1 {
                    descendants.push((id.clone(), live.run.clone()));
                }
                told += 1;
            } else if queued {
                told += 1;
            }
        }
        // Once the root has handled its cancel (or could not), only the descendants it did not
        // reach are told: background children, runs already going when a call continued them.
        let root_id = msg.id.clone();
        let root_done = async move {
            if let Some(root) = root {
                let _ = root.await;
            }
        };
        ctx.spawn(
            fut::wrap_future::<_, Self>(root_done)
                .map(move |(), act, _| act.tell_unreached(&root_id, descendants)),
        );
        told
    }
}

impl Supervisor {
    /// Cancels the loops of `descendants` that a cancel of their ancestor's did not reach; the
    /// others (and those no longer live) only have their pending asks refused.
    fn tell_unreached(&mut self, root: &SessionId, mut descendants: Vec<(SessionId, RunHandle)>) {
        // A run tied to a call of a session inside the subtree ends with that call; a run tied
        // to a call from outside it (a session continued by another branch) is told.
        let tell: Vec<bool> = {
            let members: HashSet<&SessionId, foldhash::fast::RandomState> = descendants
                .iter()
                .map(|(id, _)| id)
                .chain(std::iter::once(root))
                .collect();
            descendants
                .iter()
                .map(|(_, run)| run.runs_unreached(|caller| members.contains(caller)))
                .collect()
        };
        for ((id, run), tell) in descendants.drain(..).zip(tell) {
            let live = self.live.get(&id).filter(|l| tell && l.run.same(&run));
            match live {
                Some(live) => live.addr.do_send(Cancel),
                // What a cancel does besides the token: its pending asks are refused.
                None => {
                    self.core.broker.drop_session(&id);
                    self.core.questions.drop_session(&id);
                }
            }
        }
        self.spare = descendants;
    }
}

/// A session actor stopped (idle, or its arbiter went away).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct SessionStopped {
    /// The session.
    pub id: SessionId,
}

impl Handler<SessionStopped> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: SessionStopped, _: &mut Self::Context) {
        if self.live.get(&msg.id).is_some_and(|l| !l.addr.connected()) {
            self.live.remove(&msg.id);
        }
    }
}

/// Stops the supervisor and hands over its arbiters, told to stop: joining them waits until
/// every session actor and running loop has ended where it was, as if the process had stopped.
#[derive(Message)]
#[rtype(result = "Stopping")]
pub(crate) struct StopAll;

/// Arbiters told to stop, to be joined (off any async thread: joining blocks).
pub(crate) struct Stopping(Vec<Arbiter>);

impl Stopping {
    /// Blocks until every arbiter's thread has ended.
    pub fn join(self) {
        for arbiter in self.0 {
            let _ = arbiter.join();
        }
    }
}

impl Handler<StopAll> for Supervisor {
    type Result = MessageResult<StopAll>;

    fn handle(&mut self, _: StopAll, ctx: &mut Self::Context) -> Self::Result {
        self.live.clear();
        self.children.clear();
        self.links = 0;
        let arbiters = std::mem::take(&mut self.arbiters);
        for arbiter in &arbiters {
            arbiter.stop();
        }
        ctx.stop();
        MessageResult(Stopping(arbiters))
    }
}

/// How many session actors are live.
#[derive(Message)]
#[rtype(result = "usize")]
pub(crate) struct LiveCount;

impl Handler<LiveCount> for Supervisor {
    type Result = usize;

    fn handle(&mut self, _: LiveCount, _: &mut Self::Context) -> usize {
        self.live.values().filter(|l| l.addr.connected()).count()
    }
}

/// The cores each arbiter thread may run on, in arbiter order (diagnostics).
#[derive(Message)]
#[rtype(result = "Vec<Vec<usize>>")]
pub(crate) struct ArbiterCores;

impl Handler<ArbiterCores> for Supervisor {
    type Result = ResponseFuture<Vec<Vec<usize>>>;

    fn handle(&mut self, _: ArbiterCores, _: &mut Self::Context) -> Self::Result {
        let answers: Vec<_> = self
            .arbiters
            .iter()
            .map(|arbiter| {
                let (tx, rx) = tokio::sync::oneshot::channel();
                arbiter.spawn_fn(move || {
                    let cores = core_affinity::get_core_ids().unwrap_or_default();
                    let _ = tx.send(cores.into_iter().map(|c| c.id).collect());
                });
                rx
            })
            .collect();
        Box::pin(async move {
            let mut cores = Vec::with_capacity(answers.len());
            for answer in answers {
                cores.push(answer.await.unwrap_or_default());
            }
            cores
        })
    }
}

/// The index of the arbiter a live session's actor runs on (diagnostics).
#[derive(Message)]
#[rtype(result = "Option<usize>")]
pub(crate) struct Placement {
    /// The session.
    pub id: SessionId,
}

impl Handler<Placement> for Supervisor {
    type Result = Option<usize>;

    fn handle(&mut self, msg: Placement, _: &mut Self::Context) -> Option<usize> {
        self.live
            .get(&msg.id)
            .filter(|l| l.addr.connected())
            .map(|l| l.arbiter)
    }
}
