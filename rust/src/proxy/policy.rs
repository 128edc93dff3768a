//! `allowedDomains → proxy policy`: which host, port and method may pass. Pure: no I/O, no
//! clock, no resolver. The server asks it twice per tunnel: at CONNECT (host and port) and for
//! every request inside an intercepted tunnel (host again, and method).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::spec::{HTTP_METHODS, is_dns_name};

/// Stable reason codes, sent in the `x-agent-sandbox-denied` header and written to the log.
pub mod codes {
    /// The host matches no `allowedDomains` entry.
    pub const BLOCKED_BY_ALLOWLIST: &str = "blocked-by-allowlist";
    /// The host is allowed, but only with other methods.
    pub const METHOD_NOT_ALLOWED: &str = "method-not-allowed";
    /// A request inside a tunnel names another host than the tunnel was opened for.
    pub const HOST_MISMATCH: &str = "host-mismatch";
    /// CONNECT to a port other than 443 (TLS) or 80 (plain HTTP).
    pub const PORT_NOT_ALLOWED: &str = "port-not-allowed";
    /// A bare IP address that is not itself listed.
    pub const IP_LITERAL: &str = "ip-literal";
    /// Bytes inside a tunnel to a method-restricted host that are neither TLS nor HTTP.
    pub const NON_HTTP_IN_TUNNEL: &str = "non-http-in-tunnel";
    /// The name resolved only to loopback, link-local or private addresses.
    pub const PRIVATE_ADDRESS: &str = "private-address";
    /// Not a syntactically valid host name or IP address.
    pub const INVALID_HOST: &str = "invalid-host";
    /// GET/HEAD whose URL is longer than the limit (answered with 414).
    pub const URL_TOO_LONG: &str = "url-too-long";
    /// A request the proxy does not serve (origin-form to the proxy itself, `https://` absolute
    /// URIs, CONNECT inside a tunnel).
    pub const UNSUPPORTED_REQUEST: &str = "unsupported-request";
    /// A protocol upgrade (WebSocket) to a method-restricted host: the frames after it would
    /// be an unfiltered channel, so only `"*"` hosts may upgrade.
    pub const UPGRADE_NOT_ALLOWED: &str = "upgrade-not-allowed";
    /// Every connection slot is taken (answered with 503).
    pub const TOO_MANY_CONNECTIONS: &str = "too-many-connections";
}

/// The verdict on a CONNECT or a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let it through. `intercept`: the host has a method list, so its TLS must be terminated
    /// and every request inside checked; otherwise the tunnel is spliced end to end.
    Allow { intercept: bool },
    /// Refuse with a stable `code` (see [`codes`]) and a one-line explanation.
    Deny { code: &'static str, message: String },
}

fn deny(code: &'static str, message: String) -> Decision {
    Decision::Deny { code, message }
}

/// Why a set of rules cannot become a policy.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("invalid proxy policy: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

/// Methods allowed for one domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Methods {
    /// `"*"`: anything, tunnelled without interception.
    Any,
    /// Only these (upper-case) methods; the tunnel is intercepted.
    Only(BTreeSet<String>),
}

/// A host as the policy compares it: a lower-case name without trailing dot, or an address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl Host {
    /// Parse a host as it appears in a CONNECT target, a URI or a `Host` header (without the
    /// port). `None` if it is neither a valid DNS name nor an IP address.
    ///
    /// A name whose last label starts with a digit is treated as an address: getaddrinfo reads
    /// `2130706433` or `0x7f.1` as 127.0.0.1, so such a "name" must never match a name rule.
    pub fn parse(host: &str) -> Option<Host> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Host::Ip(ip));
        }
        let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        let labels_ok = is_dns_name(&name);
        let last_is_numeric = name
            .rsplit('.')
            .next()
            .is_some_and(|l| l.starts_with(|c: char| c.is_ascii_digit()));
        (labels_ok && !last_is_numeric).then_some(Host::Name(name))
    }

    /// The host as it goes into a URI authority (IPv6 in brackets).
    pub fn uri_host(&self) -> String {
        match self {
            Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
            other => other.to_string(),
        }
    }
}

