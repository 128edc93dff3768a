//! Open mode's second wall: an nftables output filter in the sandbox's network namespace that
//! drops every packet to the host's own prefixes.
//!
//! The unreachable routes ([`super::rtnl`]) are not enough on their own: a packet whose
//! outgoing interface is chosen (`SO_BINDTODEVICE`, `IP_PKTINFO` with an interface index on a
//! UDP `sendmsg`, an IPv6 link-local address with a scope id) makes the kernel fall back to
//! "the destination is on link" when the route lookup fails, and pasta then delivers it to
//! the host. The filter sits on the `output` hook, after routing, and sees every one of them.
//! The seccomp filter refuses the socket options too; this covers the ancillary data and the
//! scope ids it cannot see.
//!
//! The messages are built here, purely, and sent through nfnetlink in one batch: one table
//! and one chain per family, one rule per prefix (`daddr & mask == prefix → drop`).

use std::net::IpAddr;

use super::rtnl::Prefix;

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_NEWRULE: u16 = 6;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;
const NLA_F_NESTED: u16 = 0x8000;
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;
const NF_INET_LOCAL_OUT: u32 = 3;
const NF_ACCEPT: u32 = 1;
const NF_DROP: u32 = 0;
const NFT_REG_VERDICT: u32 = 0;
const NFT_REG_1: u32 = 1;
const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
const NFT_CMP_EQ: u32 = 0;

/// The table and chain names, in both families.
pub const TABLE: &str = "agent_sandbox";
const CHAIN: &str = "host_cut";

/// A netlink attribute: type, payload (nested attributes are built into the payload).
fn attr(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len().next_multiple_of(4), 0);
}

fn nested(out: &mut Vec<u8>, kind: u16, build: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    build(&mut inner);
    attr(out, kind | NLA_F_NESTED, &inner);
}

fn be32(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}

fn string(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// One nfnetlink message: header, `nfgenmsg` (family, version 0, `res_id`), attributes.
fn message(kind: u16, flags: u16, seq: u32, family: u8, res_id: u16, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + 4 + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(family);
    m.push(0);
    m.extend_from_slice(&res_id.to_be_bytes());
    m.extend_from_slice(attrs);
    m
}

fn nft_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_NFTABLES << 8) | msg
}

/// `expr` list element: name and its data attributes.
fn expr(list: &mut Vec<u8>, name: &str, data: impl FnOnce(&mut Vec<u8>)) {
    nested(list, 1 /* NFTA_LIST_ELEM */, |e| {
        attr(e, 1 /* NFTA_EXPR_NAME */, &string(name));
        nested(e, 2 /* NFTA_EXPR_DATA */, data);
    });
}

fn data_value(out: &mut Vec<u8>, kind: u16, bytes: &[u8]) {
    nested(out, kind, |d| attr(d, 1 /* NFTA_DATA_VALUE */, bytes));
}

/// The rule's expressions for `prefix`: load the destination address, mask it (unless the
/// prefix is a single address), compare, drop.
fn rule_expressions(prefix: Prefix) -> Vec<u8> {
    let (offset, addr): (u32, Vec<u8>) = match prefix.addr() {
        IpAddr::V4(a) => (16, a.octets().to_vec()),
        IpAddr::V6(a) => (24, a.octets().to_vec()),
    };
    let full = addr.len() as u32 * 8;
    let mut list = Vec::new();
    expr(&mut list, "payload", |d| {
        attr(d, 1 /* DREG */, &be32(NFT_REG_1));
        attr(d, 2 /* BASE */, &be32(NFT_PAYLOAD_NETWORK_HEADER));
        attr(d, 3 /* OFFSET */, &be32(offset));
        attr(d, 4 /* LEN */, &be32(addr.len() as u32));
    });
    if u32::from(prefix.bits()) < full {
        let mut mask = vec![0u8; addr.len()];
        for bit in 0..usize::from(prefix.bits()) {
            mask[bit / 8] |= 0x80 >> (bit % 8);
        }
        expr(&mut list, "bitwise", |d| {
            attr(d, 1 /* SREG */, &be32(NFT_REG_1));
            attr(d, 2 /* DREG */, &be32(NFT_REG_1));
            attr(d, 3 /* LEN */, &be32(addr.len() as u32));
            data_value(d, 4 /* MASK */, &mask);
            data_value(d, 5 /* XOR */, &vec![0u8; addr.len()]);
        });
    }
    expr(&mut list, "cmp", |d| {
        attr(d, 1 /* SREG */, &be32(NFT_REG_1));
        attr(d, 2 /* OP */, &be32(NFT_CMP_EQ));
        data_value(d, 3 /* DATA */, &addr);
    });
    expr(&mut list, "immediate", |d| {
        attr(d, 1 /* DREG */, &be32(NFT_REG_VERDICT));
        nested(d, 2 /* DATA */, |v| {
            nested(v, 2 /* NFTA_DATA_VERDICT */, |c| {
                attr(c, 1 /* NFTA_VERDICT_CODE */, &be32(NF_DROP));
            });
        });
    });
    list
}

