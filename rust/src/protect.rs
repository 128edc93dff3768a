//! Keeping paths read-only inside directories the sandbox may write: git's protected paths
//! (`git`), the paths the user declares read-only, and the files and directories that programs
//! on the host run or obey ([`HOST_CONFIG`], plus the caller's `PATH` directories). The same
//! three tools serve all of them.
//!
//! # Pins
//! A read-only bind makes its path a mount point, which cannot be renamed or removed, but the
//! directories *above* it still can: with `.vscode/tasks.json` bound read-only in a writable
//! project the agent could `mv .vscode .vscode.old && mkdir .vscode` and write a fresh
//! `tasks.json`. So every directory between the writable root and a protected path is bound
//! onto itself read-write — granting nothing new, but pinning it in place ([`pins`]). Pinned,
//! the path also cannot be swapped for a symlink by another session while bwrap binds below it.
//!
//! # Placeholders
//! A protected path that does not exist gets an empty file or directory created on the host
//! first, so that it can be bound read-only and the agent cannot create it. Only where an
//! empty one changes nothing for the host program ([`Hold`]). Missing directories on the way
//! are created as plain ones and pinned.
//!
//! # Host programs' paths
//! [`plan`] decides, for the read-write roots the list applies to, which of [`HOST_CONFIG`]
//! and the `PATH` directories to keep read-only. Pure: the filesystem comes in as `lstat`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PlaceholderKind {
    Dir,
    File,
}

/// Directories strictly between the deepest of `roots` that holds `path` and `path`: what must
/// be bound onto itself so that `path` cannot be moved away. Empty when no root holds it.
pub fn pins<'a>(roots: impl IntoIterator<Item = &'a Path>, path: &Path) -> Vec<PathBuf> {
    let anchor = roots
        .into_iter()
        .filter(|w| path.starts_with(w) && path != *w)
        .max_by_key(|w| w.components().count());
    let Some(anchor) = anchor else {
        return Vec::new();
    };
    path.ancestors()
        .skip(1)
        .take_while(|d| *d != anchor)
        .map(Path::to_path_buf)
        .collect()
}

/// Two requests for one placeholder: a directory keeps both uses blocked (nothing can be
/// created inside or in its place).
pub fn merge_kind(old: Option<PlaceholderKind>, new: PlaceholderKind) -> PlaceholderKind {
    match old {
        Some(old) if old != new => PlaceholderKind::Dir,
        _ => new,
    }
}

/// The protected set, reduced to what must be mounted: nothing below a read-only path (it is
/// read-only already), and no pin that is itself read-only. Each list sorted, so parents come
/// before children.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settled {
    pub ro: Vec<PathBuf>,
    pub placeholders: Vec<(PathBuf, PlaceholderKind)>,
    pub pins: Vec<PathBuf>,
}

pub fn settle(
    ro: &BTreeSet<PathBuf>,
    placeholders: BTreeMap<PathBuf, PlaceholderKind>,
    pins: BTreeSet<PathBuf>,
) -> Settled {
    let under_ro = |p: &Path| ro.iter().any(|r| p != r && p.starts_with(r));
    Settled {
        ro: ro.iter().filter(|p| !under_ro(p)).cloned().collect(),
        placeholders: placeholders
            .into_iter()
            .filter(|(p, _)| !under_ro(p))
            .collect(),
        pins: pins
            .into_iter()
            .filter(|p| !under_ro(p) && !ro.contains(p))
            .collect(),
    }
}

/// How a missing entry of [`HOST_CONFIG`] is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// An empty directory in its place changes nothing.
    Dir,
    /// An empty file in its place changes nothing.
    File,
    /// One of [`BASH_LOGIN`]: bash runs only the first of them that exists, so an empty one is
    /// harmless only if an earlier one exists or no later one does.
    BashLogin,
}

/// The files a bash login shell looks for, in order; it runs the first that exists.
pub const BASH_LOGIN: &[&str] = &[".bash_profile", ".bash_login", ".profile"];

/// A path, relative to `$HOME`, that a program on the host runs or obeys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostConfig {
    pub rel: &'static str,
    pub hold: Hold,
    /// Why it matters, for the warning.
    pub why: &'static str,
}

const fn hc(rel: &'static str, hold: Hold, why: &'static str) -> HostConfig {
    HostConfig { rel, hold, why }
}

