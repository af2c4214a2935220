//! A server's wall clock stood where a test puts it: `clock/clock.c`, built here once with the
//! machine's C compiler and preloaded into the server (`Config::clock`), reads the Unix ms the
//! test last wrote with `TestClock::set`. Calendar windows are tested at the end of a month and
//! across daylight-saving changes this way, without waiting for either.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use redis::Connection;

use crate::checks::wait_for;
use crate::commands::server_ms;

/// The preloadable clock, compiled on first use into target/test-clock/.
pub fn clock_library() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let kit = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = kit.join("../target/test-clock");
        std::fs::create_dir_all(&dir).expect("create target/test-clock");
        let library = dir.join("libclock.so");
        // Test binaries run side by side: each builds its own copy and renames it into place.
        let own = dir.join(format!("libclock.{}.so", std::process::id()));
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
            .arg(&own)
            .arg(kit.join("clock/clock.c"))
            .status()
            .expect("run cc (the C compiler) to build the test clock");
        assert!(status.success(), "cc failed to build testkit/clock/clock.c");
        std::fs::rename(&own, &library).expect("move the test clock into place");
        library
    })
}

/// The file a server's clock reads.
pub struct TestClock {
    pub file: PathBuf,
}

impl TestClock {
    /// A clock in `dir`, frozen at `unix_ms`.
    pub fn at(dir: &Path, unix_ms: i64) -> TestClock {
        let clock = TestClock { file: dir.join("clock") };
        clock.set(unix_ms);
        clock
    }

    /// Moves the clock on to `unix_ms` and waits until the server at `con` reads it: Valkey 9
    /// times a command by the clock it read before it, which may be the old one.
    pub fn move_to(&self, con: &mut Connection, unix_ms: i64) {
        self.set(unix_ms);
        wait_for("the server to read the test clock", Duration::from_secs(30), || server_ms(con) >= unix_ms);
    }

    /// Stands the clock at `unix_ms` (written whole: the server never reads half a number).
    pub fn set(&self, unix_ms: i64) {
        let next = self.file.with_extension("next");
        std::fs::write(&next, unix_ms.to_string()).expect("write the test clock");
        std::fs::rename(&next, &self.file).expect("set the test clock");
    }
}
