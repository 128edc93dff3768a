//! The exit sweep: after every session, nothing the agent left in the writable paths may make
//! host programs run code or follow a redirection the agent wrote.
//!
//! Git dirs are found as host git finds them, under every path the sandbox could write (the
//! launch directory, the git directories, declared read-write directories): directories with
//! a `HEAD` and `objects`/`refs`/`commondir` of any type (bare ones, `.git/modules/**`,
//! `.git/worktrees/*`, ones hidden anywhere, `objects/` included but for git's own fan-out
//! files), every `.git` entry (dir, gitfile, link; its git dir followed wherever it lies,
//! gitfiles read in git's order), and a linked worktree's common dir (HEAD or not). In each:
//! * `commondir` files where git never writes one (anywhere but `<common>/worktrees/<name>`,
//!   or there naming another directory than `<common>`), and `gitdir` files outside
//!   `<common>/worktrees/<name>`: always quarantined, whenever written.
//! * `config`/`config.worktree` written during the session, or in a git dir made during it
//!   (its markers, or its `.git` pointer, written then): entries that make git run a program
//!   or read config or hooks from elsewhere ([`crate::git::host_executes`]) are stripped (the
//!   file moved aside, rewritten without them). Files any config includes are checked when
//!   written during the session.
//! * Executable hooks written then (or in a git dir made then); a linked `hooks` dir written
//!   or retargeted then; rebase/cherry-pick todo lists with `exec` lines written then.
//! * `.git` pointers written during the session that name no git dir yet (a rename in a later
//!   session could give them one).
//! * Files with the setuid or setgid bit written during the session (the seccomp filter
//!   stops the calls that set it; this catches whatever it missed): the bits are cleared.
//!
//! What was read-only inside the sandbox (the plan's read-only binds: the launch repository's
//! own config and hooks, declared read-only paths) is never touched. "Written during the
//! session" is the inode's change time after the session's start: nothing inside can set it
//! back (`utimes` sets only atime and mtime), and renames and hard links update it too. A
//! directory the sweep cannot list is named in a warning, never skipped in silence.
//!
//! The launcher runs the sweep when the sandbox has exited; a sentinel process (started
//! before the sandbox, in a process group of its own) runs it if the launcher dies first
//! (SIGKILL); during the session the repository's git dirs are watched ([`Watch`]), and at
//! every start the repository's git dir is swept for stray pointers ([`at_start`]).

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a quarantined file is renamed to: `NAME.agent-sandbox-quarantine` (then `…-2`, …).
pub const SUFFIX: &str = ".agent-sandbox-quarantine";
/// The sweep's budget: directory entries looked at. A tree larger than this is reported as
/// not fully swept rather than delaying the exit without bound.
pub const MAX_ENTRIES: usize = 500_000;
/// Paths at least this long are reached through a descriptor of their directory.
const DEEP: usize = 2048;
/// Deep directories held open at most (each costs a descriptor until the sweep ends).
const MAX_HELD: usize = 4096;
/// The sweep file in the session directory, read by the sentinel.
pub const SPEC_FILE: &str = "sweep.json";

/// What to sweep; written to the session directory for the sentinel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepSpec {
    /// Canonical host paths the sandbox could write.
    pub roots: Vec<PathBuf>,
    /// Every bind inside the sandbox (destination, read-write?): a path whose deepest bind is
    /// read-only (git's protected files, declared read-only paths, host programs' paths) could
    /// not be written by the agent, so it is left as it is whatever its age (the launch
    /// repository's own config among them).
    #[serde(default)]
    pub binds: Vec<(PathBuf, bool)>,
    /// The session's start, as nanoseconds since the epoch: ctimes after it count as written
    /// during the session. It is the change time of [`SPEC_FILE`] itself, written just before
    /// the sandbox starts, so it comes from the clock the kernel stamps ctimes with (which
    /// lags `SystemTime::now` by up to a tick).
    #[serde(skip)]
    pub since_nanos: u128,
}

/// One thing the sweep found and what it did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    pub found: String,
    pub done: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}; {}", self.path.display(), self.found, self.done)
    }
}

/// The sweep's result.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// Set when the budget ran out or a directory could not be read: what was not swept.
    pub incomplete: Vec<String>,
}

