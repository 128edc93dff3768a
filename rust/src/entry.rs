//! The helper's internal command lines: the ones it writes for a process of its own and reads
//! back there. The sandbox's PID 1 (`__init`, or the small `agent-sandbox-init` without the
//! word), the bridge specs on its line, and on Linux the namespace holder (`__hold`) and the
//! namespace entry (`__enter`); the exit sweep's sentinel (`__sweep`) on every OS. Each line is
//! one type whose `to_args` and `parse` sit side by side, so writer and reader cannot drift.
//!
//! Not under `linux/`: the sentinel runs on macOS too, and bwrap's argv (which carries the
//! init's line) is planned on every OS. The holder's and the entry's lines are Linux-only (the
//! holder's names `linux::rtnl` prefixes).
//!
//! Pure, and parsed by hand: the init and the holder are exec'd on every start, and a parser
//! crate would cost each of them start-up time (see `cli::main`).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use crate::linux::rtnl::Prefix;

/// The word that selects the sandbox's PID 1 in the full helper.
pub const INIT: &str = "__init";
/// The word that selects the namespace holder.
pub const HOLD: &str = "__hold";
/// The word that selects the namespace entry.
pub const ENTER: &str = "__enter";
/// The word that selects the exit sweep's sentinel.
pub const SWEEP: &str = "__sweep";

const INIT_USAGE: &str =
    "[--own-pgrp] [--pass PORT=SOCKET]… [--bridge PORT=SOCKET]… -- COMMAND [ARG…]";
#[cfg(target_os = "linux")]
const HOLD_USAGE: &str = "UID GID PASTA|- LOG|- DNS|- STAGE-DIR|- STAGE-LIST|- VIEW|- PREFIX…";
#[cfg(target_os = "linux")]
const ENTER_USAGE: &str = "PID user[,mnt][,net] -- PROGRAM [ARG…]";
const SWEEP_USAGE: &str = "SESSION_DIR";

/// A command line the helper cannot read. Only a helper and an `agent-sandbox-init` from
/// different builds (or a hand-typed line) produce one; the process it was meant for stops.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{line}: {problem}; usage: {line} {usage} (a command line agent-sandbox writes for itself: agent-sandbox and agent-sandbox-init must come from the same build)"
)]
pub struct EntryError {
    line: &'static str,
    usage: &'static str,
    problem: String,
}

type Result<T> = std::result::Result<T, EntryError>;

fn bad(line: &'static str, usage: &'static str) -> impl Fn(String) -> EntryError {
    move |problem| EntryError {
        line,
        usage,
        problem,
    }
}

/// An absolute path, or the error naming what was given.
fn absolute(s: &OsStr, what: &str) -> std::result::Result<PathBuf, String> {
    let p = Path::new(s);
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Err(format!("{what} {s:?} is not an absolute path"))
    }
}

/// A `PORT=SOCKET` pair on the init's line: a loopback port inside the sandbox and the Unix
/// socket it is carried over (`--bridge 5432=/run/…/port-5432.sock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeSpec {
    pub port: u16,
    pub socket: PathBuf,
}

impl BridgeSpec {
    /// `PORT=SOCKET`, the socket's bytes as they are (no lossy conversion).
    pub fn to_arg(&self) -> OsString {
        let mut a = OsString::from(format!("{}=", self.port));
        a.push(&self.socket);
        a
    }

    /// The inverse of [`BridgeSpec::to_arg`]: PORT in 1–65535 (digits only), SOCKET absolute
    /// (it may hold `=` itself: the first one separates).
    pub fn parse(arg: &OsStr) -> Result<BridgeSpec> {
        let bad = || {
            bad(INIT, INIT_USAGE)(format!(
                "{arg:?} is not PORT=SOCKET (PORT 1-65535, SOCKET an absolute path)"
            ))
        };
        let bytes = arg.as_bytes();
        let eq = bytes.iter().position(|&b| b == b'=').ok_or_else(bad)?;
        let (port, socket) = (&bytes[..eq], &bytes[eq + 1..]);
        let port = std::str::from_utf8(port)
            .ok()
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|&p| p != 0)
            .ok_or_else(bad)?;
        let socket = Path::new(OsStr::from_bytes(socket));
        if !socket.is_absolute() {
            return Err(bad());
        }
        Ok(BridgeSpec {
            port,
            socket: socket.to_path_buf(),
        })
    }
}

/// The sandbox's PID 1: the arguments after `__init` (the small `agent-sandbox-init` takes
/// them as they are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitArgs {
    /// Give the command a process group of its own (`linux::init::set_own_process_group`).
    pub own_pgrp: bool,
    /// `--pass`: ports whose listening sockets the init hands to the proxy over the socket.
    pub pass: Vec<BridgeSpec>,
    /// `--bridge`: ports the init bridges, connection by connection, to the socket.
    pub bridges: Vec<BridgeSpec>,
    /// After `--`: never empty.
    pub command: Vec<OsString>,
}

