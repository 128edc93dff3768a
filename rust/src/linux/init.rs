//! The sandbox's PID 1 (`agent-sandbox __init -- CMD ARGS…`, started by `bwrap --as-pid-1`).
//!
//! It installs the terminal-injection filter, starts the command, forwards the signals the
//! launcher sends, reaps every orphan in the PID namespace, and exits with the command's status.
//! When it exits the kernel kills whatever is left in the namespace, so nothing outlives the
//! command.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{
    SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal, kill, sigaction, sigprocmask,
};
use nix::sys::signalfd::{SfdFlags, SignalFd, siginfo};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::seccomp::{SeccompError, install_sandbox_filters};

/// The sandbox could not start the command (our failure, not the command's).
const EXIT_SETUP: i32 = 125;
/// The command exists but cannot be executed (shell convention).
const EXIT_NOT_EXECUTABLE: i32 = 126;
/// The command does not exist inside the sandbox (shell convention).
const EXIT_NOT_FOUND: i32 = 127;

/// Signals passed on to the command when someone sends them to us explicitly.
const FORWARDED: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGWINCH,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("__init was given no command (expected: agent-sandbox __init -- CMD [ARGS…])")]
    NoCommand,
    #[error("cannot set up signal handling in the sandbox init: {0}")]
    Signals(Errno),
    #[error("cannot install the sandbox's seccomp filter: {0}")]
    Filter(#[from] SeccompError),
    #[error("cannot close the descriptors the sandbox inherited: {0}")]
    CloseFds(io::Error),
    #[error("cannot make the sandbox init non-dumpable (prctl PR_SET_DUMPABLE): {0}")]
    Dumpable(io::Error),
    #[error(
        "command not found inside the sandbox: {name} (PATH={path}). Fix: add the package providing it (allowedPackages) or use an absolute path that is exposed in the sandbox"
    )]
    NotFound { name: String, path: String },
    #[error(
        "cannot run {name} inside the sandbox: the file exists, but its interpreter (#! line) or dynamic loader is not in the sandbox. Fix: add the package providing the interpreter (allowedPackages)"
    )]
    InterpreterMissing { name: String },
    #[error(
        "{name} is not executable inside the sandbox ({source}). Fix: make it executable (chmod +x), or run it through its interpreter; a directory or a noexec mount gives this error too"
    )]
    NotExecutable { name: String, source: io::Error },
    #[error("cannot start {name} inside the sandbox: {source}")]
    Spawn { name: String, source: io::Error },
    #[error("the sandbox init cannot read its signals any more: {0}")]
    Signalfd(Errno),
}

impl InitError {
    pub fn exit_code(&self) -> i32 {
        match self {
            InitError::NotFound { .. } | InitError::InterpreterMissing { .. } => EXIT_NOT_FOUND,
            InitError::NotExecutable { .. } => EXIT_NOT_EXECUTABLE,
            _ => EXIT_SETUP,
        }
    }
}

type Result<T> = std::result::Result<T, InitError>;

/// The first thing the sandbox's PID 1 does, before it starts any thread (the bridges) or
/// opens anything: close every descriptor above stderr, become non-dumpable, and install the
/// seccomp filters on every thread.
///
/// * Descriptors: bwrap passes on every descriptor its caller leaked to it. One open on a host
///   directory would let the command `openat` its way out of the mount namespace
///   (`/proc/1/fd/N/..`), and a leaked socket (ssh-agent, D-Bus) could be taken with
///   `pidfd_getfd`. They are closed, not only marked close-on-exec: PID 1 lives as long as the
///   sandbox.
/// * Non-dumpable: the command runs as the same user as PID 1, so without this it could
///   `ptrace` PID 1, write `/proc/1/mem`, read `/proc/1/environ` and `/proc/1/fd`, or take its
///   descriptors with `pidfd_getfd`, and make PID 1 do what the filters deny the command.
///   exec resets the flag, so the command itself stays debuggable.
/// * Filters before threads (and TSYNC): a thread of PID 1 without them could be steered by
///   anything that reaches PID 1 into calling `TIOCSTI` or `keyctl`.
///
/// Fail closed: an error here stops the sandbox before the command exists.
pub fn harden() -> Result<()> {
    close_inherited_fds().map_err(InitError::CloseFds)?;
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(InitError::Dumpable(io::Error::last_os_error()));
    }
    install_sandbox_filters()?;
    Ok(())
}

