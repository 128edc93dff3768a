//! The launch directory guard: never from `/` or above `$HOME`; from `$HOME` itself only after
//! a `y` typed on the terminal (never read from stdin).
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// `sh -c 'touch MARKER'` from `cwd`; returns the run and whether the marker appeared.
fn launch_from(f: &Fixture, cwd: &Path, marker: &Path) -> Out {
    let mut c = f.sh(&["--no-network"], &format!("touch '{}'", marker.display()));
    c.current_dir(cwd);
    run(c)
}

fn error_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("agent-sandbox: error:"))
        .collect()
}

/// Without a controlling terminal: a new session, so `/dev/tty` cannot be opened.
pub(crate) fn without_tty(c: &mut Command) {
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
}

#[test]
fn launching_from_root_is_refused() {
    let f = Fixture::new();
    let marker = f.proj.join("ran");
    let o = launch_from(&f, Path::new("/"), &marker);
    assert_eq!(o.code, 125, "{o:?}");
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{o:?}");
    assert!(errors[0].contains("refusing to launch from /"), "{o:?}");
    assert!(!marker.exists(), "the command ran");
    // The allowed counterpart: from the project it runs.
    let o = launch_from(&f, &f.proj, &marker);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(marker.exists());
}

#[test]
fn launching_from_above_home_is_refused() {
    let f = Fixture::new();
    let marker = f.proj.join("ran");
    let parent = f.home.parent().unwrap().to_path_buf();
    // (The fixture's grandparent is /tmp, refused as a shared directory: see below.)
    {
        let cwd = parent.as_path();
        let o = launch_from(&f, cwd, &marker);
        assert_eq!(o.code, 125, "{}: {o:?}", cwd.display());
        let errors = error_lines(&o.stderr);
        assert_eq!(errors.len(), 1, "{o:?}");
        assert!(
            errors[0].contains(&format!(
                "refusing to launch from {} because it contains your home directory {}",
                cwd.display(),
                f.home.display()
            )),
            "{o:?}"
        );
        assert!(!marker.exists(), "the command ran from {}", cwd.display());
    }
    // A sibling of $HOME is not above it.
    let sibling = f.root().join("home2");
    std::fs::create_dir(&sibling).unwrap();
    let o = launch_from(&f, &sibling, &sibling.join("ran"));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(sibling.join("ran").exists());
}

#[test]
fn launching_from_home_without_a_terminal_is_refused() {
    let f = Fixture::new();
    let marker = f.home.join("ran");
    for stdin in ["null", "y on stdin"] {
        let mut c = f.sh(&["--no-network"], &format!("touch '{}'", marker.display()));
        c.current_dir(&f.home);
        without_tty(&mut c);
        let o = if stdin == "null" {
            c.stdin(Stdio::null());
            run(c)
        } else {
            // Never read the answer from stdin: the agent's input could supply it.
            c.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = c.spawn().unwrap();
            let _ = child.stdin.take().unwrap().write_all(b"y\n");
            let o = child.wait_with_output().unwrap();
            Out {
                code: o.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            }
        };
        assert_eq!(o.code, 125, "{stdin}: {o:?}");
        let errors = error_lines(&o.stderr);
        assert_eq!(errors.len(), 1, "{stdin}: {o:?}");
        assert!(
            errors[0].contains("refusing to launch from your home directory")
                && errors[0].contains("without confirmation"),
            "{stdin}: {o:?}"
        );
        assert!(!marker.exists(), "{stdin}: the command ran");
    }
}

