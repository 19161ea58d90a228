//! Time limits of one child run: a hard cap (`subagent.timeout`, lowered by the task call's
//! `timeout` argument, never raised) and an idle limit (`subagent.idle_timeout`).
//!
//! Both clocks start when the call is admitted (time spent queued does not count). The idle
//! clock is reset by the child's activity as its session publishes it on the bus: model
//! stream events (text and reasoning deltas, step starts and finishes, tool calls being
//! streamed, assistant messages) and tool status changes (a tool starting, completing or
//! failing). Metadata updates of a tool that is still running do not reset it, so a single
//! tool that runs longer than the idle limit ends the child. A child waiting for its own task
//! calls is as active as the children working for it (their activity resets its clock too),
//! and a call waiting for a running slot (or for the caller's share to come back) holds the
//! caller's clock: waiting on the runtime's limits is not idling. Nor is waiting for a person:
//! a permission ask that waits for a reply holds the asking session's clock (and its callers')
//! until the reply comes. The hard cap runs on through both. On expiry the delegate cancels
//! the child's subtree and answers `SUBAGENT_TIMEOUT` with the output so far and the reason
//! (`details.results[i].timeoutReason`: `runtime` or `idle`).
//!
//! The clocks are tokio's, so tests may drive them with a paused clock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use taskforce_agents::config::SubagentConfig;
use taskforce_agents::id::{PartId, SessionId};
use taskforce_agents::model::PartKind;
use taskforce_agents::tool::TimeoutReason;
use tokio::time::Instant;

use crate::bus::Event;

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunLimits {
    /// The hard cap.
    pub hard: Duration,
    /// The longest quiet spell.
    pub idle: Duration,
}

impl RunLimits {
    /// The configured limits, the hard cap lowered to `requested` when that is shorter.
    pub(crate) fn new(config: &SubagentConfig, requested: Option<Duration>) -> Self {
        RunLimits {
            hard: requested.map_or(config.timeout, |r| r.min(config.timeout)),
            idle: config.idle_timeout,
        }
    }
}

/// When the child was last active, and whether it is held busy (waiting on the runtime's
/// limits). A child's activity is its callers' too: touching or holding a clock reaches the
/// clocks of the runs waiting on it (`up`), so a parent whose child works is not idle.
#[derive(Debug)]
pub(crate) struct Activity {
    last: Mutex<Instant>,
    held: AtomicUsize,
    up: Option<Arc<Activity>>,
}

impl Activity {
    /// Active now, with no caller waiting on it.
    pub(crate) fn new() -> Self {
        Activity::under(None)
    }

    /// Active now; `up` is the clock of the run that waits for this one.
    pub(crate) fn under(up: Option<Arc<Activity>>) -> Self {
        Activity {
            last: Mutex::new(Instant::now()),
            held: AtomicUsize::new(0),
            up,
        }
    }

    /// The child did something now.
    pub(crate) fn touch(&self) {
        let now = Instant::now();
        for clock in self.chain() {
            *clock.last.lock().unwrap_or_else(PoisonError::into_inner) = now;
        }
    }

    /// Keeps this clock and its callers' from running idle until the guard is dropped (a call
    /// waiting for a running slot is not the child idling).
    pub(crate) fn hold(self: &Arc<Self>) -> Hold {
        for clock in self.chain() {
            clock.held.fetch_add(1, Ordering::Relaxed);
        }
        Hold(self.clone())
    }

    fn is_held(&self) -> bool {
        self.held.load(Ordering::Relaxed) > 0
    }

    fn last(&self) -> Instant {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This clock, then its callers' up to the root's call.
    fn chain(&self) -> impl Iterator<Item = &Activity> {
        std::iter::successors(Some(self), |c| c.up.as_deref())
    }
}

/// A clock held busy; dropping it lets it run again from now.
#[derive(Debug)]
pub(crate) struct Hold(Arc<Activity>);

impl Drop for Hold {
    fn drop(&mut self) {
        for clock in self.0.chain() {
            clock.held.fetch_sub(1, Ordering::Relaxed);
        }
        self.0.touch();
    }
}

/// The running children's clocks by child session, so that their own calls can reach them.
pub(crate) type Clocks = crate::id_map::IdMap<Arc<Activity>>;

/// `activity` listed as `child`'s clock while the guard lives.
pub(crate) struct Listed<'a> {
    clocks: &'a Clocks,
    child: SessionId,
    activity: Arc<Activity>,
}

