//! The tool calls of one step: started as the model names them, each in a task of its own,
//! and ended once the stream is over.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use serde_json::{Map, Value};
use taskforce_agents::id::now_ms;
use taskforce_agents::model::{Part, PartKind, ToolPart, ToolState, ToolStateRunning};
use taskforce_agents::permission::{Layers, PermissionError};
use taskforce_agents::question::QuestionError;
use taskforce_agents::tool::{Delegate, Tool, ToolError, ToolOutput};
use tokio::sync::oneshot;

use super::call::{CallSite, call_tool, delegate};
use super::host::SessionToolHost;
use super::part::SharedPart;
use super::step_snapshot::StepSnapshot;
use super::tool_end::end_tool;
use super::turn::Turn;
use super::writer::Item;
use crate::core::Core;

/// How many identical consecutive tool calls count as a doom loop.
const DOOM_LOOP_THRESHOLD: usize = 3;

type ToolRun = tokio::task::JoinHandle<(String, Result<ToolOutput, ToolError>)>;

/// The tool calls of one step, and what they are made with.
pub(super) struct ToolCalls {
    /// The tools the step offers: their places among the built-in tools, then `mcp` (no
    /// reference counts to touch per step; see `Core::tool`).
    tools: Vec<usize>,
    /// The MCP tools connected when the step began.
    mcp: Arc<[Arc<dyn Tool>]>,
    /// The agent's and the session's rules, merged, over the session's callers' rules: what
    /// the step's calls are asked against.
    rules: Layers,
    /// The user mentioned an agent: task calls of this step skip their permission ask.
    bypass_agent_check: bool,
    /// The task tool is withheld by a guard (subagents off, depth limit): a call anyway runs it,
    /// and it answers with the guard's code instead of "unavailable tool".
    task_guarded: bool,
    /// What starts the subagents of the step's calls, made at the first call.
    delegate: Option<Arc<dyn Delegate>>,
    /// The calls' parts, by call id.
    parts: HashMap<String, SharedPart, foldhash::fast::RandomState>,
    /// The calls started and not yet ended.
    runs: FuturesUnordered<ToolRun>,
    /// Closed once the last call started is past its wait for the step's opening (or ended
    /// without running): the next call waits for it, so that calls go on in the order the model made
    /// them (a call started once the opening is on disk would otherwise overtake those woken
    /// by its commit).
    gate: Option<oneshot::Receiver<()>>,
    /// The worktree as it was before the step's first call that may change files.
    pub snapshot: Arc<StepSnapshot>,
}

impl ToolCalls {
    /// No calls yet, of `tools` under `rules`.
    pub fn new(
        tools: Vec<usize>,
        mcp: Arc<[Arc<dyn Tool>]>,
        rules: Layers,
        bypass_agent_check: bool,
        task_guarded: bool,
        snapshot: Arc<StepSnapshot>,
    ) -> Self {
        ToolCalls {
            tools,
            mcp,
            rules,
            bypass_agent_check,
            task_guarded,
            delegate: None,
            parts: HashMap::default(),
            runs: FuturesUnordered::new(),
            gate: None,
            snapshot,
        }
    }

    /// A call of the step has started (and not ended).
    pub fn started(&self) -> bool {
        !self.runs.is_empty()
    }

    /// Forgets the calls named so far (their parts were removed with a failed attempt).
    pub fn forget(&mut self) {
        self.parts.clear();
    }

    /// The model began call `id` of `name`: pending until its arguments are in, published but
    /// not written.
    pub fn begin(&mut self, turn: &mut Turn, id: String, name: String) {
        let part = turn.new_part(ToolPart::pending(id.clone(), name).into());
        turn.writer.part_live(part.lock());
        self.parts.insert(id, part);
    }

    /// The arguments of call `id` are in: the call starts.
    pub async fn call(&mut self, turn: &mut Turn, id: String, name: String, arguments: String) {
        let part = match self.parts.get(&id) {
            Some(p) => p.clone(),
            None => {
                let p = turn.new_part(ToolPart::pending(id.clone(), name.clone()).into());
                self.parts.insert(id.clone(), p.clone());
                p
            }
        };
        let run = self.start(turn, part, id, name, arguments).await;
        self.runs.push(run);
    }

