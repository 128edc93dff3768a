//! Symlinks in declared paths: followed only to places the sandbox exposes anyway (and into
//! the Nix store, read-only).
//!
//! Threat: bubblewrap's `--bind SRC DEST` follows symlinks in SRC on the host. An agent that
//! could write `~/.claude` in one session can plant `~/.claude/settings.json -> /etc/shadow` or
//! `~/.claude/creds -> ~/.ssh`; once such a path is declared, the bind would expose the host
//! target. So every declared path is resolved here, component by component, before it reaches
//! the bwrap argv, and a path reached through a symlink is bound only if its final canonical
//! target is already permitted, or in the store (`resolve_declared`).
//!
//! Symlinks nested inside a bound directory cannot leak anything by themselves: the kernel
//! resolves them inside the sandbox's mount namespace, where only exposed paths exist. They do
//! dangle there, though, so `scan_tree` finds them and `scan_warning` tells the user why and how
//! to expose the target. The same walk lists the Unix sockets it meets (`ScanReport::sockets`),
//! which the planner masks (`crate::sockets`): one walk of each declared directory, not two.
//!
//! The Nix store is the one place a link may lead without being exposed already
//! (`Permitted::reach`): home-manager ships every dotfile as a chain of links into it
//! (`~/.config/git/config -> /nix/store/…-home-manager-files/… -> /nix/store/…-hm_gitconfig`).
//! Only root or the Nix daemon writes it, and nothing in it is secret, so the planner binds the
//! store entries such a chain goes through and ends in read-only at their own paths
//! (`Resolved::ViaLink::store`, `ScanReport::store`). The chain must end in a real file or
//! directory inside a store entry; an entry that is itself a symlink is not one (a bind would
//! follow it on the host), nor is anything that only starts in the store (`/nix/store/../etc`,
//! a store link out of the store).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

/// Linux's MAXSYMLINKS: the kernel gives up with ELOOP after this many links in one lookup.
const MAX_HOPS: usize = 40;

/// The Nix store: declared paths and the links in declared directories may lead into it
/// (see [`Permitted::with_store`]).
pub const NIX_STORE: &str = "/nix/store";

/// How many links `scan_warning` names before summarising the rest.
const WARN_LIST: usize = 10;

/// Stable code for a declared path left out because a symlink leads outside (`Resolved::Refused`).
pub const CODE_REFUSED: &str = "symlink-outside-refused";
/// Stable code for nested symlinks that will dangle inside the sandbox (`scan_warning`).
pub const CODE_NESTED: &str = "symlink-outside-nested";

pub type Result<T, E = SymlinkError> = std::result::Result<T, E>;

#[derive(thiserror::Error, Debug)]
pub enum SymlinkError {
    #[error(
        "declared path {} is not absolute; expected an absolute path such as /home/user/.claude",
        shown(.0)
    )]
    NotAbsolute(PathBuf),
    #[error(
        "declared path {} goes through more than {MAX_HOPS} symlinks (gave up at {}), which \
         is most likely a symlink loop; fix or remove that link, or stop declaring {}",
        shown(.declared),
        shown(.link),
        shown(.declared)
    )]
    Loop { declared: PathBuf, link: PathBuf },
    #[error(
        "cannot inspect {} while resolving declared path {}: {source}; make it readable by the user \
         who starts the sandbox, or stop declaring {}",
        shown(.path),
        shown(.declared),
        shown(.declared)
    )]
    Unreadable {
        declared: PathBuf,
        path: PathBuf,
        source: io::Error,
    },
}

/// Canonical roots the sandbox exposes anyway (store paths, launch dir, git dir, declared paths).
///
/// A path is permitted if it equals or lies under a root, compared component-wise:
/// `/home/a/proj2` is not under `/home/a/proj`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permitted {
    /// Sorted, deduplicated, absolute, none under another.
    roots: Vec<PathBuf>,
    /// The Nix store directory, if links may lead into it (see [`Permitted::reach`]).
    store: Option<PathBuf>,
}

/// Where a symlink (or a chain of them) leads, by [`Permitted::reach`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reach {
    /// Somewhere the sandbox exposes anyway.
    Exposed,
    /// Into this store entry (`/nix/store/<hash>-<name>`), which the sandbox then binds read-only.
    Store(PathBuf),
    /// Nowhere the sandbox has.
    Hidden,
}

impl Permitted {
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut roots: Vec<PathBuf> = roots
            .into_iter()
            // Fail closed: a relative root or one with `..` has no single meaning, so it permits nothing.
            .filter(|r| r.is_absolute() && !has_parent_dir(r))
            // Rebuilding from components drops `.`, `//` and trailing slashes.
            .map(|r| r.components().collect())
            .collect();
        roots.sort();
        // Paths under a root sort right after it, so comparing with the last kept root drops every
        // nested one; `contains` then needs to look at a single candidate.
        roots.dedup_by(|later, kept| later.starts_with(kept));
        Self { roots, store: None }
    }

    /// Also let links lead into the Nix store at `dir` (canonical, e.g. `/nix/store`).
    pub fn with_store(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir: PathBuf = dir.into();
        // Fail closed: a relative store or one with `..` has no single meaning.
        self.store =
            (dir.is_absolute() && !has_parent_dir(&dir)).then(|| dir.components().collect());
        self
    }

    /// The one rule for where a symlink may lead, for declared paths and for links nested in
    /// declared directories alike: a place exposed anyway, or a store entry. `path` is canonical
    /// up to its last component, which is a symlink if `is_link` (a hop of a chain) and real
    /// otherwise (the chain's end).
    fn reach(&self, path: &Path, is_link: bool) -> Reach {
        if self.contains(path) {
            return Reach::Exposed;
        }
        match self.store_entry(path) {
            // Fail closed: a store entry that is itself a symlink would be followed by the bind,
            // on the host, to wherever it points.
            Some(entry) if !(is_link && entry == path) => Reach::Store(entry),
            _ => Reach::Hidden,
        }
    }

    /// The store entry `path` lies in (or is): `<store>/<hash>-<name>`. Other names in the
    /// store directory (`.links`, lock files) are not store paths.
    fn store_entry(&self, path: &Path) -> Option<PathBuf> {
        let store = self.store.as_ref()?;
        if !path.is_absolute() || has_parent_dir(path) {
            return None;
        }
        let Some(Component::Normal(name)) = path.strip_prefix(store).ok()?.components().next()
        else {
            return None;
        };
        is_store_name(name).then(|| store.join(name))
    }

    /// Whether `path` equals or lies under one of the roots. `path` should be canonical.
    pub fn contains(&self, path: &Path) -> bool {
        // Fail closed: `/root/../etc` starts with `/root` component-wise but is not under it.
        if !path.is_absolute() || has_parent_dir(path) {
            return false;
        }
        // Paths under a root form a contiguous run starting at the root, and roots do not nest,
        // so the only root that can contain `path` is the greatest one not after it.
        let after = self.roots.partition_point(|r| r.as_path() <= path);
        after > 0 && path.starts_with(&self.roots[after - 1])
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }
}

