//! Zero-copy relays between sockets: `splice(2)` through a pipe, so tunnelled bytes never
//! enter user space. The proxy's `"*"` tunnels and the loopback bridges use it; both fall back
//! to copying through a buffer where the kernel refuses (`Unsupported`).
//!
//! Each relay owns one pipe (64 KiB of kernel memory, none of it the process's RSS), filled
//! from the source and drained to the destination before the next fill, so a full pipe never
//! stands between a readable source and a blocked writer.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Bytes moved per splice call (the default pipe capacity).
const CHUNK: usize = 64 * 1024;

/// The kernel buffer a relay moves bytes through.
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded, so both are fresh descriptors we own.
        Ok(unsafe {
            Pipe {
                read: OwnedFd::from_raw_fd(fds[0]),
                write: OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }
}

fn splice(from: RawFd, to: RawFd, len: usize, nonblock: bool) -> io::Result<usize> {
    let flags = libc::SPLICE_F_MOVE | if nonblock { libc::SPLICE_F_NONBLOCK } else { 0 };
    // SAFETY: plain descriptors, no offsets (both ends are sockets or pipes).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            flags,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        // EINVAL: this pair of files cannot be spliced.
        return Err(if e.raw_os_error() == Some(libc::EINVAL) {
            io::Error::new(io::ErrorKind::Unsupported, e)
        } else {
            e
        });
    }
    Ok(n as usize)
}

/// The buffer for the plain reads that step over TCP urgent data (rare; small keeps the
/// relays' futures small).
const URGENT_BUF: usize = 512;

fn read_fd(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for writes of its length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn write_all_fd(fd: BorrowedFd<'_>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        // SAFETY: data is valid for reads of its length.
        let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        data = &data[n as usize..];
    }
    Ok(())
}

async fn write_all_async(to: &tokio::net::TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        to.writable().await?;
        match to.try_write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `Unsupported` means "copy instead" only while nothing has moved yet.
fn not_after_start(e: io::Error, moved: u64) -> io::Error {
    if moved > 0 && e.kind() == io::ErrorKind::Unsupported {
        io::Error::other(e)
    } else {
        e
    }
}

/// Moves bytes from `from` to `to` (blocking descriptors) until `from` reaches end-of-file;
/// returns how many. `Unsupported` before the first byte means: copy instead.
pub fn relay_blocking(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> io::Result<u64> {
    // Without a pipe (out of descriptors), copy instead.
    let pipe = Pipe::new().map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e))?;
    let mut total = 0u64;
    let mut small = [0u8; URGENT_BUF];
    loop {
        let n = match splice(from.as_raw_fd(), pipe.write.as_raw_fd(), CHUNK, false) {
            // Zero is end-of-file, or TCP urgent data splice cannot pass: a read tells.
            Ok(0) => match read_fd(from, &mut small)? {
                0 => return Ok(total),
                m => {
                    write_all_fd(to, &small[..m])?;
                    total += m as u64;
                    continue;
                }
            },
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(not_after_start(e, total)),
        };
        let mut left = n;
        while left > 0 {
            match splice(pipe.read.as_raw_fd(), to.as_raw_fd(), left, false) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => left -= m,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Bytes sit in the pipe: the relay cannot switch to copying any more.
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                    return Err(io::Error::other(e));
                }
                Err(e) => return Err(e),
            }
        }
        total += n as u64;
    }
}

