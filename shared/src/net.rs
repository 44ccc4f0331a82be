//! Client addresses and IP allow-lists.

use std::net::IpAddr;

use ipnet::IpNet;

/// The client's address: the socket peer, unless the peer is a trusted proxy and sent
/// `header_value` (an `X-Forwarded-For`-style list), in which case the right-most address
/// that is not itself a trusted proxy. Unparseable entries stop the walk (the peer wins).
pub fn client_ip(peer: IpAddr, header_value: Option<&str>, trusted: &[IpNet]) -> IpAddr {
    let peer = canonical(peer);
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(&ip));
    if !is_trusted(peer) {
        return peer;
    }
    let Some(list) = header_value else { return peer };
    let mut client = peer;
    for entry in list.rsplit(',') {
        let Ok(ip) = entry.trim().parse::<IpAddr>() else { break };
        client = canonical(ip);
        if !is_trusted(client) {
            break;
        }
    }
    client
}

/// Maps IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) to IPv4, so allow-lists written
/// in IPv4 match dual-stack sockets.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// Whether `ip` may use a token restricted to `allowlist` (an empty list allows all).
pub fn allowed(ip: IpAddr, allowlist: &[IpNet]) -> bool {
    allowlist.is_empty() || allowlist.iter().any(|n| n.contains(&canonical(ip)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn untrusted_peer_wins_over_header() {
        let ip = client_ip("198.51.100.7".parse().unwrap(), Some("203.0.113.9"), &nets(&["10.0.0.0/8"]));
        assert_eq!(ip.to_string(), "198.51.100.7");
    }

    #[test]
    fn trusted_proxy_chain_is_walked_from_the_right() {
        let trusted = nets(&["10.0.0.0/8"]);
        let ip = client_ip("10.0.0.2".parse().unwrap(), Some("1.1.1.1, 203.0.113.9, 10.0.0.5"), &trusted);
        assert_eq!(ip.to_string(), "203.0.113.9", "a spoofed left-most entry is ignored");
        let ip = client_ip("10.0.0.2".parse().unwrap(), None, &trusted);
        assert_eq!(ip.to_string(), "10.0.0.2");
        let ip = client_ip("10.0.0.2".parse().unwrap(), Some("garbage"), &trusted);
        assert_eq!(ip.to_string(), "10.0.0.2");
    }

    #[test]
    fn allowlist_matching() {
        let list = nets(&["203.0.113.0/24", "2001:db8::/32"]);
        assert!(allowed("203.0.113.44".parse().unwrap(), &list));
        assert!(allowed("::ffff:203.0.113.44".parse().unwrap(), &list));
        assert!(allowed("2001:db8::1".parse().unwrap(), &list));
        assert!(!allowed("198.51.100.1".parse().unwrap(), &list));
        assert!(allowed("198.51.100.1".parse().unwrap(), &[]));
    }
}
