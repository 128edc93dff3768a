//! A command the sandbox lacks but the caller's `PATH` has: agents installed outside Nix
//! (`~/.local/bin/claude` → `~/.local/share/claude/versions/…`, nvm's
//! `~/.nvm/versions/node/vX/bin`, `~/.npm-global/bin`) live under `$HOME`, which is empty
//! inside, so `agent-sandbox run -- claude` would say "command not found". Host-system mode
//! only (a closure says exactly what runs), and only for a bare name the sandbox's `PATH`
//! does not find.
//!
//! # The rule
//! The name is looked up on the caller's `PATH` as the shell would (first executable hit;
//! relative entries are never trusted), following every symlink on the way. Exposed
//! read-only, at their real paths:
//! - every symlink met on the way, recreated as the same link (Node resolves its main
//!   script's links to find its modules, so a link must stay a link);
//! - the final file's directory when the one link led there from another directory (the
//!   link points into a version or package directory, whose siblings — `node_modules`,
//!   libraries — the program reads; with a chain of links, the file alone: whoever could
//!   change a later link would pick the directory), unless that directory is too broad (the file alone
//!   then): `/` or straight in it, `$HOME` or above or straight in it, another user's home,
//!   a shared temporary directory (`/tmp`) or one straight in it, or anything under `/run`
//!   (they hold other programs' sockets, which a read-only bind leaves connectable);
//! - otherwise the final file alone (a `PATH` directory such as `~/.cargo/bin` holds other
//!   tools);
//! - a `#!` interpreter the sandbox lacks, by the same rule: `#!/usr/bin/env node` looks
//!   `node` up on the caller's `PATH` (nvm's `node` sits next to its `claude`), an absolute
//!   interpreter at its path.
//!
//! The directories the names were found in go first on `PATH` inside; only the exposed names
//! are there. Refused with a warning that prints the flags instead: anything in or holding a
//! sensitive directory (`~/.ssh`, `~/.gnupg`…), and anything the sandbox can write (the
//! launch directory, a read-write declared path), where the name runs by its path anyway.
//!
//! Pure: the filesystem comes in as [`Node`]s ([`host_node`] reads the real one).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

/// Directories under `$HOME` never exposed automatically (whatever links lead there).
pub const SENSITIVE: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".kube",
    ".docker",
    ".password-store",
    ".netrc",
    ".config/gcloud",
    ".local/share/keyrings",
];

/// Links followed at most, as the kernel's limit (a loop fails to resolve).
const MAX_LINKS: usize = 40;

/// Interpreters followed at most (a script whose interpreter is a script…).
const MAX_INTERPRETERS: usize = 3;

/// What `lstat` (and `readlink`, and a look at a file's first line) says about a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    /// A regular file: whether it is executable, and its `#!` line (without the `#!`).
    File {
        exec: bool,
        shebang: Option<String>,
    },
    Link(PathBuf),
    Missing,
}

/// The real filesystem as [`Node`]s. Reads a regular file's first bytes for its `#!` line.
pub fn host_node(p: &Path) -> Node {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return Node::Missing;
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        return std::fs::read_link(p).map_or(Node::Missing, Node::Link);
    }
    if ft.is_dir() {
        return Node::Dir;
    }
    if !ft.is_file() {
        return Node::Missing;
    }
    let mut head = [0u8; 256];
    let n = std::fs::File::open(p)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let shebang = head[..n].strip_prefix(b"#!").map(|rest| {
        let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
        String::from_utf8_lossy(line).into_owned()
    });
    Node::File {
        exec: meta.permissions().mode() & 0o111 != 0,
        shebang,
    }
}

/// What the planner knows about the sandbox, for [`resolve`].
pub struct Context<'a> {
    pub caller_path: &'a OsStr,
    /// The `PATH` inside.
    pub inside_path: &'a str,
    pub home: &'a Path,
    /// Whether the sandbox shows this host path at its own place (a link: the link itself).
    pub shown: &'a dyn Fn(&Path) -> bool,
    /// The host paths the sandbox can write (the sources of its read-write binds).
    pub writable: &'a [PathBuf],
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The sandbox's `PATH` finds it: nothing to do.
    Inside,
    /// On neither `PATH`: the init's "command not found" stands.
    Nowhere,
    Exposed(Exposure),
    /// Found, but not exposed: the warning, with the flags that would.
    Refused(String),
}

