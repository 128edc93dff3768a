//! Binding by descriptor: the launcher opens every source in `Plan::held` (declared paths, the
//! launch directory, the git layout) and bwrap binds the open objects (`--bind-fd`).
//!
//! Threat: the planner checks a path, bwrap mounts it a moment later. An agent in *another*
//! session that can write a parent of a declared path could swap that parent for a symlink to
//! `~/.ssh` in between, and a bind by path would follow it. Here each source is opened from `/`
//! one component at a time with `O_PATH|O_NOFOLLOW`, every component must be a real directory,
//! and the object reached must be the one the planner saw (device and inode). bubblewrap 0.8
//! then mounts the path the descriptor currently has (it cannot mount the descriptor itself
//! across user namespaces) and compares the mounted object with the descriptor, dying with
//! "Race condition binding dirfd" if they differ. So a swap before our open is refused here, a
//! swap after it is refused by bwrap, and nothing else is ever mounted.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;

use crate::linux::bwrap::LinuxRun;
use crate::plan::{Held, Mount, Plan};

/// Descriptors kept free for everything else the launcher opens (pipes, sockets, the proxy).
const RESERVE_FDS: u64 = 256;

#[derive(Debug, thiserror::Error)]
pub enum PathFdError {
    #[error(
        "{} changed after the sandbox checked it: {} is now a symlink (expected a real directory or file; \
         something, such as an agent in another session, swapped it in). Refusing to start. Fix: \
         look at what replaced it, restore it, and launch again",
        .path.display(),
        .at.display()
    )]
    Symlink { path: PathBuf, at: PathBuf },
    #[error(
        "{} changed after the sandbox checked it: {} is now {found} (expected {expected}). Refusing to start. \
         Fix: restore it and launch again",
        .path.display(),
        .at.display()
    )]
    WrongKind {
        path: PathBuf,
        at: PathBuf,
        found: &'static str,
        expected: &'static str,
    },
    #[error(
        "{} was replaced after the sandbox checked it (device/inode {}:{} then, {}:{} now). Refusing to start. \
         Fix: launch again once nothing is moving it",
        .path.display(), .then.0, .then.1, .now.0, .now.1
    )]
    Replaced {
        path: PathBuf,
        then: (u64, u64),
        now: (u64, u64),
    },
    #[error("cannot open {} (at {}) to bind it: {errno}. Fix: make it readable by the user who starts the sandbox", .path.display(), .at.display())]
    Open {
        path: PathBuf,
        at: PathBuf,
        errno: Errno,
    },
    #[error(
        "the sandbox binds {needed} paths by descriptor, but only {limit} descriptors are allowed (ulimit -n, hard limit). \
         Fix: raise the limit (ulimit -Hn) or declare fewer paths"
    )]
    TooMany { needed: u64, limit: u64 },
}

pub type Result<T> = std::result::Result<T, PathFdError>;

/// Opens every held source of `plan` and rewrites its binds in `run` to `Mount::BindFd`. Returns the descriptors,
/// which must stay open until bwrap has started and be passed to it (`supervise`'s `inherit`).
///
/// `missing_ok`: a source that does not exist stays bound by path (`--dry-run`, before the git
/// placeholders are created); a launch passes `false`.
pub fn bind_by_fd(plan: &Plan, run: &mut LinuxRun, missing_ok: bool) -> Result<Vec<OwnedFd>> {
    // One descriptor per bind: bwrap closes each after using it.
    let binds: Vec<usize> = (0..run.mounts.len())
        .filter(|&i| held_source(&run.mounts[i], &plan.held).is_some())
        .collect();
    ensure_fd_room(binds.len() as u64)?;
    let mut fds = Vec::with_capacity(binds.len());
    for i in binds {
        let (src, held) = held_source(&run.mounts[i], &plan.held).expect("filtered above");
        let fd = match open_held(&src, held) {
            Ok(fd) => fd,
            Err(PathFdError::Open {
                errno: Errno::ENOENT,
                ..
            }) if missing_ok => continue,
            Err(e) => return Err(e),
        };
        rewrite(&mut run.mounts[i], fd.as_raw_fd());
        fds.push(fd);
    }
    Ok(fds)
}

