//! Integration tests of taskforce-agents: configuration files on disk, resolved agents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
