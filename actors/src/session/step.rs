//! One step of the loop: building the model request for the newest user message and recording
//! the answer; the stream itself is turned into parts by the processor.

use std::sync::{Arc, Mutex};

use taskforce_agents::agent::AgentInfo;
use taskforce_agents::id::now_ms;
use taskforce_agents::model::{
    AssistantError, AssistantMessage, Message, MessagePath, Part, PartKind, Session, UserMessage,
};
use taskforce_agents::permission::{Layers, Rule, merge};
use taskforce_agents::provider::{ChatMessage, ModelRequest, Role, ToolSpec, cost};
use taskforce_agents::tool::Tool;

use super::compaction::{COMPACTION_AGENT, filter_compacted};
use super::dispatch::ToolCalls;
use super::environment::environment;
use super::history::{to_model_messages, without_media};
use super::part::SharedPart;
use super::processor::{Processor, tokens};
use super::retry::to_assistant_error;
use super::state::{LoopState, MergedRules, OfferedTools, Run, VisibleTools, lock};
use super::step_snapshot::StepSnapshot;
use super::turn::Turn;
use super::writer::{Held, Item};
use crate::RuntimeError;
use crate::bus::Event;
use crate::core::Core;
use crate::store::MessageWithParts;

/// The message appended for the model when an agent reaches its step limit.
pub(crate) const MAX_STEPS: &str = "CRITICAL - MAXIMUM STEPS REACHED\n\nThe maximum number of steps allowed for this task has been reached. Tools are disabled until next user input. Respond with text only.\n\nSTRICT REQUIREMENTS:\n1. Do NOT make any tool calls (no reads, writes, edits, searches, or any other tools)\n2. MUST provide a text response summarizing work done so far\n3. This constraint overrides ALL other instructions, including any user messages about edits or tool use\n\nResponse must include:\n- Statement that maximum steps for this agent have been reached\n- Summary of what has been accomplished so far\n- List of any remaining tasks that were not completed\n- Recommendations for what should be done next\n\nAny attempts to use tools are strictly prohibited until the user has sent another message.";

/// What the loop does after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepOutcome {
    /// Go on: call the model again unless the answer is finished.
    Continue,
    /// Stop: the step ended in an error or a rejection.
    Stop,
}