impl InitArgs {
    /// `[--own-pgrp] [--pass P=S]… [--bridge P=S]… -- COMMAND…`, in the order the init acts on
    /// them. Pure.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        if self.own_pgrp {
            a.push("--own-pgrp".into());
        }
        for (flag, list) in [("--pass", &self.pass), ("--bridge", &self.bridges)] {
            for b in list {
                a.extend([flag.into(), b.to_arg()]);
            }
        }
        a.push("--".into());
        a.extend(self.command.iter().cloned());
        a
    }

    /// The inverse of [`InitArgs::to_args`]. Everything after `--` is the command, however it
    /// looks. Pure.
    pub fn parse(args: &[OsString]) -> Result<InitArgs> {
        let bad = bad(INIT, INIT_USAGE);
        let mut a = InitArgs::default();
        let mut rest = args;
        loop {
            match rest {
                [sep, command @ ..] if sep == "--" => {
                    if command.is_empty() {
                        return Err(bad("no command after --".into()));
                    }
                    a.command = command.to_vec();
                    return Ok(a);
                }
                [flag, tail @ ..] if flag == "--own-pgrp" => {
                    a.own_pgrp = true;
                    rest = tail;
                }
                [flag, tail @ ..] if flag == "--pass" || flag == "--bridge" => {
                    let [value, tail @ ..] = tail else {
                        return Err(bad(format!("{flag:?} needs PORT=SOCKET")));
                    };
                    let list = if flag == "--pass" {
                        &mut a.pass
                    } else {
                        &mut a.bridges
                    };
                    list.push(BridgeSpec::parse(value)?);
                    rest = tail;
                }
                [other, ..] => return Err(bad(format!("unknown option {other:?} before --"))),
                [] => return Err(bad("no -- before the command".into())),
            }
        }
    }
}

/// Open mode's part of the holder's command line: which pasta, where it logs, and the DNS
/// forwarding address.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastaSpec {
    pub pasta: PathBuf,
    pub log: PathBuf,
    pub dns_forward: Option<String>,
}

/// A large closure staged by the holder ([`crate::linux::stage`]): the directory, the file
/// listing its entries, and where to build the view.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageSpec {
    pub dir: PathBuf,
    pub list: PathBuf,
    pub view: PathBuf,
}

/// The holder's command line: `__hold UID GID PASTA LOG DNS STAGE-DIR STAGE-LIST VIEW
/// PREFIX…`, with `-` for what is not set. PASTA/LOG/DNS (open mode) run pasta and cut the
/// PREFIXes off. Every path is absolute (the launcher's are: located tools, the canonical
/// session directory), so `-` is never one.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldArgs {
    pub uid: u32,
    pub gid: u32,
    pub net: Option<PastaSpec>,
    pub stage: Option<StageSpec>,
    /// Cut off in the namespace; only with `net`.
    pub block: Vec<Prefix>,
}

#[cfg(target_os = "linux")]
impl HoldArgs {
    /// The arguments after `__hold`. Pure.
    pub fn to_args(&self) -> Vec<OsString> {
        let dash = || OsString::from("-");
        let mut a: Vec<OsString> = vec![self.uid.to_string().into(), self.gid.to_string().into()];
        match &self.net {
            Some(n) => a.extend([
                n.pasta.clone().into(),
                n.log.clone().into(),
                n.dns_forward.clone().map_or_else(dash, OsString::from),
            ]),
            None => a.extend([dash(), dash(), dash()]),
        }
        match &self.stage {
            Some(s) => a.extend([
                s.dir.clone().into(),
                s.list.clone().into(),
                s.view.clone().into(),
            ]),
            None => a.extend([dash(), dash(), dash()]),
        }
        a.extend(self.block.iter().map(|p| p.to_string().into()));
        a
    }

