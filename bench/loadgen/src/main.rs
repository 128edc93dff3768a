//! Load generator, loopback servers and the pasta floor for `bench/run`.
//!
//! Subcommands (all loopback-only):
//!   loadgen certs DIR                      a bench CA plus a server certificate for 127.0.0.1
//!   loadgen serve CERT KEY PORT_FILE [PORT] HTTPS upstream (ALPN h2 + http/1.1) on 127.0.0.1
//!   loadgen client [options] PHASE…        drive the upstream, directly or through a proxy
//!   loadgen pasta-floor [PASTA] -- CMD…    pasta's own cost: namespace + attach + CMD + stop
//!
//! Client output is one JSON object per phase on stdout (`RESULT {...}`); with
//! `--interactive`, each phase is announced (`READY <phase>`) and starts only after a line on
//! stdin, so the caller can sample the proxy's CPU time and memory between phases.

mod client;
mod floor;
mod server;
mod tls;

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!(
        "usage:\n  loadgen certs DIR\n  loadgen serve CERT KEY PORT_FILE [PORT]\n  loadgen client --target HOST:PORT [--proxy HOST:PORT] [--ca FILE]… [--ca-env VAR]… [--interactive] PHASE…\n    PHASE = dl:BYTES:REPS | lat:h1|h2:CLIENTS:SECONDS | hold:CONNS\n  loadgen pasta-floor [--pasta PATH] -- CMD [ARG…]"
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

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;
