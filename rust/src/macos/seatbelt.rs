//! Plan → Seatbelt profile, `-D` parameters and the `/usr/bin/sandbox-exec` argv. Pure: compiled
//! and unit-tested on every OS, so `--dry-run --target-os macos` shows on Linux exactly what a
//! Mac would run.
//!
//! # Paths never become profile text
//! The profile is `base.sbpl` (constant), a generated middle and `tail.sbpl` (constant). The
//! generated middle names every path that comes from the plan or the session as
//! `(param "NAME")`; the path itself travels as `-DNAME=/the/path`, a separate argv element that
//! sandbox-exec hands to the profile compiler as a string value. Nothing is escaped because
//! nothing is spliced: no path, however hostile (quotes, parentheses, newlines), can change a
//! rule. Parameter names are built from the rule's role and an index, never from a path. The
//! only numbers in the generated text are TCP ports, formatted from `u16`.
//!
//! # Rule precedence, and where that comes from
//! Apple publishes no documentation of the profile language (Chromium's "Mac Sandbox V2 Design
//! Doc", `sandbox/mac/seatbelt_sandbox_design.md`, says so and points to the reverse-engineered
//! "Apple Sandbox Guide" by fG!, reverse.put.as, 2011); `sandbox-exec(1)` documents only the
//! `-f`/`-n`/`-p`/`-D` flags. What this module relies on was measured by others:
//! - **the last matching rule wins among rules that carry a filter**: microsoft/mxc measured
//!   "allow then deny, same path → EPERM; deny then allow → allowed; shallow deny, deeper allow →
//!   allowed" (pull request #754; `docs/backends/seatbelt/seatbelt-backend.md`), and
//!   anthropic-experimental/sandbox-runtime builds its profiles on "later rules take precedence";
//! - a rule **without** a filter does not override a filtered one in either order (mxc, same
//!   document): so we never rely on an unfiltered allow being beaten by position alone, and
//!   filtered denies (ports, ioctls, sysctls) are always placed after the allows they narrow;
//! - `rename(2)` of a directory is checked as `file-write-unlink` on its own path only, so a
//!   path-based deny on `.git/hooks` is defeated by renaming `.git` away and back (the
//!   sandbox-runtime "move bypass" fix); hence the pins below;
//! - `(remote ip …)`/`(local ip …)` accept only `*` or `localhost` as host, and `localhost`
//!   means every address of this machine (mxc);
//! - the symbolic `TIOCSTI` is unbound on macOS 14.2 while `(ioctl-command 2147578994)` compiles
//!   on macOS 26 (openai/codex issue #45119).
//!
//! The darwin self-test (see the module docs of [`crate::macos`]) checks each of these on a Mac.
//!
//! # Ordering (the Linux mount order, translated)
//! 1. `base.sbpl`: `(deny default)`, processes, system libraries, devices, terminals.
//! 2. System executables (store paths, or the host's `/usr`, `/bin`, `/sbin`), stat of the
//!    directories above every granted path.
//! 3. Declared symlinks: allows on their real targets (allow only, so they never weaken a deny).
//! 4. Every other exposed path, shallow before deep, each with its mode; a read-only path also
//!    gets a write deny, so a read-only path inside a writable one (a git hook in the launch
//!    directory) stays read-only, and a writable one inside a read-only one is writable again:
//!    the deepest rule wins, as the deepest mount does on Linux.
//! 5. Pins: no rename or unlink of writable roots and of the directories above protected paths.
//! 6. The private HOME and TMPDIR, the terminal, the session's CA files, the network.
//! 7. Final denies (other temp dirs, the session log directory, `tail.sbpl`).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::plan::{Entry, Mount, Network, Plan, SESSION_MOUNT, Why};
use crate::report::{escape_controls, quote_all, shown_env_value};

/// Always by absolute path: a `sandbox-exec` earlier on `PATH` would be trusted with the policy.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The constant head of every profile.
pub const BASE_PROFILE: &str = include_str!("base.sbpl");

/// The constant final denies of every profile.
pub const TAIL_PROFILE: &str = include_str!("tail.sbpl");

/// Where `/usr/bin`'s developer shims (git, make, cc) exec the real tools; exposed (read-only,
/// executable) in host-system mode, since Linux's host-system mode runs the host's tools too.
const DEVELOPER_DIRS: &[&str] = &[
    "/Library/Developer/CommandLineTools",
    "/Applications/Xcode.app",
];

/// Makes Go ≥ 1.27 honour `SSL_CERT_FILE` on macOS (golang/go#77865, Go 1.27 release notes).
const GODEBUG_SSL_CERT_FILE: &str = "x509sslcertoverrideplatform=1";

/// Directories `base.sbpl` already lets the sandbox `stat` (a test keeps the two in step).
const BASE_STAT_DIRS: &[&str] = &[
    "/System",
    "/System/Library",
    "/System/Library/CoreServices",
    "/Library",
    "/Library/Apple",
    "/Library/Apple/usr",
    "/private",
    "/private/etc",
    "/private/var",
    "/private/var/db",
    "/private/var/select",
    "/usr",
    "/bin",
    "/dev",
];

/// Symlinks macOS keeps at the root; the kernel (and so Seatbelt) sees the paths behind them.
const ROOT_SYMLINKS: &[(&str, &str)] = &[
    ("/tmp", "/private/tmp"),
    ("/var", "/private/var"),
    ("/etc", "/private/etc"),
];

/// Allows for writable paths: write, clone (`fs::copy` uses `clonefile`), run what was built.
const OPS_RW: &str = "file-read* file-write* file-clone process-exec file-map-executable";
/// Allows for read-only paths. Executable, as on Linux, where binds are not `noexec`.
const OPS_RO: &str = "file-read* process-exec file-map-executable";
/// What a read-only path inside a writable one must refuse (a socket file is a write too).
const OPS_PROTECT: &str = "file-write* file-clone network-bind";
/// Unix sockets by path (bind, listen, connect): only in the sandbox's own directories.
const OPS_UNIX_SOCKETS: &str = "network-bind network-inbound network-outbound";

/// What the launcher knows about this session that the plan does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatbeltOptions {
    /// The private per-session HOME, used when the plan gives the sandbox an empty home. Must
    /// not exist yet; [`prepare`] creates it.
    pub home_dir: PathBuf,
    /// The private per-session TMPDIR (instead of the shared `/tmp`). Must not exist yet.
    pub tmp_dir: PathBuf,
    /// The session's own terminal devices (`ttyname` of fds 0–2, e.g. `/dev/ttys003`), which
    /// the sandbox may open by name. Empty when not on a terminal.
    pub ttys: Vec<PathBuf>,
    /// Filtered mode: the port the session's proxy really listens on, on the host's loopback
    /// (there is no bridge on macOS). `None`: the plan's inside port (dry runs).
    pub proxy_port: Option<u16>,
}

impl SeatbeltOptions {
    /// `<session_dir>/home` and `<session_dir>/tmp`: private (0700), per session, outside every
    /// declared path, and removed with the session directory.
    pub fn in_session_dir(session_dir: &Path, ttys: Vec<PathBuf>) -> Self {
        SeatbeltOptions {
            home_dir: session_dir.join("home"),
            tmp_dir: session_dir.join("tmp"),
            ttys,
            proxy_port: None,
        }
    }
}

/// Everything the macOS launcher needs, derived from the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatbeltPlan {
    /// The profile text (constant head, generated rules, constant tail).
    pub profile: String,
    /// `-D` parameters in argv order: (name, path). Values are exact bytes, never text of the
    /// profile.
    pub params: Vec<(String, OsString)>,
    /// `/usr/bin/sandbox-exec -p <profile> -DNAME=value… -- <command…>`. The command runs
    /// directly: there is no PID-1 init on macOS.
    pub argv: Vec<OsString>,
    /// The complete environment of sandbox-exec and so of the command (start from empty).
    pub env: BTreeMap<String, String>,
    /// Working directory of the command (the launch directory).
    pub cwd: PathBuf,
    /// The private HOME to create, when the plan gives the sandbox an empty home.
    pub home_dir: Option<PathBuf>,
    /// The private TMPDIR to create.
    pub tmp_dir: PathBuf,
    /// Symlinks to create inside the private HOME, (link, real target), parents before
    /// children: the declared paths under `$HOME` appear at their usual place relative to
    /// `$HOME`. The profile allows the real targets; a link only helps name them, so an agent
    /// that repoints one gains nothing.
    pub home_links: Vec<(PathBuf, PathBuf)>,
}

#[derive(Debug, thiserror::Error)]
pub enum SeatbeltError {
    #[error(
        "{path} already exists, but the private session directories must be new (an old one could hold links planted by an earlier session). Fix: remove {path}, or start a new session"
    )]
    Exists { path: PathBuf },
    #[error(
        "cannot create the private session directory {path}: {source}. Fix: make sure its parent exists and is writable"
    )]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the link {link} -> {target} in the private home: {source}")]
    Link {
        link: PathBuf,
        target: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = SeatbeltError> = std::result::Result<T, E>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ro,
    Rw,
}

