//! Who and where the sandbox thinks it is: hostname, user, host identifiers, processes,
//! capabilities, nested namespaces.
use std::process::{Command, Stdio};

use crate::common::*;

fn host_user_name() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| panic!("the test user has no passwd entry on the host"))
}

#[test]
fn the_hostname_is_sandbox() {
    let f = Fixture::new();
    let out = ok(f.sh(
        &["--no-network"],
        "cat /proc/sys/kernel/hostname; uname -n; hostname evil 2>/dev/null && echo RENAMED; uname -n",
    ));
    assert_eq!(out, "sandbox\nsandbox\nsandbox\n");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    if host.trim() == "sandbox" {
        eprintln!("NOTE the_hostname_is_sandbox: the host is also called sandbox; weaker check");
    }
}

#[test]
fn passwd_has_one_synthetic_line_without_the_host_user() {
    let f = Fixture::new();
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let out = ok(f.sh(
        &["--no-network"],
        "cat /etc/passwd; echo --; cat /etc/group; echo --; id -un; id -u; id -g",
    ));
    let parts: Vec<&str> = out.split("--\n").collect();
    assert_eq!(parts.len(), 3, "{out}");
    let passwd = parts[0];
    assert_eq!(passwd.lines().count(), 1, "{out}");
    assert!(
        passwd.starts_with(&format!("sandbox:x:{uid}:{gid}:")),
        "{out}"
    );
    let name = host_user_name();
    let fields: Vec<&str> = passwd.trim_end().split(':').collect();
    assert!(
        !fields.contains(&name.as_str()),
        "the host user name {name:?} is in /etc/passwd: {out}"
    );
    assert_eq!(parts[1], format!("sandbox:x:{gid}:\n"), "{out}");
    assert_eq!(parts[2], format!("sandbox\n{uid}\n{gid}\n"), "{out}");
}

#[test]
fn host_identifiers_are_masked() {
    let f = Fixture::new();
    let out = ok(f.sh(
        &["--no-network"],
        "cat /proc/cmdline 2>/dev/null; echo '--'; cat /proc/sys/kernel/random/boot_id",
    ));
    let (cmdline, boot_id) = out.split_once("--\n").unwrap();
    assert_eq!(cmdline, "", "/proc/cmdline shows host content: {out}");
    let host_cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if host_cmdline.trim().is_empty() {
        eprintln!(
            "NOTE host_identifiers_are_masked: the host's /proc/cmdline is empty; weaker check"
        );
    }
    let host_boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(boot_id.trim().len(), 36, "not a boot id: {out}");
    assert_ne!(boot_id.trim(), host_boot_id.trim(), "the host's boot id");
}

#[test]
fn only_the_sandbox_processes_are_visible() {
    let f = Fixture::new();
    // A host process with a recognisable command line.
    let mut host_sleep = Command::new("sleep")
        .arg("29.4242")
        .stdin(Stdio::null())
        .spawn()
        .expect("start sleep on the host");
    let host_pid = host_sleep.id();
    let script = format!(
        "s=28.17; sleep ${{s}}17 & \
         while ! grep -qs 28.1717 /proc/$!/cmdline; do :; done; \
         test -e /proc/{host_pid} && echo HOST-PID-VISIBLE; \
         for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done; \
         echo --; ls /proc | grep -c '^[0-9]*$'; \
         kill $!"
    );
    let o = run(f.sh(&["--no-network"], &script));
    let _ = host_sleep.kill();
    let _ = host_sleep.wait();
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stdout.lines().any(|l| l == "HOST-PID-VISIBLE"), "{o:?}");
    let (cmdlines, count) = o.stdout.split_once("--\n").unwrap();
    assert!(
        !cmdlines.contains("29.4242"),
        "a host process is visible: {o:?}"
    );
    assert!(
        cmdlines.contains("sleep 28.1717"),
        "the sandbox's own process is not visible: {o:?}"
    );
    assert!(
        cmdlines.contains("/run/agent-sandbox/agent-sandbox "),
        "the sandbox init is not visible: {o:?}"
    );
    let n: usize = count.trim().parse().unwrap();
    assert!(n <= 6, "{n} processes visible: {o:?}");
}