/// The source of a by-path bind that must be held, and what the planner saw there.
fn held_source(m: &Mount, held: &BTreeMap<PathBuf, Held>) -> Option<(PathBuf, Held)> {
    match m {
        Mount::Bind { src, .. } | Mount::RoBind { src, .. } => {
            held.get(src).map(|h| (src.clone(), *h))
        }
        _ => None,
    }
}

/// `Bind`/`RoBind` → `BindFd` on descriptor `fd`. Pure.
pub fn rewrite(m: &mut Mount, fd: RawFd) {
    let (src, dest, rw) = match m {
        Mount::Bind { src, dest } => (src.clone(), dest.clone(), true),
        Mount::RoBind { src, dest } => (src.clone(), dest.clone(), false),
        _ => return,
    };
    *m = Mount::BindFd { fd, src, dest, rw };
}

/// Opens `path` (absolute, canonical) from `/`, one component at a time, never following a
/// symlink, and checks the object against what the planner saw.
pub fn open_held(path: &Path, held: Held) -> Result<OwnedFd> {
    let fd = open_no_symlinks(path, held.dir)?;
    if let Some(then) = held.id {
        let now = file_id(&fd).map_err(|errno| PathFdError::Open {
            path: path.into(),
            at: path.into(),
            errno,
        })?;
        if now != then {
            // Fail closed: a different object at the checked path was not checked.
            return Err(PathFdError::Replaced {
                path: path.into(),
                then,
                now,
            });
        }
    }
    Ok(fd)
}

fn open_no_symlinks(path: &Path, want_dir: bool) -> Result<OwnedFd> {
    let mut cur = open_at(None, Path::new("/"), path, Path::new("/"))?;
    let mut at = PathBuf::from("/");
    let mut comps = path.components().peekable();
    while let Some(c) = comps.next() {
        let name = match c {
            Component::RootDir | Component::CurDir => continue,
            Component::Normal(n) => n,
            // Fail closed: the planner hands over canonical paths; `..` means something else did.
            Component::ParentDir | Component::Prefix(_) => {
                return Err(PathFdError::WrongKind {
                    path: path.into(),
                    at,
                    found: "a path with `..`",
                    expected: "a canonical path",
                });
            }
        };
        at.push(name);
        let next = open_at(Some(&cur), Path::new(name), path, &at)?;
        let last = comps.peek().is_none();
        let mode = file_mode(&next).map_err(|errno| PathFdError::Open {
            path: path.into(),
            at: at.clone(),
            errno,
        })?;
        let kind = mode & libc::S_IFMT;
        if kind == libc::S_IFLNK {
            // Fail closed: the planner resolved every link, so this one appeared since.
            return Err(PathFdError::Symlink {
                path: path.into(),
                at,
            });
        }
        let file_wanted = last && !want_dir;
        let ok = if file_wanted {
            kind != libc::S_IFDIR
        } else {
            kind == libc::S_IFDIR
        };
        if !ok {
            return Err(PathFdError::WrongKind {
                path: path.into(),
                at,
                found: kind_name(kind),
                expected: if file_wanted { "a file" } else { "a directory" },
            });
        }
        cur = next;
    }
    Ok(cur)
}

fn open_at(dir: Option<&OwnedFd>, name: &Path, path: &Path, at: &Path) -> Result<OwnedFd> {
    let err = |errno| PathFdError::Open {
        path: path.into(),
        at: at.into(),
        errno,
    };
    let c = CString::new(name.as_os_str().as_bytes()).map_err(|_| err(Errno::EINVAL))?;
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let raw = Errno::result(unsafe { libc::openat(dirfd, c.as_ptr(), flags) }).map_err(err)?;
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // Launched with stdin/out/err closed, the open could land on 0–2: bwrap's stdio then.
    if raw > 2 {
        return Ok(fd);
    }
    let moved = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 3) };
    Errno::result(moved)
        .map(|m| unsafe { OwnedFd::from_raw_fd(m) })
        .map_err(err)
}

fn fstat(fd: &OwnedFd) -> std::result::Result<libc::stat, Errno> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    Errno::result(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    Ok(unsafe { st.assume_init() })
}

