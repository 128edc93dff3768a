//! Byte bridges between the sandbox's loopback and the host, over Unix sockets.
//!
//! In filtered mode the sandbox has no route anywhere; its only ways out are Unix sockets the
//! launcher binds into it. Inside, our init listens on `127.0.0.1:PORT` (and `[::1]:PORT`) and
//! forwards each connection to a socket; on the host, the launcher accepts on that socket and
//! connects to the proxy or to an allowed host loopback port. Nothing else of the host is
//! reachable, and if either side dies the sandbox is left with no network, never an open one.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::entry::BridgeSpec;

/// Connections one bridge carries at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 4096;

const STACK: usize = 128 * 1024;
const BUF: usize = 32 * 1024;

trait Duplex: Read + Write + AsFd + Send + 'static {
    fn try_clone_box(&self) -> io::Result<Box<dyn Duplex>>;
    fn shutdown_write(&self);
}

impl Duplex for TcpStream {
    fn try_clone_box(&self) -> io::Result<Box<dyn Duplex>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn shutdown_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl Duplex for UnixStream {
    fn try_clone_box(&self) -> io::Result<Box<dyn Duplex>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn shutdown_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

/// Copy both directions until each side is done; half-closes are passed on.
fn pump(a: Box<dyn Duplex>, b: Box<dyn Duplex>) -> io::Result<()> {
    let a2 = a.try_clone_box()?;
    let b2 = b.try_clone_box()?;
    let back = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || copy_then_close(b2, a2))?;
    copy_then_close(a, b);
    let _ = back.join();
    Ok(())
}

fn copy_then_close(mut from: Box<dyn Duplex>, mut to: Box<dyn Duplex>) {
    // Zero-copy where the kernel allows (always, for TCP and Unix stream sockets).
    #[cfg(target_os = "linux")]
    match crate::linux::splice::relay_blocking(from.as_fd(), to.as_fd()) {
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
        _ => {
            to.shutdown_write();
            return;
        }
    }
    let mut buf = vec![0u8; BUF];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    to.shutdown_write();
}

fn serve<L, S>(accept: L, connect: impl Fn() -> io::Result<Box<dyn Duplex>> + Send + Sync + 'static)
where
    L: Fn() -> io::Result<S> + Send + 'static,
    S: Duplex,
{
    let live = Arc::new(AtomicUsize::new(0));
    let connect = Arc::new(connect);
    let _ = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            loop {
                let Ok(inbound) = accept() else { continue };
                if live.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    continue; // dropped: bounded resources over completeness
                }
                live.fetch_add(1, Ordering::Relaxed);
                let live2 = live.clone();
                let connect = connect.clone();
                let spawned = std::thread::Builder::new()
                    .stack_size(STACK)
                    .spawn(move || {
                        if let Ok(outbound) = connect() {
                            let _ = pump(Box::new(inbound), outbound);
                        }
                        live2.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    live.fetch_sub(1, Ordering::Relaxed);
                }
            }
        });
}

/// Host side: accept on `socket_path` (created here, mode 0600 by umask of the session dir),
/// forward each connection to `target` on the host's loopback.
pub fn serve_unix_to_tcp(socket_path: &Path, target: SocketAddr) -> io::Result<()> {
    let listener = UnixListener::bind(socket_path)?;
    serve(
        move || listener.accept().map(|(s, _)| s),
        move || Ok(Box::new(TcpStream::connect(target)?) as Box<dyn Duplex>),
    );
    Ok(())
}

/// Sandbox side: listen on loopback `port` (IPv4, and IPv6 when available), forward each
/// connection to `socket`. Binds synchronously so the port is ready before the command starts.
pub fn serve_tcp_to_unix(spec: &BridgeSpec) -> io::Result<()> {
    let v4 = TcpListener::bind(("127.0.0.1", spec.port))?;
    let v6 = TcpListener::bind(("::1", spec.port)).ok();
    for listener in std::iter::once(v4).chain(v6) {
        let socket = spec.socket.clone();
        serve(
            move || listener.accept().map(|(s, _)| s),
            move || Ok(Box::new(UnixStream::connect(&socket)?) as Box<dyn Duplex>),
        );
    }
    Ok(())
}

