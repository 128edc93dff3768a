//! The launcher's side: run bwrap, learn the sandbox's PID 1 from bwrap's status pipe, pass
//! explicitly sent signals on to it, and report how the command ended.
//!
//! Signal routing, end to end:
//! * A terminal's Ctrl-C / Ctrl-\ / hangup reaches the whole foreground process group: the
//!   launcher, bwrap, our init and the command. Only the command may act on it. The launcher and
//!   init ignore it (it arrives as `SI_KERNEL`, see [`super::init::should_forward`]), and bwrap
//!   inherits it blocked. bwrap's monitor process would otherwise die of SIGINT, and with
//!   `--die-with-parent` take the sandbox down with SIGKILL, so a command could never handle
//!   Ctrl-C itself.
//! * A `kill` aimed at the launcher goes to the sandbox's PID 1 (our init), which passes it on
//!   to the command. The kernel drops every signal a namespace's PID 1 has no handler for, so
//!   until our init has installed its handlers (bwrap is still setting up, or init is starting)
//!   a forwarded signal would vanish: a terminating one then SIGKILLs bwrap instead.
//! * Signals the launcher inherited as ignored (`nohup`) are left alone: they reach the command
//!   ignored as well.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;

use super::init::{is_ignored, should_forward};

/// How the sandbox ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran: its exit code, or 128+N if signal N ended it (or the sandbox).
    Exited(i32),
    /// bwrap gave up before the command started (a mount failed, no user namespaces, exec of
    /// the init failed…). bwrap has already printed its own `bwrap: …` message on stderr.
    SetupFailed { bwrap_status: i32 },
}

#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    #[error("cannot block signals in the launcher: {0}")]
    Signals(Errno),
    #[error("cannot create the status pipe for bubblewrap: {0}")]
    Pipe(Errno),
    #[error(
        "cannot start bubblewrap at {}: {source}. Fix: install bubblewrap 0.8 or newer (for --json-status-fd)",
        bwrap.display()
    )]
    Spawn { bwrap: PathBuf, source: io::Error },
    #[error("lost track of bubblewrap while it ran: {0} (the sandbox was killed)")]
    Monitor(io::Error),
}

type Result<T> = std::result::Result<T, SuperviseError>;

/// Signals the launcher receives through its signalfd. SIGWINCH is left alone: only the
/// terminal sends it, and it reaches the command directly.
fn forwarded_signals() -> SigSet {
    SigSet::from_iter([
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ])
}

/// Signals that end the sandbox when its PID 1 cannot take them yet.
fn is_terminating(signal: Signal) -> bool {
    matches!(
        signal,
        Signal::SIGINT | Signal::SIGTERM | Signal::SIGHUP | Signal::SIGQUIT
    )
}

/// Blocks the forwarded signals on the calling thread, and so on every thread it spawns later.
///
/// Call it first thing in `main`, before any thread starts (the proxy's runtime, for one): a
/// process-directed signal goes to any thread that does not block it, and there it would take
/// its default action and kill the launcher instead of being forwarded. [`supervise`] calls it
/// too. The signals stay blocked afterwards: a pending Ctrl-C must not kill the launcher between
/// the sandbox's exit and its own.
pub fn block_forwarded_signals() -> Result<()> {
    forwarded_signals()
        .thread_block()
        .map_err(SuperviseError::Signals)
}