    /// The inverse of [`HoldArgs::to_args`]. A group is set whole or not at all (DNS may be
    /// `-` alone). Pure.
    pub fn parse(args: &[OsString]) -> Result<HoldArgs> {
        let bad = bad(HOLD, HOLD_USAGE);
        let [uid, gid, pasta, log, dns, dir, list, view, block @ ..] = args else {
            return Err(bad(format!(
                "{} arguments, expected at least 8",
                args.len()
            )));
        };
        let num = |s: &OsString| {
            s.to_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad(format!("{s:?} is not a numeric id")))
        };
        let path = |s: &OsString, what: &str| {
            if s == "-" {
                Ok(None)
            } else {
                absolute(s, what).map(Some).map_err(&bad)
            }
        };
        let net = match (path(pasta, "PASTA")?, path(log, "LOG")?) {
            (Some(pasta), Some(log)) => Some(PastaSpec {
                pasta,
                log,
                dns_forward: match dns.to_str() {
                    Some("-") => None,
                    Some(d) if !d.is_empty() => Some(d.to_string()),
                    _ => return Err(bad(format!("DNS {dns:?} is not an address"))),
                },
            }),
            (None, None) if dns == "-" => None,
            _ => return Err(bad("PASTA, LOG and DNS are set together or all -".into())),
        };
        let stage = match (
            path(dir, "STAGE-DIR")?,
            path(list, "STAGE-LIST")?,
            path(view, "VIEW")?,
        ) {
            (Some(dir), Some(list), Some(view)) => Some(StageSpec { dir, list, view }),
            (None, None, None) => None,
            _ => {
                return Err(bad(
                    "STAGE-DIR, STAGE-LIST and VIEW are set together or all -".into(),
                ));
            }
        };
        let block = block
            .iter()
            .map(|p| p.to_string_lossy().parse::<Prefix>().map_err(&bad))
            .collect::<Result<Vec<_>>>()?;
        if net.is_none() && !block.is_empty() {
            return Err(bad("PREFIXes are cut off only with PASTA".into()));
        }
        Ok(HoldArgs {
            uid: num(uid)?,
            gid: num(gid)?,
            net,
            stage,
            block,
        })
    }
}

/// A namespace of the holder's that `__enter` joins.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    User,
    Mnt,
    Net,
}

#[cfg(target_os = "linux")]
impl Namespace {
    /// Its name under `/proc/PID/ns/`.
    pub fn name(self) -> &'static str {
        match self {
            Namespace::User => "user",
            Namespace::Mnt => "mnt",
            Namespace::Net => "net",
        }
    }
}

/// The namespace entry's command line: `__enter PID NAMESPACES -- PROGRAM ARGS…`, joining the
/// holder PID's namespaces (user first) and then exec'ing the program.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnterArgs {
    pub holder_pid: u32,
    pub namespaces: Vec<Namespace>,
    /// Never empty on a whole line. Empty, [`EnterArgs::to_args`] gives the prefix that the
    /// program is appended to (`supervise` appends bwrap and its argv).
    pub command: Vec<OsString>,
}

#[cfg(target_os = "linux")]
impl EnterArgs {
    /// The arguments after `__enter`. Pure.
    pub fn to_args(&self) -> Vec<OsString> {
        let ns: Vec<&str> = self.namespaces.iter().map(|n| n.name()).collect();
        let mut a: Vec<OsString> = vec![
            self.holder_pid.to_string().into(),
            ns.join(",").into(),
            "--".into(),
        ];
        a.extend(self.command.iter().cloned());
        a
    }

    /// The inverse of [`EnterArgs::to_args`] for a whole line (a program after `--`). Pure.
    pub fn parse(args: &[OsString]) -> Result<EnterArgs> {
        let bad = bad(ENTER, ENTER_USAGE);
        let [pid, ns, sep, command @ ..] = args else {
            return Err(bad(format!(
                "{} arguments, expected at least 4",
                args.len()
            )));
        };
        if sep != "--" || command.is_empty() {
            return Err(bad("expected -- and a program after the namespaces".into()));
        }
        let holder_pid = pid
            .to_str()
            .and_then(|p| p.parse().ok())
            .filter(|&p: &u32| p != 0)
            .ok_or_else(|| bad(format!("{pid:?} is not a process id")))?;
        let namespaces = ns
            .to_string_lossy()
            .split(',')
            .map(|n| match n {
                "user" => Ok(Namespace::User),
                "mnt" => Ok(Namespace::Mnt),
                "net" => Ok(Namespace::Net),
                other => Err(bad(format!("unknown namespace {other:?}"))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(EnterArgs {
            holder_pid,
            namespaces,
            command: command.to_vec(),
        })
    }
}

/// The exit sweep's sentinel: `__sweep SESSION_DIR` (see `quarantine::sentinel_main`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepArgs {
    /// Absolute: the session directory the launcher created.
    pub session_dir: PathBuf,
}

impl SweepArgs {
    /// The arguments after `__sweep`. Pure.
    pub fn to_args(&self) -> Vec<OsString> {
        vec![self.session_dir.clone().into()]
    }

    /// The inverse of [`SweepArgs::to_args`]. Pure.
    pub fn parse(args: &[OsString]) -> Result<SweepArgs> {
        let bad = bad(SWEEP, SWEEP_USAGE);
        let [dir] = args else {
            return Err(bad(format!("{} arguments, expected 1", args.len())));
        };
        Ok(SweepArgs {
            session_dir: absolute(dir, "SESSION_DIR").map_err(bad)?,
        })
    }
}

#[cfg(test)]
#[path = "entry_tests.rs"]
mod tests;