/// Backlog of the proxy's listening sockets in the sandbox: a burst of hundreds of
/// connections must not be dropped as SYNs.
#[cfg(target_os = "linux")]
const PASSED_BACKLOG: i32 = 1024;

/// Sandbox side, for the proxy: listen on loopback `port` here (IPv4, and IPv6 when
/// available) and hand the listening sockets to the launcher over `socket` (SCM_RIGHTS). The
/// proxy then accepts the sandbox's connections itself: no byte passes through a bridge. Done
/// before the command starts; this process keeps no copy.
#[cfg(target_os = "linux")]
pub fn pass_listeners(spec: &BridgeSpec) -> io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::os::fd::AsRawFd;
    let v4 = TcpListener::bind(("127.0.0.1", spec.port))?;
    let v6 = TcpListener::bind(("::1", spec.port)).ok();
    let fds: Vec<_> = std::iter::once(&v4)
        .chain(v6.as_ref())
        .map(|l| l.as_raw_fd())
        .collect();
    let stream = UnixStream::connect(&spec.socket)?;
    let payload = [b'L'];
    let sent = sendmsg::<()>(
        stream.as_raw_fd(),
        &[io::IoSlice::new(&payload)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )?;
    if sent != payload.len() {
        return Err(io::Error::other(
            "short write passing the listening sockets",
        ));
    }
    Ok(())
}

/// Host side, for the proxy: accept one connection on `bind_path`, take the listening
/// sockets passed over it, check that each is a listening TCP socket on loopback `port`, and
/// give them to `adopt`. On a thread of its own; the first connection is the sandbox init's
/// (made before the command starts), and the socket file is removed after it, so nothing in
/// the sandbox can pass anything else. Whatever fails, the sandbox is left without a proxy
/// (connections refused), never with another way out.
///
/// `bind_path` may be a short `/proc/self/fd/N/…` alias (socket paths are limited to 108
/// bytes); `real_path` is the file's lasting name, removed after the handover.
#[cfg(target_os = "linux")]
pub fn receive_listeners(
    bind_path: &Path,
    real_path: &Path,
    port: u16,
    adopt: impl FnOnce(Vec<TcpListener>) + Send + 'static,
) -> io::Result<()> {
    let listener = UnixListener::bind(bind_path)?;
    let path = real_path.to_path_buf();
    std::thread::Builder::new()
        .name("agent-sandbox-listeners".into())
        .stack_size(STACK)
        .spawn(move || {
            let received = listener
                .accept()
                .and_then(|(s, _)| take_listeners(&s, port));
            drop(listener);
            let _ = std::fs::remove_file(&path);
            match received {
                Ok(listeners) => adopt(listeners),
                // The sandbox is left without a proxy (connections refused): fail closed.
                Err(e) => eprintln!(
                    "agent-sandbox: warning: the sandbox's proxy port was not handed over ({e}); it has no network"
                ),
            }
        })?;
    Ok(())
}

#[cfg(target_os = "linux")]
fn take_listeners(stream: &UnixStream, port: u16) -> io::Result<Vec<TcpListener>> {
    use nix::sys::socket::{
        ControlMessageOwned, MsgFlags, SockaddrStorage, getsockname, getsockopt, recvmsg, sockopt,
    };
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut payload = [0u8; 1];
    // Room for more than the two expected, so a message with extra descriptors is not
    // truncated (descriptors installed by a truncated message could not be closed).
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 16]);
    let mut iov = [io::IoSliceMut::new(&mut payload)];
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut owned = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            // SAFETY: the kernel just installed these descriptors in this process for us.
            owned.extend(
                fds.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    if owned.is_empty() || owned.len() > 2 {
        return Err(io::Error::other("expected one or two listening sockets"));
    }
    let mut out = Vec::new();
    for fd in owned {
        let listening = getsockopt(&fd, sockopt::AcceptConn)?;
        let addr: SockaddrStorage = getsockname(fd.as_raw_fd())?;
        let ok = match (addr.as_sockaddr_in(), addr.as_sockaddr_in6()) {
            (Some(a), _) => a.ip().is_loopback() && a.port() == port,
            (_, Some(a)) => a.ip().is_loopback() && a.port() == port,
            _ => false,
        };
        if !listening || !ok {
            return Err(io::Error::other(
                "not a listening loopback socket on the proxy port",
            ));
        }
        // SAFETY: a valid listening socket; raising its backlog has no memory effects.
        unsafe { libc::listen(fd.as_raw_fd(), PASSED_BACKLOG) };
        out.push(TcpListener::from(fd));
    }
    Ok(out)
}

