//! The per-session private state directory: `$XDG_STATE_HOME/agent-sandbox/<time>-<pid>-<name>/`
//! (mode 0700), holding `launch.log`, the exact argv and the files bound into the sandbox.
//! Nothing the helper writes lives at a predictable path in the shared `/tmp`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::utc::Utc;

/// How many session directories are kept (newest first).
pub const KEEP_SESSIONS: usize = 25;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "cannot create the session directory {path}: {source}. Fix: make sure {parent} is writable, or set XDG_STATE_HOME to a writable directory"
    )]
    Create {
        path: PathBuf,
        parent: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, SessionError>;

/// The base directory holding all session directories.
pub fn base_dir(xdg_state_home: Option<&str>, home: &Path) -> PathBuf {
    match xdg_state_home {
        Some(x) if x.starts_with('/') => PathBuf::from(x).join("agent-sandbox"),
        _ => home.join(".local/state/agent-sandbox"),
    }
}

/// [`base_dir`] with this process's `XDG_STATE_HOME`: where the launcher puts its sessions and
/// `agent-sandbox log` finds them.
pub fn base_dir_from_env(home: &Path) -> PathBuf {
    base_dir(std::env::var("XDG_STATE_HOME").ok().as_deref(), home)
}

/// `20261129T101500Z-0004242-claude`: sortable by time, unique by pid.
pub fn session_name(now: SystemTime, pid: u32, out_name: &str) -> String {
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t = Utc::from_unix(secs);
    format!(
        // Zero-padded pid: names of one second still sort in a stable, numeric order.
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z-{pid:07}-{out_name}",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Create the base directory (mode 0700) if needed and return its canonical path.
pub fn create_base(base: &Path) -> Result<PathBuf> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(base)
        .and_then(|_| fs::canonicalize(base))
        .map_err(|source| SessionError::Create {
            path: base.to_path_buf(),
            parent: base.parent().unwrap_or(Path::new("/")).to_path_buf(),
            source,
        })
}

/// `path` with its longest existing prefix canonicalised (the rest appended as given).
pub fn canonical_lenient(path: &Path) -> PathBuf {
    for ancestor in path.ancestors() {
        if let Ok(real) = fs::canonicalize(ancestor) {
            let rest = path.strip_prefix(ancestor).unwrap_or(Path::new(""));
            return real.join(rest);
        }
    }
    path.to_path_buf()
}

/// Create `base/name` with mode 0700 (parents 0700 too).
pub fn create(base: &Path, name: &str) -> Result<PathBuf> {
    let dir = base.join(name);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|source| SessionError::Create {
            path: dir.clone(),
            parent: base.to_path_buf(),
            source,
        })?;
    Ok(dir)
}

/// Write a file in the session directory (mode 0600).
pub fn write_file(dir: &Path, name: &str, contents: &[u8]) -> Result<PathBuf> {
    let path = dir.join(name);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(contents).map(|_| f))
        .map_err(|source| SessionError::Write {
            path: path.clone(),
            source,
        })?;
    let _ = f.flush();
    Ok(path)
}

