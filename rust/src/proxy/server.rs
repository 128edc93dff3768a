//! The proxy's network side: accept, CONNECT, tunnels, interception and forwarding.
//!
//! Paths through it:
//! - CONNECT to a `"*"` host: resolve and check the address, dial it, answer 200, splice bytes.
//! - CONNECT to a method-restricted host: answer 200 without dialling, sniff the first bytes.
//!   TLS is terminated with a session-CA leaf for the CONNECT host; plain HTTP is parsed as
//!   is; anything else is refused (`non-http-in-tunnel`). Each request inside is checked (host
//!   = CONNECT host, method allowed) before an upstream connection is even opened. Protocol
//!   upgrades (WebSocket) are refused there: what follows a 101 could not be checked.
//! - `GET http://host/…` (absolute URI): checked like a CONNECT to port 80 plus a request.
//!
//! Everything a client says is checked before a byte leaves; every refusal is a 403 (or 414,
//! 503) with a static `x-agent-sandbox-denied` code.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::uri::{Authority, Scheme};
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use super::Limits;
use super::ca::SessionCa;
use super::log::{Denial, Events, Failure, log_path, now, would_allow};
use super::policy::{Decision, Host, Policy, codes, printable, printable_text};
use super::upstream::{Connector, DialError, Dialer};

/// The header that carries the stable reason code of a refusal.
pub const DENIED_HEADER: &str = "x-agent-sandbox-denied";

type Body = BoxBody<Bytes, hyper::Error>;

pub(crate) struct Shared {
    pub policy: Policy,
    pub ca: SessionCa,
    pub client: Client<Connector, Incoming>,
    pub client_h1: Client<Connector, Incoming>,
    pub dialer: Arc<Dialer>,
    pub events: Events,
    pub slots: Arc<Semaphore>,
    pub limits: Limits,
}

/// Per client connection: the shared state, its connection slot (held by every task that
/// serves the connection, tunnels included) and its activity clock.
#[derive(Clone)]
struct Conn {
    shared: Arc<Shared>,
    _slot: Arc<OwnedSemaphorePermit>,
    activity: Activity,
}

/// Accepts on `listener` until `stop` turns true (or its sender is gone); then closes the
/// listener and reports on `stopped`, if given.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    stopped: Option<std::sync::mpsc::Sender<()>>,
) {
    let stopping = async move {
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                break;
            }
        }
    };
    tokio::pin!(stopping);
    loop {
        tokio::select! {
            _ = &mut stopping => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    let _ = tcp.set_nodelay(true);
                    match shared.slots.clone().try_acquire_owned() {
                        Ok(slot) => {
                            tokio::spawn(serve_client(shared.clone(), tcp, slot));
                        }
                        // Fail closed: over the limit, refuse rather than queue without bound.
                        Err(_) => {
                            tokio::spawn(refuse_busy(tcp));
                        }
                    }
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    drop(listener);
    if let Some(stopped) = stopped {
        let _ = stopped.send(());
    }
}

async fn refuse_busy(mut tcp: TcpStream) {
    let body = "agent-sandbox proxy: too many connections\n";
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\n{DENIED_HEADER}: {}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        codes::TOO_MANY_CONNECTIONS,
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        tcp.write_all(response.as_bytes()).await?;
        tcp.shutdown().await
    })
    .await;
}

