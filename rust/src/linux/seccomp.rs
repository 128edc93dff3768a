//! The sandbox's seccomp filters, installed by its PID 1 before anything else runs there
//! (before the bridge threads too, so no thread of PID 1 runs unfiltered) and inherited by
//! every process of the sandbox.
//!
//! What they deny, and why each:
//! * `ioctl(TIOCSTI)` / `ioctl(TIOCLINUX)`: the sandbox keeps the user's controlling terminal
//!   (no `bwrap --new-session`, so job control, `/dev/tty` and `SIGWINCH` keep working for
//!   interactive agents), and these would push keystrokes into it (read by the user's shell
//!   after the sandbox exits) or paste a console selection. bwrap's manual asks for exactly this
//!   filter when `--new-session` is not used.
//! * `keyctl`, `add_key`, `request_key`: the kernel keyrings are not namespaced; the user's
//!   session keyring (Kerberos tickets, ecryptfs and PAM-stored tokens) would be reachable.
//! * Setting the setuid or setgid bit: the `chmod` family (`chmod`, `fchmod`, `fchmodat`,
//!   `fchmodat2`) with `S_ISUID`/`S_ISGID` in the mode, and files created with them (`open`,
//!   `openat`, `creat` with `O_CREAT` or `O_TMPFILE`, `mknod`, `mknodat`). A setuid file left in
//!   the project keeps its bit on the host, where it would run with the owner's rights (a
//!   setuid-root shell after a root launch). `mkdir` cannot set these bits.
//! * `setsockopt` of `SO_BINDTODEVICE`, `SO_BINDTOIFINDEX`, `IP_UNICAST_IF`,
//!   `IPV6_UNICAST_IF`: with the outgoing interface chosen, the kernel sends a packet whose
//!   route is unreachable on-link anyway, past the routes that cut the host off in open mode.
//! * `openat2` (`ENOSYS`): its mode sits in a struct the filter cannot read, so it could create
//!   a setuid file; libc and runtimes fall back to `openat` on `ENOSYS`, as on older kernels.
//! * `io_uring_setup`/`_enter`/`_register` (`ENOSYS`): io_uring performs opens, connects and
//!   more without the syscalls this filter inspects. Nothing needs it; callers fall back.
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
/// The mode bits that make an executable run with its owner's or group's rights.
const SET_ID_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];
/// Socket options that choose the outgoing interface (`<linux/socket.h>`, `<linux/in.h>`,
/// `<linux/in6.h>`); libc lacks some of them.
const SO_BINDTOIFINDEX: u64 = 62;
const IP_UNICAST_IF: u64 = 50;
const IPV6_UNICAST_IF: u64 = 76;
/// `fchmodat2` (Linux 6.6); the same number on every architecture (the unified table).
const SYS_FCHMODAT2: i64 = 452;

