//! Whose requests a rule counts: key extractors over a request's head.

use std::net::{IpAddr, SocketAddr};

use http::request::Parts;
use http::HeaderName;

/// A request's identity for a rule (`None`: the request is not limited by it).
pub trait KeyExtractor: Send + Sync + 'static {
    /// The identity of the request whose head is `parts`.
    fn extract(&self, parts: &Parts) -> Option<String>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Option<String> {
        self(parts)
    }
}

/// The peer's address a server put in the request's extensions: axum's `ConnectInfo` (feature
/// `axum`, served `into_make_service_with_connect_info::<SocketAddr>()`), tonic's
/// `TcpConnectInfo` (feature `tonic`), or a [`SocketAddr`] of your own (hyper).
pub fn peer_addr(parts: &Parts) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(addr)) = parts.extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(addr.ip());
    }
    #[cfg(feature = "tonic")]
    if let Some(addr) = parts.extensions.get::<tonic::transport::server::TcpConnectInfo>().and_then(|i| i.remote_addr())
    {
        return Some(addr.ip());
    }
    parts.extensions.get::<SocketAddr>().map(SocketAddr::ip)
}

/// A range of addresses: `10.0.0.0/8`, `fd00::/8`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    network: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for IpRange {
    type Err = String;

    fn from_str(text: &str) -> Result<IpRange, String> {
        let bad = || format!("not an address or a CIDR range: {text:?}");
        let (address, prefix) = text.split_once('/').map_or((text, None), |(a, p)| (a, Some(p)));
        let network: IpAddr = address.trim().parse().map_err(|_| bad())?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(p) => p.trim().parse::<u8>().ok().filter(|&p| p <= bits).ok_or_else(bad)?,
        };
        Ok(IpRange { network, prefix })
    }
}

impl IpRange {
    /// Whether `ip` is in the range (an IPv4-mapped IPv6 address as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (a, b, bits) = match (self.network, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => (u128::from(u32::from(n)), u128::from(u32::from(i)), 32),
            (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
            _ => return false,
        };
        let shift = bits - u32::from(self.prefix);
        shift >= bits || (a >> shift) == (b >> shift)
    }
}

/// The client's address: the peer's, or, when the peer is a proxy you name, the rightmost
/// `X-Forwarded-For` hop that is not one of your proxies. A client can put anything at the left
/// of that header; only the hops your proxies appended are theirs.
#[derive(Debug, Clone, Default)]
pub struct ClientIp {
    trusted: Vec<IpRange>,
}

impl ClientIp {
    /// The peer's address, no forwarding header read.
    pub fn new() -> ClientIp {
        ClientIp::default()
    }

    /// Reads `X-Forwarded-For` when the peer is in one of `proxies` (addresses or CIDR ranges).
    /// Panics on a range that does not parse: a configuration error, seen at start-up.
    pub fn trusting<I: IntoIterator<Item = S>, S: AsRef<str>>(proxies: I) -> ClientIp {
        let trusted = proxies
            .into_iter()
            .map(|p| p.as_ref().parse().unwrap_or_else(|e: String| panic!("ClientIp: {e}")))
            .collect();
        ClientIp { trusted }
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|range| range.contains(ip))
    }

    /// The client's address for a request.
    pub fn client(&self, parts: &Parts) -> Option<IpAddr> {
        let mut client = peer_addr(parts)?;
        if !self.is_trusted(client) {
            return Some(client);
        }
        let hops = parts.headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>();
        for hop in hops.iter().rev().flat_map(|v| v.rsplit(',')) {
            match hop.trim().parse::<IpAddr>() {
                Ok(ip) if self.is_trusted(ip) => client = ip,
                Ok(ip) => return Some(ip),
                // A hop that is no address: the proxies' chain ends there.
                Err(_) => return Some(client),
            }
        }
        Some(client)
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Option<String> {
        Some(self.client(parts).map_or_else(|| "unknown".to_string(), |ip| ip.to_string()))
    }
}

/// A request header's value (`x-api-key`, say); a request without it is not limited by the rule.
#[derive(Debug, Clone)]
pub struct Header(pub HeaderName);

impl KeyExtractor for Header {
    fn extract(&self, parts: &Parts) -> Option<String> {
        parts.headers.get(&self.0).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).map(str::to_string)
    }
}

/// The request's path: each path its own limit.
#[derive(Debug, Clone, Copy, Default)]
pub struct PathKey;

impl KeyExtractor for PathKey {
    fn extract(&self, parts: &Parts) -> Option<String> {
        Some(parts.uri.path().to_string())
    }
}

/// One limit for every request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract(&self, _: &Parts) -> Option<String> {
        Some("all".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(peer: &str, forwarded: &[&str]) -> Parts {
        let mut builder = http::Request::builder();
        for value in forwarded {
            builder = builder.header("x-forwarded-for", *value);
        }
        let (mut parts, ()) = builder.body(()).unwrap().into_parts();
        parts.extensions.insert(peer.parse::<SocketAddr>().unwrap());
        parts
    }

    #[test]
    fn forwarded_hops_only_from_trusted_proxies() {
        let ip = ClientIp::trusting(["10.0.0.0/8", "::1"]);
        // The client wrote 6.6.6.6 itself; the proxy appended what it saw.
        assert_eq!(ip.extract(&request("10.1.2.3:1", &["6.6.6.6, 203.0.113.7"])).unwrap(), "203.0.113.7");
        assert_eq!(ip.extract(&request("10.1.2.3:1", &["6.6.6.6", "203.0.113.7, 10.9.9.9"])).unwrap(), "203.0.113.7");
        // Not from a proxy: the header is the client's own words.
        assert_eq!(ip.extract(&request("198.51.100.1:1", &["6.6.6.6"])).unwrap(), "198.51.100.1");
        assert_eq!(ip.extract(&request("[::1]:1", &["2001:db8::1"])).unwrap(), "2001:db8::1");
        assert_eq!(ip.extract(&request("10.0.0.1:1", &[])).unwrap(), "10.0.0.1");
        assert_eq!(ClientIp::new().extract(&request("10.0.0.1:1", &["1.2.3.4"])).unwrap(), "10.0.0.1");
        assert!("10.0.0.0/33".parse::<IpRange>().is_err());
        assert!("0.0.0.0/0".parse::<IpRange>().unwrap().contains("8.8.8.8".parse().unwrap()));
    }
}
