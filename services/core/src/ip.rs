//! Client addresses and IP allow-lists.

use std::net::IpAddr;

use ipnet::IpNet;

/// The client's address: the socket peer, unless the peer is a trusted proxy, in which
/// case the right-most address of the `X-Forwarded-For`-style list that is not itself a
/// trusted proxy. `header_lines` are every line of that header, in order: proxies such
/// as HAProxy add their own line after the client's, so the lines are one list.
///
/// `None` when it cannot be told, which callers treat as "not allowed": the peer is a
/// trusted proxy and the header is missing, not ASCII, or has an entry that is not an
/// address (the peer itself is the proxy, never the client).
pub fn client_ip(peer: IpAddr, header_lines: &[&[u8]], trusted: &[IpNet]) -> Option<IpAddr> {
    let peer = canonical(peer);
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(&ip));
    if !is_trusted(peer) {
        return Some(peer);
    }
    let mut entries = Vec::new();
    for line in header_lines {
        let line = std::str::from_utf8(line).ok().filter(|l| l.is_ascii())?;
        entries.extend(line.split(','));
    }
    let mut client = None;
    for entry in entries.iter().rev() {
        let ip = canonical(entry.trim().parse::<IpAddr>().ok()?);
        client = Some(ip);
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

/// Whether the client at `ip` may use a token restricted to `allowlist` (as stored; an
/// empty list allows all). A list with entries of which none parses allows nobody, and
/// an address that could not be told (`None`) is allowed only by an empty list.
pub fn allowed_by(ip: Option<IpAddr>, allowlist: &[String]) -> bool {
    if allowlist.is_empty() {
        return true;
    }
    let nets: Vec<IpNet> = allowlist.iter().filter_map(|n| n.parse().ok()).collect();
    !nets.is_empty() && ip.is_some_and(|ip| allowed(ip, &nets))
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

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn untrusted_peer_wins_over_header() {
        let got = client_ip(ip("198.51.100.7"), &[b"203.0.113.9"], &nets(&["10.0.0.0/8"]));
        assert_eq!(got, Some(ip("198.51.100.7")));
    }

    #[test]
    fn trusted_proxy_chain_is_walked_from_the_right() {
        let trusted = nets(&["10.0.0.0/8"]);
        let got = client_ip(ip("10.0.0.2"), &[b"1.1.1.1, 203.0.113.9, 10.0.0.5"], &trusted);
        assert_eq!(got, Some(ip("203.0.113.9")), "a spoofed left-most entry is ignored");
    }

    #[test]
    fn every_header_line_counts_as_one_list() {
        let trusted = nets(&["10.0.0.0/8"]);
        // HAProxy appends its own line: the client's spoofed line comes first.
        let got = client_ip(ip("10.0.0.2"), &[b"203.0.113.9", b"198.51.100.7"], &trusted);
        assert_eq!(got, Some(ip("198.51.100.7")), "the proxy's line is the right-most");
        let got = client_ip(ip("10.0.0.2"), &[b"203.0.113.9", b"198.51.100.7, 10.0.0.9"], &trusted);
        assert_eq!(got, Some(ip("198.51.100.7")));
    }

    #[test]
    fn a_trusted_peer_without_a_readable_header_is_no_client() {
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &[], &trusted), None, "missing");
        assert_eq!(client_ip(ip("10.0.0.2"), &[b"garbage"], &trusted), None, "not an address");
        assert_eq!(client_ip(ip("10.0.0.2"), &[b"203.0.113.9, unknown"], &trusted), None);
        assert_eq!(client_ip(ip("10.0.0.2"), &["203.0.113.9\u{e9}".as_bytes()], &trusted), None, "not ASCII");
        assert_eq!(client_ip(ip("10.0.0.2"), &[b"203.0.113.9", b"\xff"], &trusted), None);
    }

    #[test]
    fn a_stored_list_that_does_not_parse_allows_nobody() {
        let list = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(allowed_by(Some(ip("198.51.100.1")), &[]));
        assert!(allowed_by(None, &[]));
        assert!(!allowed_by(Some(ip("198.51.100.1")), &list(&["garbage", "nope"])));
        assert!(allowed_by(Some(ip("198.51.100.1")), &list(&["garbage", "198.51.100.0/24"])));
        assert!(!allowed_by(None, &list(&["198.51.100.0/24"])));
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