#[test]
fn no_process_environment_holds_the_launchers_variables() {
    let f = Fixture::new();
    let mut c = f.sh(
        &["--no-network"],
        "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; echo \"PATH=$PATH\"",
    );
    c.env("SECRET_MARKER", "launcher-secret-5e1f");
    let out = ok(c);
    assert!(out.lines().any(|l| l.starts_with("PATH=")), "{out}");
    assert!(!out.contains("SECRET_MARKER"), "{out}");
    assert!(!out.contains("launcher-secret-5e1f"), "{out}");
}

#[test]
fn no_capabilities_inside() {
    let f = Fixture::new();
    let o = run(f.sh(
        &["--no-network"],
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status; \
         chroot / true 2>/dev/null && echo CHROOTED; \
         echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    let caps: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("Cap")).collect();
    assert_eq!(caps.len(), 5, "{o:?}");
    for l in caps {
        assert!(l.ends_with("\t0000000000000000"), "{l}\n{o:?}");
    }
    assert!(!o.stdout.contains("CHROOTED"), "{o:?}");
    if is_root() {
        let host = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(
            host.lines()
                .any(|l| l.starts_with("CapEff:") && !l.ends_with("0000000000000000")),
            "the root launcher has capabilities, so the zeros above are the sandbox's doing"
        );
    }
}

#[test]
fn nested_user_namespaces_fail() {
    let f = Fixture::new();
    let o = run(f.sh(
        &["--no-network"],
        "command -v unshare >/dev/null || echo NO-UNSHARE; \
         unshare -U true 2>/dev/null && echo NESTED-OK; \
         unshare -U -r id -u 2>/dev/null && echo NESTED-OK; \
         echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    if o.stdout.contains("NO-UNSHARE") {
        eprintln!("NOTE nested_user_namespaces_fail: no unshare(1) inside; python only");
    }
    assert!(!o.stdout.contains("NESTED-OK"), "{o:?}");

    // The raw system call, independent of util-linux.
    let o = run(f.sh(
        &["--no-network"],
        "command -v python3 >/dev/null || exit 99; \
         python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
r = l.unshare(0x10000000); print(r, ctypes.get_errno())'",
    ));
    if o.code == 99 {
        eprintln!("SKIPPED nested_user_namespaces_fail (python part): no python3 inside");
        return;
    }
    assert_eq!(o.code, 0, "{o:?}");
    let (r, errno) = o.stdout.trim().split_once(' ').unwrap();
    assert_eq!(r, "-1", "unshare(CLONE_NEWUSER) succeeded: {o:?}");
    assert_ne!(errno, "0", "{o:?}");
}

/// Regression (review): bwrap 0.8 leaves /proc/sys writable, and a root-launched sandbox passes
/// its uid check, so writing core_pattern gave host root code execution.
#[test]
fn kernel_settings_are_read_only() {
    let f = Fixture::new();
    let before = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let o = run(f.sh(
        &["--no-network"],
        "(echo core.agent-sandbox-test > /proc/sys/kernel/core_pattern) 2>&1; \
         (echo 1 > /proc/sysrq-trigger) 2>&1; echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("Read-only file system"), "{o:?}");
    assert!(o.stdout.ends_with("done\n"), "{o:?}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(),
        before,
        "the host's core_pattern changed"
    );
}

/// Regression (review): the kernel keyrings are not namespaced, so the user's session keyring
/// (Kerberos tickets, PAM-stored tokens) was readable and writable from inside.
#[test]
fn kernel_keyrings_are_out_of_reach() {
    let f = Fixture::new();
    let probe = "import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
nr = {'x86_64': (250, 248), 'aarch64': (219, 217)}[os.uname().machine]
# keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) and add_key(user, …, session)
r1 = libc.syscall(nr[0], 0, -3, 0); e1 = ctypes.get_errno()
r2 = libc.syscall(nr[1], b'user', b'agent-sandbox-test', b'x', 1, -3); e2 = ctypes.get_errno()
print(r1, e1, r2, e2)";
    let out = ok(f.sh(&["--no-network"], &format!("python3 -c \"{probe}\"")));
    assert_eq!(out, "-1 1 -1 1\n", "keyctl/add_key must fail with EPERM");
}
