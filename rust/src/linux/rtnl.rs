//! The host's routes through rtnetlink: what `ip route add unreachable PREFIX` does in the
//! sandbox's network namespace, what `ip route show table local` reads on the host, and what
//! `ip monitor route` watches there, without starting `ip` (an exec cost ~2 ms of every
//! open-mode start; bench/run).
//!
//! Unreachable routes go to the kernel in one datagram, each request acknowledged on its own, so
//! a failure names its prefix. Building and parsing the messages is pure; only
//! [`add_unreachable_routes`], [`host_local_prefixes`] and [`RouteWatch`] touch a socket.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::str::FromStr;

const NLMSG_HDR: usize = 16;
const RTMSG: usize = 12;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const RT_TABLE_MAIN: u8 = 254;
const RT_TABLE_LOCAL: u8 = 255;
const RTPROT_BOOT: u8 = 3;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RTN_LOCAL: u8 = 2;
const RTN_BROADCAST: u8 = 3;
const RTN_ANYCAST: u8 = 4;
const RTN_UNREACHABLE: u8 = 7;
const RTA_DST: u16 = 1;
const RTA_TABLE: u16 = 15;
const RTMGRP_IPV4_ROUTE: u32 = 0x40;
const RTMGRP_IPV6_ROUTE: u32 = 0x400;

/// An address prefix: `192.0.2.0/24`, or a single address (`/32`, `/128`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// `addr/len` with the bits past `len` cleared (the kernel refuses a route with host bits
    /// set), or `None` when `len` is longer than the address.
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let addr = match addr {
            IpAddr::V4(a) if len <= 32 => {
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) if len <= 128 => {
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
            _ => return None,
        };
        Some(Prefix { addr, len })
    }

    /// The prefix holding only `addr`.
    pub fn host(addr: IpAddr) -> Prefix {
        let len = if addr.is_ipv4() { 32 } else { 128 };
        Prefix { addr, len }
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn bits(&self) -> u8 {
        self.len
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        Prefix::new(ip, self.len).is_some_and(|p| p == *self)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = String;

    /// `ADDR/LEN`, or a bare `ADDR` for its host prefix.
    fn from_str(s: &str) -> Result<Prefix, String> {
        let bad = || format!("{s:?} is not an address prefix; expected ADDR or ADDR/LEN");
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        match len {
            None => Ok(Prefix::host(addr)),
            Some(l) => l
                .parse()
                .ok()
                .and_then(|l| Prefix::new(addr, l))
                .ok_or_else(bad),
        }
    }
}

fn header(m: &mut Vec<u8>, len: usize, kind: u16, flags: u16, seq: u32) {
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
}

fn family(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => libc::AF_INET as u8,
        IpAddr::V6(_) => libc::AF_INET6 as u8,
    }
}

/// One `RTM_NEWROUTE` request for an unreachable route to `prefix`. Pure.
pub fn route_request(prefix: Prefix, seq: u32) -> Vec<u8> {
    let bytes = match prefix.addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let attr_len = 4 + bytes.len(); // both 4-byte aligned already
    let len = NLMSG_HDR + RTMSG + attr_len;
    let mut m = Vec::with_capacity(len);
    let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    header(&mut m, len, RTM_NEWROUTE, flags, seq);
    // struct rtmsg
    m.extend_from_slice(&[
        family(prefix.addr),
        prefix.len,
        0, // src_len
        0, // tos
        RT_TABLE_MAIN,
        RTPROT_BOOT,
        RT_SCOPE_UNIVERSE,
        RTN_UNREACHABLE,
    ]);
    m.extend_from_slice(&0u32.to_ne_bytes()); // rtm_flags
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&RTA_DST.to_ne_bytes());
    m.extend_from_slice(&bytes);
    m
}