/// `<32 characters of Nix's base32>-<name>`.
fn is_store_name(name: &OsStr) -> bool {
    let b = name.as_encoded_bytes();
    b.len() > 33
        && b[32] == b'-'
        && b[..32]
            .iter()
            .all(|c| b"0123456789abcdfghijklmnpqrsvwxyz".contains(c))
}

fn has_parent_dir(path: &Path) -> bool {
    path.components().any(|c| c == Component::ParentDir)
}

/// What a declared path turned out to be on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// No component of the path is a symlink: bind as is (canonical; equals the declared path).
    Direct(PathBuf),
    /// One or more components are symlinks and the final canonical target is permitted, or in
    /// the Nix store: bind `target` at `declared` (or, where `declared` shows as the link
    /// inside the sandbox, leave the link to resolve there; the planner decides).
    ViaLink {
        declared: PathBuf,
        target: PathBuf,
        /// The first symlink met on the walk from `/`: `declared` or one of its ancestors.
        link: PathBuf,
        /// Store entries the chain goes through or ends in that the sandbox does not expose
        /// yet (sorted): to be bound read-only at their own paths.
        store: Vec<PathBuf>,
        /// A later link of the chain that the sandbox does not have, so that the link itself
        /// would not resolve inside (only `target` bound at `declared` is seen there).
        hidden_hop: Option<PathBuf>,
    },
    /// A symlink component leads outside the permitted places: do not expose. `link` is the first
    /// symlink met on the walk from `/`, so it is `declared` itself or one of its ancestors;
    /// `target` is the canonical result of resolving all of `declared`.
    Refused {
        declared: PathBuf,
        link: PathBuf,
        target: PathBuf,
    },
    /// The path does not exist, or a symlink on it dangles: the caller reports missing paths together.
    Missing(PathBuf),
}

/// Resolve a declared path the way the kernel would, and decide whether it may be bound.
///
/// `declared` must be absolute; it should be lexically normalized, but need not be canonical
/// (`..` is resolved physically, like `realpath`). Only the final target decides exposure: a
/// chain that passes through unpermitted places but ends in a permitted one is `ViaLink`,
/// because the caller binds the canonical target and nothing on the way.
///
/// ```
/// use agent_sandbox::symlinks::{Permitted, Resolved, resolve_declared};
/// let none = Permitted::new([]);
/// assert_eq!(resolve_declared("/".as_ref(), &none).unwrap(), Resolved::Direct("/".into()));
/// assert!(resolve_declared("relative/path".as_ref(), &none).is_err());
/// ```
pub fn resolve_declared(declared: &Path, permitted: &Permitted) -> Result<Resolved> {
    if !declared.is_absolute() {
        return Err(SymlinkError::NotAbsolute(declared.to_path_buf()));
    }
    let walked = match walk(PathBuf::from("/"), declared, permitted) {
        Ok(walked) => walked,
        Err(WalkError::Missing) => return Ok(Resolved::Missing(declared.to_path_buf())),
        Err(WalkError::Loop(link)) => {
            return Err(SymlinkError::Loop {
                declared: declared.to_path_buf(),
                link,
            });
        }
        Err(WalkError::Io(path, source)) => {
            return Err(SymlinkError::Unreadable {
                declared: declared.to_path_buf(),
                path,
                source,
            });
        }
    };
    let Some(link) = walked.first_link else {
        return Ok(Resolved::Direct(walked.real));
    };
    let mut store = walked.store;
    match permitted.reach(&walked.real, false) {
        Reach::Exposed => {}
        Reach::Store(entry) => store.push(entry),
        // Fail closed: a symlink that leads anywhere not already exposed (or into the store) is
        // not followed.
        Reach::Hidden => {
            return Ok(Resolved::Refused {
                declared: declared.to_path_buf(),
                link,
                target: walked.real,
            });
        }
    }
    store.sort();
    store.dedup();
    Ok(Resolved::ViaLink {
        declared: declared.to_path_buf(),
        target: walked.real,
        link,
        store,
        hidden_hop: walked.hidden_hop,
    })
}

/// Symlinks found under a declared directory that will not resolve inside the sandbox.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// `(link, target)`, sorted by link. `target` is the canonical target (the lexical one if the
    /// link dangles, loops or cannot be followed) when that is not permitted; when it is permitted
    /// but the chain passes through a symlink outside the permitted places, it is that symlink,
    /// which does not exist inside the sandbox.
    pub outside: Vec<(PathBuf, PathBuf)>,
    /// Unix sockets met on the walk (named under `dir` as given), sorted. Sockets behind
    /// symlinks are not followed: a link to one is reported (or not) like any other link.
    pub sockets: Vec<PathBuf>,
    /// Store entries that links resolving through or into the Nix store need and the
    /// permitted places do not hold (sorted, deduplicated): the planner binds them read-only.
    pub store: Vec<PathBuf>,
    /// Directory entries visited (at most the limit).
    pub entries: usize,
    /// The walk stopped at the limit with entries left unvisited.
    pub truncated: bool,
    /// Directories (or entries) skipped because they could not be read.
    pub unreadable: usize,
}

