//! `taskforce serve --cluster` processes sharing one PostgreSQL database
//! (`TASKFORCE_TEST_POSTGRES_URL`) and one NATS (`TASKFORCE_TEST_NATS_URL`), driven over HTTP
//! as a client would. Without those variables every test here says why it skips and passes.

mod dead_node_asks;
mod dead_node_background;
mod fan_out;
mod support;