/// One `RTM_GETROUTE` dump request for the routes of `family` (`AF_INET`, `AF_INET6`). The
/// kernel filters by table only for sockets in strict mode, so [`local_prefixes`] filters the
/// answer. Pure.
pub fn dump_request(family: u8, seq: u32) -> Vec<u8> {
    let len = NLMSG_HDR + RTMSG;
    let mut m = Vec::with_capacity(len);
    header(&mut m, len, RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, seq);
    m.extend_from_slice(&[family, 0, 0, 0, RT_TABLE_LOCAL, 0, 0, 0]);
    m.extend_from_slice(&0u32.to_ne_bytes());
    m
}

/// The (type, sequence number, payload) of each message in a netlink datagram. Pure.
pub(crate) fn messages(mut data: &[u8]) -> Vec<(u16, u32, &[u8])> {
    let mut out = Vec::new();
    while data.len() >= NLMSG_HDR {
        let len = u32::from_ne_bytes(data[0..4].try_into().unwrap()) as usize;
        if len < NLMSG_HDR || len > data.len() {
            break;
        }
        let kind = u16::from_ne_bytes(data[4..6].try_into().unwrap());
        let seq = u32::from_ne_bytes(data[8..12].try_into().unwrap());
        out.push((kind, seq, &data[NLMSG_HDR..len]));
        data = &data[((len + 3) & !3).min(data.len())..];
    }
    out
}