/// Makes sure `dir` holds exactly `files` (name, contents): kept as it is when every file is
/// there, otherwise built beside it and renamed into place, so a concurrent launch sees either
/// no directory or a complete one. `dir`'s name is derived from the contents
/// ([`crate::plan::share_identity_files`]).
pub fn ensure_identity(dir: &Path, files: &[(String, String)]) -> Result<()> {
    // Contents compared too (a few bytes each): a file truncated by a crash or edited by
    // hand is rebuilt, not reused by every later session.
    let complete = |d: &Path| {
        files
            .iter()
            .all(|(f, c)| fs::read(d.join(f)).is_ok_and(|got| got == c.as_bytes()))
    };
    if complete(dir) {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    let tmp_name = format!("{name}.tmp-{}", std::process::id());
    let _ = fs::remove_dir_all(parent.join(&tmp_name));
    let tmp = create(parent, &tmp_name)?;
    for (f, contents) in files {
        write_file(&tmp, f, contents.as_bytes())?;
    }
    // An incomplete leftover (a file deleted by hand) is replaced.
    if dir.exists() && !complete(dir) {
        let _ = fs::remove_dir_all(dir);
    }
    match fs::rename(&tmp, dir) {
        Ok(()) => Ok(()),
        // Another launch put an identical one in place first.
        Err(_) if complete(dir) => {
            let _ = fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(source) => {
            let _ = fs::remove_dir_all(&tmp);
            Err(SessionError::Write {
                path: dir.to_path_buf(),
                source,
            })
        }
    }
}

/// How a session ended, as the end of its `launch.log` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// The launcher's exit status: the command's own (128+N after signal N), or 125.
    pub status: i32,
    /// The sandbox never ran the command (bubblewrap gave up setting it up).
    pub setup_failed: bool,
    /// Seconds since the Unix epoch.
    pub ended: u64,
    pub duration: std::time::Duration,
    /// Filtered mode: the proxy's exit summary (empty when nothing was blocked). `None`
    /// without a proxy.
    pub denials: Option<String>,
}

/// The first line of the block [`Ending::render`] appends; [`ended`] looks for it.
const EXIT_LINE: &str = "exit status: ";

impl Ending {
    /// The lines appended to `launch.log` when the session ends.
    pub fn render(&self) -> String {
        let mut s = format!("{EXIT_LINE}{}", self.status);
        if self.setup_failed {
            s.push_str(" (the sandbox could not be set up)");
        } else if self.status > 128 && self.status < 128 + 65 {
            s.push_str(&format!(" (signal {})", self.status - 128));
        }
        s.push('\n');
        s.push_str(&format!(
            "ended: {}\nduration: {:.1} s\n",
            crate::proxy::log::format_time(self.ended),
            self.duration.as_secs_f64()
        ));
        match self.denials.as_deref() {
            Some("") => s.push_str("network proxy: nothing was blocked\n"),
            Some(summary) => {
                s.push_str(summary);
                if !summary.ends_with('\n') {
                    s.push('\n');
                }
            }
            None => {}
        }
        s
    }

    /// Append the end to the session's `launch.log` (created if the start never wrote it).
    pub fn append_to(&self, dir: &Path) -> Result<()> {
        let path = dir.join(LAUNCH_LOG);
        fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(self.render().as_bytes()))
            .map_err(|source| SessionError::Write { path, source })
    }
}

/// The session's plan (written at start) and its end (appended at exit).
pub const LAUNCH_LOG: &str = "launch.log";
/// Filtered mode: the proxy's log of denials and first contacts.
pub const PROXY_LOG: &str = "proxy.log";

/// What the end of a `launch.log` says, when the session has ended: its `exit status`,
/// `ended` and `duration` values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub status: String,
    pub ended: String,
    pub duration: String,
}

/// The last end block of `launch.log`'s text (the plan above it starts no line with
/// `exit status: `), or `None` while the session runs.
pub fn ended(log: &str) -> Option<Ended> {
    let lines: Vec<&str> = log.lines().collect();
    lines.windows(3).rev().find_map(|w| {
        Some(Ended {
            status: w[0].strip_prefix(EXIT_LINE)?.to_string(),
            ended: w[1].strip_prefix("ended: ")?.to_string(),
            duration: w[2].strip_prefix("duration: ")?.to_string(),
        })
    })
}

/// The `deny` lines of a `proxy.log` (see `proxy::log`: `TIME deny CODE METHOD HOST:PORT
/// PATH`).
pub fn denial_lines(proxy_log: &str) -> impl Iterator<Item = &str> {
    proxy_log
        .lines()
        .filter(|l| l.split(' ').nth(1) == Some("deny"))
}

/// A session directory's name taken apart: [`session_name`]'s start time (as
/// `2026-11-29T10:15:00Z`), the launcher's pid and the sandbox's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameParts {
    pub started: String,
    pub pid: u32,
    pub out_name: String,
}

