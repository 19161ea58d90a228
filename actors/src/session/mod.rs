//! Session actors and the agent loop they run.

mod actor;
mod call;
mod compaction;
mod dispatch;
mod environment;
mod exclusive;
mod history;
mod host;
mod input;
mod part;
mod processor;
mod recover;
mod relay;
mod retry;
mod run;
mod shell;
mod state;
mod step;
mod streaming;
mod subtask;
mod title;
mod tool_end;
mod turn;
mod writer;

pub use actor::{
    AnswerBook, Cancel, Exclusive, IsBusy, Prompt, Seed, SessionActor, Shutdown, Subtask,
    SubtaskRun,
};
pub use compaction::{CONTINUE, filter_compacted, overflows};
pub use exclusive::Job;
pub use history::{CLEARED, INTERRUPTED, SUBTASK_BY_USER};
pub use input::{PartInput, PromptInput};
pub use recover::STOPPED;
pub use shell::ShellInput;
pub use step::MAX_STEPS;
pub use subtask::SUMMARIZE;
pub use title::{TITLE_REQUEST, clean_title, is_default_title};

pub(crate) use actor::{Reply, RunHandle};
pub(crate) use environment::civil_from_days as civil_date;
pub(crate) use host::ask_origin;
pub(crate) use recover::repair_dead_runs;
pub(crate) use writer::Writer;