async fn serve_client(shared: Arc<Shared>, tcp: TcpStream, slot: OwnedSemaphorePermit) {
    let activity = Activity::new();
    let limits = shared.limits.clone();
    let conn = Conn {
        shared,
        _slot: Arc::new(slot),
        activity: activity.clone(),
    };
    let io = TokioIo::new(Tracked {
        inner: tcp,
        activity: activity.clone(),
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.handshake_timeout)
        .max_header_size(limits.max_header_bytes)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    let served = builder
        .serve_connection(io, service_fn(move |req| front(conn.clone(), req)))
        .with_upgrades();
    tokio::select! {
        _ = served => {}
        _ = activity.idle(limits.idle_timeout) => {}
    }
}

/// A request on the proxy port itself.
async fn front(conn: Conn, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    Ok(if req.method() == Method::CONNECT {
        connect(conn, req).await
    } else if req.uri().scheme() == Some(&Scheme::HTTP) && req.uri().authority().is_some() {
        plain(conn, req).await
    } else {
        let message = if req.uri().scheme() == Some(&Scheme::HTTPS) {
            "send https:// requests through CONNECT (set HTTPS_PROXY)".to_string()
        } else {
            format!(
                "{} is not a proxy request; expected CONNECT host:443 or an absolute http:// URL",
                printable(&req.uri().to_string())
            )
        };
        let host = req.uri().host().unwrap_or("-").to_string();
        refuse(
            &conn,
            req,
            &host,
            0,
            StatusCode::BAD_REQUEST,
            codes::UNSUPPORTED_REQUEST,
            message,
        )
        .await
    })
}

async fn connect(conn: Conn, req: Request<Incoming>) -> Response<Body> {
    let Some((authority, port)) = req
        .uri()
        .authority()
        .and_then(|a| Some((a.clone(), a.port_u16()?)))
    else {
        let message = format!(
            "CONNECT {} needs a host:port target",
            printable(&req.uri().to_string())
        );
        return conn.deny_now("CONNECT", "-", 0, codes::UNSUPPORTED_REQUEST, message, None);
    };
    let shared = conn.shared.clone();
    let intercept = match shared.policy.check_connect(authority.host(), port) {
        Decision::Deny { code, message } => {
            return conn.deny_now("CONNECT", authority.host(), port, code, message, None);
        }
        Decision::Allow { intercept } => intercept,
    };
    let Some(host) = Host::parse(authority.host()) else {
        let message = format!("{} is not a valid host", printable(authority.host()));
        return conn.deny_now(
            "CONNECT",
            authority.host(),
            port,
            codes::INVALID_HOST,
            message,
            None,
        );
    };
    let on_upgrade = hyper::upgrade::on(req);
    if intercept {
        // Nothing is dialled yet: the upstream is contacted only for a request that passed.
        tokio::spawn(intercept_tunnel(conn, on_upgrade, host, port));
        return empty(StatusCode::OK);
    }
    match shared.dialer.dial(&host, port).await {
        Ok(upstream) => {
            shared.events.allow("CONNECT", &host.to_string(), port, "-");
            tokio::spawn(splice(conn, on_upgrade, upstream));
            empty(StatusCode::OK)
        }
        Err(e) => conn.dial_failed("CONNECT", &host.to_string(), port, "-", &e),
    }
}

/// A `"*"` host: bytes pass untouched both ways (end-to-end TLS, HTTP/2, WebSocket).
async fn splice(conn: Conn, on_upgrade: OnUpgrade, mut upstream: TcpStream) {
    let Ok(upgraded) = on_upgrade.await else {
        return;
    };
    // On Linux the client's own socket comes back out of hyper, and the kernel moves the
    // bytes (splice): no copy through this process.
    #[cfg(target_os = "linux")]
    let upgraded = match upgraded.downcast::<TokioIo<Tracked>>() {
        Ok(parts) => {
            let mut client = parts.io.into_inner();
            let activity = client.activity.clone();
            use crate::linux::splice::Pipe;
            let relay = async {
                // What the client sent right after CONNECT, already read by hyper.
                if !parts.read_buf.is_empty() {
                    upstream.write_all(&parts.read_buf).await?;
                }
                match (Pipe::new(), Pipe::new()) {
                    (Ok(up), Ok(down)) => {
                        zero_copy_tunnel(&client.inner, &upstream, (up, down), &activity).await
                    }
                    // Out of descriptors for the pipes: copy instead (nothing moved yet).
                    _ => tokio::io::copy_bidirectional(&mut client, &mut upstream)
                        .await
                        .map(|_| ()),
                }
            };
            // An error in either direction (a reset) ends the tunnel, as a copy would.
            tokio::select! {
                _ = relay => {}
                _ = conn.activity.idle(conn.shared.limits.idle_timeout) => {}
            }
            return;
        }
        Err(upgraded) => upgraded,
    };
    let mut client = TokioIo::new(upgraded);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        _ = conn.activity.idle(conn.shared.limits.idle_timeout) => {}
    }
}

