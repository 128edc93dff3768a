//! Git awareness: find the repository around the launch directory, decide which git
//! directories the agent may write, and list what must stay read-only so that the agent
//! cannot plant something that git on the host later executes or obeys (hook injection:
//! hooks, config with `core.hooksPath`/`core.fsmonitor`/aliases, includes, alternates,
//! worktree and submodule pointers).
//!
//! Pure discovery: this module only reads the filesystem. It never runs `git` and never
//! reads the environment (`GIT_DIR` and friends would let whoever starts the launcher change
//! what gets exposed), so the answer depends on the files on disk alone, and it is cheap
//! enough (a few dozen `stat`s) to run on every launch.
//!
//! # Trust
//! The launch directory is writable, so everything in it — `.git` pointer files,
//! `.gitmodules`, even a whole `.git` directory — may have been written by an agent in an
//! earlier session. Such content may widen what we *protect* (over-protecting is harmless),
//! but it never decides what we *grant*: a git directory outside the launch directory is
//! bound read-write only when metadata outside the agent's reach vouches for this checkout
//! (a linked worktree's `gitdir` back-link, or `core.worktree` in the git dir's config).
//!
//! # Why rw_dirs also holds "pins"
//! A read-only bind makes its path a mount point, which cannot be renamed or unlinked, but
//! the directories *above* it still can: with `.git/worktrees/wt/commondir` bound read-only
//! the agent could `mv .git/worktrees/wt away && mkdir .git/worktrees/wt` and write a fresh
//! `commondir`. So every directory between a writable root and a protected path is bound
//! onto itself read-write — granting nothing new, but pinning it in place (`protect`, which
//! does the same for declared read-only paths and host programs' config).
//!
//! # Launcher contract (order matters)
//! 1. create `placeholders` on the host, in order;
//! 2. bind the launch directory read-write, then each `rw_dirs` entry onto itself read-write,
//!    in order — also those inside the launch directory, since that is what pins them;
//! 3. bind each `ro_paths` entry and each placeholder onto itself read-only.
//!
//! # Known limits
//! - A bind mount cannot stop the agent from *creating* a `commondir` file in a git dir it
//!   may write (an empty placeholder breaks git). `quarantine` moves such files aside while
//!   the session runs (the repository's git dirs are watched), when it ends and at the next
//!   start; if one is still found here, planning refuses (`StrayCommondir`).
//! - New `<gitdir>/modules/<name>` directories and `.git` files in not-yet-checked-out
//!   submodule paths can be created; `quarantine` strips what would run programs from the
//!   configs and hooks written during the session when it ends.
//! - Nested repositories the agent creates itself are not protected while the session runs;
//!   `quarantine` deals with their config and hooks when it ends.
//! - Programs named by config (`core.fsmonitor = ./x`, `!`-aliases, filter drivers) are
//!   protected when the first word of the command is a path; shell snippets are not parsed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

pub type Result<T, E = GitError> = std::result::Result<T, E>;

/// `.git` files, `commondir`, `gitdir`: git writes one short path; anything bigger is not git's.
const POINTER_LIMIT: u64 = 4096;
/// Config files and `.gitmodules`; bounds the time a planted file can cost the launcher.
const CONFIG_LIMIT: u64 = 1 << 20;
/// Submodules within submodules, and path segments of module names.
const MAX_NESTING: usize = 32;
/// git itself refuses includes nested deeper than this.
const MAX_INCLUDE_DEPTH: usize = 10;
/// Same bound as the kernel's MAXSYMLINKS.
const MAX_SYMLINK_HOPS: usize = 40;

/// What the sandbox binds for the repository around the launch directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLayout {
    /// Top of the working tree (the dir containing the `.git` dir or `.git` file; for a bare
    /// repository, or a launch from inside a git dir, the git dir itself).
    pub root: PathBuf,
    /// Directories to bind read-write onto themselves, parents before children: the common
    /// git dir (and the per-worktree git dir if it is not inside it), then "pins" — existing
    /// directories inside the launch directory or those git dirs that lie above a protected
    /// path and must become mount points so the agent cannot rename them away (see the
    /// module docs). Pins grant nothing the agent could not already write. Canonical.
    pub rw_dirs: Vec<PathBuf>,
    /// Existing paths to re-bind read-only on top of the rw binds, parents before children.
    /// Canonical.
    pub ro_paths: Vec<PathBuf>,
    /// Protected paths that do not exist yet: the launcher creates an empty placeholder (dir
    /// or file) so it can be bound read-only and the agent cannot create it. Parents before
    /// children; the parent of each exists.
    pub placeholders: Vec<(PathBuf, PlaceholderKind)>,
    /// Human-readable notes, e.g. "core.hooksPath points outside the repository; ignored".
    pub notes: Vec<String>,
}

pub use crate::protect::PlaceholderKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitView {
    /// Not inside a git repository.
    NoRepo,
    /// Repo found but not exposed (root is $HOME or above it, and launch dir is not $HOME
    /// itself); `warning` names the repo root and why.
    Refused {
        root: PathBuf,
        warning: String,
    },
    Repo(GitLayout),
}

#[derive(thiserror::Error, Debug)]
pub enum GitError {
    #[error(
        "cannot read {path}: {source}. The sandbox inspects git metadata before exposing a \
         repository and will not start without it. Fix: make {path} readable, or launch \
         outside this repository"
    )]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "{path} is not a regular file, but git keeps a small text file there; refusing to \
         read it. Fix: repair or remove {path}"
    )]
    NotRegularFile { path: PathBuf },

    #[error(
        "{path} is larger than {limit} bytes, far more than git ever writes there; refusing \
         to parse it. Fix: repair or remove {path}"
    )]
    TooLarge { path: PathBuf, limit: u64 },

    #[error(
        "{path} is a symlink; the sandbox cannot protect a symlinked `.git`, because the \
         agent could repoint it at a git directory of its own making. Fix: replace it with a \
         `.git` file containing `gitdir: <target>` (git follows those too)"
    )]
    SymlinkedDotGit { path: PathBuf },

    #[error(
        "git pointer file {path} should contain `gitdir: <path>`, but starts with {found:?}; \
         git rejects it too. Fix: repair or remove {path}"
    )]
    BadPointer { path: PathBuf, found: String },

    #[error(
        "git metadata at {path} points to {target}, which does not exist. Fix: repair or \
         remove {path} (for a moved worktree: `git worktree repair`)"
    )]
    DanglingPointer { path: PathBuf, target: PathBuf },

    #[error(
        "git metadata at {path} points to {target}, which is not a git directory (no \
         {lacks}); refusing to bind it read-write. Fix: repair or remove {path}"
    )]
    NotAGitDir {
        path: PathBuf,
        target: PathBuf,
        lacks: &'static str,
    },

    #[error(
        "{commondir} redirects the git directory {gitdir} to {target}, but git writes \
         `commondir` only in <common>/worktrees/<name>; git on the host would take config \
         and hooks from {target}, so this looks planted. Refusing to start. Fix: remove \
         {commondir} if you did not create it"
    )]
    StrayCommondir {
        commondir: PathBuf,
        gitdir: PathBuf,
        target: String,
    },

    #[error(
        "{pointer} points to the worktree git directory {gitdir}, but that directory's \
         back-link {backlink} names {found} instead of {expected}; refusing to bind it \
         read-write, since a planted `.git` file could otherwise borrow another checkout's \
         git directory. Fix: run `git worktree repair` in this checkout if it really is that \
         worktree, otherwise remove {pointer}"
    )]
    BacklinkMismatch {
        pointer: PathBuf,
        gitdir: PathBuf,
        backlink: PathBuf,
        found: String,
        expected: PathBuf,
    },

    #[error(
        "{pointer} points to the git directory {gitdir}, which lies outside the launch \
         directory and does not name {root} as its working tree (core.worktree: {found}); \
         refusing to bind it read-write, since a planted `.git` file could otherwise expose \
         another repository. Fix: if {gitdir} really belongs to {root}, run `git \
         --git-dir={gitdir} config core.worktree {root}`; otherwise remove {pointer}"
    )]
    ForeignGitDir {
        pointer: PathBuf,
        gitdir: PathBuf,
        root: PathBuf,
        found: String,
    },

    #[error(
        "{commondir} points to {found}, but the worktree directory holding it belongs to \
         {expected}; git in that worktree would take its config and hooks from {found}. Fix: \
         run `git worktree repair`, or `git worktree prune` if the worktree is gone"
    )]
    WorktreeCommondir {
        commondir: PathBuf,
        found: PathBuf,
        expected: PathBuf,
    },

    #[error(
        "{link} is a symlink inside {dir}, which the agent can write, so the agent could \
         repoint it and the read-only protection of {protected} would not hold. Fix: replace \
         the symlink with the real file or directory"
    )]
    Symlink {
        link: PathBuf,
        dir: PathBuf,
        protected: PathBuf,
    },

    #[error(
        "symlinks on the way to {path} chain more than {MAX_SYMLINK_HOPS} times (a loop?). \
         Fix: repair the symlinks"
    )]
    SymlinkLoop { path: PathBuf },

    #[error(
        "{what} is {path}, which is or contains {writable}, a directory the agent can write; \
         it cannot be made read-only without making that directory read-only too. Fix: point \
         it at a dedicated path (for hooks, e.g. `git config core.hooksPath .githooks`)"
    )]
    CoversWritable {
        what: String,
        path: PathBuf,
        writable: PathBuf,
    },

    #[error(
        "cannot parse {path} line {line}: {reason}; git would reject it too. Fix: repair \
         {path}"
    )]
    BadConfig {
        path: PathBuf,
        line: usize,
        reason: &'static str,
    },

    #[error(
        "{path}: {what} nest deeper than {limit} levels; refusing to continue. Fix: flatten \
         the nesting or remove {path}"
    )]
    TooDeep {
        path: PathBuf,
        what: &'static str,
        limit: usize,
    },
}