impl<'a> Listed<'a> {
    /// Lists `activity` as the clock of `child`.
    pub(crate) fn new(clocks: &'a Clocks, child: &SessionId, activity: &Arc<Activity>) -> Self {
        clocks.insert(child.clone(), activity.clone());
        Listed {
            clocks,
            child: child.clone(),
            activity: activity.clone(),
        }
    }
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.clocks
            .remove_if(&self.child, |_, a| Arc::ptr_eq(a, &self.activity));
    }
}

/// The clock of `session`'s run as a child, if one is running.
pub(crate) fn clock_of(clocks: &Clocks, session: &SessionId) -> Option<Arc<Activity>> {
    clocks.get(session).map(|a| a.value().clone())
}

/// Tells activity from noise in a child's events (it remembers each tool part's status).
#[derive(Debug, Default)]
pub(crate) struct ActivityFilter {
    tools: HashMap<PartId, &'static str, foldhash::fast::RandomState>,
}

impl ActivityFilter {
    /// Whether `event` (of the child's session) resets the idle clock.
    pub(crate) fn is_activity(&mut self, event: &Event) -> bool {
        match event {
            Event::MessageUpdated { .. } | Event::PartDelta { .. } => true,
            Event::PartUpdated { part, .. } => match &part.kind {
                PartKind::Tool(tool) => {
                    let status = tool.state.status();
                    let before = self.tools.insert(part.id.clone(), status);
                    status == "pending" || before != Some(status)
                }
                PartKind::Text(_)
                | PartKind::Reasoning(_)
                | PartKind::StepStart(_)
                | PartKind::StepFinish(_) => true,
                _ => false,
            },
            _ => false,
        }
    }
}

/// Resolves when a limit of `limits` runs out, started at `start`: which one and how long it
/// was. Never resolves early; the idle deadline moves with `activity`.
pub(crate) async fn expiry(
    limits: RunLimits,
    start: Instant,
    activity: &Activity,
) -> (TimeoutReason, Duration) {
    let hard = later(start, limits.hard);
    loop {
        let idle = later(activity.last(), limits.idle);
        if idle < hard {
            tokio::time::sleep_until(idle).await;
            if activity.is_held() {
                activity.touch();
                continue;
            }
            if later(activity.last(), limits.idle) <= Instant::now() {
                return (TimeoutReason::Idle, limits.idle);
            }
        } else {
            tokio::time::sleep_until(hard).await;
            return (TimeoutReason::Runtime, limits.hard);
        }
    }
}

