//! End-to-end tests of the `taskforce` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