impl Report {
    /// The lines printed to the user (`agent-sandbox: …`), empty when there is nothing to say.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for f in &self.findings {
            s.push_str(&format!("agent-sandbox: quarantine: {f}\n"));
        }
        if !self.findings.is_empty() {
            s.push_str("agent-sandbox: the agent wrote the files above; host programs would have run what they name. Check them before you restore anything.\n");
        }
        for i in &self.incomplete {
            s.push_str(&format!("agent-sandbox: warning: the exit sweep {i}\n"));
        }
        s
    }
}

/// Sweeps `spec.roots`; see the module docs.
pub fn sweep(spec: &SweepSpec) -> Report {
    let mut s = Sweeper {
        since: spec.since_nanos,
        binds: spec.binds.clone(),
        seen: 0,
        report: Report::default(),
        visited: std::collections::BTreeMap::new(),
        included: std::collections::BTreeSet::new(),
        held: Vec::new(),
    };
    for root in &spec.roots {
        s.walk(root);
    }
    // Directory order is the filesystem's; the report is in path order.
    s.report.findings.sort_by(|a, b| a.path.cmp(&b.path));
    s.report
}

struct Sweeper {
    since: u128,
    binds: Vec<(PathBuf, bool)>,
    seen: usize,
    report: Report,
    /// Git directories already checked, and whether as fresh (a `.git` file and the walk can
    /// both lead to one).
    visited: std::collections::BTreeMap<PathBuf, bool>,
    /// Included config files already followed (includes may loop).
    included: std::collections::BTreeSet<PathBuf>,
    /// Descriptors of deep directories (see [`Self::access`]): (descriptor, its
    /// `/proc/self/fd/N` path, the directory's path as shown).
    held: Vec<(std::os::fd::OwnedFd, PathBuf, PathBuf)>,
}

fn ctime_nanos(m: &fs::Metadata) -> u128 {
    (m.ctime().max(0) as u128) * 1_000_000_000 + m.ctime_nsec().max(0) as u128
}

/// A git directory as host git would take one, over-approximated (checking one too many is
/// harmless): an entry named `HEAD`, of any type (git accepts a symlink to `refs/…`), and one
/// named `objects`, `refs` or `commondir`, of any type (git follows links there too).
fn is_git_dir(dir: &Path) -> bool {
    let exists = |n: &str| fs::symlink_metadata(dir.join(n)).is_ok();
    exists("HEAD") && (exists("objects") || exists("refs") || exists("commondir"))
}

/// What a directory on the walk's stack is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    /// The `objects` dir of a git dir.
    Objects,
    /// A fan-out dir, `pack` or `info` inside one: only its subdirectories are walked.
    Layout,
}

/// git's own layout inside `objects/`: the two-hex-digit fan-out dirs, `pack`, `info`.
fn is_object_layout(name: &std::ffi::OsStr) -> bool {
    let n = name.as_encoded_bytes();
    n == b"pack" || n == b"info" || (n.len() == 2 && n.iter().all(u8::is_ascii_hexdigit))
}

/// The path a gitfile names, read as git reads it (`read_gitfile_gently`): the whole file (up
/// to 1 MiB), trailing `\n`/`\r` trimmed from its end, then the text up to a NUL, after
/// `gitdir: `. (Cutting at the NUL first would name another path than git does.)
fn read_gitfile(path: &Path) -> Option<PathBuf> {
    let mut raw = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(1 << 20)
        .read_to_end(&mut raw)
        .ok()?;
    while raw.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
        raw.pop();
    }
    let raw = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
    let target = raw.strip_prefix(b"gitdir: ")?;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(target)))
}

/// What a git dir's freshness is read from: an entry appearing in it, or being renamed into
/// place, changes the dir's or that entry's change time.
const GIT_DIR_MARKERS: [&str; 5] = [".", "HEAD", "objects", "refs", "commondir"];

impl Sweeper {
    fn written(&self, m: &fs::Metadata) -> bool {
        ctime_nanos(m) > self.since
    }

