//! The filtering HTTP(S) proxy of filtered network mode: the sandbox's only way out.
//!
//! One proxy per session, in the helper process, on its own tokio runtime. The launcher calls
//! [`start`], points `HTTP(S)_PROXY` at [`RunningProxy::addr`] (through its bridge), adds
//! [`RunningProxy::ca_pem`] to the sandbox's trust bundle, and prints
//! [`Summary::render`] from [`RunningProxy::shutdown`] at exit.
//!
//! Mechanisms, one module each: `policy` (pure allowlist decisions), `ca` (the in-memory
//! session CA), `upstream` (resolve once, refuse private addresses, dial, upstream TLS),
//! `server` (CONNECT, tunnels, interception, forwarding), `log` (denials, log file, summary).
//!
//! The connection handling is our own rather than `hudsucker::Proxy`'s; hudsucker supplies the
//! leaf-certificate authority. Its proxy splices any tunnel whose first bytes are neither TLS
//! nor `GET ` straight to the target (pitfall P1), dials by name on its own (no private-address
//! check on the address dialled) and has no connection or handshake limits. Here a tunnel to a
//! method-restricted host is served only as TLS or HTTP that we parse ourselves; anything else
//! is refused before a single byte is sent upstream.
//!
//! Other choices: the intercepting side speaks HTTP/2 as well as HTTP/1.1 (ALPN), and a denied
//! request's body is drained (bounded in size and time) before the 403 so that HTTP/2 clients
//! see it (P3). Protocol upgrades (WebSocket) pass only for `"*"` hosts: after a 101 nothing
//! could be checked any more. Upstream TLS trusts the system bundle plus `upstream_ca_files`;
//! the compiled-in Mozilla roots serve only when no system bundle exists.

mod ca;
pub mod log;
pub mod policy;
mod server;
mod upstream;
pub use upstream::read_ca_file;

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::Semaphore;

pub use ca::CaError;
pub use log::{Denial, Notify, Remedy, Summary};
pub use policy::{Decision, Policy, PolicyError};
pub use server::DENIED_HEADER;
pub use upstream::TrustError;

/// Resource bounds. The defaults suit one agent; every one of them fails closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Client connections served at once; beyond, new ones get 503 and are closed.
    pub max_connections: usize,
    /// Request line plus headers, per request (HTTP/1) or header list (HTTP/2).
    pub max_header_bytes: usize,
    /// GET and HEAD with a longer request target get 414: a cap on what a read-only rule lets
    /// an agent smuggle out through URLs.
    pub max_url_bytes: usize,
    /// From accept (or the end of the previous response: HTTP/1 keep-alive) to a complete
    /// request head, and from CONNECT to a finished TLS handshake.
    pub handshake_timeout: Duration,
    /// A connection (or tunnel) with no byte in either direction for this long is closed.
    pub idle_timeout: Duration,
    /// Resolving plus connecting plus the TLS handshake with an upstream.
    pub connect_timeout: Duration,
    /// Body bytes read (and discarded) from a denied request so that HTTP/2 clients see the
    /// 403 instead of a stream reset, and how long to wait for them.
    pub drain_bytes: usize,
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_header_bytes: 64 * 1024,
            max_url_bytes: 8 * 1024,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            drain_bytes: 1024 * 1024,
            drain_timeout: Duration::from_secs(2),
        }
    }
}

/// What the proxy enforces. The default allows nothing.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProxyConfig {
    /// Normalised domain → `None` (`"*"`: any method, tunnelled end to end) or the allowed
    /// methods (intercepted), as in `plan::Network::Filtered`.
    pub rules: BTreeMap<String, Option<Vec<String>>>,
    /// Extra PEM CA files trusted for upstream TLS, on top of the system bundle.
    pub upstream_ca_files: Vec<PathBuf>,
    /// Ports on which an allowed name may resolve to host loopback (127.0.0.0/8, ::1). Never
    /// an exemption for private, link-local or the host's own addresses. Default: none.
    pub allowed_local_ports: Vec<u16>,
    /// Append-only log of denials and first contacts (created with mode 0600).
    pub log_path: Option<PathBuf>,
    pub limits: Limits,
    /// `(host, port)` as requested → the address to dial instead of resolving the name, like
    /// `curl --connect-to`. The private-address check still applies to the address dialled.
    /// For tests and pinning; empty in normal use.
    pub dial_overrides: BTreeMap<(String, u16), SocketAddr>,
    /// Called with a one-line notice (no newline) the first time each host is denied; the
    /// launcher prints it. `None`: denials are only logged and summarised.
    pub on_first_denial: Option<Notify>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error(transparent)]
    Ca(#[from] CaError),
    #[error(
        "cannot open the proxy log {path}: {source}. Fix: make sure its directory exists and is writable"
    )]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on 127.0.0.1 for the proxy: {0}")]
    Bind(std::io::Error),
    #[error("cannot start the proxy's runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "the proxy cannot tell which addresses are the host's own: {0}. Fix: make sure rtnetlink works for your user, or use --no-network"
    )]
    HostAddresses(String),
}