#[derive(Debug, PartialEq, Eq, Default)]
pub struct Exposure {
    /// Bound read-only at their own paths (files or directories), shallow before deep.
    pub ro: Vec<PathBuf>,
    /// Symlinks recreated inside: (the link, its target as written). None inside a `ro` path.
    pub links: Vec<(PathBuf, PathBuf)>,
    /// Put first on `PATH` inside, in order.
    pub path_dirs: Vec<PathBuf>,
    /// The one-line note: what was exposed and the equivalent flags.
    pub note: String,
    /// Where the command was found (the note's first half), for a refusal the planner adds.
    pub story: String,
    /// The flags that expose the same by hand.
    pub by_hand: String,
}

/// One path walked to its end: the links met on the way and the real file.
#[derive(Debug, Clone)]
struct Walk {
    links: Vec<(PathBuf, PathBuf)>,
    real: PathBuf,
    exec: bool,
    shebang: Option<String>,
}

enum Part {
    Up,
    Name(OsString),
}

fn parts(p: &Path) -> impl Iterator<Item = Part> + '_ {
    p.components().filter_map(|c| match c {
        Component::ParentDir => Some(Part::Up),
        Component::Normal(n) => Some(Part::Name(n.to_owned())),
        _ => None,
    })
}

/// Resolves `path` (absolute) component by component, as the kernel does: each link's target
/// continues from the link's directory (or `/`), so `..` after a link is taken on the real
/// path. None unless it ends at a regular file.
fn walk(node: &dyn Fn(&Path) -> Node, path: &Path) -> Option<Walk> {
    let mut cur = PathBuf::from("/");
    let mut rest: VecDeque<Part> = parts(path).collect();
    let mut links = Vec::new();
    while let Some(part) = rest.pop_front() {
        let name = match part {
            Part::Up => {
                cur.pop();
                continue;
            }
            Part::Name(n) => n,
        };
        let next = cur.join(&name);
        match node(&next) {
            Node::Dir => cur = next,
            Node::File { exec, shebang } if rest.is_empty() => {
                return Some(Walk {
                    links,
                    real: next,
                    exec,
                    shebang,
                });
            }
            Node::Link(target) if links.len() < MAX_LINKS => {
                if target.is_absolute() {
                    cur = PathBuf::from("/");
                }
                for p in parts(&target).collect::<Vec<_>>().into_iter().rev() {
                    rest.push_front(p);
                }
                links.push((next, target));
            }
            Node::File { .. } | Node::Link(_) | Node::Missing => return None,
        }
    }
    None
}

/// The first executable `name` on `path` (absolute entries only: a relative one means
/// wherever the shell is): the directory and the walk.
fn lookup(node: &dyn Fn(&Path) -> Node, path: &OsStr, name: &str) -> Option<(PathBuf, Walk)> {
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .find_map(|d| {
            walk(node, &d.join(name))
                .filter(|w| w.exec)
                .map(|w| (d.join(name), w))
        })
}

/// Whether the sandbox shows the walked file as the host has it (every link and the file).
fn shown_inside(ctx: &Context<'_>, w: &Walk) -> bool {
    (ctx.shown)(&w.real) && w.links.iter().all(|(l, _)| (ctx.shown)(l))
}

/// The interpreter a `#!` line names: `Err(name)` for `env NAME`, `Ok(path)` for a path.
fn interpreter(shebang: &str) -> Option<Result<PathBuf, String>> {
    let mut words = shebang.split_whitespace();
    let first = Path::new(words.next()?);
    if first.file_name() == Some(OsStr::new("env")) {
        // `env -S node --flag`, `env FOO=1 node`: the first word that is neither.
        return words
            .find(|w| !w.starts_with('-') && !w.contains('='))
            .map(|w| Err(w.to_string()));
    }
    first.is_absolute().then(|| Ok(first.to_path_buf()))
}