/// Runs one step for the newest user message of `messages`; returns the step's answer. With
/// `compacting`, the step is the hidden `compaction` agent summarizing the history (no tools,
/// its prompt alone as system prompt), and the answer is marked as a summary. What `held`
/// holds is written with the step's opening; a step that ends without an error leaves its
/// closing state in `held`, for the caller to write with its next commit.
pub(crate) async fn run_step(
    run: &Run<'_>,
    messages: &[MessageWithParts],
    step: u32,
    compacting: bool,
    held: &mut Held,
) -> Result<(MessageWithParts, StepOutcome), RuntimeError> {
    let Run {
        core,
        session,
        state,
        ..
    } = *run;
    let messages = filter_compacted(messages);
    let Some(user) = messages.iter().rev().find_map(|m| match &*m.info {
        Message::User(u) => Some(u),
        Message::Assistant(_) => None,
    }) else {
        return Err(RuntimeError::InvalidInput("no user message".into()));
    };
    // A turn whose user message mentions an agent skips the task permission ask.
    let mentions_agent = messages
        .iter()
        .rev()
        .find(|m| matches!(*m.info, Message::User(_)))
        .is_some_and(|m| m.parts.iter().any(|p| matches!(p.kind, PartKind::Agent(_))));
    let agent_name = if compacting {
        COMPACTION_AGENT
    } else {
        user.agent.as_str()
    };
    let agent = core.registry.require_shared(agent_name)?;
    // The agent's and the session's rules, merged once for the step and all its calls, under
    // the rules of the callers above the session.
    let rules = merged_rules(state, &agent, session);
    let model_ref = match (compacting, &agent.model) {
        (true, Some(own)) => own.clone(),
        _ => user.model.clone(),
    };
    let path = MessagePath {
        cwd: session.directory.clone(),
        root: core.paths.project_root.clone(),
    };
    let mut assistant = AssistantMessage::new(
        session.id.clone(),
        user.id.clone(),
        agent.name.clone(),
        &model_ref,
        path,
        now_ms(),
    );
    if compacting {
        assistant.summary = Some(true);
    }
    let model = match core.providers.model(&model_ref) {
        Ok(m) => m,
        Err(e) => {
            run.writer.flush(held).await?;
            // Boxed: a failed step is rare, and its state would widen every step's.
            return Box::pin(fail(
                run,
                assistant,
                Vec::new(),
                Vec::new(),
                to_assistant_error(&e),
                false,
            ))
            .await;
        }
    };
    // A session that may not delegate is not offered the task tool; a call anyway is routed to
    // it so that the model reads why (see `ToolCalls::task_guarded`).
    let task_guarded = match core.children() {
        Some(children) => children.guard(session).await.is_some(),
        None => false,
    };
    // The MCP tools connected now: the step offers and calls these, whatever happens to their
    // servers meanwhile.
    let mcp = core.mcp.tools();
    let tools: Vec<usize> = if compacting {
        Vec::new()
    } else {
        visible_tools(core, state, &mcp, &rules, user)
            .iter()
            .copied()
            .filter(|&i| {
                let id = core.tool(&mcp, i).map_or("", |t| t.id());
                !(task_guarded && matches!(id, "task" | "task_status" | "task_cancel"))
            })
            .collect()
    };
    let specs = offered_specs(core, state, &agent, &mcp, &tools);
    let mut system = Vec::new();
    if let Some(p) = &agent.prompt {
        system.push(p.clone());
    }
    if !compacting {
        system.push(prompt_environment(core, state, session, user));
        if let Some(s) = &user.system {
            system.push(s.clone());
        }
    }
    // From the second step on, user text that arrived after the last finished answer is queued.
    let queued_after = if step > 1 {
        messages.iter().rev().find_map(|m| match &*m.info {
            Message::Assistant(a) if a.is_finished() => Some(a.id.clone()),
            _ => None,
        })
    } else {
        None
    };
    let mut history = to_model_messages(messages, queued_after.as_ref(), &model_ref);
    let model_config = core.providers.model_config(&model_ref);
    if model_config.and_then(|m| m.attachment) == Some(false) {
        without_media(&mut history);
    }
    if agent.steps.is_some_and(|max| step >= max) {
        history.push(ChatMessage::text(Role::Assistant, MAX_STEPS));
    }
    let request = ModelRequest {
        model: model_ref.model_id.clone(),
        agent: agent.name.clone(),
        system,
        messages: history,
        tools: specs,
        temperature: agent.temperature,
        top_p: agent.top_p,
        max_output_tokens: model_config.and_then(|m| m.output),
        options: agent.options.clone(),
    };

    let mut request = request;
    for hook in core.hooks() {
        hook.chat_request(&session.id, &agent.name, &mut request);
    }
    let mut processor = Processor {
        turn: Turn {
            core: core.clone(),
            writer: run.writer.clone(),
            session: session.clone(),
            agent,
            model: model_ref.clone(),
            message_id: assistant.id.clone(),
            token: run.token.clone(),
            parts: Vec::new(),
            held: std::mem::take(held),
        },
        calls: ToolCalls::new(
            tools,
            mcp,
            rules,
            mentions_agent,
            task_guarded,
            StepSnapshot::new(core.clone(), session.directory.clone()),
        ),
    };
    // Shared by the first write and its event; dropped once written, not kept through the
    // step (a cancelled tree would otherwise free a copy per session on its way out).
    let opening = Arc::new(Message::Assistant(assistant.clone()));
    let result = processor.process(model.as_ref(), request, opening).await;
    let parts = std::mem::take(&mut processor.turn.parts)
        .into_iter()
        .map(SharedPart::into_part)
        .collect::<Vec<_>>();

    let price = core
        .providers
        .model_config(&model_ref)
        .and_then(|m| m.cost.as_ref());
    assistant.cost = cost(&result.usage, price);
    assistant.tokens = tokens(&result.usage);
    assistant.finish = result.finish.as_ref().map(|f| f.as_str().to_string());
    assistant.time.completed = Some(now_ms());
    if let Some(error) = result.error {
        let cancelled = run.token.is_cancelled();
        return Box::pin(fail(
            run,
            assistant,
            parts,
            result.closing,
            error,
            cancelled,
        ))
        .await;
    }
    // The closing state goes with the caller's next commit (the next step's opening, else
    // the loop's end), which publishes it first.
    let info = Arc::new(Message::Assistant(assistant));
    held.parts(result.closing);
    held.message(info.clone());
    let final_message = MessageWithParts { info, parts };
    let outcome = if result.blocked {
        StepOutcome::Stop
    } else {
        StepOutcome::Continue
    };
    Ok((final_message, outcome))
}

/// Records `error` on the assistant message, publishes `session.error`, and stops the loop. A
/// `cancelled` run's end is queued for the disk rather than waited for (see
/// [`Writer::save_behind`]).
async fn fail(
    run: &Run<'_>,
    mut assistant: AssistantMessage,
    parts: Vec<Arc<Part>>,
    closing: Vec<Arc<Part>>,
    error: AssistantError,
    cancelled: bool,
) -> Result<(MessageWithParts, StepOutcome), RuntimeError> {
    let Run { writer, .. } = *run;
    assistant.error = Some(error.clone());
    assistant.time.completed.get_or_insert_with(now_ms);
    let session_id = assistant.session_id.clone();
    // One copy, shared by the event, the write queue and the loop's history.
    let info = Arc::new(Message::Assistant(assistant));
    if cancelled {
        writer.save_behind(vec![info.clone()], closing);
    } else {
        let mut items: Vec<Item<'_>> = closing.iter().map(Item::Part).collect();
        items.push(Item::Message(&info));
        writer.save(&items).await?;
    }
    writer.publish_event(Event::SessionError {
        session_id: Some(session_id),
        error: Some(Box::new(error)),
    });
    Ok((MessageWithParts { info, parts }, StepOutcome::Stop))
}

