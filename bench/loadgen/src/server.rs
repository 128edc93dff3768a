//! The upstream: HTTPS on 127.0.0.1 (PORT, or an ephemeral one; written to PORT_FILE), HTTP/1.1
//! keep-alive or HTTP/2 by ALPN.
//!   GET /small      a 64-byte body
//!   GET /bytes/N    N bytes, generated (streamed from one shared 256 KiB buffer)

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::Result;

const CHUNK: usize = 256 * 1024;
pub const SMALL_BODY: &[u8] = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";

/// A body of `left` bytes, cut from one shared buffer: generating it costs no copies.
struct Generated {
    chunk: Bytes,
    left: u64,
}

impl Body for Generated {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(self.chunk.len() as u64) as usize;
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.left)
    }
}

type BoxBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn handle(
    chunk: Bytes,
    req: Request<Incoming>,
) -> std::result::Result<Response<BoxBody>, Infallible> {
    let path = req.uri().path();
    let response = if path == "/small" {
        Response::new(Full::new(Bytes::from_static(SMALL_BODY)).boxed())
    } else if let Some(n) = path
        .strip_prefix("/bytes/")
        .and_then(|n| n.parse::<u64>().ok())
    {
        Response::new(Generated { chunk, left: n }.boxed())
    } else {
        let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")).boxed());
        *r.status_mut() = StatusCode::NOT_FOUND;
        r
    };
    Ok(response)
}

pub fn main(cert: &str, key: &str, port_file: &str, port: u16) -> Result<u8> {
    let config = crate::tls::server_config(cert, key)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        // Written only once we listen: the caller waits for this file.
        let tmp = format!("{port_file}.tmp");
        std::fs::write(&tmp, format!("{port}\n"))?;
        std::fs::rename(&tmp, port_file)?;
        let acceptor = TlsAcceptor::from(config);
        let chunk = Bytes::from(vec![b'x'; CHUNK]);
        loop {
            let (tcp, _) = listener.accept().await?;
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                let io = TokioIo::new(tls);
                let service = service_fn(move |req| handle(chunk.clone(), req));
                if h2 {
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .max_concurrent_streams(1000)
                        .serve_connection(io, service)
                        .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(io, service)
                        .await;
                }
            });
        }
    })
}