/// The plan's mounts, sorted into what Seatbelt can express.
#[derive(Debug, Default)]
struct Layout {
    /// System layer: store paths (closure mode) or `/usr`, `/bin`, `/sbin` (host-system mode).
    exec_roots: Vec<PathBuf>,
    /// System layer data: `/private/etc` entries (host-system mode), `/nix/var` (allowNix).
    system_ro: Vec<PathBuf>,
    /// allowNix: the Nix daemon's socket, which the sandbox may connect to.
    nix_daemon_socket: Option<PathBuf>,
    host_system: bool,
    /// The plan puts an empty tmpfs on `$HOME`: use a private directory instead.
    ephemeral_home: bool,
    /// The launcher's per-session directory (its logs must not be writable from inside).
    session_dir: Option<PathBuf>,
    /// The session's shared directory (CA bundle), bound at `SESSION_MOUNT` on Linux.
    session_shared: Option<PathBuf>,
    /// `Mount::Mask`: out of reach (the launcher's state directory inside an exposed one).
    masked: Vec<PathBuf>,
    /// Declared symlinks: (real target, declared path, mode).
    aliases: Vec<(PathBuf, PathBuf, Mode)>,
    /// Everything else shown at its own path, shallow before deep.
    direct: Vec<(PathBuf, Mode)>,
}

/// `/tmp/x` → `/private/tmp/x` (likewise `/var`, `/etc`), lexically and component-wise: rules
/// must name the path the kernel sees, or they silently never match.
pub fn canonical(path: &Path) -> PathBuf {
    for (link, real) in ROOT_SYMLINKS {
        if let Ok(rest) = path.strip_prefix(link) {
            return Path::new(real).join(rest);
        }
    }
    path.to_path_buf()
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

/// Derives what Seatbelt needs from the plan's labelled mounts ([`Why`]): the system layer
/// becomes executable roots (or read-only data), the Linux plumbing (kernel filesystems,
/// synthetic identity files, resolv.conf, the init) is left out, the empty `$HOME` and the
/// private `/tmp` become per-session directories, and every exposed path keeps its mode.
fn layout(plan: &Plan) -> Layout {
    let mut l = Layout {
        session_dir: Some(plan.session_dir.clone()),
        nix_daemon_socket: plan.nix_daemon_socket.as_deref().map(canonical),
        ..Layout::default()
    };
    let socket_dir = l.nix_daemon_socket.clone();
    let socket_dir = socket_dir.as_deref().and_then(Path::parent);
    let mut direct = Vec::new();
    for Entry { mount: m, why } in &plan.mounts {
        match why {
            Why::System | Why::Closure | Why::NixDaemon => {
                // Symlinks (`/bin/sh` → store, merged /usr) are not recreated: macOS's own
                // are used.
                if let Mount::RoBind { src, .. } = m {
                    let p = canonical(src);
                    if *why == Why::NixDaemon
                        || p.starts_with("/private/etc")
                        || p.starts_with("/nix/var")
                        || Some(p.as_path()) == socket_dir
                    {
                        l.system_ro.push(p);
                    } else {
                        l.host_system |= p == Path::new("/usr");
                        l.exec_roots.push(p);
                    }
                }
                continue;
            }
            // Linux plumbing: macOS has its own /proc-less kernel view, users and resolver;
            // the init is Linux's; masked sockets cannot be bound over on macOS.
            Why::Kernel | Why::Identity | Why::Resolv | Why::Init | Why::SocketMask => continue,
            // /tmp and /run: replaced by the private TMPDIR (macOS has no /run).
            Why::Scratch => continue,
            Why::Home => {
                l.ephemeral_home = true;
                continue;
            }
            Why::Session => {
                if let Mount::RoBind { src, .. } = m {
                    l.session_shared = Some(canonical(src));
                }
                continue;
            }
            Why::StateMask => {
                l.masked.push(canonical(m.dest()));
                continue;
            }
            Why::Launch
            | Why::Repo
            | Why::GitDir
            | Why::Pin
            | Why::Protect
            | Why::Placeholder
            | Why::Declared
            | Why::Alias => {}
        }
        let (src, dest, mode) = match m {
            Mount::RoBind { src, dest } => (src, dest, Mode::Ro),
            Mount::Bind { src, dest } => (src, dest, Mode::Rw),
            // Linux binds these by descriptor; Seatbelt rules name paths either way.
            Mount::BindFd { src, dest, rw, .. } => {
                (src, dest, if *rw { Mode::Rw } else { Mode::Ro })
            }
            Mount::Mask { dest } => {
                l.masked.push(canonical(dest));
                continue;
            }
            Mount::Tmpfs { .. }
            | Mount::Proc { .. }
            | Mount::Dev { .. }
            | Mount::Symlink { .. } => {
                continue;
            }
        };
        if src == dest {
            direct.push((canonical(src), mode));
        } else {
            l.aliases.push((canonical(src), dest.clone(), mode));
        }
    }
    // Stable: for equal depth the plan's order (the more protective entry later) is kept.
    direct.sort_by_key(|(p, _)| depth(p));
    l.direct = direct;
    l
}

/// Whether the profile lets the sandbox write `path`: the last matching rule among the
/// generated path rules decides (see the module docs).
fn writable(l: &Layout, path: &Path) -> bool {
    let mut w = false;
    for (src, _, mode) in &l.aliases {
        if *mode == Mode::Rw && path.starts_with(src) {
            w = true;
        }
    }
    for (p, mode) in &l.direct {
        if path.starts_with(p) {
            w = *mode == Mode::Rw;
        }
    }
    w
}

/// Paths that must not be renamed or unlinked: every writable root (on Linux a mount point,
/// which cannot be), and every writable directory above a read-only path inside a writable
/// one. Without these, `mv .git g && write g/hooks/x && mv g .git` would plant a hook.
fn pins(l: &Layout) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |p: &Path| {
        if !out.iter().any(|o| o == p) {
            out.push(p.to_path_buf());
        }
    };
    for (src, _, mode) in &l.aliases {
        if *mode == Mode::Rw && writable(l, src) {
            push(src);
        }
    }
    for (p, mode) in &l.direct {
        match mode {
            Mode::Rw if writable(l, p) => push(p),
            Mode::Rw => {}
            Mode::Ro => {
                for a in p.ancestors().skip(1) {
                    if !writable(l, a) {
                        break;
                    }
                    push(a);
                }
            }
        }
    }
    out
}

/// Collects `-D` parameters; names come from the role and a counter, never from the path.
#[derive(Default)]
struct Params {
    list: Vec<(String, OsString)>,
    counters: BTreeMap<&'static str, usize>,
}

impl Params {
    fn indexed(&mut self, role: &'static str, path: &Path) -> String {
        let n = self.counters.entry(role).or_insert(0);
        let name = format!("{role}_{n}");
        *n += 1;
        self.list.push((name.clone(), path.as_os_str().to_owned()));
        name
    }

    fn named(&mut self, name: &'static str, path: &Path) -> String {
        self.list
            .push((name.to_string(), path.as_os_str().to_owned()));
        name.to_string()
    }
}

fn subpath(name: &str) -> String {
    format!("(subpath (param \"{name}\"))")
}

fn literal(name: &str) -> String {
    format!("(literal (param \"{name}\"))")
}

/// One rule; several filters go one per line.
fn rule(out: &mut String, action: &str, ops: &str, filters: &[String]) {
    match filters {
        [] => {}
        [one] => {
            let _ = writeln!(out, "({action} {ops} {one})");
        }
        many => {
            let _ = write!(out, "({action} {ops}");
            for f in many {
                let _ = write!(out, "\n  {f}");
            }
            out.push_str(")\n");
        }
    }
}

fn loopback_ports(ports: &[u16]) -> Vec<String> {
    ports
        .iter()
        .map(|p| format!("(remote ip \"localhost:{p}\")"))
        .collect()
}