    fn walk(&mut self, root: &Path) {
        // (the path the syscalls use, the path as shown, what it is). The two differ below
        // `DEEP` bytes of path: a directory there is reached through a descriptor of its own
        // (`/proc/self/fd/N`), so no depth can push a name past PATH_MAX and out of sight.
        let mut stack = vec![(root.to_path_buf(), root.to_path_buf(), Kind::Plain)];
        while let Some((dir, shown, kind)) = stack.pop() {
            if self.seen >= MAX_ENTRIES {
                self.report.incomplete.push(format!(
                    "stopped after {MAX_ENTRIES} entries; not swept: {} and what follows it",
                    shown.display()
                ));
                return;
            }
            let Some(entries) = self.read_dir(&dir) else {
                continue;
            };
            let objects = kind == Kind::Objects;
            let git_dir = kind == Kind::Plain && is_git_dir(&dir);
            if git_dir {
                self.git_dir(&dir, false);
            }
            for entry in entries.flatten() {
                self.seen += 1;
                let name = entry.file_name();
                let path = dir.join(&name);
                // Links are not followed: what they lead to outside the roots is not ours. The
                // type comes with the directory entry; only regular files cost a stat (their
                // mode bits).
                let Ok(ft) = entry.file_type() else { continue };
                if ft.is_dir() {
                    // git's own object layout (fan-out dirs, packs) is large and holds only
                    // files: its files are not looked at, but any directory in it is walked
                    // (git never makes one there). One with a link count of 2 has none.
                    let next = if objects && is_object_layout(&name) {
                        if entry.metadata().is_ok_and(|m| m.nlink() == 2) {
                            continue;
                        }
                        Kind::Layout
                    } else if git_dir && name == "objects" {
                        Kind::Objects
                    } else {
                        Kind::Plain
                    };
                    let shown = shown.join(&name);
                    if let Some(access) = self.access(&path, &shown) {
                        stack.push((access, shown, next));
                    }
                    continue;
                }
                if kind == Kind::Layout {
                    continue;
                }
                if name == ".git" && (ft.is_symlink() || ft.is_file()) {
                    self.dot_git(&path);
                }
                if ft.is_file() {
                    if let Ok(m) = entry.metadata() {
                        self.set_id_bits(&path, &m);
                    }
                }
            }
        }
    }

    /// The path to reach directory `path` (shown as `shown`) by: itself while short, else
    /// `/proc/self/fd/N` of a descriptor opened on it, held to the end of the sweep.
    fn access(&mut self, path: &Path, shown: &Path) -> Option<PathBuf> {
        if path.as_os_str().len() < DEEP {
            return Some(path.to_path_buf());
        }
        let opened = std::ffi::CString::new(path.as_os_str().as_bytes())
            .ok()
            .map(|c| {
                // SAFETY: a valid C string; the descriptor is owned below.
                unsafe {
                    libc::open(
                        c.as_ptr(),
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    )
                }
            })
            .unwrap_or(-1);
        if opened < 0 || self.held.len() >= MAX_HELD {
            if opened >= 0 {
                // SAFETY: ours, not stored.
                unsafe { libc::close(opened) };
            }
            self.report.incomplete.push(format!(
                "could not open {}: {}; check it yourself",
                shown.display(),
                io::Error::last_os_error()
            ));
            return None;
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(opened) };
        let access = PathBuf::from(format!("/proc/self/fd/{opened}"));
        self.held.push((fd, access.clone(), shown.to_path_buf()));
        Some(access)
    }

    /// `path` as the user knows it: a `/proc/self/fd/N` prefix from [`Self::access`] turned
    /// back into the directory's path.
    fn shown(&self, path: &Path) -> PathBuf {
        self.held
            .iter()
            .rev()
            .find_map(|(_, access, shown)| Some(shown.join(path.strip_prefix(access).ok()?)))
            .unwrap_or_else(|| path.to_path_buf())
    }

    /// Records a finding, its paths as the user knows them.
    fn push(&mut self, mut f: Finding) {
        let raw = f.path.clone();
        f.path = self.shown(&raw);
        if f.path != raw {
            for (_, access, shown) in self.held.iter().rev() {
                let a = access.to_string_lossy().into_owned() + "/";
                let s = shown.to_string_lossy().into_owned() + "/";
                f.done = f.done.replace(&a, &s);
            }
        }
        self.report.findings.push(f);
    }

