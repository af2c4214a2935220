//! The test kit of redis-ratelimit's integration tests and benchmark: real servers, the commands
//! as clients send them, timing and load tools, one PRNG. A crate of its own, so that each test
//! uses the part it needs.

mod checks;
mod clock;
mod commands;
mod library;
mod load;
mod rng;
mod servers;

pub use checks::*;
pub use clock::*;
pub use commands::*;
pub use library::*;
pub use load::*;
pub use rng::*;
pub use servers::*;