/// The async twin for tokio sockets: `from` → `to` through `pipe` until end-of-file on
/// `from`, then `to` is half-closed. `moved` runs whenever bytes moved (the proxy's idle
/// clock). `Unsupported` before the first byte means: copy instead.
pub async fn relay_tcp(
    from: &tokio::net::TcpStream,
    to: &tokio::net::TcpStream,
    pipe: Pipe,
    moved: &(dyn Fn() + Sync),
) -> io::Result<u64> {
    use tokio::io::Interest;
    let (src, dst) = (from.as_raw_fd(), to.as_raw_fd());
    let mut total = 0u64;
    let mut small = [0u8; URGENT_BUF];
    loop {
        from.readable().await?;
        // With the pipe empty, EAGAIN can only be the socket's: try_io then clears its
        // readiness, as it must.
        let spliced = from.try_io(Interest::READABLE, || {
            splice(src, pipe.write.as_raw_fd(), CHUNK, true)
        });
        let n = match spliced {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(not_after_start(e, total)),
        };
        if n == 0 {
            // End-of-file, or no data, or TCP urgent data, which stops splice without a word
            // (zero, or EAGAIN with data behind it): a plain read tells them apart and gets
            // past the urgent mark.
            match from.try_read(&mut small) {
                Ok(0) => break,
                Ok(m) => {
                    write_all_async(to, &small[..m]).await?;
                    moved();
                    total += m as u64;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        moved();
        let mut left = n;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                splice(pipe.read.as_raw_fd(), dst, left, true)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => left -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                    return Err(io::Error::other(e));
                }
                Err(e) => return Err(e),
            }
        }
        moved();
        total += n as u64;
    }
    // SAFETY: shutdown on a descriptor `to` keeps open; no memory involved.
    unsafe { libc::shutdown(to.as_fd().as_raw_fd(), libc::SHUT_WR) };
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::net::UnixStream;

    #[test]
    fn blocking_relay_moves_every_byte_between_tcp_and_unix_sockets() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let (ux_a, mut ux_b) = UnixStream::pair().unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            client.write_all(&sent).unwrap();
            client.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let relay = std::thread::spawn(move || {
            let n = relay_blocking(server.as_fd(), ux_a.as_fd()).unwrap();
            drop(ux_a);
            n
        });
        let mut got = Vec::new();
        ux_b.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        assert_eq!(relay.join().unwrap(), data.len() as u64);
        assert!(got == data, "relayed bytes differ");
    }

    /// TCP urgent data stops splice at its mark (returning 0, which looks like end-of-file);
    /// the relays must step over it, as a copy through read() would, and not cut the stream.
    fn send_with_urgent_byte(client: &TcpStream) {
        let mut c = client;
        c.write_all(b"abc").unwrap();
        // SAFETY: a valid socket and a one-byte buffer.
        let n = unsafe {
            libc::send(
                client.as_fd().as_raw_fd(),
                b"X".as_ptr().cast(),
                1,
                libc::MSG_OOB,
            )
        };
        assert_eq!(n, 1);
        std::thread::sleep(std::time::Duration::from_millis(50));
        c.write_all(b"def").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
    }

    #[test]
    fn blocking_relay_steps_over_tcp_urgent_data() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let (ux_a, mut ux_b) = UnixStream::pair().unwrap();
        let relay = std::thread::spawn(move || {
            relay_blocking(server.as_fd(), ux_a.as_fd()).unwrap();
        });
        send_with_urgent_byte(&client);
        let mut got = Vec::new();
        relay.join().unwrap();
        ux_b.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"abcdef");
    }

    #[tokio::test]
    async fn async_relay_steps_over_tcp_urgent_data() {
        use tokio::io::AsyncReadExt;
        let l1 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let l2 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l1.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let client = TcpStream::connect(addr).unwrap();
            send_with_urgent_byte(&client);
            client
        });
        let (near, _) = l1.accept().await.unwrap();
        let far = tokio::net::TcpStream::connect(l2.local_addr().unwrap())
            .await
            .unwrap();
        let (mut sink, _) = l2.accept().await.unwrap();
        let relay = async {
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                relay_tcp(&near, &far, Pipe::new().unwrap(), &|| {}),
            )
            .await
            .expect("the relay stalled at the urgent byte")
            .unwrap()
        };
        let read = async {
            let mut got = Vec::new();
            sink.read_to_end(&mut got).await.unwrap();
            got
        };
        let (_, got) = tokio::join!(relay, read);
        drop(writer.join().unwrap());
        assert_eq!(got, b"abcdef");
    }

    #[tokio::test]
    async fn async_relay_moves_every_byte_and_half_closes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l1 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let l2 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(l1.local_addr().unwrap())
            .await
            .unwrap();
        let (near, _) = l1.accept().await.unwrap();
        let far = tokio::net::TcpStream::connect(l2.local_addr().unwrap())
            .await
            .unwrap();
        let (mut sink, _) = l2.accept().await.unwrap();
        let data: Vec<u8> = (0..5_000_000u32).map(|i| (i * 13 % 253) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            client.write_all(&sent).await.unwrap();
            client.shutdown().await.unwrap();
            client
        });
        let ticks = std::sync::atomic::AtomicUsize::new(0);
        let relay = async {
            relay_tcp(&near, &far, Pipe::new().unwrap(), &|| {
                ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
            .await
            .unwrap()
        };
        let read = async {
            let mut got = Vec::new();
            sink.read_to_end(&mut got).await.unwrap();
            got
        };
        let (n, got) = tokio::join!(relay, read);
        writer.await.unwrap();
        assert_eq!(n, data.len() as u64);
        assert!(got == data, "relayed bytes differ");
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > 0);
    }
}