    /// Lists `dir`. One the agent made unreadable (`chmod 311`) to hide what is inside is
    /// opened up for its owner (the user) and listed; one that still cannot be listed is
    /// reported as not swept, never skipped in silence.
    fn read_dir(&mut self, dir: &Path) -> Option<fs::ReadDir> {
        let first = match fs::read_dir(dir) {
            Ok(rd) => return Some(rd),
            Err(e) => e,
        };
        let ours = fs::symlink_metadata(dir)
            .is_ok_and(|m| m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw());
        if ours && first.kind() == io::ErrorKind::PermissionDenied {
            let mode = fs::symlink_metadata(dir)
                .map(|m| m.permissions().mode())
                .unwrap_or(0);
            if fs::set_permissions(dir, fs::Permissions::from_mode(mode | 0o700)).is_ok() {
                if let Ok(rd) = fs::read_dir(dir) {
                    return Some(rd);
                }
            }
        }
        // A root may be a declared file, not a directory: nothing to list then. Anything else
        // that cannot be listed (too long a path, too deep) is said, never skipped in silence.
        let not_a_dir = first.raw_os_error() == Some(libc::ENOTDIR);
        if first.kind() != io::ErrorKind::NotFound && !not_a_dir {
            self.report.incomplete.push(format!(
                "could not read {}: {first}; check it yourself",
                dir.display()
            ));
        }
        None
    }

    /// A `.git` file or symlink, resolved as git does: a link to a directory is the git dir, a
    /// link to a file (or the file itself) is a gitfile naming it. The git dir is checked
    /// wherever it lies (the walk may not reach it: `gitdir: ../../elsewhere`), and counts as
    /// made during the session if the `.git` entry was written during it.
    fn dot_git(&mut self, path: &Path) {
        let fresh = fs::symlink_metadata(path).is_ok_and(|m| self.written(&m));
        let resolved = fs::canonicalize(path).ok().and_then(|target| {
            if target.is_dir() {
                return Some(target);
            }
            // Relative to the directory holding the `.git` entry, as git resolves it.
            let base = path.parent().unwrap_or(Path::new("/"));
            fs::canonicalize(base.join(read_gitfile(&target)?)).ok()
        });
        match resolved {
            Some(gitdir) if gitdir.is_dir() => self.git_dir(&gitdir, fresh),
            // Fail closed: a pointer written now that leads nowhere yet could be made to lead
            // somewhere later by a rename the sweep cannot see; git refuses it as it is.
            _ if fresh => self.quarantine(
                path,
                "a .git pointer written during the session that names no git directory (a later rename could make it name one)".into(),
            ),
            _ => {}
        }
    }

    /// Checks the git dir `dir` (see the module docs). `fresh`: it counts as made during the
    /// session (its `.git` pointer was written then); otherwise its own markers decide.
    fn git_dir(&mut self, dir: &Path, fresh: bool) {
        let key = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let fresh = fresh || self.markers_written(dir);
        // Checked again only if it is fresher now than when it was checked.
        match self.visited.get(&key) {
            Some(&was) if was || !fresh => return,
            _ => {}
        }
        self.visited.insert(key.clone(), fresh);
        self.pointers(dir);
        for name in ["config", "config.worktree"] {
            self.config(&dir.join(name), fresh);
        }
        self.hooks(&dir.join("hooks"), fresh);
        self.todo_lists(dir);
        // A linked worktree's git dir takes config and hooks from its common dir, which needs
        // no HEAD of its own: check that too, as fresh as the worktree dir.
        if let Some(common) = read_small(&dir.join("commondir"))
            .ok()
            .map(|raw| {
                String::from_utf8_lossy(&raw)
                    .trim_end_matches(['\n', '\r'])
                    .to_string()
            })
            .and_then(|c| fs::canonicalize(dir.join(c)).ok())
        {
            if common.is_dir() && common != key {
                self.git_dir(&common, fresh);
            }
        }
    }

    /// Whether the git dir became one during the session: HEAD or objects renamed into
    /// place, the dir itself moved there (see [`GIT_DIR_MARKERS`]).
    fn markers_written(&self, dir: &Path) -> bool {
        GIT_DIR_MARKERS
            .iter()
            .any(|n| fs::symlink_metadata(dir.join(n)).is_ok_and(|m| self.written(&m)))
    }

    /// An interrupted rebase or cherry-pick left with `exec` lines written during the session:
    /// `git rebase --continue` on the host would run them.
    fn todo_lists(&mut self, dir: &Path) {
        for rel in ["rebase-merge/git-rebase-todo", "sequencer/todo"] {
            let path = dir.join(rel);
            let Ok(m) = fs::symlink_metadata(&path) else {
                continue;
            };
            if self.is_protected(&path) || !self.written(&m) {
                continue;
            }
            let runs = fs::read(&path).is_ok_and(|text| {
                text.split(|&b| b == b'\n').any(|line| {
                    let word = line
                        .trim_ascii_start()
                        .split(|b| b.is_ascii_whitespace())
                        .next();
                    matches!(word, Some(b"exec" | b"x"))
                })
            });
            if runs || !m.is_file() {
                self.quarantine(
                    &path,
                    "a todo list with `exec` lines written during the session (`git rebase --continue` would run them)".into(),
                );
            }
        }
    }

