//! Linux-only mechanisms: bubblewrap and namespaces, the sandbox's PID 1 and its seccomp
//! filter, and the launcher's supervision of bwrap.

pub mod bwrap;
#[cfg(target_os = "linux")]
pub mod init;
#[cfg(target_os = "linux")]
pub mod netns;
#[cfg(target_os = "linux")]
pub mod nft;
#[cfg(target_os = "linux")]
pub mod pathfd;
#[cfg(target_os = "linux")]
pub mod rtnl;
#[cfg(target_os = "linux")]
pub mod seccomp;
#[cfg(target_os = "linux")]
pub mod splice;
#[cfg(target_os = "linux")]
pub mod stage;
#[cfg(target_os = "linux")]
pub mod supervise;

/// Helpers for tests that need a process of their own: signal masks, seccomp filters and
/// `waitpid(-1)` must not leak into (or be disturbed by) the multi-threaded test harness.
#[cfg(test)]
pub(crate) mod testutil {
    use std::time::{Duration, Instant};

    use nix::sys::signal::{SigHandler, Signal, kill};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use nix::unistd::{ForkResult, Pid, fork};

    /// Forks; the child runs `body` and `_exit`s with its result (101 if it panics).
    ///
    /// After `fork` only the calling thread exists in the child. The bodies used here allocate
    /// and spawn processes, which glibc and std support after fork in practice; they never touch
    /// locks other test threads could be holding for long (no env mutation, no stdout locking).
    pub(crate) fn run_in_fork(body: impl FnOnce() -> i32) -> Pid {
        match unsafe { fork() }.expect("fork") {
            ForkResult::Parent { child } => child,
            ForkResult::Child => {
                // Start from default dispositions: a test run as a background job of a
                // non-interactive shell inherits SIGINT and SIGQUIT ignored, and `sh` refuses
                // to trap signals that were ignored when it started.
                for signal in [Signal::SIGINT, Signal::SIGQUIT] {
                    let _ = unsafe { nix::sys::signal::signal(signal, SigHandler::SigDfl) };
                }
                let code =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
                unsafe { libc::_exit(code) }
            }
        }
    }

    /// iproute2's `ip`, for tests that look at or set up a namespace with it; None (the test
    /// skips loudly) when it is not installed.
    pub(crate) fn ip_binary() -> Option<&'static str> {
        let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists());
        if ip.is_none() {
            eprintln!("SKIPPED: iproute2 is not installed");
        }
        ip
    }

    /// In a forked test child: a user and network namespace of its own, mapped to the caller's
    /// uid and gid as root there. False when the kernel refuses (the test then skips).
    pub(crate) fn unshare_user_net() -> bool {
        use nix::sched::{CloneFlags, unshare};
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        if unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).is_err() {
            return false;
        }
        let _ = std::fs::write("/proc/self/setgroups", "deny");
        let _ = std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"));
        let _ = std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"));
        true
    }

    /// Waits for `pid` and returns its exit code (128+N if killed by signal N). Kills it and
    /// panics after `timeout`, so a hung test fails instead of blocking the suite.
    pub(crate) fn wait_code(pid: Pid, timeout: Duration) -> i32 {
        let deadline = Instant::now() + timeout;
        loop {
            match waitpid(pid, Some(WaitPidFlag::WNOHANG)).expect("waitpid") {
                WaitStatus::Exited(_, code) => return code,
                WaitStatus::Signaled(_, sig, _) => return 128 + sig as i32,
                _ if Instant::now() > deadline => {
                    let _ = kill(pid, Signal::SIGKILL);
                    let _ = waitpid(pid, None);
                    panic!("child {pid} did not finish within {timeout:?}");
                }
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}