/// Walk `dir` at any depth, without following symlinks into directories, visiting at most `limit`
/// entries, and report the symlinks that will not resolve inside the sandbox and the Unix sockets.
///
/// Only symlinks cost more than the `readdir` itself: the entry type comes from the directory
/// entry, so regular files and directories are never `stat`ed. `permitted` should contain `dir`
/// (the caller passes the declared paths as roots), otherwise links within `dir` count as outside.
/// Relative link targets resolve against the link's real directory.
pub fn scan_tree(dir: &Path, permitted: &Permitted, limit: usize) -> ScanReport {
    let mut report = ScanReport::default();
    let Ok(real_root) = fs::canonicalize(dir) else {
        report.unreadable += 1;
        return report;
    };
    // Links are reported under `dir` as given, and resolved from the real directory.
    let mut stack = vec![(dir.to_path_buf(), real_root)];
    'dirs: while let Some((shown_dir, real_dir)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&real_dir) else {
            report.unreadable += 1;
            continue;
        };
        for entry in entries {
            // After an error the iterator ends, so this cannot spin.
            let Ok(entry) = entry else {
                report.unreadable += 1;
                continue;
            };
            if report.entries == limit {
                report.truncated = true;
                break 'dirs;
            }
            report.entries += 1;
            let Ok(kind) = entry.file_type() else {
                report.unreadable += 1;
                continue;
            };
            if kind.is_dir() {
                let name = entry.file_name();
                stack.push((shown_dir.join(&name), real_dir.join(&name)));
            } else if kind.is_symlink() {
                let name = entry.file_name();
                match nested_link(&real_dir, &name, permitted) {
                    Nested::Resolves(store) => report.store.extend(store),
                    Nested::Dangles(target) => report.outside.push((shown_dir.join(&name), target)),
                }
            } else if kind.is_socket() {
                report.sockets.push(shown_dir.join(entry.file_name()));
            }
        }
    }
    report.outside.sort();
    report.sockets.sort();
    report.store.sort();
    report.store.dedup();
    report
}

/// What a symlink nested in a declared directory does inside the sandbox.
enum Nested {
    /// It resolves, once these store entries are bound.
    Resolves(Vec<PathBuf>),
    /// It dangles: this is where it leads, or the hop the sandbox does not have.
    Dangles(PathBuf),
}

fn nested_link(real_dir: &Path, name: &OsStr, permitted: &Permitted) -> Nested {
    match walk(real_dir.to_path_buf(), Path::new(name), permitted) {
        Ok(walked) => match (permitted.reach(&walked.real, false), walked.hidden_hop) {
            (Reach::Hidden, _) => Nested::Dangles(walked.real),
            // Inside, the kernel walks the same chain and finds no such hop.
            (_, Some(hop)) => Nested::Dangles(hop),
            (reach, None) => {
                let mut store = walked.store;
                if let Reach::Store(entry) = reach {
                    store.push(entry);
                }
                Nested::Resolves(store)
            }
        },
        Err(_) => {
            // Gone since the readdir: nothing left to warn about.
            let Ok(target) = fs::read_link(real_dir.join(name)) else {
                return Nested::Resolves(Vec::new());
            };
            let lexical = normalize(&real_dir.join(target));
            if permitted.contains(&lexical) {
                Nested::Resolves(Vec::new())
            } else {
                Nested::Dangles(lexical)
            }
        }
    }
}

/// `..` and `.` removed lexically; `/..` stays `/`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

struct Walked {
    /// Canonical result.
    real: PathBuf,
    /// The first symlink met.
    first_link: Option<PathBuf>,
    /// The first symlink after the first that lies outside the permitted places (and outside
    /// the store entries the sandbox can add).
    hidden_hop: Option<PathBuf>,
    /// The store entries of the symlinks met, where `Permitted::reach` says to add them.
    store: Vec<PathBuf>,
}

enum WalkError {
    /// Not found, a non-directory used as a directory, or a dangling link.
    Missing,
    /// More than `MAX_HOPS` links; holds the last one.
    Loop(PathBuf),
    Io(PathBuf, io::Error),
}

enum Step {
    Root,
    Up,
    Name(OsString),
}

fn push_steps(steps: &mut Vec<Step>, path: &Path) {
    // A stack, so the first component goes on last.
    for component in path.components().rev() {
        steps.push(match component {
            Component::RootDir => Step::Root,
            Component::ParentDir => Step::Up,
            Component::Normal(name) => Step::Name(name.to_owned()),
            Component::CurDir | Component::Prefix(_) => continue,
        });
    }
}