    /// Whether the deepest bind holding `path` was read-only in the sandbox (all of them, if
    /// several are that deep: when in doubt, the path is checked).
    fn is_protected(&self, path: &Path) -> bool {
        let holding: Vec<&(PathBuf, bool)> = self
            .binds
            .iter()
            .filter(|(p, _)| path.starts_with(p))
            .collect();
        let Some(depth) = holding.iter().map(|(p, _)| p.components().count()).max() else {
            return false;
        };
        holding
            .iter()
            .filter(|(p, _)| p.components().count() == depth)
            .all(|(_, rw)| !rw)
    }

    /// Stray `commondir` / `gitdir` files (see the module docs).
    fn pointers(&mut self, dir: &Path) {
        let in_worktrees = dir
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "worktrees");
        let commondir = dir.join("commondir");
        if fs::symlink_metadata(&commondir).is_ok() {
            let common = dir.parent().and_then(Path::parent);
            let names_common = read_small(&commondir).ok().is_some_and(|raw| {
                let named = dir.join(String::from_utf8_lossy(&raw).trim_end());
                let named = fs::canonicalize(named).ok();
                named.is_some() && named == common.and_then(|c| fs::canonicalize(c).ok())
            });
            if !(in_worktrees && names_common) {
                let why = if in_worktrees {
                    "a commondir naming another git directory than the one holding it"
                } else {
                    "a commondir where git never writes one"
                };
                self.quarantine(
                    &commondir,
                    format!(
                        "{why} (git on the host would take config and hooks from where it points)"
                    ),
                );
            }
        }
        let gitdir = dir.join("gitdir");
        if !in_worktrees && fs::symlink_metadata(&gitdir).is_ok() {
            self.quarantine(&gitdir, "a gitdir file where git never writes one".into());
        }
    }

    /// A git config file: stripped of what runs programs if it was written during the session
    /// (or its git dir made then), and, whatever its age, the files it includes are checked
    /// the same way: an old `include.path` naming a file the agent wrote in this session is
    /// as good as writing the config itself.
    fn config(&mut self, path: &Path, fresh: bool) {
        self.config_at(path, fresh, 0);
    }

    fn config_at(&mut self, path: &Path, fresh: bool, depth: usize) {
        let m = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => {
                // Never skipped in silence: what cannot be looked at may hold anything.
                let shown = self.shown(path);
                self.report.incomplete.push(format!(
                    "could not read {}: {e}; check it yourself",
                    shown.display()
                ));
                return;
            }
        };
        // git itself gives up on includes nested deeper than 10.
        if depth > 10 {
            return;
        }
        // A read-only config (the launch repository's own) is not the agent's; what it
        // includes may be.
        let check = !self.is_protected(path) && (fresh || self.written(&m));
        if check && !m.is_file() {
            self.quarantine(path, "git config that is not a regular file".into());
            return;
        }
        let Ok(raw) = fs::read(path) else { return };
        let entries = match crate::git::parse_config_entries(&raw) {
            Ok(e) => e,
            Err(line) if check => {
                // Fail closed: what we cannot read, git might still obey in part.
                self.quarantine(path, format!("git config git would reject ({line})"));
                return;
            }
            Err(_) => return,
        };
        if !check {
            // Relative to the including file's directory, `~/` from $HOME, as git resolves
            // them; folded lexically (a link at the end is judged as the link).
            let base = path.parent().unwrap_or(Path::new("/")).to_path_buf();
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            let targets: Vec<PathBuf> = entries
                .iter()
                .filter_map(|e| e.include_target())
                .map(|t| crate::plan::normalize(&String::from_utf8_lossy(t), &base, &home))
                .collect();
            for t in targets {
                if self.included.insert(t.clone()) {
                    self.config_at(&t, false, depth + 1);
                }
            }
            return;
        }
        let (bad, good): (Vec<_>, Vec<_>) =
            entries.into_iter().partition(crate::git::host_executes);
        if bad.is_empty() {
            return;
        }
        let mut names: Vec<String> = bad.iter().map(|e| e.display_name()).collect();
        names.dedup();
        let aside = match move_aside(path) {
            Ok(p) => p,
            Err(e) => {
                self.failed(path, &names, e);
                return;
            }
        };
        let mut text = format!(
            "# agent-sandbox removed what would run programs on your host: {}\n# The file as the agent left it: {}\n",
            names.join(", "),
            aside.display()
        )
        .into_bytes();
        text.extend(crate::git::render_config(&good));
        let done = match write_new(path, &text) {
            Ok(()) => format!("moved to {} and rewritten without them", aside.display()),
            Err(e) => format!("moved to {} (rewriting it failed: {e})", aside.display()),
        };
        self.push(Finding {
            path: path.to_path_buf(),
            found: format!(
                "{}, sets {} (git on your host would run a program or read config or hooks from elsewhere)",
                if self.written(&m) { "written during the session" } else { "in a git dir made during the session" },
                names.join(", ")
            ),
            done,
        });
    }

    fn hooks(&mut self, dir: &Path, fresh: bool) {
        if self.is_protected(dir) {
            return;
        }
        // A linked hooks dir (git never makes one) written or retargeted during the session:
        // the files behind it keep their old ctimes, so the link itself goes. One the user
        // made, unchanged, is left alone and its files judged by their age.
        if fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            let link_new = fs::symlink_metadata(dir).is_ok_and(|m| self.written(&m));
            let target_new = fs::metadata(dir).is_ok_and(|m| self.written(&m));
            if link_new || target_new || fs::metadata(dir).is_err() {
                if link_new || target_new {
                    self.quarantine(
                        dir,
                        "a linked hooks directory written or retargeted during the session".into(),
                    );
                }
                return;
            }
        }
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let mut hooks: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        hooks.sort();
        for path in hooks {
            let Ok(m) = fs::symlink_metadata(&path) else {
                continue;
            };
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let runnable = m.file_type().is_symlink() || m.permissions().mode() & 0o111 != 0;
            if runnable
                && (fresh || self.written(&m))
                && !name.ends_with(".sample")
                && !name.contains(SUFFIX)
                && !self.is_protected(&path)
            {
                let when = if self.written(&m) {
                    "written during the session"
                } else {
                    "in a git dir made during the session"
                };
                self.quarantine(&path, format!("an executable git hook {when}"));
            }
        }
    }

    fn set_id_bits(&mut self, path: &Path, m: &fs::Metadata) {
        let mode = m.permissions().mode();
        if mode & 0o6000 == 0 || !self.written(m) {
            return;
        }
        let cleared = fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o1777));
        self.push(Finding {
            path: path.to_path_buf(),
            found: format!(
                "written during the session with mode {:o} (setuid/setgid)",
                mode & 0o7777
            ),
            done: match cleared {
                Ok(()) => format!("the bits are cleared (mode now {:o})", mode & 0o1777),
                Err(e) => format!("clearing the bits failed: {e}; remove the file"),
            },
        });
    }

    fn quarantine(&mut self, path: &Path, found: String) {
        let done = match move_aside(path) {
            Ok(to) => format!("moved to {}", to.display()),
            Err(e) => format!("moving it aside failed: {e}; remove it before you run git here"),
        };
        self.push(Finding {
            path: path.to_path_buf(),
            found,
            done,
        });
    }

    fn failed(&mut self, path: &Path, names: &[String], e: io::Error) {
        self.push(Finding {
            path: path.to_path_buf(),
            found: format!("written during the session, sets {}", names.join(", ")),
            done: format!(
                "moving it aside failed: {e}; remove those entries before you run git here"
            ),
        });
    }
}

