//! Unix sockets in declared paths (issue 9 item 9): a declared `~/.gnupg` or `/run/user/UID`
//! must not let the agent `connect()` to gpg-agent or D-Bus outside the sandbox. Sockets found
//! there are masked unless `--allow-socket` names them; a declared socket is refused.
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// Connects to each argument, sends `ping`, prints `PATH REPLY` or `PATH ERRNO-NAME`.
const PROBE: &str = r#"
import errno, socket, sys
for p in sys.argv[1:]:
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(p)
        c.sendall(b"ping\n")
        print(p, c.recv(64).decode().strip())
    except OSError as e:
        print(p, errno.errorcode[e.errno])
"#;

/// A host service on a Unix socket at `path` that answers every line with `pong`.
fn serve(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let l = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let mut line = String::new();
            if BufReader::new(&c).read_line(&mut line).is_ok() {
                let _ = (&c).write_all(b"pong\n");
            }
        }
    });
}

/// The host service still answers at `path` (the sandbox did not remove or replace it).
fn assert_host_socket_intact(path: &Path) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    assert!(
        meta.file_type().is_socket(),
        "{} is no longer a socket",
        path.display()
    );
    let mut s = UnixStream::connect(path).unwrap();
    s.write_all(b"ping\n").unwrap();
    let mut reply = String::new();
    BufReader::new(&s).read_line(&mut reply).unwrap();
    assert_eq!(reply, "pong\n");
}

fn probe(f: &Fixture, extra: &[&str], sockets: &[&Path]) -> Command {
    let mut c = f.cmd();
    // --quiet: the tests compare the launcher's whole stderr (the warnings), without the
    // session line.
    c.arg("run")
        .args(["--no-network", "--quiet"])
        .args(extra)
        .args(["--", "python3", "-c", PROBE])
        .args(sockets);
    c
}

fn masked_warning(sockets: &[&Path]) -> String {
    let list: String = sockets
        .iter()
        .map(|s| format!("  {}\n", s.display()))
        .collect();
    if let [one] = sockets {
        format!(
            "agent-sandbox: warning: 1 Unix socket in declared directories is masked, so the agent cannot connect() to the service behind it outside the sandbox (inside, connect() fails with ECONNREFUSED):\n{list}To allow one, pass --allow-socket {} (allowedSockets in the spec). Sockets created after launch, or re-created by their server during the session, are not masked.\n",
            one.display()
        )
    } else {
        format!(
            "agent-sandbox: warning: {} Unix sockets in declared directories are masked, so the agent cannot connect() to the services behind them outside the sandbox (inside, connect() fails with ECONNREFUSED):\n{list}To allow one, pass --allow-socket PATH (allowedSockets in the spec). Sockets created after launch, or re-created by their server during the session, are not masked.\n",
            sockets.len()
        )
    }
}

/// `~/.gnupg/S.gpg-agent` and a D-Bus-like `run-user/1000/bus` one level down.
fn two_services(f: &Fixture) -> (PathBuf, PathBuf, PathBuf) {
    let gpg = f.home.join(".gnupg/S.gpg-agent");
    let runtime = f.root().join("run-user");
    let bus = runtime.join("1000/bus");
    serve(&gpg);
    serve(&bus);
    (gpg, runtime, bus)
}

#[test]
fn sockets_in_declared_dirs_are_masked_read_only_and_read_write() {
    let f = Fixture::new();
    let (gpg, runtime, bus) = two_services(&f);
    for flag in ["--ro", "--rw"] {
        let o = run(probe(
            &f,
            &[flag, "~/.gnupg", flag, runtime.to_str().unwrap()],
            &[&gpg, &bus],
        ));
        assert_eq!(o.code, 0, "{flag}: {o:?}");
        assert_eq!(
            o.stdout,
            format!(
                "{} ECONNREFUSED\n{} ECONNREFUSED\n",
                gpg.display(),
                bus.display()
            ),
            "{flag}: {o:?}"
        );
        // Sorted: the fixture's `home/.gnupg` before `run-user`.
        assert_eq!(o.stderr, masked_warning(&[&gpg, &bus]), "{flag}: {o:?}");
    }
    assert_host_socket_intact(&gpg);
    assert_host_socket_intact(&bus);
}