/// What one walked file needs: its links and its file or directory (the rule above).
fn needs(home: &Path, w: &Walk, out: &mut Exposure) {
    let file = &w.real;
    let dir = file.parent().unwrap_or(Path::new("/"));
    // Only for a single link (the user's own link into a package): with a chain, whoever can
    // change a later link would choose which directory gets exposed; the file alone then.
    let from_elsewhere = w.links.len() == 1
        && w.links
            .last()
            .is_some_and(|(link, _)| link.parent() != Some(dir));
    let bind = if from_elsewhere && !too_broad(home, dir) {
        dir
    } else {
        file
    };
    out.ro.push(bind.to_path_buf());
    out.links.extend(w.links.iter().cloned());
}

/// Shared temporary directories: they and the directories straight in them hold other
/// programs' sockets (`/tmp/.X11-unix`, `/tmp/tmux-1000/default`, `/tmp/ssh-…/agent.1`),
/// which a read-only bind does not stop anyone from connecting to.
const SHARED_TEMP: &[&str] = &["/tmp", "/var/tmp"];

/// Runtime directories: everything under them is sockets and state (`/run/user/1000/bus`,
/// `…/gnupg/S.gpg-agent.ssh`, `/run/docker.sock`), never an installation.
const RUNTIME: &[&str] = &["/run", "/var/run", "/dev/shm"];

/// Whether `dir` is too broad to expose whole for one program (the file alone then): `/` or a
/// directory straight in it (`/tmp`, `/etc`, `/opt`), `$HOME` or above or straight in it,
/// another user's home, a shared temporary directory or one straight in it, or anything in a
/// runtime directory.
fn too_broad(home: &Path, dir: &Path) -> bool {
    let parent = dir.parent();
    dir.components().count() <= 2
        || home.starts_with(dir)
        || parent == Some(home)
        || parent == Some(Path::new("/home"))
        || SHARED_TEMP
            .iter()
            .any(|t| dir == Path::new(t) || parent == Some(Path::new(t)))
        || RUNTIME.iter().any(|r| dir.starts_with(r))
}

/// The file the shell would run for `name` (`found`, walked to `w`) and its interpreters.
struct Found {
    name: String,
    at: PathBuf,
    walk: Walk,
}

/// Decides what `name` needs to run inside ([`Outcome`]). `node` is the filesystem.
pub fn resolve(ctx: &Context<'_>, name: &str, node: &dyn Fn(&Path) -> Node) -> Outcome {
    if let Some((_, w)) = lookup(node, OsStr::new(ctx.inside_path), name) {
        if shown_inside(ctx, &w) {
            return Outcome::Inside;
        }
    }
    let Some((at, first)) = lookup(node, ctx.caller_path, name) else {
        return Outcome::Nowhere;
    };
    let mut found = vec![Found {
        name: name.to_string(),
        at,
        walk: first,
    }];
    let mut x = Exposure::default();
    let mut path_dirs = vec![found[0].at.parent().unwrap_or(Path::new("/")).to_path_buf()];
    // Its interpreter, and the interpreter's: looked up the way `env` would, on the caller's
    // PATH (which the sandbox's then starts with).
    while found.len() <= MAX_INTERPRETERS {
        let last = &found[found.len() - 1].walk;
        let Some(interp) = last.shebang.as_deref().and_then(interpreter) else {
            break;
        };
        let next = match interp {
            Err(name) => lookup(node, ctx.caller_path, &name).map(|(at, w)| (name, at, w, true)),
            Ok(path) => walk(node, &path).map(|w| {
                let name = path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into();
                (name, path, w, false)
            }),
        };
        let Some((name, at, w, on_path)) = next else {
            break;
        };
        if shown_inside(ctx, &w) {
            break;
        }
        if on_path {
            path_dirs.push(at.parent().unwrap_or(Path::new("/")).to_path_buf());
        }
        found.push(Found { name, at, walk: w });
    }
    for f in &found {
        needs(ctx.home, &f.walk, &mut x);
    }
    path_dirs.dedup();
    x.path_dirs = path_dirs;
    x.ro.sort_by_key(|p| p.components().count());
    x.ro.dedup();
    let story = story(ctx.home, &found);
    let by_hand = flags(ctx, &x);
    if let Some(bad) =
        x.ro.iter()
            .chain(x.links.iter().map(|(l, _)| l))
            .find(|p| sensitive(ctx.home, p))
    {
        // Fail closed: a link into ~/.ssh must not turn into a read-only view of the keys.
        return Outcome::Refused(format!(
            "{story}; not exposed automatically: {} is or holds a sensitive directory. If you mean it: {by_hand}",
            tilde(ctx.home, bad)
        ));
    }
    let all = x.ro.iter().chain(x.links.iter().map(|(l, _)| l));
    if let Some((p, w)) = all
        .filter_map(|p| {
            ctx.writable
                .iter()
                .find(|w| p.starts_with(w))
                .map(|w| (p, w))
        })
        .next()
    {
        // A read-only bind there would take away what the sandbox may write; the path is
        // shown anyway, so the command runs by its path.
        return Outcome::Refused(format!(
            "{story}; not exposed automatically: {} lies in {}, which the sandbox can write. Fix: run it by its path (`-- {}`)",
            tilde(ctx.home, p),
            tilde(ctx.home, w),
            found[0].at.display()
        ));
    }
    tidy(ctx, &mut x);
    x.by_hand = flags(ctx, &x);
    x.note = format!("{story}; exposed read-only (the same as {})", x.by_hand);
    x.story = story;
    Outcome::Exposed(x)
}

