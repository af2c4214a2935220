//! The one version number: the crate's (Cargo.toml), which `MODULE LIST` shows encoded as Redis
//! modules encode theirs (major * 10000 + minor * 100 + patch) and `COMMAND DOCS` shows as the
//! commands' `since`.

use std::ffi::CStr;

/// `1.0.0`, from Cargo.toml.
pub const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(version) => version,
    Err(_) => panic!("the crate's version holds a NUL"),
};

/// `VERSION` as `RedisModule_Init` takes it: 1.0.0 is 10000, 2.4.3 would be 20403.
pub const MODULE_VERSION: i32 = encode(env!("CARGO_PKG_VERSION").as_bytes());

/// `major.minor.patch` as major * 10000 + minor * 100 + patch (a pre-release suffix is ignored).
const fn encode(version: &[u8]) -> i32 {
    let (mut parts, mut part, mut i) = ([0i32; 3], 0, 0);
    while i < version.len() && part < 3 {
        match version[i] {
            b'.' => part += 1,
            digit @ b'0'..=b'9' => parts[part] = parts[part] * 10 + (digit - b'0') as i32,
            _ => break,
        }
        i += 1;
    }
    parts[0] * 10_000 + parts[1] * 100 + parts[2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_encode_as_redis_modules_do() {
        assert_eq!(encode(b"1.0.0"), 10_000);
        assert_eq!(encode(b"2.4.3"), 20_403);
        assert_eq!(encode(b"0.12.1-rc1"), 1_201);
        assert_eq!(VERSION.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        assert_eq!(MODULE_VERSION, encode(VERSION.to_bytes()));
    }
}