/// The compiled allowlist.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    names: BTreeMap<String, Methods>,
    // Kept apart from `names` so that an address can never match as a name suffix.
    ips: BTreeMap<IpAddr, Methods>,
}

impl Policy {
    /// Compile `domain → None ("*") | Some(methods)` (the shape of `plan::Network::Filtered`).
    /// Every problem is reported, each naming the entry, what was expected and the fix.
    pub fn new(rules: &BTreeMap<String, Option<Vec<String>>>) -> Result<Policy, PolicyError> {
        let mut problems = Vec::new();
        let mut policy = Policy::default();
        for (domain, methods) in rules {
            let Some(host) = parse_rule_domain(domain, &mut problems) else {
                continue;
            };
            let Some(methods) = parse_rule_methods(domain, methods.as_deref(), &mut problems)
            else {
                continue;
            };
            let previous = match &host {
                Host::Name(n) => policy.names.insert(n.clone(), methods.clone()),
                Host::Ip(ip) => policy.ips.insert(*ip, methods.clone()),
            };
            if previous.as_ref().is_some_and(|p| *p != methods) {
                problems.push(format!(
                    "{domain:?} is listed twice (as {host}) with different methods; keep one entry"
                ));
            }
        }
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(PolicyError::Invalid(problems))
        }
    }

    /// The entry that governs `host`: the exact name, else the longest parent domain cut at a
    /// label boundary (`anthropic.com` covers `api.anthropic.com`, never `evilanthropic.com`).
    /// Addresses match only themselves.
    pub fn lookup(&self, host: &Host) -> Option<(Host, &Methods)> {
        match host {
            Host::Ip(ip) => self.ips.get(ip).map(|m| (host.clone(), m)),
            Host::Name(name) => {
                let mut candidate = name.as_str();
                loop {
                    if let Some(m) = self.names.get(candidate) {
                        return Some((Host::Name(candidate.to_string()), m));
                    }
                    candidate = candidate.split_once('.')?.1;
                }
            }
        }
    }

    /// CONNECT `host:port`, or the target of an absolute-URI plain-HTTP request.
    pub fn check_connect(&self, host: &str, port: u16) -> Decision {
        let parsed = match Host::parse(host) {
            Some(h) => h,
            None => {
                return deny(
                    codes::INVALID_HOST,
                    format!("{} is not a valid host name", printable(host)),
                );
            }
        };
        let Some((_, methods)) = self.lookup(&parsed) else {
            // Fail closed: anything not listed is refused, addresses included.
            return match parsed {
                Host::Ip(_) => deny(
                    codes::IP_LITERAL,
                    format!("{parsed} is an IP address that is not allowed"),
                ),
                Host::Name(_) => deny(
                    codes::BLOCKED_BY_ALLOWLIST,
                    format!("{parsed} is not an allowed domain"),
                ),
            };
        };
        if port != 443 && port != 80 {
            return deny(
                codes::PORT_NOT_ALLOWED,
                format!("{parsed}:{port}: only ports 443 (HTTPS) and 80 (HTTP) are proxied"),
            );
        }
        Decision::Allow {
            intercept: matches!(methods, Methods::Only(_)),
        }
    }

    /// A request inside a tunnel opened for `connect_host` (or a plain-HTTP request for it):
    /// `request_host` (the `Host` header or `:authority`) must be the same host, and the method
    /// must be allowed.
    pub fn check_request(&self, connect_host: &str, request_host: &str, method: &str) -> Decision {
        let (Some(tunnel), Some(named)) = (Host::parse(connect_host), Host::parse(request_host))
        else {
            return deny(
                codes::INVALID_HOST,
                format!(
                    "{} or {} is not a valid host name",
                    printable(connect_host),
                    printable(request_host)
                ),
            );
        };
        // No domain fronting: even another allowed host must get its own tunnel.
        if tunnel != named {
            return deny(
                codes::HOST_MISMATCH,
                format!("request for {named} inside a tunnel opened for {tunnel}"),
            );
        }
        match self.lookup(&tunnel) {
            None => deny(
                codes::BLOCKED_BY_ALLOWLIST,
                format!("{tunnel} is not an allowed domain"),
            ),
            Some((_, Methods::Any)) => Decision::Allow { intercept: false },
            Some((_, Methods::Only(allowed))) if allowed.contains(method) => {
                Decision::Allow { intercept: true }
            }
            Some((entry, Methods::Only(allowed))) => deny(
                codes::METHOD_NOT_ALLOWED,
                format!(
                    "{} {tunnel}: allowedDomains entry \"{entry}\" allows only {}",
                    printable(method),
                    allowed.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            ),
        }
    }
}

