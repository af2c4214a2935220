//! The guard's rules, from the `ratelimit.guard` config: which key prefixes may never hold a
//! counter without a TTL, and the window such a counter is given. No Redis in here.
//!
//! Syntax: `prefix window [prefix window ...]`, separated by spaces; a prefix is literal bytes (glob
//! characters included) and may not contain a space; a window is whole seconds (`60`) or
//! milliseconds with `ms` (`1500ms`). The empty string means no rules: the guard is off.

use crate::core::decimal::parse_i64;
use crate::core::window::MAX_WINDOW_MS;

/// Validated rules, the longest prefix first so that the most specific rule decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<(Vec<u8>, i64)>,
}

impl Rules {
    /// No rules: the guard is off.
    pub const fn none() -> Rules {
        Rules { rules: Vec::new() }
    }

    pub fn parse(text: &[u8]) -> Result<Rules, String> {
        let words: Vec<&[u8]> = text.split(|&b| b == b' ').filter(|w| !w.is_empty()).collect();
        if !words.len().is_multiple_of(2) {
            return Err("the guard takes prefix/window pairs: 'prefix window [prefix window ...]'".into());
        }
        let mut rules: Vec<(Vec<u8>, i64)> = Vec::with_capacity(words.len() / 2);
        for pair in words.chunks(2) {
            let (prefix, window) = (pair[0], pair[1]);
            if rules.iter().any(|(p, _)| p == prefix) {
                return Err(format!("prefix '{}' is given twice", String::from_utf8_lossy(prefix)));
            }
            let window_ms = window_ms(window).ok_or_else(|| {
                format!(
                    "window '{}' of prefix '{}' must be whole seconds >= 1 or milliseconds with 'ms' (e.g. 60 or 1500ms)",
                    String::from_utf8_lossy(window),
                    String::from_utf8_lossy(prefix)
                )
            })?;
            rules.push((prefix.to_vec(), window_ms));
        }
        rules.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        Ok(Rules { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The window (ms) of the longest guarded prefix of `key`, if any.
    pub fn window_for(&self, key: &[u8]) -> Option<i64> {
        self.rules.iter().find(|(prefix, _)| key.starts_with(prefix)).map(|&(_, window)| window)
    }
}

fn window_ms(word: &[u8]) -> Option<i64> {
    let (digits, scale) = match word.strip_suffix(b"ms") {
        Some(digits) => (digits, 1),
        None => (word, 1000),
    };
    parse_i64(digits).filter(|&n| n >= 1).and_then(|n| n.checked_mul(scale)).filter(|&ms| ms <= MAX_WINDOW_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_of_prefix_and_window() {
        let rules = Rules::parse(b"rl: 60 api:{ 1500ms").unwrap();
        assert_eq!(rules.window_for(b"rl:user:1"), Some(60_000));
        assert_eq!(rules.window_for(b"api:{42}:x"), Some(1_500));
        assert_eq!(rules.window_for(b"other"), None);
        assert_eq!(rules.window_for(b"rl"), None);
    }

    #[test]
    fn the_longest_prefix_decides() {
        let rules = Rules::parse(b"rl: 60 rl:burst: 1").unwrap();
        assert_eq!(rules.window_for(b"rl:burst:7"), Some(1_000));
        assert_eq!(rules.window_for(b"rl:day:7"), Some(60_000));
    }

    #[test]
    fn prefixes_are_literal_and_spaces_are_separators() {
        let rules = Rules::parse(b"  a*  10   b? 20 ").unwrap();
        assert_eq!(rules.window_for(b"a*1"), Some(10_000));
        assert_eq!(rules.window_for(b"ab"), None, "no glob matching");
        assert_eq!(rules.window_for(b"b?"), Some(20_000));
    }

    #[test]
    fn empty_is_off() {
        assert_eq!(Rules::parse(b"").unwrap(), Rules::none());
        assert!(Rules::none().is_empty());
        assert!(Rules::parse(b"   ").unwrap().is_empty());
        assert!(!Rules::parse(b"x 1").unwrap().is_empty());
    }

    #[test]
    fn bad_rules_are_refused() {
        for bad in ["rl:", "rl: 60 api:", "rl: 0", "rl: -5", "rl: x", "rl: 1.5", "rl: 60s", "rl: 0ms", "rl: 60 rl: 30"]
        {
            assert!(Rules::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        assert!(Rules::parse(b"rl: 9223372036854775807").is_err(), "too large");
        let message = Rules::parse(b"rl: soon").unwrap_err();
        assert!(message.contains("'soon'") && message.contains("'rl:'"), "{message}");
    }
}
