//! Why a command's arguments were refused, in the words of the error reply.

/// Why the arguments were refused; `message()` is the Redis error reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgError {
    /// Too few arguments, or a walk command's positional ones followed by no option name.
    Arity(&'static str),
    /// The named argument is not an integer >= 1.
    NotPositive(&'static str),
    /// The named argument is not an integer >= 0.
    Negative(&'static str),
    /// The named argument is not an integer other than 0.
    Zero(&'static str),
    /// RESERVE with the named amount below 1 (a give-back reserves nothing), or without it.
    ReserveNeeds(&'static str),
    /// PARTIAL with the named amount below 1 (a give-back).
    PartialNeeds(&'static str),
    /// HITALL's TOKENS names more keys than the call has, or fewer than one.
    TokenKeys,
    /// The named length of time exceeds 2^62 ms.
    TooLarge(&'static str),
    /// A lease id that is empty or longer than the bound it holds.
    IdLength(usize),
    MissingValue(&'static str),
    Repeated(&'static str),
    /// An extra argument that is no option of the command; holds the ones it has.
    UnknownOption(&'static str),
    /// HITALL named one key twice.
    DuplicateKey,
    /// Two options that exclude each other.
    Exclusive(&'static str, &'static str),
    // GCRA's errors, worded as Redis's GCRA command words them.
    /// Not a decimal integer in the `i64` range.
    NotAnInteger(&'static str),
    /// An integer below its minimum.
    OutOfRange(&'static str, i64),
    PeriodNotPositive,
    PeriodNotFloat,
    Missing(&'static str),
    /// The product named would not fit in 64 bits of nanoseconds (with room for the clock).
    Overflow(&'static str),
    /// TZ with no calendar window.
    ZoneNeedsCalendar,
    /// TZ names no zone.
    UnknownZone,
    /// An option given without the one it needs.
    Needs(&'static str, &'static str),
    /// An adaptive limit's bounds out of order.
    Bounds,
    /// A report's outcome that is neither OK nor THROTTLED.
    Outcome,
}

impl ArgError {
    pub fn message(self) -> String {
        match self {
            ArgError::Arity(command) => format!("ERR wrong number of arguments for '{command}' command"),
            ArgError::NotPositive(name) => format!("ERR {name} must be an integer >= 1"),
            ArgError::Negative(name) => format!("ERR {name} must be an integer >= 0"),
            ArgError::Zero(name) => format!("ERR {name} must be a nonzero integer"),
            ArgError::ReserveNeeds(name) => format!("ERR RESERVE needs {name} >= 1"),
            ArgError::PartialNeeds(name) => format!("ERR PARTIAL needs {name} >= 1"),
            ArgError::TokenKeys => "ERR TOKENS' key count must be between 1 and numkeys".into(),
            ArgError::TooLarge(name) => format!("ERR {name} is too large"),
            ArgError::IdLength(max) => format!("ERR ID must be 1 to {max} bytes"),
            ArgError::MissingValue(name) => format!("ERR syntax error: {name} needs a value"),
            ArgError::Repeated(name) => format!("ERR syntax error: {name} given more than once"),
            ArgError::UnknownOption(known) => format!("ERR syntax error: unknown option (expected {known})"),
            ArgError::DuplicateKey => "ERR each key may be given only once".to_string(),
            ArgError::Exclusive(a, b) => format!("ERR syntax error: {a} and {b} cannot be given together"),
            ArgError::NotAnInteger(name) => format!("ERR {name} is not an integer or out of range"),
            ArgError::OutOfRange(name, min) => format!("ERR {name} is out of range, must be >= {min}"),
            ArgError::PeriodNotPositive => "ERR period must be > 0".to_string(),
            ArgError::PeriodNotFloat => "ERR period is not a valid float".to_string(),
            ArgError::Missing(name) => format!("ERR Missing {name} value"),
            ArgError::Overflow(what) => format!("ERR {what} would cause an overflow"),
            ArgError::ZoneNeedsCalendar => "ERR TZ needs a calendar window (day, week, month or year)".to_string(),
            ArgError::Needs(a, b) => format!("ERR syntax error: {a} needs {b}"),
            ArgError::Bounds => "ERR floor <= start <= ceiling must hold".to_string(),
            ArgError::Outcome => "ERR outcome must be OK or THROTTLED".to_string(),
            ArgError::UnknownZone => {
                "ERR TZ must be UTC, an offset such as +05:30, or a time zone name such as Europe/Paris".to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        assert_eq!(
            ArgError::Arity("ratelimit.hit").message(),
            "ERR wrong number of arguments for 'ratelimit.hit' command"
        );
        assert_eq!(ArgError::NotPositive("COST").message(), "ERR COST must be an integer >= 1");
        assert_eq!(ArgError::Negative("LIMIT").message(), "ERR LIMIT must be an integer >= 0");
        assert_eq!(ArgError::TooLarge("window").message(), "ERR window is too large");
        assert_eq!(ArgError::MissingValue("COST").message(), "ERR syntax error: COST needs a value");
        assert_eq!(ArgError::Repeated("MS").message(), "ERR syntax error: MS given more than once");
        assert_eq!(
            ArgError::UnknownOption("COST or MS").message(),
            "ERR syntax error: unknown option (expected COST or MS)"
        );
        assert_eq!(ArgError::DuplicateKey.message(), "ERR each key may be given only once");
    }
}