/// The one list of paths in `$HOME` that programs on the host run or obey. A declared
/// read-write path that is, holds or lies in one of them gets it read-only (warned, and
/// granted only by `rwHostConfig`); so does the launch directory.
pub const HOST_CONFIG: &[HostConfig] = &[
    hc(
        ".gitconfig",
        Hold::File,
        "git obeys it in every repository: fsmonitor, hooksPath, aliases",
    ),
    hc(
        ".config/git",
        Hold::Dir,
        "git's global config, attributes and ignore rules",
    ),
    hc(
        ".bashrc",
        Hold::File,
        "bash runs it in every interactive shell",
    ),
    hc(".bash_profile", Hold::BashLogin, "bash runs it at login"),
    hc(".bash_login", Hold::BashLogin, "bash runs it at login"),
    hc(".profile", Hold::BashLogin, "login shells run it"),
    hc(".bash_logout", Hold::File, "bash runs it at logout"),
    hc(".zshenv", Hold::File, "zsh runs it in every shell"),
    hc(".zprofile", Hold::File, "zsh runs it at login"),
    hc(
        ".zshrc",
        Hold::File,
        "zsh runs it in every interactive shell",
    ),
    hc(".zlogin", Hold::File, "zsh runs it at login"),
    hc(".zlogout", Hold::File, "zsh runs it at logout"),
    hc(
        ".config/fish",
        Hold::Dir,
        "fish runs config.fish, conf.d and functions from it",
    ),
    hc(
        ".config/systemd",
        Hold::Dir,
        "systemd runs the user units in it",
    ),
    hc(
        ".local/share/systemd",
        Hold::Dir,
        "systemd runs the user units in it",
    ),
    hc(
        ".config/autostart",
        Hold::Dir,
        "the desktop session starts the entries in it",
    ),
    hc(
        ".config/environment.d",
        Hold::Dir,
        "systemd sets the session's environment from it",
    ),
    hc(
        ".ssh",
        Hold::Dir,
        "ssh obeys config, sshd runs rc and accepts authorized_keys",
    ),
    hc(
        ".pam_environment",
        Hold::File,
        "PAM sets the login environment from it",
    ),
    hc(
        ".xprofile",
        Hold::File,
        "display managers run it at graphical login",
    ),
    hc(
        ".xsessionrc",
        Hold::File,
        "the X session runs it at graphical login",
    ),
    hc("bin", Hold::Dir, "~/.profile puts it on PATH"),
    hc(".local/bin", Hold::Dir, "~/.profile puts it on PATH"),
];

/// Why a `PATH` directory is kept.
pub const ON_PATH: &str = "on your PATH: your shell runs what is planted there";
pub const LINKED_FROM_PATH: &str =
    "a program on your PATH links to it: your shell runs what is changed there";
/// Why agent-sandbox's own executables are kept.
pub const OWN_EXE: &str =
    "agent-sandbox itself: the next launch runs it on your host, outside any sandbox";

/// What `lstat` finds at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    /// Anything else that is not a symlink.
    File,
    Link(PathBuf),
    Missing,
}

/// The host paths the sandbox may write and those it only reads (sources bound at their own
/// path). A path's mode is that of the deepest of them holding it; read-only wins a tie.
#[derive(Debug, Clone, Default)]
pub struct Binds {
    pub rw: Vec<PathBuf>,
    pub ro: Vec<PathBuf>,
}

impl Binds {
    fn deepest(&self, p: &Path, strict: bool) -> Option<(&Path, bool)> {
        let holds = |b: &&PathBuf| p.starts_with(b) && !(strict && p == b.as_path());
        let rw = self.rw.iter().filter(holds).map(|b| (b.as_path(), true));
        let ro = self.ro.iter().filter(holds).map(|b| (b.as_path(), false));
        // `max_by_key` keeps the last maximum: read-only, chained last, wins a tie.
        rw.chain(ro).max_by_key(|(b, _)| b.components().count())
    }

    pub fn writable(&self, p: &Path) -> bool {
        self.deepest(p, false).is_some_and(|(_, rw)| rw)
    }

    /// Pins for a path about to be bound read-only: none if it lies in a read-only region.
    pub fn pins(&self, p: &Path) -> Vec<PathBuf> {
        match self.deepest(p, true) {
            Some((anchor, true)) => pins([anchor], p),
            _ => Vec::new(),
        }
    }
}

/// The request of [`plan`].
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub binds: Binds,
    /// Declared read-only paths (bound already): only pinned.
    pub pin_only: Vec<PathBuf>,
    /// Canonical `$HOME`.
    pub home: PathBuf,
    /// Read-write roots that [`HOST_CONFIG`] applies to: the declared ones and the launch
    /// directory.
    pub config_roots: Vec<PathBuf>,
    /// Read-write roots that `PATH` directories are kept in: the declared ones, and the launch
    /// directory when it is `$HOME` (a project's own `.venv/bin` stays writable, and warned).
    pub path_roots: Vec<PathBuf>,
    /// The caller's `PATH` directories, absolute, with existing parts resolved.
    pub path_dirs: Vec<PathBuf>,
    /// What the links in those directories lead to (the program, or its version or package
    /// directory), resolved: kept read-only in `path_roots` like the directories themselves.
    pub path_targets: Vec<PathBuf>,
    /// agent-sandbox's own executables (the helper, the init): the next launch runs them on
    /// the host, the init also as the namespace holder outside any sandbox. Kept read-only in
    /// `path_roots` like `path_targets`.
    pub own_exes: Vec<PathBuf>,
    /// `rwHostConfig`: kept writable, with everything below (lexical and resolved forms).
    pub exempt: Vec<PathBuf>,
}

