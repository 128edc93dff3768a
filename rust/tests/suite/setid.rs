//! Issue 9, item 5: nothing inside can give a file the setuid or setgid bit. A file left in
//! the project with it keeps the bit on the host (a setuid-root shell after a root launch).
//! Every syscall that can set the bit is tried, next to the same call without it.

use crate::common::*;

#[test]
fn no_call_sets_the_setuid_or_setgid_bit() {
    let f = Fixture::new();
    let code = r#"
import ctypes, os, stat
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AT_FDCWD = -100
def sys(name, *args):
    nr = {"chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "creat": 85,
          "open": 2, "openat": 257, "mknod": 133, "mknodat": 259}[name]
    rc = libc.syscall(nr, *args)
    return "ok" if rc >= 0 else os.strerror(ctypes.get_errno())
def b(p): return p.encode()
for bits, label in [(0o4755, "suid"), (0o2755, "sgid"), (0o755, "plain")]:
    open("f", "w").close()
    fd = os.open("f", os.O_RDONLY)
    r = [sys("chmod", b("f"), bits), sys("fchmod", fd, bits),
         sys("fchmodat", AT_FDCWD, b("f"), bits), sys("fchmodat2", AT_FDCWD, b("f"), bits, 0)]
    os.close(fd)
    for i, (name, args) in enumerate([
        ("creat", lambda p: (b(p), bits)),
        ("open", lambda p: (b(p), os.O_CREAT | os.O_WRONLY, bits)),
        ("openat", lambda p: (AT_FDCWD, b(p), os.O_CREAT | os.O_WRONLY, bits)),
        ("openat", lambda p: (AT_FDCWD, b("."), os.O_TMPFILE | os.O_WRONLY, bits)),
        ("mknod", lambda p: (b(p), stat.S_IFREG | bits, 0)),
        ("mknodat", lambda p: (AT_FDCWD, b(p), stat.S_IFREG | bits, 0)),
    ]):
        r.append(sys(name, *args("n%d%s" % (i, label))))
    # The upper 32 bits are dropped by the kernel: still the same mode.
    r.append(sys("chmod", b("f"), (0xffffffff << 32) | bits))
    print(label, " ".join("ok" if x == "ok" else "EPERM" if x == "Operation not permitted" else x for x in r))
suid = [e.name for e in os.scandir(".") if os.stat(e.name).st_mode & 0o6000]
print("with bits:", suid)
"#;
    let o = py(&f, &["--no-network"], code);
    assert_eq!(o.code, 0, "{o:?}");
    let eperm = ["EPERM"; 11].join(" ");
    assert!(o.stdout.contains(&format!("suid {eperm}\n")), "{o:?}");
    assert!(o.stdout.contains(&format!("sgid {eperm}\n")), "{o:?}");
    assert!(
        o.stdout
            .contains(&format!("plain {}\n", ["ok"; 11].join(" "))),
        "{o:?}"
    );
    assert!(o.stdout.contains("with bits: []"), "{o:?}");
    // And what an agent would type.
    let o = run(f.sh(
        &["--no-network"],
        "cp /bin/sh x && chmod 4755 x; chmod u+s x; chmod g+s x; install -m 4755 /bin/sh y; \
         mkdir d && chmod g+s d; stat -c '%a %n' x y d 2>&1",
    ));
    assert!(o.stdout.contains("755 x"), "{o:?}");
    assert!(
        !o.stdout.contains("4755") && !o.stdout.contains("2755"),
        "{o:?}"
    );
    for p in ["x", "y", "d"] {
        if let Ok(m) = std::fs::metadata(f.proj.join(p)) {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                m.permissions().mode() & 0o6000,
                0,
                "{p} has a set-id bit on the host"
            );
        }
    }
}

/// Issue 9, item 17: io_uring (which performs opens and connects without the syscalls the
/// filter inspects) and openat2 (whose mode the filter cannot read) answer ENOSYS, so callers
/// fall back as on an older kernel.
#[test]
fn io_uring_and_openat2_are_not_available() {
    let f = Fixture::new();
    let code = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)
how = ctypes.create_string_buffer(24)
for name, nr, args in [("io_uring_setup", 425, (8, params)), ("io_uring_enter", 426, (0, 0, 0, 0, 0, 0)),
                       ("io_uring_register", 427, (0, 0, 0, 0)), ("openat2", 437, (-100, b".", how, 24))]:
    rc = libc.syscall(nr, *args)
    print(name, "ok" if rc >= 0 else os.strerror(ctypes.get_errno()))
print("open", open("/etc/hosts").read(0) == "")
"#;
    let o = py(&f, &["--no-network"], code);
    assert_eq!(o.code, 0, "{o:?}");
    for name in [
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "openat2",
    ] {
        assert!(
            o.stdout
                .contains(&format!("{name} Function not implemented\n")),
            "{name}: {o:?}"
        );
    }
    assert!(o.stdout.contains("open True"), "{o:?}");
}