/// Both directions of a tunnel through the kernel until each side has finished.
#[cfg(target_os = "linux")]
async fn zero_copy_tunnel(
    client: &TcpStream,
    upstream: &TcpStream,
    (up, down): (crate::linux::splice::Pipe, crate::linux::splice::Pipe),
    activity: &Activity,
) -> io::Result<()> {
    use crate::linux::splice::relay_tcp;
    let touch = || activity.touch();
    tokio::try_join!(
        relay_tcp(client, upstream, up, &touch),
        relay_tcp(upstream, client, down, &touch)
    )
    .map(|_| ())
}

#[derive(Debug, PartialEq, Eq)]
enum Sniffed {
    Tls,
    Http,
    Other,
    Undecided,
}

/// What the first bytes of a tunnel are: a TLS handshake record, an HTTP request line
/// (an upper-case method token and a space), or anything else.
fn classify(first: &[u8]) -> Sniffed {
    const MAX_METHOD: usize = 15;
    match first {
        [] | [0x16] => Sniffed::Undecided,
        [0x16, 0x03, ..] => Sniffed::Tls,
        _ => {
            let token = first.iter().take_while(|b| b.is_ascii_uppercase()).count();
            match first.get(token) {
                Some(b' ') if token >= 3 => Sniffed::Http,
                None if token <= MAX_METHOD => Sniffed::Undecided,
                _ => Sniffed::Other,
            }
        }
    }
}

async fn sniff<R: AsyncRead + Unpin>(reader: &mut R) -> io::Result<(Vec<u8>, Sniffed)> {
    let mut first = Vec::with_capacity(16);
    let mut chunk = [0u8; 16];
    loop {
        match classify(&first) {
            Sniffed::Undecided => {}
            decided => return Ok((first, decided)),
        }
        let n = reader.read(&mut chunk[..16 - first.len()]).await?;
        if n == 0 {
            return Ok((first, Sniffed::Other));
        }
        first.extend_from_slice(&chunk[..n]);
    }
}

/// A method-restricted host: terminate TLS (or parse plain HTTP) and check every request.
async fn intercept_tunnel(conn: Conn, on_upgrade: OnUpgrade, host: Host, port: u16) {
    let Ok(upgraded) = on_upgrade.await else {
        return;
    };
    let mut client = TokioIo::new(upgraded);
    let limits = conn.shared.limits.clone();
    let Ok(Ok((first, kind))) =
        tokio::time::timeout(limits.handshake_timeout, sniff(&mut client)).await
    else {
        return;
    };
    let io = Prefixed {
        prefix: first,
        pos: 0,
        inner: client,
    };
    match kind {
        Sniffed::Tls => {
            let Ok(config) = conn.shared.ca.server_config(&host).await else {
                return;
            };
            let accept = TlsAcceptor::from(config).accept(io);
            let Ok(Ok(tls)) = tokio::time::timeout(limits.handshake_timeout, accept).await else {
                return;
            };
            serve_tunnel(conn, tls, Scheme::HTTPS, host, port).await;
        }
        Sniffed::Http => serve_tunnel(conn, io, Scheme::HTTP, host, port).await,
        Sniffed::Other | Sniffed::Undecided => {
            // Fail closed (P1): what we cannot parse is never forwarded; the tunnel is dropped.
            let message = format!(
                "tunnel to {host}:{port} carried neither TLS nor HTTP; closed without contacting {host}"
            );
            conn.shared.record(
                "CONNECT",
                &host.to_string(),
                port,
                "-",
                codes::NON_HTTP_IN_TUNNEL,
                message,
                None,
            );
        }
    }
}