fn parse_rule_domain(domain: &str, problems: &mut Vec<String>) -> Option<Host> {
    let hint = if domain.contains("://") || domain.contains('/') {
        " (give the bare host name: no scheme or path)"
    } else if domain.starts_with("*.") || domain == "*" {
        " (no wildcards: \"example.com\" already covers every subdomain)"
    } else if domain.contains(':') && !matches!(Host::parse(domain), Some(Host::Ip(_))) {
        " (no port: only 443 and 80 are proxied)"
    } else {
        ""
    };
    match Host::parse(domain) {
        Some(h) if hint.is_empty() => Some(h),
        _ => {
            problems.push(format!(
                "{domain:?} is not a domain name or IP address{hint}; expected e.g. \"api.anthropic.com\""
            ));
            None
        }
    }
}

fn parse_rule_methods(
    domain: &str,
    methods: Option<&[String]>,
    problems: &mut Vec<String>,
) -> Option<Methods> {
    let Some(list) = methods else {
        return Some(Methods::Any);
    };
    if list.is_empty() {
        problems.push(format!(
            "{domain:?} has an empty method list; expected \"*\" or at least one of {} (remove the domain to block it)",
            HTTP_METHODS.join(", ")
        ));
        return None;
    }
    let mut set = BTreeSet::new();
    let mut ok = true;
    for m in list {
        if HTTP_METHODS.contains(&m.as_str()) {
            set.insert(m.clone());
        } else {
            ok = false;
            let hint = if m == "*" {
                " (write \"*\" alone instead of a list to allow every method)".to_string()
            } else if HTTP_METHODS.contains(&m.to_ascii_uppercase().as_str()) {
                format!(" (methods are upper case: {:?})", m.to_ascii_uppercase())
            } else {
                String::new()
            };
            problems.push(format!(
                "{domain:?} has unknown method {m:?}{hint}; expected one of {}",
                HTTP_METHODS.join(", ")
            ));
        }
    }
    ok.then_some(Methods::Only(set))
}

/// Request-derived text made safe for one-line messages, headers-free bodies and logs:
/// anything but printable ASCII becomes `?`, and it is cut at 200 characters.
/// A message for a response body or a log line: like [`printable`], but spaces stay (a 502's
/// "cannot connect to …" read as "cannot?connect?to?…").
pub(crate) fn printable_text(s: &str) -> String {
    printable(s)
        .chars()
        .zip(s.chars())
        .map(|(shown, raw)| if raw == ' ' { ' ' } else { shown })
        .collect()
}

pub(crate) fn printable(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(200)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect();
    if s.chars().nth(200).is_some() {
        out.push('…');
    }
    out
}