/// Find the repository around `launch_dir` and plan how to expose it.
///
/// `launch_dir` and `home` should be canonical; `launch_dir` is canonicalized again anyway
/// because every containment check below relies on it.
pub fn inspect(launch_dir: &Path, home: &Path) -> Result<GitView> {
    let launch = fs::canonicalize(launch_dir).map_err(read_err(launch_dir))?;
    let home = fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    let Some(found) = discover(&launch)? else {
        return Ok(GitView::NoRepo);
    };
    if let Some(warning) = refusal(&found.root, &launch, &home) {
        return Ok(GitView::Refused {
            root: found.root,
            warning,
        });
    }
    let located = locate(&found, &launch)?;

    let mut grants = vec![located.common.clone()];
    if !located.gitdir.starts_with(&located.common) {
        grants.push(located.gitdir.clone());
    }
    let mut scan = Scan {
        root: found.root.clone(),
        launch,
        home,
        grants,
        ro: BTreeSet::new(),
        placeholders: BTreeMap::new(),
        pins: BTreeSet::new(),
        notes: Vec::new(),
        gitdirs: BTreeSet::new(),
        configs: BTreeSet::new(),
        trees: BTreeSet::new(),
    };
    if found.kind == DotGit::File {
        scan.protect(
            &found.root,
            Path::new(".git"),
            PlaceholderKind::File,
            Mode::IfExists,
        )?;
    }
    scan.full_gitdir(&located.common, Some(&found.root), 0)?;
    if !scan.gitdirs.contains(&located.gitdir) {
        scan.worktree_gitdir(&located.common, &located.gitdir, 0)?;
    }
    if found.kind != DotGit::Bare {
        scan.submodule_trees(&found.root, 0)?;
    }
    Ok(GitView::Repo(scan.finish()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DotGit {
    /// `<root>/.git` is a directory.
    Dir,
    /// `<root>/.git` is a `gitdir: <path>` file.
    File,
    /// `<root>` is itself a git directory (bare repository, or launched inside a `.git`).
    Bare,
}

struct Found {
    root: PathBuf,
    kind: DotGit,
}

/// Walk up like git does: `<dir>/.git` first, then `<dir>` itself as a bare repository.
fn discover(launch: &Path) -> Result<Option<Found>> {
    for dir in launch.ancestors() {
        let dotgit = dir.join(".git");
        match fs::symlink_metadata(&dotgit) {
            Ok(meta) => {
                let ft = meta.file_type();
                let found = |kind| {
                    Ok(Some(Found {
                        root: dir.to_path_buf(),
                        kind,
                    }))
                };
                if ft.is_symlink() {
                    // Fail closed: the agent could swap the link for a git dir of its own.
                    return Err(GitError::SymlinkedDotGit { path: dotgit });
                }
                if ft.is_file() {
                    return found(DotGit::File);
                }
                if !ft.is_dir() {
                    // Fail closed: git would skip it and keep looking; a FIFO or socket named
                    // `.git` is not something to guess about.
                    return Err(GitError::NotRegularFile { path: dotgit });
                }
                // git skips a `.git` directory that is not a repository and keeps walking up.
                if is_file(&dotgit.join("HEAD"))? {
                    return found(DotGit::Dir);
                }
            }
            Err(e) if missing(&e) => {}
            Err(e) => return Err(read_err(&dotgit)(e)),
        }
        if is_file(&dir.join("HEAD"))?
            && is_dir(&dir.join("objects"))?
            && is_dir(&dir.join("refs"))?
        {
            return Ok(Some(Found {
                root: dir.to_path_buf(),
                kind: DotGit::Bare,
            }));
        }
    }
    Ok(None)
}

fn refusal(root: &Path, launch: &Path, home: &Path) -> Option<String> {
    if root == home {
        if launch == home {
            return None;
        }
        return Some(format!(
            "git: not exposing the repository at {root}: it is your home directory, and \
             binding its .git from a subdirectory ({launch}) would let the agent rewrite the \
             history and config of your dotfiles. git inside the sandbox will not see this \
             repository; to work on it, launch from {root} itself.",
            root = root.display(),
            launch = launch.display(),
        ));
    }
    if home.starts_with(root) {
        // Stricter than "launched from $HOME": a repository above $HOME is never a project.
        return Some(format!(
            "git: not exposing the repository at {root}: it contains your home directory \
             {home}, so its git metadata is not the project's to hand out. git inside the \
             sandbox will not see this repository.",
            root = root.display(),
            home = home.display(),
        ));
    }
    None
}

struct Located {
    /// Per-worktree git dir (`$GIT_DIR`).
    gitdir: PathBuf,
    /// `$GIT_COMMON_DIR`: objects, refs, config, hooks.
    common: PathBuf,
}

/// Resolve and validate the git dir and common dir: these are what get bound read-write.
fn locate(found: &Found, launch: &Path) -> Result<Located> {
    let root = &found.root;
    let dotgit = root.join(".git");
    let (gitdir, origin) = match found.kind {
        DotGit::Dir => (dotgit.clone(), dotgit.clone()),
        DotGit::Bare => (root.clone(), root.clone()),
        DotGit::File => {
            let target = root.join(read_pointer(&dotgit)?);
            (canonical_target(&dotgit, &target)?, dotgit.clone())
        }
    };
    if !is_file(&gitdir.join("HEAD"))? {
        // Fail closed: a `.git` file aimed at, say, ~/.ssh must not get it bound read-write.
        return Err(GitError::NotAGitDir {
            path: origin,
            target: gitdir,
            lacks: "HEAD",
        });
    }
    let commondir = gitdir.join("commondir");
    let Some(raw) = read_limited(&commondir, POINTER_LIMIT)? else {
        if !is_dir(&gitdir.join("objects"))? {
            return Err(GitError::NotAGitDir {
                path: origin,
                target: gitdir,
                lacks: "objects/ or commondir",
            });
        }
        if found.kind == DotGit::File && !gitdir.starts_with(launch) {
            // Fail closed: only the git dir's own config can say it belongs to this tree.
            check_core_worktree(&gitdir, root, &dotgit)?;
        }
        return Ok(Located {
            common: gitdir.clone(),
            gitdir,
        });
    };
    let target = gitdir.join(bytes_path(trim_eol(&raw)));
    let common = canonical_target(&commondir, &target)?;
    if !is_file(&common.join("HEAD"))? || !is_dir(&common.join("objects"))? {
        return Err(GitError::NotAGitDir {
            path: commondir,
            target: common,
            lacks: "HEAD or objects/",
        });
    }
    if gitdir.parent() != Some(common.join("worktrees").as_path()) {
        // Fail closed: git never writes this layout, so someone planted the redirect.
        return Err(GitError::StrayCommondir {
            commondir,
            gitdir,
            target: target.display().to_string(),
        });
    }
    check_backlink(&gitdir, root, &dotgit)?;
    Ok(Located { gitdir, common })
}

/// A linked worktree's git dir records the worktree's `.git` file in `gitdir`; that file is
/// outside the agent's reach (protected read-only in every session), so it vouches for us.
fn check_backlink(gitdir: &Path, root: &Path, pointer: &Path) -> Result<()> {
    let backlink = gitdir.join("gitdir");
    let expected = root.join(".git");
    let found = match read_limited(&backlink, POINTER_LIMIT)? {
        None => "nothing (the file is missing)".to_string(),
        Some(raw) => {
            let named = gitdir.join(bytes_path(trim_eol(&raw)));
            let parent = named.parent().and_then(|p| fs::canonicalize(p).ok());
            if named.file_name() == Some(OsStr::new(".git")) && parent.as_deref() == Some(root) {
                return Ok(());
            }
            named.display().to_string()
        }
    };
    // Fail closed: a mismatch means this `.git` file borrows someone else's worktree.
    Err(GitError::BacklinkMismatch {
        pointer: pointer.to_path_buf(),
        gitdir: gitdir.to_path_buf(),
        backlink,
        found,
        expected,
    })
}

/// Submodule git dirs (and `--separate-git-dir` ones, once configured) name their working
/// tree in `core.worktree`, relative to the git dir.
fn check_core_worktree(gitdir: &Path, root: &Path, pointer: &Path) -> Result<()> {
    let config = gitdir.join("config");
    let entries = read_config(&config)?.unwrap_or_default();
    let value = entries
        .iter()
        .rev()
        .find(|e| e.is("core", "worktree"))
        .and_then(|e| e.value.as_deref());
    let found = match value {
        None => "not set".to_string(),
        Some(v) => {
            let named = gitdir.join(bytes_path(v));
            match fs::canonicalize(&named) {
                Ok(c) if c == root => return Ok(()),
                Ok(c) => c.display().to_string(),
                Err(_) => format!("{} (missing)", named.display()),
            }
        }
    };
    // Fail closed: nothing outside the agent's reach ties this git dir to this tree.
    Err(GitError::ForeignGitDir {
        pointer: pointer.to_path_buf(),
        gitdir: gitdir.to_path_buf(),
        root: root.to_path_buf(),
        found,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Protect it; if missing, hold its place with a placeholder.
    Required,
    /// Protect it if it exists (pointer files: a placeholder would break git).
    IfExists,
}

/// Where a path to protect came from: git's fixed layout, or a config value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Layout,
    /// `quiet`: derived from a relative value against a base outside the writable dirs
    /// (another worktree); not worth a note.
    Config {
        quiet: bool,
    },
}

enum Resolved {
    Exists(PathBuf),
    /// `first` is the first missing component (its parent exists); `full` the whole path.
    Missing {
        first: PathBuf,
        full: PathBuf,
    },
    /// A component is a file, or `..` follows a missing one: git cannot reach it either.
    Unreachable,
}

enum Part {
    Root,
    Up,
    Name(OsString),
}

fn parts(path: &Path) -> impl Iterator<Item = Part> + '_ {
    path.components().filter_map(|c| match c {
        Component::RootDir => Some(Part::Root),
        Component::ParentDir => Some(Part::Up),
        Component::Normal(n) => Some(Part::Name(n.to_owned())),
        Component::CurDir | Component::Prefix(_) => None,
    })
}

struct Scan {
    root: PathBuf,
    launch: PathBuf,
    home: PathBuf,
    /// Git dirs bound read-write: the only writable area besides the launch dir.
    grants: Vec<PathBuf>,
    ro: BTreeSet<PathBuf>,
    placeholders: BTreeMap<PathBuf, PlaceholderKind>,
    pins: BTreeSet<PathBuf>,
    notes: Vec<String>,
    /// Git dirs already handled (full and per-worktree).
    gitdirs: BTreeSet<PathBuf>,
    /// Config files already read (canonical), so include cycles end.
    configs: BTreeSet<PathBuf>,
    /// Working trees whose `.gitmodules` was read: an agent-written `.gitmodules` listing the
    /// same path many times must not make the walk exponential.
    trees: BTreeSet<PathBuf>,
}

impl Scan {
    fn note(&mut self, note: String) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    fn writable_roots(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.launch.as_path()).chain(self.grants.iter().map(PathBuf::as_path))
    }

    fn is_writable(&self, path: &Path) -> bool {
        self.writable_roots().any(|w| path.starts_with(w))
    }

    /// A writable root that `path` equals or contains.
    fn covered_writable(&self, path: &Path) -> Option<PathBuf> {
        self.writable_roots()
            .find(|w| w.starts_with(path))
            .map(Path::to_path_buf)
    }

    /// Resolve `start/rel` one component at a time, like the kernel would for git on the
    /// host, refusing symlinks that sit where the agent could repoint them.
    fn resolve(&self, start: &Path, rel: &Path) -> Result<Resolved> {
        let subject = start.join(rel);
        let mut cur = start.to_path_buf();
        let mut todo: VecDeque<Part> = parts(rel).collect();
        let mut hops = 0;
        while let Some(part) = todo.pop_front() {
            let name = match part {
                Part::Root => {
                    cur = PathBuf::from("/");
                    continue;
                }
                // `cur` holds no symlinks, so popping is the physical parent.
                Part::Up => {
                    cur.pop();
                    continue;
                }
                Part::Name(name) => name,
            };
            let next = cur.join(&name);
            match fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if self.is_writable(&cur) {
                        // Fail closed: binds follow the link, but the agent can replace it.
                        return Err(GitError::Symlink {
                            link: next,
                            dir: cur,
                            protected: subject,
                        });
                    }
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(GitError::SymlinkLoop { path: subject });
                    }
                    let target = fs::read_link(&next).map_err(read_err(&next))?;
                    let mut spliced: VecDeque<Part> = parts(&target).collect();
                    spliced.extend(todo);
                    todo = spliced;
                }
                Ok(_) => cur = next,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let mut full = next.clone();
                    for part in todo {
                        match part {
                            Part::Name(n) => full.push(n),
                            Part::Root | Part::Up => return Ok(Resolved::Unreachable),
                        }
                    }
                    return Ok(Resolved::Missing { first: next, full });
                }
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                    return Ok(Resolved::Unreachable);
                }
                Err(e) => return Err(read_err(&next)(e)),
            }
        }
        Ok(Resolved::Exists(cur))
    }

    /// Directories strictly between the deepest writable root holding `path` and `path`.
    fn pin_ancestors(&mut self, path: &Path) {
        let pins = crate::protect::pins(self.writable_roots(), path);
        self.pins.extend(pins);
    }

    fn add_ro(&mut self, path: PathBuf, what: &str) -> Result<()> {
        if let Some(writable) = self.covered_writable(&path) {
            if self.is_writable(&path) {
                // Fail closed: the agent could write hooks or config right there.
                return Err(GitError::CoversWritable {
                    what: what.to_string(),
                    path,
                    writable,
                });
            }
            self.note(format!(
                "{what} is {}, which contains {}; not made read-only (the agent cannot write \
                 it directly, and binding it would hide its writable parts)",
                path.display(),
                writable.display()
            ));
            return Ok(());
        }
        self.pin_ancestors(&path);
        self.ro.insert(path);
        Ok(())
    }

    fn add_placeholder(&mut self, path: PathBuf, kind: PlaceholderKind) {
        self.pin_ancestors(&path);
        let kind = crate::protect::merge_kind(self.placeholders.get(&path).copied(), kind);
        self.placeholders.insert(path, kind);
    }

    /// Protect a path of git's own layout, `start/rel`.
    fn protect(
        &mut self,
        start: &Path,
        rel: &Path,
        kind: PlaceholderKind,
        mode: Mode,
    ) -> Result<()> {
        let what = format!("{} in {}", rel.display(), start.display());
        self.protect_resolved(start, rel, kind, mode, Origin::Layout, &what)
    }

    fn protect_resolved(
        &mut self,
        start: &Path,
        rel: &Path,
        kind: PlaceholderKind,
        mode: Mode,
        origin: Origin,
        what: &str,
    ) -> Result<()> {
        match self.resolve(start, rel)? {
            Resolved::Exists(path) => {
                let inside_tree = path.starts_with(&self.root);
                match origin {
                    // add_ro refuses or notes a path that contains a writable directory.
                    Origin::Config { .. }
                        if self.is_writable(&path) || self.covered_writable(&path).is_some() =>
                    {
                        self.add_ro(path, what)
                    }
                    // Harmless to bind read-only, and a declared writable path may cover it.
                    Origin::Config { .. }
                        if inside_tree && self.covered_writable(&path).is_none() =>
                    {
                        self.ro.insert(path);
                        Ok(())
                    }
                    Origin::Config { quiet: true } => Ok(()),
                    Origin::Config { quiet: false } => {
                        self.note(format!(
                            "{what} is {}, outside the repository and the directories the \
                             agent can write; left as is",
                            path.display()
                        ));
                        Ok(())
                    }
                    Origin::Layout => self.add_ro(path, what),
                }
            }
            Resolved::Missing { first, full } => {
                if mode == Mode::IfExists {
                    return Ok(());
                }
                if !first.parent().is_some_and(|p| self.is_writable(p)) {
                    if origin == (Origin::Config { quiet: false }) {
                        self.note(format!(
                            "{what} is {}, which does not exist and which the agent cannot \
                             create; left as is",
                            full.display()
                        ));
                    }
                    return Ok(());
                }
                let kind = if first == full {
                    kind
                } else {
                    PlaceholderKind::Dir
                };
                self.add_placeholder(first, kind);
                Ok(())
            }
            Resolved::Unreachable => {
                if origin != (Origin::Config { quiet: true }) {
                    self.note(format!(
                        "{what} ({}) cannot exist because a component on its way is a file; \
                         nothing to protect",
                        start.join(rel).display()
                    ));
                }
                Ok(())
            }
        }
    }

    /// A git dir with its own objects: the common dir, a submodule's, a bare repository.
    fn full_gitdir(
        &mut self,
        gitdir: &Path,
        extra_root: Option<&Path>,
        depth: usize,
    ) -> Result<()> {
        if depth > MAX_NESTING {
            return Err(GitError::TooDeep {
                path: gitdir.to_path_buf(),
                what: "submodules",
                limit: MAX_NESTING,
            });
        }
        if !self.gitdirs.insert(gitdir.to_path_buf()) {
            return Ok(());
        }
        let commondir = gitdir.join("commondir");
        if let Some(raw) = read_limited(&commondir, POINTER_LIMIT)? {
            // Fail closed: in a git dir with its own objects, git never writes this file; a
            // planted one hands git on the host someone else's config and hooks.
            return Err(GitError::StrayCommondir {
                commondir,
                gitdir: gitdir.to_path_buf(),
                target: String::from_utf8_lossy(trim_eol(&raw)).into_owned(),
            });
        }
        for (rel, kind) in [
            ("hooks", PlaceholderKind::Dir),
            ("config", PlaceholderKind::File),
            ("config.worktree", PlaceholderKind::File),
            // A missing objects/info becomes a read-only placeholder dir, which also blocks
            // alternates; git recreates nothing there that a session needs.
            ("objects/info/alternates", PlaceholderKind::File),
        ] {
            self.protect(gitdir, Path::new(rel), kind, Mode::Required)?;
        }

        // Worktree roots: relative hooksPath and program paths resolve against each.
        let mut roots = Vec::new();
        for wt in self.subdirs(&gitdir.join("worktrees"))? {
            if let Some(root) = self.worktree_gitdir(gitdir, &wt, depth)? {
                roots.push(root);
            }
        }
        let config = gitdir.join("config");
        let entries = read_config(&config)?.unwrap_or_default();
        let core_worktree = entries
            .iter()
            .rev()
            .find(|e| e.is("core", "worktree"))
            .and_then(|e| e.value.as_deref());
        match core_worktree {
            Some(v) => {
                if let Ok(root) = fs::canonicalize(gitdir.join(bytes_path(v))) {
                    roots.push(root);
                }
            }
            None if gitdir.file_name() == Some(OsStr::new(".git")) => {
                roots.extend(gitdir.parent().map(Path::to_path_buf));
            }
            // Bare: hooks run inside the git dir.
            None => roots.push(gitdir.to_path_buf()),
        }
        roots.extend(extra_root.map(Path::to_path_buf));
        roots.sort();
        roots.dedup();

        if let Ok(canonical) = fs::canonicalize(&config) {
            self.configs.insert(canonical);
        }
        self.apply_config(&config, &entries, &roots, 0)?;
        self.config_file(&gitdir.join("config.worktree"), &roots, 0)?;
        self.modules(&gitdir.join("modules"), depth + 1)
    }

    /// `<common>/worktrees/<name>`; returns that worktree's root if its back-link is genuine.
    fn worktree_gitdir(
        &mut self,
        common: &Path,
        wt: &Path,
        depth: usize,
    ) -> Result<Option<PathBuf>> {
        let commondir = wt.join("commondir");
        let Some(raw) = read_limited(&commondir, POINTER_LIMIT)? else {
            self.note(format!(
                "{} has no commondir; git treats it as a broken worktree and so do we",
                wt.display()
            ));
            return Ok(None);
        };
        let named = wt.join(bytes_path(trim_eol(&raw)));
        if fs::canonicalize(&named).ok().as_deref() != Some(common) {
            // Fail closed: git in that worktree would take config and hooks from elsewhere.
            return Err(GitError::WorktreeCommondir {
                commondir,
                found: named,
                expected: common.to_path_buf(),
            });
        }
        if !self.gitdirs.insert(wt.to_path_buf()) {
            return Ok(None);
        }
        // Only these are read from a per-worktree dir; hooks and config come from `common`.
        self.protect(
            wt,
            Path::new("config.worktree"),
            PlaceholderKind::File,
            Mode::Required,
        )?;
        self.protect(
            wt,
            Path::new("commondir"),
            PlaceholderKind::File,
            Mode::IfExists,
        )?;
        self.protect(
            wt,
            Path::new("gitdir"),
            PlaceholderKind::File,
            Mode::IfExists,
        )?;
        let root = self.worktree_dotgit(wt)?;
        let roots: Vec<PathBuf> = root.iter().cloned().collect();
        self.config_file(&wt.join("config.worktree"), &roots, 0)?;
        self.modules(&wt.join("modules"), depth + 1)?;
        Ok(root)
    }

    /// Protect the `.git` file a worktree dir's `gitdir` names, if it really points back.
    fn worktree_dotgit(&mut self, wt: &Path) -> Result<Option<PathBuf>> {
        let backlink = wt.join("gitdir");
        let Some(raw) = read_limited(&backlink, POINTER_LIMIT)? else {
            return Ok(None);
        };
        let named = wt.join(bytes_path(trim_eol(&raw)));
        let Resolved::Exists(dotgit) = self.resolve(Path::new("/"), &named)? else {
            self.note(format!(
                "{} names {}, which does not exist (a stale worktree; `git worktree prune` \
                 removes it)",
                backlink.display(),
                named.display()
            ));
            return Ok(None);
        };
        let genuine = dotgit.file_name() == Some(OsStr::new(".git"))
            && is_file(&dotgit)?
            && match read_limited(&dotgit, POINTER_LIMIT)? {
                Some(raw) => parse_pointer(&raw).is_some_and(|target| {
                    let base = dotgit.parent().unwrap_or(Path::new("/"));
                    fs::canonicalize(base.join(target)).ok().as_deref() == Some(wt)
                }),
                None => false,
            };
        if !genuine {
            self.note(format!(
                "{} names {}, which does not point back to {}; left alone",
                backlink.display(),
                dotgit.display(),
                wt.display()
            ));
            return Ok(None);
        }
        let what = format!("the `.git` file of the worktree {}", wt.display());
        let root = dotgit.parent().map(Path::to_path_buf);
        self.add_ro(dotgit, &what)?;
        Ok(root)
    }

    /// Walk `<gitdir>/modules`: module names may contain `/`, so any directory that is not a
    /// git dir is a name segment to descend into.
    fn modules(&mut self, dir: &Path, depth: usize) -> Result<()> {
        if depth > MAX_NESTING {
            return Err(GitError::TooDeep {
                path: dir.to_path_buf(),
                what: "submodule directories",
                limit: MAX_NESTING,
            });
        }
        for path in self.subdirs(dir)? {
            if !is_file(&path.join("HEAD"))? {
                self.modules(&path, depth + 1)?;
            } else if is_dir(&path.join("objects"))? {
                self.full_gitdir(&path, None, depth + 1)?;
            } else if let Some(raw) = read_limited(&path.join("commondir"), POINTER_LIMIT)? {
                // Fail closed: git never makes a worktree-style dir under modules/.
                return Err(GitError::StrayCommondir {
                    commondir: path.join("commondir"),
                    gitdir: path,
                    target: String::from_utf8_lossy(trim_eol(&raw)).into_owned(),
                });
            } else {
                self.modules(&path, depth + 1)?;
            }
        }
        Ok(())
    }

    /// Subdirectories of `dir`, sorted; a symlink among them could be swapped by the agent.
    fn subdirs(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if missing(&e) => return Ok(Vec::new()),
            Err(e) => return Err(read_err(dir)(e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(read_err(dir))?;
            let path = entry.path();
            let ft = entry.file_type().map_err(read_err(&path))?;
            if ft.is_symlink() && self.is_writable(dir) {
                // Fail closed: the protections below it would follow a link the agent owns.
                return Err(GitError::Symlink {
                    protected: path.clone(),
                    link: path,
                    dir: dir.to_path_buf(),
                });
            }
            if ft.is_dir() {
                out.push(path);
            }
        }
        out.sort();
        Ok(out)
    }

    /// `.git` files (and old-style embedded `.git` dirs) of checked-out submodules, from
    /// `.gitmodules`, recursively.
    fn submodule_trees(&mut self, top: &Path, depth: usize) -> Result<()> {
        let gitmodules = top.join(".gitmodules");
        if depth > MAX_NESTING {
            return Err(GitError::TooDeep {
                path: gitmodules,
                what: "submodules",
                limit: MAX_NESTING,
            });
        }
        if !self.trees.insert(top.to_path_buf()) {
            return Ok(());
        }
        let Some(entries) = read_config(&gitmodules)? else {
            return Ok(());
        };
        for entry in entries {
            if entry.section != "submodule" || entry.subsection.is_none() || entry.key != "path" {
                continue;
            }
            let Some(value) = entry.value else { continue };
            let rel = bytes_path(&value).to_path_buf();
            // At least one real component: `path = .` would walk this same tree again.
            let plain = rel.components().any(|c| matches!(c, Component::Normal(_)))
                && rel
                    .components()
                    .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
            if !plain {
                self.note(format!(
                    "{}: submodule path {:?} is not a directory inside the working tree; ignored",
                    gitmodules.display(),
                    rel
                ));
                continue;
            }
            let Resolved::Exists(dotgit) = self.resolve(top, &rel.join(".git"))? else {
                continue; // not checked out
            };
            if !dotgit.starts_with(&self.root) {
                self.note(format!(
                    "{}: submodule path {:?} resolves to {}, outside the working tree; ignored",
                    gitmodules.display(),
                    rel,
                    dotgit.display()
                ));
                continue;
            }
            let what = format!("the `.git` of submodule {}", rel.display());
            if is_file(&dotgit)? {
                self.add_ro(dotgit.clone(), &what)?;
            } else if is_file(&dotgit.join("HEAD"))? && is_dir(&dotgit.join("objects"))? {
                // Not absorbed into the superproject: git on the host still obeys it.
                self.full_gitdir(&dotgit, None, depth + 1)?;
            }
            if let Some(sub) = dotgit.parent() {
                self.submodule_trees(sub, depth + 1)?;
            }
        }
        Ok(())
    }

    fn config_file(&mut self, path: &Path, roots: &[PathBuf], depth: usize) -> Result<()> {
        if depth > MAX_INCLUDE_DEPTH {
            return Err(GitError::TooDeep {
                path: path.to_path_buf(),
                what: "config includes",
                limit: MAX_INCLUDE_DEPTH,
            });
        }
        let canonical = match fs::canonicalize(path) {
            Ok(c) => c,
            Err(e) if missing(&e) => return Ok(()),
            Err(e) => return Err(read_err(path)(e)),
        };
        if !self.configs.insert(canonical) {
            return Ok(());
        }
        let Some(entries) = read_config(path)? else {
            return Ok(());
        };
        self.apply_config(path, &entries, roots, depth)
    }

    /// Protect what a config file names that git runs or reads more config from.
    fn apply_config(
        &mut self,
        path: &Path,
        entries: &[Entry],
        roots: &[PathBuf],
        depth: usize,
    ) -> Result<()> {
        let include_base = [path.parent().unwrap_or(Path::new("/")).to_path_buf()];
        for entry in entries {
            let Some(value) = entry.value.as_deref() else {
                continue;
            };
            let name = entry.display_name();
            let what = format!("{name} in {}", path.display());
            if entry.is("core", "hookspath") {
                self.protect_named(value, roots, PlaceholderKind::Dir, true, &what)?;
            } else if (entry.is("include", "path"))
                || (entry.section == "includeif"
                    && entry.subsection.is_some()
                    && entry.key == "path")
            {
                // An include the agent can write could set core.hooksPath or core.fsmonitor.
                for file in
                    self.protect_named(value, &include_base, PlaceholderKind::File, false, &what)?
                {
                    self.config_file(&file, roots, depth + 1)?;
                }
            } else if let Some(program) = program_path(entry, value) {
                self.protect_named(program, roots, PlaceholderKind::File, false, &what)?;
            }
        }
        Ok(())
    }

    /// Protect a path named by a config value; returns the candidate paths. `loud`: say so
    /// when it lies out of reach (worth knowing for hooks; noise for `/usr/bin/vim`).
    fn protect_named(
        &mut self,
        value: &[u8],
        bases: &[PathBuf],
        kind: PlaceholderKind,
        loud: bool,
        what: &str,
    ) -> Result<Vec<PathBuf>> {
        let candidates: Vec<(PathBuf, bool)> = if value.is_empty() {
            Vec::new()
        } else if value == b"~" {
            vec![(self.home.clone(), false)]
        } else if let Some(rest) = value.strip_prefix(b"~/") {
            vec![(self.home.join(bytes_path(rest)), false)]
        } else if value.starts_with(b"~") || value.starts_with(b"%(prefix)/") {
            self.note(format!(
                "{what} is {:?}, a form this check does not expand; left as is",
                String::from_utf8_lossy(value)
            ));
            Vec::new()
        } else if bytes_path(value).is_absolute() {
            vec![(bytes_path(value).to_path_buf(), false)]
        } else {
            bases
                .iter()
                .map(|b| {
                    (
                        b.join(bytes_path(value)),
                        !self.is_writable(b) && !b.starts_with(&self.root),
                    )
                })
                .collect()
        };
        for (candidate, quiet) in &candidates {
            let origin = Origin::Config {
                quiet: *quiet || !loud,
            };
            self.protect_resolved(
                Path::new("/"),
                candidate,
                kind,
                Mode::Required,
                origin,
                what,
            )?;
        }
        Ok(candidates.into_iter().map(|(c, _)| c).collect())
    }

    fn finish(self) -> GitLayout {
        let settled = crate::protect::settle(&self.ro, self.placeholders, self.pins);
        let mut rw: BTreeSet<PathBuf> = self.grants.into_iter().collect();
        rw.extend(settled.pins);
        GitLayout {
            root: self.root,
            rw_dirs: rw.into_iter().collect(),
            ro_paths: settled.ro,
            placeholders: settled.placeholders,
            notes: self.notes,
        }
    }
}