/// Plan → profile, parameters, argv, environment and the private directories to create.
pub fn plan_seatbelt(plan: &Plan, opts: &SeatbeltOptions) -> SeatbeltPlan {
    let l = layout(plan);
    let home_dir = canonical(&opts.home_dir);
    let tmp_dir = canonical(&opts.tmp_dir);
    let mut params = Params::default();
    let mut p = String::from(BASE_PROFILE);

    p.push_str(
        "\n;; ---- Generated for this session. Every path is a parameter (-D), never text ----\n",
    );

    // --- 2. system executables, directory stat -----------------------------------------------
    if l.host_system {
        p.push_str(";; Host-system mode: the host's tools, and the developer tools /usr/bin's shims run.\n");
        let dev: Vec<String> = DEVELOPER_DIRS
            .iter()
            .map(|d| format!("(subpath \"{d}\")"))
            .collect();
        rule(&mut p, "allow", OPS_RO, &dev);
        rule(
            &mut p,
            "allow",
            "file-read*",
            &["(literal \"/private/var/db/xcode_select_link\")".into()],
        );
        rule(
            &mut p,
            "allow",
            "file-read-metadata",
            &[
                "(literal \"/Library/Developer\")".into(),
                "(literal \"/Applications\")".into(),
            ],
        );
    } else if !l.exec_roots.is_empty() {
        p.push_str(";; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env\n;; (the host's /usr/bin is not exposed).\n");
    }
    let exec: Vec<String> = l
        .exec_roots
        .iter()
        .map(|r| subpath(&params.indexed("EXEC", r)))
        .collect();
    rule(&mut p, "allow", OPS_RO, &exec);
    let sys: Vec<String> = l
        .system_ro
        .iter()
        .map(|r| subpath(&params.indexed("SYSTEM", r)))
        .collect();
    rule(&mut p, "allow", "file-read*", &sys);

    let mut roots: Vec<&Path> = Vec::new();
    roots.extend(l.exec_roots.iter().map(PathBuf::as_path));
    roots.extend(l.system_ro.iter().map(PathBuf::as_path));
    roots.extend(l.aliases.iter().map(|(src, _, _)| src.as_path()));
    roots.extend(l.direct.iter().map(|(d, _)| d.as_path()));
    if l.ephemeral_home {
        roots.push(&home_dir);
    }
    roots.push(&tmp_dir);
    roots.extend(l.session_shared.as_deref());
    let ancestors: BTreeSet<&Path> = roots
        .iter()
        .flat_map(|r| r.ancestors().skip(1))
        .filter(|a| {
            // "/", those the base names and those inside a granted root need no parameter.
            *a != Path::new("/")
                && !roots.iter().any(|r| a.starts_with(r))
                && !BASE_STAT_DIRS.iter().any(|d| *a == Path::new(d))
        })
        .collect();
    if !ancestors.is_empty() {
        p.push_str(";; The directories above granted paths: stat only, no listing (realpath lstats each).\n");
    }
    let anc: Vec<String> = ancestors
        .iter()
        .map(|a| literal(&params.indexed("ANCESTOR", a)))
        .collect();
    rule(&mut p, "allow", "file-read-metadata", &anc);

    // --- 3. declared symlinks ------------------------------------------------------------------
    if !l.aliases.is_empty() {
        p.push_str(";; Declared symlinks, granted on their real targets. Allows only: never weaker than\n;; the rules below for the same place.\n");
    }
    // Granted roots under /private/var/folders: the final temp-dir deny must spare them.
    let mut granted_in_folders: Vec<String> = Vec::new();
    let in_folders = |p: &Path| p.starts_with("/private/var/folders");
    for (src, _, mode) in &l.aliases {
        let name = params.indexed("TARGET", src);
        if in_folders(src) {
            granted_in_folders.push(name.clone());
        }
        let ops = if *mode == Mode::Rw { OPS_RW } else { OPS_RO };
        rule(&mut p, "allow", ops, &[subpath(&name)]);
    }

    // --- 4. exposed paths, shallow before deep ------------------------------------------------
    if !l.direct.is_empty() {
        p.push_str(";; Exposed paths, shallow before deep; a read-only path also denies writes, so the\n;; deepest rule wins, as the deepest mount does on Linux.\n");
    }
    let cwd = canonical(&plan.cwd);
    for (path, mode) in &l.direct {
        let name = params.indexed("PATH", path);
        if in_folders(path) {
            granted_in_folders.push(name.clone());
        }
        let f = subpath(&name);
        match mode {
            Mode::Rw => {
                rule(&mut p, "allow", OPS_RW, std::slice::from_ref(&f));
                if *path == cwd {
                    rule(&mut p, "allow", OPS_UNIX_SOCKETS, &[f]);
                }
            }
            Mode::Ro => {
                rule(&mut p, "allow", OPS_RO, std::slice::from_ref(&f));
                rule(&mut p, "deny", OPS_PROTECT, &[f]);
            }
        }
    }

    // --- 5. pins -------------------------------------------------------------------------------
    let pinned = pins(&l);
    if !pinned.is_empty() {
        p.push_str(";; Pins: writable roots and the directories above protected paths cannot be renamed\n;; or removed (a rename would carry the protected path away from its rule).\n");
    }
    let pin: Vec<String> = pinned
        .iter()
        .map(|a| literal(&params.indexed("PIN", a)))
        .collect();
    rule(&mut p, "deny", "file-write-unlink", &pin);

    // --- 6. private dirs, terminal, session files, network ------------------------------------
    p.push_str(";; The private per-session directories: HOME (when empty on Linux) and TMPDIR.\n");
    let mut private = Vec::new();
    let home_param = l
        .ephemeral_home
        .then(|| params.named("HOME_DIR", &home_dir));
    private.extend(home_param.as_deref().map(subpath));
    let tmp_param = params.named("TMP_DIR", &tmp_dir);
    private.push(subpath(&tmp_param));
    rule(&mut p, "allow", OPS_RW, &private);
    rule(&mut p, "allow", OPS_UNIX_SOCKETS, &private);
    let home_links = if l.ephemeral_home {
        home_links(&l, &canonical(&plan.home), &home_dir)
    } else {
        Vec::new()
    };
    if !home_links.is_empty() {
        p.push_str(";; The links in the private home stand for Linux's mount points: they cannot be\n;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently\n;; replacing the link with a file that vanishes at exit.\n");
    }
    let links: Vec<String> = home_links
        .iter()
        .map(|(link, _)| literal(&params.indexed("LINK", link)))
        .collect();
    rule(&mut p, "deny", "file-write-unlink", &links);

    if !opts.ttys.is_empty() {
        p.push_str(";; The session's own terminal, by name.\n");
    }
    let ttys: Vec<String> = opts
        .ttys
        .iter()
        .map(|t| literal(&params.indexed("TTY", &canonical(t))))
        .collect();
    rule(&mut p, "allow", "file-read* file-write* file-ioctl", &ttys);

    if let Some(socket) = &l.nix_daemon_socket {
        p.push_str(
            ";; allowNix: the Nix daemon's socket (the daemon builds outside this sandbox).\n",
        );
        let name = params.named("NIX_DAEMON_SOCKET", socket);
        rule(&mut p, "allow", "network-outbound", &[literal(&name)]);
    }
    if let Some(shared) = &l.session_shared {
        p.push_str(";; The session's CA files (read-only).\n");
        let name = params.named("SESSION_SHARED", shared);
        rule(&mut p, "allow", "file-read*", &[subpath(&name)]);
    }

    network(&mut p, plan, opts);

    // --- 7. final denies -------------------------------------------------------------------------
    p.push_str(";; ---- Final denies ----\n");
    let mut own = Vec::new();
    own.extend(
        home_param
            .as_deref()
            .map(|n| format!("(require-not {})", subpath(n))),
    );
    own.push(format!("(require-not {})", subpath(&tmp_param)));
    p.push_str(";; Other sessions' and other programs' temporary directories.\n");
    let mut folders = vec!["(subpath \"/private/var/folders\")".to_string()];
    folders.extend(own.iter().cloned());
    // A project or declared path inside the user's temp dir stays usable, as on Linux.
    folders.extend(
        granted_in_folders
            .iter()
            .map(|n| format!("(require-not {})", subpath(n))),
    );
    let _ = writeln!(
        p,
        "(deny file-read-data file-write*\n  (require-all\n    {}))",
        folders.join("\n    ")
    );
    if !l.masked.is_empty() {
        p.push_str(";; Masked: the launcher's state directory inside an exposed path (other sessions'\n;; logs, this session's files); only this session's private dirs stay usable.\n");
    }
    for m in &l.masked {
        let name = params.indexed("MASK", m);
        let mut f = vec![subpath(&name)];
        f.extend(own.iter().cloned());
        let _ = writeln!(
            p,
            "(deny file-read-data file-write*\n  (require-all\n    {}))",
            f.join("\n    ")
        );
    }
    if let Some(session_dir) = &l.session_dir {
        p.push_str(";; The session directory: its logs and files are the launcher's.\n");
        let name = params.named("SESSION_DIR", &canonical(session_dir));
        let mut f = vec![subpath(&name)];
        f.extend(own.iter().cloned());
        let _ = writeln!(
            p,
            "(deny file-write*\n  (require-all\n    {}))",
            f.join("\n    ")
        );
    }
    p.push_str(TAIL_PROFILE);

    // --- environment, links, argv -----------------------------------------------------------------
    let mut env = plan.env.clone();
    // The proxy variables name the port the proxy really listens on.
    if let (Some(port), Some(_)) = (opts.proxy_port, &plan.proxy) {
        let url = format!("http://127.0.0.1:{port}");
        for &var in crate::plan::PROXY_VARS {
            if let Some(v) = env.get_mut(var) {
                *v = url.clone();
            }
        }
    }
    if l.ephemeral_home {
        env.insert("HOME".into(), home_dir.display().to_string());
    }
    env.insert("TMPDIR".into(), tmp_dir.display().to_string());
    if let Some(shared) = &l.session_shared {
        for v in env.values_mut() {
            if let Some(rest) = v.strip_prefix(SESSION_MOUNT)
                && (rest.is_empty() || rest.starts_with('/'))
            {
                *v = format!("{}{rest}", shared.display());
            }
        }
    }
    if matches!(plan.network, Network::Filtered(_)) {
        // Go ≥ 1.27 on macOS reads SSL_CERT_FILE (the proxy's bundle) instead of asking the
        // platform verifier only when this is on; it defaults to on only for modules that
        // declare go 1.27. Older Go and other programs ignore the setting.
        let godebug = match env.get("GODEBUG") {
            Some(g) if !g.is_empty() => format!("{g},{GODEBUG_SSL_CERT_FILE}"),
            _ => GODEBUG_SSL_CERT_FILE.to_string(),
        };
        env.insert("GODEBUG".into(), godebug);
    }

    let mut argv: Vec<OsString> = vec![SANDBOX_EXEC.into(), "-p".into(), p.clone().into()];
    for (name, value) in &params.list {
        let mut a = OsString::from(format!("-D{name}="));
        a.push(value);
        argv.push(a);
    }
    argv.push("--".into());
    argv.extend(plan.command.iter().cloned());

    SeatbeltPlan {
        profile: p,
        params: params.list,
        argv,
        env,
        cwd,
        home_dir: l.ephemeral_home.then_some(home_dir),
        tmp_dir,
        home_links,
    }
}

/// The proxy's port on the host's loopback: where it really listens, else the plan's.
fn proxy_port(plan: &Plan, opts: &SeatbeltOptions) -> Option<u16> {
    plan.proxy
        .as_ref()
        .map(|p| opts.proxy_port.unwrap_or(p.inside_port))
}

