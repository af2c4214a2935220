//! The one PRNG of the tests and the bench: seeded, so that a failure can be replayed.

/// A small, seeded PRNG (xorshift64) for the fuzz tests, so that a failure can be replayed.
pub struct Rng(u64);

impl Rng {
    /// Seeded with `seed` (never 0: xorshift would stay there).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// Seeded from `RATELIMIT_FUZZ_SEED` when set, else from the clock; the seed is printed.
    pub fn from_env() -> (Rng, u64) {
        let seed = std::env::var("RATELIMIT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        });
        eprintln!("RATELIMIT_FUZZ_SEED={seed}");
        (Rng(seed), seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