    /// Waits for the started calls (a cancel reaches them through their child tokens) and
    /// writes their ends, those that have ended by the time one is written together, in one
    /// commit; the calls that end last, once the stream is over, are pushed to `last` instead,
    /// to be written with the closing commit. Answers whether a permission was rejected.
    pub async fn wait(&mut self, turn: &Turn, last: &mut Vec<Arc<Part>>) -> bool {
        let mut blocked = false;
        while let Some(joined) = self.runs.next().await {
            let mut ended = Vec::new();
            let mut next = Some(joined);
            while let Some(joined) = next {
                if let Ok((call_id, outcome)) = joined
                    && let Some(part) = self.parts.get(&call_id)
                {
                    if matches!(&outcome, Err(e) if matches!(
                        e.cause(),
                        ToolError::Permission(PermissionError::Rejected)
                            | ToolError::Question(QuestionError::Rejected)
                    )) {
                        blocked = true;
                    }
                    ended.push(end_tool(part, outcome));
                }
                // The calls that have ended meanwhile go with this one.
                next = self.runs.next().now_or_never().flatten();
            }
            if self.runs.is_empty() && !turn.token.is_cancelled() {
                last.extend(ended);
            } else {
                write_ends(turn, ended).await;
            }
        }
        blocked
    }

    /// Ends what is still pending or running as aborted: written now, or pushed to `last` when
    /// it holds a call to be written with the closing commit.
    pub async fn end_unfinished(&self, turn: &Turn, last: &mut Vec<Arc<Part>>) {
        for part in self.parts.values() {
            if !part.peek(|p| p.as_tool().is_some_and(|t| t.state.is_finished())) {
                if last.is_empty() {
                    finish_tool(turn, part, Err(ToolError::Aborted)).await;
                } else {
                    last.push(end_tool(part, Err(ToolError::Aborted)));
                }
            }
        }
    }

    /// The tools the step offers.
    fn offered<'a>(&'a self, core: &'a Core) -> impl Iterator<Item = &'a Arc<dyn Tool>> {
        self.tools.iter().filter_map(|&i| core.tool(&self.mcp, i))
    }

    /// Marks a call running and spawns it; unknown tools and bad JSON fail without running.
    async fn start(
        &mut self,
        turn: &Turn,
        part: SharedPart,
        id: String,
        name: String,
        arguments: String,
    ) -> ToolRun {
        let parsed: Result<Map<String, Value>, String> = if arguments.trim().is_empty() {
            Ok(Map::new())
        } else {
            match serde_json::from_str::<Value>(&arguments) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(other) => Err(format!("expected a JSON object, got {other}")),
                Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
            }
        };
        let input = parsed.clone().unwrap_or_default();
        let tool = self
            .offered(&turn.core)
            .find(|t| t.id() == name)
            .or_else(|| {
                self.offered(&turn.core)
                    .find(|t| t.id() == name.to_lowercase())
            })
            .cloned()
            .or_else(|| {
                let task = self.task_guarded && name.eq_ignore_ascii_case("task");
                task.then(|| turn.core.tools.iter().find(|t| t.id() == "task").cloned())
                    .flatten()
            });
        let doom = is_doom_loop(&turn.parts, &name, &input);
        let running = part.update(|p| {
            if let PartKind::Tool(t) = &mut p.kind {
                t.tool = tool.as_ref().map_or(name.clone(), |t| t.id().to_string());
                t.state = ToolState::Running(ToolStateRunning::new(input.clone(), now_ms()));
            }
        });
        // Published now; written only if the call lasts (see below), as streaming text is.
        turn.writer.part_live(running);