fn network(p: &mut String, plan: &Plan, opts: &SeatbeltOptions) {
    let ports: Vec<u16> = plan.bridges.iter().map(|b| b.host_port).collect();
    let proxy: Vec<u16> = proxy_port(plan, opts).into_iter().collect();
    match plan.network {
        Network::Open => {
            p.push_str(";; ---- Network: open ----\n;; The internet, not this host: \"localhost\" is every address of this machine, so the\n;; deny covers its LAN addresses too. No listening on IP ports (no inbound rule).\n");
            p.push_str("(allow network-outbound (remote ip \"*:*\"))\n");
            p.push_str("(deny network-outbound (remote ip \"localhost:*\"))\n");
            if !ports.is_empty() {
                p.push_str(";; Allowed host ports (allowedLocalPorts), after the deny they punch through.\n");
            }
            rule(p, "allow", "network-outbound", &loopback_ports(&ports));
            p.push_str(";; Names resolve through mDNSResponder (its socket, the DNS configuration); TLS\n;; trust through trustd (Go, Security.framework). No other unix socket of the host.\n");
            p.push_str("(allow network-outbound (literal \"/private/var/run/mDNSResponder\"))\n");
            p.push_str("(allow mach-lookup\n  (global-name \"com.apple.SystemConfiguration.DNSConfiguration\")\n  (global-name \"com.apple.trustd.agent\"))\n");
            p.push_str("(allow file-read* (literal \"/private/var/run/resolv.conf\"))\n");
        }
        Network::Blocked => {
            p.push_str(";; ---- Network: blocked ----\n;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.\n");
            if !ports.is_empty() {
                p.push_str(";; Allowed host ports (allowedLocalPorts).\n");
            }
            rule(p, "allow", "network-outbound", &loopback_ports(&ports));
        }
        Network::Filtered(_) => {
            p.push_str(";; ---- Network: filtered ----\n;; Only the session's proxy on this host (it resolves names after its policy check) and\n;; the allowed host ports. No DNS and no trustd: both would carry requests past the proxy.\n");
            // Fail closed: without a proxy bridge the filtered sandbox gets no network at all.
            rule(p, "allow", "network-outbound", &loopback_ports(&proxy));
            rule(p, "allow", "network-outbound", &loopback_ports(&ports));
        }
    }
}

/// The outermost exposed paths under the real `$HOME`, as links in the private home.
fn home_links(l: &Layout, home: &Path, home_dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut candidates: Vec<(&Path, &Path)> = l
        .aliases
        .iter()
        .map(|(src, dest, _)| (dest.as_path(), src.as_path()))
        .chain(l.direct.iter().map(|(d, _)| (d.as_path(), d.as_path())))
        .collect();
    candidates.sort_by_key(|(dest, _)| depth(dest));
    let mut chosen: Vec<(&Path, &Path)> = Vec::new();
    for (dest, target) in candidates {
        let nested = chosen.iter().any(|(d, _)| dest.starts_with(d));
        if dest != home && dest.starts_with(home) && !nested {
            chosen.push((dest, target));
        }
    }
    chosen
        .into_iter()
        .filter_map(|(dest, target)| {
            let rel = dest.strip_prefix(home).ok()?;
            Some((home_dir.join(rel), target.to_path_buf()))
        })
        .collect()
}

/// Creates the private HOME (mode 0700) with its links, and the private TMPDIR. Both must be
/// new: fail closed rather than reuse a directory an earlier session could have filled.
pub fn prepare(sp: &SeatbeltPlan) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let mkdir = |path: &Path, recursive: bool| {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(recursive)
            .create(path)
            .map_err(|source| SeatbeltError::CreateDir {
                path: path.to_path_buf(),
                source,
            })
    };
    for dir in sp.home_dir.iter().chain(std::iter::once(&sp.tmp_dir)) {
        if std::fs::symlink_metadata(dir).is_ok() {
            return Err(SeatbeltError::Exists { path: dir.clone() });
        }
        mkdir(dir, false)?;
    }
    for (link, target) in &sp.home_links {
        if let Some(parent) = link.parent() {
            mkdir(parent, true)?;
        }
        std::os::unix::fs::symlink(target, link).map_err(|source| SeatbeltError::Link {
            link: link.clone(),
            target: target.clone(),
            source,
        })?;
    }
    Ok(())
}

/// The sandbox-exec command, ready to spawn: argv, the cleared-then-planned environment, the
/// launch directory. Building it runs nothing.
pub fn command(sp: &SeatbeltPlan) -> Command {
    let mut c = Command::new(&sp.argv[0]);
    c.args(&sp.argv[1..])
        .env_clear()
        .envs(&sp.env)
        .current_dir(&sp.cwd);
    c
}

/// `--dry-run --target-os macos`: what a Mac would run, on any OS. The private directories are
/// shown where the launcher puts them by default (inside the session directory); the terminal
/// is not known before launch.
pub fn render_dry_run(plan: &Plan) -> String {
    render_with(
        plan,
        &SeatbeltOptions::in_session_dir(&plan.session_dir, vec![]),
    )
}