/// A path kept read-only, for the warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub path: PathBuf,
    pub why: String,
    /// Created empty to hold its place.
    pub created: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Protected {
    pub settled: Settled,
    /// Missing directories on the way to a placeholder: created (parents first), then pinned.
    pub made: Vec<PathBuf>,
    pub kept: Vec<Kept>,
}

enum Walk {
    Exists(PathBuf),
    Missing {
        first: PathBuf,
        full: PathBuf,
    },
    /// A file on the way, or a symlink loop: nothing can be created there.
    Unreachable,
    /// A symlink on the way in a writable directory: the agent could repoint it.
    WritableLink(PathBuf),
}

/// Resolves the absolute, lexically normal `path` one component at a time, as the kernel
/// would for a host program.
fn walk(path: &Path, binds: &Binds, lstat: &dyn Fn(&Path) -> Node) -> Walk {
    let mut cur = PathBuf::from("/");
    let mut todo: VecDeque<PathBuf> = names(path).collect();
    let mut hops = 0;
    while let Some(name) = todo.pop_front() {
        if name == Path::new("..") {
            // `cur` holds no symlinks, so popping is the physical parent.
            cur.pop();
            continue;
        }
        let next = cur.join(&name);
        match lstat(&next) {
            Node::Dir => cur = next,
            Node::File if todo.is_empty() => cur = next,
            Node::File => return Walk::Unreachable,
            Node::Missing => {
                let mut full = next.clone();
                for n in todo {
                    if n == Path::new("..") {
                        return Walk::Unreachable;
                    }
                    full.push(n);
                }
                return Walk::Missing { first: next, full };
            }
            Node::Link(target) => {
                if binds.writable(&cur) {
                    return Walk::WritableLink(next);
                }
                hops += 1;
                // Same bound as the kernel's MAXSYMLINKS.
                if hops > 40 {
                    return Walk::Unreachable;
                }
                if target.is_absolute() {
                    cur = PathBuf::from("/");
                }
                let mut spliced: VecDeque<PathBuf> = names(&target).collect();
                spliced.extend(todo);
                todo = spliced;
            }
        }
    }
    Walk::Exists(cur)
}

fn names(p: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    p.components().filter_map(|c| match c {
        Component::Normal(n) => Some(PathBuf::from(n)),
        Component::ParentDir => Some(PathBuf::from("..")),
        _ => None,
    })
}