/// A proxy listening on `addr`. Dropping it stops it too; [`RunningProxy::shutdown`] also
/// returns what it blocked.
pub struct RunningProxy {
    /// `127.0.0.1:<port>` the proxy listens on.
    pub addr: SocketAddr,
    /// The session CA certificate (PEM, no key) for the sandbox's trust bundle.
    pub ca_pem: String,
    shared: Arc<server::Shared>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    stopped: Option<std::sync::mpsc::Receiver<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// Hands more listening sockets to a running proxy (see [`RunningProxy::adopter`]).
#[derive(Clone)]
pub struct Adopter {
    handle: tokio::runtime::Handle,
    shared: Arc<server::Shared>,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Adopter {
    /// The proxy serves connections accepted on `listener` too, until it stops.
    pub fn adopt(&self, listener: std::net::TcpListener) -> std::io::Result<()> {
        listener.set_nonblocking(true)?;
        let _context = self.handle.enter();
        let listener = tokio::net::TcpListener::from_std(listener)?;
        self.handle.spawn(server::accept_loop(
            listener,
            self.shared.clone(),
            self.stop.clone(),
            None,
        ));
        Ok(())
    }
}

/// Start the proxy on its own runtime (two worker threads) and return once it listens.
/// Safe to call from inside or outside an async context.
pub fn start(config: ProxyConfig) -> Result<RunningProxy, ProxyError> {
    let policy = Policy::new(&config.rules)?;
    let trust = upstream::Trust::new(&config.upstream_ca_files)?;
    trust.warm_up();
    let ca = ca::SessionCa::generate()?;
    let ca_pem = ca.cert_pem.clone();
    let file = match &config.log_path {
        None => None,
        Some(path) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .map_err(|source| ProxyError::Log {
                    path: path.clone(),
                    source,
                })?,
        ),
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("agent-sandbox-proxy")
        .enable_all()
        .build()
        .map_err(ProxyError::Runtime)?;
    let listener = {
        let _context = runtime.enter();
        let socket = tokio::net::TcpSocket::new_v4().map_err(ProxyError::Bind)?;
        socket
            .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .map_err(ProxyError::Bind)?;
        // A deep backlog: a burst of hundreds of connections must not be dropped as SYNs.
        socket.listen(1024).map_err(ProxyError::Bind)?
    };
    let addr = listener.local_addr().map_err(ProxyError::Bind)?;

    let dialer = Arc::new(upstream::Dialer {
        allowed_local_ports: config.allowed_local_ports.clone(),
        overrides: config.dial_overrides.clone(),
        connect_timeout: config.limits.connect_timeout,
        host_addrs: host_addresses()?,
    });
    let client = |h1_only| {
        Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(16)
            .build(upstream::Connector {
                dialer: dialer.clone(),
                trust: trust.clone(),
                h1_only,
            })
    };
    let shared = Arc::new(server::Shared {
        policy,
        ca,
        client: client(false),
        // Upgrades (WebSocket) need HTTP/1.1 end to end.
        client_h1: client(true),
        dialer: dialer.clone(),
        events: log::Events::new(file, config.on_first_denial.clone()),
        slots: Arc::new(Semaphore::new(config.limits.max_connections)),
        limits: config.limits,
    });
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let (stopped_tx, stopped) = std::sync::mpsc::channel();
    runtime.spawn(server::accept_loop(
        listener,
        shared.clone(),
        stop_rx,
        Some(stopped_tx),
    ));
    Ok(RunningProxy {
        addr,
        ca_pem,
        shared,
        stop: Some(stop),
        stopped: Some(stopped),
        runtime: Some(runtime),
    })
}

impl RunningProxy {
    /// A handle that gives the proxy more listening sockets (the ones the sandbox's init
    /// creates on its own loopback and passes out).
    pub fn adopter(&self) -> Option<Adopter> {
        Some(Adopter {
            handle: self.runtime.as_ref()?.handle().clone(),
            shared: self.shared.clone(),
            stop: self.stop.as_ref()?.subscribe(),
        })
    }

    /// What was blocked so far (the proxy keeps running).
    pub fn summary(&self) -> Summary {
        self.shared.events.summary()
    }

    /// Stop listening, drop every connection and tunnel, and report what was blocked.
    pub fn shutdown(mut self) -> Summary {
        self.stop_now();
        self.shared.events.summary()
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
            // Wait (briefly) until the listener is closed, so the port is free on return.
            if let Some(stopped) = self.stopped.take() {
                let _ = stopped.recv_timeout(Duration::from_secs(2));
            }
        }
        if let Some(runtime) = self.runtime.take() {
            // Never blocks, so shutting down from inside an async context is fine too.
            runtime.shutdown_background();
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// What the host answers on itself. Linux: the interfaces' addresses and the prefixes of the
/// local routing table (the same set open mode cuts off).
#[cfg(target_os = "linux")]
fn host_addresses() -> Result<Vec<upstream::HostPrefix>, ProxyError> {
    // Fail closed: without the local table, part of the host would stay dialable.
    let prefixes = crate::linux::netns::host_prefixes()
        .map_err(|e| ProxyError::HostAddresses(e.to_string()))?;
    Ok(prefixes
        .iter()
        .map(|p| upstream::HostPrefix {
            addr: p.addr(),
            len: p.bits(),
        })
        .collect())
}

#[cfg(not(target_os = "linux"))]
fn host_addresses() -> Result<Vec<upstream::HostPrefix>, ProxyError> {
    Ok(Vec::new())
}
