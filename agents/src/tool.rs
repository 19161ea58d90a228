//! Tools an agent's model can call. This layer knows their ids; their code lands with the runtime.

/// The ids of the built-in tools, in the order they are offered to a model.
pub const BUILTIN_TOOLS: &[&str] = &[
    "bash",
    "read",
    "write",
    "edit",
    "list",
    "glob",
    "grep",
    "todowrite",
    "todoread",
    "task",
];