/// Which of [`HOST_CONFIG`] and `PATH` directories to keep read-only, and the pins of the
/// declared read-only paths. `Err` lists what cannot be protected (fail closed).
pub fn plan(req: &Request, lstat: &dyn Fn(&Path) -> Node) -> Result<Protected, String> {
    let mut ro: BTreeSet<PathBuf> = BTreeSet::new();
    let mut placeholders: BTreeMap<PathBuf, PlaceholderKind> = BTreeMap::new();
    let mut pins: BTreeSet<PathBuf> = BTreeSet::new();
    let mut made: BTreeSet<PathBuf> = BTreeSet::new();
    let mut kept: Vec<Kept> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    for p in &req.pin_only {
        pins.extend(req.binds.pins(p));
    }
    let table = HOST_CONFIG
        .iter()
        .map(|h| (req.home.join(h.rel), h.hold, h.why, &req.config_roots));
    let path = req
        .path_dirs
        .iter()
        .map(|d| (d.clone(), Hold::Dir, ON_PATH, &req.path_roots))
        .chain(
            req.path_targets
                .iter()
                .map(|t| (t.clone(), Hold::File, LINKED_FROM_PATH, &req.path_roots)),
        )
        .chain(
            req.own_exes
                .iter()
                .map(|t| (t.clone(), Hold::File, OWN_EXE, &req.path_roots)),
        );
    let exempt = |p: &Path| req.exempt.iter().any(|e| p.starts_with(e));
    for (lexical, hold, why, roots) in table.chain(path) {
        if exempt(&lexical) {
            continue;
        }
        let (target, missing) = match walk(&lexical, &req.binds, lstat) {
            Walk::Exists(p) => (p, None),
            Walk::Missing { first, full } => (full, Some(first)),
            Walk::Unreachable => continue,
            Walk::WritableLink(link) => {
                problems.push(format!(
                    "{} is a symlink in a directory the sandbox can write, on the way to {} ({why}): the agent could replace the link with a directory of its own. Fix: replace the link with what it points to, or declare narrower read-write paths",
                    link.display(),
                    lexical.display()
                ));
                continue;
            }
        };
        // A declared root inside the protected path is the part the agent could write.
        let Some(subject) = roots.iter().find_map(|r| {
            if target.starts_with(r) {
                Some(target.clone())
            } else if r.starts_with(&target) && missing.is_none() {
                Some(r.clone())
            } else {
                None
            }
        }) else {
            continue;
        };
        if exempt(&subject) {
            continue;
        }
        match missing {
            None => {
                if !req.binds.writable(&subject) || ro.contains(&subject) {
                    continue;
                }
                pins.extend(req.binds.pins(&subject));
                ro.insert(subject.clone());
                kept.push(Kept {
                    path: subject,
                    why: why.to_string(),
                    created: false,
                });
            }
            Some(first) => {
                if !first.parent().is_some_and(|d| req.binds.writable(d)) {
                    continue;
                }
                let kind = match hold {
                    Hold::Dir => PlaceholderKind::Dir,
                    Hold::File => PlaceholderKind::File,
                    Hold::BashLogin => {
                        if let Some(shadowed) = bash_shadowed(&req.home, &subject, lstat) {
                            problems.push(format!(
                                "{} does not exist, and the sandbox could keep the agent from creating it only by creating it empty, but bash would then run the empty file at login instead of {} (it runs the first of ~/{} that exists). Fix: create it yourself, e.g. `printf '. {}\\n' > {}` (bash then runs the same as now), or declare narrower read-write paths",
                                subject.display(),
                                shadowed.display(),
                                BASH_LOGIN.join(", ~/"),
                                shadowed.display(),
                                subject.display()
                            ));
                            continue;
                        }
                        PlaceholderKind::File
                    }
                };
                if placeholders.contains_key(&subject) {
                    continue;
                }
                // The directories on the way are created as plain ones (the agent may use
                // them), and pinned like the existing ones.
                let (new, old): (Vec<PathBuf>, Vec<PathBuf>) = req
                    .binds
                    .pins(&subject)
                    .into_iter()
                    .partition(|d| d.starts_with(&first));
                pins.extend(old);
                made.extend(new);
                placeholders.insert(subject.clone(), kind);
                kept.push(Kept {
                    path: subject,
                    why: why.to_string(),
                    created: true,
                });
            }
        }
    }
    if !problems.is_empty() {
        // Fail closed: a host program's path we cannot hold would be the agent's to plant.
        return Err(problems.join(". "));
    }
    let settled = settle(&ro, placeholders, pins);
    let made = made
        .into_iter()
        .filter(|d| !ro.iter().any(|r| d.starts_with(r)))
        .collect();
    let shown: BTreeSet<&PathBuf> = settled
        .ro
        .iter()
        .chain(settled.placeholders.iter().map(|(p, _)| p))
        .collect();
    kept.retain(|k| shown.contains(&k.path));
    Ok(Protected {
        settled,
        made,
        kept,
    })
}

/// The existing login file an empty `subject` (one of [`BASH_LOGIN`]) would make bash skip.
fn bash_shadowed(home: &Path, subject: &Path, lstat: &dyn Fn(&Path) -> Node) -> Option<PathBuf> {
    let at = BASH_LOGIN.iter().position(|n| home.join(n) == subject)?;
    let exists = |n: &str| lstat(&home.join(n)) != Node::Missing;
    if BASH_LOGIN[..at].iter().any(|n| exists(n)) {
        return None;
    }
    BASH_LOGIN[at + 1..]
        .iter()
        .find(|n| exists(n))
        .map(|n| home.join(n))
}

/// The warning naming what [`plan`] kept read-only, or None.
pub fn warning(kept: &[Kept]) -> Option<String> {
    if kept.is_empty() {
        return None;
    }
    let list: Vec<String> = kept
        .iter()
        .map(|k| {
            let created = if k.created {
                "; created empty to hold its place"
            } else {
                ""
            };
            format!("{} ({}{created})", k.path.display(), k.why)
        })
        .collect();
    Some(format!(
        "kept read-only inside the sandbox, because programs on your host run or obey {}: {}. Fix: to let the agent write one anyway, pass --rw-host-config PATH (spec: rwHostConfig)",
        if kept.len() == 1 { "it" } else { "them" },
        list.join(", ")
    ))
}

#[cfg(test)]
#[path = "protect_tests.rs"]
mod tests;