/// Whether git on the host would run a program because of this entry, or read further config
/// or hooks from a place it names (`include.path`, `core.hooksPath`). What the exit sweep
/// strips from config files written during a session (`quarantine`).
pub(crate) fn host_executes(entry: &Entry) -> bool {
    let value = entry.value.as_deref().unwrap_or(b"");
    let sub = entry.subsection.is_some();
    match (entry.section.as_str(), entry.key.as_str()) {
        // `core.fsmonitor = true` is git's own daemon; anything else is a command.
        ("core", "fsmonitor") | ("pager", _) => !sub && !is_bool(value),
        ("core", "hookspath" | "sshcommand" | "editor" | "pager" | "askpass")
        | ("core", "alternaterefscommand" | "gitproxy")
        | ("sequence", "editor")
        | ("diff", "external")
        | ("interactive", "difffilter")
        | ("include", "path") => !sub,
        ("gpg", "program" | "defaultkeycommand") => true,
        ("sendemail", "smtpserver" | "tocmd" | "cccmd" | "headercmd") => true,
        ("includeif", "path")
        | ("hook", "command")
        | ("trailer", "command" | "cmd")
        | ("diff", "command" | "textconv")
        | ("merge", "driver")
        | ("filter", _)
        | ("difftool" | "mergetool", "cmd" | "path")
        | ("browser" | "man", "cmd" | "path")
        | ("remote", "uploadpack" | "receivepack" | "vcs") => sub,
        ("tar", "command") | ("guitool", "cmd") | ("lfs", "path" | "args") => sub,
        ("imap", "tunnel") => true,
        // `protocol.allow` / `protocol.<name>.allow` let `ext::` URLs run commands.
        ("protocol", "allow") => true,
        ("submodule", "update") => sub && value.starts_with(b"!"),
        // git runs `git credential-<value>` through the shell: only a plain helper name with
        // plain arguments (`store --file ~/.c`) is no shell snippet.
        ("credential", "helper") => {
            !value
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b" -_.=~/:".contains(b))
                || value.starts_with(b"/")
        }
        ("alias", _) => value.starts_with(b"!"),
        // An `ext::` URL is a command line (`remote.*.url`, `submodule.*.url`, `insteadOf`).
        ("url", _) => entry
            .subsection
            .as_deref()
            .is_some_and(|s| s.starts_with(b"ext::")),
        _ => value.len() >= 5 && value[..5].eq_ignore_ascii_case(b"ext::"),
    }
}