/// Ports listening on the host's loopback (or on all addresses) right now, from
/// `/proc/net/tcp{,6}`: what `allowedLocalPorts = null` bridges.
pub fn host_listening_ports() -> Vec<u16> {
    let mut ports = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        ports.extend(parse_listening(&text));
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Parse `/proc/net/tcp`-format text: LISTEN sockets (state 0A) on loopback or any address.
pub fn parse_listening(text: &str) -> Vec<u16> {
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || f[3] != "0A" {
            continue;
        }
        let Some((addr, port)) = f[1].split_once(':') else {
            continue;
        };
        let loopback_or_any = match addr.len() {
            8 => addr == "00000000" || addr.ends_with("7F"),
            32 => {
                addr == "00000000000000000000000000000000"
                    || addr == "00000000000000000000000001000000"
                    || addr.starts_with("0000000000000000FFFF0000") && addr.ends_with("7F")
            }
            _ => false,
        };
        if let (true, Ok(p)) = (loopback_or_any, u16::from_str_radix(port, 16)) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    #[test]
    fn parses_proc_net_tcp() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 0 0 0 0\n\
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 0 0 0 0\n\
   2: 0202000A:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0 0 0 0 0\n\
   3: 0100007F:1F91 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4 1 0 0 0 0 0\n";
        assert_eq!(parse_listening(text), vec![8080, 22]);
        let v6 = "  sl  local_address                         remote_address                        st\n\
   0: 00000000000000000000000001000000:1F92 00000000000000000000000000000000:0000 0A 0\n\
   1: 0000000000000000FFFF00000100007F:1F93 00000000000000000000000000000000:0000 0A 0\n\
   2: 20010DB8000000000000000000000001:1F94 00000000000000000000000000000000:0000 0A 0\n";
        assert_eq!(parse_listening(v6), vec![8082, 8083]);
    }

    #[test]
    fn carries_bytes_both_ways_with_half_close() {
        let dir = tempfile::tempdir().unwrap();
        // An echo server on loopback stands for the host service.
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = echo.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in echo.incoming() {
                let mut s = s.unwrap();
                let mut all = Vec::new();
                s.read_to_end(&mut all).unwrap();
                s.write_all(&all).unwrap();
            }
        });
        let sock = dir.path().join("b.sock");
        serve_unix_to_tcp(&sock, target).unwrap();
        // The sandbox side: a loopback listener forwarding to the socket.
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        serve_tcp_to_unix(&BridgeSpec { port, socket: sock }).unwrap();
        for _ in 0..3 {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.write_all(b"hello\nworld\n").unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let lines: Vec<String> = io::BufReader::new(c).lines().map(Result::unwrap).collect();
            assert_eq!(lines, ["hello", "world"]);
        }
    }

    #[test]
    fn dead_host_side_means_no_connection() {
        let dir = tempfile::tempdir().unwrap();
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        serve_tcp_to_unix(&BridgeSpec {
            port,
            socket: dir.path().join("nobody-listens.sock"),
        })
        .unwrap();
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 1];
        // Closed without a byte: the bridge could not reach the host side.
        assert_eq!(c.read(&mut buf).unwrap_or(0), 0);
    }
}
