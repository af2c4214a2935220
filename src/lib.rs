//! redis-ratelimit: atomic rate limiters as native Redis commands.
//!
//! Three layers, each in its folder, each using only the ones below it:
//! - `core`: the pure decisions (arguments, the fixed window, GCRA, the audit's filter, the
//!   guard's rules, what is stored), free of Redis and unit- and property-tested;
//! - `redis`: the glue, the one layer that touches the module API, and where every `unsafe` is;
//! - `commands`: the commands and the guard, safe code over the two, and the command table.

mod core;

// The glue and the commands are compiled out of unit tests: the module's allocator needs a
// running Redis.
#[cfg(not(test))]
mod commands;
#[cfg(not(test))]
mod redis;

/// The module: its commands, its configs, and what follows the configs given at load time.
#[cfg(not(test))]
static MODULE: redis::register::Module = redis::register::Module {
    commands: commands::COMMANDS,
    configs: &[&commands::guard::CONFIG, &commands::shadow::CONFIG],
    loaded: commands::guard::subscribe_when_ruled,
};

#[cfg(not(test))]
redis::register::module!(MODULE);