/// [`harden`], then the init; what `agent-sandbox __init` runs once its arguments are parsed.
/// `setup` runs between the two (the bridges), with the hardening already in force.
pub fn harden_and_run(
    cmd: Vec<OsString>,
    setup: impl FnOnce() -> std::result::Result<(), String>,
) -> i32 {
    if let Err(e) = harden() {
        eprintln!("agent-sandbox: error: {e}");
        return e.exit_code();
    }
    if let Err(msg) = setup() {
        eprintln!("agent-sandbox: error: {msg}");
        return EXIT_SETUP;
    }
    run_init(cmd)
}

/// Runs `cmd` as the sandbox's init and returns the exit code to exit with: the command's own
/// code, 128+N if a signal N killed it, or 125/126/127 (with a message on stderr) if it could not
/// be started.
///
/// Also correct when not PID 1 (tests): it then reaps only its own children.
pub fn run_init(cmd: Vec<OsString>) -> i32 {
    match init(&cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("agent-sandbox: error: {e}");
            e.exit_code()
        }
    }
}

fn init(cmd: &[OsString]) -> Result<i32> {
    let (program, args) = cmd.split_first().ok_or(InitError::NoCommand)?;

    let mut mask = SigSet::from_iter(FORWARDED);
    mask.add(Signal::SIGCHLD);
    // Blocked signals are queued rather than discarded, even at a namespace's PID 1 (which drops
    // unblocked ones it has no handler for), so they all reach the signalfd.
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None).map_err(InitError::Signals)?;
    // The launcher forwards a signal only once PID 1 shows a handler for it (SigCgt in
    // /proc/PID/status): before that the kernel would drop it, as it drops every signal a
    // namespace's init does not catch, and a lost stop request must end in SIGKILL instead.
    // The handler never runs (the signal stays blocked and is read from the signalfd), and exec
    // resets it for the command. A signal inherited as ignored stays ignored, for the command
    // too (`nohup`); the launcher does not forward those.
    let announce = SigAction::new(
        SigHandler::Handler(never_called),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    let announced = SigSet::from_iter(FORWARDED.into_iter().filter(|&s| !is_ignored(s)));
    for signal in &announced {
        unsafe { sigaction(signal, &announce) }.map_err(InitError::Signals)?;
    }
    // With SIGCHLD ignored the kernel would reap for us and we would never see the exit status.
    unsafe { nix::sys::signal::signal(Signal::SIGCHLD, SigHandler::SigDfl) }
        .map_err(InitError::Signals)?;
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC).map_err(InitError::Signals)?;

    // Descriptors opened since `harden` (the bridges' listeners, our signalfd) must not reach
    // the command either.
    close_inherited_fds_on_exec();
    let env = take_environment();

    let child = spawn(program, args, &env, announced)?;
    let child = Pid::from_raw(child.id() as i32);
    loop {
        let info = match signals.read_signal() {
            Ok(Some(info)) => info,
            Ok(None) | Err(Errno::EINTR) => continue,
            // Fail closed: returning ends PID 1 and with it the whole sandbox.
            Err(e) => return Err(InitError::Signalfd(e)),
        };
        let Ok(signal) = Signal::try_from(info.ssi_signo as i32) else {
            continue;
        };
        if signal == Signal::SIGCHLD {
            if let Some(code) = reap(child) {
                // Returning ends PID 1: the kernel kills what is left of the namespace. Waiting
                // for daemons the command left behind would keep `$(…)` callers hanging.
                return Ok(code);
            }
        } else if should_forward(&info) {
            // ESRCH only means the command has just exited; its SIGCHLD is on its way.
            let _ = kill(child, signal);
        }
    }
}

extern "C" fn never_called(_: libc::c_int) {}

/// Whether `signal` is inherited as ignored (`nohup`, or SIGINT/SIGQUIT for a background job of
/// a non-interactive shell): then it is neither forwarded nor acted on, as the caller asked.
pub(crate) fn is_ignored(signal: Signal) -> bool {
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // A null new action only reads the current one.
    let rc = unsafe { libc::sigaction(signal as libc::c_int, std::ptr::null(), &mut old) };
    rc == 0 && old.sa_sigaction == libc::SIG_IGN
}

