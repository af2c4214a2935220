//! The integration tests, one module a file, built as one test binary: one compile of what they
//! share, one link. Which modules run on which server is the Makefile's test plan (`make test`
//! runs each module alone, `scripts/test-times.py suite`); `cargo test --release --test
//! integration hit::` runs one.

mod acl;
mod adaptive;
mod audit;
mod cluster;
mod conformance;
mod docs;
mod functions;
mod gcra;
mod guard;
mod hit;
mod hitall;
mod hostile_input;
mod lease;
mod llm_tokens;
mod monitoring;
mod peek;
mod persistence;
mod replication;
mod server_features;
mod settle;
mod shadow;
mod slide;
mod stress;
mod top;