/// The agent's and the session's rules merged, layered over the session's callers' rules:
/// remembered by the loop, so that they are merged once per agent and session rather than per
/// step (and freed with the actor, not at each step's end).
fn merged_rules(
    state: &Mutex<LoopState>,
    agent: &Arc<AgentInfo>,
    session: &Arc<Session>,
) -> Layers {
    let mut state = lock(state);
    if let Some(known) = &state.rules
        && Arc::ptr_eq(&known.agent, agent)
        && Arc::ptr_eq(&known.session, session)
    {
        return known.rules.clone();
    }
    let own: Arc<[Rule]> = merge(&[&agent.permission, session.rules()]).into();
    let rules = Layers::new(own, session.caller_permission.clone());
    state.rules = Some(MergedRules {
        agent: agent.clone(),
        session: session.clone(),
        rules: rules.clone(),
    });
    rules
}

/// The specs of `tools` for `agent`'s model: remembered by the loop (see `merged_rules`), so
/// that each step's request shares one list instead of counting references to every tool's
/// shared texts (on both arbiter threads at once when a tree ends).
fn offered_specs(
    core: &Core,
    state: &Mutex<LoopState>,
    agent: &Arc<AgentInfo>,
    mcp: &Arc<[Arc<dyn Tool>]>,
    tools: &[usize],
) -> Arc<Vec<ToolSpec>> {
    let mut state = lock(state);
    if let Some(known) = &state.specs
        && Arc::ptr_eq(&known.agent, agent)
        && known.tools == tools
        && Arc::ptr_eq(&known.mcp, mcp)
    {
        return known.specs.clone();
    }
    let specs: Arc<Vec<ToolSpec>> = Arc::new(
        tools
            .iter()
            .filter_map(|&i| {
                let t = core.tool(mcp, i)?.as_ref();
                Some(ToolSpec {
                    name: core.tool_name(mcp, i)?,
                    description: core.description(t, agent),
                    parameters: core.schema(t),
                })
            })
            .collect(),
    );
    state.specs = Some(OfferedTools {
        agent: agent.clone(),
        tools: tools.to_vec(),
        mcp: mcp.clone(),
        specs: specs.clone(),
    });
    specs
}

/// The environment block for the steps of `user`'s prompt: made at its first step, so that the
/// directory and the date are looked at once per prompt.
fn prompt_environment(
    core: &Core,
    state: &Mutex<LoopState>,
    session: &Session,
    user: &UserMessage,
) -> String {
    let mut state = lock(state);
    if let Some((prompt, text)) = &state.environment
        && *prompt == user.id
    {
        return text.clone();
    }
    let text = environment(&session.directory, &core.paths.project_root);
    state.environment = Some((user.id.clone(), text.clone()));
    text
}

/// [`offered_tools`] for the steps of `user`'s prompt: remembered while its rules and the MCP
/// tools stay (see `merged_rules`), so that every step does not judge every tool again.
fn visible_tools(
    core: &Core,
    state: &Mutex<LoopState>,
    mcp: &Arc<[Arc<dyn Tool>]>,
    rules: &Layers,
    user: &UserMessage,
) -> Arc<[usize]> {
    let mut state = lock(state);
    if let Some(known) = &state.visible
        && known.prompt == user.id
        && known.rules.is_same(rules)
        && Arc::ptr_eq(&known.mcp, mcp)
    {
        return known.tools.clone();
    }
    let tools = core.offered.get_or(rules, &user.tools, mcp, || {
        offered_tools(core, mcp, rules, user)
    });
    state.visible = Some(VisibleTools {
        prompt: user.id.clone(),
        rules: rules.clone(),
        mcp: mcp.clone(),
        tools: tools.clone(),
    });
    tools
}

/// The tools the model is offered (their places among the built-in tools, then `mcp`; see
/// [`Core::tool`]): every tool not hidden by the agent's and session's rules, nor by any
/// caller's (a tool a caller denies outright is not offered to its child), and not switched
/// off by the prompt.
fn offered_tools(
    core: &Core,
    mcp: &[Arc<dyn Tool>],
    rules: &Layers,
    user: &UserMessage,
) -> Vec<usize> {
    let hidden: Vec<String> = rules
        .iter()
        .flat_map(|layer| {
            taskforce_agents::permission::disabled(core.all_tools(mcp).map(|t| t.id()), layer)
        })
        .collect();
    core.all_tools(mcp)
        .enumerate()
        .filter(|(_, t)| !hidden.iter().any(|h| h == t.id()))
        .filter(|(_, t)| {
            user.tools
                .as_ref()
                .and_then(|m| m.get(t.id()))
                .is_none_or(|on| *on)
        })
        .map(|(i, _)| i)
        .collect()
}
