//! Integration tests of taskforce-actors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