/// Whether the config files set `user.name` and `user.email` (an include counts as both: it
/// may). For the warning that `git commit` will fail inside; an unreadable file sets nothing.
pub fn identity_in_config(files: &[PathBuf]) -> (bool, bool) {
    let mut name = false;
    let mut email = false;
    for entries in files.iter().filter_map(|f| read_config(f).ok().flatten()) {
        for e in &entries {
            let set = |key| e.is("user", key) && e.value.as_ref().is_some_and(|v| !v.is_empty());
            let include = e.include_target().is_some();
            name |= include || set("name");
            email |= include || set("email");
        }
    }
    (name, email)
}

/// A config file's entries, for the exit sweep; `Err` names the line git would reject too.
pub(crate) fn parse_config_entries(src: &[u8]) -> std::result::Result<Vec<Entry>, String> {
    parse_config(src).map_err(|(line, reason)| format!("line {line}: {reason}"))
}

/// `entries` written back as a config file git reads to the same values (subsections and
/// values quoted, so nothing depends on the original's spelling).
pub(crate) fn render_config(entries: &[Entry]) -> Vec<u8> {
    fn quoted(bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![b'"'];
        for &b in bytes {
            match b {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'"' => out.extend_from_slice(b"\\\""),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\t' => out.extend_from_slice(b"\\t"),
                _ => out.push(b),
            }
        }
        out.push(b'"');
        out
    }
    let mut out = Vec::new();
    let mut current: Option<(&str, Option<&[u8]>)> = None;
    for e in entries {
        let here = (e.section.as_str(), e.subsection.as_deref());
        if current != Some(here) {
            out.push(b'[');
            out.extend_from_slice(e.section.as_bytes());
            if let Some(sub) = &e.subsection {
                out.push(b' ');
                out.extend(quoted(sub));
            }
            out.extend_from_slice(b"]\n");
            current = Some(here);
        }
        out.push(b'\t');
        out.extend_from_slice(e.key.as_bytes());
        if let Some(v) = &e.value {
            out.extend_from_slice(b" = ");
            out.extend(quoted(v));
        }
        out.push(b'\n');
    }
    out
}

