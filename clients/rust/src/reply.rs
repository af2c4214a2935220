//! A server's reply as the codec reads it, whatever client carried it: each transport turns its
//! own value type into this one.

/// One reply (or one element of one), RESP2 and RESP3 alike.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// A null (RESP2's null bulk string or array, RESP3's null).
    Nil,
    /// An integer.
    Int(i64),
    /// A bulk, simple or verbatim string.
    Text(Vec<u8>),
    /// An array, set or push.
    Array(Vec<Reply>),
    /// A RESP3 map, as its pairs in order.
    Map(Vec<(Reply, Reply)>),
    /// A RESP3 boolean.
    Bool(bool),
    /// A RESP3 double.
    Double(f64),
    /// An error reply nested in another reply (a top-level one is an [`Error`](crate::Error)).
    Error(String),
}

impl Reply {
    /// The reply as an integer (a RESP3 boolean as 0 or 1).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            Reply::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The reply as UTF-8 text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Reply::Text(bytes) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }

    /// The reply's elements, if it is an array.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The field `name` of a map reply: a RESP3 map, or RESP2's flat array of names and values.
    pub fn field(&self, name: &str) -> Option<&Reply> {
        match self {
            Reply::Map(pairs) => pairs.iter().find(|(k, _)| k.as_text() == Some(name)).map(|(_, v)| v),
            Reply::Array(items) => {
                items.chunks_exact(2).find(|pair| pair[0].as_text() == Some(name)).map(|pair| &pair[1])
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Nil => f.write_str("nil"),
            Reply::Int(n) => write!(f, "{n}"),
            Reply::Text(bytes) => write!(f, "{:?}", String::from_utf8_lossy(bytes)),
            Reply::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Reply::Map(pairs) => {
                f.write_str("{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Reply::Bool(b) => write!(f, "{b}"),
            Reply::Double(d) => write!(f, "{d}"),
            Reply::Error(e) => write!(f, "(error) {e}"),
        }
    }
}