/// Drops what the sandbox shows already and what lies inside another exposed path (`ro` is
/// sorted shallow before deep).
fn tidy(ctx: &Context<'_>, x: &mut Exposure) {
    let mut ro: Vec<PathBuf> = Vec::new();
    for p in std::mem::take(&mut x.ro) {
        if !(ctx.shown)(&p) && !ro.iter().any(|r| p.starts_with(r)) {
            ro.push(p);
        }
    }
    x.ro = ro;
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    for (l, t) in std::mem::take(&mut x.links) {
        if !(ctx.shown)(&l)
            && !x.ro.iter().any(|r| l.starts_with(r))
            && !links.iter().any(|(o, _)| *o == l)
        {
            links.push((l, t));
        }
    }
    x.links = links;
}

fn sensitive(home: &Path, p: &Path) -> bool {
    SENSITIVE
        .iter()
        .map(|s| home.join(s))
        .any(|s| p.starts_with(&s) || s.starts_with(p))
}

/// `~/…` for paths in `home`.
fn tilde(home: &Path, p: &Path) -> String {
    match p.strip_prefix(home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".into(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => p.display().to_string(),
    }
}

/// The flags that expose the same by hand: each link and each path read-only, and `PATH`.
fn flags(ctx: &Context<'_>, x: &Exposure) -> String {
    let mut out: Vec<String> = Vec::new();
    for (l, _) in &x.links {
        out.push(format!("--ro {}", tilde(ctx.home, l)));
    }
    for p in &x.ro {
        out.push(format!("--ro {}", tilde(ctx.home, p)));
    }
    let dirs: Vec<String> = x
        .path_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    out.push(format!("--env PATH={}:{}", dirs.join(":"), ctx.inside_path));
    out.join(" ")
}

/// "claude was found on your PATH at ~/.local/bin/claude -> …/claude (interpreter …)".
fn story(home: &Path, found: &[Found]) -> String {
    let one = |f: &Found| {
        if f.walk.real == f.at {
            tilde(home, &f.at)
        } else {
            format!("{} -> {}", tilde(home, &f.at), tilde(home, &f.walk.real))
        }
    };
    let mut s = format!(
        "{} is not on the sandbox's PATH but was found on yours at {}",
        found[0].name,
        one(&found[0])
    );
    for f in &found[1..] {
        s.push_str(&format!(", its interpreter {} at {}", f.name, one(f)));
    }
    s
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
