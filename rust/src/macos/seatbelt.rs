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
    /// System layer: store paths (closure mode) or `/usr`, `/bin`, `/sbin` (host-system mode);
    /// the command found on the caller's `PATH` (`Why::Command`).
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
    /// The policy file ([`crate::plan::POLICY_PATH`] on Linux): (its real path in the session
    /// directory, the path the plan shows it at).
    policy: Option<(PathBuf, PathBuf)>,
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
            // The command from the caller's PATH runs from there: its files and its links
            // (read where the kernel resolves them) readable and executable.
            Why::Command => {
                if let Mount::RoBind { src: p, .. } | Mount::Symlink { dest: p, .. } = m {
                    l.exec_roots.push(canonical(p));
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
            // macOS has no /run: the file is read where the launcher wrote it.
            Why::Policy => {
                if let Mount::RoBind { src, dest } = m {
                    l.policy = Some((canonical(src), dest.clone()));
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
    roots.extend(l.policy.as_ref().map(|(real, _)| real.as_path()));
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

    let policy_param = l.policy.as_ref().map(|(real, _)| {
        p.push_str(";; The sandbox's policy file (read-only).\n");
        let name = params.named("POLICY", real);
        rule(&mut p, "allow", "file-read*", &[literal(&name)]);
        name
    });

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
    // What stays readable where a deny of reads may cover the session directory (a state
    // directory under the temp dirs or masked in an exposed path); never writable.
    let mut readable = own.clone();
    readable.extend(
        policy_param
            .as_deref()
            .map(|n| format!("(require-not {})", literal(n))),
    );
    p.push_str(";; Other sessions' and other programs' temporary directories.\n");
    let mut folders = vec!["(subpath \"/private/var/folders\")".to_string()];
    folders.extend(readable.iter().cloned());
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
        f.extend(readable.iter().cloned());
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
    if let Some((real, shown)) = &l.policy {
        for v in env.values_mut() {
            if Path::new(v.as_str()) == shown {
                *v = real.display().to_string();
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
#[path = "seatbelt_tests.rs"]
mod tests;
