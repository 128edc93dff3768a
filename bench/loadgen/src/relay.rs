//! A minimal CONNECT relay: the floor for any userspace tunnelling proxy on this machine.
//! It checks nothing; it reads `CONNECT host:port`, dials it, answers 200 and copies bytes
//! both ways with tokio's copy_bidirectional (BUF bytes per direction).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::Result;

pub fn main(port_file: &str, buf: usize) -> Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let tmp = format!("{port_file}.tmp");
        std::fs::write(&tmp, format!("{port}\n"))?;
        std::fs::rename(&tmp, port_file)?;
        loop {
            let (mut client, _) = listener.accept().await?;
            let _ = client.set_nodelay(true);
            tokio::spawn(async move {
                let mut head = Vec::new();
                while !head.ends_with(b"\r\n\r\n") {
                    let mut b = [0u8; 1];
                    if client.read(&mut b).await.unwrap_or(0) == 0 || head.len() > 8192 {
                        return;
                    }
                    head.push(b[0]);
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let Some(target) = line
                    .strip_prefix("CONNECT ")
                    .and_then(|r| r.split(' ').next())
                else {
                    return;
                };
                let Ok(mut upstream) = TcpStream::connect(target).await else {
                    return;
                };
                let _ = upstream.set_nodelay(true);
                if client.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.is_err() {
                    return;
                }
                let _ =
                    tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, buf, buf)
                        .await;
            });
        }
    })
}
