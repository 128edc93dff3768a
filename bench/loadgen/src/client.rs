//! The client side: HTTPS to the upstream, directly or through an HTTP proxy (CONNECT), with
//! HTTP/1.1 keep-alive or HTTP/2 (one connection per simulated client in both cases).
//!
//! Phases:
//!   dl:BYTES:REPS          download BYTES REPS times over one h1 connection; MiB/s per rep
//!   lat:h1|h2:N:SECONDS    N clients, each sending GET /small back to back; p50/p99, req/s
//!   hold:N                 open N connections (one request each), hold them, use them again

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{Request, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::Result;

#[derive(Debug, Clone)]
pub enum Phase {
    Download { bytes: u64, reps: u32 },
    Latency { h2: bool, clients: usize, secs: f64 },
    Hold { conns: usize },
}

impl Phase {
    fn parse(s: &str) -> Option<Phase> {
        let f: Vec<&str> = s.split(':').collect();
        match f.as_slice() {
            ["dl", bytes, reps] => Some(Phase::Download {
                bytes: bytes.parse().ok()?,
                reps: reps.parse().ok()?,
            }),
            ["lat", proto, clients, secs] => Some(Phase::Latency {
                h2: match *proto {
                    "h1" => false,
                    "h2" => true,
                    _ => return None,
                },
                clients: clients.parse().ok().filter(|n| *n > 0)?,
                secs: secs.parse().ok()?,
            }),
            ["hold", conns] => Some(Phase::Hold {
                conns: conns.parse().ok()?,
            }),
            _ => None,
        }
    }

    fn name(&self) -> String {
        match self {
            Phase::Download { .. } => "dl".into(),
            Phase::Latency { h2, clients, .. } => {
                format!("lat-{}-{clients}", if *h2 { "h2" } else { "h1" })
            }
            Phase::Hold { conns } => format!("hold-{conns}"),
        }
    }
}

#[derive(Debug)]
pub struct Options {
    target: SocketAddr,
    proxy: Option<SocketAddr>,
    ca_files: Vec<String>,
    interactive: bool,
    phases: Vec<Phase>,
}

impl Options {
    pub fn parse(args: &[String]) -> Option<Options> {
        let mut target = None;
        let mut proxy = None;
        let mut ca_files = Vec::new();
        let mut interactive = false;
        let mut phases = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--target" => target = Some(it.next()?.parse().ok()?),
                "--proxy" => proxy = Some(it.next()?.parse().ok()?),
                "--ca" => ca_files.push(it.next()?.clone()),
                // The CA bundle path inside the sandbox is known only there.
                "--ca-env" => ca_files.push(std::env::var(it.next()?).ok()?),
                "--interactive" => interactive = true,
                p => phases.push(Phase::parse(p)?),
            }
        }
        Some(Options {
            target: target?,
            proxy,
            ca_files,
            interactive,
            phases,
        })
    }
}

