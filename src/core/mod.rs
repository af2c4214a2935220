//! The pure decisions: every rule of the commands and the guard, free of Redis types and FFI, so
//! that each is unit- and property-tested here. The glue (`crate::redis`) and the commands
//! (`crate::commands`) call into this layer; nothing here calls out of it.

pub mod adaptive;
pub mod algorithm;
pub mod args;
pub mod audit_filter;
pub mod calendar;
pub mod decimal;
pub mod gcra;
pub mod guard_rules;
pub mod lease;
pub mod reservation;
pub mod settle_marks;
pub mod shadow;
pub mod slide;
pub mod space_saving;
pub mod stored;
pub mod top;
pub mod version;
pub mod window;