/// [`render_dry_run`] with the options of a real launch (the session's log).
pub fn render_with(plan: &Plan, opts: &SeatbeltOptions) -> String {
    let sp = plan_seatbelt(plan, opts);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sandbox: {} (macOS, Seatbelt; nothing started)",
        plan.out_name
    );
    let _ = writeln!(s, "command: {}", quote_all(plan.command.iter()));
    let _ = writeln!(
        s,
        "launch dir (read-write): {}",
        escape_controls(&sp.cwd.display().to_string())
    );
    match &sp.home_dir {
        Some(h) => {
            let _ = writeln!(
                s,
                "home: private per-session directory {}",
                escape_controls(&h.display().to_string())
            );
        }
        None => {
            let _ = writeln!(
                s,
                "home: {} (the real one: launched from it)",
                escape_controls(&plan.home.display().to_string())
            );
        }
    }
    for (link, target) in &sp.home_links {
        let line = format!("  link    {} -> {}", link.display(), target.display());
        let _ = writeln!(s, "{}", escape_controls(&line));
    }
    let _ = writeln!(
        s,
        "tmpdir: private per-session directory {}",
        escape_controls(&sp.tmp_dir.display().to_string())
    );
    let network = match &plan.network {
        Network::Open => "open (internet; not this host, except the allowed ports)".to_string(),
        Network::Blocked => "blocked (no network at all)".to_string(),
        Network::Filtered(rules) => format!(
            "filtered through the proxy on this host: {}",
            rules.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    let _ = writeln!(s, "network: {network}");
    if let Some(p) = &plan.proxy {
        let _ = writeln!(s, "  localhost:{} (the filtering proxy)", p.inside_port);
    }
    for b in &plan.bridges {
        let _ = writeln!(
            s,
            "  localhost:{} (host port {})",
            b.inside_port, b.host_port
        );
    }
    let _ = writeln!(s, "environment:");
    for (k, v) in &sp.env {
        let _ = writeln!(s, "  {k}={}", shown_env_value(k, v));
    }
    for w in &plan.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    let _ = writeln!(s, "seatbelt profile:");
    s.push_str(&sp.profile);
    let _ = writeln!(s, "seatbelt parameters (-D, one per line):");
    for (k, v) in &sp.params {
        let _ = writeln!(
            s,
            "  {}",
            escape_controls(&format!("{k}={}", v.to_string_lossy()))
        );
    }
    let mut shown: Vec<OsString> = sp.argv.clone();
    shown[2] = "<the profile above>".into();
    let _ = writeln!(s, "sandbox-exec argv: {}", quote_all(shown.iter()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::INIT_PATH;
    use crate::plan::{Bridge, LaunchGuard};

    const HOME: &str = "/Users/u";
    const SESSION: &str = "/Users/u/.local/state/agent-sandbox/S";

    fn ro(p: &str) -> Mount {
        Mount::RoBind {
            src: p.into(),
            dest: p.into(),
        }
    }

    fn rw(p: &str) -> Mount {
        Mount::Bind {
            src: p.into(),
            dest: p.into(),
        }
    }

    fn closure() -> Vec<Mount> {
        vec![
            ro("/nix/store/aaa-bash"),
            ro("/nix/store/bbb-claude"),
            Mount::Symlink {
                target: "/nix/store/aaa-bash/bin/sh".into(),
                dest: "/bin/sh".into(),
            },
        ]
    }

    fn host_system() -> Vec<Mount> {
        vec![ro("/usr"), ro("/bin"), ro("/sbin"), ro("/etc/ssl")]
    }

    /// What a test plan reaches on the host besides the network: the proxy, or host ports.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum BridgeTo {
        Proxy,
        HostPort(u16),
    }

    fn bridge(to: BridgeTo) -> BridgeTo {
        to
    }

    /// A plan laid out as `plan::build` lays one out: the system layer, the Linux plumbing, the
    /// user layer shallow before deep (an empty tmpfs on $HOME unless $HOME itself is bound),
    /// the init, the session mount.
    fn plan(
        system: Vec<Mount>,
        user: Vec<Mount>,
        network: Network,
        bridges: Vec<BridgeTo>,
    ) -> Plan {
        let e = Entry::new;
        let mut mounts: Vec<Entry> = system.into_iter().map(|m| e(Why::System, m)).collect();
        mounts.push(e(
            Why::Kernel,
            Mount::Proc {
                dest: "/proc".into(),
            },
        ));
        mounts.push(e(
            Why::Kernel,
            Mount::Dev {
                dest: "/dev".into(),
            },
        ));
        for (file, dest) in [
            ("passwd", "/etc/passwd"),
            ("group", "/etc/group"),
            ("empty", "/proc/cmdline"),
            ("boot_id", "/proc/sys/kernel/random/boot_id"),
        ] {
            mounts.push(e(
                Why::Identity,
                Mount::RoBind {
                    src: Path::new(SESSION).join(file),
                    dest: dest.into(),
                },
            ));
        }
        mounts.push(e(
            Why::Resolv,
            match network {
                Network::Open => ro("/etc/resolv.conf"),
                _ => Mount::RoBind {
                    src: Path::new(SESSION).join("resolv.conf"),
                    dest: "/etc/resolv.conf".into(),
                },
            },
        ));
        for dest in ["/tmp", "/run", HOME] {
            if !user.iter().any(|m| m.dest() == Path::new(dest)) {
                let why = if dest == HOME {
                    Why::Home
                } else {
                    Why::Scratch
                };
                mounts.push(e(why, Mount::Tmpfs { dest: dest.into() }));
            }
        }
        mounts.extend(user.into_iter().map(|m| match m {
            Mount::Mask { .. } => e(Why::StateMask, m),
            _ => e(Why::Declared, m),
        }));
        mounts.push(e(
            Why::Init,
            Mount::RoBind {
                src: "/opt/agent-sandbox/bin/agent-sandbox".into(),
                dest: INIT_PATH.into(),
            },
        ));
        if !bridges.is_empty() {
            mounts.push(e(
                Why::Session,
                Mount::RoBind {
                    src: Path::new(SESSION).join("sandbox"),
                    dest: SESSION_MOUNT.into(),
                },
            ));
        }
        let mut env = BTreeMap::from([
            ("HOME".to_string(), HOME.to_string()),
            ("PATH".to_string(), "/nix/store/aaa-bash/bin".to_string()),
            ("TMPDIR".to_string(), "/tmp".to_string()),
            ("ANTHROPIC_API_KEY".to_string(), "sk-secret".to_string()),
        ]);
        let proxy = bridges
            .contains(&BridgeTo::Proxy)
            .then(|| crate::plan::ProxyPort {
                inside_port: 3128,
                socket: "proxy.sock".into(),
            });
        let bridges: Vec<Bridge> = bridges
            .iter()
            .filter_map(|b| match b {
                BridgeTo::HostPort(p) => Some(Bridge {
                    inside_port: *p,
                    socket: format!("port-{p}.sock"),
                    host_port: *p,
                }),
                BridgeTo::Proxy => None,
            })
            .collect();
        if proxy.is_some() {
            env.insert("HTTPS_PROXY".into(), "http://127.0.0.1:3128".into());
            env.insert(
                "SSL_CERT_FILE".into(),
                format!("{SESSION_MOUNT}/ca-bundle.pem"),
            );
        }
        Plan {
            out_name: "claude".into(),
            command: vec!["claude".into(), "--yolo".into()],
            cwd: "/Users/u/proj".into(),
            home: HOME.into(),
            uid: 501,
            gid: 20,
            mounts,
            env,
            network,
            allowed_local_ports: vec![],
            dns_forward: None,
            proxy,
            bridges,
            closure: vec![],
            entry_exe: "/opt/agent-sandbox/bin/agent-sandbox".into(),
            init_is_helper: true,
            upstream_ca_files: vec![],
            ca_bundle_source: None,
            guard: LaunchGuard::Ok,
            placeholders: vec![],
            held: BTreeMap::new(),
            session_files: vec![],
            session_dir: SESSION.into(),
            nix_daemon_socket: None,
            warnings: vec![],
        }
    }

    fn opts() -> SeatbeltOptions {
        SeatbeltOptions::in_session_dir(Path::new(SESSION), vec!["/dev/ttys003".into()])
    }

    fn project() -> Vec<Mount> {
        vec![
            rw("/Users/u/proj"),
            ro("/Users/u/.gitconfig"),
            rw("/Users/u/.claude"),
            rw("/Users/u/proj/.git"),
            ro("/Users/u/proj/.git/config"),
            ro("/Users/u/proj/.git/hooks"),
        ]
    }

    fn worktree() -> Plan {
        let mut p = plan(
            closure(),
            vec![
                rw("/Users/u/wt"),
                rw("/Users/u/repo/.git"),
                ro("/Users/u/wt/.git"),
                ro("/Users/u/repo/.git/config"),
                ro("/Users/u/repo/.git/hooks"),
                rw("/Users/u/repo/.git/worktrees"),
                rw("/Users/u/repo/.git/worktrees/wt"),
                ro("/Users/u/repo/.git/worktrees/wt/commondir"),
                ro("/Users/u/repo/.git/worktrees/wt/gitdir"),
            ],
            Network::Blocked,
            vec![],
        );
        p.cwd = "/Users/u/wt".into();
        p
    }

    fn symlinked() -> Plan {
        plan(
            closure(),
            vec![
                ro("/tmp/scratch"),
                rw("/Users/u/proj"),
                Mount::Bind {
                    src: "/Users/u/dotfiles/claude.json".into(),
                    dest: "/Users/u/.claude.json".into(),
                },
                Mount::RoBind {
                    src: "/opt/shared/gh".into(),
                    dest: "/Users/u/.config/gh".into(),
                },
            ],
            Network::Blocked,
            vec![],
        )
    }

    fn filtered() -> Plan {
        plan(
            host_system(),
            vec![rw("/Users/u/proj")],
            Network::Filtered(BTreeMap::from([("api.anthropic.com".to_string(), None)])),
            vec![bridge(BridgeTo::Proxy), bridge(BridgeTo::HostPort(5432))],
        )
    }

    fn allow_nix() -> Plan {
        let mut p = plan(
            vec![ro("/nix/store"), ro("/nix/var")],
            vec![rw("/Users/u/proj")],
            Network::Blocked,
            vec![],
        );
        p.env.insert("NIX_REMOTE".into(), "daemon".into());
        p.env.insert(
            "NIX_DAEMON_SOCKET_PATH".into(),
            "/nix/var/nix/daemon-socket/socket".into(),
        );
        p.nix_daemon_socket = Some("/nix/var/nix/daemon-socket/socket".into());
        p
    }

    /// The proxy's real port (macOS has no bridge) reaches the profile's rule and the proxy
    /// variables through the options; the plan itself is not changed (it used to be patched
    /// in a clone by the launcher).
    #[test]
    fn the_proxys_real_port_comes_from_the_options() {
        let p = plan(
            host_system(),
            vec![rw("/Users/u/proj")],
            Network::Filtered(BTreeMap::from([("api.anthropic.com".to_string(), None)])),
            vec![bridge(BridgeTo::Proxy)],
        );
        let o = SeatbeltOptions {
            proxy_port: Some(49152),
            ..opts()
        };
        let sp = plan_seatbelt(&p, &o);
        assert!(
            sp.profile.contains("(remote ip \"localhost:49152\")"),
            "{}",
            sp.profile
        );
        assert!(!sp.profile.contains("localhost:3128"), "{}", sp.profile);
        assert_eq!(sp.env["HTTPS_PROXY"], "http://127.0.0.1:49152");
        // Without it (a dry run), the plan's port.
        let dry = plan_seatbelt(&p, &opts());
        assert!(dry.profile.contains("(remote ip \"localhost:3128\")"));
        assert_eq!(p.proxy.as_ref().unwrap().inside_port, 3128);
    }

    fn params(sp: &SeatbeltPlan) -> Vec<(&str, &str)> {
        sp.params
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_str().unwrap()))
            .collect()
    }

    fn pos(haystack: &str, needle: &str) -> usize {
        haystack
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in the profile"))
    }

    #[test]
    fn open_closure_exact_profile_and_params() {
        let sp = plan_seatbelt(&plan(closure(), project(), Network::Open, vec![]), &opts());
        let expected = format!(
            "{BASE_PROFILE}{}{TAIL_PROFILE}",
            r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_1")))
(deny file-write* file-clone network-bind (subpath (param "PATH_1")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_2")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_3")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_4")))
(deny file-write* file-clone network-bind (subpath (param "PATH_4")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_5")))
(deny file-write* file-clone network-bind (subpath (param "PATH_5")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink
  (literal (param "PIN_0"))
  (literal (param "PIN_1"))
  (literal (param "PIN_2")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink
  (literal (param "LINK_0"))
  (literal (param "LINK_1"))
  (literal (param "LINK_2")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; ---- Network: open ----
;; The internet, not this host: "localhost" is every address of this machine, so the
;; deny covers its LAN addresses too. No listening on IP ports (no inbound rule).
(allow network-outbound (remote ip "*:*"))
(deny network-outbound (remote ip "localhost:*"))
;; Names resolve through mDNSResponder (its socket, the DNS configuration); TLS
;; trust through trustd (Go, Security.framework). No other unix socket of the host.
(allow network-outbound (literal "/private/var/run/mDNSResponder"))
(allow mach-lookup
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.trustd.agent"))
(allow file-read* (literal "/private/var/run/resolv.conf"))
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
        );
        assert_eq!(sp.profile, expected);
        assert_eq!(
            params(&sp),
            [
                ("EXEC_0", "/nix/store/aaa-bash"),
                ("EXEC_1", "/nix/store/bbb-claude"),
                ("ANCESTOR_0", "/Users"),
                ("ANCESTOR_1", "/Users/u"),
                ("ANCESTOR_2", "/Users/u/.local"),
                ("ANCESTOR_3", "/Users/u/.local/state"),
                ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
                ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
                ("ANCESTOR_6", "/nix"),
                ("ANCESTOR_7", "/nix/store"),
                ("PATH_0", "/Users/u/proj"),
                ("PATH_1", "/Users/u/.gitconfig"),
                ("PATH_2", "/Users/u/.claude"),
                ("PATH_3", "/Users/u/proj/.git"),
                ("PATH_4", "/Users/u/proj/.git/config"),
                ("PATH_5", "/Users/u/proj/.git/hooks"),
                ("PIN_0", "/Users/u/proj"),
                ("PIN_1", "/Users/u/.claude"),
                ("PIN_2", "/Users/u/proj/.git"),
                ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
                ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
                ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
                (
                    "LINK_1",
                    "/Users/u/.local/state/agent-sandbox/S/home/.gitconfig"
                ),
                (
                    "LINK_2",
                    "/Users/u/.local/state/agent-sandbox/S/home/.claude"
                ),
                ("TTY_0", "/dev/ttys003"),
                ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
            ]
        );
    }

    #[test]
    fn filtered_host_system_exact_profile_params_and_env() {
        let sp = plan_seatbelt(&filtered(), &opts());
        let expected = format!(
            "{BASE_PROFILE}{}{TAIL_PROFILE}",
            r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; Host-system mode: the host's tools, and the developer tools /usr/bin's shims run.
(allow file-read* process-exec file-map-executable
  (subpath "/Library/Developer/CommandLineTools")
  (subpath "/Applications/Xcode.app"))
(allow file-read* (literal "/private/var/db/xcode_select_link"))
(allow file-read-metadata
  (literal "/Library/Developer")
  (literal "/Applications"))
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1"))
  (subpath (param "EXEC_2")))
(allow file-read* (subpath (param "SYSTEM_0")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink (literal (param "PIN_0")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink (literal (param "LINK_0")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; The session's CA files (read-only).
(allow file-read* (subpath (param "SESSION_SHARED")))
;; ---- Network: filtered ----
;; Only the session's proxy on this host (it resolves names after its policy check) and
;; the allowed host ports. No DNS and no trustd: both would carry requests past the proxy.
(allow network-outbound (remote ip "localhost:3128"))
(allow network-outbound (remote ip "localhost:5432"))
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
        );
        assert_eq!(sp.profile, expected);
        assert_eq!(
            params(&sp),
            [
                ("EXEC_0", "/usr"),
                ("EXEC_1", "/bin"),
                ("EXEC_2", "/sbin"),
                ("SYSTEM_0", "/private/etc/ssl"),
                ("ANCESTOR_0", "/Users"),
                ("ANCESTOR_1", "/Users/u"),
                ("ANCESTOR_2", "/Users/u/.local"),
                ("ANCESTOR_3", "/Users/u/.local/state"),
                ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
                ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
                ("PATH_0", "/Users/u/proj"),
                ("PIN_0", "/Users/u/proj"),
                ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
                ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
                ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
                ("TTY_0", "/dev/ttys003"),
                (
                    "SESSION_SHARED",
                    "/Users/u/.local/state/agent-sandbox/S/sandbox"
                ),
                ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
            ]
        );
        // The CA bundle is read where the session keeps it (no /run on macOS), and Go 1.27+
        // is told to read it.
        assert_eq!(
            sp.env["SSL_CERT_FILE"],
            "/Users/u/.local/state/agent-sandbox/S/sandbox/ca-bundle.pem"
        );
        assert_eq!(sp.env["GODEBUG"], "x509sslcertoverrideplatform=1");
        assert_eq!(sp.env["HTTPS_PROXY"], "http://127.0.0.1:3128");
    }

    #[test]
    fn local_ports_exact_profile_and_params() {
        let blocked = plan(
            closure(),
            vec![rw("/Users/u/proj")],
            Network::Blocked,
            vec![
                bridge(BridgeTo::HostPort(5432)),
                bridge(BridgeTo::HostPort(6379)),
            ],
        );
        let sp = plan_seatbelt(&blocked, &opts());
        let expected = format!(
            "{BASE_PROFILE}{}{TAIL_PROFILE}",
            r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink (literal (param "PIN_0")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink (literal (param "LINK_0")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; The session's CA files (read-only).
(allow file-read* (subpath (param "SESSION_SHARED")))
;; ---- Network: blocked ----
;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.
;; Allowed host ports (allowedLocalPorts).
(allow network-outbound
  (remote ip "localhost:5432")
  (remote ip "localhost:6379"))
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
        );
        assert_eq!(sp.profile, expected);
        assert_eq!(
            params(&sp),
            [
                ("EXEC_0", "/nix/store/aaa-bash"),
                ("EXEC_1", "/nix/store/bbb-claude"),
                ("ANCESTOR_0", "/Users"),
                ("ANCESTOR_1", "/Users/u"),
                ("ANCESTOR_2", "/Users/u/.local"),
                ("ANCESTOR_3", "/Users/u/.local/state"),
                ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
                ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
                ("ANCESTOR_6", "/nix"),
                ("ANCESTOR_7", "/nix/store"),
                ("PATH_0", "/Users/u/proj"),
                ("PIN_0", "/Users/u/proj"),
                ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
                ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
                ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
                ("TTY_0", "/dev/ttys003"),
                (
                    "SESSION_SHARED",
                    "/Users/u/.local/state/agent-sandbox/S/sandbox"
                ),
                ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
            ]
        );

        let open = plan(
            closure(),
            vec![rw("/Users/u/proj")],
            Network::Open,
            vec![bridge(BridgeTo::HostPort(5432))],
        );
        let sp = plan_seatbelt(&open, &opts());
        let expected = format!(
            "{BASE_PROFILE}{}{TAIL_PROFILE}",
            r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink (literal (param "PIN_0")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink (literal (param "LINK_0")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; The session's CA files (read-only).
(allow file-read* (subpath (param "SESSION_SHARED")))
;; ---- Network: open ----
;; The internet, not this host: "localhost" is every address of this machine, so the
;; deny covers its LAN addresses too. No listening on IP ports (no inbound rule).
(allow network-outbound (remote ip "*:*"))
(deny network-outbound (remote ip "localhost:*"))
;; Allowed host ports (allowedLocalPorts), after the deny they punch through.
(allow network-outbound (remote ip "localhost:5432"))
;; Names resolve through mDNSResponder (its socket, the DNS configuration); TLS
;; trust through trustd (Go, Security.framework). No other unix socket of the host.
(allow network-outbound (literal "/private/var/run/mDNSResponder"))
(allow mach-lookup
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.trustd.agent"))
(allow file-read* (literal "/private/var/run/resolv.conf"))
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
        );
        assert_eq!(sp.profile, expected);
        assert_eq!(
            params(&sp),
            [
                ("EXEC_0", "/nix/store/aaa-bash"),
                ("EXEC_1", "/nix/store/bbb-claude"),
                ("ANCESTOR_0", "/Users"),
                ("ANCESTOR_1", "/Users/u"),
                ("ANCESTOR_2", "/Users/u/.local"),
                ("ANCESTOR_3", "/Users/u/.local/state"),
                ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
                ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
                ("ANCESTOR_6", "/nix"),
                ("ANCESTOR_7", "/nix/store"),
                ("PATH_0", "/Users/u/proj"),
                ("PIN_0", "/Users/u/proj"),
                ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
                ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
                ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
                ("TTY_0", "/dev/ttys003"),
                (
                    "SESSION_SHARED",
                    "/Users/u/.local/state/agent-sandbox/S/sandbox"
                ),
                ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
            ]
        );
        // The port allow comes after the loopback deny it punches through, which comes after
        // the internet allow.
        let p = &sp.profile;
        assert!(
            pos(p, "(allow network-outbound (remote ip \"*:*\"))")
                < pos(p, "(deny network-outbound (remote ip \"localhost:*\"))")
        );
        assert!(
            pos(p, "(deny network-outbound (remote ip \"localhost:*\"))")
                < pos(p, "(allow network-outbound (remote ip \"localhost:5432\"))")
        );
    }

    #[test]
    fn worktree_exact_profile_and_pins() {
        let sp = plan_seatbelt(&worktree(), &opts());
        let expected = format!(
            "{BASE_PROFILE}{}{TAIL_PROFILE}",
            r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7"))
  (literal (param "ANCESTOR_8")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_1")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_2")))
(deny file-write* file-clone network-bind (subpath (param "PATH_2")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_3")))
(deny file-write* file-clone network-bind (subpath (param "PATH_3")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_4")))
(deny file-write* file-clone network-bind (subpath (param "PATH_4")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_5")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_6")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_7")))
(deny file-write* file-clone network-bind (subpath (param "PATH_7")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_8")))
(deny file-write* file-clone network-bind (subpath (param "PATH_8")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink
  (literal (param "PIN_0"))
  (literal (param "PIN_1"))
  (literal (param "PIN_2"))
  (literal (param "PIN_3")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink
  (literal (param "LINK_0"))
  (literal (param "LINK_1")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; ---- Network: blocked ----
;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
        );
        assert_eq!(sp.profile, expected);
        assert_eq!(
            params(&sp),
            [
                ("EXEC_0", "/nix/store/aaa-bash"),
                ("EXEC_1", "/nix/store/bbb-claude"),
                ("ANCESTOR_0", "/Users"),
                ("ANCESTOR_1", "/Users/u"),
                ("ANCESTOR_2", "/Users/u/.local"),
                ("ANCESTOR_3", "/Users/u/.local/state"),
                ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
                ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
                ("ANCESTOR_6", "/Users/u/repo"),
                ("ANCESTOR_7", "/nix"),
                ("ANCESTOR_8", "/nix/store"),
                ("PATH_0", "/Users/u/wt"),
                ("PATH_1", "/Users/u/repo/.git"),
                ("PATH_2", "/Users/u/wt/.git"),
                ("PATH_3", "/Users/u/repo/.git/config"),
                ("PATH_4", "/Users/u/repo/.git/hooks"),
                ("PATH_5", "/Users/u/repo/.git/worktrees"),
                ("PATH_6", "/Users/u/repo/.git/worktrees/wt"),
                ("PATH_7", "/Users/u/repo/.git/worktrees/wt/commondir"),
                ("PATH_8", "/Users/u/repo/.git/worktrees/wt/gitdir"),
                ("PIN_0", "/Users/u/wt"),
                ("PIN_1", "/Users/u/repo/.git"),
                ("PIN_2", "/Users/u/repo/.git/worktrees"),
                ("PIN_3", "/Users/u/repo/.git/worktrees/wt"),
                ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
                ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
                ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/wt"),
                (
                    "LINK_1",
                    "/Users/u/.local/state/agent-sandbox/S/home/repo/.git"
                ),
                ("TTY_0", "/dev/ttys003"),
                ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
            ]
        );
    }

    #[test]
    fn symlinked_declared_paths_exact_profile_links_and_params() {
        let sp = plan_seatbelt(&symlinked(), &opts());
        let expected = format!(
            "{BASE_PROFILE}{}{TAIL_PROFILE}",
            r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7"))
  (literal (param "ANCESTOR_8"))
  (literal (param "ANCESTOR_9"))
  (literal (param "ANCESTOR_10"))
  (literal (param "ANCESTOR_11")))
;; Declared symlinks, granted on their real targets. Allows only: never weaker than
;; the rules below for the same place.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "TARGET_0")))
(allow file-read* process-exec file-map-executable (subpath (param "TARGET_1")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* process-exec file-map-executable (subpath (param "PATH_0")))
(deny file-write* file-clone network-bind (subpath (param "PATH_0")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_1")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_1")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink
  (literal (param "PIN_0"))
  (literal (param "PIN_1")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink
  (literal (param "LINK_0"))
  (literal (param "LINK_1"))
  (literal (param "LINK_2")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; ---- Network: blocked ----
;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
        );
        assert_eq!(sp.profile, expected);
        assert_eq!(
            params(&sp),
            [
                ("EXEC_0", "/nix/store/aaa-bash"),
                ("EXEC_1", "/nix/store/bbb-claude"),
                ("ANCESTOR_0", "/Users"),
                ("ANCESTOR_1", "/Users/u"),
                ("ANCESTOR_2", "/Users/u/.local"),
                ("ANCESTOR_3", "/Users/u/.local/state"),
                ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
                ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
                ("ANCESTOR_6", "/Users/u/dotfiles"),
                ("ANCESTOR_7", "/nix"),
                ("ANCESTOR_8", "/nix/store"),
                ("ANCESTOR_9", "/opt"),
                ("ANCESTOR_10", "/opt/shared"),
                ("ANCESTOR_11", "/private/tmp"),
                ("TARGET_0", "/Users/u/dotfiles/claude.json"),
                ("TARGET_1", "/opt/shared/gh"),
                ("PATH_0", "/private/tmp/scratch"),
                ("PATH_1", "/Users/u/proj"),
                ("PIN_0", "/Users/u/dotfiles/claude.json"),
                ("PIN_1", "/Users/u/proj"),
                ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
                ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
                (
                    "LINK_0",
                    "/Users/u/.local/state/agent-sandbox/S/home/.claude.json"
                ),
                ("LINK_1", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
                (
                    "LINK_2",
                    "/Users/u/.local/state/agent-sandbox/S/home/.config/gh"
                ),
                ("TTY_0", "/dev/ttys003"),
                ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
            ]
        );
        let h = Path::new(SESSION).join("home");
        assert_eq!(
            sp.home_links,
            [
                (
                    h.join(".claude.json"),
                    "/Users/u/dotfiles/claude.json".into()
                ),
                (h.join("proj"), "/Users/u/proj".into()),
                (h.join(".config/gh"), "/opt/shared/gh".into()),
            ]
        );
    }

    #[test]
    fn allow_nix_reaches_the_daemon_socket_and_executes_only_the_store() {
        let sp = plan_seatbelt(&allow_nix(), &opts());
        let expected = format!(
            "{BASE_PROFILE}{}{TAIL_PROFILE}",
            r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable (subpath (param "EXEC_0")))
(allow file-read* (subpath (param "SYSTEM_0")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink (literal (param "PIN_0")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink (literal (param "LINK_0")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; allowNix: the Nix daemon's socket (the daemon builds outside this sandbox).
(allow network-outbound (literal (param "NIX_DAEMON_SOCKET")))
;; ---- Network: blocked ----
;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
        );
        assert_eq!(sp.profile, expected);
        assert_eq!(
            params(&sp),
            [
                ("EXEC_0", "/nix/store"),
                ("SYSTEM_0", "/nix/var"),
                ("ANCESTOR_0", "/Users"),
                ("ANCESTOR_1", "/Users/u"),
                ("ANCESTOR_2", "/Users/u/.local"),
                ("ANCESTOR_3", "/Users/u/.local/state"),
                ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
                ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
                ("ANCESTOR_6", "/nix"),
                ("PATH_0", "/Users/u/proj"),
                ("PIN_0", "/Users/u/proj"),
                ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
                ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
                ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
                ("TTY_0", "/dev/ttys003"),
                ("NIX_DAEMON_SOCKET", "/nix/var/nix/daemon-socket/socket"),
                ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
            ]
        );
    }

    /// The adversarial case: a declared path built to close the filter and open a new rule.
    /// Issue 10, item 6: launched from $HOME, the state dir inside it is masked; Seatbelt
    /// denies reading and writing it, sparing only this session's private HOME and TMPDIR.
    #[test]
    fn a_masked_state_dir_is_denied_but_the_private_dirs() {
        let state = "/Users/u/.local/state/agent-sandbox";
        let mut p = plan(
            closure(),
            vec![
                rw(HOME),
                rw("/Users/u/.local"),
                rw("/Users/u/.local/state"),
                Mount::Mask { dest: state.into() },
            ],
            Network::Blocked,
            vec![],
        );
        p.cwd = HOME.into();
        let sp = plan_seatbelt(&p, &opts());
        let rule = "(deny file-read-data file-write*\n  (require-all\n    (subpath (param \"MASK_0\"))\n    (require-not (subpath (param \"TMP_DIR\")))))";
        assert!(sp.profile.contains(rule), "{}", sp.profile);
        assert!(params(&sp).contains(&("MASK_0", state)));
        // After every allow: the deepest rule, the mask, decides.
        assert!(pos(&sp.profile, rule) > pos(&sp.profile, "(allow file-read* file-write*"));
        // The directories above it are pinned: renaming one cannot carry the rule away.
        for pin in ["/Users/u/.local", "/Users/u/.local/state"] {
            assert!(
                params(&sp)
                    .iter()
                    .any(|(k, v)| k.starts_with("PIN_") && *v == pin),
                "{pin}"
            );
        }
    }

    #[test]
    fn hostile_path_changes_params_never_the_profile() {
        let hostile = "/Users/u/x\")) (allow file-write* (subpath \"/\"))\n(allow default)";
        let benign = "/Users/u/benign/path";
        assert_eq!(depth(Path::new(hostile)), depth(Path::new(benign)));
        let with = |declared: &str| {
            let mut user = project();
            user.push(rw(declared));
            user.push(Mount::Bind {
                src: format!("{declared}/target").into(),
                dest: "/Users/u/link".into(),
            });
            plan_seatbelt(&plan(closure(), user, Network::Open, vec![]), &opts())
        };
        let (bad, good) = (with(hostile), with(benign));
        assert_eq!(bad.profile, good.profile);
        assert!(!bad.profile.contains("(allow default)"));
        assert!(!bad.profile.contains("(subpath \"/\")"));
        // The path travels only as parameter values, each one argv element.
        let carrying: Vec<&str> = params(&bad)
            .into_iter()
            .filter(|(_, v)| v.contains("(allow default)"))
            .map(|(k, _)| k)
            .collect();
        assert_eq!(carrying, ["TARGET_0", "PATH_4", "PIN_0", "PIN_4", "LINK_4"]);
        let arg = OsString::from(format!("-DPATH_4={hostile}"));
        assert_eq!(bad.argv.iter().filter(|a| **a == arg).count(), 1);
        assert_eq!(bad.argv[2], OsString::from(&bad.profile));
    }

    #[test]
    fn canonicalises_root_symlinks() {
        for (given, want) in [
            ("/tmp", "/private/tmp"),
            ("/tmp/x/y", "/private/tmp/x/y"),
            ("/var/folders/ab/T", "/private/var/folders/ab/T"),
            ("/etc/ssl", "/private/etc/ssl"),
            ("/private/tmp/x", "/private/tmp/x"),
            ("/tmpfoo", "/tmpfoo"),
            ("/Users/u/tmp", "/Users/u/tmp"),
        ] {
            assert_eq!(canonical(Path::new(given)), PathBuf::from(want), "{given}");
        }
        // Everywhere: declared paths, session directories, terminals.
        let mut p = plan(closure(), vec![ro("/tmp/in")], Network::Blocked, vec![]);
        p.cwd = "/var/folders/ab/proj".into();
        p.mounts
            .push(Entry::new(Why::Declared, rw("/var/folders/ab/proj")));
        let o = SeatbeltOptions {
            home_dir: "/var/folders/ab/T/s/home".into(),
            tmp_dir: "/tmp/s".into(),
            ttys: vec![],
            proxy_port: None,
        };
        let sp = plan_seatbelt(&p, &o);
        let values: Vec<&str> = params(&sp).into_iter().map(|(_, v)| v).collect();
        for v in &values {
            assert!(!v.starts_with("/tmp") && !v.starts_with("/var/"), "{v}");
        }
        assert!(values.contains(&"/private/tmp/in"));
        assert_eq!(sp.cwd, PathBuf::from("/private/var/folders/ab/proj"));
        assert_eq!(sp.env["TMPDIR"], "/private/tmp/s");
        assert_eq!(sp.env["HOME"], "/private/var/folders/ab/T/s/home");
        // A project inside the user's temp dir is spared by the final temp-dir deny (the last
        // matching rule wins, so without this it would be unusable).
        let project = params(&sp)
            .into_iter()
            .find(|(_, v)| *v == "/private/var/folders/ab/proj")
            .map(|(n, _)| n.to_string())
            .expect("the project is a parameter");
        let deny = sp
            .profile
            .split(";; Other sessions' and other programs' temporary directories.\n")
            .nth(1)
            .unwrap();
        assert!(
            deny.contains(&format!("(require-not (subpath (param \"{project}\")))")),
            "{deny}"
        );
    }

    #[test]
    fn argv_is_sandbox_exec_profile_params_then_the_command() {
        let mut p = plan(closure(), project(), Network::Open, vec![]);
        p.command = vec!["claude".into(), "--yolo".into(), "a b\n'c'".into()];
        let sp = plan_seatbelt(&p, &opts());
        let mut want: Vec<OsString> = vec![
            "/usr/bin/sandbox-exec".into(),
            "-p".into(),
            sp.profile.clone().into(),
        ];
        for (k, v) in &sp.params {
            let mut a = OsString::from(format!("-D{k}="));
            a.push(v);
            want.push(a);
        }
        want.extend([
            "--".into(),
            "claude".into(),
            "--yolo".into(),
            "a b\n'c'".into(),
        ]);
        assert_eq!(sp.argv, want);
        assert_eq!(sp.argv[3], "-DEXEC_0=/nix/store/aaa-bash");
        assert_eq!(sp.cwd, PathBuf::from("/Users/u/proj"));
    }

    /// Last match wins: each deny must come after every allow it overrides.
    #[test]
    fn denies_follow_the_allows_they_override() {
        let sp = plan_seatbelt(&plan(closure(), project(), Network::Open, vec![]), &opts());
        let p = &sp.profile;
        let name = |value: &str| {
            sp.params
                .iter()
                .find(|(_, v)| v == value)
                .map(|(k, _)| k.clone())
                .unwrap()
        };
        let allow_rw = |path: &str| {
            pos(
                p,
                &format!("(allow {OPS_RW} (subpath (param \"{}\")))", name(path)),
            )
        };
        let deny = |path: &str| {
            pos(
                p,
                &format!("(deny {OPS_PROTECT} (subpath (param \"{}\")))", name(path)),
            )
        };
        for protected in ["/Users/u/proj/.git/hooks", "/Users/u/proj/.git/config"] {
            assert!(deny(protected) > allow_rw("/Users/u/proj"));
            assert!(deny(protected) > allow_rw("/Users/u/proj/.git"));
        }
        // Pins after every path rule; the private dirs' allow cannot reach them.
        assert!(pos(p, "(deny file-write-unlink") > deny("/Users/u/proj/.git/hooks"));
        // TIOCSTI after every ioctl allow; the process table after the sysctl allow.
        let tiocsti = pos(p, "(deny file-ioctl (ioctl-command 2147578994))");
        assert!(tiocsti > p.rfind("file-ioctl (literal").unwrap());
        assert!(tiocsti > pos(p, "(allow file-ioctl (regex"));
        assert!(pos(p, "(deny sysctl-read") > pos(p, "(allow sysctl-read)"));
        // The final denies after everything the sandbox is granted.
        let last_allow = p.rfind("(allow ").unwrap();
        assert!(pos(p, ";; ---- Final denies ----") > last_allow);
    }

    #[test]
    fn base_and_tail_are_constant_and_fail_closed() {
        assert!(BASE_PROFILE.starts_with("(version 1)\n"));
        let deny_default = pos(BASE_PROFILE, "\n(deny default)\n");
        assert!(deny_default < pos(BASE_PROFILE, "\n(allow "));
        let code = |text: &str| -> String {
            text.lines()
                .map(|l| l.split(';').next().unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        };
        for text in [BASE_PROFILE, TAIL_PROFILE] {
            assert!(!code(text).contains("(param"));
            assert!(!code(text).contains("(allow default"));
        }
        assert!(!code(TAIL_PROFILE).contains("(allow"));
        // TIOCSTI = _IOW('t', 114, char): IOC_IN | sizeof(char) << 16 | 't' << 8 | 114.
        let tiocsti = 0x8000_0000u32 | (1 << 16) | ((b't' as u32) << 8) | 114;
        assert!(TAIL_PROFILE.contains(&format!("(deny file-ioctl (ioctl-command {tiocsti}))")));
        for d in BASE_STAT_DIRS {
            assert!(
                BASE_PROFILE.contains(&format!("  (literal \"{d}\")")),
                "{d}"
            );
        }
        // Parentheses balance (the compiler would reject the profile otherwise).
        let sp = plan_seatbelt(&symlinked(), &opts());
        let code = code(&sp.profile);
        assert_eq!(code.matches('(').count(), code.matches(')').count());
    }

    #[test]
    fn launched_from_home_keeps_the_real_home() {
        let mut p = plan(closure(), vec![rw(HOME)], Network::Blocked, vec![]);
        p.cwd = HOME.into();
        let sp = plan_seatbelt(&p, &opts());
        assert_eq!(sp.home_dir, None);
        assert!(sp.home_links.is_empty());
        assert_eq!(sp.env["HOME"], HOME);
        assert!(!sp.profile.contains("HOME_DIR"));
        assert!(params(&sp).contains(&("PATH_0", HOME)));
    }

    #[test]
    fn prepare_creates_private_dirs_and_links_and_refuses_existing() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path();
        let target = session.join("real-claude");
        std::fs::create_dir(&target).unwrap();
        let sp = SeatbeltPlan {
            profile: String::new(),
            params: vec![],
            argv: vec![SANDBOX_EXEC.into()],
            env: BTreeMap::new(),
            cwd: session.into(),
            home_dir: Some(session.join("home")),
            tmp_dir: session.join("tmp"),
            home_links: vec![
                (session.join("home/.claude"), target.clone()),
                (session.join("home/.config/gh"), "/nonexistent/gh".into()),
            ],
        };
        prepare(&sp).unwrap();
        for d in ["home", "tmp", "home/.config"] {
            let m = std::fs::metadata(session.join(d)).unwrap();
            assert!(m.is_dir());
            assert_eq!(m.permissions().mode() & 0o777, 0o700, "{d}");
        }
        assert_eq!(
            std::fs::read_link(session.join("home/.claude")).unwrap(),
            target
        );
        assert_eq!(
            std::fs::read_link(session.join("home/.config/gh")).unwrap(),
            PathBuf::from("/nonexistent/gh")
        );
        // A second session with the same directories: refused, nothing reused.
        let err = prepare(&sp).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
    }

    #[test]
    fn command_clears_the_environment() {
        let sp = plan_seatbelt(&filtered(), &opts());
        let c = command(&sp);
        assert_eq!(c.get_program(), SANDBOX_EXEC);
        let args: Vec<&std::ffi::OsStr> = c.get_args().collect();
        assert_eq!(
            args,
            sp.argv[1..]
                .iter()
                .map(|a| a.as_os_str())
                .collect::<Vec<_>>()
        );
        assert_eq!(c.get_current_dir(), Some(Path::new("/Users/u/proj")));
        let envs: BTreeMap<String, String> = c
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.unwrap().to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert_eq!(envs, sp.env);
    }

    #[test]
    fn dry_run_shows_profile_params_argv_and_masks_secrets() {
        let mut p = plan(closure(), project(), Network::Open, vec![]);
        p.mounts
            .push(Entry::new(Why::Declared, rw("/Users/u/new\nline")));
        let out = render_dry_run(&p);
        assert!(out.contains("ANTHROPIC_API_KEY=<masked, 9 chars>"));
        assert!(!out.contains("sk-secret"));
        assert!(out.contains(BASE_PROFILE));
        assert!(out.contains("\n  PATH_0=/Users/u/proj\n"));
        assert!(out.contains("=/Users/u/new\\nline\n"));
        assert!(!out.contains("new\nline"));
        assert!(out.contains(
            "sandbox-exec argv: /usr/bin/sandbox-exec -p '<the profile above>' -DEXEC_0=/nix/store/aaa-bash "
        ));
        assert!(out.contains(" -- claude --yolo\n"));
        // The session directory comes from the plan; no terminal is known before launch.
        assert!(out.contains(
            "home: private per-session directory /Users/u/.local/state/agent-sandbox/S/home\n"
        ));
        assert!(!out.contains("TTY_0"));
    }
}