/// On x86_64 the x32 ABI uses the same audit arch (`AUDIT_ARCH_X86_64`) as native 64-bit code, so
/// seccompiler's arch check lets it through; its syscall numbers carry this bit instead.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error(
        "the sandbox's seccomp filter is not built for the architecture `{0}` (expected x86_64, aarch64 or riscv64)"
    )]
    UnsupportedArch(&'static str),
    #[error("cannot build the sandbox's seccomp filter: {0}")]
    Build(#[from] BackendError),
    #[error("cannot set no_new_privs (prctl PR_SET_NO_NEW_PRIVS): {0}")]
    NoNewPrivs(nix::Error),
    #[error("the kernel refused the seccomp filter: {0}")]
    Install(#[from] seccompiler::Error),
}

type Result<T> = std::result::Result<T, SeccompError>;

/// Each native syscall number, and on x86_64 its x32 twin (same number with the x32 bit; every
/// call listed here is a "common" entry of the table).
fn with_x32(numbers: &[i64]) -> Vec<i64> {
    #[allow(unused_mut)]
    let mut all = numbers.to_vec();
    #[cfg(target_arch = "x86_64")]
    all.extend(numbers.iter().map(|n| X32_SYSCALL_BIT | n));
    all
}

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

/// A rule matching when every `(argument, mask)` pair has all of the mask's bits set. Arguments
/// are compared as 32 bits: the kernel truncates ioctl requests, modes and open flags to
/// `unsigned int`/`umode_t`, so a value with junk in the upper half means the same to it.
fn bits_set(pairs: &[(u8, u64)]) -> Result<SeccompRule> {
    let conditions = pairs
        .iter()
        .map(|&(arg, mask)| {
            SeccompCondition::new(
                arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(mask),
                mask,
            )
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(SeccompRule::new(conditions)?)
}

/// Rules matching a setuid or setgid bit in argument `mode`.
fn set_id_mode(mode: u8) -> Result<Vec<SeccompRule>> {
    SET_ID_BITS
        .iter()
        .map(|&bit| bits_set(&[(mode, bit)]))
        .collect()
}

/// Rules matching a file created (`O_CREAT` or `O_TMPFILE` in argument `flags`) with a setuid or
/// setgid bit in argument `mode`.
fn set_id_create(flags: u8, mode: u8) -> Result<Vec<SeccompRule>> {
    let creating = [libc::O_CREAT as u64, libc::O_TMPFILE as u64];
    let mut rules = Vec::new();
    for how in creating {
        for bit in SET_ID_BITS {
            rules.push(bits_set(&[(flags, how), (mode, bit)])?);
        }
    }
    Ok(rules)
}

/// The calls denied with `EPERM`, each with the rules that select the denied uses (an empty
/// list denies every call).
fn eperm_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>> {
    let request_is = |request: u64| -> Result<SeccompRule> {
        let condition =
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)?;
        Ok(SeccompRule::new(vec![condition])?)
    };
    let mut rules = BTreeMap::new();
    for nr in ioctl_syscalls() {
        rules.insert(nr, vec![request_is(TIOCSTI)?, request_is(TIOCLINUX)?]);
    }
    for nr in with_x32(&[libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key]) {
        rules.insert(nr, vec![]);
    }
    // (syscall, index of its mode argument)
    let mut chmods = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
    ];
    chmods.push((libc::SYS_mknodat, 2));
    // (syscall, index of its flags argument, index of its mode argument)
    #[allow(unused_mut)]
    let mut opens = vec![(libc::SYS_openat, 2, 3)];
    // The legacy calls exist on x86_64 only; aarch64 and riscv64 have just the *at forms.
    #[cfg(target_arch = "x86_64")]
    {
        chmods.extend([
            (libc::SYS_chmod, 1),
            (libc::SYS_creat, 1),
            (libc::SYS_mknod, 1),
        ]);
        opens.push((libc::SYS_open, 1, 2));
    }
    for (nr, mode) in chmods {
        for nr in with_x32(&[nr]) {
            rules.insert(nr, set_id_mode(mode)?);
        }
    }
    // Choosing the outgoing interface makes the kernel take a destination whose route is
    // unreachable for on-link (the "routing tables are wrong" fallback), which walks past the
    // routes that cut the host off in open mode. Nothing a sandboxed agent runs needs it.
    let sockopt_is = |level: u64, name: u64| -> Result<SeccompRule> {
        let level = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, level)?;
        let name = SeccompCondition::new(2, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, name)?;
        Ok(SeccompRule::new(vec![level, name])?)
    };
    let interface_options = vec![
        sockopt_is(libc::SOL_SOCKET as u64, libc::SO_BINDTODEVICE as u64)?,
        sockopt_is(libc::SOL_SOCKET as u64, SO_BINDTOIFINDEX)?,
        sockopt_is(libc::IPPROTO_IP as u64, IP_UNICAST_IF)?,
        sockopt_is(libc::IPPROTO_IPV6 as u64, IPV6_UNICAST_IF)?,
    ];
    for nr in with_x32(&[libc::SYS_setsockopt]) {
        rules.insert(nr, interface_options.clone());
    }
    for (nr, flags, mode) in opens {
        for nr in with_x32(&[nr]) {
            rules.insert(nr, set_id_create(flags, mode)?);
        }
    }
    Ok(rules)
}

/// The calls denied outright with `ENOSYS`, so callers take the path they take on kernels
/// without them.
fn enosys_syscalls() -> Vec<i64> {
    with_x32(&[
        libc::SYS_openat2,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ])
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram> {
    let arch = std::env::consts::ARCH;
    let target = TargetArch::try_from(arch).map_err(|_| SeccompError::UnsupportedArch(arch))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        target,
    )?;
    Ok(BpfProgram::try_from(filter)?)
}

/// Compiles the sandbox's filters for the architecture this binary was built for (one per
/// errno, since a seccompiler filter has a single match action): every syscall is allowed except
/// the uses listed in the module docs.
///
/// seccompiler prepends an architecture check: a syscall made through another ABI (32-bit
/// `int 0x80` on x86_64, AArch32 on aarch64) kills the process. That is fail-closed: the filter
/// cannot be evaded through a compat ABI, and 32-bit binaries therefore do not run in the sandbox.
pub fn sandbox_filters() -> Result<Vec<BpfProgram>> {
    let enosys = enosys_syscalls()
        .into_iter()
        .map(|nr| (nr, vec![]))
        .collect();
    Ok(vec![
        compile(eperm_rules()?, libc::EPERM)?,
        compile(enosys, libc::ENOSYS)?,
    ])
}

/// Installs [`sandbox_filters`] on every thread of the calling process (TSYNC); children
/// forked afterwards inherit them, and no process can remove them.
///
/// Sets `no_new_privs` first, which the kernel requires for an unprivileged filter and which
/// bwrap has already set for the sandbox anyway.
pub fn install_sandbox_filters() -> Result<()> {
    let programs = sandbox_filters()?;
    nix::sys::prctl::set_no_new_privs().map_err(SeccompError::NoNewPrivs)?;
    for program in &programs {
        seccompiler::apply_filter_all_threads(program)?;
    }
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
        if install_sandbox_filters().is_err() {
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
        let programs = sandbox_filters().expect("filters");
        assert!(programs.iter().all(|p| !p.is_empty()));
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