/// Runs `bwrap --json-status-fd N ARGS…` and waits for it, forwarding signals to the sandbox's
/// PID 1. `args` is the complete argument list. It should run our init as PID 1
/// (`--as-pid-1 -- …/agent-sandbox __init -- CMD…`): only a PID 1 with handlers receives
/// forwarded signals, and only our init unblocks them again for the command. It must use
/// `--die-with-parent`: killing bwrap is the fallback that ends the sandbox. bwrap inherits this
/// process's environment, stdio and current directory.
///
/// Returns as soon as bwrap exits, with no thread left behind.
///
/// `inherit` is handed to bwrap under the same numbers (for `--file FD`,
/// `--ro-bind-data FD`, `--seccomp FD` …). Other descriptors are left as they are: ours are
/// close-on-exec, and any the launcher's own parent leaked reach bwrap but not the command (our
/// init closes them).
///
/// `prefix`: bwrap is started through `prefix` (a program that sets something
/// up and then execs the rest of its argv in place, keeping the PID and the descriptors: the
/// namespace entry `agent-sandbox __enter PID NAMESPACES --`).
///
/// `env`: when given, bwrap (and the prefix) run with exactly this environment, which bwrap
/// hands to the sandbox unchanged; the values never appear on a command line.
///
/// `after_spawn` runs once bwrap has started (with its PID), while it sets the sandbox up: work that need not
/// delay the start (logs, cleanup) goes there. Signals that arrive meanwhile wait in the queue.
pub fn supervise(
    prefix: &[OsString],
    bwrap: &Path,
    args: &[OsString],
    inherit: &[BorrowedFd<'_>],
    env: Option<&std::collections::BTreeMap<String, String>>,
    after_spawn: &mut dyn FnMut(u32),
) -> Result<Outcome> {
    let mask = forwarded_signals();
    let ignored: Vec<Signal> = mask.iter().filter(|&s| is_ignored(s)).collect();
    mask.thread_block().map_err(SuperviseError::Signals)?;
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(SuperviseError::Signals)?;
    let (status_read, status_write) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(SuperviseError::Pipe)?;
    let status_write = above_stdio(status_write).map_err(SuperviseError::Pipe)?;

    let status_fd = status_write.as_raw_fd();
    let keep: Vec<RawFd> = std::iter::once(status_fd)
        .chain(inherit.iter().map(|fd| fd.as_raw_fd()))
        .collect();
    let mut command = match prefix.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(bwrap);
            c
        }
        None => Command::new(bwrap),
    };
    if let Some(env) = env {
        command.env_clear().envs(env);
    }
    command
        .arg("--json-status-fd")
        .arg(status_fd.to_string())
        .args(args);
    // Only async-signal-safe calls here (fcntl, pthread_sigmask), and no allocation.
    unsafe {
        command.pre_exec(move || {
            for &fd in &keep {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // std passes the mask on today, but that is not a documented promise: bwrap must
            // run with these blocked (see the module comment).
            mask.thread_block()?;
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|source| SuperviseError::Spawn {
        bwrap: bwrap.to_path_buf(),
        source,
    })?;
    // Our copy must go, or the pipe would never reach end-of-file.
    drop(status_write);
    after_spawn(child.id());

    match monitor(&mut child, &signals, status_read, &ignored) {
        Ok(outcome) => Ok(outcome),
        Err(e) => {
            // Fail closed: a sandbox nobody supervises any more is not left running.
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// Moves a descriptor that landed on 0, 1 or 2 (when the launcher started with one of them
/// closed) out of the way, so bwrap's stdio and the status pipe cannot be the same descriptor.
fn above_stdio(fd: OwnedFd) -> std::result::Result<OwnedFd, Errno> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    Errno::result(moved).map(|raw| unsafe { OwnedFd::from_raw_fd(raw) })
}

/// What bwrap reports on its status pipe, one JSON object per line.
#[derive(Debug, PartialEq, Eq)]
enum StatusEvent {
    /// The sandbox's first process (our init, after setup) as seen from our PID namespace.
    /// Reported right after clone(), before the mounts are set up.
    ChildPid(i32),
    /// The command's status; bwrap writes it only if setup completed and the init was exec'd.
    ExitCode(i32),
}

fn parse_status_line(line: &[u8]) -> Option<StatusEvent> {
    let value: serde_json::Value = serde_json::from_slice(line).ok()?;
    let field = |name: &str| {
        value
            .get(name)
            .and_then(serde_json::Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    if let Some(pid) = field("child-pid") {
        return (pid > 0).then_some(StatusEvent::ChildPid(pid));
    }
    field("exit-code").map(StatusEvent::ExitCode)
}

/// Where forwarded signals go.
enum Target {
    /// bwrap has not reported the sandbox's PID 1 yet.
    Unknown,
    /// A pidfd cannot hit another process should the PID be reused after PID 1 exits.
    Pidfd(OwnedFd, Pid),
    /// Kernels before 5.3 have no pidfd.
    Pid(Pid),
    /// PID 1 has exited; bwrap is about to.
    Gone,
}

impl Target {
    fn open(pid: i32) -> Target {
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd >= 0 {
            // pidfd_open always sets close-on-exec.
            let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
            return Target::Pidfd(fd, Pid::from_raw(pid));
        }
        match Errno::last() {
            Errno::ESRCH => Target::Gone,
            _ => Target::Pid(Pid::from_raw(pid)),
        }
    }

    /// Whether the kernel would deliver `signal` to the sandbox's PID 1 rather than drop it: a
    /// namespace's init only gets the signals it has a handler for. (Its blocked mask is no
    /// guide: a shell blocks everything for a moment around each fork, and a signal queued then
    /// is still dropped at delivery.)
    fn would_take(&self, signal: Signal) -> bool {
        let pid = match self {
            Target::Pidfd(_, pid) | Target::Pid(pid) => *pid,
            Target::Unknown | Target::Gone => return false,
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return false;
        };
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0);
        caught & (1 << (signal as u32 - 1)) != 0
    }

    fn send(&self, signal: Signal) {
        // Errors mean PID 1 has just exited: nothing left to signal.
        match self {
            Target::Pidfd(fd, _) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    signal as libc::c_int,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            },
            Target::Pid(pid) => {
                let _ = kill(*pid, signal);
            }
            Target::Unknown | Target::Gone => {}
        }
    }
}

fn monitor(
    child: &mut Child,
    signals: &SignalFd,
    status: OwnedFd,
    ignored: &[Signal],
) -> Result<Outcome> {
    let lost = |e: Errno| SuperviseError::Monitor(e.into());
    let bwrap_pid = Pid::from_raw(child.id() as i32);
    let mut status = File::from(status);
    let mut target = Target::Unknown;
    let mut exit_code = None;
    let mut killed_with = None;
    let mut pending_line = Vec::new();
    let mut eof = false;

    // The status pipe reaches end-of-file only when bwrap exits: it closes its copy in the
    // sandbox before running anything there, and ours is closed.
    loop {
        let (signal_ready, status_ready) = {
            let mut fds = [
                PollFd::new(signals.as_fd(), PollFlags::POLLIN),
                PollFd::new(status.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(lost(e)),
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
            (ready(&fds[0]), ready(&fds[1]))
        };

        // Status first: a child-pid line written before a signal arrived must be known when
        // that signal is handled, or the signal would find no target (regression: signals
        // sent while the launcher lagged killed the sandbox or were dropped).
        if status_ready {
            let mut buf = [0u8; 1024];
            let n = match status.read(&mut buf) {
                Ok(0) => {
                    eof = true;
                    0
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                Err(e) => return Err(SuperviseError::Monitor(e)),
            };
            pending_line.extend_from_slice(&buf[..n]);
            while let Some(end) = pending_line.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending_line.drain(..=end).collect();
                match parse_status_line(&line) {
                    Some(StatusEvent::ChildPid(pid)) => target = Target::open(pid),
                    Some(StatusEvent::ExitCode(code)) => {
                        exit_code = Some(code);
                        target = Target::Gone;
                    }
                    None => {}
                }
            }
        }
        if signal_ready {
            loop {
                let info = match signals.read_signal() {
                    Ok(Some(info)) => info,
                    Ok(None) => break,
                    Err(Errno::EINTR) => continue,
                    Err(e) => return Err(lost(e)),
                };
                let Ok(signal) = Signal::try_from(info.ssi_signo as i32) else {
                    continue;
                };
                // Blocked signals are queued even when ignored, so the check is ours to make.
                if !should_forward(&info) || ignored.contains(&signal) {
                    continue;
                }
                if target.would_take(signal) {
                    target.send(signal);
                } else if is_terminating(signal) && !matches!(target, Target::Gone) {
                    // Fail closed: nobody inside can act on it yet (bwrap is still setting up,
                    // or PID 1 has no handler for it), and a stop request must not be lost. bwrap runs with the signal blocked, so only SIGKILL stops it;
                    // --die-with-parent takes the sandbox with it.
                    let _ = kill(bwrap_pid, Signal::SIGKILL);
                    killed_with.get_or_insert(signal);
                }
            }
        }

        if eof {
            break;
        }
    }

    let status = child.wait().map_err(SuperviseError::Monitor)?;
    Ok(outcome(exit_code, status, killed_with))
}

/// Derives the outcome. bwrap's `exit-code` line is the command's status as its PID 1 reported
/// it; without it the command never started, unless the sandbox was killed from outside.
fn outcome(exit_code: Option<i32>, bwrap: ExitStatus, killed_with: Option<Signal>) -> Outcome {
    if let Some(code) = exit_code {
        return Outcome::Exited(code);
    }
    if let Some(signal) = killed_with {
        return Outcome::Exited(128 + signal as i32);
    }
    match (bwrap.code(), bwrap.signal()) {
        (Some(code), _) => Outcome::SetupFailed { bwrap_status: code },
        (None, Some(signal)) => Outcome::Exited(128 + signal),
        (None, None) => Outcome::SetupFailed { bwrap_status: 125 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::testutil::{run_in_fork, wait_code};
    use std::os::fd::AsFd;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    /// Whether bwrap can build a sandbox here; skips loudly when it cannot.
    fn bwrap_works() -> bool {
        static WORKS: OnceLock<bool> = OnceLock::new();
        let works = *WORKS.get_or_init(|| {
            Command::new("bwrap")
                .args(["--ro-bind", "/", "/", "--unshare-pid", "--", "true"])
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        if !works {
            eprintln!("SKIPPED: bwrap is missing or cannot create namespaces here");
        }
        works
    }

    fn sandbox(extra: &[&str], cmd: &[&str]) -> Vec<OsString> {
        let base = [
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--die-with-parent",
            "--as-pid-1",
        ];
        base.iter()
            .chain(extra)
            .chain(&["--"])
            .chain(cmd)
            .map(OsString::from)
            .collect()
    }

    fn code_of(outcome: Result<Outcome>) -> i32 {
        match outcome {
            Ok(Outcome::Exited(code)) => code,
            Ok(Outcome::SetupFailed { bwrap_status }) => 200 + bwrap_status.clamp(0, 50),
            Err(_) => 255,
        }
    }

    #[test]
    fn status_lines_parse() {
        let pid =
            br#"{ "child-pid": 4643, "mnt-namespace": 4026532177, "pid-namespace": 4026532178 }"#;
        assert_eq!(parse_status_line(pid), Some(StatusEvent::ChildPid(4643)));
        assert_eq!(
            parse_status_line(b"{ \"exit-code\": 143 }\n"),
            Some(StatusEvent::ExitCode(143))
        );
        assert_eq!(parse_status_line(b"{ \"child-pid\": 0 }"), None);
        assert_eq!(parse_status_line(b"garbage"), None);
    }

    #[test]
    fn outcome_prefers_the_reported_exit_code() {
        let exited = |code: i32| ExitStatus::from_raw(code << 8);
        let signalled = |sig: i32| ExitStatus::from_raw(sig);
        assert_eq!(outcome(Some(5), exited(5), None), Outcome::Exited(5));
        assert_eq!(
            outcome(None, exited(1), None),
            Outcome::SetupFailed { bwrap_status: 1 }
        );
        assert_eq!(
            outcome(None, signalled(9), Some(Signal::SIGTERM)),
            Outcome::Exited(143)
        );
        assert_eq!(outcome(None, signalled(9), None), Outcome::Exited(137));
    }

    #[test]
    fn exit_code_passes_through() {
        if !bwrap_works() {
            return;
        }
        let args = sandbox(&[], &["sh", "-c", "exit 5"]);
        let outcome = supervise(&[], Path::new("bwrap"), &args, &[], None, &mut |_| {}).unwrap();
        assert_eq!(outcome, Outcome::Exited(5));
    }

    #[test]
    fn failed_setup_is_reported() {
        if !bwrap_works() {
            return;
        }
        let args: Vec<OsString> = ["--bind", "/nonexistent-xyz", "/x", "--", "true"]
            .into_iter()
            .map(OsString::from)
            .collect();
        // In a child with stderr silenced: bwrap prints its own `bwrap: …` message there.
        let launcher = run_in_fork(move || {
            let null = std::fs::OpenOptions::new().write(true).open("/dev/null");
            if null.is_ok_and(|f| unsafe { libc::dup2(f.as_raw_fd(), 2) } == 2) {
                code_of(supervise(
                    &[],
                    Path::new("bwrap"),
                    &args,
                    &[],
                    None,
                    &mut |_| {},
                ))
            } else {
                100
            }
        });
        // SetupFailed { bwrap_status: 1 }
        assert_eq!(wait_code(launcher, Duration::from_secs(3)), 201);
    }

    #[test]
    fn missing_bwrap_is_an_error() {
        let err = supervise(
            &[],
            Path::new("/nonexistent-xyz/bwrap"),
            &[],
            &[],
            None,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(err.to_string().contains("cannot start bubblewrap"), "{err}");
    }

    #[test]
    fn inherited_fds_reach_bwrap() {
        if !bwrap_works() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::write(&data, "hello").unwrap();
        let file = File::open(&data).unwrap(); // close-on-exec, as std opens everything
        let fd = file.as_raw_fd().to_string();
        let args = sandbox(
            &["--tmpfs", "/mnt", "--ro-bind-data", &fd, "/mnt/injected"],
            &["sh", "-c", "test \"$(cat /mnt/injected)\" = hello"],
        );
        let outcome = supervise(
            &[],
            Path::new("bwrap"),
            &args,
            &[file.as_fd()],
            None,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(outcome, Outcome::Exited(0));
    }

    fn wait_for_file(path: &Path) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while !path.exists() {
            assert!(
                Instant::now() < deadline,
                "{} never appeared",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts `script` as the sandbox's PID 1 in a forked launcher and waits until it has
    /// created the file `$READY`.
    fn launch_until_ready(
        script: &str,
        before_launch: impl FnOnce() -> bool,
    ) -> (Pid, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let tmp = dir.path().to_str().unwrap().to_owned();
        let env_ready = format!("READY={}", ready.display());
        let args = sandbox(
            &["--bind", &tmp, &tmp],
            &["env", &env_ready, "sh", "-c", script],
        );
        let launcher = run_in_fork(move || {
            if !before_launch() {
                return 100;
            }
            code_of(supervise(
                &[],
                Path::new("bwrap"),
                &args,
                &[],
                None,
                &mut |_| {},
            ))
        });
        wait_for_file(&ready);
        (launcher, dir)
    }

    #[test]
    fn term_to_the_launcher_is_forwarded_to_pid_1() {
        if !bwrap_works() {
            return;
        }
        // sh catches TERM, so the kernel delivers it to PID 1.
        let script = "trap 'exit 9' TERM; touch \"$READY\"; while :; do sleep 0.02; done";
        let (launcher, _dir) = launch_until_ready(script, || true);
        kill(launcher, Signal::SIGTERM).unwrap();
        assert_eq!(wait_code(launcher, Duration::from_secs(3)), 9);
    }

    #[test]
    fn term_pid_1_cannot_take_kills_the_sandbox() {
        if !bwrap_works() {
            return;
        }
        // Without a trap, PID 1 would drop TERM and run on.
        let script = "touch \"$READY\"; while :; do sleep 0.02; done";
        let (launcher, _dir) = launch_until_ready(script, || true);
        kill(launcher, Signal::SIGTERM).unwrap();
        assert_eq!(wait_code(launcher, Duration::from_secs(3)), 143);
    }

    #[test]
    fn signals_the_launcher_ignores_are_not_acted_on() {
        if !bwrap_works() {
            return;
        }
        let script = "touch \"$READY\"; while :; do sleep 0.02; done";
        // As under `nohup`.
        let ignore_hup = || unsafe {
            nix::sys::signal::signal(Signal::SIGHUP, nix::sys::signal::SigHandler::SigIgn).is_ok()
        };
        let (launcher, _dir) = launch_until_ready(script, ignore_hup);
        // HUP is read first (lower number); had it been acted on, the code would be 129.
        kill(launcher, Signal::SIGHUP).unwrap();
        kill(launcher, Signal::SIGTERM).unwrap();
        assert_eq!(wait_code(launcher, Duration::from_secs(3)), 143);
    }

    /// Regression: bwrap's monitor died of a terminal's SIGINT and, through --die-with-parent,
    /// SIGKILLed the sandbox, so no command could handle Ctrl-C itself (and no `exit-code` was
    /// ever reported).
    #[test]
    fn terminal_ctrl_c_reaches_the_command_and_spares_bwrap() {
        if !bwrap_works() {
            return;
        }
        let Ok(pty) = nix::pty::openpty(None, None) else {
            eprintln!("SKIPPED: no pty available");
            return;
        };
        let slave = pty.slave.as_raw_fd();
        let script = "trap 'exit 4' INT; touch \"$READY\"; while :; do sleep 0.02; done";
        let (launcher, _dir) = launch_until_ready(script, move || {
            // The pty becomes the launcher's controlling terminal, with bwrap and the sandbox in
            // its foreground process group, as in an interactive shell.
            nix::unistd::setsid().is_ok() && unsafe { libc::ioctl(slave, libc::TIOCSCTTY, 0) } == 0
        });
        nix::unistd::write(&pty.master, b"\x03").unwrap();
        assert_eq!(wait_code(launcher, Duration::from_secs(3)), 4);
    }
}