async fn serve_tunnel<I>(conn: Conn, io: I, scheme: Scheme, host: Host, port: u16)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = conn.shared.limits.clone();
    let activity = conn.activity.clone();
    let tunnel = Arc::new((host, port, scheme));
    let service = service_fn(move |req| {
        let conn = conn.clone();
        let tunnel = tunnel.clone();
        async move {
            let (host, port, scheme) = &*tunnel;
            Ok::<_, Infallible>(checked_forward(conn, host, *port, scheme.clone(), req).await)
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.handshake_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(100);
    let served = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::select! {
        _ = served => {}
        _ = activity.idle(limits.idle_timeout) => {}
    }
}

/// `GET http://host/…` sent to the proxy: the same checks as CONNECT host:80 plus a request.
async fn plain(conn: Conn, req: Request<Incoming>) -> Response<Body> {
    let authority = req.uri().authority().cloned().expect("checked by caller");
    let port = authority.port_u16().unwrap_or(80);
    let decision = match conn.shared.policy.check_connect(authority.host(), port) {
        Decision::Allow { .. } if port != 80 => Decision::Deny {
            code: codes::PORT_NOT_ALLOWED,
            message: format!(
                "{}:{port}: plain HTTP is proxied only to port 80",
                printable(authority.host())
            ),
        },
        other => other,
    };
    match (decision, Host::parse(authority.host())) {
        (Decision::Allow { .. }, Some(host)) => {
            checked_forward(conn, &host, port, Scheme::HTTP, req).await
        }
        (Decision::Deny { code, message }, _) => {
            let host = authority.host().to_string();
            refuse(
                &conn,
                req,
                &host,
                port,
                StatusCode::FORBIDDEN,
                code,
                message,
            )
            .await
        }
        (Decision::Allow { .. }, None) => {
            let host = authority.host().to_string();
            let message = format!("{} is not a valid host", printable(&host));
            refuse(
                &conn,
                req,
                &host,
                port,
                StatusCode::FORBIDDEN,
                codes::INVALID_HOST,
                message,
            )
            .await
        }
    }
}

/// Check one request bound for `host:port` (the tunnel's, or the absolute URI's), then
/// forward it.
async fn checked_forward(
    conn: Conn,
    host: &Host,
    port: u16,
    scheme: Scheme,
    req: Request<Incoming>,
) -> Response<Body> {
    let shared = conn.shared.clone();
    let host_name = host.to_string();

    // Every name the request gives for its destination (the URI authority, which is
    // `:authority` in HTTP/2, and each Host header) must be the tunnel's host and port.
    let mut named: Vec<String> = req
        .uri()
        .authority()
        .map(|a| a.to_string())
        .into_iter()
        .collect();
    named.extend(
        req.headers()
            .get_all(header::HOST)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
    );
    if named.is_empty() {
        let message = format!("request to {host_name} names no host (Host or :authority)");
        return refuse(
            &conn,
            req,
            &host_name,
            port,
            StatusCode::FORBIDDEN,
            codes::HOST_MISMATCH,
            message,
        )
        .await;
    }
    let mut restricted = false;
    for name in &named {
        let decision = match name.parse::<Authority>() {
            // No port means the tunnel's own; an explicit one must be it.
            Ok(a) if a.port_u16().is_some_and(|p| p != port) => Decision::Deny {
                code: codes::HOST_MISMATCH,
                message: format!(
                    "request for {} inside a tunnel opened for {host_name}:{port}",
                    printable(name)
                ),
            },
            Ok(a) => shared
                .policy
                .check_request(&host_name, a.host(), req.method().as_str()),
            Err(_) => Decision::Deny {
                code: codes::HOST_MISMATCH,
                message: format!("request host {} is not a valid host", printable(name)),
            },
        };
        match decision {
            Decision::Deny { code, message } => {
                return refuse(
                    &conn,
                    req,
                    &host_name,
                    port,
                    StatusCode::FORBIDDEN,
                    code,
                    message,
                )
                .await;
            }
            Decision::Allow { intercept } => restricted |= intercept,
        }
    }
    if restricted && is_upgrade(&req) {
        // Fail closed: after a 101 the bytes are no longer requests we could check.
        let message = format!(
            "upgrade to {} on {host_name}: only hosts allowed with \"*\" may switch protocols",
            printable(
                req.headers()
                    .get(header::UPGRADE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("?")
            )
        );
        return refuse(
            &conn,
            req,
            &host_name,
            port,
            StatusCode::FORBIDDEN,
            codes::UPGRADE_NOT_ALLOWED,
            message,
        )
        .await;
    }
    let target_len = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if matches!(*req.method(), Method::GET | Method::HEAD)
        && target_len > shared.limits.max_url_bytes
    {
        let message = format!(
            "URL of {target_len} bytes is longer than the {} allowed for {}",
            shared.limits.max_url_bytes,
            req.method()
        );
        return refuse(
            &conn,
            req,
            &host_name,
            port,
            StatusCode::URI_TOO_LONG,
            codes::URL_TOO_LONG,
            message,
        )
        .await;
    }
    if req.method() == Method::CONNECT {
        let message = "CONNECT inside a tunnel is not supported".to_string();
        return refuse(
            &conn,
            req,
            &host_name,
            port,
            StatusCode::FORBIDDEN,
            codes::UNSUPPORTED_REQUEST,
            message,
        )
        .await;
    }
    shared.events.allow(
        req.method().as_str(),
        &host_name,
        port,
        &log_path(req.uri().path()),
    );
    forward(conn, host, port, scheme, req).await
}

async fn forward(
    conn: Conn,
    host: &Host,
    port: u16,
    scheme: Scheme,
    mut req: Request<Incoming>,
) -> Response<Body> {
    let default_port = if scheme == Scheme::HTTPS { 443 } else { 80 };
    let authority = if port == default_port {
        host.uri_host()
    } else {
        format!("{}:{port}", host.uri_host())
    };
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_string();
    let Ok(uri) = Uri::builder()
        .scheme(scheme)
        .authority(authority.as_str())
        .path_and_query(path.as_str())
        .build()
    else {
        return text(
            StatusCode::BAD_REQUEST,
            None,
            "agent-sandbox proxy: bad request target\n".into(),
        );
    };
    let upgrade = is_upgrade(&req);
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let method = req.method().to_string();
    let (mut parts, body) = req.into_parts();
    parts.uri = uri;
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers, upgrade);
    // The client derives Host from the URI, i.e. from the checked tunnel host.
    parts.headers.remove(header::HOST);
    join_cookies(&mut parts.headers);
    let request = Request::from_parts(parts, body);
    let client = if upgrade {
        &conn.shared.client_h1
    } else {
        &conn.shared.client
    };
    match client.request(request).await {
        Ok(mut response) => {
            match client_upgrade {
                Some(client_side) if response.status() == StatusCode::SWITCHING_PROTOCOLS => {
                    let upstream_side = hyper::upgrade::on(&mut response);
                    tokio::spawn(join_upgraded(conn.clone(), client_side, upstream_side));
                }
                _ => strip_hop_by_hop(response.headers_mut(), false),
            }
            response.map(BodyExt::boxed)
        }
        Err(e) => match dial_error(&e) {
            Some(dial) => {
                conn.dial_failed(&method, &host.to_string(), port, &log_path(&path), dial)
            }
            None => {
                let message = format!("request to {authority} failed: {}", chain(&e));
                conn.upstream_failed(&method, &host.to_string(), port, &log_path(&path), &message)
            }
        },
    }
}

async fn join_upgraded(conn: Conn, client: OnUpgrade, upstream: OnUpgrade) {
    let (Ok(client), Ok(upstream)) = tokio::join!(client, upstream) else {
        return;
    };
    let (mut client, mut upstream) = (TokioIo::new(client), TokioIo::new(upstream));
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        _ = conn.activity.idle(conn.shared.limits.idle_timeout) => {}
    }
}

fn is_upgrade(req: &Request<Incoming>) -> bool {
    req.version() == Version::HTTP_11
        && req.headers().contains_key(header::UPGRADE)
        && req
            .headers()
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| connection_tokens(v).any(|t| t.eq_ignore_ascii_case("upgrade")))
}