/// Whether a signal we received was meant for the command but cannot have reached it already.
///
/// The terminal sends SIGINT (Ctrl-C), SIGQUIT (Ctrl-\), SIGTSTP, SIGWINCH (resize) and SIGHUP
/// (hangup) to the whole foreground process group. That group includes the command, so passing
/// these on would deliver them twice (a second Ctrl-C aborts what the first only interrupted).
/// The kernel marks them `SI_KERNEL`. A `kill` from the launcher, which lives in the parent PID
/// namespace (so `ssi_pid` reads 0), arrives as `SI_USER`; `sigqueue`/`tgkill` give `SI_QUEUE`/
/// `SI_TKILL`. Those were addressed to us alone and are passed on.
pub(crate) fn should_forward(info: &siginfo) -> bool {
    info.ssi_code != libc::SI_KERNEL
}

/// Reaps every exited child (as PID 1 we inherit all orphans of the namespace) and returns the
/// exit code of `command` if it is among them.
fn reap(command: Pid) -> Option<i32> {
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => return Some(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == command => {
                return Some(128 + signal as i32);
            }
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return None,
            Ok(_) | Err(Errno::EINTR) => continue,
            // Unreachable in practice (EINVAL); the next SIGCHLD retries.
            Err(_) => return None,
        }
    }
}

/// Whether the command gets a process group of its own (set by `__init --own-pgrp`).
static OWN_PROCESS_GROUP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Put the command in a process group of its own. The launcher asks for it whenever it is not
/// the foreground job of a terminal: the sandbox otherwise shares the launcher's group, and
/// `kill(0, …)` from inside would reach the host processes in it (the calling script, the
/// other commands of a pipeline). In the foreground of a terminal the command stays in that
/// group so job control (Ctrl-C, Ctrl-Z) keeps working.
pub fn set_own_process_group(yes: bool) {
    OWN_PROCESS_GROUP.store(yes, std::sync::atomic::Ordering::Relaxed);
}

fn spawn(
    program: &OsString,
    args: &[OsString],
    env: &[(OsString, OsString)],
    announced: SigSet,
) -> Result<std::process::Child> {
    let mut command = Command::new(program);
    command.args(args).env_clear().envs(env.iter().cloned());
    if OWN_PROCESS_GROUP.load(std::sync::atomic::Ordering::Relaxed) {
        command.process_group(0);
    }
    // std passes our signal mask on to the child (verified; it no longer resets it), and with
    // our forwarded signals blocked the command could not be interrupted at all. Our no-op
    // handlers go first, or a Ctrl-C landing between here and exec would be swallowed.
    // sigaction and pthread_sigmask are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            for signal in &announced {
                libc::signal(signal as libc::c_int, libc::SIG_DFL);
            }
            SigSet::empty().thread_set_mask()?;
            Ok(())
        });
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    command
        .spawn()
        .map_err(|source| spawn_error(program, &path, source))
}

fn spawn_error(program: &OsStr, path: &OsStr, source: io::Error) -> InitError {
    let name = program.to_string_lossy().into_owned();
    match source.raw_os_error() {
        Some(libc::ENOENT) => {
            // ENOENT also comes back when the file is there but its `#!` interpreter or ELF
            // loader is not, which "not found" would misdescribe.
            if find_program(program, path).is_some() {
                InitError::InterpreterMissing { name }
            } else {
                InitError::NotFound {
                    name,
                    path: path.to_string_lossy().into_owned(),
                }
            }
        }
        Some(libc::EACCES | libc::ENOEXEC) => InitError::NotExecutable { name, source },
        _ => InitError::Spawn { name, source },
    }
}

