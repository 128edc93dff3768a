//! The way out: resolve a name once, refuse private destinations, dial exactly the checked
//! address, and (for intercepted hosts) speak TLS to it with the system's trust store.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use hudsucker::rustls::crypto::aws_lc_rs;
use hudsucker::rustls::{ClientConfig, RootCertStore};
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::policy::{Host, non_public};

use crate::host::SYSTEM_CA_BUNDLES as SYSTEM_BUNDLES;

/// Why an upstream could not be reached. `PrivateAddress` is a policy denial (403); the rest
/// are gateway errors (502).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DialError {
    #[error("{host} resolves only to non-public addresses ({addrs}){}", private_reason(*.loopback_port))]
    PrivateAddress {
        host: String,
        port: u16,
        addrs: String,
        /// The port dialled, when one of the refused addresses is host loopback: allowing it
        /// in `allowedLocalPorts` would let the name through. `None`: nothing would.
        loopback_port: Option<u16>,
    },
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("cannot connect to {host}:{port}: {reason}")]
    Connect {
        host: String,
        port: u16,
        reason: String,
    },
    #[error("TLS with {host} failed: {reason}")]
    Tls { host: String, reason: String },
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "cannot read upstream CA file {path}: {source}. Fix: pass an existing PEM file (--upstream-ca / upstreamCaFiles)"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "upstream CA file {path} holds no usable PEM certificate ({reason}). Expected one or more \"-----BEGIN CERTIFICATE-----\" blocks"
    )]
    Parse { path: PathBuf, reason: String },
}

fn private_reason(loopback_port: Option<u16>) -> String {
    match loopback_port {
        Some(port) => format!(" and port {port} is not in allowedLocalPorts"),
        None => {
            "; the proxy never dials private, link-local or this host's own addresses, whatever allowedLocalPorts says".into()
        }
    }
}

/// Whether the proxy may dial `addr`: a public address that is not one of the host's own, or
/// host loopback (127.0.0.0/8, ::1) on a port in `allowed_local_ports`. The local-port
/// exemption covers loopback only: a LAN, link-local or host interface address is refused on
/// every port (a service bound to 0.0.0.0 answers there, and a rebinding name must not reach
/// the LAN). Pure.
pub(crate) fn dialable(addr: SocketAddr, allowed_local_ports: &[u16], host: &[HostPrefix]) -> bool {
    let ip = addr.ip();
    if ip.is_loopback() {
        return allowed_local_ports.contains(&addr.port());
    }
    non_public(ip).is_none() && !host.iter().any(|p| p.contains(ip))
}

/// An address prefix the host answers on itself: one of its interfaces' addresses (`/32`,
/// `/128`) or a prefix its local routing table delivers to it (`ip route add local
/// 203.0.113.0/24 dev lo`), public-looking or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPrefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl HostPrefix {
    /// Whether `ip` lies in the prefix (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.len.min(32)))
                    .unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len.min(128)))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// Where names go and which destinations are acceptable. Shared by the tunnel path (raw
/// splice) and the intercepting client.
pub(crate) struct Dialer {
    /// Host loopback ports an allowed name may resolve to (a concrete list: `null` was
    /// resolved to the ports listening at launch by the planner).
    pub allowed_local_ports: Vec<u16>,
    pub overrides: BTreeMap<(String, u16), SocketAddr>,
    pub connect_timeout: Duration,
    /// What the host answers on itself (its interfaces' addresses, its local routing table):
    /// as off-limits as its loopback (a service bound to 0.0.0.0 answers there), even when
    /// public.
    pub host_addrs: Vec<HostPrefix>,
}