fn connection_tokens(v: &HeaderValue) -> impl Iterator<Item = &str> {
    v.to_str().unwrap_or("").split(',').map(str::trim)
}

/// Remove the headers that describe one hop (RFC 9110 §7.6.1), keeping `Connection: upgrade`
/// and `Upgrade` for an upgrade request.
fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(connection_tokens)
        .filter(|t| !(keep_upgrade && t.eq_ignore_ascii_case("upgrade")))
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "trailer",
        "transfer-encoding",
    ] {
        headers.remove(name);
    }
    // `te: trailers` is end to end (gRPC needs it); any other TE value is hop-by-hop.
    if headers
        .get(header::TE)
        .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"trailers"))
    {
        headers.remove(header::TE);
    }
    if keep_upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    } else {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
    }
}

/// HTTP/2 clients may split cookies over several headers; an HTTP/1.1 upstream needs one.
fn join_cookies(headers: &mut HeaderMap) {
    if headers.get_all(header::COOKIE).iter().count() > 1 {
        let joined: Vec<&[u8]> = headers
            .get_all(header::COOKIE)
            .iter()
            .map(HeaderValue::as_bytes)
            .collect();
        if let Ok(value) = HeaderValue::from_bytes(&joined.join(&b"; "[..])) {
            headers.insert(header::COOKIE, value);
        }
    }
}