/// Where execvp would look for `program`: itself if it contains a slash, else each PATH entry.
fn find_program(program: &OsStr, path: &OsStr) -> Option<std::path::PathBuf> {
    if program.as_bytes().contains(&b'/') {
        let p = Path::new(program);
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Takes the environment out of this process: returns it for the command and leaves PID 1
/// with none. `clearenv` empties `environ`, and the strings themselves, which the kernel shows
/// in `/proc/1/environ` (the declared variables, tokens among them), are overwritten: PID 1
/// lives as long as the sandbox, and nothing in it needs them.
fn take_environment() -> Vec<(OsString, OsString)> {
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    // SAFETY: PID 1 has no thread that reads the environment (the bridges never do), and
    // nothing keeps pointers into the block being cleared: std copied every value above.
    unsafe {
        libc::clearenv();
        if let Some((start, end)) = environment_block() {
            std::ptr::write_bytes(start as *mut u8, 0, end - start);
        }
    }
    env
}

/// Where the kernel placed this process's environment strings (`env_start`, `env_end`: fields
/// 50 and 51 of `/proc/self/stat`).
fn environment_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces; count after it.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let start: usize = fields.get(47)?.parse().ok()?;
    let end: usize = fields.get(48)?.parse().ok()?;
    (start > 0 && end > start).then_some((start, end))
}

/// Closes every descriptor above stderr (see [`harden`]).
fn close_inherited_fds() -> io::Result<()> {
    // SAFETY: closes descriptors only; nothing in this process owns one yet.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if rc == 0 {
        return Ok(());
    }
    // Kernels before 5.9 lack close_range: close what /proc lists.
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds.into_iter().filter(|&fd| fd > 2) {
        // EBADF for the directory handle read_dir has closed by now; nothing to do.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec, so only 0, 1 and 2 reach the command.
fn close_inherited_fds_on_exec() {
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return;
    }
    // Kernels before 5.11 lack CLOSE_RANGE_CLOEXEC: walk the open descriptors instead.
    let fds: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => (3..1024).collect(),
    };
    for fd in fds.into_iter().filter(|&fd| fd > 2) {
        // EBADF for the directory handle read_dir has closed by now; nothing to do.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::testutil::{run_in_fork, wait_code};
    use std::os::fd::{AsFd, AsRawFd};
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    fn sh(script: &str) -> Vec<OsString> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    /// Runs `run_init(cmd)` in a forked child, so the signal mask, the filter and waitpid(-1)
    /// stay out of the test harness.
    fn init_in_fork(cmd: Vec<OsString>) -> Pid {
        run_in_fork(move || run_init(cmd))
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

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn exit_code_is_the_commands() {
        assert_eq!(wait_code(init_in_fork(sh("exit 3")), secs(5)), 3);
    }

    #[test]
    fn killed_command_gives_128_plus_signal() {
        assert_eq!(wait_code(init_in_fork(sh("kill -TERM $$")), secs(5)), 143);
    }

    #[test]
    fn missing_command_gives_127() {
        let code = wait_code(init_in_fork(vec!["no-such-cmd-xyz".into()]), secs(5));
        assert_eq!(code, 127);
    }

    #[test]
    fn non_executable_file_gives_126() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("script");
        std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap(); // mode 0644
        assert_eq!(wait_code(init_in_fork(vec![file.into()]), secs(5)), 126);
    }

    #[test]
    fn missing_interpreter_is_reported_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("script");
        std::fs::write(&file, "#!/no/such/interpreter\n").unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let path = OsStr::new("/usr/bin:/bin");
        let err = spawn_error(
            file.as_os_str(),
            path,
            io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(matches!(err, InitError::InterpreterMissing { .. }), "{err}");
        let err = spawn_error(
            OsStr::new("no-such-cmd-xyz"),
            path,
            io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(
            err.to_string()
                .contains("command not found inside the sandbox: no-such-cmd-xyz (PATH=")
        );
    }

    #[test]
    fn user_sent_term_is_forwarded() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let script = format!(
            "trap 'exit 7' TERM; touch '{}'; sleep 3 & wait",
            ready.display()
        );
        let init = init_in_fork(sh(&script));
        // The trap is set once the file exists, and init blocked TERM before spawning.
        wait_for_file(&ready);
        let start = Instant::now();
        kill(init, Signal::SIGTERM).unwrap();
        assert_eq!(wait_code(init, secs(5)), 7);
        assert!(start.elapsed() < secs(2), "took {:?}", start.elapsed());
    }

    /// The launcher reads SigCgt to know PID 1 will take a forwarded signal.
    #[test]
    fn init_shows_handlers_for_forwarded_signals() {
        let dir = tempfile::tempdir().unwrap();
        let (ready, stop) = (dir.path().join("ready"), dir.path().join("stop"));
        let script = format!(
            "touch '{}'; while [ ! -e '{}' ]; do sleep 0.02; done",
            ready.display(),
            stop.display()
        );
        let init = init_in_fork(sh(&script));
        wait_for_file(&ready);
        let status = std::fs::read_to_string(format!("/proc/{init}/status")).unwrap();
        std::fs::write(&stop, "").unwrap();
        assert_eq!(wait_code(init, secs(5)), 0);
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .map(|hex| u64::from_str_radix(hex.trim(), 16).unwrap())
            .unwrap();
        for signal in FORWARDED {
            assert!(
                caught & (1 << (signal as u32 - 1)) != 0,
                "{signal} not caught"
            );
        }
    }

    #[test]
    fn ignored_signals_stay_ignored_for_the_command() {
        let init = run_in_fork(|| {
            // As under `nohup`. grep reads its own status; SIGHUP is bit 0 of SigIgn.
            let _ = unsafe { nix::sys::signal::signal(Signal::SIGHUP, SigHandler::SigIgn) };
            run_init(sh(
                "grep -q '^SigIgn:[[:space:]]*[0-9a-f]*[13579bdf]$' /proc/self/status",
            ))
        });
        assert_eq!(wait_code(init, secs(5)), 0, "SIGHUP is no longer ignored");
    }

    #[test]
    fn command_starts_with_an_empty_signal_mask() {
        // grep reads its own status: sh passes its mask on, so a blocked set would show here.
        let code = wait_code(
            init_in_fork(sh("grep -q '^SigBlk:[[:space:]]*0*$' /proc/self/status")),
            secs(5),
        );
        assert_eq!(code, 0, "the command inherited blocked signals");
    }

    #[test]
    fn only_stdio_reaches_the_command() {
        // Counts the descriptors above 2 the shell holds.
        let script =
            "c=0; for n in $(seq 3 255); do [ -e /proc/$$/fd/$n ] && c=$((c+1)); done; exit $c";
        let init = run_in_fork(move || {
            // A descriptor leaked without O_CLOEXEC, as bwrap would pass it through.
            if unsafe { libc::dup(2) } < 0 {
                return 100;
            }
            run_init(sh(script))
        });
        assert_eq!(
            wait_code(init, secs(5)),
            0,
            "descriptors leaked into the command"
        );
    }

    /// Regression: forwarding a terminal's Ctrl-C delivered SIGINT twice. The command here sits
    /// in its own session, so only a forwarded SIGINT could reach it; USR1 (sent with kill, so
    /// forwarded) is dequeued after SIGINT and marks that init has handled it.
    #[test]
    fn terminal_generated_signals_are_not_forwarded() {
        let Ok(pty) = nix::pty::openpty(None, None) else {
            eprintln!("SKIPPED: no pty available");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let (ready, log, stop) = (
            dir.path().join("ready"),
            dir.path().join("log"),
            dir.path().join("stop"),
        );
        let q = |p: &PathBuf| format!("'{}'", p.display());
        let script = format!(
            "trap 'echo INT >> {log}' INT; trap 'echo USR1 >> {log}' USR1; touch {ready}; \
             while [ ! -e {stop} ]; do sleep 0.02; done",
            log = q(&log),
            ready = q(&ready),
            stop = q(&stop),
        );
        let slave = pty.slave.as_raw_fd();
        let init = run_in_fork(move || {
            // Make the pty our controlling terminal, with us in its foreground group.
            if nix::unistd::setsid().is_err()
                || unsafe { libc::ioctl(slave, libc::TIOCSCTTY, 0) } != 0
            {
                return 100;
            }
            run_init(vec![
                "setsid".into(),
                "sh".into(),
                "-c".into(),
                script.into(),
            ])
        });
        wait_for_file(&ready);
        // ^C on the terminal: the kernel sends SIGINT (SI_KERNEL) to the foreground group.
        nix::unistd::write(&pty.master, b"\x03").unwrap();
        // The line discipline sends the signal before it echoes "^C": once the echo is read
        // back, SIGINT is queued at init, ahead of the USR1 sent next.
        let mut echoed = Vec::new();
        while !echoed.windows(2).any(|w| w == b"^C") {
            let mut fds = [nix::poll::PollFd::new(
                pty.master.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let ready = nix::poll::poll(&mut fds, 3000u16).unwrap();
            assert!(ready > 0, "the terminal never echoed ^C (got {echoed:?})");
            let mut buf = [0u8; 64];
            let n = nix::unistd::read(pty.master.as_fd(), &mut buf).unwrap();
            echoed.extend_from_slice(&buf[..n]);
        }
        kill(init, Signal::SIGUSR1).unwrap();
        let deadline = Instant::now() + secs(3);
        let seen = loop {
            let seen = std::fs::read_to_string(&log).unwrap_or_default();
            if seen.contains("USR1") || Instant::now() > deadline {
                break seen;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        std::fs::write(&stop, "").unwrap();
        assert_eq!(wait_code(init, secs(5)), 0);
        assert_eq!(
            seen, "USR1\n",
            "the terminal's SIGINT was forwarded (or USR1 was not)"
        );
    }
}
