//! The sandbox's PID 1 (our init) is not a way out: every one of its threads runs under the
//! seccomp filters, the command cannot trace it or take its descriptors, it holds no
//! environment, and descriptors the launcher inherited never reach the sandbox.

use crate::common::*;

/// Regression (issue 9, item 3): with `--allow-local-port` the init started its bridge
/// threads before it installed the filter, which covered only the calling thread.
#[test]
fn every_thread_of_pid_1_is_filtered() {
    let f = Fixture::new();
    let out = ok(f.sh(
        &[
            "--no-network",
            "--allow-local-port",
            "5432",
            "--allow-local-port",
            "6379",
        ],
        "for t in /proc/1/task/*; do grep ^Seccomp: $t/status; done | sort | uniq -c; \
         ls /proc/1/task | wc -l",
    ));
    let lines: Vec<&str> = out.lines().collect();
    let threads: usize = lines.last().unwrap().trim().parse().unwrap();
    assert!(threads >= 3, "the bridges' threads are missing: {out}");
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [threads.to_string().as_str(), "Seccomp:", "2"],
        "a thread of PID 1 runs without the filter: {out}"
    );
    assert_eq!(lines.len(), 2, "{out}");
}

/// The escape: attach to PID 1 and steer one of its threads into `TIOCSTI`/`keyctl`. Each
/// way in to PID 1 must fail, while the command can still trace its own children.
#[test]
fn pid_1_cannot_be_traced_or_read() {
    let f = Fixture::new();
    let code = r#"
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def errno_of(rc):
    return "ok" if rc >= 0 else os.strerror(ctypes.get_errno())
PTRACE_ATTACH, PTRACE_SEIZE, PTRACE_DETACH = 16, 0x4206, 17
print("attach", errno_of(libc.ptrace(PTRACE_ATTACH, 1, None, None)))
print("seize", errno_of(libc.ptrace(PTRACE_SEIZE, 1, None, None)))
for name in ["mem", "environ", "fd/0", "fd/3"]:
    try:
        open("/proc/1/" + name, "rb").read(1)
        print(name, "ok")
    except OSError as e:
        print(name, e.strerror)
try:
    print("fd link", os.readlink("/proc/1/fd/0"))
except OSError as e:
    print("fd link", e.strerror)
pidfd = libc.syscall(434, 1, 0)  # pidfd_open
print("pidfd_open", errno_of(pidfd))
if pidfd >= 0:
    print("pidfd_getfd", errno_of(libc.syscall(438, pidfd, 0, 0)))
child = subprocess.Popen(["sleep", "5"])
rc = libc.ptrace(PTRACE_SEIZE, child.pid, None, None)
print("own child", errno_of(rc))
child.kill()
"#;
    let o = py(&f, &["--no-network", "--allow-local-port", "5432"], code);
    assert_eq!(o.code, 0, "{o:?}");
    for line in [
        "attach Operation not permitted",
        "seize Operation not permitted",
        "mem Permission denied",
        "environ Permission denied",
        "fd/0 Permission denied",
        "fd/3 Permission denied",
        "fd link Permission denied",
        "pidfd_open ok",
        "pidfd_getfd Operation not permitted",
        "own child ok",
    ] {
        assert!(o.stdout.lines().any(|l| l == line), "want {line:?}: {o:?}");
    }
}

/// Regression (issue 9, item 4): `exec 7<~/proj; agent-sandbox run -- cat
/// /proc/1/fd/7/../../.ssh/id_ed25519` printed the key.
#[test]
fn descriptors_the_launcher_inherited_do_not_reach_the_sandbox() {
    let f = Fixture::new();
    f.write("home/.ssh/id_ed25519", "PRIVATE-KEY-3f1a\n");
    let mut c = f.sh(
        &["--no-network"],
        "for p in 1 $$; do ls /proc/$p/fd 2>&1 | tr '\\n' ' '; echo; done; readlink /proc/1/fd/7; \
         cat /proc/1/fd/7/../.ssh/id_ed25519 /proc/self/fd/7/../.ssh/id_ed25519 \
             /proc/1/fd/9 2>&1; ls /proc/1/fd/7/ 2>&1; true",
    );
    let home = std::fs::File::open(&f.home).unwrap();
    let secret = std::fs::File::open(f.home.join(".ssh/id_ed25519")).unwrap();
    leak_fds(&mut c, &[(&home, 7), (&secret, 9)]);
    let o = run(c);
    assert!(!o.stdout.contains("PRIVATE-KEY"), "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    // Listing PID 1's descriptors is allowed to its owner (a root launch), opening them not.
    let init_fds: Vec<&str> = lines[0].split_whitespace().collect();
    assert!(
        lines[0].contains("Permission denied")
            || (!init_fds.contains(&"7") && !init_fds.contains(&"9")),
        "{o:?}"
    );
    let shell_fds: Vec<&str> = lines[1].split_whitespace().collect();
    assert!(shell_fds.contains(&"2"), "{o:?}");
    assert!(
        !shell_fds.contains(&"7") && !shell_fds.contains(&"9"),
        "a descriptor of the launcher's caller reached the command: {o:?}"
    );
    assert!(o.stdout.contains("No such file or directory"), "{o:?}");
}

/// Issue 9, item 17: PID 1 keeps no environment, so the declared variables (tokens among
/// them) are not in its memory for the sandbox's lifetime; the command still gets them.
#[test]
fn pid_1_holds_no_environment_and_the_command_gets_it() {
    let f = Fixture::new();
    let mut c = f.sh(
        &["--no-network", "--env", "DECLARED_TOKEN"],
        "echo \"cmd=$DECLARED_TOKEN\"; cat /proc/1/environ 2>&1 | tr '\\0' '\\n'; \
         cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c LAUNCHER_ONLY",
    );
    c.env("DECLARED_TOKEN", "tok-7c2e")
        .env("LAUNCHER_ONLY", "launcher-secret-5e1f");
    let o = run(c);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[0], "cmd=tok-7c2e", "{o:?}");
    assert!(lines[1].contains("Permission denied"), "{o:?}");
    assert_eq!(lines[2], "0", "{o:?}");
}

/// Issue 9, item 17: the sandbox's root (bwrap's tmpfs) is read-only once set up, so `/`,
/// `/etc` and `/opt` are no scratch space; $HOME, /tmp and the project stay writable (and
/// /run, a tmpfs of its own, as on the host).
#[test]
fn the_root_is_read_only_and_the_writable_places_stay_so() {
    let f = Fixture::new();
    let out = ok(f.sh(
        &["--no-network"],
        "for p in /x /etc/x /opt /usr/x; do (mkdir -p \"$p\" && touch \"$p/y\") 2>/dev/null && echo \"wrote $p\"; done; \
         touch \"$HOME/h\" /tmp/t /run/r ./p && echo writable",
    ));
    assert_eq!(out, "writable\n");
}
