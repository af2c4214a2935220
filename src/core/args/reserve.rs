//! The reservations' arguments: `RATELIMIT.SETTLE` (RESERVE itself is an option of the limiters).

use crate::core::decimal::parse_i64;

use super::error::ArgError;

/// `RATELIMIT.SETTLE key [key ...] reservation used`, validated but for the reservation, which
/// is read against its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleArgs<'a> {
    /// How many keys the call names (from the first argument on).
    pub keys: usize,
    pub reservation: &'a [u8],
    pub used: i64,
}

/// `key reservation used`, after the command name.
pub fn parse_settle<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<SettleArgs<'a>, ArgError> {
    let args: Vec<&[u8]> = args.into_iter().collect();
    let [.., reservation, used] = args[..] else { return Err(ArgError::Arity("ratelimit.settle")) };
    if args.len() < 3 {
        return Err(ArgError::Arity("ratelimit.settle"));
    }
    let used = parse_i64(used).filter(|&u| u >= 0).ok_or(ArgError::Negative("used"))?;
    Ok(SettleArgs { keys: args.len() - 2, reservation, used })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::args::testing::{hit, ok, words, SECOND};
    use crate::core::args::window::HitArgs;
    use crate::core::args::{parse_gcra, parse_hit};
    use crate::core::calendar::{Window, Zone};

    #[test]
    fn a_negative_cost_gives_back_and_reserve_needs_a_positive_one() {
        assert_eq!(hit("k 10 60 COST -2"), ok(10, 60_000, -2));
        assert_eq!(hit("k 10 60 COST -9223372036854775808"), ok(10, 60_000, i64::MIN));
        assert_eq!(
            parse_hit(words("k 10 60 reserve COST 3")),
            Ok(HitArgs {
                limit: 10,
                cost: 3,
                window: Window::Rolling(60_000),
                zone: Zone::Offset(0),
                partial: false,
                reserve: true
            })
        );
        assert!(!parse_hit(words("k 10 60")).unwrap().reserve);
        assert_eq!(parse_settle(words("k h:x 5")), Ok(SettleArgs { keys: 1, reservation: b"h:x", used: 5 }));
        assert_eq!(
            parse_settle(words("a b c h:x,h:y 5")),
            Ok(SettleArgs { keys: 3, reservation: b"h:x,h:y", used: 5 })
        );
        assert_eq!(parse_settle(words("k r 0")).map(|a| a.used), Ok(0));
        for line in ["k r -1", "k r x", "k r 1.5", "k r +1", "k r 1 -2"] {
            assert_eq!(parse_settle(words(line)), Err(ArgError::Negative("used")), "{line}");
        }
        for line in ["k r", "k", ""] {
            assert_eq!(parse_settle(words(line)), Err(ArgError::Arity("ratelimit.settle")), "{line}");
        }
        let gcra = |line| parse_gcra(words(line));
        assert_eq!(gcra("k 4 1 1 TOKENS -2").map(|a| (a.rate.tokens, a.rate.increment_ns)), Ok((-2, -2 * SECOND)));
        assert_eq!(gcra("k 4 1 1 TOKENS 0"), Err(ArgError::Zero("TOKENS")));
        assert_eq!(gcra("k 4 1 1 TOKENS -2 RESERVE"), Err(ArgError::ReserveNeeds("TOKENS")));
        assert!(gcra("k 4 1 1 RESERVE").unwrap().reserve);
        assert!(gcra("k 4 1 1 partial TOKENS 3").unwrap().partial);
        assert_eq!(
            gcra("k 4 1 1 TOKENS -9223372036854775808"),
            Err(ArgError::Overflow("TOKENS * period / tokens_per_period"))
        );
    }
}
