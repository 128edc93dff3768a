//! The terminal-injection seccomp filter.
//!
//! The sandbox keeps the user's controlling terminal (no `bwrap --new-session`, so that job
//! control, `/dev/tty` and `SIGWINCH` keep working for interactive agents). The price is that a
//! process in the sandbox could push keystrokes into the terminal with `TIOCSTI` (they would be
//! read by the user's shell after the sandbox exits) or with `TIOCLINUX` (copy/paste on a Linux
//! virtual console). bwrap's manual asks for exactly this filter when `--new-session` is not used.
//!
//! Everything else is allowed: this is not a syscall allowlist.

use std::collections::BTreeMap;

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

/// `TIOCSTI`: insert a byte into the terminal's input queue.
const TIOCSTI: u64 = 0x5412;
/// `TIOCLINUX`: virtual-console sub-commands, among them the selection paste (`TIOCL_PASTESEL`).
const TIOCLINUX: u64 = 0x541C;

/// On x86_64 the x32 ABI uses the same audit arch (`AUDIT_ARCH_X86_64`) as native 64-bit code, so
/// seccompiler's arch check lets it through; its syscall numbers carry this bit instead.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error(
        "the terminal-injection filter is not built for the architecture `{0}` (expected x86_64, aarch64 or riscv64)"
    )]
    UnsupportedArch(&'static str),
    #[error("cannot build the terminal-injection filter: {0}")]
    Build(#[from] BackendError),
    #[error("cannot set no_new_privs (prctl PR_SET_NO_NEW_PRIVS): {0}")]
    NoNewPrivs(nix::Error),
    #[error("the kernel refused the seccomp filter: {0}")]
    Install(#[from] seccompiler::Error),
}

type Result<T> = std::result::Result<T, SeccompError>;

/// The `ioctl` syscall numbers a process of this architecture can reach.
fn ioctl_syscalls() -> Vec<i64> {
    #[allow(unused_mut)]
    let mut numbers = vec![libc::SYS_ioctl];
    // An x32 process reaches ioctl as 514|X32 (compat_sys_ioctl). 16|X32 is not a valid x32
    // syscall today, but costs nothing to cover in case a kernel ever wires it up.
    #[cfg(target_arch = "x86_64")]
    numbers.extend([X32_SYSCALL_BIT | 514, X32_SYSCALL_BIT | libc::SYS_ioctl]);
    numbers
}

/// `keyctl`, `add_key`, `request_key`, and their x32 entry points on x86_64.
fn keyring_syscalls() -> Vec<i64> {
    #[allow(unused_mut)]
    let mut numbers = vec![libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key];
    #[cfg(target_arch = "x86_64")]
    numbers.extend(
        [libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key].map(|n| X32_SYSCALL_BIT | n),
    );
    numbers
}

/// Compiles the filter for the architecture this binary was built for: every syscall is allowed,
/// except `ioctl(_, TIOCSTI | TIOCLINUX, …)` and the keyring calls, which fail with `EPERM`.
///
/// The request is compared as 32 bits (`Dword`) because the kernel truncates it to an
/// `unsigned int`: a request of `0xffff_ffff_0000_5412` is still `TIOCSTI` to the tty layer, and a
/// 64-bit comparison would let it through (the bypass found in several sandboxes' first filters).
///
/// seccompiler prepends an architecture check: a syscall made through another ABI (32-bit
/// `int 0x80` on x86_64, AArch32 on aarch64) kills the process. That is fail-closed: the filter
/// cannot be evaded through a compat ABI, and 32-bit binaries therefore do not run in the sandbox.
pub fn tty_injection_filter() -> Result<BpfProgram> {
    let arch = std::env::consts::ARCH;
    let target = TargetArch::try_from(arch).map_err(|_| SeccompError::UnsupportedArch(arch))?;
    let request_is = |request: u64| -> Result<SeccompRule> {
        let condition =
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)?;
        Ok(SeccompRule::new(vec![condition])?)
    };
    let mut rules = BTreeMap::new();
    for nr in ioctl_syscalls() {
        rules.insert(nr, vec![request_is(TIOCSTI)?, request_is(TIOCLINUX)?]);
    }
    // The kernel keyrings are not namespaced: the user's session keyring (Kerberos tickets,
    // ecryptfs and PAM-stored tokens) would be readable and writable from inside. An empty
    // rule list matches every call.
    for nr in keyring_syscalls() {
        rules.insert(nr, vec![]);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        target,
    )?;
    Ok(BpfProgram::try_from(filter)?)
}

/// Installs [`tty_injection_filter`] on the calling thread; children forked from it afterwards
/// inherit it, and no process can remove it.
///
/// Sets `no_new_privs` first, which the kernel requires for an unprivileged filter and which
/// bwrap has already set for the sandbox anyway.
pub fn install_tty_injection_filter() -> Result<()> {
    let program = tty_injection_filter()?;
    nix::sys::prctl::set_no_new_privs().map_err(SeccompError::NoNewPrivs)?;
    seccompiler::apply_filter(&program)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::testutil::{run_in_fork, wait_code};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    /// Exit code of the forked probe when the machine lacks a pty: the test skips loudly.
    const NO_PTY: i32 = 77;

    fn ioctl_errno(fd: i32, request: u64, arg: *mut libc::c_void) -> Option<i32> {
        // The raw syscall, so the full 64-bit request reaches the kernel as given.
        let rc = unsafe { libc::syscall(libc::SYS_ioctl, fd, request, arg) };
        (rc < 0).then(std::io::Error::last_os_error)?.raw_os_error()
    }

    /// Runs in a forked child: the filter stays with that child, the test process is unaffected.
    fn probe() -> i32 {
        let Ok(pty) = nix::pty::openpty(None, None) else {
            return NO_PTY;
        };
        let code = probe_tty(pty.slave.as_raw_fd());
        // Closing the master would hang up our new controlling terminal and SIGHUP us.
        std::mem::forget(pty);
        code
    }

    fn probe_tty(tty: i32) -> i32 {
        // TIOCSTI needs the tty to be our controlling terminal (unless we hold CAP_SYS_ADMIN).
        if nix::unistd::setsid().is_err() || unsafe { libc::ioctl(tty, libc::TIOCSCTTY, 0) } != 0 {
            return NO_PTY;
        }
        let mut byte = b'x';
        let byte_ptr = (&raw mut byte).cast::<libc::c_void>();
        // Without the filter the kernel accepts it (dev.tty.legacy_tiocsti=1), or refuses it
        // with EIO when legacy TIOCSTI is off: anything but EPERM shows the filter is the cause.
        if ioctl_errno(tty, TIOCSTI, byte_ptr) == Some(libc::EPERM) {
            return 10;
        }
        if install_tty_injection_filter().is_err() {
            return 11;
        }
        if ioctl_errno(tty, TIOCSTI, byte_ptr) != Some(libc::EPERM) {
            return 12;
        }
        // Regression: a request with the upper 32 bits set is still TIOCSTI for the kernel.
        if ioctl_errno(tty, 0xffff_ffff_0000_0000 | TIOCSTI, byte_ptr) != Some(libc::EPERM) {
            return 13;
        }
        let mut selection = [2u8; 8]; // TIOCL_PASTESEL
        if ioctl_errno(tty, TIOCLINUX, selection.as_mut_ptr().cast()) != Some(libc::EPERM) {
            return 14;
        }
        let mut size: libc::winsize = unsafe { std::mem::zeroed() };
        #[allow(clippy::unnecessary_cast)] // the request type differs between libcs
        let get_size = libc::TIOCGWINSZ as u64;
        if ioctl_errno(tty, get_size, (&raw mut size).cast()).is_some() {
            return 15;
        }
        #[cfg(target_arch = "x86_64")]
        {
            // The x32 entry point is filtered before the kernel even looks at the number, so
            // this holds whether or not the kernel has x32 support.
            let rc = unsafe { libc::syscall(X32_SYSCALL_BIT | 514, tty, TIOCSTI, byte_ptr) };
            if rc >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
                return 16;
            }
        }
        0
    }

    #[test]
    fn filter_compiles_for_this_arch() {
        let program = tty_injection_filter().expect("filter");
        assert!(!program.is_empty());
    }

    #[test]
    fn tiocsti_and_tioclinux_are_denied_and_other_ioctls_work() {
        let code = wait_code(run_in_fork(probe), Duration::from_secs(5));
        if code == NO_PTY {
            eprintln!("SKIPPED: no pty available (openpty/TIOCSCTTY failed)");
            return;
        }
        let meaning = match code {
            0 => "ok",
            10 => "TIOCSTI already gave EPERM without the filter: the test cannot tell",
            11 => "installing the filter failed",
            12 => "TIOCSTI was not denied with EPERM",
            13 => "TIOCSTI with the upper 32 bits set was not denied",
            14 => "TIOCLINUX was not denied with EPERM",
            15 => "TIOCGWINSZ failed under the filter",
            16 => "x32 ioctl(TIOCSTI) was not denied",
            _ => "the probe crashed",
        };
        assert_eq!(code, 0, "{meaning}");
    }
}