impl Dialer {
    /// Resolve `host` once, drop every address [`dialable`] refuses, and connect to the first remaining address that answers. The check applies to the
    /// very address dialled, so a name that re-resolves (DNS rebinding) gains nothing.
    pub async fn dial(&self, host: &Host, port: u16) -> Result<TcpStream, DialError> {
        let shown = host.to_string();
        let addrs: Vec<SocketAddr> = if let Some(addr) = self.overrides.get(&(shown.clone(), port))
        {
            vec![*addr]
        } else {
            match host {
                Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
                Host::Name(name) => {
                    let lookup = tokio::net::lookup_host((name.as_str(), port));
                    match tokio::time::timeout(self.connect_timeout, lookup).await {
                        Ok(Ok(found)) => found.collect(),
                        Ok(Err(e)) => {
                            return Err(DialError::Resolve {
                                host: shown,
                                reason: e.to_string(),
                            });
                        }
                        Err(_) => {
                            return Err(DialError::Resolve {
                                host: shown,
                                reason: "timed out".into(),
                            });
                        }
                    }
                }
            }
        };
        let (usable, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = addrs
            .into_iter()
            .partition(|a| dialable(*a, &self.allowed_local_ports, &self.host_addrs));
        if usable.is_empty() {
            // Fail closed: a name that resolves only to host-local or LAN addresses is refused.
            if !refused.is_empty() {
                return Err(DialError::PrivateAddress {
                    host: shown,
                    port: refused[0].port(),
                    loopback_port: refused
                        .iter()
                        .find(|a| a.ip().is_loopback())
                        .map(|a| a.port()),
                    addrs: refused
                        .iter()
                        .map(|a| a.ip().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            return Err(DialError::Resolve {
                host: shown,
                reason: "no addresses".into(),
            });
        }
        let mut last = String::new();
        for addr in usable {
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => last = format!("{addr}: {e}"),
                Err(_) => last = format!("{addr}: timed out"),
            }
        }
        Err(DialError::Connect {
            host: shown,
            port,
            reason: last,
        })
    }
}

/// What the proxy trusts upstream: the system CA bundle (the first of `SSL_CERT_FILE`,
/// `NIX_SSL_CERT_FILE` and the usual paths that holds certificates) plus the extra files the
/// user named. Mozilla's roots compiled into `webpki-roots` stand in only when no system bundle
/// exists (a bare build sandbox).
///
/// The extra files are read and checked at once (a bad one stops the start); the system
/// bundle, whose ~150 certificates take about a millisecond to parse, is parsed on a thread of
/// its own ([`Trust::warm_up`]), off the sandbox's start-up path. Only intercepted connections
/// need it; the first one waits for the parse if it is still running.
pub(crate) struct Trust {
    extra: Vec<CertificateDer<'static>>,
    configs: OnceLock<Result<ClientConfigs, String>>,
}

/// TLS client settings: `any` offers h2 and http/1.1, `h1` only http/1.1 (for upgrades).
pub(crate) struct ClientConfigs {
    pub any: Arc<ClientConfig>,
    pub h1: Arc<ClientConfig>,
}

impl Trust {
    pub fn new(extra_files: &[PathBuf]) -> Result<Arc<Trust>, TrustError> {
        let mut extra = Vec::new();
        for path in extra_files {
            extra.extend(read_extra(path)?);
        }
        Ok(Arc::new(Trust {
            extra,
            configs: OnceLock::new(),
        }))
    }

    /// Parse the system bundle now, on a background thread.
    pub fn warm_up(self: &Arc<Self>) {
        let this = self.clone();
        let spawned = std::thread::Builder::new()
            .name("agent-sandbox-trust".into())
            .spawn(move || {
                let _ = this.configs();
            });
        // Without the thread, the first intercepted connection does the work instead.
        drop(spawned);
    }

    /// The client settings (built on first use; later calls wait for that).
    pub fn configs(&self) -> Result<&ClientConfigs, &str> {
        self.configs
            .get_or_init(|| {
                let roots = self.root_store();
                Ok(ClientConfigs {
                    any: client_config(roots.clone(), &[b"h2", b"http/1.1"])?,
                    h1: client_config(roots, &[b"http/1.1"])?,
                })
            })
            .as_ref()
            .map_err(String::as_str)
    }

    fn root_store(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        let env_paths = ["SSL_CERT_FILE", "NIX_SSL_CERT_FILE"]
            .iter()
            .filter_map(std::env::var_os)
            .map(PathBuf::from);
        let candidates = env_paths.chain(SYSTEM_BUNDLES.iter().map(PathBuf::from));
        for path in candidates {
            let Ok(iter) = CertificateDer::pem_file_iter(&path) else {
                continue;
            };
            let certs: Vec<CertificateDer<'static>> = iter.filter_map(Result::ok).collect();
            let (added, _ignored) = roots.add_parsable_certificates(certs);
            if added > 0 {
                break;
            }
        }
        if roots.is_empty() {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        // Checked in `new`: these parse.
        roots.add_parsable_certificates(self.extra.iter().cloned());
        roots
    }
}

/// The certificates of one extra CA file, each checked to be a usable trust anchor.
/// Most bytes read from a CA file (a whole system bundle is about 220 KiB).
const MAX_CA_FILE: u64 = 16 << 20;

/// The contents of a CA file the user named, which must be a regular file of at most
/// [`MAX_CA_FILE`] bytes. Fails closed on anything else: the launcher reads these before the
/// sandbox starts, and the path may lie where an agent writes, so a FIFO swapped in must not
/// hang the launch, nor `/dev/zero` fill its memory.
pub fn read_ca_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, Read};
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: opening a FIFO for reading would otherwise wait for a writer.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.take(MAX_CA_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CA_FILE {
        return Err(Error::other(format!(
            "larger than {} MiB, too large for a CA file",
            MAX_CA_FILE >> 20
        )));
    }
    Ok(bytes)
}

fn read_extra(path: &Path) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let bytes = read_ca_file(path).map_err(|source| TrustError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let parse = |reason: String| TrustError::Parse {
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| parse(e.to_string()))?;
    if certs.is_empty() {
        return Err(parse("no certificate found".into()));
    }
    let mut check = RootCertStore::empty();
    for cert in &certs {
        check.add(cert.clone()).map_err(|e| parse(e.to_string()))?;
    }
    Ok(certs)
}

fn client_config(roots: RootCertStore, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, String> {
    let mut cfg = ClientConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS to upstream servers: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}

/// A hyper connector over [`Dialer`]: every new upstream connection of the intercepting
/// client is resolved, checked and dialled here, then wrapped in TLS for `https` URIs.
#[derive(Clone)]
pub(crate) struct Connector {
    pub dialer: Arc<Dialer>,
    pub trust: Arc<Trust>,
    /// Offer only http/1.1 upstream (upgrades need it end to end).
    pub h1_only: bool,
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<Stream>;
    type Error = DialError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DialError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), DialError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let tls = uri.scheme_str() == Some("https");
            let raw_host = uri.host().unwrap_or_default();
            let host = Host::parse(raw_host).ok_or_else(|| DialError::Resolve {
                host: raw_host.to_string(),
                reason: "not a host name".into(),
            })?;
            let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
            let tcp = this.dialer.dial(&host, port).await?;
            if !tls {
                return Ok(TokioIo::new(Stream::Plain(tcp)));
            }
            let name = match &host {
                Host::Name(n) => ServerName::try_from(n.clone()),
                Host::Ip(ip) => Ok(ServerName::IpAddress((*ip).into())),
            }
            .map_err(|e| DialError::Tls {
                host: host.to_string(),
                reason: e.to_string(),
            })?;
            let configs = this.trust.configs().map_err(|reason| DialError::Tls {
                host: host.to_string(),
                reason: reason.to_string(),
            })?;
            let config = if this.h1_only {
                &configs.h1
            } else {
                &configs.any
            };
            let handshake = TlsConnector::from(config.clone()).connect(name, tcp);
            match tokio::time::timeout(this.dialer.connect_timeout, handshake).await {
                Ok(Ok(stream)) => Ok(TokioIo::new(Stream::Tls(Box::new(stream)))),
                Ok(Err(e)) => Err(DialError::Tls {
                    host: host.to_string(),
                    reason: e.to_string(),
                }),
                Err(_) => Err(DialError::Tls {
                    host: host.to_string(),
                    reason: "handshake timed out".into(),
                }),
            }
        })
    }
}

/// An upstream connection, plain or TLS.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        match self {
            Stream::Plain(_) => Connected::new(),
            Stream::Tls(tls) => {
                if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                    Connected::new().negotiated_h2()
                } else {
                    Connected::new()
                }
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 9 item 8: with every local port allowed (`--allow-all-local-ports` used to mean
    /// "no check"), a name resolving to the LAN or to the host's own address was dialled. The
    /// exemption is for host loopback alone.
    #[test]
    fn local_port_exemption_covers_host_loopback_only() {
        let host = HostPrefix {
            addr: "198.51.100.1".parse().unwrap(),
            len: 32,
        };
        let allowed = [80, 443, 5432];
        let cases: &[(&str, bool)] = &[
            ("93.184.215.14:443", true),
            ("[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443", true),
            ("127.0.0.1:443", true),
            ("127.1.2.3:5432", true),
            ("[::1]:80", true),
            ("127.0.0.1:8443", false),
            ("[::1]:22", false),
            // Never exempt, whatever the port: LAN, link-local, CGNAT, the host's own address.
            ("10.0.0.5:443", false),
            ("192.168.1.1:80", false),
            ("172.16.0.1:5432", false),
            ("169.254.169.254:80", false),
            ("100.64.0.1:443", false),
            ("198.51.100.1:443", false),
            ("[fd00::1]:443", false),
            ("[fe80::1]:80", false),
            // Loopback in other spellings is refused too (fail closed: not 127/8 or ::1).
            ("0.0.0.0:443", false),
            ("[::]:443", false),
            ("[::ffff:127.0.0.1]:443", false),
            ("[::ffff:10.0.0.5]:443", false),
        ];
        let got: Vec<(&str, bool)> = cases
            .iter()
            .map(|(a, _)| (*a, dialable(a.parse().unwrap(), &allowed, &[host])))
            .collect();
        assert_eq!(got, cases);
        // With no local port allowed, loopback is refused like the rest.
        assert!(!dialable("127.0.0.1:443".parse().unwrap(), &[], &[host]));
        assert!(dialable("93.184.215.14:443".parse().unwrap(), &[], &[host]));
        // A public-looking prefix the host's local routing table takes as its own.
        let local = HostPrefix {
            addr: "203.0.113.0".parse().unwrap(),
            len: 24,
        };
        assert!(!dialable("203.0.113.7:443".parse().unwrap(), &[], &[local]));
        assert!(dialable("203.0.114.7:443".parse().unwrap(), &[], &[local]));
        let v6 = HostPrefix {
            addr: "2001:db8::".parse().unwrap(),
            len: 32,
        };
        assert!(!dialable(
            "[2001:db8:1::5]:443".parse().unwrap(),
            &[],
            &[v6]
        ));
        assert!(dialable("93.184.215.14:443".parse().unwrap(), &[], &[v6]));
    }

    #[test]
    fn private_address_messages_say_whether_a_local_port_would_help() {
        let e = |loopback_port| DialError::PrivateAddress {
            host: "db.test".into(),
            port: 443,
            addrs: "10.0.0.5".into(),
            loopback_port,
        };
        assert_eq!(
            e(Some(443)).to_string(),
            "db.test resolves only to non-public addresses (10.0.0.5) and port 443 is not in allowedLocalPorts"
        );
        assert_eq!(
            e(None).to_string(),
            "db.test resolves only to non-public addresses (10.0.0.5); the proxy never dials private, link-local or this host's own addresses, whatever allowedLocalPorts says"
        );
    }
}