fn dial_error<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a DialError> {
    let mut current = Some(e);
    while let Some(err) = current {
        if let Some(dial) = err.downcast_ref::<DialError>() {
            return Some(dial);
        }
        current = err.source();
    }
    None
}

fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut current = e.source();
    while let Some(err) = current {
        parts.push(err.to_string());
        current = err.source();
    }
    printable_text(&parts.join(": "))
}

impl Shared {
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        method: &str,
        host: &str,
        port: u16,
        path: &str,
        code: &'static str,
        message: String,
        local_port: Option<u16>,
    ) -> String {
        let shown = Host::parse(host).map_or_else(|| printable(host), |h| h.to_string());
        let denial = Denial {
            time: now(),
            method: printable(method),
            would_allow: would_allow(&self.policy, code, method, host),
            host: shown,
            port,
            path: path.to_string(),
            code,
            message,
            local_port,
        };
        let sentence = denial.sentence();
        self.events.deny(denial);
        sentence
    }
}

impl Conn {
    /// Record and answer a denial that has no request body to drain (CONNECT).
    fn deny_now(
        &self,
        method: &str,
        host: &str,
        port: u16,
        code: &'static str,
        message: String,
        local_port: Option<u16>,
    ) -> Response<Body> {
        let status = if code == codes::UNSUPPORTED_REQUEST {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::FORBIDDEN
        };
        let sentence = self
            .shared
            .record(method, host, port, "-", code, message, local_port);
        denied(status, code, &sentence)
    }

    fn dial_failed(
        &self,
        method: &str,
        host: &str,
        port: u16,
        path: &str,
        error: &DialError,
    ) -> Response<Body> {
        match error {
            DialError::PrivateAddress { loopback_port, .. } => {
                let sentence = self.shared.record(
                    method,
                    host,
                    port,
                    path,
                    codes::PRIVATE_ADDRESS,
                    error.to_string(),
                    *loopback_port,
                );
                denied(StatusCode::FORBIDDEN, codes::PRIVATE_ADDRESS, &sentence)
            }
            other => {
                let message = printable_text(&other.to_string());
                self.upstream_failed(method, host, port, path, &message)
            }
        }
    }

    /// Log and answer an allowed request whose upstream failed (DNS, connect, TLS): 502.
    fn upstream_failed(
        &self,
        method: &str,
        host: &str,
        port: u16,
        path: &str,
        message: &str,
    ) -> Response<Body> {
        self.shared.events.fail(Failure {
            time: now(),
            method: printable(method),
            host: host.to_string(),
            port,
            path: path.to_string(),
            message: message.to_string(),
        });
        text(
            StatusCode::BAD_GATEWAY,
            None,
            format!("agent-sandbox proxy: {message}\n"),
        )
    }
}

/// Record a denied request and answer it, after reading (a bounded amount of) its body: an
/// HTTP/2 client whose upload is cut short sees a stream reset instead of the 403 (P3).
async fn refuse(
    conn: &Conn,
    req: Request<Incoming>,
    host: &str,
    port: u16,
    status: StatusCode,
    code: &'static str,
    message: String,
) -> Response<Body> {
    let method = req.method().to_string();
    let path = log_path(req.uri().path());
    let sentence = conn
        .shared
        .record(&method, host, port, &path, code, message, None);
    let limits = &conn.shared.limits;
    let drain = Limited::new(req.into_body(), limits.drain_bytes).collect();
    let _ = tokio::time::timeout(limits.drain_timeout, drain).await;
    denied(status, code, &sentence)
}