/// Runs `c` with a new pty as its controlling terminal (stdin is /dev/null), waits for the
/// `[y/N]` prompt on the terminal, types `answer`, and returns the run and the terminal text.
/// `None` when no pty can be opened.
pub(crate) fn answer_on_tty(mut c: Command, answer: &[u8]) -> Option<(Out, String)> {
    let pty = match nix::pty::openpty(None, None) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cannot open a pty: {e}");
            return None;
        }
    };
    for fd in [pty.master.as_raw_fd(), pty.slave.as_raw_fd()] {
        // SAFETY: plain fcntl on fds we own; other tests' children must not inherit them.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    let slave = pty.slave.as_raw_fd();
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            if libc::setsid() < 0 || libc::ioctl(slave, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = c.spawn().unwrap();
    drop(pty.slave);

    // Non-blocking reads from the main loop: the master reads EIO whenever no process has the
    // terminal open (before the helper opens /dev/tty), which must not end the transcript.
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let fl = libc::fcntl(pty.master.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(pty.master.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    let mut master = std::fs::File::from(pty.master);
    let mut transcript = Vec::new();
    let drain = |master: &mut std::fs::File, transcript: &mut Vec<u8>| {
        let mut buf = [0u8; 1024];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            transcript.extend_from_slice(&buf[..n]);
        }
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut answered = false;
    let status = loop {
        drain(&mut master, &mut transcript);
        if let Some(s) = child.try_wait().unwrap() {
            drain(&mut master, &mut transcript);
            break s;
        }
        if !answered && String::from_utf8_lossy(&transcript).contains("[y/N]") {
            master.write_all(answer).unwrap();
            answered = true;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "no exit within 5 s (answered: {answered}); terminal:\n{}",
                String::from_utf8_lossy(&transcript)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let out = Out {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    };
    Some((out, String::from_utf8_lossy(&transcript).into_owned()))
}

fn confirm_from_home(answer: &[u8]) -> Option<(Out, String, Fixture, PathBuf)> {
    let f = Fixture::new();
    let marker = f.home.join("ran");
    let mut c = f.sh(
        &["--no-network"],
        &format!("touch '{}' && echo ran", marker.display()),
    );
    c.current_dir(&f.home);
    let (o, tty) = answer_on_tty(c, answer)?;
    Some((o, tty, f, marker))
}

#[test]
fn launching_from_home_runs_after_y_on_the_terminal() {
    let Some((o, tty, f, marker)) = confirm_from_home(b"y\n") else {
        eprintln!("SKIPPED launching_from_home_runs_after_y_on_the_terminal: no pty");
        return;
    };
    assert_eq!(o.code, 0, "{o:?}\nterminal:\n{tty}");
    assert_eq!(o.stdout, "ran\n", "{o:?}");
    assert!(marker.exists(), "the command did not run");
    assert!(
        tty.contains(&format!(
            "you are launching from your home directory {}",
            f.home.display()
        )) && tty.contains("continue? [y/N]"),
        "the question was not asked on the terminal:\n{tty}"
    );
    assert!(!o.stdout.contains("[y/N]"), "asked on stdout: {o:?}");
}

#[test]
fn launching_from_home_is_refused_after_n_on_the_terminal() {
    let Some((o, tty, _f, marker)) = confirm_from_home(b"n\n") else {
        eprintln!("SKIPPED launching_from_home_is_refused_after_n_on_the_terminal: no pty");
        return;
    };
    assert_eq!(o.code, 125, "{o:?}\nterminal:\n{tty}");
    assert!(tty.contains("continue? [y/N]"), "{tty}");
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{o:?}");
    assert!(errors[0].contains("without confirmation"), "{o:?}");
    assert!(!marker.exists(), "the command ran");
    assert_eq!(o.stdout, "", "{o:?}");
}

/// `$HOME` reached through a symlink: the guard compares canonical paths, so the real parent of
/// the home directory is refused even though it is not a prefix of `$HOME` as written.
#[test]
fn a_symlinked_home_does_not_slip_through() {
    let f = Fixture::new();
    let real = f.root().join("real");
    let real_home = real.join("home");
    std::fs::create_dir_all(real_home.join("proj")).unwrap();
    let link_home = f.root().join("link-home");
    std::os::unix::fs::symlink(&real_home, &link_home).unwrap();
    let marker = real_home.join("proj/ran");
    let script = format!("touch '{}'", marker.display());

    let mut c = f.sh(&["--no-network"], &script);
    c.env("HOME", &link_home).current_dir(&real);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{o:?}");
    assert!(
        errors[0].contains(&format!("refusing to launch from {}", real.display())),
        "{o:?}"
    );
    assert!(!marker.exists(), "the command ran");

    // From the project below the real home it runs.
    let mut c = f.sh(&["--no-network"], &script);
    c.env("HOME", &link_home)
        .current_dir(real_home.join("proj"));
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(marker.exists());
}

/// Issue 9, item 11: the shared temporary and runtime directories are refused as the launch
/// directory (their whole content, sockets included, would be writable); a project directory
/// inside one is fine.
#[test]
fn shared_temporary_directories_are_refused() {
    let f = Fixture::new();
    let marker = f.proj.join("ran");
    let uid = nix::unistd::getuid().as_raw();
    let runtime = PathBuf::from(format!("/run/user/{uid}"));
    let mut dirs = vec![PathBuf::from("/tmp"), "/var/tmp".into(), "/dev/shm".into()];
    if runtime.is_dir() {
        dirs.push(runtime);
    }
    for d in &dirs {
        let o = launch_from(&f, d, &marker);
        assert_eq!(o.code, 125, "{}: {o:?}", d.display());
        let errors = error_lines(&o.stderr);
        assert_eq!(
            errors,
            [format!(
                "agent-sandbox: error: refusing to launch from {}: it is a shared temporary or runtime directory, and all of it (other programs' files and live sockets, e.g. ssh-agent's) would be exposed read-write. Fix: mkdir a project directory inside it and cd there",
                d.display()
            )],
            "{o:?}"
        );
        assert!(!marker.exists());
    }
    // The fixture's project itself lives below /tmp.
    assert_eq!(launch_from(&f, &f.proj, &marker).code, 0);
    assert!(marker.exists());
}

/// Issue 9, item 11: `--ro /proc` showed every host process; `/`, `/run`, `/sys`, `/dev` are
/// refused as declared paths, and `/proc` as the launch directory.
#[test]
fn pseudo_filesystems_cannot_be_declared_or_launched_from() {
    let f = Fixture::new();
    for (flag, p) in [
        ("--ro", "/proc"),
        ("--ro", "/proc/1"),
        ("--ro", "/"),
        ("--rw", "/run"),
        ("--ro", "/sys"),
        ("--rw", "/dev"),
        ("--ro-dir", "/dev/shm"),
    ] {
        let o = run(f.sh(&["--no-network", flag, p], "echo ran"));
        assert_eq!(o.code, 125, "{flag} {p}: {o:?}");
        let why = if p == "/" {
            " cannot be exposed: it is the whole machine"
        } else {
            ") cannot be exposed: /run and everything in /proc, /sys and /dev are refused"
        };
        assert!(
            o.stderr.contains(why) && o.stderr.contains(p),
            "{flag} {p}: {o:?}"
        );
        assert_eq!(o.stdout, "");
    }
    let o = launch_from(&f, Path::new("/proc/self"), &f.proj.join("ran"));
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains("which holds kernel or runtime state"),
        "{o:?}"
    );
}

/// Issue 9, item 11: a system directory needs a `y` on the terminal.
#[test]
fn system_directories_need_confirmation() {
    let f = Fixture::new();
    let mut c = f.sh(&["--no-network"], "echo ran");
    c.current_dir("/srv");
    without_tty(&mut c);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert_eq!(
        error_lines(&o.stderr),
        [
            "agent-sandbox: error: refusing to launch from the system directory /srv without confirmation (it would be exposed read-write). Fix: cd into a project directory, or run from a terminal and answer y"
        ],
        "{o:?}"
    );
    let mut c = f.sh(&["--no-network"], "echo ran");
    c.current_dir("/srv");
    let Some((o, tty)) = answer_on_tty(c, b"y\n") else {
        eprintln!("SKIPPED system_directories_need_confirmation (y): no pty");
        return;
    };
    assert_eq!(o.code, 0, "{o:?}\n{tty}");
    assert_eq!(o.stdout, "ran\n");
    assert!(
        tty.contains("you are launching from the system directory /srv"),
        "{tty}"
    );
}

/// Regression (issue 9, item 12): the agent planted `proj/docs -> ~/.gnupg`; the user `cd`s
/// into it and the link's target silently became the read-write launch directory.
#[test]
fn a_launch_directory_reached_through_an_outward_symlink_is_confirmed() {
    let f = Fixture::new();
    let secret = f.home.join(".gnupg");
    std::fs::create_dir_all(&secret).unwrap();
    let link = f.proj.join("docs");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let marker = secret.join("ran");
    let through_link = |c: &mut Command| {
        c.current_dir(&link).env("PWD", &link);
    };
    let mut c = f.sh(&["--no-network"], "touch ran");
    through_link(&mut c);
    without_tty(&mut c);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert_eq!(
        error_lines(&o.stderr),
        [format!(
            "agent-sandbox: error: refusing to launch through the symlink {} -> {} without confirmation (it leads out of its directory, and {} would be exposed read-write). Fix: if you mean it, cd to the real directory ({}) and launch again; if you did not create the link, remove it",
            link.display(),
            secret.display(),
            secret.display(),
            secret.display()
        )],
        "{o:?}"
    );
    assert!(!marker.exists(), "the command ran in the link's target");
    // The answer is asked on the terminal, and y goes ahead.
    let mut c = f.sh(&["--no-network"], "touch ran");
    through_link(&mut c);
    if let Some((o, tty)) = answer_on_tty(c, b"y\n") {
        assert_eq!(o.code, 0, "{o:?}\n{tty}");
        assert!(
            tty.contains("If you did not create that link, an agent may have."),
            "{tty}"
        );
        assert!(marker.exists());
        std::fs::remove_file(&marker).unwrap();
    } else {
        eprintln!("SKIPPED the y half: no pty");
    }
    // The real path, or a link that stays inside its directory, is not asked about.
    let mut c = f.sh(&["--no-network"], "touch ran");
    c.current_dir(&secret).env("PWD", &secret);
    without_tty(&mut c);
    assert_eq!(run(c).code, 0);
    std::fs::create_dir(f.proj.join("src")).unwrap();
    std::os::unix::fs::symlink("src", f.proj.join("source")).unwrap();
    let mut c = f.sh(&["--no-network"], "true");
    c.current_dir(f.proj.join("source"))
        .env("PWD", f.proj.join("source"));
    without_tty(&mut c);
    assert_eq!(run(c).code, 0);
}