fn read_small(path: &Path) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    fs::File::open(path)?.take(4096).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Renames `path` to the first free `path.agent-sandbox-quarantine[-N]`.
fn move_aside(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    for n in 1..1000 {
        let suffix = if n == 1 {
            SUFFIX.to_string()
        } else {
            format!("{SUFFIX}-{n}")
        };
        let to = path.with_file_name(format!("{name}{suffix}"));
        if fs::symlink_metadata(&to).is_err() {
            fs::rename(path, &to)?;
            return Ok(to);
        }
    }
    Err(io::Error::other("too many quarantined copies already"))
}

fn write_new(path: &Path, contents: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)?;
    f.write_all(contents)
}

/// At every start, before planning: the git directory of the repository around `cwd` (the
/// nearest `.git` above it, a directory or the one a `.git` file names) is swept for stray
/// `commondir`/`gitdir` files, in its worktrees and modules too. They can only be there if an
/// earlier session's sweeps did not run (the machine went down mid-session); quarantined, the
/// launch goes on instead of refusing. Nothing else is touched: configs and hooks are judged
/// by the session that wrote them.
pub fn at_start(cwd: &Path) -> Report {
    let mut gitdir = None;
    for dir in cwd.ancestors() {
        let dot = dir.join(".git");
        match fs::symlink_metadata(&dot) {
            Ok(m) if m.is_dir() => gitdir = Some(dot),
            Ok(m) if m.is_file() => {
                let target = read_small(&dot).ok().and_then(|raw| {
                    let text = String::from_utf8_lossy(&raw).trim_end().to_string();
                    text.strip_prefix("gitdir: ").map(|t| dir.join(t))
                });
                gitdir = target.and_then(|t| fs::canonicalize(t).ok());
            }
            _ => continue,
        }
        break;
    }
    let Some(gitdir) = gitdir.filter(|g| is_git_dir(g)) else {
        return Report::default();
    };
    // A linked worktree's git dir lives in <common>/worktrees/<name>: sweep from <common>.
    let common = match gitdir.parent() {
        Some(p) if p.file_name().is_some_and(|n| n == "worktrees") => {
            p.parent().map(Path::to_path_buf).unwrap_or(gitdir)
        }
        _ => gitdir,
    };
    sweep(&SweepSpec {
        roots: vec![common],
        binds: Vec::new(),
        since_nanos: u128::MAX,
    })
}