/// A refusal that says why and how to allow it where tools show it: HTTP/1 clients print
/// the status line (`Tunnel connection failed: 403 Blocked by agent-sandbox: …`) or the body;
/// HTTP/2 has no reason phrase, so the body carries the same sentence.
fn denied(status: StatusCode, code: &'static str, sentence: &str) -> Response<Body> {
    let mut response = text(status, Some(code), format!("{sentence}\n"));
    response.extensions_mut().insert(reason_phrase(sentence));
    response
}

/// A reason phrase may hold only tabs, spaces and visible bytes (RFC 9112 §4); anything else
/// becomes `?`, and a very long sentence is cut (status lines have limits in clients).
fn reason_phrase(sentence: &str) -> hyper::ext::ReasonPhrase {
    const MAX: usize = 1024;
    let mut phrase: String = sentence
        .chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .take(MAX)
        .collect();
    if sentence.chars().nth(MAX).is_some() {
        phrase.replace_range(MAX - 3.., "...");
    }
    hyper::ext::ReasonPhrase::try_from(phrase).expect("only spaces and visible ASCII")
}

fn text(status: StatusCode, code: Option<&'static str>, body: String) -> Response<Body> {
    let mut builder = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8");
    if let Some(code) = code {
        builder = builder.header(DENIED_HEADER, HeaderValue::from_static(code));
    }
    builder
        .body(
            Full::new(Bytes::from(body))
                .map_err(|never| match never {})
                .boxed(),
        )
        .expect("static status and headers")
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Empty::new().map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response
}

/// Milliseconds on a process-wide monotonic clock.
fn clock_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// When a client connection last moved a byte, in either direction.
#[derive(Clone)]
struct Activity(Arc<AtomicU64>);

impl Activity {
    fn new() -> Activity {
        Activity(Arc::new(AtomicU64::new(clock_ms())))
    }

    fn touch(&self) {
        self.0.store(clock_ms(), Ordering::Relaxed);
    }

    /// Resolves once nothing has moved for `limit`.
    async fn idle(&self, limit: Duration) {
        let limit = limit.as_millis() as u64;
        loop {
            let deadline = self.0.load(Ordering::Relaxed).saturating_add(limit);
            let now = clock_ms();
            if now >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(deadline - now)).await;
        }
    }
}

/// The client's socket, stamping [`Activity`] on every byte read or written. Tunnels and
/// intercepted connections run on top of it, so one clock covers them all.
struct Tracked {
    inner: TcpStream,
    activity: Activity,
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.touch();
        }
        result
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        result
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The sniffed bytes put back in front of the stream they were read from.
struct Prefixed<T> {
    prefix: Vec<u8>,
    pos: usize,
    inner: T,
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pos < this.prefix.len() {
            let rest = &this.prefix[this.pos..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing_first_bytes() {
        assert_eq!(classify(b""), Sniffed::Undecided);
        assert_eq!(classify(b"\x16"), Sniffed::Undecided);
        assert_eq!(classify(b"\x16\x03\x01"), Sniffed::Tls);
        assert_eq!(classify(b"\x16\x01"), Sniffed::Other);
        assert_eq!(classify(b"GE"), Sniffed::Undecided);
        assert_eq!(classify(b"GET "), Sniffed::Http);
        assert_eq!(classify(b"DELETE /x"), Sniffed::Http);
        assert_eq!(classify(b"PRI * HTTP/2.0"), Sniffed::Http);
        assert_eq!(classify(b"SSH-2.0-OpenSSH"), Sniffed::Other);
        assert_eq!(classify(b"get / HTTP/1.1"), Sniffed::Other);
        assert_eq!(classify(b"\x00\x01\x02"), Sniffed::Other);
        assert_eq!(classify(b"GO /"), Sniffed::Other);
        assert_eq!(classify(b"ABCDEFGHIJKLMNOP"), Sniffed::Other);
    }

    #[test]
    fn hop_by_hop_headers_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("proxy-authorization", HeaderValue::from_static("Basic x"));
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut h, false);
        let mut names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        names.sort();
        assert_eq!(names, ["te", "x-kept"]);
    }
}