#[test]
fn allow_socket_lets_the_named_socket_through_and_keeps_the_others_masked() {
    let f = Fixture::new();
    let (gpg, runtime, bus) = two_services(&f);
    let rt = runtime.to_str().unwrap();
    for flag in ["--ro", "--rw"] {
        let o = run(probe(
            &f,
            &[
                flag,
                "~/.gnupg",
                flag,
                rt,
                "--allow-socket",
                bus.to_str().unwrap(),
            ],
            &[&gpg, &bus],
        ));
        assert_eq!(o.code, 0, "{flag}: {o:?}");
        assert_eq!(
            o.stdout,
            format!("{} ECONNREFUSED\n{} pong\n", gpg.display(), bus.display()),
            "{flag}: {o:?}"
        );
        assert_eq!(o.stderr, masked_warning(&[&gpg]), "{flag}: {o:?}");
    }
    // A directory allows every socket below it; `~` works as in the declared paths.
    let o = run(probe(
        &f,
        &[
            "--ro",
            "~/.gnupg",
            "--ro",
            rt,
            "--allow-socket",
            "~/.gnupg",
            "--allow-socket",
            rt,
        ],
        &[&gpg, &bus],
    ));
    assert_eq!(
        o.stdout,
        format!("{} pong\n{} pong\n", gpg.display(), bus.display()),
        "{o:?}"
    );
    assert_eq!(o.stderr, "", "{o:?}");
}

#[test]
fn a_masked_socket_cannot_be_unmasked_from_a_read_write_dir() {
    let f = Fixture::new();
    let sock = f.home.join(".gnupg/private/S.gpg-agent");
    serve(&sock);
    let dir = f.home.join(".gnupg");
    // Every way to reach the socket object under another name, or to take the mask away.
    let script = format!(
        r#"
import errno, os, socket
d = "{d}"
s = d + "/private/S.gpg-agent"
def attempt(name, fn):
    try:
        fn()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
def connect(p):
    c = socket.socket(socket.AF_UNIX)
    c.connect(p)
attempt("unlink", lambda: os.unlink(s))
attempt("rename", lambda: os.rename(s, d + "/moved"))
attempt("link", lambda: os.link(s, d + "/hard"))
attempt("write", lambda: open(s, "w").write("x"))
# Moving the directory above carries the mask along.
attempt("rename-dir", lambda: os.rename(d + "/private", d + "/elsewhere"))
attempt("connect-moved", lambda: connect(d + "/elsewhere/S.gpg-agent"))
attempt("connect", lambda: connect(s))
attempt("connect-proc-root", lambda: connect("/proc/self/root" + d + "/elsewhere/S.gpg-agent"))
"#,
        d = dir.display()
    );
    let mut c = f.cmd();
    c.args([
        "run",
        "--no-network",
        "--rw",
        "~/.gnupg",
        "--",
        "python3",
        "-c",
        &script,
    ]);
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        o.stdout,
        "unlink EBUSY\nrename EBUSY\nlink EXDEV\nwrite EROFS\nrename-dir ok\n\
         connect-moved ECONNREFUSED\nconnect ENOENT\nconnect-proc-root ECONNREFUSED\n",
        "{o:?}"
    );
    // The directory move was real (the dir is read-write), and the socket went along with it:
    // still a socket, the service still answering, no other name for it.
    assert_host_socket_intact(&dir.join("elsewhere/S.gpg-agent"));
    assert!(!sock.exists() && !dir.join("hard").exists() && !dir.join("moved").exists());
}

