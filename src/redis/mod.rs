//! The Redis glue: the one layer that touches the module API (`redis_module::raw`). Every `unsafe`
//! of the crate is here, each with a `// SAFETY:` comment. It hands the commands safe values: a
//! `Call` (arguments, keys, replies), a `Ctx`, a `StoredKey` (a value and its expiry, written in
//! one step with its effects), walks, events and configs. It uses the pure decisions of
//! `crate::core` and never the commands of `crate::commands`.

pub mod acl;
pub mod api;
pub mod call;
pub mod clock;
pub mod command;
pub mod config;
pub mod ctx;
pub mod events;
pub mod info;
pub mod key;
pub mod leaked;
pub mod lease_set;
pub mod register;
pub mod resetstat;
pub mod server;
pub mod settle_marks;
pub mod slot_migration;
pub mod stats;
pub mod tracking;
pub mod walk;