/// Resolve `rest` starting from the real (symlink-free) directory `real`, one component at a
/// time, recording the symlinks met. `real` only ever holds symlink-free paths, so `..` is a
/// lexical pop, as in the kernel.
fn walk(
    mut real: PathBuf,
    rest: &Path,
    permitted: &Permitted,
) -> std::result::Result<Walked, WalkError> {
    let mut steps = Vec::new();
    push_steps(&mut steps, rest);
    let mut hops = 0;
    let mut first_link = None;
    let mut hidden_hop = None;
    let mut store = Vec::new();
    while let Some(step) = steps.pop() {
        let name = match step {
            Step::Root => {
                real = PathBuf::from("/");
                continue;
            }
            Step::Up => {
                real.pop();
                continue;
            }
            Step::Name(name) => name,
        };
        let candidate = real.join(&name);
        let meta = match fs::symlink_metadata(&candidate) {
            Ok(meta) => meta,
            Err(e) if is_missing(&e) => return Err(WalkError::Missing),
            Err(e) => return Err(WalkError::Io(candidate, e)),
        };
        if !meta.file_type().is_symlink() {
            real = candidate;
            continue;
        }
        hops += 1;
        if hops > MAX_HOPS {
            return Err(WalkError::Loop(candidate));
        }
        let target = match fs::read_link(&candidate) {
            Ok(target) => target,
            Err(e) if is_missing(&e) => return Err(WalkError::Missing),
            Err(e) => return Err(WalkError::Io(candidate, e)),
        };
        // The kernel refuses an empty target with ENOENT; splicing nothing would mean the parent.
        if target.as_os_str().is_empty() {
            return Err(WalkError::Missing);
        }
        // An absolute target starts with a Root step; a relative one continues from `real`,
        // the link's own directory.
        push_steps(&mut steps, &target);
        let reach = permitted.reach(&candidate, true);
        if let Reach::Store(entry) = &reach {
            store.push(entry.clone());
        }
        if first_link.is_none() {
            first_link = Some(candidate);
        } else if hidden_hop.is_none() && reach == Reach::Hidden {
            hidden_hop = Some(candidate);
        }
    }
    Ok(Walked {
        real,
        first_link,
        hidden_hop,
        store,
    })
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// One warning for a refused declared path, `None` for anything else.
pub fn refused_warning(r: &Resolved) -> Option<String> {
    let Resolved::Refused {
        declared,
        link,
        target,
    } = r
    else {
        return None;
    };
    let what = if link == declared {
        format!("{} is a symlink to {}", shown(declared), shown(target))
    } else {
        format!(
            "{} resolves through the symlink {} to {}",
            shown(declared),
            shown(link),
            shown(target)
        )
    };
    let planted_in = link.parent().unwrap_or(link);
    Some(format!(
        "{what}, which is not exposed in the sandbox; it was left out. To expose it, declare {} \
         itself (roFiles or roDirs, or --ro {} on the command line). If you did not create the \
         symlink, remove it: an agent that could write {} may have planted it.",
        shown(target),
        shell_arg(target),
        shown(planted_in)
    ))
}

/// One warning naming the links of `report` that will dangle inside the sandbox, `None` if there
/// are none.
pub fn scan_warning(report: &ScanReport) -> Option<String> {
    let count = report.outside.len();
    let mut out = match count {
        0 => return None,
        1 => "1 symlink in a declared directory points outside the sandbox \
              and will not resolve inside it:\n"
            .to_owned(),
        n => format!(
            "{n} symlinks in declared directories point outside the sandbox \
             and will not resolve inside it:\n"
        ),
    };
    for (link, target) in report.outside.iter().take(WARN_LIST) {
        out.push_str(&format!("  {} -> {}\n", shown(link), shown(target)));
    }
    if count > WARN_LIST {
        out.push_str(&format!("  … and {} more\n", count - WARN_LIST));
    }
    out.push_str(
        "To expose a target, declare it in roDirs or roFiles (or pass --ro PATH on the command \
         line). If you did not create a link, remove it.",
    );
    if report.truncated {
        out.push_str(&format!(
            "\nThe scan stopped after {} entries; links beyond those were not checked.",
            report.entries
        ));
    }
    Some(out)
}

/// A path for a message. Anyone who can write a declared directory chooses file names, so control
/// characters (newlines, terminal escapes, bidi overrides) or invalid UTF-8 switch to the escaped,
/// quoted form rather than reaching the terminal raw.
pub(crate) fn shown(path: &Path) -> String {
    match path.to_str() {
        Some(s) if s.chars().all(is_plain) => s.to_owned(),
        _ => format!("{path:?}"),
    }
}

fn is_plain(c: char) -> bool {
    matches!(c, '"' | '\'' | '\\') || c.escape_debug().len() == 1
}

/// A path as one shell word for a copy-pasteable command, or `shown` if it cannot be typed.
pub(crate) fn shell_arg(path: &Path) -> String {
    let Some(s) = path.to_str().filter(|s| s.chars().all(is_plain)) else {
        return shown(path);
    };
    let bare = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !s.is_empty() && s.chars().all(bare) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fixture: `base` canonical, with `inside/` permitted and `outside/`, `home/` not.
    struct Fx {
        _tmp: tempfile::TempDir,
        base: PathBuf,
    }

    impl Fx {
        fn new() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            let base = fs::canonicalize(tmp.path()).unwrap();
            for d in ["inside", "outside", "home"] {
                fs::create_dir(base.join(d)).unwrap();
            }
            Self { _tmp: tmp, base }
        }
        fn p(&self, rel: &str) -> PathBuf {
            self.base.join(rel)
        }
        fn file(&self, rel: &str) -> PathBuf {
            let p = self.p(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, "x").unwrap();
            p
        }
        fn dir(&self, rel: &str) -> PathBuf {
            let p = self.p(rel);
            fs::create_dir_all(&p).unwrap();
            p
        }
        fn link(&self, rel: &str, target: impl AsRef<Path>) -> PathBuf {
            let p = self.p(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            symlink(target, &p).unwrap();
            p
        }
        fn permitted(&self, rels: &[&str]) -> Permitted {
            Permitted::new(rels.iter().map(|r| self.p(r)))
        }
        fn resolve(&self, rel: &str, permitted: &[&str]) -> Resolved {
            resolve_declared(&self.p(rel), &self.permitted(permitted)).unwrap()
        }
        /// `permitted(rels)` with `store/` as the Nix store.
        fn with_store(&self, rels: &[&str]) -> Permitted {
            self.permitted(rels).with_store(self.p("store"))
        }
        /// `store/<hash>-name`, relative, with a hash made of `c`.
        fn entry(c: char, name: &str) -> String {
            format!("store/{}-{name}", c.to_string().repeat(32))
        }
    }

    /// The home-manager layout: a chain of links from `$HOME` through one store entry to
    /// another, and a directory of such links.
    struct HomeManager {
        fx: Fx,
        gitconfig: PathBuf,
        files: PathBuf,
        init: PathBuf,
    }

    fn home_manager() -> HomeManager {
        let fx = Fx::new();
        let gitconfig = fx.file(&Fx::entry('g', "hm_gitconfig"));
        let init = fx.file(&format!("{}/init.lua", Fx::entry('n', "nvim-init")));
        let files = fx.dir(&Fx::entry('h', "home-manager-files"));
        fx.link(
            &format!(
                "{}/.config/git/config",
                Fx::entry('h', "home-manager-files")
            ),
            &gitconfig,
        );
        fx.link(
            &format!(
                "{}/.config/nvim/init.lua",
                Fx::entry('h', "home-manager-files")
            ),
            &init,
        );
        fx.link("home/.config/git/config", files.join(".config/git/config"));
        fx.link(
            "home/.config/nvim/init.lua",
            files.join(".config/nvim/init.lua"),
        );
        fx.link("home/.config/nvim-whole", files.join(".config/nvim"));
        HomeManager {
            fx,
            gitconfig,
            files,
            init,
        }
    }

    /// A link resolved to a permitted place, without store entries or hidden hops.
    fn via(declared: &Path, link: &Path, target: &Path) -> Resolved {
        Resolved::ViaLink {
            declared: declared.into(),
            target: target.into(),
            link: link.into(),
            store: vec![],
            hidden_hop: None,
        }
    }

    #[test]
    fn contains_is_component_wise() {
        let p = Permitted::new(["/a/b".into(), "/nix/store/abc-x".into()]);
        assert!(p.contains(Path::new("/a/b")));
        assert!(p.contains(Path::new("/a/b/c/d")));
        assert!(p.contains(Path::new("/a/b/")));
        assert!(!p.contains(Path::new("/a/bc")));
        assert!(!p.contains(Path::new("/a/bc/d")));
        assert!(!p.contains(Path::new("/a")));
        assert!(!p.contains(Path::new("/")));
        assert!(!p.contains(Path::new("/nix/store/abc-xy")));
        assert!(!p.contains(Path::new("/nix/store/abc")));
        assert!(p.contains(Path::new("/nix/store/abc-x/bin")));
    }

    #[test]
    fn contains_fails_closed_on_dotdot_and_relative() {
        let p = Permitted::new(["/a/b".into()]);
        assert!(!p.contains(Path::new("/a/b/../../etc/shadow")));
        assert!(!p.contains(Path::new("a/b")));
        let p = Permitted::new(["a/b".into(), "/x/../etc".into()]);
        assert_eq!(p.roots(), &[] as &[PathBuf]);
        assert!(!p.contains(Path::new("/etc")));
    }

    #[test]
    fn roots_are_sorted_deduped_and_nested_ones_dropped() {
        let p = Permitted::new(
            [
                "/b", "/a/b/c", "/a/b", "/a/bc", "/a/b/", "/a//b/d", "/c/./d",
            ]
            .map(PathBuf::from),
        );
        assert_eq!(
            p.roots(),
            ["/a/b", "/a/bc", "/b", "/c/d"].map(PathBuf::from)
        );
        assert!(p.contains(Path::new("/a/b/d")));
        assert!(p.contains(Path::new("/a/bc/x")));
        assert!(p.contains(Path::new("/c/d/e")));
        assert!(!p.contains(Path::new("/c")));
        let all = Permitted::new(["/".into(), "/x".into()]);
        assert_eq!(all.roots(), [PathBuf::from("/")]);
        assert!(all.contains(Path::new("/etc/shadow")));
        assert!(!Permitted::new([]).contains(Path::new("/")));
    }

    #[test]
    fn direct_when_no_component_is_a_symlink() {
        let fx = Fx::new();
        let f = fx.file("inside/f");
        assert_eq!(fx.resolve("inside/f", &["inside"]), Resolved::Direct(f));
        // The user declared it directly: exposure is their call, not ours.
        let o = fx.file("outside/secret");
        assert_eq!(
            fx.resolve("outside/secret", &["inside"]),
            Resolved::Direct(o)
        );
        let d = fx.dir("home/.claude");
        assert_eq!(fx.resolve("home/.claude", &[]), Resolved::Direct(d));
    }

    #[test]
    fn via_link_into_a_permitted_root() {
        let fx = Fx::new();
        let target = fx.file("inside/claude.json");
        let declared = fx.link("home/.claude.json", &target);
        assert_eq!(
            fx.resolve("home/.claude.json", &["inside"]),
            via(&declared, &declared, &target)
        );
    }

    #[test]
    fn store_names_are_hash_dash_name() {
        let ok = |n: &str| is_store_name(OsStr::new(n));
        assert!(ok("0s8b42x6ir8v6v2kxzlhphxw286hd3ll-home-manager-files"));
        assert!(!ok("0s8b42x6ir8v6v2kxzlhphxw286hd3ll-"));
        assert!(!ok(".links"));
        assert!(
            !ok("0s8b42x6ir8v6v2kxzlhphxw286hd3le-x"),
            "e is not in Nix's base32"
        );
        assert!(!ok("0s8b42x6ir8v6v2kxzlhphxw286hd3l-xy"));
    }

    /// Issue 10 item 5: home-manager's `~/.config/git/config`, a chain of two links through
    /// the store, was dropped.
    #[test]
    fn a_declared_link_chain_into_the_store_is_followed_with_its_entries() {
        let hm = home_manager();
        let fx = &hm.fx;
        let declared = fx.p("home/.config/git/config");
        let res = resolve_declared(&declared, &fx.with_store(&["inside"])).unwrap();
        assert_eq!(
            res,
            Resolved::ViaLink {
                declared: declared.clone(),
                target: hm.gitconfig.clone(),
                link: declared.clone(),
                store: vec![hm.gitconfig.clone(), hm.files.clone()],
                hidden_hop: None,
            }
        );
        // A store entry exposed anyway (a closure path) is not listed again.
        let closure = Permitted::new([hm.files.clone()]).with_store(fx.p("store"));
        let Resolved::ViaLink { store, .. } = resolve_declared(&declared, &closure).unwrap() else {
            panic!()
        };
        assert_eq!(store, vec![hm.gitconfig.clone()]);
        // Without the store rule (the planner's, before), the same link was refused.
        assert!(matches!(
            fx.resolve("home/.config/git/config", &["inside"]),
            Resolved::Refused { .. }
        ));
        // A declared directory that is itself a link into the store.
        let whole = fx.p("home/.config/nvim-whole");
        assert_eq!(
            resolve_declared(&whole, &fx.with_store(&[])).unwrap(),
            Resolved::ViaLink {
                declared: whole.clone(),
                target: hm.files.join(".config/nvim"),
                link: whole,
                store: vec![hm.files.clone()],
                hidden_hop: None,
            }
        );
    }

    #[test]
    fn links_that_only_start_in_the_store_are_refused() {
        let hm = home_manager();
        let fx = &hm.fx;
        let shadow = fx.file("outside/shadow");
        let permitted = fx.with_store(&["inside"]);
        // `store/../outside/shadow`: resolved physically, it is not in the store.
        fx.link("home/dotdot", fx.p("store/../outside/shadow"));
        // A store entry that is itself a link out of the store.
        let evil = fx.link(&Fx::entry('e', "evil"), &shadow);
        fx.link("home/via-entry", &evil);
        // A link inside a store entry that leads out of the store.
        let inner = fx.link(
            &format!("{}/x", Fx::entry('f', "dir")),
            fx.p("outside/shadow"),
        );
        fx.link("home/via-inner", &inner);
        // The store directory itself, and names in it that are not store paths.
        fx.link("home/whole-store", fx.p("store"));
        let links = fx.file("store/.links/0abc");
        fx.link("home/links", &links);
        for (rel, target) in [
            ("home/dotdot", shadow.clone()),
            ("home/via-entry", shadow.clone()),
            ("home/via-inner", shadow.clone()),
            ("home/whole-store", fx.p("store")),
            ("home/links", links),
        ] {
            let declared = fx.p(rel);
            assert_eq!(
                resolve_declared(&declared, &permitted).unwrap(),
                Resolved::Refused {
                    declared: declared.clone(),
                    link: declared,
                    target,
                },
                "{rel}"
            );
        }
    }

    #[test]
    fn a_store_entry_that_is_a_link_is_a_hop_the_sandbox_lacks() {
        // `home/x -> store/A-alias -> store/G-hm_gitconfig`: the end is a store file, bound at
        // `home/x`; the alias entry cannot be bound by path (the bind would follow it), so a
        // link left to resolve inside would dangle.
        let hm = home_manager();
        let fx = &hm.fx;
        let alias = fx.link(&Fx::entry('a', "alias"), &hm.gitconfig);
        let x = fx.link("home/x", &alias);
        assert_eq!(
            resolve_declared(&x, &fx.with_store(&[])).unwrap(),
            Resolved::ViaLink {
                declared: x.clone(),
                target: hm.gitconfig.clone(),
                link: x,
                store: vec![hm.gitconfig.clone()],
                hidden_hop: Some(alias),
            }
        );
    }

    #[test]
    fn scan_lists_the_store_entries_nested_links_need() {
        let hm = home_manager();
        let fx = &hm.fx;
        let shadow = fx.file("outside/shadow");
        let evil = fx.link(&Fx::entry('e', "evil"), &shadow);
        let planted = fx.link("home/.config/nvim/planted", &evil);
        let dotdot = fx.link("home/.config/nvim/dotdot", fx.p("store/../outside/shadow"));
        let alias = fx.link(&Fx::entry('a', "alias"), &hm.gitconfig);
        let via_alias = fx.link("home/.config/nvim/via-alias", &alias);
        let report = scan_tree(
            &fx.p("home/.config"),
            &fx.with_store(&["home/.config"]),
            100,
        );
        assert_eq!(
            report.store,
            vec![
                hm.gitconfig.clone(),
                hm.files.clone(),
                hm.init.parent().unwrap().into()
            ]
        );
        assert_eq!(
            report.outside,
            vec![
                (dotdot, shadow.clone()),
                (planted, shadow),
                (via_alias, alias),
            ]
        );
        // Without the store rule, the home-manager links dangle and are listed.
        let before = scan_tree(&fx.p("home/.config"), &fx.permitted(&["home/.config"]), 100);
        assert_eq!(before.store, Vec::<PathBuf>::new());
        assert_eq!(before.outside.len(), 6, "{before:?}");
        // A directory in the store, scanned where it is: its links lead to other entries.
        let inside = scan_tree(&hm.files, &fx.with_store(&[]), 100);
        assert_eq!(inside.outside, vec![]);
        assert_eq!(
            inside.store,
            vec![
                hm.gitconfig.clone(),
                hm.files.clone(),
                hm.init.parent().unwrap().into()
            ]
        );
    }

    #[test]
    fn planted_link_to_an_unpermitted_file_is_refused() {
        let fx = Fx::new();
        let shadow = fx.file("outside/shadow");
        let evil = fx.link("inside/dir/evil", &shadow);
        assert_eq!(
            fx.resolve("inside/dir/evil", &["inside"]),
            Resolved::Refused {
                declared: evil.clone(),
                link: evil,
                target: shadow,
            }
        );
    }

    #[test]
    fn planted_link_to_an_unpermitted_dir_is_refused_for_paths_below_it() {
        // `~/.claude/creds -> ~/.ssh`, then `~/.claude/creds/id_ed25519` declared.
        let fx = Fx::new();
        let key = fx.file("home/.ssh/id_ed25519");
        let creds = fx.link("home/.claude/creds", fx.p("home/.ssh"));
        assert_eq!(
            fx.resolve("home/.claude/creds/id_ed25519", &["home/.claude"]),
            Resolved::Refused {
                declared: fx.p("home/.claude/creds/id_ed25519"),
                link: creds,
                target: key,
            }
        );
    }

    #[test]
    fn parent_component_symlink_is_checked() {
        let fx = Fx::new();
        let foo = fx.file("elsewhere/foo");
        let config = fx.link("home/.config", fx.p("elsewhere"));
        let declared = fx.p("home/.config/foo");
        assert_eq!(
            fx.resolve("home/.config/foo", &["inside"]),
            Resolved::Refused {
                declared: declared.clone(),
                link: config.clone(),
                target: foo.clone(),
            }
        );
        assert_eq!(
            fx.resolve("home/.config/foo", &["inside", "elsewhere"]),
            via(&declared, &config, &foo)
        );
    }

    #[test]
    fn relative_link_targets_resolve_against_the_link_directory() {
        let fx = Fx::new();
        let cfg = fx.file("inside/cfg");
        let declared = fx.link("home/.cfg", "../inside/./cfg");
        assert_eq!(
            fx.resolve("home/.cfg", &["inside"]),
            via(&declared, &declared, &cfg)
        );
        let secret = fx.file("outside/secret");
        let rel = fx.link("inside/sub/rel", "../../outside/secret");
        assert_eq!(
            fx.resolve("inside/sub/rel", &["inside"]),
            Resolved::Refused {
                declared: rel.clone(),
                link: rel,
                target: secret,
            }
        );
    }

    #[test]
    fn dotdot_after_a_symlink_is_physical() {
        // `home/deep -> outside/a/b`; `home/deep/../x` is `outside/a/x`, not `home/x`.
        let fx = Fx::new();
        fx.dir("outside/a/b");
        let x = fx.file("outside/a/x");
        fx.file("home/x");
        fx.link("home/deep", fx.p("outside/a/b"));
        let hop = fx.link("home/hop", "deep/../x");
        assert_eq!(
            fx.resolve("home/hop", &["home"]),
            Resolved::Refused {
                declared: hop.clone(),
                link: hop,
                target: x,
            }
        );
    }

    #[test]
    fn chains_are_followed_and_only_the_destination_matters() {
        let fx = Fx::new();
        let c = fx.file("inside/c");
        let b = fx.link("home/b", &c);
        let a = fx.link("home/a", "b");
        // `home/b` is not permitted, but nothing there is bound at `a`: only `inside/c` is.
        // `a` itself would not resolve inside (`home/b` is not there).
        assert_eq!(
            fx.resolve("home/a", &["inside"]),
            Resolved::ViaLink {
                declared: a.clone(),
                target: c,
                link: a,
                store: vec![],
                hidden_hop: Some(b),
            }
        );
        // Through a permitted link to an unpermitted place: the first link is named.
        let s = fx.file("outside/s");
        fx.link("inside/to-s", &s);
        let start = fx.link("home/start", fx.p("inside/to-s"));
        assert_eq!(
            fx.resolve("home/start", &["inside"]),
            Resolved::Refused {
                declared: start.clone(),
                link: start,
                target: s,
            }
        );
    }

    #[test]
    fn forty_hops_resolve_and_forty_one_loop() {
        let fx = Fx::new();
        let end = fx.file("inside/end");
        let mut prev = end.clone();
        for i in 0..41 {
            prev = fx.link(&format!("home/l{i}"), &prev);
        }
        assert_eq!(
            fx.resolve("home/l39", &["inside"]),
            Resolved::ViaLink {
                declared: fx.p("home/l39"),
                target: end,
                link: fx.p("home/l39"),
                store: vec![],
                hidden_hop: Some(fx.p("home/l38")),
            }
        );
        let err = resolve_declared(&fx.p("home/l40"), &fx.permitted(&["inside"])).unwrap_err();
        assert!(matches!(err, SymlinkError::Loop { .. }), "{err:?}");
    }

    #[test]
    fn loops_are_errors_that_name_the_path() {
        let fx = Fx::new();
        fx.link("home/l1", "l2");
        fx.link("home/l2", "l1");
        fx.link("home/me", "me");
        let permitted = fx.permitted(&["home"]);
        for rel in ["home/l1", "home/me", "home/l1/below"] {
            let declared = fx.p(rel);
            let err = resolve_declared(&declared, &permitted).unwrap_err();
            let SymlinkError::Loop { declared: d, .. } = &err else {
                panic!("{rel}: {err:?}");
            };
            assert_eq!(d, &declared);
            let msg = err.to_string();
            assert!(msg.contains(&declared.display().to_string()), "{msg}");
            assert!(msg.contains("symlink loop"), "{msg}");
        }
    }

    #[test]
    fn missing_paths_and_dangling_links() {
        let fx = Fx::new();
        fx.file("inside/file");
        fx.link("home/dangling", fx.p("outside/nope"));
        fx.link("home/dangling-rel", "nope");
        fx.link("home/to-file", fx.p("inside/file"));
        for rel in [
            "inside/nope",
            "nope/deeper",
            "home/dangling",
            "home/dangling-rel",
            "home/dangling/below",
            "inside/file/below",
            "home/to-file/below",
        ] {
            assert_eq!(
                fx.resolve(rel, &["inside"]),
                Resolved::Missing(fx.p(rel)),
                "{rel}"
            );
        }
    }

    #[test]
    fn relative_declared_paths_are_rejected() {
        let err = resolve_declared(Path::new("home/.claude"), &Permitted::new([])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "declared path home/.claude is not absolute; expected an absolute path such as \
             /home/user/.claude"
        );
    }

    #[test]
    fn unreadable_components_are_errors() {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!("SKIPPED unreadable_components_are_errors: root ignores directory modes");
            return;
        }
        let fx = Fx::new();
        fx.file("home/locked/f");
        let locked = fx.p("home/locked");
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        let res = resolve_declared(&fx.p("home/locked/f"), &fx.permitted(&[]));
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
        let err = res.unwrap_err();
        assert!(
            matches!(&err, SymlinkError::Unreadable { path, .. } if path == &fx.p("home/locked/f")),
            "{err:?}"
        );
    }

    #[test]
    fn odd_names_resolve() {
        let fx = Fx::new();
        let names = [
            "with space",
            "new\nline",
            "quo\"te's",
            "back\\slash",
            "-dash",
            "ünï",
        ];
        for name in names {
            let target = fx.file(&format!("inside/{name} target"));
            let declared = fx.link(&format!("home/{name}"), &target);
            assert_eq!(
                fx.resolve(&format!("home/{name}"), &["inside"]),
                via(&declared, &declared, &target),
                "{name:?}"
            );
        }
    }

    #[test]
    fn refused_warning_text() {
        let r = Resolved::Refused {
            declared: "/home/u/.claude/settings.json".into(),
            link: "/home/u/.claude/settings.json".into(),
            target: "/etc/shadow".into(),
        };
        assert_eq!(
            refused_warning(&r).unwrap(),
            "/home/u/.claude/settings.json is a symlink to /etc/shadow, which is not exposed in \
             the sandbox; it was left out. To expose it, declare /etc/shadow itself (roFiles or \
             roDirs, or --ro /etc/shadow on the command line). If you did not create the symlink, \
             remove it: an agent that could write /home/u/.claude may have planted it."
        );
        let r = Resolved::Refused {
            declared: "/home/u/.claude/creds/id".into(),
            link: "/home/u/.claude/creds".into(),
            target: "/home/u/my keys/id".into(),
        };
        assert_eq!(
            refused_warning(&r).unwrap(),
            "/home/u/.claude/creds/id resolves through the symlink /home/u/.claude/creds to \
             /home/u/my keys/id, which is not exposed in the sandbox; it was left out. To expose \
             it, declare /home/u/my keys/id itself (roFiles or roDirs, or --ro '/home/u/my keys/id' \
             on the command line). If you did not create the symlink, remove it: an agent that \
             could write /home/u/.claude may have planted it."
        );
        assert_eq!(refused_warning(&Resolved::Direct("/x".into())), None);
        assert_eq!(refused_warning(&Resolved::Missing("/x".into())), None);
        assert_eq!(
            refused_warning(&via(Path::new("/x"), Path::new("/x"), Path::new("/y"))),
            None
        );
    }

    #[test]
    fn refused_warning_escapes_control_characters_and_quotes_shell_words() {
        let r = Resolved::Refused {
            declared: "/h/.c/a\nfake: all clear\x1b[0m".into(),
            link: "/h/.c/a\nfake: all clear\x1b[0m".into(),
            target: "/t/it's".into(),
        };
        assert_eq!(
            refused_warning(&r).unwrap(),
            "\"/h/.c/a\\nfake: all clear\\u{1b}[0m\" is a symlink to /t/it's, which is not \
             exposed in the sandbox; it was left out. To expose it, declare /t/it's itself \
             (roFiles or roDirs, or --ro '/t/it'\\''s' on the command line). If you did not \
             create the symlink, remove it: an agent that could write /h/.c may have planted it."
        );
    }

    #[test]
    fn scan_warning_text() {
        assert_eq!(scan_warning(&ScanReport::default()), None);
        let one = ScanReport {
            outside: vec![("/p/.claude/x".into(), "/etc/shadow".into())],
            entries: 3,
            ..ScanReport::default()
        };
        assert_eq!(
            scan_warning(&one).unwrap(),
            "1 symlink in a declared directory points outside the sandbox and will not resolve \
             inside it:\n  /p/.claude/x -> /etc/shadow\nTo expose a target, declare it in roDirs \
             or roFiles (or pass --ro PATH on the command line). If you did not create a link, \
             remove it."
        );
        let many = ScanReport {
            outside: (0..12)
                .map(|i| (format!("/p/l{i:02}").into(), format!("/t/{i}").into()))
                .collect(),
            entries: 500,
            truncated: true,
            ..ScanReport::default()
        };
        let mut expected = "12 symlinks in declared directories point outside the sandbox and \
                            will not resolve inside it:\n"
            .to_owned();
        for i in 0..10 {
            expected.push_str(&format!("  /p/l{i:02} -> /t/{i}\n"));
        }
        expected.push_str(
            "  … and 2 more\nTo expose a target, declare it in roDirs or roFiles (or pass --ro \
             PATH on the command line). If you did not create a link, remove it.\nThe scan \
             stopped after 500 entries; links beyond those were not checked.",
        );
        assert_eq!(scan_warning(&many).unwrap(), expected);
        let odd = ScanReport {
            outside: vec![("/p/a\nb".into(), "/t/\u{202e}x".into())],
            ..ScanReport::default()
        };
        assert_eq!(
            scan_warning(&odd).unwrap(),
            "1 symlink in a declared directory points outside the sandbox and will not resolve \
             inside it:\n  \"/p/a\\nb\" -> \"/t/\\u{202e}x\"\nTo expose a target, declare it in \
             roDirs or roFiles (or pass --ro PATH on the command line). If you did not create a \
             link, remove it."
        );
    }

    #[test]
    fn scan_finds_nested_links_and_ignores_permitted_ones() {
        let fx = Fx::new();
        let shadow = fx.file("outside/shadow");
        let ok = fx.file("inside/ok");
        let store = fx.dir("store/abc-pkg");
        let deep = fx.link("inside/d1/d2/d3/d4/d5/evil", &shadow);
        fx.link("inside/d1/d2/d3/d4/d5/fine", &ok);
        fx.link("inside/d1/rel-fine", "../ok");
        fx.link("inside/d1/store", &store);
        fx.link("inside/d1/self-loop", "self-loop");
        let rel_out = fx.link("inside/d1/d2/rel-out", "../../../outside/shadow");
        let dangling = fx.link("inside/d1/dangling", fx.p("outside/gone/../nope"));
        fx.link("inside/d1/dangling-in", "nope");
        // A symlinked dir is reported, not entered: its contents are not scanned.
        fx.file("outside/tree/a/b");
        fx.link("outside/tree/a/c", &shadow);
        let dir_link = fx.link("inside/d1/tree", fx.p("outside/tree"));
        let report = scan_tree(&fx.p("inside"), &fx.permitted(&["inside", "store"]), 1000);
        assert_eq!(
            report,
            ScanReport {
                // Sorted component-wise: `d2` < `dangling` < `tree`.
                outside: vec![
                    (deep, shadow.clone()),
                    (rel_out, shadow),
                    (dangling, fx.p("outside/nope")),
                    (dir_link, fx.p("outside/tree")),
                ],
                // ok, d1..d5 (5), evil, fine, rel-fine, store, self-loop, rel-out, dangling,
                // dangling-in, tree
                sockets: vec![],
                store: vec![],
                entries: 15,
                truncated: false,
                unreadable: 0,
            }
        );
    }

    #[test]
    fn scan_reports_chains_through_links_the_sandbox_does_not_have() {
        // `inside/x -> home/hop -> inside/ok`: on the host it ends in a permitted place, but
        // `home/hop` does not exist inside the sandbox, so `x` dangles there.
        let fx = Fx::new();
        fx.file("inside/ok");
        let hop = fx.link("home/hop", fx.p("inside/ok"));
        let x = fx.link("inside/x", &hop);
        // `y -> x` goes the same way.
        let y = fx.link("inside/y", "x");
        let report = scan_tree(&fx.p("inside"), &fx.permitted(&["inside"]), 100);
        assert_eq!(report.outside, vec![(x, hop.clone()), (y, hop)]);
        let with_home = scan_tree(&fx.p("inside"), &fx.permitted(&["inside", "home"]), 100);
        assert_eq!(with_home.outside, vec![]);
    }

    #[test]
    fn scan_lists_sockets_but_not_sockets_behind_links() {
        use std::os::unix::net::UnixListener;
        let fx = Fx::new();
        let top = fx.p("inside/S.gpg-agent");
        let _a = UnixListener::bind(&top).unwrap();
        let deep = fx.dir("inside/a/b").join("bus");
        let _b = UnixListener::bind(&deep).unwrap();
        let outside = fx.p("outside/sock");
        let _c = UnixListener::bind(&outside).unwrap();
        fx.file("inside/a/regular");
        fx.link("inside/a/to-outside-sock", &outside);
        fx.link("inside/a/to-top", &top);
        let report = scan_tree(&fx.p("inside"), &fx.permitted(&["inside"]), 100);
        // Sorted component-wise: `S.gpg-agent` < `a`.
        assert_eq!(report.sockets, vec![top, deep]);
        // The link to the outside socket dangles inside, as any other.
        assert_eq!(
            report.outside,
            vec![(fx.p("inside/a/to-outside-sock"), outside)]
        );
        // A socket beyond the limit is not seen.
        let cut = scan_tree(&fx.p("inside"), &fx.permitted(&["inside"]), 1);
        assert!(cut.truncated && cut.sockets.len() <= 1, "{cut:?}");
    }

    #[test]
    fn scan_respects_the_limit() {
        let fx = Fx::new();
        for i in 0..20 {
            fx.file(&format!("inside/f{i}"));
        }
        let permitted = fx.permitted(&["inside"]);
        let exact = scan_tree(&fx.p("inside"), &permitted, 20);
        assert_eq!((exact.entries, exact.truncated), (20, false));
        let cut = scan_tree(&fx.p("inside"), &permitted, 7);
        assert_eq!((cut.entries, cut.truncated), (7, true));
        let none = scan_tree(&fx.p("inside"), &permitted, 0);
        assert_eq!((none.entries, none.truncated), (0, true));
    }

    #[test]
    fn scan_reports_under_the_given_path_and_resolves_from_the_real_one() {
        // `home/.claude -> inside/claude`: links are named under `home/.claude`, and a relative
        // target resolves against the real directory.
        let fx = Fx::new();
        fx.dir("inside/claude");
        fx.file("outside/s");
        fx.link("home/.claude", fx.p("inside/claude"));
        fx.link("inside/claude/up", "../../outside/s");
        let report = scan_tree(&fx.p("home/.claude"), &fx.permitted(&["inside"]), 100);
        assert_eq!(
            report.outside,
            vec![(fx.p("home/.claude/up"), fx.p("outside/s"))]
        );
    }

    #[test]
    fn scan_of_a_missing_dir_is_empty() {
        let fx = Fx::new();
        let report = scan_tree(&fx.p("nope"), &fx.permitted(&["inside"]), 100);
        assert_eq!(
            report,
            ScanReport {
                unreadable: 1,
                ..ScanReport::default()
            }
        );
    }

    #[test]
    fn scan_handles_odd_names() {
        let fx = Fx::new();
        let target = fx.file("outside/t \"q\"\nz");
        let link = fx.link("inside/a b/it's\nhere", &target);
        let report = scan_tree(&fx.p("inside"), &fx.permitted(&["inside"]), 100);
        assert_eq!(report.outside, vec![(link, target)]);
        let warning = scan_warning(&report).unwrap();
        assert_eq!(warning.lines().count(), 3, "{warning}");
    }
}
