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