/// The sentinel: `agent-sandbox __sweep SESSION_DIR`, started by the launcher before the
/// sandbox with a pipe on stdin. The launcher writes `pid PID` once the sandbox (bwrap, or sandbox-exec) runs
/// and `done` after its own sweep. End of file without `done` means the launcher died: wait
/// for that process (and so the sandbox) to be gone, then sweep and say what was found on
/// stderr.
pub fn sentinel_main(args: &[std::ffi::OsString]) -> i32 {
    let dir = match crate::entry::SweepArgs::parse(args) {
        Ok(a) => a.session_dir,
        Err(e) => {
            eprintln!("agent-sandbox: error: {e}");
            return 125;
        }
    };
    // The terminal's hangup or Ctrl-\ must not stop the sweep the launcher's death calls for.
    for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
        // SAFETY: installing SIG_IGN runs no handler code.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
    let mut sandbox: Option<i32> = None;
    let mut line = String::new();
    let stdin = io::stdin();
    loop {
        line.clear();
        match io::BufRead::read_line(&mut stdin.lock(), &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        match line.trim().split_once(' ') {
            Some(("pid", pid)) => sandbox = pid.parse().ok(),
            _ if line.trim() == "done" => return 0,
            _ => {}
        }
    }
    if let Some(pid) = sandbox {
        wait_gone(pid);
    }
    let file = dir.join(SPEC_FILE);
    let spec = fs::read(&file)
        .and_then(|b| {
            let mut spec: SweepSpec = serde_json::from_slice(&b).map_err(io::Error::other)?;
            spec.since_nanos = ctime_nanos(&fs::metadata(&file)?);
            Ok(spec)
        })
        .map_err(|e| e.to_string());
    let spec: SweepSpec = match spec {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "agent-sandbox: warning: the launcher died and the exit sweep cannot read {}: {e}; check the project's git directories for commondir files and config that runs programs",
                dir.join(SPEC_FILE).display()
            );
            return 1;
        }
    };
    eprint!("{}", sweep(&spec).render());
    0
}