pub fn parse_name(name: &str) -> Option<NameParts> {
    let (time, rest) = name.split_once('-')?;
    let (pid, out_name) = rest.split_once('-')?;
    let t = time.as_bytes();
    let digits = |r: std::ops::Range<usize>| t[r].iter().all(u8::is_ascii_digit);
    if t.len() != 16 || !digits(0..8) || t[8] != b'T' || !digits(9..15) || t[15] != b'Z' {
        return None;
    }
    let started = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &time[0..4],
        &time[4..6],
        &time[6..8],
        &time[9..11],
        &time[11..13],
        &time[13..15]
    );
    Some(NameParts {
        started,
        pid: pid.parse().ok()?,
        out_name: out_name.to_string(),
    })
}

/// The session directories under `base`, oldest first (names sort by start time).
pub fn list(base: &Path) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = fs::read_dir(base)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| parse_name(n).is_some())
        .collect();
    names.sort();
    Ok(names)
}

/// Keep the newest `keep` session directories under `base`, never deleting `current` (the
/// running session's, even if the clock went back); best effort.
pub fn rotate(base: &Path, keep: usize, current: &str) {
    let Ok(rd) = fs::read_dir(base) else { return };
    let mut names: Vec<_> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .map(|e| e.file_name())
        .filter(|n| {
            n.to_string_lossy()
                .as_bytes()
                .first()
                .is_some_and(u8::is_ascii_digit)
        })
        .filter(|n| *n != current)
        .collect();
    names.sort();
    // The current session counts towards `keep`.
    let keep = keep.saturating_sub(1);
    if names.len() > keep {
        for n in &names[..names.len() - keep] {
            let _ = fs::remove_dir_all(base.join(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    #[test]
    fn names_sort_by_time() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_947_300); // 2026-11-29T10:15:00Z
        assert_eq!(
            session_name(t, 42, "claude"),
            "20261129T101500Z-0000042-claude"
        );
        assert_eq!(
            session_name(UNIX_EPOCH, 1, "x"),
            "19700101T000000Z-0000001-x"
        );
        assert_eq!(
            session_name(UNIX_EPOCH + Duration::from_secs(951_782_400), 1, "x"),
            "20000229T000000Z-0000001-x"
        );
    }

    #[test]
    fn the_end_block_renders_and_is_found_again() {
        let e = Ending {
            status: 3,
            setup_failed: false,
            ended: 1_795_947_305,
            duration: Duration::from_millis(5_240),
            denials: Some(String::new()),
        };
        assert_eq!(
            e.render(),
            "exit status: 3\nended: 2026-11-29T10:15:05Z\nduration: 5.2 s\nnetwork proxy: nothing was blocked\n"
        );
        let killed = Ending {
            status: 130,
            denials: None,
            ..e.clone()
        };
        assert_eq!(
            killed.render(),
            "exit status: 130 (signal 2)\nended: 2026-11-29T10:15:05Z\nduration: 5.2 s\n"
        );
        let failed = Ending {
            status: 125,
            setup_failed: true,
            denials: Some("agent-sandbox: the network proxy blocked 1 request:\n  CONNECT x:443 (blocked-by-allowlist)".into()),
            ..e.clone()
        };
        assert_eq!(
            failed.render(),
            "exit status: 125 (the sandbox could not be set up)\nended: 2026-11-29T10:15:05Z\nduration: 5.2 s\nagent-sandbox: the network proxy blocked 1 request:\n  CONNECT x:443 (blocked-by-allowlist)\n"
        );
        let plan = "sandbox: sh\ncommand: 'sh' '-c' 'exit 3'\n";
        assert_eq!(ended(plan), None);
        assert_eq!(
            ended(&format!("{plan}{}", failed.render())),
            Some(Ended {
                status: "125 (the sandbox could not be set up)".into(),
                ended: "2026-11-29T10:15:05Z".into(),
                duration: "5.2 s".into(),
            })
        );
        // Appended after the plan; written alone when the start never wrote the plan.
        let t = tempfile::tempdir().unwrap();
        e.append_to(t.path()).unwrap();
        assert_eq!(
            fs::read_to_string(t.path().join(LAUNCH_LOG)).unwrap(),
            e.render()
        );
        let mode = fs::metadata(t.path().join(LAUNCH_LOG))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        write_file(t.path(), LAUNCH_LOG, plan.as_bytes()).unwrap();
        killed.append_to(t.path()).unwrap();
        let log = fs::read_to_string(t.path().join(LAUNCH_LOG)).unwrap();
        assert_eq!(log, format!("{plan}{}", killed.render()));
        assert_eq!(ended(&log).unwrap().status, "130 (signal 2)");
    }

    #[test]
    fn names_and_denial_lines_are_taken_apart() {
        assert_eq!(
            parse_name("20261129T101500Z-0000042-claude-code"),
            Some(NameParts {
                started: "2026-11-29T10:15:00Z".into(),
                pid: 42,
                out_name: "claude-code".into(),
            })
        );
        for bad in [
            ".identity-0123",
            "20261129T1015Z-1-x",
            "2026112xT101500Z-1-x",
            "20261129T101500Z-x",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
        let log = "2026-11-29T10:15:01Z allow first-contact CONNECT a.test:443 -\n\
                   2026-11-29T10:15:02Z deny blocked-by-allowlist CONNECT deny.test:443 -\n\
                   2026-11-29T10:15:03Z deny method-not-allowed POST a.test:443 /deny\n";
        assert_eq!(
            denial_lines(log).collect::<Vec<_>>(),
            [
                "2026-11-29T10:15:02Z deny blocked-by-allowlist CONNECT deny.test:443 -",
                "2026-11-29T10:15:03Z deny method-not-allowed POST a.test:443 /deny"
            ]
        );
    }

    #[test]
    fn base_dir_prefers_absolute_xdg() {
        let h = Path::new("/home/u");
        assert_eq!(base_dir(Some("/s"), h), PathBuf::from("/s/agent-sandbox"));
        assert_eq!(
            base_dir(Some("rel"), h),
            PathBuf::from("/home/u/.local/state/agent-sandbox")
        );
        assert_eq!(
            base_dir(None, h),
            PathBuf::from("/home/u/.local/state/agent-sandbox")
        );
    }

    #[test]
    fn identity_files_are_written_once_and_repaired_when_incomplete() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join(".identity-0123");
        let files = vec![
            (
                "passwd".to_string(),
                "sandbox:x:1:1::/h:/bin/sh\n".to_string(),
            ),
            ("empty".to_string(), String::new()),
        ];
        ensure_identity(&dir, &files).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join("passwd")).unwrap(),
            "sandbox:x:1:1::/h:/bin/sh\n"
        );
        assert_eq!(fs::metadata(dir.join("empty")).unwrap().len(), 0);
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Complete: left alone (the inode stays the same).
        use std::os::unix::fs::MetadataExt;
        let ino = fs::metadata(dir.join("passwd")).unwrap().ino();
        ensure_identity(&dir, &files).unwrap();
        assert_eq!(fs::metadata(dir.join("passwd")).unwrap().ino(), ino);
        // A file gone, or changed: rebuilt.
        fs::remove_file(dir.join("empty")).unwrap();
        ensure_identity(&dir, &files).unwrap();
        assert!(dir.join("empty").is_file());
        fs::write(dir.join("passwd"), "root:x:0:0::/:/bin/sh\n").unwrap();
        ensure_identity(&dir, &files).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join("passwd")).unwrap(),
            "sandbox:x:1:1::/h:/bin/sh\n"
        );
        // No temporary directory is left behind.
        let names: Vec<_> = fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(".identity-0123")]);
    }

    #[test]
    fn create_is_private_and_rotation_keeps_newest() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("state/agent-sandbox");
        for i in 0..30 {
            create(&base, &format!("2026112{}T000000Z-{i:02}-x", i / 10)).unwrap();
        }
        let d = create(&base, "20261130T000000Z-1-x").unwrap();
        let mode = fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let f = write_file(&d, "launch.log", b"hi").unwrap();
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // The current session survives even when its name sorts first (clock set back).
        let current = create(&base, "19990101T000000Z-2-x").unwrap();
        rotate(&base, KEEP_SESSIONS, "19990101T000000Z-2-x");
        assert!(current.exists());
        fs::remove_dir(&current).unwrap();
        let mut left: Vec<String> = fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left.len(), 24);
        assert_eq!(left[0], "20261120T000000Z-07-x");
        assert_eq!(left[23], "20261130T000000Z-1-x");
    }
}