fn family_of(p: &Prefix) -> u8 {
    if p.addr().is_ipv4() {
        NFPROTO_IPV4
    } else {
        NFPROTO_IPV6
    }
}

/// The whole batch: for `with_tables`, the table and output chain of each family (created if
/// missing, so adding later is the same call), then one rule per prefix. Messages are numbered
/// from `first_seq`; returns the batch and how many acknowledgements to expect. Pure.
pub fn batch(prefixes: &[Prefix], with_tables: bool, first_seq: u32) -> (Vec<u8>, usize) {
    let mut seq = first_seq;
    let mut next = || {
        seq += 1;
        seq - 1
    };
    let mut out = message(
        NFNL_MSG_BATCH_BEGIN,
        NLM_F_REQUEST,
        next(),
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    let mut acked = 0;
    let ack = NLM_F_REQUEST | NLM_F_ACK;
    if with_tables {
        for family in [NFPROTO_IPV4, NFPROTO_IPV6] {
            let mut a = Vec::new();
            attr(&mut a, 1 /* NFTA_TABLE_NAME */, &string(TABLE));
            out.extend(message(
                nft_type(NFT_MSG_NEWTABLE),
                ack | NLM_F_CREATE,
                next(),
                family,
                0,
                &a,
            ));
            let mut a = Vec::new();
            attr(&mut a, 1 /* NFTA_CHAIN_TABLE */, &string(TABLE));
            attr(&mut a, 3 /* NFTA_CHAIN_NAME */, &string(CHAIN));
            nested(&mut a, 4 /* NFTA_CHAIN_HOOK */, |h| {
                attr(h, 1 /* NFTA_HOOK_HOOKNUM */, &be32(NF_INET_LOCAL_OUT));
                attr(h, 2 /* NFTA_HOOK_PRIORITY */, &be32(0));
            });
            attr(&mut a, 5 /* NFTA_CHAIN_POLICY */, &be32(NF_ACCEPT));
            attr(&mut a, 7 /* NFTA_CHAIN_TYPE */, &string("filter"));
            out.extend(message(
                nft_type(NFT_MSG_NEWCHAIN),
                ack | NLM_F_CREATE,
                next(),
                family,
                0,
                &a,
            ));
            acked += 2;
        }
    }
    for p in prefixes {
        let mut a = Vec::new();
        attr(&mut a, 1 /* NFTA_RULE_TABLE */, &string(TABLE));
        attr(&mut a, 2 /* NFTA_RULE_CHAIN */, &string(CHAIN));
        nested(
            &mut a,
            4, /* NFTA_RULE_EXPRESSIONS */
            |l| l.extend(rule_expressions(*p)),
        );
        out.extend(message(
            nft_type(NFT_MSG_NEWRULE),
            ack | NLM_F_CREATE | NLM_F_APPEND,
            next(),
            family_of(p),
            0,
            &a,
        ));
        acked += 1;
    }
    out.extend(message(
        NFNL_MSG_BATCH_END,
        NLM_F_REQUEST,
        next(),
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    ));
    (out, acked)
}

/// Applies [`batch`] in the calling process's network namespace.
pub fn drop_to(prefixes: &[Prefix], with_tables: bool) -> Result<(), String> {
    if prefixes.is_empty() && !with_tables {
        return Ok(());
    }
    let fd = super::rtnl::open_netlink(NETLINK_NETFILTER)
        .map_err(|e| format!("cannot open a netfilter netlink socket: {e}"))?;
    let (data, mut pending) = batch(prefixes, with_tables, 1);
    super::rtnl::send(&fd, &data).map_err(|e| format!("cannot send the nftables rules: {e}"))?;
    let mut buf = vec![0u8; 16 * 1024];
    while pending > 0 {
        let n = super::rtnl::recv(&fd, &mut buf)
            .map_err(|e| format!("no answer from the kernel about the nftables rules: {e}"))?;
        for (_, errno) in super::rtnl::acks(&buf[..n]) {
            if errno != 0 {
                return Err(format!(
                    "nftables refused the host filter: {}",
                    std::io::Error::from_raw_os_error(errno)
                ));
            }
            pending -= 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::testutil::{run_in_fork, wait_code};
    use std::time::Duration;

    /// In a user+network namespace of our own: a loopback listener answers, then, with the
    /// filter on its address (a /8, masked), a connect is dropped (times out) and a UDP
    /// datagram never arrives; the other family still works.
    #[test]
    fn the_filter_drops_what_the_routes_cannot_stop() {
        let Some(ip) = crate::linux::testutil::ip_binary() else {
            return;
        };
        let child = run_in_fork(|| {
            use std::net::{TcpListener, TcpStream, UdpSocket};
            if !crate::linux::testutil::unshare_user_net() {
                return 77;
            }
            let up = std::process::Command::new(ip)
                .args(["link", "set", "lo", "up"])
                .status();
            if !up.is_ok_and(|s| s.success()) {
                return 2;
            }
            let v4 = TcpListener::bind("127.0.0.1:0").unwrap();
            let v6 = TcpListener::bind("[::1]:0").unwrap();
            let short = Duration::from_millis(300);
            let reach = |l: &TcpListener| {
                TcpStream::connect_timeout(&l.local_addr().unwrap(), short).is_ok()
            };
            if !reach(&v4) || !reach(&v6) {
                return 3;
            }
            if let Err(e) = drop_to(&["127.0.0.0/8".parse().unwrap()], true) {
                eprintln!("{e}");
                return 4;
            }
            if reach(&v4) {
                return 5;
            }
            if !reach(&v6) {
                return 6;
            }
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            rx.set_read_timeout(Some(short)).unwrap();
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let _ = tx.send_to(b"x", rx.local_addr().unwrap());
            if rx.recv(&mut [0u8; 4]).is_ok() {
                return 7;
            }
            // Adding later, without the tables, extends the same chain.
            if drop_to(&["::1/128".parse().unwrap()], false).is_err() || reach(&v6) {
                return 8;
            }
            0
        });
        let code = wait_code(child, Duration::from_secs(20));
        if code == 77 {
            eprintln!("SKIPPED: no user namespaces");
            return;
        }
        assert_eq!(code, 0, "1-8: see the steps");
    }

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    /// The rule for a /24: payload (daddr, offset 16, 4 bytes) → bitwise (mask ffffff00) →
    /// cmp eq 203.0.113.0 → immediate drop; byte for byte.
    #[test]
    fn a_prefix_rule_is_exact() {
        let e = rule_expressions(p("203.0.113.0/24"));
        let hex: String = e.iter().map(|b| format!("{b:02x}")).collect();
        let has = |needle: &[u8]| e.windows(needle.len()).any(|w| w == needle);
        assert!(
            has(b"payload\0") && has(b"bitwise\0") && has(b"cmp\0") && has(b"immediate\0"),
            "{hex}"
        );
        // The offset of the destination address and its mask and value, as nftables wants
        // them: big-endian, the mask in a NFTA_DATA_VALUE.
        assert!(has(&[8, 0, 3, 0, 0, 0, 0, 16]), "offset: {hex}");
        assert!(has(&[8, 0, 1, 0, 0xff, 0xff, 0xff, 0]), "mask: {hex}");
        assert!(has(&[8, 0, 1, 0, 203, 0, 113, 0]), "value: {hex}");
        // A single address needs no mask.
        let e = rule_expressions(p("198.51.100.1/32"));
        assert!(!e.windows(8).any(|w| w == b"bitwise\0"));
        let e = rule_expressions(p("2001:db8::/32"));
        assert!(
            e.windows(8).any(|w| w == [8, 0, 3, 0, 0, 0, 0, 24]),
            "v6 offset"
        );
    }

    #[test]
    fn the_batch_is_framed_and_counted() {
        let (b, acks) = batch(&[p("198.51.100.1/32"), p("2001:db8::/32")], true, 1);
        assert_eq!(acks, 6);
        let msgs = super::super::rtnl::messages(&b);
        let kinds: Vec<u16> = msgs.iter().map(|(k, _, _)| *k).collect();
        let t = |m| (10u16 << 8) | m;
        assert_eq!(kinds, [0x10, t(0), t(3), t(0), t(3), t(6), t(6), 0x11]);
        let seqs: Vec<u32> = msgs.iter().map(|(_, s, _)| *s).collect();
        assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
        let (b, acks) = batch(&[p("198.51.100.1/32")], false, 1);
        assert_eq!(acks, 1);
        assert_eq!(super::super::rtnl::messages(&b).len(), 3);
    }
}
