//! Session actors and the agent loop they run.

mod actor;
mod call;
mod compaction;
mod crash;
mod dispatch;
mod environment;
mod exclusive;
mod history;
mod host;
mod input;
mod part;
mod part_edit;
mod processor;
mod recover;
mod relay;
mod release;
mod retry;
mod revert;
mod run;
mod shell;
mod state;
mod step;
mod step_snapshot;
mod streaming;
mod subtask;
mod title;
mod tool_end;
mod turn;
mod writer;

pub use input::{PartInput, PromptInput, prompt_parts};
pub use recover::STOPPED;
pub use shell::ShellInput;
pub use subtask::SUMMARIZE;

pub(crate) use actor::{
    AnswerBook, Cancel, EditPart, Exclusive, IsBusy, Prompt, Seed, SessionActor, Shutdown, Subtask,
    SubtaskRun, UndoTurns,
};
pub(crate) use actor::{Reply, RunHandle};
pub(crate) use environment::civil_from_days as civil_date;
pub(crate) use exclusive::Job;
pub(crate) use host::ask_origin;
pub(crate) use part_edit::PartEdit;
pub(crate) use recover::repair_dead_runs;
pub(crate) use revert::{Undo, session_diff};
pub(crate) use writer::Writer;