/// Why `ip` is not a public internet address (`None` if it is one). Such destinations are the
/// host's own services (loopback), its LAN (RFC 1918, ULA, CGNAT) or link-local metadata
/// endpoints (169.254.169.254): reaching them through an allowed name is DNS rebinding / SSRF.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if a == 0 {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (CGNAT)")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("multicast or reserved")
    } else {
        None
    }
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let seg = ip.segments();
    // Addresses that carry an IPv4 address: mapped (::ffff:a.b.c.d), the deprecated
    // compatible form (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) all reach the embedded one.
    let embedded =
        |s: &[u16; 8]| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if (seg[..5] == [0; 5] && (seg[5] == 0xffff || seg[5] == 0))
        || seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
    {
        non_public_v4(embedded(&seg))
    } else if seg[0] & 0xfe00 == 0xfc00 {
        Some("unique local")
    } else if seg[0] & 0xffc0 == 0xfe80 || seg[0] & 0xffc0 == 0xfec0 {
        Some("link-local")
    } else if seg[0] & 0xff00 == 0xff00 {
        Some("multicast")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rules: &[(&str, Option<&[&str]>)]) -> Policy {
        Policy::new(&rules_of(rules)).unwrap()
    }

    fn rules_of(rules: &[(&str, Option<&[&str]>)]) -> BTreeMap<String, Option<Vec<String>>> {
        rules
            .iter()
            .map(|(d, m)| {
                (
                    d.to_string(),
                    m.map(|m| m.iter().map(|s| s.to_string()).collect()),
                )
            })
            .collect()
    }

    fn code(d: Decision) -> &'static str {
        match d {
            Decision::Allow { intercept: true } => "allow-intercept",
            Decision::Allow { intercept: false } => "allow-tunnel",
            Decision::Deny { code, .. } => code,
        }
    }

    #[test]
    fn exact_and_suffix_at_label_boundary() {
        let p = policy(&[("anthropic.com", None), ("github.com", Some(&["GET"]))]);
        assert_eq!(code(p.check_connect("anthropic.com", 443)), "allow-tunnel");
        assert_eq!(
            code(p.check_connect("api.anthropic.com", 443)),
            "allow-tunnel"
        );
        assert_eq!(
            code(p.check_connect("a.b.anthropic.com", 443)),
            "allow-tunnel"
        );
        assert_eq!(
            code(p.check_connect("evilanthropic.com", 443)),
            codes::BLOCKED_BY_ALLOWLIST
        );
        assert_eq!(
            code(p.check_connect("anthropic.com.evil.org", 443)),
            codes::BLOCKED_BY_ALLOWLIST
        );
        assert_eq!(
            code(p.check_connect("com", 443)),
            codes::BLOCKED_BY_ALLOWLIST
        );
        assert_eq!(
            code(p.check_connect("api.github.com", 443)),
            "allow-intercept"
        );
    }

    #[test]
    fn longest_suffix_wins() {
        let p = policy(&[("example.com", None), ("api.example.com", Some(&["GET"]))]);
        assert_eq!(
            code(p.check_connect("x.api.example.com", 443)),
            "allow-intercept"
        );
        assert_eq!(
            code(p.check_connect("www.example.com", 443)),
            "allow-tunnel"
        );
        assert_eq!(
            code(p.check_request("x.api.example.com", "x.api.example.com", "POST")),
            codes::METHOD_NOT_ALLOWED
        );
    }

    #[test]
    fn case_and_trailing_dot_ignored() {
        let p = policy(&[("Example.COM.", Some(&["GET"]))]);
        assert_eq!(
            code(p.check_connect("EXAMPLE.com.", 443)),
            "allow-intercept"
        );
        assert_eq!(
            code(p.check_request("example.com", "Example.Com.", "GET")),
            "allow-intercept"
        );
    }

    #[test]
    fn ports_other_than_443_and_80_denied() {
        let p = policy(&[("example.com", None)]);
        assert_eq!(code(p.check_connect("example.com", 80)), "allow-tunnel");
        assert_eq!(
            code(p.check_connect("example.com", 22)),
            codes::PORT_NOT_ALLOWED
        );
        assert_eq!(
            code(p.check_connect("example.com", 8443)),
            codes::PORT_NOT_ALLOWED
        );
        // An unlisted host is reported as such, whatever the port.
        assert_eq!(
            code(p.check_connect("other.com", 22)),
            codes::BLOCKED_BY_ALLOWLIST
        );
    }

    #[test]
    fn ip_literals_denied_unless_listed() {
        let p = policy(&[
            ("example.com", None),
            ("10.1.2.3", Some(&["GET"])),
            ("[::1]", None),
        ]);
        assert_eq!(
            code(p.check_connect("93.184.216.34", 443)),
            codes::IP_LITERAL
        );
        assert_eq!(
            code(p.check_connect("[2001:db8::1]", 443)),
            codes::IP_LITERAL
        );
        assert_eq!(code(p.check_connect("10.1.2.3", 443)), "allow-intercept");
        assert_eq!(code(p.check_connect("::1", 443)), "allow-tunnel");
        assert_eq!(code(p.check_connect("[::1]", 443)), "allow-tunnel");
        // Legacy numeric forms that getaddrinfo turns into addresses never match names.
        assert_eq!(
            code(p.check_connect("2130706433", 443)),
            codes::INVALID_HOST
        );
        assert_eq!(code(p.check_connect("0x7f.1", 443)), codes::INVALID_HOST);
        // An address is not a "subdomain" of a listed address.
        assert_eq!(
            code(p.check_connect("x.10.1.2.3", 443)),
            codes::INVALID_HOST
        );
    }

    #[test]
    fn methods_and_fronting_checked_per_request() {
        let p = policy(&[
            ("api.example.com", Some(&["GET", "HEAD"])),
            ("other.com", None),
        ]);
        assert_eq!(
            code(p.check_request("api.example.com", "api.example.com", "GET")),
            "allow-intercept"
        );
        assert_eq!(
            code(p.check_request("api.example.com", "api.example.com", "HEAD")),
            "allow-intercept"
        );
        assert_eq!(
            p.check_request("api.example.com", "api.example.com", "POST"),
            Decision::Deny {
                code: codes::METHOD_NOT_ALLOWED,
                message: "POST api.example.com: allowedDomains entry \"api.example.com\" allows only GET, HEAD".into()
            }
        );
        assert_eq!(
            code(p.check_request("api.example.com", "api.example.com", "get")),
            codes::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            code(p.check_request("api.example.com", "other.com", "GET")),
            codes::HOST_MISMATCH
        );
        assert_eq!(
            code(p.check_request("other.com", "api.example.com", "GET")),
            codes::HOST_MISMATCH
        );
        assert_eq!(
            code(p.check_request("other.com", "other.com", "PROPFIND")),
            "allow-tunnel"
        );
    }

    #[test]
    fn bad_rules_rejected_with_every_problem() {
        let err = Policy::new(&rules_of(&[
            ("https://a.com", None),
            ("*.b.com", None),
            ("c.com:443", None),
            ("d.com", Some(&[])),
            ("e.com", Some(&["get", "FETCH", "*"])),
            ("F.com", Some(&["GET"])),
            ("f.com.", Some(&["POST"])),
            ("ok.com", Some(&["GET", "GET"])),
        ]))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid proxy policy: \
             \"*.b.com\" is not a domain name or IP address (no wildcards: \"example.com\" already covers every subdomain); expected e.g. \"api.anthropic.com\"; \
             \"c.com:443\" is not a domain name or IP address (no port: only 443 and 80 are proxied); expected e.g. \"api.anthropic.com\"; \
             \"d.com\" has an empty method list; expected \"*\" or at least one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT (remove the domain to block it); \
             \"e.com\" has unknown method \"get\" (methods are upper case: \"GET\"); expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT; \
             \"e.com\" has unknown method \"FETCH\"; expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT; \
             \"e.com\" has unknown method \"*\" (write \"*\" alone instead of a list to allow every method); expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT; \
             \"f.com.\" is listed twice (as f.com) with different methods; keep one entry; \
             \"https://a.com\" is not a domain name or IP address (give the bare host name: no scheme or path); expected e.g. \"api.anthropic.com\""
        );
    }

    #[test]
    fn duplicates_with_same_rule_fold() {
        let p = policy(&[("a.com", Some(&["GET"])), ("A.com.", Some(&["GET"]))]);
        assert_eq!(code(p.check_connect("a.com", 443)), "allow-intercept");
    }

    #[test]
    fn private_addresses_classified() {
        let private = [
            "127.0.0.1",
            "127.9.9.9",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
        ];
        for ip in private {
            assert!(
                non_public(ip.parse().unwrap()).is_some(),
                "{ip} should be non-public"
            );
        }
        let public = [
            "93.184.216.34",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "64:ff9b::101:101",
        ];
        for ip in public {
            assert_eq!(
                non_public(ip.parse().unwrap()),
                None,
                "{ip} should be public"
            );
        }
    }
}
