//! Fixtures: every test gets its own fake `$HOME`, project dir and state dir in a temp dir.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn bin() -> PathBuf {
    std::env::var_os("AGENT_SANDBOX_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_agent-sandbox")))
}

pub fn is_root() -> bool {
    nix::unistd::getuid().is_root()
}

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub proj: PathBuf,
    pub state: PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("as-test.")
            .tempdir()
            .unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        let proj = home.join("proj");
        let state = root.join("state");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        Fixture {
            tmp,
            home,
            proj,
            state,
        }
    }

    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.tmp.path()).unwrap()
    }

    /// `agent-sandbox` with a clean environment pointing at this fixture, cwd = the project.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(bin());
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", &self.state)
            .env("TERM", "xterm-test")
            .current_dir(&self.proj);
        c
    }

    /// `agent-sandbox run [extra…] -- sh -c SCRIPT`.
    pub fn sh(&self, extra: &[&str], script: &str) -> Command {
        let mut c = self.cmd();
        c.arg("run").args(extra).args(["--", "sh", "-c", script]);
        c
    }

    pub fn write(&self, rel: impl AsRef<Path>, contents: &str) -> PathBuf {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, contents).unwrap();
        p
    }
}

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(mut c: Command) -> Out {
    let o = c.output().expect("spawn agent-sandbox");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Run and assert success; returns stdout.
pub fn ok(c: Command) -> String {
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    o.stdout
}

/// A token no other process on the machine has in its argv, usable as a `sleep` duration
/// (`sleep 1000.<token>`) so the test can find the sandboxed process from the host.
pub fn unique_marker() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("1000.{}{n}{nanos:09}", std::process::id())
}

/// Host PIDs and argv (space-joined) of the live processes whose argv contains `marker`
/// (zombies have an empty argv, so they are not listed).
pub fn processes_with(marker: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let argv = String::from_utf8_lossy(&raw).replace('\0', " ");
        if argv.contains(marker) {
            found.push((pid, argv.trim_end().to_string()));
        }
    }
    found
}

/// Polls `cond` every 20 ms for up to `within`; returns whether it came true.
pub fn eventually(within: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Leaves `files` open in the spawned launcher at the given descriptor numbers, as `exec
/// 7<~/proj` in the calling shell would (open across exec, not close-on-exec). The files
/// must outlive the spawn.
pub fn leak_fds(c: &mut Command, files: &[(&std::fs::File, i32)]) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let pairs: Vec<(i32, i32)> = files.iter().map(|(f, n)| (f.as_raw_fd(), *n)).collect();
    // SAFETY: dup2 is async-signal-safe; `pairs` was allocated before the fork.
    unsafe {
        c.pre_exec(move || {
            for &(fd, want) in &pairs {
                if libc::dup2(fd, want) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// `agent-sandbox run [extra…] -- python3 -c CODE` (python3 is the host's, exposed in
/// host-system mode): raw syscalls through ctypes.
pub fn py(f: &Fixture, extra: &[&str], code: &str) -> Out {
    let mut c = f.cmd();
    c.arg("run").args(extra).args(["--", "python3", "-c", code]);
    run(c)
}
