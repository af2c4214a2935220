//! Shadow mode's key prefixes, from the `ratelimit.shadow` config: under them a limiter call that
//! would be denied is admitted and counted as admitted, and the would-be denial is reported
//! instead (INFO, RATELIMIT.TOP SHADOWED). No Redis in here.
//!
//! Syntax: `prefix [prefix ...]`, separated by spaces; a prefix is literal bytes (glob characters
//! included) and may not contain a space. The empty string means none: shadow mode is off.

/// Validated prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefixes {
    prefixes: Vec<Vec<u8>>,
}

impl Prefixes {
    /// None: every limit is enforced.
    pub const fn none() -> Prefixes {
        Prefixes { prefixes: Vec::new() }
    }

    pub fn parse(text: &[u8]) -> Result<Prefixes, String> {
        let mut prefixes: Vec<Vec<u8>> = Vec::new();
        for prefix in text.split(|&b| b == b' ').filter(|w| !w.is_empty()) {
            if prefixes.iter().any(|p| p == prefix) {
                return Err(format!("prefix '{}' is given twice", String::from_utf8_lossy(prefix)));
            }
            prefixes.push(prefix.to_vec());
        }
        Ok(Prefixes { prefixes })
    }

    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Whether `key` is under a shadowed prefix.
    pub fn shadow(&self, key: &[u8]) -> bool {
        self.prefixes.iter().any(|p| key.starts_with(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let p = Prefixes::parse(b"  rl:new: *beta  ").unwrap();
        assert!(p.shadow(b"rl:new:user:1") && p.shadow(b"*beta:x") && !p.shadow(b"rl:old:1") && !p.shadow(b"beta"));
        assert!(Prefixes::parse(b"").unwrap().is_empty() && Prefixes::parse(b"   ").unwrap().is_empty());
        assert_eq!(Prefixes::parse(b"a b a"), Err("prefix 'a' is given twice".into()));
        assert!(!Prefixes::none().shadow(b"anything"));
    }
}