/// The path a program-valued config key runs, when its first word is a path.
fn program_path<'a>(entry: &Entry, value: &'a [u8]) -> Option<&'a [u8]> {
    let sub = entry.subsection.is_some();
    let runs = match (entry.section.as_str(), entry.key.as_str()) {
        ("core", "fsmonitor") | ("pager", _) => !sub && !is_bool(value),
        ("core", "sshcommand" | "editor" | "pager" | "askpass")
        | ("sequence", "editor")
        | ("diff", "external")
        | ("interactive", "difffilter") => !sub,
        ("gpg", "program") => true,
        ("diff", "command" | "textconv")
        | ("merge", "driver")
        | ("filter", "clean" | "smudge" | "process")
        | ("difftool" | "mergetool", "cmd") => sub,
        // Other helper values are `git credential-<name>`, not a path.
        ("credential", "helper") => value.starts_with(b"!") || value.starts_with(b"/"),
        ("alias", _) => !sub && value.starts_with(b"!"),
        _ => false,
    };
    if !runs {
        return None;
    }
    let command = value.strip_prefix(b"!").unwrap_or(value).trim_ascii_start();
    let word = match command.first() {
        Some(&q @ (b'"' | b'\'')) => {
            let rest = &command[1..];
            &rest[..rest.iter().position(|&c| c == q).unwrap_or(rest.len())]
        }
        _ => {
            let end = command
                .iter()
                .position(u8::is_ascii_whitespace)
                .unwrap_or(command.len());
            &command[..end]
        }
    };
    word.contains(&b'/').then_some(word)
}

fn is_bool(value: &[u8]) -> bool {
    ["true", "false", "yes", "no", "on", "off", "1", "0", ""]
        .iter()
        .any(|b| value.eq_ignore_ascii_case(b.as_bytes()))
}

fn bytes_path(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

/// git strips trailing CR/LF from the one-line files it reads.
fn trim_eol(mut bytes: &[u8]) -> &[u8] {
    while let Some((b'\n' | b'\r', rest)) = bytes.split_last() {
        bytes = rest;
    }
    bytes
}

fn parse_pointer(raw: &[u8]) -> Option<PathBuf> {
    let path = trim_eol(raw).strip_prefix(b"gitdir: ")?;
    (!path.is_empty()).then(|| PathBuf::from(OsString::from_vec(path.to_vec())))
}

fn read_pointer(path: &Path) -> Result<PathBuf> {
    let raw = read_limited(path, POINTER_LIMIT)?.ok_or_else(|| GitError::Read {
        path: path.to_path_buf(),
        source: io::ErrorKind::NotFound.into(),
    })?;
    parse_pointer(&raw).ok_or_else(|| GitError::BadPointer {
        path: path.to_path_buf(),
        found: String::from_utf8_lossy(&raw[..raw.len().min(60)]).into_owned(),
    })
}

fn canonical_target(origin: &Path, target: &Path) -> Result<PathBuf> {
    fs::canonicalize(target).map_err(|e| {
        if missing(&e) {
            GitError::DanglingPointer {
                path: origin.to_path_buf(),
                target: target.to_path_buf(),
            }
        } else {
            read_err(target)(e)
        }
    })
}

fn missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn read_err(path: &Path) -> impl FnOnce(io::Error) -> GitError + '_ {
    move |source| GitError::Read {
        path: path.to_path_buf(),
        source,
    }
}

fn file_type(path: &Path) -> Result<Option<fs::FileType>> {
    match fs::metadata(path) {
        Ok(meta) => Ok(Some(meta.file_type())),
        Err(e) if missing(&e) => Ok(None),
        Err(e) => Err(read_err(path)(e)),
    }
}

fn is_file(path: &Path) -> Result<bool> {
    Ok(file_type(path)?.is_some_and(|t| t.is_file()))
}

fn is_dir(path: &Path) -> Result<bool> {
    Ok(file_type(path)?.is_some_and(|t| t.is_dir()))
}

/// Read a small regular file; `None` if it does not exist.
fn read_limited(path: &Path, limit: u64) -> Result<Option<Vec<u8>>> {
    // O_NONBLOCK: a FIFO planted where git keeps a file would otherwise hang open().
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if missing(&e) => return Ok(None),
        Err(e) => return Err(read_err(path)(e)),
    };
    if !file.metadata().map_err(read_err(path))?.is_file() {
        return Err(GitError::NotRegularFile {
            path: path.to_path_buf(),
        });
    }
    let mut buf = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(read_err(path))?;
    if buf.len() as u64 > limit {
        return Err(GitError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(Some(buf))
}

fn read_config(path: &Path) -> Result<Option<Vec<Entry>>> {
    let Some(bytes) = read_limited(path, CONFIG_LIMIT)? else {
        return Ok(None);
    };
    parse_config(&bytes)
        .map(Some)
        .map_err(|(line, reason)| GitError::BadConfig {
            path: path.to_path_buf(),
            line,
            reason,
        })
}

/// One `key = value` of a git config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Lowercase.
    section: String,
    /// Case-sensitive for `[section "sub"]`, lowercase for the legacy `[section.sub]`.
    subsection: Option<Vec<u8>>,
    /// Lowercase.
    key: String,
    /// `None` for a bare `key` (boolean true).
    value: Option<Vec<u8>>,
}