        let host = Arc::new(SessionToolHost::new(
            turn.core.clone(),
            turn.writer.clone(),
            part.clone(),
            self.rules.clone(),
        ));
        let site = CallSite {
            core: &turn.core,
            session: &turn.session,
            agent: turn.agent.clone(),
            model: turn.model.clone(),
            message_id: turn.message_id.clone(),
            token: &turn.token,
        };
        if self.delegate.is_none() {
            self.delegate = delegate(&turn.core, &turn.session);
        }
        let ctx = site.context(
            id.clone(),
            host.clone(),
            self.delegate.clone(),
            self.bypass_agent_check,
            None,
        );
        // Named only in the error of a call to a tool the step does not offer.
        let available = match &tool {
            None => self
                .offered(&turn.core)
                .map(|t| t.id())
                .collect::<Vec<_>>()
                .join(", "),
            Some(_) => String::new(),
        };
        let core = turn.core.clone();
        let snapshot = tool
            .as_ref()
            .is_some_and(|t| t.changes_files())
            .then(|| self.snapshot.clone());
        // A call that only reads need not wait for its step's opening to reach the disk.
        let reads_only = tool.as_ref().is_some_and(|t| t.only_reads());
        let flush_every = turn.core.flush_every;
        let agent = turn.agent.clone();
        let writer = turn.writer.clone();
        let (pass, gate) = oneshot::channel::<()>();
        let before = self.gate.replace(gate);
        // Boxed, so that ending the call copies no large state machine (see `start_loop`).
        tokio::spawn(Box::pin(async move {
            let outcome = match (tool, parsed) {
                (None, _) => Err(ToolError::Failed(format!(
                    "Model tried to call unavailable tool '{name}'. Available tools: {available}."
                ))),
                (Some(tool), Err(message)) => Err(ToolError::InvalidArguments {
                    tool: tool.id().to_string(),
                    message,
                }),
                (Some(tool), Ok(args)) => {
                    // Nothing that may change anything runs before its step's opening is on
                    // disk (and published); its asks wait for that too (see the host).
                    let settled = if reads_only {
                        Ok(())
                    } else {
                        writer.settle().await
                    };
                    // The calls made before this one go on first.
                    if let Some(before) = before {
                        let _ = before.await;
                    }
                    drop(pass);
                    let allowed = match settled {
                        Err(e) => Err(ToolError::Failed(format!(
                            "the step could not be stored, so the call did not run: {e}"
                        ))),
                        // Boxed, as the snapshot below: rare, and large.
                        Ok(()) if doom => {
                            Box::pin(host.ask_doom_loop(&ctx, &agent, tool.id(), &args)).await
                        }
                        Ok(()) => Ok(()),
                    };
                    match allowed {
                        Ok(()) => {
                            if let Some(snapshot) = &snapshot {
                                Box::pin(snapshot.before_change()).await;
                            }
                            let call = call_tool(&core, tool.as_ref(), Value::Object(args), &ctx);
                            tokio::pin!(call);
                            tokio::select! {
                                out = &mut call => out,
                                () = tokio::time::sleep(flush_every) => {
                                    // A call that lasts is on disk as running, so a crash
                                    // leaves it visible as interrupted (unless it is already).
                                    host.store_running_once();
                                    call.await
                                }
                            }
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            (id, outcome)
        }))
    }
}

/// Whether the last `DOOM_LOOP_THRESHOLD` tool calls among `parts` are this same call.
fn is_doom_loop(parts: &[SharedPart], name: &str, input: &Map<String, Value>) -> bool {
    let mut same = 0;
    for part in parts.iter().rev() {
        // `None`: not a call that counts; else whether it is this same call.
        let this = part.peek(|part| {
            let tool = part.as_tool()?;
            if matches!(tool.state, ToolState::Pending(_)) {
                return None;
            }
            Some(tool.tool == name && *tool.state.input() == *input)
        });
        match this {
            None => continue,
            Some(false) => return false,
            Some(true) => {}
        }
        same += 1;
        if same == DOOM_LOOP_THRESHOLD {
            return true;
        }
    }
    false
}

/// Records a call's result on its part, writes and publishes it.
async fn finish_tool(turn: &Turn, part: &SharedPart, outcome: Result<ToolOutput, ToolError>) {
    write_ends(turn, vec![end_tool(part, outcome)]).await;
}

/// Writes ended calls in one commit and publishes them; a cancelled run's calls end without
/// waiting for the disk (see `Writer::save_behind`).
async fn write_ends(turn: &Turn, ended: Vec<Arc<Part>>) {
    if ended.is_empty() {
        return;
    }
    if turn.token.is_cancelled() {
        turn.writer.save_behind(Vec::new(), ended);
    } else {
        // Committed and published in the background; a failure fails the run at its end.
        let items: Vec<Item<'_>> = ended.iter().map(Item::Part).collect();
        turn.writer.save_later(&items);
    }
}
