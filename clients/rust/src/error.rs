//! The crate's one error type.

use std::sync::Arc;
use std::time::Duration;

/// What a call can fail with: refused before it was sent, refused by the server (a variant per
/// refusal, read from the error reply's code), the server out of reach, or a reply of another
/// shape than the command answers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// An argument refused before anything was sent, worded as the server words it.
    InvalidArgument(String),
    /// `ERR ...`: the server refused the call (its arguments, or a command it does not know).
    Refused(String),
    /// `WRONGTYPE ...`: the key holds another type than the limiter's.
    WrongType(String),
    /// `CROSSSLOT ...`: a call's keys are in several cluster slots (the client refuses it first
    /// when it knows the server is a cluster).
    CrossSlot(String),
    /// `NOPERM ...`: the ACL user may not run the command or touch the key.
    NoPermission(String),
    /// `OOM ...`: the server is at `maxmemory` and refuses a new key.
    OutOfMemory(String),
    /// `READONLY ...`: the call reached a replica.
    ReadOnly(String),
    /// `NOSCRIPT` or `ERR Function not found` after a reload: the library went missing again.
    LibraryMissing(String),
    /// Any other error reply, with its code (`BUSY ...`, `LOADING ...`, `MOVED ...`).
    Server(String),
    /// The server has neither the module nor the Functions library, and the limiter was told not
    /// to load it.
    LibraryNotLoaded,
    /// A reply of another shape than the command answers (a server of another version, or a
    /// proxy in between that changed it).
    UnexpectedReply(String),
    /// No permit was free: `in_use` of `limit` are held, the first ends in `wait`.
    PermitUnavailable {
        /// Permits held now.
        in_use: i64,
        /// The limit.
        limit: i64,
        /// How long until the earliest lease ends.
        wait: Duration,
    },
    /// The server could not be reached or answered too late: the client's own error, kept whole.
    Unreachable(Arc<dyn std::error::Error + Send + Sync>),
    /// The hot limit was closed.
    Closed,
}

impl Error {
    /// An error reply, classified by its code (its first word).
    pub fn from_reply(message: impl Into<String>) -> Error {
        let message = message.into();
        let code = message.split_whitespace().next().unwrap_or("");
        match code {
            "ERR" if message.to_ascii_lowercase().contains("function not found") => Error::LibraryMissing(message),
            "ERR" => Error::Refused(message),
            "WRONGTYPE" => Error::WrongType(message),
            "CROSSSLOT" => Error::CrossSlot(message),
            "NOPERM" => Error::NoPermission(message),
            "OOM" => Error::OutOfMemory(message),
            "READONLY" => Error::ReadOnly(message),
            "NOSCRIPT" => Error::LibraryMissing(message),
            _ => Error::Server(message),
        }
    }

    /// The server's own words, for an error reply.
    pub fn server_message(&self) -> Option<&str> {
        match self {
            Error::Refused(m)
            | Error::WrongType(m)
            | Error::CrossSlot(m)
            | Error::NoPermission(m)
            | Error::OutOfMemory(m)
            | Error::ReadOnly(m)
            | Error::LibraryMissing(m)
            | Error::Server(m) => Some(m),
            _ => None,
        }
    }

    /// Whether the server was out of reach (what a fail-open or fail-closed mode acts on).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable(_))
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidArgument(m) => write!(f, "ratelimit: {m}"),
            Error::LibraryNotLoaded => f.write_str(
                "ratelimit: the server has neither the ratelimit module nor its Functions library \
                 (loadmodule .../libredis_ratelimit.so, or FUNCTION LOAD with LIBRARY_SOURCE)",
            ),
            Error::UnexpectedReply(m) => write!(f, "ratelimit: unexpected reply for {m}"),
            Error::PermitUnavailable { in_use, limit, wait } => {
                write!(f, "ratelimit: no permit available: {in_use} of {limit} in use, the first ends in {wait:?}")
            }
            Error::Unreachable(e) => write!(f, "ratelimit: the server is out of reach: {e}"),
            Error::Closed => f.write_str("ratelimit: the hot limit is closed"),
            other => f.write_str(other.server_message().unwrap_or_default()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Unreachable(e) => Some(e.as_ref() as &(dyn std::error::Error + 'static)),
            _ => None,
        }
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

pub(crate) fn unexpected_reply(what: &str, reply: &crate::Reply) -> Error {
    Error::UnexpectedReply(format!("{what}: {reply}"))
}