impl Entry {
    /// `section.key` with no subsection; both lowercase.
    fn is(&self, section: &str, key: &str) -> bool {
        self.subsection.is_none() && self.section == section && self.key == key
    }

    /// The file an `include.path` / `includeIf.<cond>.path` entry names, whatever its
    /// condition (taken as met: over-approximating is harmless for a check).
    pub(crate) fn include_target(&self) -> Option<&[u8]> {
        let include = (self.section == "include" && self.subsection.is_none())
            || (self.section == "includeif" && self.subsection.is_some());
        (include && self.key == "path")
            .then_some(self.value.as_deref())
            .flatten()
    }

    pub(crate) fn display_name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!(
                "{}.{}.{}",
                self.section,
                String::from_utf8_lossy(sub),
                self.key
            ),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

type ParseResult<T> = std::result::Result<T, (usize, &'static str)>;

/// Byte cursor over a config file, following git's config.c closely enough that a file git
/// accepts yields the same values.
struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        match self.src.get(self.pos)? {
            b'\r' if self.src.get(self.pos + 1) == Some(&b'\n') => Some(b'\n'),
            &c => Some(c),
        }
    }

    /// Like git, CRLF reads as LF.
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.pos += if self.src[self.pos] == b'\r' && c == b'\n' {
            2
        } else {
            1
        };
        if c == b'\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn skip_line(&mut self) {
        while let Some(c) = self.next() {
            if c == b'\n' {
                break;
            }
        }
    }

    fn header(&mut self) -> ParseResult<(String, Option<Vec<u8>>)> {
        let line = self.line;
        let mut name = String::new();
        loop {
            match self.next() {
                Some(b']') => break,
                Some(b' ' | b'\t') => return self.subsection(name, line),
                Some(c) if c.is_ascii_alphanumeric() || c == b'-' || c == b'.' => {
                    name.push(char::from(c.to_ascii_lowercase()));
                }
                None | Some(b'\n') => return Err((line, "unterminated [section] header")),
                Some(_) => return Err((line, "invalid character in a [section] header")),
            }
        }
        // Legacy `[section.subsection]`.
        Ok(match name.split_once('.') {
            Some((section, sub)) => (section.to_string(), Some(sub.as_bytes().to_vec())),
            None => (name, None),
        })
    }

    fn subsection(&mut self, name: String, line: usize) -> ParseResult<(String, Option<Vec<u8>>)> {
        loop {
            match self.next() {
                Some(b' ' | b'\t') => {}
                Some(b'"') => break,
                _ => return Err((line, "expected a quoted subsection name")),
            }
        }
        let mut sub = Vec::new();
        loop {
            match self.next() {
                Some(b'"') => break,
                Some(b'\\') => match self.next() {
                    Some(b'\n') | None => return Err((line, "unterminated subsection name")),
                    Some(c) => sub.push(c),
                },
                Some(b'\n') | None => return Err((line, "unterminated subsection name")),
                Some(c) => sub.push(c),
            }
        }
        match self.next() {
            Some(b']') => Ok((name, Some(sub))),
            _ => Err((line, "expected `]` after the subsection name")),
        }
    }

    fn value(&mut self) -> ParseResult<Vec<u8>> {
        let mut value = Vec::new();
        let (mut quoted, mut comment) = (false, false);
        // Start of trailing unquoted whitespace, dropped at the end of the line.
        let mut trim: Option<usize> = None;
        loop {
            let start_line = self.line;
            let c = self.next().unwrap_or(b'\n');
            if c == b'\n' {
                if quoted {
                    return Err((start_line, "unterminated quoted value"));
                }
                if let Some(len) = trim {
                    value.truncate(len);
                }
                return Ok(value);
            }
            if comment {
                continue;
            }
            if !quoted && matches!(c, b' ' | b'\t' | b'\r') {
                if !value.is_empty() {
                    trim.get_or_insert(value.len());
                    value.push(c);
                }
                continue;
            }
            if !quoted && matches!(c, b'#' | b';') {
                comment = true;
                continue;
            }
            trim = None;
            match c {
                b'\\' => match self.next().unwrap_or(b'\n') {
                    b'\n' => {}
                    b't' => value.push(b'\t'),
                    b'b' => value.push(8),
                    b'n' => value.push(b'\n'),
                    e @ (b'\\' | b'"') => value.push(e),
                    _ => return Err((start_line, "unknown escape sequence in a value")),
                },
                b'"' => quoted = !quoted,
                _ => value.push(c),
            }
        }
    }
}