/// `d` after `at`; a duration past what the clock holds (a configured `timeout` of u64::MAX
/// seconds) is a century, which no run reaches.
fn later(at: Instant, d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    at.checked_add(d.min(CENTURY)).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(hard_ms: u64, idle_ms: u64) -> RunLimits {
        RunLimits {
            hard: Duration::from_millis(hard_ms),
            idle: Duration::from_millis(idle_ms),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_child_hits_the_idle_limit() {
        let activity = Activity::new();
        let start = Instant::now();
        let got = expiry(limits(10_000, 300), start, &activity).await;
        assert_eq!(got, (TimeoutReason::Idle, Duration::from_millis(300)));
        assert_eq!(start.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_child_never_idles_but_hits_the_hard_limit() {
        let activity = std::sync::Arc::new(Activity::new());
        let start = Instant::now();
        let ticker = {
            let activity = activity.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    activity.touch();
                }
            })
        };
        let got = expiry(limits(2_000, 300), start, &activity).await;
        ticker.abort();
        assert_eq!(got, (TimeoutReason::Runtime, Duration::from_millis(2_000)));
        assert_eq!(start.elapsed(), Duration::from_millis(2_000));
    }

    #[tokio::test(start_paused = true)]
    async fn activity_moves_the_idle_deadline() {
        let activity = std::sync::Arc::new(Activity::new());
        let start = Instant::now();
        let poke = {
            let activity = activity.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(250)).await;
                activity.touch();
            })
        };
        let got = expiry(limits(10_000, 300), start, &activity).await;
        poke.await.unwrap();
        assert_eq!(got.0, TimeoutReason::Idle);
        assert_eq!(start.elapsed(), Duration::from_millis(550));
    }

    #[tokio::test(start_paused = true)]
    async fn limits_past_what_the_clock_holds_never_expire_and_never_panic() {
        let activity = Activity::new();
        let huge = RunLimits {
            hard: Duration::MAX,
            idle: Duration::from_secs(u64::MAX),
        };
        let waited = tokio::time::timeout(
            Duration::from_secs(3600 * 24 * 365),
            expiry(huge, Instant::now(), &activity),
        )
        .await;
        assert!(waited.is_err(), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_childs_activity_is_its_callers_and_a_held_clock_never_idles() {
        let caller = std::sync::Arc::new(Activity::new());
        let child = std::sync::Arc::new(Activity::under(Some(caller.clone())));
        let start = Instant::now();
        let ticker = {
            let child = child.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    child.touch();
                }
            })
        };
        // The caller says nothing for a second while its child works.
        let got = expiry(limits(60_000, 300), start, &caller).await;
        ticker.await.unwrap();
        assert_eq!(got.0, TimeoutReason::Idle);
        assert_eq!(start.elapsed(), Duration::from_millis(1_300));

        // Held (waiting for a slot) for a minute: not idle; idle 300 ms after the hold ends.
        let start = Instant::now();
        let hold = child.hold();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(hold);
        });
        let got = expiry(limits(600_000, 300), start, &caller).await;
        release.await.unwrap();
        assert_eq!(got.0, TimeoutReason::Idle);
        assert!(
            start.elapsed() >= Duration::from_millis(60_300),
            "{:?}",
            start.elapsed()
        );
        assert!(
            start.elapsed() < Duration::from_millis(60_700),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn stream_events_and_tool_status_changes_are_activity_metadata_updates_are_not() {
        use taskforce_agents::id::MessageId;
        use taskforce_agents::model::{Part, TextPart, ToolPart, ToolState, ToolStateRunning};

        let (session, message) = (SessionId::new(), MessageId::new());
        let updated = |part: &Part| Event::PartUpdated {
            part: Arc::new(part.clone()),
        };
        let mut filter = ActivityFilter::default();
        let text = Part::new(session.clone(), message.clone(), TextPart::new("hi"));
        assert!(filter.is_activity(&updated(&text)));
        let delta = Event::PartDelta {
            session_id: session.clone(),
            message_id: message.clone(),
            part_id: text.id.clone(),
            field: "text".into(),
            delta: " there".into(),
        };
        assert!(filter.is_activity(&delta), "a text delta");

        let mut call = Part::new(session.clone(), message, ToolPart::pending("c1", "bash"));
        assert!(filter.is_activity(&updated(&call)), "a call being streamed");
        let running = ToolStateRunning::new(serde_json::Map::new(), 1);
        let set = |part: &mut Part, state: ToolState| {
            if let PartKind::Tool(t) = &mut part.kind {
                t.state = state;
            }
        };
        set(&mut call, ToolState::Running(running.clone()));
        assert!(filter.is_activity(&updated(&call)), "the tool started");
        let mut with_metadata = running.clone();
        with_metadata.title = Some("still going".into());
        set(&mut call, ToolState::Running(with_metadata));
        assert!(
            !filter.is_activity(&updated(&call)),
            "a running tool's own updates are not activity"
        );
        set(
            &mut call,
            ToolState::Completed(running.complete("done", "ls", 2)),
        );
        assert!(filter.is_activity(&updated(&call)), "the tool completed");

        let status = Event::SessionStatus {
            session_id: session,
            status: crate::bus::SessionStatus::Busy,
        };
        assert!(!filter.is_activity(&status));
    }

    #[test]
    fn the_call_can_lower_the_cap_but_not_raise_it() {
        let config = SubagentConfig {
            timeout: Duration::from_secs(60),
            ..SubagentConfig::default()
        };
        assert_eq!(RunLimits::new(&config, None).hard, Duration::from_secs(60));
        let lower = Some(Duration::from_secs(5));
        assert_eq!(RunLimits::new(&config, lower).hard, Duration::from_secs(5));
        let higher = Some(Duration::from_secs(600));
        assert_eq!(
            RunLimits::new(&config, higher).hard,
            Duration::from_secs(60)
        );
    }
}