#[derive(Clone)]
struct Ctx {
    target: SocketAddr,
    proxy: Option<SocketAddr>,
    tls_h1: Arc<ClientConfig>,
    tls_h2: Arc<ClientConfig>,
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

impl Ctx {
    async fn open(&self, h2: bool) -> Result<Sender> {
        let mut tcp = TcpStream::connect(self.proxy.unwrap_or(self.target)).await?;
        tcp.set_nodelay(true)?;
        if self.proxy.is_some() {
            let t = self.target;
            tcp.write_all(format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n").as_bytes())
                .await?;
            // Read the response head byte by byte: nothing of the tunnel may be consumed.
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut b = [0u8; 1];
                if tcp.read(&mut b).await? == 0 || head.len() > 16384 {
                    return Err("proxy closed the connection during CONNECT".into());
                }
                head.push(b[0]);
            }
            let status = String::from_utf8_lossy(&head);
            if !status.starts_with("HTTP/1.1 200") && !status.starts_with("HTTP/1.0 200") {
                return Err(
                    format!("CONNECT refused: {}", status.lines().next().unwrap_or("")).into(),
                );
            }
        }
        let config = if h2 { &self.tls_h2 } else { &self.tls_h1 };
        let name = ServerName::IpAddress(self.target.ip().into());
        let tls = TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await?;
        let io = TokioIo::new(tls);
        if h2 {
            let (send, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(conn);
            Ok(Sender::H2(send))
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(conn);
            Ok(Sender::H1(send))
        }
    }

    fn request(&self, h2: bool, path: &str) -> Request<Empty<Bytes>> {
        let t = self.target;
        let uri: Uri = if h2 {
            format!("https://{t}{path}").parse().expect("valid uri")
        } else {
            path.parse().expect("valid path")
        };
        let mut b = Request::get(uri);
        if !h2 {
            b = b.header("host", t.to_string());
        }
        b.body(Empty::new()).expect("valid request")
    }
}

impl Sender {
    /// One GET; returns the number of body bytes after checking the status.
    async fn get(&mut self, req: Request<Empty<Bytes>>) -> Result<u64> {
        let resp = match self {
            Sender::H1(s) => {
                s.ready().await?;
                s.send_request(req).await?
            }
            Sender::H2(s) => {
                s.ready().await?;
                s.send_request(req).await?
            }
        };
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp.into_body().collect().await?.to_bytes();
            return Err(
                format!("status {status}: {}", String::from_utf8_lossy(&body).trim()).into(),
            );
        }
        let mut body = resp.into_body();
        let mut n = 0u64;
        while let Some(frame) = body.frame().await {
            if let Some(d) = frame?.data_ref() {
                n += d.len() as u64;
            }
        }
        Ok(n)
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn download(ctx: &Ctx, bytes: u64, reps: u32) -> Result<String> {
    let mut sender = ctx.open(false).await?;
    let mut rates = Vec::new();
    for _ in 0..reps {
        let start = Instant::now();
        let got = sender
            .get(ctx.request(false, &format!("/bytes/{bytes}")))
            .await?;
        let secs = start.elapsed().as_secs_f64();
        if got != bytes {
            return Err(format!("download got {got} of {bytes} bytes").into());
        }
        rates.push(format!("{:.1}", bytes as f64 / secs / (1024.0 * 1024.0)));
    }
    Ok(format!(
        "\"bytes\":{bytes},\"mib_per_s\":[{}]",
        rates.join(",")
    ))
}

async fn latency(ctx: Arc<Ctx>, h2: bool, clients: usize, secs: f64) -> Result<String> {
    // Connect everyone first (at most 64 handshakes at a time), outside the timed window.
    let mut senders = Vec::with_capacity(clients);
    for batch in (0..clients).collect::<Vec<_>>().chunks(64) {
        let mut opening = tokio::task::JoinSet::new();
        for _ in batch {
            let ctx = ctx.clone();
            opening.spawn(async move { ctx.open(h2).await });
        }
        while let Some(r) = opening.join_next().await {
            senders.push(r??);
        }
    }
    let warmup = Duration::from_secs_f64((secs / 5.0).min(0.5));
    let window = Duration::from_secs_f64(secs);
    let begin = Instant::now() + warmup;
    let end = begin + window;
    let mut tasks = Vec::new();
    for mut sender in senders {
        let ctx = ctx.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat: Vec<u32> = Vec::with_capacity(4096);
            let mut errors = 0u64;
            let mut first_error = None;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                match sender.get(ctx.request(h2, "/small")).await {
                    Ok(_) => {
                        if t0 >= begin {
                            lat.push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                        }
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e.to_string());
                        if errors > 3 {
                            break;
                        }
                        // A broken connection: open a new one and go on.
                        match ctx.open(h2).await {
                            Ok(s) => sender = s,
                            Err(_) => break,
                        }
                    }
                }
            }
            (lat, errors, first_error)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for t in tasks {
        let (lat, e, fe) = t.await?;
        all.extend(lat);
        errors += e;
        if first_error.is_none() {
            first_error = fe;
        }
    }
    all.sort_unstable();
    let requests = all.len();
    Ok(format!(
        "\"clients\":{clients},\"proto\":\"{}\",\"requests\":{requests},\"secs\":{secs},\"rps\":{:.1},\"p50_us\":{},\"p99_us\":{},\"errors\":{errors},\"first_error\":{}",
        if h2 { "h2" } else { "h1" },
        requests as f64 / secs,
        percentile(&all, 0.50),
        percentile(&all, 0.99),
        first_error.map_or("null".into(), |e| json_str(&e)),
    ))
}

async fn hold(ctx: &Ctx, conns: usize, lines: &mut Lines, interactive: bool) -> Result<String> {
    let mut senders = Vec::with_capacity(conns);
    let mut errors = 0u64;
    let mut first_error: Option<String> = None;
    for batch in (0..conns).collect::<Vec<_>>().chunks(32) {
        let mut opening = tokio::task::JoinSet::new();
        for _ in batch {
            let ctx = ctx.clone();
            opening.spawn(async move {
                let mut s = ctx.open(false).await?;
                s.get(ctx.request(false, "/small")).await?;
                Ok::<_, crate::Error>(s)
            });
        }
        while let Some(r) = opening.join_next().await {
            match r? {
                Ok(s) => senders.push(s),
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
    }
    println!("HOLDING {}", senders.len());
    if interactive {
        lines.next_line().await?;
    } else {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every held connection must still work.
    let mut reused = 0;
    for s in senders.iter_mut() {
        match s.get(ctx.request(false, "/small")).await {
            Ok(_) => reused += 1,
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e.to_string());
            }
        }
    }
    Ok(format!(
        "\"conns\":{conns},\"held\":{reused},\"errors\":{errors},\"first_error\":{}",
        first_error.map_or("null".into(), |e| json_str(&e))
    ))
}

type Lines = tokio::io::Lines<BufReader<tokio::io::Stdin>>;

pub fn main(o: Options) -> Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let ctx = Arc::new(Ctx {
            target: o.target,
            proxy: o.proxy,
            tls_h1: crate::tls::client_config(&o.ca_files, b"http/1.1")?,
            tls_h2: crate::tls::client_config(&o.ca_files, b"h2")?,
        });
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        let mut failed = false;
        for phase in &o.phases {
            let name = phase.name();
            if o.interactive {
                println!("READY {name}");
                lines.next_line().await?;
            }
            let start = Instant::now();
            let r = match phase {
                Phase::Download { bytes, reps } => download(&ctx, *bytes, *reps).await,
                Phase::Latency { h2, clients, secs } => {
                    latency(ctx.clone(), *h2, *clients, *secs).await
                }
                Phase::Hold { conns } => hold(&ctx, *conns, &mut lines, o.interactive).await,
            };
            let wall = start.elapsed().as_secs_f64();
            match r {
                Ok(body) => {
                    let ok = !body.contains("\"errors\":") || body.contains("\"errors\":0,");
                    failed |= !ok;
                    println!("RESULT {{\"phase\":\"{name}\",\"ok\":{ok},\"wall\":{wall:.3},{body}}}")
                }
                Err(e) => {
                    failed = true;
                    println!(
                        "RESULT {{\"phase\":\"{name}\",\"ok\":false,\"wall\":{wall:.3},\"error\":{}}}",
                        json_str(&e.to_string())
                    )
                }
            }
        }
        println!("DONE");
        Ok(if failed { 1 } else { 0 })
    })
}