/// Waits until process `pid` (the sandbox's bwrap) has exited, however long that takes: a
/// sweep that ran while the sandbox still lived could be undone behind it.
fn wait_gone(pid: i32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain syscall; the descriptor is closed below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        if fd >= 0 {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; EINTR is retried.
            unsafe {
                while libc::poll(&mut p, 1, -1) < 0
                    && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
                {
                }
                libc::close(fd);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    while nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The sandbox's own processes die with bwrap (SIGKILL, parent first); give the kernel a
    // moment to finish killing the PID namespace.
    std::thread::sleep(Duration::from_millis(100));
}

/// While the session runs: the repository's own git directories are watched (inotify) for a
/// `commondir` or `gitdir` appearing, and each is quarantined at once, so host git run
/// meanwhile (a shell prompt, an editor) does not follow it either. Findings are kept for the
/// exit report; the exit sweep still runs and catches whatever this missed.
#[cfg(target_os = "linux")]
pub struct Watch {
    findings: std::sync::Arc<std::sync::Mutex<Vec<Finding>>>,
}

#[cfg(target_os = "linux")]
impl Watch {
    /// Watches those of `dirs` that are git directories. The thread ends with the process.
    pub fn start(dirs: &[PathBuf]) -> io::Result<Watch> {
        let findings = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let gitdirs: Vec<PathBuf> = dirs.iter().filter(|d| is_git_dir(d)).cloned().collect();
        if gitdirs.is_empty() {
            return Ok(Watch { findings });
        }
        // SAFETY: plain syscalls on a descriptor this function owns.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut by_wd = std::collections::BTreeMap::new();
        for dir in gitdirs {
            let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?;
            let mask = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_ONLYDIR;
            let wd = unsafe { libc::inotify_add_watch(fd, c.as_ptr(), mask) };
            if wd < 0 {
                let e = io::Error::last_os_error();
                unsafe { libc::close(fd) };
                return Err(e);
            }
            by_wd.insert(wd, dir);
        }
        let sink = findings.clone();
        std::thread::spawn(move || watch_loop(fd, &by_wd, &sink));
        Ok(Watch { findings })
    }

    /// What the watch quarantined so far.
    pub fn findings(&self) -> Vec<Finding> {
        self.findings.lock().map(|f| f.clone()).unwrap_or_default()
    }
}

#[cfg(target_os = "linux")]
fn watch_loop(
    fd: i32,
    by_wd: &std::collections::BTreeMap<i32, PathBuf>,
    sink: &std::sync::Mutex<Vec<Finding>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: reads into a buffer we own.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        let mut at = 0usize;
        let header = std::mem::size_of::<libc::inotify_event>();
        while at + header <= n as usize {
            // SAFETY: the kernel writes whole events; read_unaligned copes with the offset.
            let ev: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
            let name = &buf[at + header..at + header + ev.len as usize];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            at += header + ev.len as usize;
            if name != b"commondir" && name != b"gitdir" {
                continue;
            }
            let Some(dir) = by_wd.get(&ev.wd) else {
                continue;
            };
            let mut s = Sweeper {
                since: 0,
                binds: Vec::new(),
                seen: 0,
                report: Report::default(),
                visited: Default::default(),
                included: Default::default(),
                held: Vec::new(),
            };
            s.pointers(dir);
            if let Ok(mut all) = sink.lock() {
                all.extend(s.report.findings);
            }
        }
    }
}

/// The launcher's handle on its sentinel.
pub struct Sentinel {
    child: std::process::Child,
}

impl Sentinel {
    /// Writes the spec for `roots` into `session_dir` (its change time marks the session's
    /// start) and starts `exe __sweep session_dir` in a process group of its own (a terminal's
    /// Ctrl-C must not take it down with the launcher; it ignores hangups itself), stdout on
    /// /dev/null so `$(…)` callers are not held up by it. No `pre_exec`, so std can spawn it
    /// with posix_spawn, off the start path's fork cost.
    pub fn start(
        exe: &Path,
        session_dir: &Path,
        roots: Vec<PathBuf>,
        binds: Vec<(PathBuf, bool)>,
    ) -> io::Result<(SweepSpec, Sentinel)> {
        use std::os::unix::process::CommandExt;
        let mut spec = SweepSpec {
            roots,
            binds,
            since_nanos: 0,
        };
        let json = serde_json::to_vec(&spec).map_err(io::Error::other)?;
        let file =
            crate::session::write_file(session_dir, SPEC_FILE, &json).map_err(io::Error::other)?;
        spec.since_nanos = ctime_nanos(&fs::metadata(file)?);
        let mut c = std::process::Command::new(exe);
        let line = crate::entry::SweepArgs {
            session_dir: session_dir.to_path_buf(),
        };
        c.arg(crate::entry::SWEEP)
            .args(line.to_args())
            .process_group(0)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null());
        Ok((spec, Sentinel { child: c.spawn()? }))
    }

    pub fn sandbox_started(&mut self, pid: u32) {
        if let Some(stdin) = self.child.stdin.as_mut() {
            let _ = writeln!(stdin, "pid {pid}");
        }
    }

    /// The launcher swept itself: the sentinel exits without doing anything.
    pub fn finish(mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = writeln!(stdin, "done");
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
#[path = "quarantine_tests.rs"]
mod tests;
