//! Unreachable routes through rtnetlink, in the calling process's network namespace: what
//! `ip route add unreachable ADDR/32` does, without starting `ip` (an exec cost ~2 ms of every
//! open-mode start; bench/run).
//!
//! All routes go to the kernel in one datagram, each request acknowledged on its own, so a
//! failure names its address.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NLMSG_HDR: usize = 16;
const RTMSG: usize = 12;
const RTM_NEWROUTE: u16 = 24;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const RT_TABLE_MAIN: u8 = 254;
const RTPROT_BOOT: u8 = 3;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RTN_UNREACHABLE: u8 = 7;
const RTA_DST: u16 = 1;

/// One `RTM_NEWROUTE` request for an unreachable host route to `addr`. Pure.
pub fn route_request(addr: IpAddr, seq: u32) -> Vec<u8> {
    let (family, bits, bytes): (u8, u8, Vec<u8>) = match addr {
        IpAddr::V4(a) => (libc::AF_INET as u8, 32, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, 128, a.octets().to_vec()),
    };
    let attr_len = 4 + bytes.len(); // both 4-byte aligned already
    let len = NLMSG_HDR + RTMSG + attr_len;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_NEWROUTE.to_ne_bytes());
    let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    // struct rtmsg
    m.extend_from_slice(&[
        family,
        bits,
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

/// Adds an unreachable host route for each address. `tolerate_existing`: an address that
/// already has one is fine (addresses reported again during a session).
pub fn add_unreachable_routes(addrs: &[IpAddr], tolerate_existing: bool) -> Result<(), String> {
    if addrs.is_empty() {
        return Ok(());
    }
    let fd = open().map_err(|e| format!("cannot open a route netlink socket: {e}"))?;
    let batch: Vec<u8> = addrs
        .iter()
        .enumerate()
        .flat_map(|(i, a)| route_request(*a, i as u32 + 1))
        .collect();
    // SAFETY: the buffer is valid for its length; the kernel is the default destination.
    let sent = unsafe { libc::send(fd.as_raw_fd(), batch.as_ptr().cast(), batch.len(), 0) };
    if sent < 0 || sent as usize != batch.len() {
        return Err(format!(
            "cannot send the routes to the kernel: {}",
            io::Error::last_os_error()
        ));
    }
    let mut pending = addrs.len();
    let mut buf = vec![0u8; 16 * 1024];
    while pending > 0 {
        // SAFETY: buf is valid for writes of its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("no answer from the kernel about the routes: {e}"));
        }
        for (seq, errno) in acks(&buf[..n as usize]) {
            pending = pending.saturating_sub(1);
            let ok = errno == 0 || (tolerate_existing && errno == libc::EEXIST);
            if !ok {
                let addr = addrs
                    .get((seq as usize).wrapping_sub(1))
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "?".into());
                return Err(format!(
                    "route add unreachable {addr}: {}",
                    io::Error::from_raw_os_error(errno)
                ));
            }
        }
    }
    Ok(())
}

/// The (sequence number, errno) of each acknowledgement in a netlink datagram. Pure.
fn acks(mut data: &[u8]) -> Vec<(u32, i32)> {
    let mut out = Vec::new();
    while data.len() >= NLMSG_HDR {
        let len = u32::from_ne_bytes(data[0..4].try_into().unwrap()) as usize;
        if len < NLMSG_HDR || len > data.len() {
            break;
        }
        let kind = u16::from_ne_bytes(data[4..6].try_into().unwrap());
        let seq = u32::from_ne_bytes(data[8..12].try_into().unwrap());
        if kind == NLMSG_ERROR && len >= NLMSG_HDR + 4 {
            let err = i32::from_ne_bytes(data[16..20].try_into().unwrap());
            out.push((seq, -err));
        }
        data = &data[(len + 3) & !3..];
    }
    out
}

fn open() -> io::Result<OwnedFd> {
    // SAFETY: plain socket creation.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
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
        let m = route_request("192.0.2.7".parse().unwrap(), 5);
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
        let m6 = route_request("2001:db8::1".parse().unwrap(), 1);
        assert_eq!(m6.len(), 16 + 12 + 20);
        assert_eq!(&m6[16..18], &[10, 128]);
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
        let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists());
        let Some(ip) = ip else {
            eprintln!("SKIPPED: iproute2 is not installed");
            return;
        };
        let child = run_in_fork(|| {
            use nix::sched::{CloneFlags, unshare};
            let uid = nix::unistd::getuid();
            let gid = nix::unistd::getgid();
            if unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).is_err() {
                return 77;
            }
            let _ = std::fs::write("/proc/self/setgroups", "deny");
            let _ = std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"));
            let _ = std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"));
            let addrs: Vec<IpAddr> = vec![
                "192.0.2.7".parse().unwrap(),
                "198.51.100.9".parse().unwrap(),
                "2001:db8::5".parse().unwrap(),
            ];
            if add_unreachable_routes(&addrs, false).is_err() {
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
                || !v6.contains("unreachable 2001:db8::5")
            {
                eprintln!("{v4}{v6}");
                return 3;
            }
            match add_unreachable_routes(&addrs[1..2], false) {
                Err(e) if e.contains("198.51.100.9") => {}
                _ => return 4,
            }
            if add_unreachable_routes(&addrs, true).is_err() {
                return 5;
            }
            0
        });
        match wait_code(child, std::time::Duration::from_secs(20)) {
            77 => eprintln!("SKIPPED: no unprivileged user namespaces here"),
            code => assert_eq!(code, 0),
        }
    }
}