fn parse_config(src: &[u8]) -> ParseResult<Vec<Entry>> {
    let mut lx = Lexer {
        src: src.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(src),
        pos: 0,
        line: 1,
    };
    let mut out = Vec::new();
    let mut section: Option<(String, Option<Vec<u8>>)> = None;
    while let Some(c) = lx.next() {
        match c {
            b'\n' | b' ' | b'\t' | b'\r' => {}
            b'#' | b';' => lx.skip_line(),
            b'[' => section = Some(lx.header()?),
            c if c.is_ascii_alphabetic() => {
                let Some((name, sub)) = &section else {
                    return Err((lx.line, "a key appears before any [section] header"));
                };
                let mut key = String::from(char::from(c.to_ascii_lowercase()));
                while let Some(c) = lx
                    .peek()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == b'-')
                {
                    key.push(char::from(c.to_ascii_lowercase()));
                    lx.next();
                }
                while matches!(lx.peek(), Some(b' ' | b'\t')) {
                    lx.next();
                }
                let value = match lx.peek() {
                    None | Some(b'\n') => None,
                    Some(b'=') => {
                        lx.next();
                        Some(lx.value()?)
                    }
                    Some(_) => return Err((lx.line, "expected `=` after the key")),
                };
                out.push(Entry {
                    section: name.clone(),
                    subsection: sub.clone(),
                    key,
                    value,
                });
            }
            _ => return Err((lx.line, "expected a [section] header, a key or a comment")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use tempfile::TempDir;

    use PlaceholderKind::{Dir, File};

    /// A scratch area with a fake $HOME; every git call sees only it.
    struct Fx {
        _tmp: TempDir,
        base: PathBuf,
        home: PathBuf,
    }

    impl Fx {
        fn new() -> Fx {
            let tmp = tempfile::tempdir().unwrap();
            let base = fs::canonicalize(tmp.path()).unwrap();
            let home = base.join("home");
            fs::create_dir(&home).unwrap();
            Fx {
                _tmp: tmp,
                base,
                home,
            }
        }

        fn git(&self, dir: &Path, args: &[&str]) {
            let mut cmd = Command::new("git");
            for (k, _) in std::env::vars_os() {
                if k.to_string_lossy().starts_with("GIT_") {
                    cmd.env_remove(k);
                }
            }
            let out = cmd
                .current_dir(dir)
                .env("HOME", &self.home)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
                .args([
                    "-c",
                    "init.defaultBranch=main",
                    "-c",
                    "protocol.file.allow=always",
                ])
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "git {args:?} in {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }

        /// A repository with one commit.
        fn repo(&self, rel: &str) -> PathBuf {
            let dir = self.base.join(rel);
            fs::create_dir_all(&dir).unwrap();
            self.git(&dir, &["init", "-q"]);
            self.git(&dir, &["commit", "-q", "--allow-empty", "-m", "init"]);
            dir
        }

        fn inspect(&self, launch: &Path) -> Result<GitView> {
            inspect(launch, &self.home)
        }

        fn layout(&self, launch: &Path) -> GitLayout {
            match self.inspect(launch).unwrap() {
                GitView::Repo(layout) => layout,
                other => panic!("expected a repo at {}, got {other:?}", launch.display()),
            }
        }
    }

    /// What every full git dir gets when git made it and nobody touched it.
    fn gitdir_ro(g: &Path) -> Vec<PathBuf> {
        vec![g.join("config"), g.join("hooks")]
    }
    fn gitdir_placeholders(g: &Path) -> Vec<(PathBuf, PlaceholderKind)> {
        vec![
            (g.join("config.worktree"), File),
            (g.join("objects/info/alternates"), File),
        ]
    }
    fn gitdir_pins(g: &Path) -> Vec<PathBuf> {
        vec![g.join("objects"), g.join("objects/info")]
    }

    fn assert_parents_first(list: &[PathBuf]) {
        for (i, p) in list.iter().enumerate() {
            for later in &list[i + 1..] {
                assert!(
                    !p.starts_with(later),
                    "{} comes before its parent {}",
                    p.display(),
                    later.display()
                );
            }
        }
    }

    #[test]
    fn no_repo() {
        let fx = Fx::new();
        let dir = fx.base.join("plain");
        fs::create_dir(&dir).unwrap();
        assert_eq!(fx.inspect(&dir).unwrap(), GitView::NoRepo);
    }

    #[test]
    fn plain_repo_at_root_and_subdir() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        let c = root.join(".git");
        let sub = root.join("src/deep");
        fs::create_dir_all(&sub).unwrap();
        let mut rw = vec![c.clone()];
        rw.extend(gitdir_pins(&c));
        let expected = GitLayout {
            root: root.clone(),
            rw_dirs: rw,
            ro_paths: gitdir_ro(&c),
            placeholders: gitdir_placeholders(&c),
            notes: vec![],
        };
        assert_eq!(fx.layout(&root), expected);
        assert_eq!(fx.layout(&sub), expected);
    }

    #[test]
    fn repo_at_home_is_refused_below_home_and_exposed_at_home() {
        let fx = Fx::new();
        fx.git(&fx.home, &["init", "-q"]);
        let proj = fx.home.join("proj");
        fs::create_dir(&proj).unwrap();
        match fx.inspect(&proj).unwrap() {
            GitView::Refused { root, warning } => {
                assert_eq!(root, fx.home);
                assert!(
                    warning.contains(&fx.home.display().to_string()),
                    "{warning}"
                );
                assert!(warning.contains("home directory"), "{warning}");
            }
            other => panic!("expected Refused, got {other:?}"),
        }
        let layout = fx.layout(&fx.home);
        assert_eq!(layout.rw_dirs[0], fx.home.join(".git"));
    }

    #[test]
    fn repo_above_home_is_refused_even_from_home() {
        let fx = Fx::new();
        fx.git(&fx.base, &["init", "-q"]);
        for launch in [&fx.home, &fx.base] {
            match fx.inspect(launch).unwrap() {
                GitView::Refused { root, warning } if launch == &fx.home => {
                    assert_eq!(root, fx.base);
                    assert!(
                        warning.contains("contains your home directory"),
                        "{warning}"
                    );
                }
                GitView::Refused { root, .. } => assert_eq!(root, fx.base),
                other => panic!("expected Refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn linked_worktree_outside_the_tree() {
        let fx = Fx::new();
        let main = fx.repo("main");
        fx.git(&main, &["worktree", "add", "-q", "-b", "feat", "../wt"]);
        let wt = fx.base.join("wt");
        let c = main.join(".git");
        let w = c.join("worktrees/wt");
        let mut rw = vec![c.clone(), c.join("worktrees"), w.clone()];
        rw.extend(gitdir_pins(&c));
        rw.sort();
        let mut ro = gitdir_ro(&c);
        ro.extend([w.join("commondir"), w.join("gitdir"), wt.join(".git")]);
        ro.sort();
        let mut ph = gitdir_placeholders(&c);
        ph.push((w.join("config.worktree"), File));
        ph.sort();
        assert_eq!(
            fx.layout(&wt),
            GitLayout {
                root: wt.clone(),
                rw_dirs: rw.clone(),
                ro_paths: ro.clone(),
                placeholders: ph.clone(),
                notes: vec![],
            }
        );
        // From the main checkout the worktree's `.git` file is protected too: harmless there.
        let from_main = fx.layout(&main);
        assert_eq!(from_main.rw_dirs, rw);
        assert_eq!(from_main.ro_paths, ro);
        assert_eq!(from_main.placeholders, ph);
    }

    /// super → vendor/lib1 → deps/lib2; module names contain `/`.
    fn nested_submodules(fx: &Fx) -> PathBuf {
        let lib2 = fx.repo("lib2");
        let lib1 = fx.repo("lib1");
        fx.git(
            &lib1,
            &[
                "submodule",
                "add",
                "-q",
                lib2.to_str().unwrap(),
                "deps/lib2",
            ],
        );
        fx.git(&lib1, &["commit", "-q", "-m", "add lib2"]);
        let sup = fx.repo("super");
        fx.git(
            &sup,
            &[
                "submodule",
                "add",
                "-q",
                lib1.to_str().unwrap(),
                "vendor/lib1",
            ],
        );
        fx.git(&sup, &["commit", "-q", "-m", "add lib1"]);
        fx.git(
            &sup,
            &["submodule", "update", "-q", "--init", "--recursive"],
        );
        sup
    }

    #[test]
    fn nested_submodules_two_levels() {
        let fx = Fx::new();
        let sup = nested_submodules(&fx);
        let c = sup.join(".git");
        let m1 = c.join("modules/vendor/lib1");
        let m2 = m1.join("modules/deps/lib2");
        let lib1 = sup.join("vendor/lib1");
        let lib2 = lib1.join("deps/lib2");
        assert!(
            m2.join("HEAD").is_file(),
            "fixture: nested module git dir missing"
        );

        let mut rw = vec![
            c.clone(),
            c.join("modules"),
            c.join("modules/vendor"),
            m1.clone(),
            m1.join("modules"),
            m1.join("modules/deps"),
            m2.clone(),
            sup.join("vendor"),
            lib1.clone(),
            lib1.join("deps"),
            lib2.clone(),
        ];
        let mut ro = vec![lib1.join(".git"), lib2.join(".git")];
        let mut ph = Vec::new();
        for g in [&c, &m1, &m2] {
            rw.extend(gitdir_pins(g));
            ro.extend(gitdir_ro(g));
            ph.extend(gitdir_placeholders(g));
        }
        rw.sort();
        ro.sort();
        ph.sort();
        let layout = fx.layout(&sup);
        assert_eq!(layout.rw_dirs, rw);
        assert_eq!(layout.ro_paths, ro);
        assert_eq!(layout.placeholders, ph);
        assert_eq!(layout.notes, Vec::<String>::new());
        assert_parents_first(&layout.rw_dirs);
        assert_parents_first(&layout.ro_paths);
    }

    #[test]
    fn launched_inside_a_submodule() {
        let fx = Fx::new();
        let sup = nested_submodules(&fx);
        let lib1 = sup.join("vendor/lib1");
        let m1 = sup.join(".git/modules/vendor/lib1");
        let m2 = m1.join("modules/deps/lib2");
        let layout = fx.layout(&lib1);
        assert_eq!(layout.root, lib1);
        // The superproject's git dir stays out of reach; only the submodule's is granted.
        assert_eq!(layout.rw_dirs[0], m1);
        assert!(!layout.rw_dirs.contains(&sup.join(".git")));
        for p in [
            lib1.join(".git"),
            lib1.join("deps/lib2/.git"),
            m1.join("config"),
            m1.join("hooks"),
            m2.join("config"),
            m2.join("hooks"),
        ] {
            assert!(
                layout.ro_paths.contains(&p),
                "{} not protected",
                p.display()
            );
        }
    }

    #[test]
    fn missing_hooks_dir_gets_a_placeholder() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        let c = root.join(".git");
        fs::remove_dir_all(c.join("hooks")).unwrap();
        let layout = fx.layout(&root);
        assert_eq!(layout.ro_paths, vec![c.join("config")]);
        assert_eq!(
            layout.placeholders,
            vec![
                (c.join("config.worktree"), File),
                (c.join("hooks"), Dir),
                (c.join("objects/info/alternates"), File),
            ]
        );
    }

    #[test]
    fn missing_objects_info_becomes_a_dir_placeholder() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        let c = root.join(".git");
        fs::remove_dir_all(c.join("objects/info")).unwrap();
        let layout = fx.layout(&root);
        assert!(layout.placeholders.contains(&(c.join("objects/info"), Dir)));
        assert_eq!(layout.rw_dirs, vec![c.clone(), c.join("objects")]);
    }

    #[test]
    fn hooks_path_inside_the_tree() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        let c = root.join(".git");
        fx.git(&root, &["config", "core.hooksPath", "tools/hooks"]);
        // Missing: the topmost missing directory is held by a read-only placeholder.
        let layout = fx.layout(&root);
        assert!(
            layout.placeholders.contains(&(root.join("tools"), Dir)),
            "{layout:?}"
        );

        // Existing: bound read-only, and `tools` is pinned so it cannot be renamed away.
        fs::create_dir_all(root.join("tools/hooks")).unwrap();
        let layout = fx.layout(&root);
        let mut ro = gitdir_ro(&c);
        ro.push(root.join("tools/hooks"));
        ro.sort();
        assert_eq!(layout.ro_paths, ro);
        assert!(layout.rw_dirs.contains(&root.join("tools")));
        assert_eq!(layout.placeholders, gitdir_placeholders(&c));
    }

    #[test]
    fn hooks_path_outside_or_covering_the_tree() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        let elsewhere = fx.base.join("shared-hooks");
        fs::create_dir(&elsewhere).unwrap();
        fx.git(
            &root,
            &["config", "core.hooksPath", elsewhere.to_str().unwrap()],
        );
        let layout = fx.layout(&root);
        assert!(!layout.ro_paths.contains(&elsewhere));
        assert_eq!(layout.notes.len(), 1, "{:?}", layout.notes);
        assert!(
            layout.notes[0].contains("core.hookspath"),
            "{:?}",
            layout.notes
        );

        // Hooks in the working tree's top dir cannot be protected: refuse to start.
        fx.git(&root, &["config", "core.hooksPath", "."]);
        let err = fx.inspect(&root).unwrap_err();
        assert!(matches!(err, GitError::CoversWritable { .. }), "{err}");
        // ... but from a subdirectory the agent cannot write there, so it is only noted.
        let sub = root.join("src");
        fs::create_dir(&sub).unwrap();
        let layout = fx.layout(&sub);
        assert!(!layout.ro_paths.contains(&root));
        assert!(
            layout.notes.iter().any(|n| n.contains("contains")),
            "{:?}",
            layout.notes
        );
    }

    #[test]
    fn include_path_inside_the_tree() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        // Relative to the including file: .git/../extra.gitconfig
        fx.git(&root, &["config", "include.path", "../extra.gitconfig"]);
        let layout = fx.layout(&root);
        assert!(
            layout
                .placeholders
                .contains(&(root.join("extra.gitconfig"), File))
        );

        // An existing include is protected, and what it sets is followed.
        fs::write(
            root.join("extra.gitconfig"),
            "[core]\n\thooksPath = .githooks\n",
        )
        .unwrap();
        let layout = fx.layout(&root);
        assert!(layout.ro_paths.contains(&root.join("extra.gitconfig")));
        assert!(layout.placeholders.contains(&(root.join(".githooks"), Dir)));
    }

    #[test]
    fn program_named_by_config_inside_the_tree() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        fs::create_dir(root.join("scripts")).unwrap();
        fs::write(root.join("scripts/fsmon.sh"), "#!/bin/sh\n").unwrap();
        fx.git(&root, &["config", "core.fsmonitor", "./scripts/fsmon.sh"]);
        fx.git(&root, &["config", "alias.x", "!scripts/x.sh --flag"]);
        fx.git(&root, &["config", "core.pager", "less -R"]);
        let layout = fx.layout(&root);
        assert!(layout.ro_paths.contains(&root.join("scripts/fsmon.sh")));
        assert!(
            layout
                .placeholders
                .contains(&(root.join("scripts/x.sh"), File))
        );
        assert!(layout.rw_dirs.contains(&root.join("scripts")));
    }

    #[test]
    fn planted_pointer_at_a_non_git_dir_is_refused() {
        let fx = Fx::new();
        let ssh = fx.home.join(".ssh");
        fs::create_dir(&ssh).unwrap();
        fs::write(ssh.join("id_ed25519"), "secret").unwrap();
        let proj = fx.base.join("proj");
        fs::create_dir(&proj).unwrap();
        fs::write(proj.join(".git"), format!("gitdir: {}\n", ssh.display())).unwrap();
        let err = fx.inspect(&proj).unwrap_err();
        assert!(matches!(err, GitError::NotAGitDir { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&ssh.display().to_string()) && msg.contains("Fix:"),
            "{msg}"
        );

        fs::write(proj.join(".git"), "gitdir: ../nowhere\n").unwrap();
        let err = fx.inspect(&proj).unwrap_err();
        assert!(matches!(err, GitError::DanglingPointer { .. }), "{err}");

        fs::write(proj.join(".git"), "nonsense\n").unwrap();
        let err = fx.inspect(&proj).unwrap_err();
        assert!(matches!(err, GitError::BadPointer { .. }), "{err}");
    }

    #[test]
    fn planted_pointer_at_another_repos_git_dir_is_refused() {
        let fx = Fx::new();
        let other = fx.repo("other");
        fx.git(
            &other,
            &["worktree", "add", "-q", "-b", "side", "../other-wt"],
        );
        let proj = fx.base.join("proj");
        fs::create_dir(&proj).unwrap();

        // A worktree git dir whose back-link names the other checkout.
        let wt_gitdir = other.join(".git/worktrees/other-wt");
        fs::write(
            proj.join(".git"),
            format!("gitdir: {}\n", wt_gitdir.display()),
        )
        .unwrap();
        let err = fx.inspect(&proj).unwrap_err();
        assert!(matches!(err, GitError::BacklinkMismatch { .. }), "{err}");

        // A main git dir that does not name this tree as core.worktree.
        fs::write(
            proj.join(".git"),
            format!("gitdir: {}\n", other.join(".git").display()),
        )
        .unwrap();
        let err = fx.inspect(&proj).unwrap_err();
        assert!(matches!(err, GitError::ForeignGitDir { .. }), "{err}");
    }

    #[test]
    fn planted_commondir_is_refused() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        let evil = fx.repo("proj/evil");
        fs::write(root.join(".git/commondir"), "../evil/.git\n").unwrap();
        let err = fx.inspect(&root).unwrap_err();
        assert!(matches!(err, GitError::StrayCommondir { .. }), "{err}");

        // Same in a submodule git dir reached by the walk.
        fs::remove_file(root.join(".git/commondir")).unwrap();
        let module = root.join(".git/modules/m");
        fs::create_dir_all(module.join("objects")).unwrap();
        fs::write(module.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(
            module.join("commondir"),
            format!("{}\n", evil.join(".git").display()),
        )
        .unwrap();
        let err = fx.inspect(&root).unwrap_err();
        assert!(matches!(err, GitError::StrayCommondir { .. }), "{err}");
    }

    #[test]
    fn symlinked_hooks_dir_is_refused() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        let hooks = root.join(".git/hooks");
        fs::remove_dir_all(&hooks).unwrap();
        fs::create_dir(root.join("myhooks")).unwrap();
        std::os::unix::fs::symlink("../myhooks", &hooks).unwrap();
        let err = fx.inspect(&root).unwrap_err();
        assert!(
            matches!(err, GitError::Symlink { ref link, .. } if *link == hooks),
            "{err}"
        );
    }

    #[test]
    fn symlinked_dot_git_is_refused() {
        let fx = Fx::new();
        let real = fx.repo("real");
        let proj = fx.base.join("proj");
        fs::create_dir(&proj).unwrap();
        std::os::unix::fs::symlink(real.join(".git"), proj.join(".git")).unwrap();
        let err = fx.inspect(&proj).unwrap_err();
        assert!(matches!(err, GitError::SymlinkedDotGit { .. }), "{err}");
    }

    #[test]
    fn bare_repository() {
        let fx = Fx::new();
        let bare = fx.base.join("bare.git");
        fs::create_dir(&bare).unwrap();
        fx.git(&bare, &["init", "-q", "--bare"]);
        let layout = fx.layout(&bare);
        assert_eq!(layout.root, bare);
        assert_eq!(layout.ro_paths, gitdir_ro(&bare));
        assert_eq!(layout.placeholders, gitdir_placeholders(&bare));
        // From inside the git dir, hooks are still read-only.
        let layout = fx.layout(&bare.join("refs"));
        assert_eq!(layout.ro_paths, gitdir_ro(&bare));
    }

    #[test]
    fn gitmodules_paths_that_escape_are_noted() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        fs::write(
            root.join(".gitmodules"),
            "[submodule \"x\"]\n\tpath = ../outside\n\turl = ./x\n",
        )
        .unwrap();
        fs::create_dir(fx.base.join("outside")).unwrap();
        fs::write(fx.base.join("outside/.git"), "gitdir: somewhere\n").unwrap();
        let layout = fx.layout(&root);
        assert!(!layout.ro_paths.contains(&fx.base.join("outside/.git")));
        assert!(
            layout
                .notes
                .iter()
                .any(|n| n.contains("not a directory inside the working tree")),
            "{:?}",
            layout.notes
        );
    }

    /// Regression: `.gitmodules` entries that lead back to the same tree made the walk
    /// exponential (N entries, 32 levels).
    #[test]
    fn gitmodules_listing_the_same_tree_many_times_stays_linear() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("a/.git"), "gitdir: ../.git\n").unwrap();
        let mut gm = String::new();
        for i in 0..200 {
            gm.push_str(&format!(
                "[submodule \"s{i}\"]\n\tpath = ./.\n[submodule \"t{i}\"]\n\tpath = a\n"
            ));
        }
        fs::write(root.join(".gitmodules"), &gm).unwrap();
        fs::write(root.join("a/.gitmodules"), &gm).unwrap();
        let started = std::time::Instant::now();
        let layout = fx.layout(&root);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(layout.ro_paths.contains(&root.join("a/.git")));
        assert!(
            layout
                .notes
                .iter()
                .any(|n| n.contains("not a directory inside the working tree"))
        );
    }

    #[test]
    fn identity_in_config_needs_both_keys_and_trusts_includes() {
        let tmp = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = tmp.path().join(name);
            fs::write(&p, text).unwrap();
            p
        };
        let name_only = write("a", "[user]\n\tname = A\n\temail =\n");
        let email = write(
            "b",
            "[User]\n\tEmail = b@example.org\n[other]\n\tname = x\n",
        );
        let include = write("c", "[include]\n\tpath = elsewhere\n");
        let missing = tmp.path().join("missing");
        assert_eq!(
            identity_in_config(std::slice::from_ref(&name_only)),
            (true, false)
        );
        assert_eq!(
            identity_in_config(&[name_only, email, missing.clone()]),
            (true, true)
        );
        assert_eq!(identity_in_config(&[include]), (true, true));
        assert_eq!(identity_in_config(&[missing]), (false, false));
    }

    #[test]
    fn unreadable_config_is_an_error() {
        let fx = Fx::new();
        let root = fx.repo("proj");
        fs::write(root.join(".git/config"), "[core\n").unwrap();
        let err = fx.inspect(&root).unwrap_err();
        assert!(matches!(err, GitError::BadConfig { line: 1, .. }), "{err}");
    }

    #[test]
    fn parse_config_follows_git() {
        let src = b"\xEF\xBB\xBF# comment\n[core]\n\thooksPath = \"a b\"  # trailing\n\
                    [Include] PATH=x\\\n y ;c\n[includeIf \"gitdir:~/w/\"]\npath = ~/w.cfg\n\
                    [Sub.Sect]\nflag\r\nkey = \\t\\\"q\\\\ \n";
        let entries = parse_config(src).unwrap();
        let got: Vec<(String, Option<String>, String, Option<String>)> = entries
            .into_iter()
            .map(|e| {
                (
                    e.section,
                    e.subsection.map(|s| String::from_utf8(s).unwrap()),
                    e.key,
                    e.value.map(|v| String::from_utf8(v).unwrap()),
                )
            })
            .collect();
        let s = |x: &str| x.to_string();
        assert_eq!(
            got,
            vec![
                (s("core"), None, s("hookspath"), Some(s("a b"))),
                (s("include"), None, s("path"), Some(s("x y"))),
                (
                    s("includeif"),
                    Some(s("gitdir:~/w/")),
                    s("path"),
                    Some(s("~/w.cfg"))
                ),
                (s("sub"), Some(s("sect")), s("flag"), None),
                (s("sub"), Some(s("sect")), s("key"), Some(s("\t\"q\\"))),
            ]
        );
        assert_eq!(
            parse_config(b"key = v\n"),
            Err((1, "a key appears before any [section] header"))
        );
        assert!(parse_config(b"[a]\nk = \"open\n").is_err());
        assert!(parse_config(b"[a]\nk = \\q\n").is_err());
    }

    #[test]
    fn program_paths() {
        let e = |section: &str, sub: Option<&str>, key: &str| Entry {
            section: section.into(),
            subsection: sub.map(|s| s.as_bytes().to_vec()),
            key: key.into(),
            value: None,
        };
        let p = |entry: Entry, v: &'static str| {
            program_path(&entry, v.as_bytes()).map(|b| String::from_utf8_lossy(b).into_owned())
        };
        assert_eq!(
            p(e("core", None, "fsmonitor"), "./fs.sh"),
            Some("./fs.sh".into())
        );
        assert_eq!(p(e("core", None, "fsmonitor"), "true"), None);
        assert_eq!(
            p(e("alias", None, "x"), "!\"tools/a b\" c"),
            Some("tools/a b".into())
        );
        assert_eq!(p(e("alias", None, "x"), "log --oneline"), None);
        assert_eq!(
            p(e("filter", Some("lfs"), "clean"), "git-lfs clean -- %f"),
            None
        );
        assert_eq!(
            p(e("filter", Some("x"), "smudge"), "bin/smudge %f"),
            Some("bin/smudge".into())
        );
        assert_eq!(p(e("credential", None, "helper"), "store --file x/y"), None);
    }
}