/// The destinations the host delivers to itself, from the `RTM_NEWROUTE` messages in a
/// netlink datagram (a dump's or a route event's): the `local`, `anycast` and `broadcast`
/// routes of the local table (`ip route add local 192.0.2.0/24 dev lo` makes a whole prefix
/// the host's, not only its interfaces' addresses). Loopback stays out: inside, it is the
/// sandbox's own. Pure.
pub fn local_prefixes(data: &[u8]) -> Vec<Prefix> {
    let mut out = Vec::new();
    for (kind, _, body) in messages(data) {
        if kind != RTM_NEWROUTE || body.len() < RTMSG {
            continue;
        }
        let (fam, dst_len, mut table, rtype) = (body[0], body[1], u32::from(body[4]), body[7]);
        let mut dst: Option<&[u8]> = None;
        let mut attrs = &body[RTMSG..];
        while attrs.len() >= 4 {
            let alen = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
            let atype = u16::from_ne_bytes([attrs[2], attrs[3]]);
            if alen < 4 || alen > attrs.len() {
                break;
            }
            let value = &attrs[4..alen];
            match atype {
                RTA_DST => dst = Some(value),
                RTA_TABLE if value.len() == 4 => {
                    table = u32::from_ne_bytes(value.try_into().unwrap())
                }
                _ => {}
            }
            attrs = &attrs[((alen + 3) & !3).min(attrs.len())..];
        }
        if table != u32::from(RT_TABLE_LOCAL)
            || !matches!(rtype, RTN_LOCAL | RTN_ANYCAST | RTN_BROADCAST)
        {
            continue;
        }
        // No RTA_DST: the default route (`local default`), the whole address space.
        let addr = match (i32::from(fam), dst) {
            (libc::AF_INET, None) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            (libc::AF_INET6, None) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            (libc::AF_INET, Some(d)) if d.len() == 4 => {
                IpAddr::V4(<[u8; 4]>::try_from(d).unwrap().into())
            }
            (libc::AF_INET6, Some(d)) if d.len() == 16 => {
                IpAddr::V6(<[u8; 16]>::try_from(d).unwrap().into())
            }
            _ => continue,
        };
        let Some(p) = Prefix::new(addr, dst_len) else {
            continue;
        };
        if !p.addr.is_loopback() && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// Whether a dump answer is complete: `Some(Ok)` at its `NLMSG_DONE`, `Some(Err(errno))` if
/// the kernel refused it, `None` while more is to come. Pure.
fn dump_end(data: &[u8], seq: u32) -> Option<Result<(), i32>> {
    for (kind, s, body) in messages(data) {
        if s != seq {
            continue;
        }
        match kind {
            NLMSG_DONE => return Some(Ok(())),
            NLMSG_ERROR if body.len() >= 4 => {
                let err = -i32::from_ne_bytes(body[0..4].try_into().unwrap());
                return Some(if err == 0 { Ok(()) } else { Err(err) });
            }
            _ => {}
        }
    }
    None
}

pub(crate) fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for writes of its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(crate) fn send(fd: &OwnedFd, data: &[u8]) -> io::Result<()> {
    // SAFETY: the buffer is valid for its length; the kernel is the default destination.
    let sent = unsafe { libc::send(fd.as_raw_fd(), data.as_ptr().cast(), data.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    if sent as usize != data.len() {
        return Err(io::Error::other("short send"));
    }
    Ok(())
}

/// Every prefix the host's local routing table delivers to the host ([`local_prefixes`]),
/// IPv4 and IPv6, read in the calling process's network namespace.
pub fn host_local_prefixes() -> io::Result<Vec<Prefix>> {
    let fd = open()?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    for (seq, fam) in [(1, libc::AF_INET), (2, libc::AF_INET6)] {
        send(&fd, &dump_request(fam as u8, seq))?;
        loop {
            let n = recv(&fd, &mut buf)?;
            let data = &buf[..n];
            for p in local_prefixes(data) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
            match dump_end(data, seq) {
                None => {}
                Some(Ok(())) => break,
                // A kernel without IPv6 has no IPv6 routes to read.
                Some(Err(libc::EAFNOSUPPORT)) if fam == libc::AF_INET6 => break,
                Some(Err(e)) => return Err(io::Error::from_raw_os_error(e)),
            }
        }
    }
    Ok(out)
}

/// A subscription to the route changes of the calling process's network namespace (what `ip
/// monitor route` sees). Events queue in the socket from the moment it is open, so a snapshot
/// read after opening it misses nothing.
pub struct RouteWatch {
    fd: OwnedFd,
}

impl RouteWatch {
    pub fn open() -> io::Result<RouteWatch> {
        let fd = open()?;
        // SAFETY: an all-zero sockaddr_nl is valid; we fill in family and groups.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
        // SAFETY: sa is a valid sockaddr_nl of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RouteWatch { fd })
    }

    /// Waits for the next batch of events; returns the local-table prefixes added. An
    /// `ENOBUFS` error means events were lost: read the table again.
    pub fn next(&self) -> io::Result<Vec<Prefix>> {
        let mut buf = vec![0u8; 64 * 1024];
        let n = recv(&self.fd, &mut buf)?;
        Ok(local_prefixes(&buf[..n]))
    }
}

impl AsFd for RouteWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Adds an unreachable route for each prefix. `tolerate_existing`: a prefix that already has
/// one is fine (prefixes reported again during a session).
pub fn add_unreachable_routes(prefixes: &[Prefix], tolerate_existing: bool) -> Result<(), String> {
    if prefixes.is_empty() {
        return Ok(());
    }
    let fd = open().map_err(|e| format!("cannot open a route netlink socket: {e}"))?;
    let batch: Vec<u8> = prefixes
        .iter()
        .enumerate()
        .flat_map(|(i, p)| route_request(*p, i as u32 + 1))
        .collect();
    send(&fd, &batch).map_err(|e| format!("cannot send the routes to the kernel: {e}"))?;
    let mut pending = prefixes.len();
    let mut buf = vec![0u8; 16 * 1024];
    while pending > 0 {
        let n = recv(&fd, &mut buf)
            .map_err(|e| format!("no answer from the kernel about the routes: {e}"))?;
        for (seq, errno) in acks(&buf[..n]) {
            pending = pending.saturating_sub(1);
            let ok = errno == 0 || (tolerate_existing && errno == libc::EEXIST);
            if !ok {
                let prefix = prefixes
                    .get((seq as usize).wrapping_sub(1))
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "?".into());
                return Err(format!(
                    "route add unreachable {prefix}: {}",
                    io::Error::from_raw_os_error(errno)
                ));
            }
        }
    }
    Ok(())
}

/// The (sequence number, errno) of each acknowledgement in a netlink datagram. Pure.
pub(crate) fn acks(data: &[u8]) -> Vec<(u32, i32)> {
    messages(data)
        .into_iter()
        .filter(|(kind, _, body)| *kind == NLMSG_ERROR && body.len() >= 4)
        .map(|(_, seq, body)| (seq, -i32::from_ne_bytes(body[0..4].try_into().unwrap())))
        .collect()
}

fn open() -> io::Result<OwnedFd> {
    open_netlink(libc::NETLINK_ROUTE)
}

/// A netlink socket of `protocol` (`NETLINK_ROUTE`, `NETLINK_NETFILTER`).
pub(crate) fn open_netlink(protocol: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket creation.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::testutil::{run_in_fork, wait_code};

    #[test]
    fn request_bytes_exact() {
        let m = route_request(Prefix::host("192.0.2.7".parse().unwrap()), 5);
        let mut want = Vec::new();
        want.extend_from_slice(&36u32.to_ne_bytes());
        want.extend_from_slice(&24u16.to_ne_bytes());
        want.extend_from_slice(&0x605u16.to_ne_bytes());
        want.extend_from_slice(&5u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&[2, 32, 0, 0, 254, 3, 0, 7]);
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&8u16.to_ne_bytes());
        want.extend_from_slice(&1u16.to_ne_bytes());
        want.extend_from_slice(&[192, 0, 2, 7]);
        assert_eq!(m, want);
        let m6 = route_request(Prefix::host("2001:db8::1".parse().unwrap()), 1);
        assert_eq!(m6.len(), 16 + 12 + 20);
        assert_eq!(&m6[16..18], &[10, 128]);
        let net = route_request("192.0.2.0/24".parse().unwrap(), 1);
        assert_eq!(&net[16..18], &[2, 24]);
        assert_eq!(&net[32..36], &[192, 0, 2, 0]);
    }

    #[test]
    fn prefixes_parse_print_and_contain() {
        let p: Prefix = "192.0.2.77/24".parse().unwrap();
        assert_eq!(p.to_string(), "192.0.2.0/24", "host bits are cleared");
        assert!(p.contains("192.0.2.7".parse().unwrap()));
        assert!(!p.contains("192.0.3.7".parse().unwrap()));
        assert!(!p.contains("2001:db8::1".parse().unwrap()));
        assert_eq!(
            "2001:db8::5".parse::<Prefix>().unwrap().to_string(),
            "2001:db8::5/128"
        );
        assert_eq!(
            "198.51.100.9".parse::<Prefix>().unwrap().to_string(),
            "198.51.100.9/32"
        );
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.1".parse().unwrap()));
        assert_eq!("2001:db8::/32".parse::<Prefix>().unwrap().bits(), 32);
        for bad in ["192.0.2.0/33", "::/129", "nope", "192.0.2.0/x", ""] {
            let e = bad.parse::<Prefix>().unwrap_err();
            assert!(e.contains("expected ADDR or ADDR/LEN"), "{bad}: {e}");
        }
    }

    #[test]
    fn dump_request_bytes_exact() {
        let m = dump_request(libc::AF_INET6 as u8, 2);
        let mut want = Vec::new();
        want.extend_from_slice(&28u32.to_ne_bytes());
        want.extend_from_slice(&26u16.to_ne_bytes());
        want.extend_from_slice(&0x301u16.to_ne_bytes());
        want.extend_from_slice(&2u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&[10, 0, 0, 0, 255, 0, 0, 0]);
        want.extend_from_slice(&0u32.to_ne_bytes());
        assert_eq!(m, want);
    }

    /// A route message as the kernel sends it: header, rtmsg, RTA_TABLE, RTA_DST (if any).
    fn route_msg(kind: u16, fam: u8, dst: &[u8], dst_len: u8, table: u32, rtype: u8) -> Vec<u8> {
        let mut body = vec![fam, dst_len, 0, 0, table.min(252) as u8, 2, 254, rtype];
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend_from_slice(&8u16.to_ne_bytes());
        body.extend_from_slice(&RTA_TABLE.to_ne_bytes());
        body.extend_from_slice(&table.to_ne_bytes());
        if !dst.is_empty() {
            body.extend_from_slice(&(4 + dst.len() as u16).to_ne_bytes());
            body.extend_from_slice(&RTA_DST.to_ne_bytes());
            body.extend_from_slice(dst);
        }
        let mut m = Vec::new();
        header(&mut m, NLMSG_HDR + body.len(), kind, 0x2, 1);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn local_prefixes_keep_what_the_local_table_delivers_to_the_host() {
        let (v4, v6) = (libc::AF_INET as u8, libc::AF_INET6 as u8);
        let six = |s: &str| s.parse::<Ipv6Addr>().unwrap().octets();
        let mut d = Vec::new();
        for m in [
            // `ip route add local 192.0.2.0/24 dev lo`: the whole prefix, not one address
            route_msg(RTM_NEWROUTE, v4, &[192, 0, 2, 0], 24, 255, RTN_LOCAL),
            route_msg(RTM_NEWROUTE, v4, &[198, 51, 100, 1], 32, 255, RTN_LOCAL),
            route_msg(RTM_NEWROUTE, v4, &[198, 51, 100, 3], 32, 255, RTN_BROADCAST),
            route_msg(RTM_NEWROUTE, v6, &six("2001:db8::5"), 128, 255, RTN_LOCAL),
            route_msg(RTM_NEWROUTE, v6, &six("2001:db8::"), 128, 255, RTN_ANYCAST),
            // loopback is the sandbox's own inside
            route_msg(RTM_NEWROUTE, v4, &[127, 0, 0, 0], 8, 255, RTN_LOCAL),
            route_msg(RTM_NEWROUTE, v6, &six("::1"), 128, 255, RTN_LOCAL),
            // multicast, and routes of other tables, lead elsewhere
            route_msg(RTM_NEWROUTE, v6, &six("ff00::"), 8, 255, 5),
            route_msg(RTM_NEWROUTE, v4, &[203, 0, 113, 0], 24, 254, 1),
            route_msg(RTM_NEWROUTE, v4, &[203, 0, 113, 9], 32, 1000, RTN_LOCAL),
            // a deleted route stays blocked: not a new prefix
            route_msg(25, v4, &[203, 0, 113, 0], 24, 255, RTN_LOCAL),
            // `local default`: no RTA_DST at all
            route_msg(RTM_NEWROUTE, v6, &[], 0, 255, RTN_LOCAL),
        ] {
            d.extend_from_slice(&m);
        }
        let got: Vec<String> = local_prefixes(&d).iter().map(|p| p.to_string()).collect();
        assert_eq!(
            got,
            [
                "192.0.2.0/24",
                "198.51.100.1/32",
                "198.51.100.3/32",
                "2001:db8::5/128",
                "2001:db8::/128",
                "::/0"
            ]
        );
        assert_eq!(
            local_prefixes(&d[..20]),
            vec![],
            "a truncated message is ignored"
        );
    }

    #[test]
    fn dump_end_finds_done_and_errors_of_its_own_request() {
        let mut done = Vec::new();
        header(&mut done, 20, NLMSG_DONE, 0x2, 7);
        done.extend_from_slice(&0i32.to_ne_bytes());
        assert_eq!(dump_end(&done, 7), Some(Ok(())));
        assert_eq!(dump_end(&done, 8), None, "another request's end");
        let mut err = Vec::new();
        header(&mut err, 36, NLMSG_ERROR, 0, 7);
        err.extend_from_slice(&(-libc::EPERM).to_ne_bytes());
        err.extend_from_slice(&[0u8; 16]);
        assert_eq!(dump_end(&err, 7), Some(Err(libc::EPERM)));
        let route = route_msg(RTM_NEWROUTE, 2, &[192, 0, 2, 0], 24, 255, RTN_LOCAL);
        assert_eq!(dump_end(&route, 1), None);
    }

    #[test]
    fn acks_parse_errors_and_successes() {
        let mut d = Vec::new();
        for (seq, err) in [(1u32, 0i32), (2, -17)] {
            d.extend_from_slice(&36u32.to_ne_bytes());
            d.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
            d.extend_from_slice(&0u16.to_ne_bytes());
            d.extend_from_slice(&seq.to_ne_bytes());
            d.extend_from_slice(&0u32.to_ne_bytes());
            d.extend_from_slice(&err.to_ne_bytes());
            d.extend_from_slice(&[0u8; 16]); // the echoed request header
        }
        assert_eq!(acks(&d), vec![(1, 0), (2, 17)]);
    }

    /// In a user+network namespace of our own: the routes appear as `ip` shows them, a
    /// duplicate is refused unless tolerated, and the refusal names the address.
    #[test]
    fn routes_are_added_in_a_fresh_namespace() {
        let Some(ip) = crate::linux::testutil::ip_binary() else {
            return;
        };
        let child = run_in_fork(|| {
            if !crate::linux::testutil::unshare_user_net() {
                return 77;
            }
            let prefixes: Vec<Prefix> =
                ["192.0.2.7", "198.51.100.9", "2001:db8::5", "203.0.113.0/24"]
                    .iter()
                    .map(|p| p.parse().unwrap())
                    .collect();
            if add_unreachable_routes(&prefixes, false).is_err() {
                return 2;
            }
            let show = |fam: &str| {
                let o = std::process::Command::new(ip)
                    .args([fam, "route", "show", "table", "main"])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&o.stdout).into_owned()
            };
            let (v4, v6) = (show("-4"), show("-6"));
            if !v4.contains("unreachable 192.0.2.7")
                || !v4.contains("unreachable 198.51.100.9")
                || !v4.contains("unreachable 203.0.113.0/24")
                || !v6.contains("unreachable 2001:db8::5")
            {
                eprintln!("{v4}{v6}");
                return 3;
            }
            match add_unreachable_routes(&prefixes[1..2], false) {
                Err(e) if e.contains("198.51.100.9/32") => {}
                _ => return 4,
            }
            if add_unreachable_routes(&prefixes, true).is_err() {
                return 5;
            }
            0
        });
        match wait_code(child, std::time::Duration::from_secs(20)) {
            77 => eprintln!("SKIPPED: no unprivileged user namespaces here"),
            code => assert_eq!(code, 0),
        }
    }

    /// In a user+network namespace of our own: the local table is read as `ip` wrote it (a
    /// whole prefix, IPv4 and IPv6, loopback left out), and a local route added later arrives
    /// on a watch opened before it.
    #[test]
    fn local_table_is_read_and_watched_in_a_fresh_namespace() {
        let Some(ip) = crate::linux::testutil::ip_binary() else {
            return;
        };
        let child = run_in_fork(|| {
            if !crate::linux::testutil::unshare_user_net() {
                return 77;
            }
            let ip = |args: &str| {
                std::process::Command::new(ip)
                    .args(args.split(' '))
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if !ip("link set lo up")
                || !ip("route add local 192.0.2.0/24 dev lo")
                || !ip("-6 route add local 2001:db8:7::/64 dev lo")
            {
                return 2;
            }
            let Ok(watch) = RouteWatch::open() else {
                return 3;
            };
            let Ok(table) = host_local_prefixes() else {
                return 4;
            };
            let table: Vec<String> = table.iter().map(|p| p.to_string()).collect();
            if table != ["192.0.2.0/24", "2001:db8:7::/64"] {
                eprintln!("{table:?}");
                return 5;
            }
            if !ip("route add local 203.0.113.0/25 dev lo") {
                return 6;
            }
            let want: Prefix = "203.0.113.0/25".parse().unwrap();
            loop {
                match watch.next() {
                    Ok(seen) if seen.contains(&want) => return 0,
                    Ok(_) => continue,
                    Err(_) => return 7,
                }
            }
        });
        match wait_code(child, std::time::Duration::from_secs(20)) {
            77 => eprintln!("SKIPPED: no unprivileged user namespaces here"),
            code => assert_eq!(code, 0),
        }
    }
}
