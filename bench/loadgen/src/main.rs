//! Load generator, loopback servers and the pasta floor for `bench/run`.
//!
//! Subcommands (all loopback-only):
//!   loadgen certs DIR                      a bench CA plus a server certificate for 127.0.0.1
//!   loadgen serve CERT KEY PORT_FILE [PORT] HTTPS upstream (ALPN h2 + http/1.1) on 127.0.0.1
//!   loadgen client [options] PHASE…        drive the upstream, directly or through a proxy
//!   loadgen pasta-floor [PASTA] -- CMD…    pasta's own cost: namespace + attach + CMD + stop
//!   loadgen relay PORT_FILE [BUF]          a minimal CONNECT relay (checks nothing), the floor
//!                                          for a userspace tunnel; BUF bytes per direction
//!   loadgen rss -- CMD…                    run CMD, print the peak RSS (KiB) of the largest
//!                                          process it waited for (wait4), exit with its status
//!   loadgen exec FILE                      exec the NUL-separated argv in FILE (for argvs
//!                                          longer than one command-line string may be)
//!
//! Client output is one JSON object per phase on stdout (`RESULT {...}`); with
//! `--interactive`, each phase is announced (`READY <phase>`) and starts only after a line on
//! stdin, so the caller can sample the proxy's CPU time and memory between phases.

mod client;
mod floor;
mod relay;
mod server;
mod tls;

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!(
        "usage:\n  loadgen certs DIR\n  loadgen serve CERT KEY PORT_FILE [PORT]\n  loadgen client --target HOST:PORT [--proxy HOST:PORT] [--ca FILE]… [--ca-env VAR]… [--interactive] PHASE…\n    PHASE = dl:BYTES:REPS | lat:h1|h2:CLIENTS:SECONDS | hold:CONNS\n  loadgen pasta-floor [--pasta PATH] -- CMD [ARG…]\n  loadgen relay PORT_FILE [BUF]\n  loadgen rss -- CMD [ARG…]\n  loadgen exec ARGV_FILE"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        return usage();
    };
    let rest = &args[1..];
    let result = match cmd.as_str() {
        "certs" => match rest {
            [dir] => tls::write_certs(std::path::Path::new(dir)),
            _ => return usage(),
        },
        "serve" => match rest {
            [cert, key, port_file] => server::main(cert, key, port_file, 0),
            [cert, key, port_file, port] => match port.parse() {
                Ok(port) => server::main(cert, key, port_file, port),
                Err(_) => return usage(),
            },
            _ => return usage(),
        },
        "client" => match client::Options::parse(rest) {
            Some(o) => client::main(o),
            None => return usage(),
        },
        "pasta-floor" => floor::main(rest),
        "relay" => match rest {
            [port_file] => relay::main(port_file, 8 * 1024),
            [port_file, buf] => match buf.parse() {
                Ok(buf) => relay::main(port_file, buf),
                Err(_) => return usage(),
            },
            _ => return usage(),
        },
        "rss" => match rest {
            [sep, cmd @ ..] if sep == "--" && !cmd.is_empty() => rss(cmd),
            _ => return usage(),
        },
        "exec" => match rest {
            [file] => exec_file(file),
            _ => return usage(),
        },
        "__hold" => floor::hold_main(),
        "__enter" => floor::enter_main(rest),
        _ => return usage(),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("loadgen {cmd}: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Run `cmd` and report its peak RSS. The child is started with posix_spawn (std does when
/// nothing runs between fork and exec), so the RSS it inherits into `ru_maxrss` at exec is
/// this small process's, not a big parent's: measure `true` the same way for the floor.
fn rss(cmd: &[String]) -> Result<u8> {
    let child = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()).into());
    }
    println!("{}", usage.ru_maxrss);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok(code.clamp(0, 255) as u8)
}

/// Replace this process with the NUL-separated argv stored in `file`.
fn exec_file(file: &str) -> Result<u8> {
    use std::os::unix::process::CommandExt;
    let data = std::fs::read(file)?;
    let argv: Vec<std::ffi::OsString> = data
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(a).to_owned())
        .collect();
    let Some((program, args)) = argv.split_first() else {
        return Err(format!("{file}: empty argv").into());
    };
    let err = std::process::Command::new(program).args(args).exec();
    Err(format!("cannot run {}: {err}", program.to_string_lossy()).into())
}

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;