fn file_mode(fd: &OwnedFd) -> std::result::Result<u32, Errno> {
    fstat(fd).map(|st| st.st_mode)
}

fn file_id(fd: &OwnedFd) -> std::result::Result<(u64, u64), Errno> {
    fstat(fd).map(|st| (st.st_dev, st.st_ino))
}

fn kind_name(kind: u32) -> &'static str {
    match kind {
        libc::S_IFDIR => "a directory",
        libc::S_IFREG => "a file",
        libc::S_IFLNK => "a symlink",
        _ => "a special file",
    }
}

/// Makes sure `needed` more descriptors fit under the soft limit, raising it up to the hard
/// one if needed (bwrap and the sandbox inherit the raised soft limit).
fn ensure_fd_room(needed: u64) -> Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(()); // Nothing known: the opens themselves fail with EMFILE, clearly.
    }
    let want = needed + RESERVE_FDS;
    if want <= lim.rlim_cur {
        return Ok(());
    }
    if want > lim.rlim_max {
        // Fail closed: binding some paths by path again would reopen the race.
        return Err(PathFdError::TooMany {
            needed,
            limit: lim.rlim_max.saturating_sub(RESERVE_FDS),
        });
    }
    lim.rlim_cur = want;
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn held_of(p: &Path) -> Held {
        let m = std::fs::metadata(p).unwrap();
        Held {
            dir: m.is_dir(),
            id: Some((m.dev(), m.ino())),
        }
    }

    #[test]
    fn opens_real_paths_and_refuses_symlinks_anywhere() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let real = base.join("real");
        std::fs::create_dir_all(real.join("sub")).unwrap();
        std::fs::write(real.join("sub/f"), "x").unwrap();
        std::os::unix::fs::symlink(&real, base.join("link")).unwrap();
        assert!(open_held(&real.join("sub"), held_of(&real.join("sub"))).is_ok());
        assert!(open_held(&real.join("sub/f"), held_of(&real.join("sub/f"))).is_ok());
        let e = open_held(&base.join("link/sub"), held_of(&real.join("sub"))).unwrap_err();
        assert!(matches!(&e, PathFdError::Symlink { at, .. } if *at == base.join("link")));
        let e = open_held(&base.join("link"), held_of(&real)).unwrap_err();
        assert!(matches!(e, PathFdError::Symlink { .. }));
        // A file where a directory was checked, and the reverse.
        let e = open_held(&real.join("sub/f"), held_of(&real.join("sub"))).unwrap_err();
        assert!(matches!(e, PathFdError::WrongKind { .. }), "{e}");
        let e = open_held(&real.join("sub"), held_of(&real.join("sub/f"))).unwrap_err();
        assert!(matches!(e, PathFdError::WrongKind { .. }), "{e}");
    }

    #[test]
    fn a_replaced_object_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let d = base.join("d");
        std::fs::create_dir(&d).unwrap();
        let then = held_of(&d);
        std::fs::rename(&d, base.join("old")).unwrap();
        std::fs::create_dir(&d).unwrap();
        let e = open_held(&d, then).unwrap_err();
        assert!(matches!(e, PathFdError::Replaced { .. }), "{e}");
        // Placeholders carry no identity: only the no-symlink walk applies.
        assert!(
            open_held(
                &d,
                Held {
                    dir: true,
                    id: None
                }
            )
            .is_ok()
        );
    }

    #[test]
    fn rewrite_keeps_mode_and_paths() {
        let mut m = Mount::RoBind {
            src: "/h/p/.git/hooks".into(),
            dest: "/h/p/.git/hooks".into(),
        };
        rewrite(&mut m, 7);
        assert_eq!(
            m,
            Mount::BindFd {
                fd: 7,
                src: "/h/p/.git/hooks".into(),
                dest: "/h/p/.git/hooks".into(),
                rw: false
            }
        );
        let mut t = Mount::Tmpfs {
            dest: "/tmp".into(),
        };
        rewrite(&mut t, 7);
        assert_eq!(
            t,
            Mount::Tmpfs {
                dest: "/tmp".into()
            }
        );
    }
}