#[test]
fn a_declared_socket_is_refused_unless_allowed() {
    let f = Fixture::new();
    let (_, _, bus) = two_services(&f);
    let b = bus.to_str().unwrap();
    for (flag, field) in [("--rw", "rwFiles"), ("--ro", "roFiles")] {
        let o = run(probe(&f, &[flag, b], &[&bus]));
        assert_eq!(o.code, 125, "{flag}: {o:?}");
        assert_eq!(
            o.stderr,
            format!(
                "agent-sandbox: error: {b} ({field}) is a Unix socket: exposing it lets the agent connect() to the service behind it outside the sandbox (a D-Bus bus, gpg-agent or ssh-agent acts with your powers). Fix: if that is what you want, also pass --allow-socket {b} (allowedSockets); otherwise stop declaring it\n"
            ),
            "{flag}: {o:?}"
        );
        // What the message says to do: the round trip works.
        let o = run(probe(&f, &[flag, b, "--allow-socket", b], &[&bus]));
        assert_eq!(o.code, 0, "{flag}: {o:?}");
        assert_eq!(o.stdout, format!("{b} pong\n"), "{flag}: {o:?}");
        assert_eq!(o.stderr, "", "{flag}: {o:?}");
    }
    assert_host_socket_intact(&bus);
}

#[test]
fn an_allow_socket_that_matches_nothing_is_named() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".gnupg")).unwrap();
    let o = run(probe(
        &f,
        &["--ro", "~/.gnupg", "--allow-socket", "~/.gnupg/S.nope"],
        &[],
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        o.stderr,
        "agent-sandbox: warning: --allow-socket ~/.gnupg/S.nope (allowedSockets) matches no Unix socket in the declared paths at launch, so it changes nothing. Expected a socket (or a directory holding sockets) inside a declared path; declare its directory (--ro DIR / --rw DIR), or drop the entry\n"
    );
}

/// The real thing: a D-Bus session bus in the declared runtime directory.
#[test]
fn a_real_dbus_session_bus_is_unreachable_unless_allowed() {
    if !Path::new("/usr/bin/dbus-daemon").exists() || !Path::new("/usr/bin/dbus-send").exists() {
        eprintln!(
            "SKIPPED a_real_dbus_session_bus_is_unreachable_unless_allowed: no dbus-daemon/dbus-send (apt-get install dbus)"
        );
        return;
    }
    let f = Fixture::new();
    let runtime = f.root().join("run-user");
    std::fs::create_dir_all(&runtime).unwrap();
    let bus = runtime.join("bus");
    let mut daemon = std::process::Command::new("/usr/bin/dbus-daemon")
        .args(["--session", "--nofork", "--nopidfile"])
        .arg(format!("--address=unix:path={}", bus.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        eventually(std::time::Duration::from_secs(5), || bus.exists()),
        "dbus-daemon did not create {}",
        bus.display()
    );
    let address = format!("unix:path={}", bus.display());
    let script = format!(
        "dbus-send --bus={address} --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetId >/dev/null 2>&1 && echo reached || echo refused"
    );
    let rt = runtime.to_str().unwrap();
    let masked = ok(f.sh(&["--no-network", "--ro", rt], &script));
    let allowed = ok(f.sh(
        &[
            "--no-network",
            "--ro",
            rt,
            "--allow-socket",
            bus.to_str().unwrap(),
        ],
        &script,
    ));
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_eq!(masked, "refused\n");
    assert_eq!(allowed, "reached\n");
}

#[test]
fn a_socket_under_a_declared_symlink_is_masked_at_both_paths() {
    // `~/.gnupg -> gnupg-real`, both declared: the same socket shows at two paths inside.
    let f = Fixture::new();
    let real = f.home.join("gnupg-real/S.gpg-agent");
    serve(&real);
    std::os::unix::fs::symlink("gnupg-real", f.home.join(".gnupg")).unwrap();
    let via_link = f.home.join(".gnupg/S.gpg-agent");
    let o = run(probe(
        &f,
        &["--ro", "~/gnupg-real", "--ro", "~/.gnupg"],
        &[&via_link, &real],
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        o.stdout,
        format!(
            "{} ECONNREFUSED\n{} ECONNREFUSED\n",
            via_link.display(),
            real.display()
        ),
        "{o:?}"
    );
    assert_eq!(o.stderr, masked_warning(&[&via_link, &real]), "{o:?}");
    // Allowed by its real path, it is reachable through the link too.
    let o = run(probe(
        &f,
        &[
            "--ro",
            "~/gnupg-real",
            "--ro",
            "~/.gnupg",
            "--allow-socket",
            "~/gnupg-real",
        ],
        &[&via_link],
    ));
    assert_eq!(o.stdout, format!("{} pong\n", via_link.display()), "{o:?}");
    assert_host_socket_intact(&real);
}
