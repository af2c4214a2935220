//! The Redis Functions library (functions/ratelimit.lua), the one place the tests and the bench
//! read it from; and `RATELIMIT_IMPL=library`, which runs the limiter tests against it.

use redis::Connection;

/// `RATELIMIT_IMPL=library`: the limiter tests run against the Redis Functions library
/// (functions/ratelimit.lua) instead of the module: servers that would load the module load the
/// library instead, and `limiter` calls it. `make test` runs those tests both ways.
pub fn library() -> bool {
    std::env::var("RATELIMIT_IMPL").is_ok_and(|v| v == "library")
}

/// The library's source.
pub const LIBRARY: &str = include_str!("../../functions/ratelimit.lua");

/// Loads the library into the server at `con` (replacing any earlier version).
pub fn load_library(con: &mut Connection) {
    let _: String = redis::cmd("FUNCTION").arg(&["LOAD", "REPLACE", LIBRARY]).query(con).unwrap();
}

/// A limiter command (`RATELIMIT.HIT`, `.PEEK`, `.HITALL`, `.GCRA`) for the implementation under
/// test; the caller adds the arguments after the command name. For the library it is `FCALL
/// ratelimit_hit 1` (HITALL's own numkeys comes first in its arguments, as FCALL's does).
pub fn limiter(command: &str) -> redis::Cmd {
    if !library() {
        return redis::cmd(command);
    }
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(command.to_ascii_lowercase().replace('.', "_"));
    if !command.eq_ignore_ascii_case("RATELIMIT.HITALL") {
        cmd.arg(1);
    }
    cmd
}

/// Tests of what only the module does (INFO counters, COMMAND DOCS, OOM for new counters only,
/// CL.THROTTLE...) return early under `RATELIMIT_IMPL=library`, saying so.
pub fn module_only(what: &str) -> bool {
    if library() {
        eprintln!("skipped with the library (a documented difference): {what}");
    }
    library()
}
