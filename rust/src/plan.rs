//! Phase two: the resolved plan. Canonical paths, checked symlink targets, the git layout, the
//! environment and the network mode, all decided here. Everything after (the bwrap argv, the
//! dry-run text) is a pure function of the plan.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::git::{self, GitView, PlaceholderKind};
use crate::sockets::{self, Allowed, Found};
use crate::spec::{AllowedDomains, MethodRule, Spec, normalize_domain};
use crate::symlinks::{self, Permitted, Resolved};

/// Where the helper binary appears inside the sandbox (it runs there as PID 1).
pub const INIT_PATH: &str = "/run/agent-sandbox/agent-sandbox";

/// Where the sandbox's description of itself ([`crate::policy_doc`]) appears inside, named by
/// `AGENT_SANDBOX_POLICY`: agents read files, so the sandbox tells them what it allows there.
pub const POLICY_PATH: &str = "/run/agent-sandbox/policy.md";

/// That description's file in the session directory, which the launcher writes before the
/// sandbox starts (`launch::prepare::session_dir`) and which is bound read-only at
/// [`POLICY_PATH`].
pub const POLICY_FILE: &str = "policy.md";

/// Hostname inside the sandbox.
pub const HOSTNAME: &str = "sandbox";

/// Host directories exposed read-only in host-system mode (no closure).
pub const HOST_SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// `/etc` entries programs need in host-system mode: TLS roots, the dynamic loader's cache,
/// Debian alternatives, time zone, name service configuration. Nothing with secrets.
pub const HOST_ETC_ENTRIES: &[&str] = &[
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/resolv.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/mime.types",
    "/etc/terminfo",
];

/// Standard `PATH` in host-system mode.
pub const HOST_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// Variables that name the CA bundle, for the tools that read each (SSL_CERT_FILE replaces the
/// default store, so the bundle holds the system roots too). NODE_EXTRA_CA_CERTS is apart: it
/// adds to Node's roots and gets the proxy's CA alone.
/// The list lives in `rust/shared/ca-variables.json`, which `lib/internal/spec.nix` reads too.
pub static CA_BUNDLE_VARS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| {
        crate::spec::shared_list(include_str!("../shared/ca-variables.json"))
    });

/// Variables that point clients at the proxy, in the spellings tools read.
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Upper bound on entries visited when scanning a declared directory for symlinks and sockets.
pub const SCAN_LIMIT: usize = 200_000;

/// One mount, in bwrap's vocabulary; `Plan::mounts` holds each with its [`Why`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    RoBind {
        src: PathBuf,
        dest: PathBuf,
    },
    Bind {
        src: PathBuf,
        dest: PathBuf,
    },
    Tmpfs {
        dest: PathBuf,
    },
    /// An empty, read-only directory over `dest`: what lies there on the host is out of the
    /// sandbox's sight and reach (the launcher's state directory inside an exposed one).
    Mask {
        dest: PathBuf,
    },
    Proc {
        dest: PathBuf,
    },
    Dev {
        dest: PathBuf,
    },
    Symlink {
        target: PathBuf,
        dest: PathBuf,
    },
    /// `Bind`/`RoBind` of a source in `Plan::held`, after the launcher opened it
    /// (`linux::pathfd`): bwrap binds the object behind descriptor `fd` (`--bind-fd`), so the
    /// object bound is the one the planner checked. `src` is kept for the reports.
    BindFd {
        fd: i32,
        src: PathBuf,
        dest: PathBuf,
        rw: bool,
    },
}

impl Mount {
    pub fn dest(&self) -> &Path {
        match self {
            Mount::RoBind { dest, .. }
            | Mount::Bind { dest, .. }
            | Mount::BindFd { dest, .. }
            | Mount::Tmpfs { dest }
            | Mount::Mask { dest }
            | Mount::Proc { dest }
            | Mount::Dev { dest }
            | Mount::Symlink { dest, .. } => dest,
        }
    }
}

/// Why a mount is in the plan. The lowerings (the bwrap argv, the Seatbelt profile, later
/// kernel layers) and the reports read this instead of inferring meaning from the order of
/// the mounts or their paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Why {
    /// Host-system mode: `/usr`, `/bin`… and the `/etc` entries programs need; closure mode:
    /// the `/bin/sh` and `/usr/bin/env` links.
    System,
    /// A closure path (or, with allowNix, the whole store).
    Closure,
    /// allowNix: `/nix/var` and the daemon socket's directory.
    NixDaemon,
    /// `/proc`, `/dev` and the read-only `/proc/sys` binds.
    Kernel,
    /// The private `/tmp` and `/run`, and `/run/agent-sandbox` (a mount point of its own).
    Scratch,
    /// The empty `$HOME`.
    Home,
    /// Synthetic files from the session directory (`/etc/passwd`, `/etc/group`, the masks of
    /// `/proc/cmdline` and the boot id, closure mode's hosts and nsswitch.conf).
    Identity,
    /// `/etc/resolv.conf`, as the network mode needs it.
    Resolv,
    /// The launch directory (or workspace), read-write.
    Launch,
    /// The repository root above the launch directory, read-only.
    Repo,
    /// A git directory the launch directory's repository uses.
    GitDir,
    /// A directory bound onto itself so that what lies below cannot be moved away (`protect`).
    Pin,
    /// Read-only inside a writable path: git's protected files, host programs' paths, paths
    /// declared read-only there.
    Protect,
    /// A protected path created empty on the host so that the agent cannot create it.
    Placeholder,
    /// A declared path at its own place.
    Declared,
    /// A declared symlink's target shown at the link's place (or left to the link).
    Alias,
    /// The command given, found on the caller's `PATH` and not in the sandbox's
    /// ([`crate::command`]): its file or installation directory read-only, its links.
    Command,
    /// The launcher's state directory where an exposed path shows it: masked.
    StateMask,
    /// A Unix socket found in a declared directory and not allowed: masked.
    SocketMask,
    /// The sandbox's PID 1.
    Init,
    /// The sandbox's description of itself, read-only at [`POLICY_PATH`].
    Policy,
    /// The session's shared directory (bridge sockets, the CA bundle).
    Session,
}

/// One mount of the plan and why it is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub mount: Mount,
    pub why: Why,
}

impl Entry {
    pub fn new(why: Why, mount: Mount) -> Self {
        Entry { mount, why }
    }
}

/// The network mode the sandbox gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// `allowedDomains` unset.
    Open,
    /// `allowedDomains = []` / `--no-network`: no network namespace route at all.
    Blocked,
    /// Filtered through the proxy: normalised domain → `None` (every method) or methods.
    Filtered(BTreeMap<String, Option<Vec<String>>>),
}

/// Where the session's sockets and CA files appear inside the sandbox.
pub const SESSION_MOUNT: &str = "/run/agent-sandbox/session";

/// Name of the session subdirectory bound at `SESSION_MOUNT`.
pub const SESSION_SHARED_DIR: &str = "sandbox";
/// In `SESSION_SHARED_DIR`: the roots plus the session's own CAs (what `SSL_CERT_FILE` names).
pub const SESSION_CA_BUNDLE: &str = "ca-bundle.pem";
/// In `SESSION_SHARED_DIR`: the session's own CAs alone (`NODE_EXTRA_CA_CERTS` adds to Node's
/// roots): the proxy's, and the upstream CAs the user named.
pub const SESSION_EXTRA_CAS: &str = "proxy-ca.pem";

/// Candidate ports for the proxy inside the sandbox; the first not taken by a local port wins.
const PROXY_PORTS: &[u16] = &[3128, 3129, 8118, 18080, 28080];

/// A host loopback port reached from inside: the init listens on `inside_port` and carries
/// each connection over a Unix socket in the session's shared directory to the launcher, which
/// connects to the host's `127.0.0.1:host_port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bridge {
    pub inside_port: u16,
    /// File name of the socket in the session's shared directory.
    pub socket: String,
    pub host_port: u16,
}

impl Bridge {
    pub fn inside_socket(&self) -> PathBuf {
        Path::new(SESSION_MOUNT).join(&self.socket)
    }
}

/// Filtered mode: the proxy's port inside. Not a bridge: the init listens there and hands the
/// listening sockets themselves to the launcher over `socket`, and the proxy accepts on them
/// (Linux); on macOS the sandbox reaches the proxy on the host's loopback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPort {
    pub inside_port: u16,
    /// File name of the hand-over socket in the session's shared directory.
    pub socket: String,
}

impl ProxyPort {
    pub fn inside_socket(&self) -> PathBuf {
        Path::new(SESSION_MOUNT).join(&self.socket)
    }
}

pub use crate::guard::{Confirm, LaunchGuard};

/// A bind source the launcher opens by descriptor (see [`Plan::held`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub dir: bool,
    /// `(st_dev, st_ino)` as the planner saw it; `None` for git placeholders, which the
    /// launcher creates after planning.
    pub id: Option<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub out_name: String,
    pub command: Vec<OsString>,
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub uid: u32,
    pub gid: u32,
    /// In the order applied (shallow before deep: a bind hides what an earlier mount put below
    /// its destination), each with why it is there.
    pub mounts: Vec<Entry>,
    pub env: BTreeMap<String, String>,
    pub network: Network,
    /// Host loopback ports the sandbox may reach (sorted): `allowedLocalPorts`, or for `null`
    /// the ports that were listening at launch. Always a concrete list: nothing downstream has
    /// an "every port" case. Those of them the sandbox can listen on are also in `bridges`.
    pub allowed_local_ports: Vec<u16>,
    /// Open mode: the address inside that pasta forwards to the host's own resolver.
    pub dns_forward: Option<String>,
    /// Filtered mode: the proxy's port inside.
    pub proxy: Option<ProxyPort>,
    /// Loopback bridges to host ports the init sets up inside.
    pub bridges: Vec<Bridge>,
    /// The binary bound at `INIT_PATH` (the small `agent-sandbox-init`, or the helper itself);
    /// it also runs the namespace holder and `__enter`.
    pub entry_exe: PathBuf,
    /// The binary at `INIT_PATH` is the whole helper, so it needs its `__init` subcommand
    /// (false: it is `agent-sandbox-init`, which is nothing but the init).
    pub init_is_helper: bool,
    /// Extra CA files the proxy trusts upstream (canonical, checked to exist).
    pub upstream_ca_files: Vec<PathBuf>,
    /// The CA bundle the sandbox would trust without the proxy; in filtered mode the proxy's
    /// CA is appended to a copy of it.
    pub ca_bundle_source: Option<PathBuf>,
    pub guard: LaunchGuard,
    /// Protected paths (git's, host programs') that must be created empty before launch.
    pub placeholders: Vec<(PathBuf, PlaceholderKind)>,
    /// Bind sources in places a user (or an agent in another session) can write: the declared
    /// paths, the launch directory and the git layout. Linux binds them by descriptor
    /// (`linux::pathfd`), so nobody can swap a symlink in between the check and the mount.
    /// Store paths, system directories and the session's own files are bound by path.
    pub held: BTreeMap<PathBuf, Held>,
    /// Files the launcher writes into the session directory before launch (name, contents).
    pub session_files: Vec<(String, String)>,
    /// The private per-session directory those files are planned in (outside every bind).
    pub session_dir: PathBuf,
    /// allowNix: the daemon socket the sandbox may connect to.
    pub nix_daemon_socket: Option<PathBuf>,
    pub warnings: Vec<String>,
}

impl Plan {
    /// Whether the session's shared directory (bridge sockets, trust bundle) is bound inside.
    pub fn shares_session_dir(&self) -> bool {
        self.mounts.iter().any(|e| e.why == Why::Session)
    }

    /// Whether the sandbox trusts a bundle the launcher writes into the session's shared
    /// directory (see [`SESSION_CA_BUNDLE`]).
    pub fn has_session_bundle(&self) -> bool {
        let bundle = format!("{SESSION_MOUNT}/{SESSION_CA_BUNDLE}");
        self.env.get("SSL_CERT_FILE") == Some(&bundle)
    }

    /// The host paths the sandbox can write (the sources of its read-write binds), which
    /// outlive it: nothing the launcher runs or trusts may come from there.
    pub fn writable_sources(&self) -> Vec<PathBuf> {
        writable_of(self.mounts.iter().map(|e| &e.mount))
    }

    /// The closure's paths: the store paths bound read-only at their own place (empty in
    /// host-system mode; with allowNix the whole store).
    pub fn closure(&self) -> Vec<&Path> {
        self.mounts
            .iter()
            .filter(|e| e.why == Why::Closure)
            .filter_map(|e| match &e.mount {
                Mount::RoBind { src, dest } if src == dest => Some(src.as_path()),
                _ => None,
            })
            .collect()
    }

    /// The mounts alone, in order (what a lowering without labels applies).
    pub fn bare_mounts(&self) -> Vec<Mount> {
        self.mounts.iter().map(|e| e.mount.clone()).collect()
    }

    /// Every bind as host paths with whether it is read-write: its destination (binds sit at
    /// their real paths) and, where it differs, its source (a declared link's target, where
    /// writes through it land).
    pub fn binds(&self) -> Vec<(PathBuf, bool)> {
        let mut out = Vec::new();
        for m in self.mounts.iter().map(|e| &e.mount) {
            let (src, dest, rw) = match m {
                Mount::Bind { src, dest } => (src, dest, true),
                Mount::RoBind { src, dest } => (src, dest, false),
                Mount::BindFd { src, dest, rw, .. } => (src, dest, *rw),
                _ => continue,
            };
            out.push((dest.clone(), rw));
            if src != dest {
                out.push((src.clone(), rw));
            }
        }
        out
    }

    /// The source of every read-write bind, in mount order (nested ones included: the git
    /// dirs and their pins inside the launch directory).
    pub fn rw_bind_sources(&self) -> impl Iterator<Item = &Path> {
        rw_sources(self.mounts.iter().map(|e| &e.mount))
    }
}

pub use crate::host::HostContext;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Git(#[from] git::GitError),
    #[error(transparent)]
    Symlink(#[from] symlinks::SymlinkError),
}

pub type Result<T> = std::result::Result<T, PlanError>;

/// Lexical normalisation: absolute (against `base`), `.` and `..` folded, `~/` = home.
pub fn normalize(p: &str, base: &Path, home: &Path) -> PathBuf {
    let raw = if p == "~" {
        home.to_path_buf()
    } else if let Some(rest) = p.strip_prefix("~/") {
        home.join(rest)
    } else {
        base.join(p)
    };
    let mut out = PathBuf::from("/");
    for c in raw.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Dir,
    File,
    /// `rwHostConfig`: whichever it is.
    Either,
}

struct Declared {
    path: PathBuf,
    rw: bool,
    kind: Kind,
    field: &'static str,
}

/// The launch directory's rules ([`crate::guard`]) for the canonical `cwd`, plus the question
/// about the symlink it was reached through (`cwd_link`, found by the one walk that resolved
/// it), checked before anything else: the launcher asks these questions before it plans,
/// creates or repairs anything.
pub fn launch_guard(
    cwd: &Path,
    cwd_link: Option<crate::guard::Confirm>,
    home: &Path,
    uid: u32,
) -> Result<LaunchGuard> {
    let guard = crate::guard::launch_dir(cwd, home, uid).map_err(PlanError::Refused)?;
    Ok(match cwd_link {
        Some(c) => guard.and(c),
        None => guard,
    })
}

/// Build the plan. Reads the filesystem (canonicalisation, git metadata, symlink scan);
/// writes nothing.
pub fn build(spec: &Spec, args: &[OsString], host: &HostContext) -> Result<Plan> {
    let mut warnings = Vec::new();
    let mut guard = launch_guard(&host.cwd, host.cwd_link.clone(), &host.home, host.uid)?;

    let command = command_line(spec, args)?;
    let out_name = sandbox_name(spec, args);

    let SystemLayer {
        entries: mut system,
        mut permitted_roots,
        path_var,
    } = system_layer(spec, &mut warnings)?;

    let NixAccess {
        env: nix_env,
        socket: nix_daemon_socket,
    } = allow_nix(spec, host, &mut system, &mut permitted_roots, &mut warnings)?;

    let declared = declared_paths(spec, host, &mut guard)?;

    let GitBinds {
        rw: git_rw,
        ro: git_ro,
        mut placeholders,
        repo_root,
    } = git_binds(spec, host, &declared, &mut warnings)?;

    let DeclaredResolution {
        user_mounts,
        mut held,
        mut found_sockets,
        allowed_sockets,
        mut allowed_used,
        upstream_ca_files,
    } = resolve_declared_paths(
        spec,
        host,
        permitted_roots,
        Around {
            declared: &declared,
            repo_root: &repo_root,
            git_rw: &git_rw,
            git_ro: &git_ro,
            placeholders: &placeholders,
        },
        &mut system,
        &mut warnings,
    )?;

    let UserLayer {
        layered,
        keep,
        kept_ro,
        placeholders: protected_placeholders,
    } = user_layer(
        spec,
        host,
        Around {
            declared: &declared,
            repo_root: &repo_root,
            git_rw: &git_rw,
            git_ro: &git_ro,
            placeholders: &placeholders,
        },
        &system,
        user_mounts,
        (&mut held, &mut found_sockets),
        &mut warnings,
    )?;
    placeholders.extend(protected_placeholders);

    let network = network_mode(spec);
    warnings.extend(crate::spec::loopback_domains_warning(
        spec.allowed_domains.as_ref(),
    ));
    let Plumbing {
        entries: plumbing_entries,
        session_files,
        dns_forward,
    } = plumbing(spec, host, &network);
    let mut mounts = system;
    mounts.extend(plumbing_entries);

    let declared_layer: Vec<&Mount> = keep.iter().map(|(_, i)| &layered[*i].1).collect();
    for f in &found_sockets {
        for (i, a) in allowed_sockets.iter().enumerate() {
            allowed_used[i] |= a.covers(f);
        }
    }
    let masked = sockets::masks(&found_sockets, &allowed_sockets, &declared_layer);
    warnings.extend(sockets::masked_warning(&masked));
    for (a, used) in allowed_sockets.iter().zip(&allowed_used) {
        if !used {
            warnings.push(sockets::unused_warning(a));
        }
    }
    for (_, i) in keep {
        mounts.push(Entry::new(layered[i].2, layered[i].1.clone()));
    }
    // After every declared bind, so each mask lies on top of the bind that shows its socket.
    for dest in masked {
        mounts.push(Entry::new(
            Why::SocketMask,
            Mount::RoBind {
                src: host.session_dir.join("empty"),
                dest,
            },
        ));
    }
    // The caller's PATH directories the sandbox can still write (a project's `.venv/bin`).
    let risky: Vec<(PathBuf, PathBuf)> = crate::tools::writable_path_entries(
        &host.caller_path,
        &writable_of(mounts.iter().map(|e| &e.mount)),
        |p| std::fs::canonicalize(p).ok(),
    )
    .into_iter()
    .filter(|(e, _)| {
        let c = crate::session::canonical_lenient(e);
        !(e.is_absolute() && kept_ro.iter().any(|k| c.starts_with(k)))
    })
    .collect();
    warnings.extend(crate::tools::path_warning(&risky));
    let entry_exe = host.init_exe.as_ref().unwrap_or(&host.helper_exe).clone();
    mounts.push(Entry::new(
        Why::Init,
        Mount::RoBind {
            src: entry_exe.clone(),
            dest: INIT_PATH.into(),
        },
    ));
    mounts.push(Entry::new(
        Why::Policy,
        Mount::RoBind {
            src: host.session_dir.join(POLICY_FILE),
            dest: POLICY_PATH.into(),
        },
    ));

    let mut env = environment(spec, host, path_var, nix_env);
    expose_command(
        spec,
        host,
        &command,
        (&mut mounts, &mut held),
        &mut env,
        &mut warnings,
    );

    let Wiring {
        local,
        ca_bundle_source,
        proxy,
        bridges,
        shares_session,
    } = wiring(
        spec,
        host,
        &network,
        &upstream_ca_files,
        &mut env,
        &mut warnings,
    );
    if shares_session {
        mounts.push(Entry::new(
            Why::Session,
            Mount::RoBind {
                src: host.session_dir.join(SESSION_SHARED_DIR),
                dest: SESSION_MOUNT.into(),
            },
        ));
    }

    Ok(Plan {
        out_name,
        command,
        cwd: host.cwd.clone(),
        home: host.home.clone(),
        uid: host.uid,
        gid: host.gid,
        mounts,
        env,
        network,
        allowed_local_ports: local.allowed,
        dns_forward,
        proxy,
        bridges,
        entry_exe,
        init_is_helper: host.init_exe.is_none(),
        upstream_ca_files,
        ca_bundle_source,
        guard,
        placeholders,
        session_files,
        session_dir: host.session_dir.clone(),
        nix_daemon_socket,
        held,
        warnings,
    })
}

/// The system layer: the host's system directories and the `/etc` entries programs need
/// (host-system mode), or the closure and the `/bin/sh`, `/usr/bin/env` links (closure mode);
/// with the places declared links may lead to and the sandbox's `PATH`.
struct SystemLayer {
    entries: Vec<Entry>,
    permitted_roots: Vec<PathBuf>,
    path_var: String,
}

fn system_layer(spec: &Spec, warnings: &mut Vec<String>) -> Result<SystemLayer> {
    let mut system: Vec<Entry> = Vec::new();
    let mut permitted_roots: Vec<PathBuf> = Vec::new();
    let path_var;
    match &spec.closure {
        None => {
            for dir in HOST_SYSTEM_DIRS {
                let p = Path::new(dir);
                match std::fs::symlink_metadata(p) {
                    Ok(m) if m.file_type().is_symlink() => {
                        // Merged-/usr hosts: keep /bin -> usr/bin a symlink, as on the host.
                        if let Ok(t) = std::fs::read_link(p) {
                            system.push(Entry::new(
                                Why::System,
                                Mount::Symlink {
                                    target: t,
                                    dest: p.into(),
                                },
                            ));
                        }
                    }
                    Ok(m) if m.is_dir() => {
                        system.push(Entry::new(
                            Why::System,
                            Mount::RoBind {
                                src: p.into(),
                                dest: p.into(),
                            },
                        ));
                        permitted_roots.push(p.into());
                    }
                    _ => {}
                }
            }
            for entry in HOST_ETC_ENTRIES {
                let p = Path::new(entry);
                // resolv.conf is bound as the network mode requires, below.
                if *entry == "/etc/resolv.conf" || !p.exists() {
                    continue;
                }
                system.push(Entry::new(
                    Why::System,
                    Mount::RoBind {
                        src: p.into(),
                        dest: p.into(),
                    },
                ));
            }
            path_var = spec
                .path
                .as_ref()
                .map(|p| p.join(":"))
                .unwrap_or_else(|| HOST_PATH.into());
        }
        Some(closure) => {
            let mut missing = Vec::new();
            for p in closure {
                let p = PathBuf::from(p);
                if !p.exists() {
                    missing.push(p.display().to_string());
                    continue;
                }
                system.push(Entry::new(
                    Why::Closure,
                    Mount::RoBind {
                        src: p.clone(),
                        dest: p.clone(),
                    },
                ));
                permitted_roots.push(p);
            }
            if !missing.is_empty() {
                // Fail closed: a closure with holes means the spec does not match this store.
                return Err(PlanError::Refused(format!(
                    "{} closure path(s) do not exist: {}. Fix: rebuild the sandbox so its spec matches the Nix store",
                    missing.len(),
                    missing.join(", ")
                )));
            }
            let entries = spec.path.clone().unwrap_or_default();
            path_var = entries.join(":");
            // /bin/sh and /usr/bin/env: scripts' shebangs need them.
            for (want, dest) in [("sh", "/bin/sh"), ("env", "/usr/bin/env")] {
                match entries
                    .iter()
                    .map(|d| Path::new(d).join(want))
                    .find(|c| c.exists())
                {
                    Some(found) => system.push(Entry::new(Why::System, Mount::Symlink {
                        target: found,
                        dest: dest.into(),
                    })),
                    None => warnings.push(format!(
                        "no `{want}` on the sandbox PATH, so {dest} does not exist inside; add bash/coreutils to allowedPackages"
                    )),
                }
            }
        }
    }
    Ok(SystemLayer {
        entries: system,
        permitted_roots,
        path_var,
    })
}

/// allowNix: the whole store read-only in place of the closure binds, the daemon's socket
/// directory, and the variables that point Nix at the daemon. Refused without a daemon.
fn allow_nix(
    spec: &Spec,
    host: &HostContext,
    system: &mut Vec<Entry>,
    permitted_roots: &mut Vec<PathBuf>,
    warnings: &mut Vec<String>,
) -> Result<NixAccess> {
    let mut nix_env: Vec<(String, String)> = Vec::new();
    let mut nix_daemon_socket = None;
    if spec.allow_nix {
        let store = Path::new("/nix/store");
        let socket = host.nix.socket.clone();
        if !host.nix.store_present || !host.nix.socket_present {
            // Fail closed: allowNix without a daemon would only half work, confusingly.
            return Err(PlanError::Refused(format!(
                "allowNix needs the Nix daemon, but {} does not exist. Fix: start nix-daemon (e.g. systemctl start nix-daemon) or remove allowNix / --allow-nix",
                if host.nix.store_present {
                    socket.as_str()
                } else {
                    "/nix/store"
                }
            )));
        }
        // The whole store, read-only, replaces the per-path closure binds.
        system
            .retain(|e| !matches!(&e.mount, Mount::RoBind { dest, .. } if dest.starts_with(store)));
        system.push(Entry::new(
            Why::Closure,
            Mount::RoBind {
                src: store.into(),
                dest: store.into(),
            },
        ));
        permitted_roots.push(store.into());
        // /nix/var holds the daemon socket (connecting works on a read-only mount).
        system.push(Entry::new(
            Why::NixDaemon,
            Mount::RoBind {
                src: "/nix/var".into(),
                dest: "/nix/var".into(),
            },
        ));
        let socket_dir = Path::new(&socket).parent().unwrap_or(Path::new("/"));
        if !socket_dir.starts_with("/nix/var") {
            system.push(Entry::new(
                Why::NixDaemon,
                Mount::RoBind {
                    src: socket_dir.into(),
                    dest: socket_dir.into(),
                },
            ));
        }
        nix_env.push(("NIX_REMOTE".into(), "daemon".into()));
        nix_daemon_socket = Some(PathBuf::from(&socket));
        nix_env.push(("NIX_DAEMON_SOCKET_PATH".into(), socket));
        if spec.allowed_domains.is_some() {
            warnings.push(
                "allowNix: the Nix daemon runs outside the sandbox, so its own downloads (substituters, fetchers) are not limited by allowedDomains".into(),
            );
        }
    }
    Ok(NixAccess {
        env: nix_env,
        socket: nix_daemon_socket,
    })
}

/// A bare command the sandbox's `PATH` lacks but the caller's has, host-system mode only
/// ([`crate::command`] decides): its links, and its file or installation directory read-only
/// at their own paths (held by descriptor, like declared paths), its directory first on
/// `PATH` inside, and a note with the flags that do the same; or a warning saying why not.
fn expose_command(
    spec: &Spec,
    host: &HostContext,
    command: &[OsString],
    (mounts, held): (&mut Vec<Entry>, &mut BTreeMap<PathBuf, Held>),
    env: &mut BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) {
    let Some(name) = command.first().and_then(|c| c.to_str()) else {
        return;
    };
    if spec.closure.is_some() || name.is_empty() || name.contains('/') {
        return;
    }
    let inside_path = env.get("PATH").cloned().unwrap_or_default();
    let writable = writable_of(mounts.iter().map(|e| &e.mount));
    let shown = |p: &Path| shows(mounts, p);
    let ctx = crate::command::Context {
        caller_path: &host.caller_path,
        inside_path: &inside_path,
        home: &host.home,
        shown: &shown,
        writable: &writable,
    };
    let x = match crate::command::resolve(&ctx, name, &crate::command::host_node) {
        crate::command::Outcome::Exposed(x) => x,
        crate::command::Outcome::Refused(w) => return warnings.push(w),
        crate::command::Outcome::Inside | crate::command::Outcome::Nowhere => return,
    };
    if let Some(why) = x.ro.iter().find_map(|p| unexposable(host, p)) {
        // Fail closed: these binds come after the socket and state-directory masks, which a
        // declared path gets (the flags printed get them).
        return warnings.push(format!(
            "{}; not exposed automatically: {why}. If you mean it: {}",
            x.story, x.by_hand
        ));
    }
    for p in x.ro {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        held.insert(p.clone(), held_from(&meta));
        let bind = Mount::RoBind {
            src: p.clone(),
            dest: p,
        };
        mounts.push(Entry::new(Why::Command, bind));
    }
    for (dest, target) in x.links {
        mounts.push(Entry::new(Why::Command, Mount::Symlink { target, dest }));
    }
    let dirs = x.path_dirs.iter().map(|d| d.display().to_string());
    let path: Vec<String> = dirs.chain([inside_path]).collect();
    env.insert("PATH".into(), path.join(":"));
    warnings.push(x.note);
}

/// Why a directory the command exposure picked must not be bound as it is: it holds or lies in
/// the launcher's state directory, or holds a Unix socket (connectable through a read-only
/// bind), or could not be scanned for one. `None` when it may.
fn unexposable(host: &HostContext, p: &Path) -> Option<String> {
    let state = host.session_dir.parent()?;
    if state.starts_with(p) || p.starts_with(state) {
        return Some(format!(
            "{} holds agent-sandbox's state directory {} (the launcher's logs and session files)",
            p.display(),
            state.display()
        ));
    }
    if !std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let permitted = crate::symlinks::Permitted::new([p.to_path_buf()]);
    let report = crate::symlinks::scan_tree(p, &permitted, SCAN_LIMIT);
    if let Some(socket) = report.sockets.first() {
        return Some(format!(
            "{} holds the Unix socket {}, which a read-only bind leaves connectable",
            p.display(),
            socket.display()
        ));
    }
    (report.truncated || report.unreadable > 0).then(|| {
        format!(
            "{} could not be searched whole for Unix sockets ({} entries seen, {} unreadable)",
            p.display(),
            report.entries,
            report.unreadable
        )
    })
}

/// Whether the sandbox shows host path `p` at its place: the last mount over it is a bind of
/// that place (a link mount: the link itself). An empty tmpfs, a mask or a link above it hide it.
fn shows(mounts: &[Entry], p: &Path) -> bool {
    let last = mounts
        .iter()
        .map(|e| &e.mount)
        .rfind(|m| p.starts_with(m.dest()));
    match last {
        Some(Mount::RoBind { src, dest } | Mount::Bind { src, dest }) => src == dest,
        Some(Mount::BindFd { src, dest, .. }) => src == dest,
        Some(Mount::Symlink { dest, .. }) => dest == p,
        _ => false,
    }
}

/// What allowNix adds besides mounts: the variables, and the socket the sandbox reaches.
#[derive(Default)]
struct NixAccess {
    env: Vec<(String, String)>,
    socket: Option<PathBuf>,
}

/// The declared paths (normalised), each checked against the launch guard's rules for
/// declared paths: refused, or a question added to `guard`.
fn declared_paths(
    spec: &Spec,
    host: &HostContext,
    guard: &mut LaunchGuard,
) -> Result<Vec<Declared>> {
    let mut declared = Vec::new();
    for (field, list, rw, kind) in [
        ("rwDirs", &spec.rw_dirs, true, Kind::Dir),
        ("rwFiles", &spec.rw_files, true, Kind::File),
        ("roDirs", &spec.ro_dirs, false, Kind::Dir),
        ("roFiles", &spec.ro_files, false, Kind::File),
        ("rwHostConfig", &spec.rw_host_config, true, Kind::Either),
    ] {
        for p in list {
            let path = normalize(p, &host.cwd, &host.home);
            let real = std::fs::canonicalize(&path).ok();
            let mut confirm = None;
            for form in std::iter::once(&path).chain(&real) {
                let c = crate::guard::declared_path(form, field, rw, &host.home)
                    .map_err(PlanError::Refused)?;
                confirm = confirm.or(c);
            }
            if let Some(c) = confirm {
                *guard = guard.clone().and(c);
            }
            declared.push(Declared {
                path,
                rw,
                kind,
                field,
            });
        }
    }
    Ok(declared)
}

/// The git layout the sandbox exposes: the launch directory's repository (its root read-only
/// above the launch directory, its git dirs read-write except what host git would execute or
/// obey), and the same protection for repositories at the top of declared read-write dirs.
struct GitBinds {
    rw: Vec<PathBuf>,
    ro: Vec<PathBuf>,
    placeholders: Vec<(PathBuf, PlaceholderKind)>,
    repo_root: Option<PathBuf>,
}

fn git_binds(
    spec: &Spec,
    host: &HostContext,
    declared: &[Declared],
    warnings: &mut Vec<String>,
) -> Result<GitBinds> {
    let mut git_rw: Vec<PathBuf> = Vec::new();
    let mut git_ro: Vec<PathBuf> = Vec::new();
    let mut placeholders = Vec::new();
    let mut repo_root = None;
    match git::inspect(&host.cwd, &host.home)? {
        GitView::NoRepo => {}
        GitView::Refused { warning, .. } => warnings.push(warning),
        GitView::Repo(layout) => {
            repo_root = Some(layout.root.clone());
            git_rw = layout.rw_dirs;
            git_ro = layout.ro_paths;
            placeholders = layout.placeholders;
            warnings.extend(layout.notes);
            let repo_config = git_rw.first().map(|d| d.join("config"));
            warnings.extend(git_identity_warning(
                spec,
                declared,
                &host.home,
                repo_config,
            ));
        }
    }

    // A repository at the top of a declared read-write directory (`--rw ~/other-repo`) gets
    // the launch repository's protection (hooks, config, … read-only, pinned) in every git
    // dir it owns; only what lies inside that directory is taken, it grants nothing more.
    for d in declared.iter().filter(|d| d.rw && d.kind == Kind::Dir) {
        if std::fs::canonicalize(&d.path).ok().as_ref() != Some(&d.path)
            || d.path == host.cwd
            || std::fs::symlink_metadata(d.path.join(".git")).is_err()
        {
            continue;
        }
        if let GitView::Repo(layout) = git::inspect(&d.path, &host.home)? {
            if layout.root != d.path {
                continue;
            }
            let inside = |p: &PathBuf| p.starts_with(&d.path);
            git_rw.extend(layout.rw_dirs.into_iter().filter(inside));
            git_ro.extend(layout.ro_paths.into_iter().filter(inside));
            placeholders.extend(layout.placeholders.into_iter().filter(|(p, _)| inside(p)));
            warnings.extend(layout.notes);
        }
    }
    Ok(GitBinds {
        rw: git_rw,
        ro: git_ro,
        placeholders,
        repo_root,
    })
}

/// The Linux plumbing every sandbox gets: `/proc` (its settings read-only), `/dev`, the
/// synthetic identity files and the masks of what identifies the host, and `/etc/resolv.conf`
/// as the network mode needs it; with the session files they are read from and the address
/// pasta forwards DNS to (open mode with a resolver on the host's loopback).
struct Plumbing {
    entries: Vec<Entry>,
    session_files: Vec<(String, String)>,
    dns_forward: Option<String>,
}

fn plumbing(spec: &Spec, host: &HostContext, network: &Network) -> Plumbing {
    let mut entries = Vec::new();
    entries.push(Entry::new(
        Why::Kernel,
        Mount::Proc {
            dest: "/proc".into(),
        },
    ));
    // Fail closed on kernel settings: bwrap 0.8 means to remount /proc/sys read-only but skips
    // it (its write probe on the directory always fails), and launched by root the sandbox
    // user passes /proc/sys's uid check, so core_pattern & co. would be writable: host root.
    for p in &host.proc_ro {
        entries.push(Entry::new(
            Why::Kernel,
            Mount::RoBind {
                src: p.clone(),
                dest: p.clone(),
            },
        ));
    }
    entries.push(Entry::new(
        Why::Kernel,
        Mount::Dev {
            dest: "/dev".into(),
        },
    ));
    // Synthetic identity files: one line, no host user names. In closure mode also hosts and
    // nsswitch.conf (the closure has none). The kernel command line and boot id identify the
    // host: masked, with an empty regular file (not /dev/null: device nodes are unreadable on
    // bwrap's nodev binds).
    let mut synthetic = vec![("passwd", "/etc/passwd"), ("group", "/etc/group")];
    if spec.closure.is_some() {
        synthetic.extend([
            ("hosts", "/etc/hosts"),
            ("nsswitch.conf", "/etc/nsswitch.conf"),
        ]);
    }
    synthetic.extend([
        ("empty", "/proc/cmdline"),
        ("boot_id", "/proc/sys/kernel/random/boot_id"),
    ]);
    for (file, dest) in synthetic {
        entries.push(Entry::new(
            Why::Identity,
            Mount::RoBind {
                src: host.session_dir.join(file),
                dest: dest.into(),
            },
        ));
    }
    let mut session_files = vec![
        (
            "passwd".to_string(),
            format!(
                "sandbox:x:{}:{}:sandbox:{}:/bin/sh\n",
                host.uid,
                host.gid,
                host.home.display()
            ),
        ),
        ("group".to_string(), format!("sandbox:x:{}:\n", host.gid)),
    ];
    if spec.closure.is_some() {
        session_files.push((
            "hosts".into(),
            "127.0.0.1 localhost\n::1 localhost\n".into(),
        ));
        session_files.push(("nsswitch.conf".into(), "hosts: files dns\n".into()));
    }
    session_files.push(("empty".into(), String::new()));
    session_files.push((
        "boot_id".into(),
        "00000000-0000-4000-8000-000000000000\n".into(),
    ));

    let mut dns_forward = None;
    match network {
        Network::Open => {
            let host_resolv = host.resolv_conf.clone().unwrap_or_default();
            if resolv_needs_forward(&host_resolv) {
                // The host's resolver listens on its loopback (systemd-resolved, dnsmasq),
                // which the sandbox cannot reach: pasta forwards this address to it instead.
                dns_forward = Some(DNS_FORWARD_ADDR.to_string());
                session_files.push((
                    "resolv.conf".into(),
                    format!(
                        "nameserver {DNS_FORWARD_ADDR}\n{}",
                        resolv_options(&host_resolv)
                    ),
                ));
                entries.push(Entry::new(
                    Why::Resolv,
                    Mount::RoBind {
                        src: host.session_dir.join("resolv.conf"),
                        dest: "/etc/resolv.conf".into(),
                    },
                ));
            } else if host.resolv_conf.is_some() {
                entries.push(Entry::new(
                    Why::Resolv,
                    Mount::RoBind {
                        src: "/etc/resolv.conf".into(),
                        dest: "/etc/resolv.conf".into(),
                    },
                ));
            }
        }
        Network::Blocked | Network::Filtered(_) => {
            // No DNS inside: the proxy (if any) resolves names after its policy check.
            session_files.push(("resolv.conf".into(), String::new()));
            entries.push(Entry::new(
                Why::Resolv,
                Mount::RoBind {
                    src: host.session_dir.join("resolv.conf"),
                    dest: "/etc/resolv.conf".into(),
                },
            ));
        }
    }
    Plumbing {
        entries,
        session_files,
        dns_forward,
    }
}

/// The sandbox's environment: a fixed base (home, `PATH`, `TMPDIR`, `SHELL`, `TERM`, the
/// launcher's locale and `COLORTERM`, the host's CA bundle in host-system mode, git's
/// use-config-only), allowNix's, the spec's; last the variables that say this is a sandbox.
fn environment(
    spec: &Spec,
    host: &HostContext,
    path_var: String,
    nix_env: Vec<(String, String)>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert("HOME".into(), host.home.display().to_string());
    env.insert("PATH".into(), path_var);
    env.insert("TMPDIR".into(), "/tmp".into());
    env.insert("SHELL".into(), "/bin/sh".into());
    if spec.closure.is_none() && host.has_bin_bash {
        env.insert("SHELL".into(), "/bin/bash".into());
    }
    env.insert(
        "TERM".into(),
        host.term.clone().unwrap_or_else(|| "dumb".into()),
    );
    for (k, v) in &host.locale {
        env.insert(k.clone(), v.clone());
    }
    if spec.closure.is_none() {
        if let Some(bundle) = &host.system_ca_bundle {
            for &var in CA_BUNDLE_VARS.iter() {
                env.insert(var.into(), bundle.display().to_string());
            }
        }
    }
    // Never let git invent an identity such as user@sandbox.
    env.insert("GIT_CONFIG_COUNT".into(), "1".into());
    env.insert("GIT_CONFIG_KEY_0".into(), "user.useConfigOnly".into());
    env.insert("GIT_CONFIG_VALUE_0".into(), "true".into());
    for (k, v) in nix_env {
        env.insert(k, v);
    }
    for (k, v) in &spec.env {
        env.insert(k.clone(), v.clone());
    }
    // After the spec's: what says "sandbox" is never a declared value, so a program that
    // checks it can trust it.
    env.insert("AGENT_SANDBOX".into(), "1".into());
    env.insert(
        "AGENT_SANDBOX_SESSION".into(),
        host.session_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    env.insert("AGENT_SANDBOX_POLICY".into(), POLICY_PATH.into());
    env
}

/// How the sandbox reaches the host: the host loopback ports (bridged where the sandbox can
/// listen on them), the proxy's port in filtered mode with the variables that name it, and the
/// session's CA bundle (the proxy's CA, the upstream CAs the user named).
struct Wiring {
    local: LocalPorts,
    ca_bundle_source: Option<PathBuf>,
    proxy: Option<ProxyPort>,
    bridges: Vec<Bridge>,
    /// Whether the session's shared directory is bound inside (sockets, the CA bundle).
    shares_session: bool,
}

fn wiring(
    spec: &Spec,
    host: &HostContext,
    network: &Network,
    upstream_ca_files: &[PathBuf],
    env: &mut BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Wiring {
    let local = local_ports(
        spec.allowed_local_ports.as_deref(),
        &host.listening_ports,
        host.lowest_bridged_port,
    );
    warnings.extend(local.warning.clone());
    let ca_bundle_source = ["SSL_CERT_FILE", "NIX_SSL_CERT_FILE"]
        .iter()
        .find_map(|k| spec.env.get(*k))
        .map(PathBuf::from)
        .or_else(|| host.system_ca_bundle.clone());
    let mut proxy = None;
    if let Network::Filtered(_) = network {
        let port = PROXY_PORTS
            .iter()
            .copied()
            .find(|p| !local.bridged.contains(p))
            .unwrap_or(3128);
        proxy = Some(ProxyPort {
            inside_port: port,
            socket: "proxy.sock".into(),
        });
        let url = format!("http://127.0.0.1:{port}");
        for &var in PROXY_VARS {
            env.insert(var.into(), url.clone());
        }
        // Local ports are reached directly through their own bridges, never via the proxy.
        for var in ["NO_PROXY", "no_proxy"] {
            env.insert(var.into(), "localhost,127.0.0.1,::1".into());
        }
    }
    // The session's trust bundle: the proxy's CA in filtered mode, and the upstream CAs the
    // user named in every mode (a TLS-inspecting corporate proxy re-signs what "*" domains and
    // open mode reach end to end), on top of the roots the sandbox would trust anyway.
    let session_bundle = matches!(network, Network::Filtered(_)) || !upstream_ca_files.is_empty();
    if session_bundle {
        let bundle = format!("{SESSION_MOUNT}/{SESSION_CA_BUNDLE}");
        for &var in CA_BUNDLE_VARS.iter() {
            env.insert(var.into(), bundle.clone());
        }
        env.insert(
            "NODE_EXTRA_CA_CERTS".into(),
            format!("{SESSION_MOUNT}/{SESSION_EXTRA_CAS}"),
        );
    }
    let bridges: Vec<Bridge> = local
        .bridged
        .iter()
        .map(|&p| Bridge {
            inside_port: p,
            socket: format!("port-{p}.sock"),
            host_port: p,
        })
        .collect();
    Wiring {
        shares_session: !bridges.is_empty() || proxy.is_some() || session_bundle,
        local,
        ca_bundle_source,
        proxy,
        bridges,
    }
}

/// The declared paths resolved against the places they may lead to: each bound at its place
/// (or left to a link the sandbox shows), with the sockets found in them, the store entries
/// their links need (bound read-only), every source the launcher then holds by descriptor, and
/// the upstream CA files. Refused when a declared path is missing or of the wrong kind.
struct DeclaredResolution {
    user_mounts: Vec<UserMount>,
    held: BTreeMap<PathBuf, Held>,
    found_sockets: Vec<Found>,
    allowed_sockets: Vec<Allowed>,
    allowed_used: Vec<bool>,
    upstream_ca_files: Vec<PathBuf>,
}

/// The layout around the declared paths that they are resolved against.
struct Around<'a> {
    declared: &'a [Declared],
    repo_root: &'a Option<PathBuf>,
    git_rw: &'a [PathBuf],
    git_ro: &'a [PathBuf],
    placeholders: &'a [(PathBuf, PlaceholderKind)],
}

/// A declared path of the other kind: what it is (a socket, a FIFO and a device are not
/// "a file" to the reader) and where it belongs, as a field and as a flag.
fn wrong_kind_message(d: &Declared, meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let path = d.path.display();
    let (mode, flag) = if d.rw { ("rw", "--rw") } else { ("ro", "--ro") };
    if t.is_dir() {
        return format!(
            "{path} ({}) is a directory; declare it in {mode}Dirs ({flag} {path})",
            d.field
        );
    }
    let is = if t.is_socket() {
        "a Unix socket"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "a file"
    };
    let also = if t.is_socket() {
        format!(", and allow connecting to it with --allow-socket {path} (allowedSockets)")
    } else {
        String::new()
    };
    format!(
        "{path} ({}) is {is}, not a directory; declare it in {mode}Files ({flag} {path}){also}",
        d.field
    )
}

/// The system layer's places that are inside what they are on the host: binds at their own
/// path, and links whose target is the host's (merged-/usr `/lib64 -> usr/lib64`).
fn host_system_places(system: &[Entry]) -> Vec<PathBuf> {
    system
        .iter()
        .filter(|e| e.why == Why::System)
        .filter_map(|e| match &e.mount {
            Mount::RoBind { src, dest } if src == dest => Some(dest.clone()),
            Mount::Symlink { target, dest }
                if std::fs::read_link(dest).ok().as_ref() == Some(target) =>
            {
                Some(dest.clone())
            }
            _ => None,
        })
        .collect()
}

fn resolve_declared_paths(
    spec: &Spec,
    host: &HostContext,
    mut permitted_roots: Vec<PathBuf>,
    around: Around<'_>,
    system: &mut Vec<Entry>,
    warnings: &mut Vec<String>,
) -> Result<DeclaredResolution> {
    let Around {
        declared,
        repo_root,
        git_rw,
        git_ro,
        placeholders,
    } = around;
    permitted_roots.push(host.cwd.clone());
    permitted_roots.extend(repo_root.iter().cloned());
    permitted_roots.extend(git_rw.iter().cloned());
    // Declared paths that are not symlinks are permitted places for the others.
    for d in declared {
        if let Ok(c) = std::fs::canonicalize(&d.path) {
            if c == d.path {
                permitted_roots.push(c);
            }
        }
    }
    // What the scan of declared directories counts as resolving inside: the permitted places
    // and the host system's binds and links as they are on the host (`/etc/alternatives`,
    // `/lib64`: `--ro /usr` listed hundreds of `/usr/bin/awk -> /etc/alternatives/awk` as
    // dangling). Declared paths keep the narrower set: their target is what gets bound.
    let host_system = host_system_places(system);
    let mut permitted = Permitted::new(permitted_roots.iter().cloned());
    let mut exposed = Permitted::new(permitted_roots.into_iter().chain(host_system.clone()));
    // Links may lead into the store only where it is the real directory the links name.
    let store_dir = Path::new(symlinks::NIX_STORE);
    if std::fs::canonicalize(store_dir).ok().as_deref() == Some(store_dir) {
        permitted = permitted.with_store(store_dir);
        exposed = exposed.with_store(store_dir);
    }

    let allowed_sockets = allowed_sockets(spec, host);
    let mut allowed_used = vec![false; allowed_sockets.len()];
    let mut found_sockets: Vec<Found> = Vec::new();
    let mut missing = Vec::new();
    let mut wrong_kind = Vec::new();
    let mut user_mounts: Vec<UserMount> = Vec::new();
    let mut held = BTreeMap::new();
    let mut resolved = Vec::new();
    let mut store_entries = std::collections::BTreeSet::new();
    for d in declared {
        match symlinks::resolve_declared(&d.path, &permitted)? {
            r @ Resolved::Refused { .. } => warnings.extend(symlinks::refused_warning(&r)),
            Resolved::Missing(p) => missing.push(format!("{} ({})", p.display(), d.field)),
            r => {
                if let Resolved::ViaLink { store, .. } = &r {
                    store_entries.extend(store.iter().cloned());
                }
                resolved.push((d, r));
            }
        }
    }
    let view = View::of(
        system.iter().map(|e| &e.mount),
        &store_entries,
        host,
        repo_root,
        git_rw,
        git_ro,
    );
    for (d, placed) in place_declared(resolved, view) {
        let Placed {
            src,
            dest,
            left_link,
        } = placed;
        let Ok(meta) = std::fs::metadata(&src) else {
            missing.push(format!("{} ({})", d.path.display(), d.field));
            continue;
        };
        let is_dir = meta.is_dir();
        if d.kind != Kind::Either && is_dir != (d.kind == Kind::Dir) {
            wrong_kind.push(wrong_kind_message(d, &meta));
            continue;
        }
        if is_dir {
            // One walk finds both the dangling links and the sockets to mask.
            let report = symlinks::scan_tree(&src, &exposed, SCAN_LIMIT);
            // The host system's own links (`/usr/lib/environment.d/… -> /etc/environment`) are
            // the system layer's, shown alike without the declaration, and not the user's to fix.
            if !host_system.iter().any(|p| src.starts_with(p)) {
                warnings.extend(symlinks::scan_warning(&report));
            }
            store_entries.extend(report.store.iter().cloned());
            warnings.extend(sockets::unscanned_warning(&dest, &report));
            found_sockets.extend(report.sockets.iter().filter_map(|h| {
                let inside = dest.join(h.strip_prefix(&src).ok()?);
                Some(Found {
                    host: h.clone(),
                    inside,
                })
            }));
        } else if std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) {
            let f = Found {
                host: src.clone(),
                inside: dest.clone(),
            };
            let by: Vec<usize> = (0..allowed_sockets.len())
                .filter(|&i| allowed_sockets[i].covers(&f))
                .collect();
            if by.is_empty() {
                // Fail closed: a declared socket can only be meant to be reached; that takes an explicit allow.
                wrong_kind.push(sockets::declared_socket_refusal(&d.path, d.field));
                continue;
            }
            by.iter().for_each(|&i| allowed_used[i] = true);
        }
        held.insert(src.clone(), held_from(&meta));
        user_mounts.push(UserMount {
            src,
            dest,
            rw: d.rw,
            left_link,
        });
    }
    // The store entries declared links and the links in declared directories go through or
    // end in, read-only at their own paths: the closure (or, without one, nothing of the
    // store) is all the sandbox has of the store otherwise. Only root or the Nix daemon writes
    // there, so they are bound by path.
    for entry in store_entries {
        if !permitted.contains(&entry) {
            system.push(Entry::new(
                Why::Closure,
                Mount::RoBind {
                    src: entry.clone(),
                    dest: entry.clone(),
                },
            ));
        }
    }
    // The launch directory and the git layout live where agents write, too.
    for p in std::iter::once(&host.cwd)
        .chain(repo_root)
        .chain(git_rw)
        .chain(git_ro)
    {
        let meta = std::fs::metadata(p).map_err(|e| {
            PlanError::Refused(format!(
                "cannot inspect {} ({e}), which the sandbox binds. Fix: make it readable, or launch elsewhere",
                p.display()
            ))
        })?;
        held.insert(p.clone(), held_from(&meta));
    }
    for (p, kind) in placeholders {
        let dir = *kind == PlaceholderKind::Dir;
        held.insert(p.clone(), Held { dir, id: None });
    }
    let mut upstream_ca_files = Vec::new();
    for f in &spec.upstream_ca_files {
        let p = normalize(f, &host.cwd, &host.home);
        match std::fs::metadata(&p) {
            Ok(m) if m.is_file() => upstream_ca_files.push(p),
            // Fail closed: a FIFO or a device is no CA file (and reading it could hang).
            Ok(_) => wrong_kind.push(format!(
                "{} (upstreamCaFiles) is not a regular file; give the CA certificate as a PEM file",
                p.display()
            )),
            Err(_) => missing.push(format!("{} (upstreamCaFiles)", p.display())),
        }
    }
    if !missing.is_empty() || !wrong_kind.is_empty() {
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!(
                "{} declared path(s) do not exist: {}. Fix: create them (e.g. mkdir -p / touch) or remove them from the sandbox declaration",
                missing.len(),
                missing.join(", ")
            ));
        }
        if !wrong_kind.is_empty() {
            parts.push(wrong_kind.join("; "));
        }
        // Fail closed: a declaration we cannot honour exactly is not silently dropped.
        return Err(PlanError::Refused(parts.join(". ")));
    }
    Ok(DeclaredResolution {
        user_mounts,
        held,
        found_sockets,
        allowed_sockets,
        allowed_used,
        upstream_ca_files,
    })
}

/// The user layer, shallow before deep (each bind hides what an earlier mount put below its
/// destination; for one destination the most protective entry wins): the private /tmp, /run
/// and home, the repository, the launch directory, the git layout and its placeholders, the
/// declared paths and their links, the paths kept read-only inside writable ones (pins and
/// placeholders added), and the masks of the launcher's state directory. `keep` lists the
/// entries of `layered` that win, in the order to mount them.
struct UserLayer {
    layered: Vec<(u8, Mount, Why)>,
    keep: Vec<(usize, usize)>,
    kept_ro: Vec<PathBuf>,
    /// Placeholders the protected paths add (their directories first).
    placeholders: Vec<(PathBuf, PlaceholderKind)>,
}

fn user_layer(
    spec: &Spec,
    host: &HostContext,
    around: Around<'_>,
    system: &[Entry],
    user_mounts: Vec<UserMount>,
    resolved: (&mut BTreeMap<PathBuf, Held>, &mut Vec<Found>),
    warnings: &mut Vec<String>,
) -> Result<UserLayer> {
    let Around {
        repo_root,
        git_rw,
        git_ro,
        placeholders: planned,
        ..
    } = around;
    let (held, found_sockets) = resolved;
    let mut placeholders = Vec::new();
    // Each bind hides what an earlier mount put below its destination, so mounts are
    // ordered by depth; for the same destination the most protective entry wins.
    let mut layered: Vec<(u8, Mount, Why)> = Vec::new(); // (priority, mount, why)
    let tmp = PathBuf::from("/tmp");
    layered.push((0, Mount::Tmpfs { dest: tmp }, Why::Scratch));
    layered.push((
        0,
        Mount::Tmpfs {
            dest: "/run".into(),
        },
        Why::Scratch,
    ));
    // A mount point of its own, so that it cannot be renamed away with the init and the
    // policy file bound in it and a forged policy put at its place.
    layered.push((
        0,
        Mount::Tmpfs {
            dest: "/run/agent-sandbox".into(),
        },
        Why::Scratch,
    ));
    layered.push((
        0,
        Mount::Tmpfs {
            dest: host.home.clone(),
        },
        Why::Home,
    ));
    if let Some(root) = &repo_root {
        if root != &host.cwd {
            layered.push((
                1,
                Mount::RoBind {
                    src: root.clone(),
                    dest: root.clone(),
                },
                Why::Repo,
            ));
        }
    }
    layered.push((
        3,
        Mount::Bind {
            src: host.cwd.clone(),
            dest: host.cwd.clone(),
        },
        Why::Launch,
    ));
    // A git dir or pin inside a path declared read-only stays read-only: a pin grants only
    // what was writable anyway (regression: `--ro src` with `core.hooksPath = src/hooks`
    // pinned `src` read-write).
    let declared_ro: Vec<&PathBuf> = user_mounts
        .iter()
        .filter(|u| !u.rw && u.src == u.dest)
        .map(|u| &u.src)
        .collect();
    for d in git_rw {
        let (src, dest) = (d.clone(), d.clone());
        let m = if declared_ro.iter().any(|r| d.starts_with(r)) {
            Mount::RoBind { src, dest }
        } else {
            Mount::Bind { src, dest }
        };
        layered.push((3, m, Why::GitDir));
    }
    for p in git_ro {
        layered.push((
            4,
            Mount::RoBind {
                src: p.clone(),
                dest: p.clone(),
            },
            Why::Protect,
        ));
    }
    for (p, _) in planned {
        layered.push((
            4,
            Mount::RoBind {
                src: p.clone(),
                dest: p.clone(),
            },
            Why::Placeholder,
        ));
    }
    // Declared paths at their own place first; aliases (declared links) after, since their
    // mode depends on how their target is already exposed.
    let (direct, aliases): (Vec<_>, Vec<_>) = user_mounts
        .into_iter()
        .partition(|u| u.src == u.dest && u.left_link.is_none());
    for UserMount { src, dest, rw, .. } in direct {
        let m = if rw {
            Mount::Bind { src, dest }
        } else {
            Mount::RoBind { src, dest }
        };
        layered.push((if rw { 2 } else { 1 }, m, Why::Declared));
    }
    for UserMount {
        src,
        dest,
        rw,
        left_link,
    } in aliases
    {
        let exposed: Vec<&Mount> = system
            .iter()
            .map(|e| &e.mount)
            .chain(layered.iter().map(|(_, m, _)| m))
            .collect();
        if let Some(left) = left_link {
            // The link itself resolves inside to `src`, exposed already: at most its mode
            // changes, and only ever to read-only.
            let holder_rw = matches!(holder(&src, &exposed), Some(Mount::Bind { .. }));
            if rw && !holder_rw {
                warnings.push(read_only_link_warning(&left.declared, &src));
            }
            warnings.extend(
                left.hidden_hop
                    .map(|hop| left_link_dangles(&left.declared, &hop, &src)),
            );
            if !rw && holder_rw {
                layered.push((1, Mount::RoBind { src, dest }, Why::Alias));
            }
            continue;
        }
        // Fail closed: a link declared read-write must not become a writable second view of
        // something the sandbox only shows read-only (a ro-declared file, git hooks, /usr,
        // the store), nor of a directory that holds read-only mounts (binds do not carry them
        // along).
        let writable = rw && alias_may_be_writable(&src, &exposed);
        if rw && !writable {
            warnings.push(read_only_link_warning(&dest, &src));
        }
        let m = if writable {
            Mount::Bind { src, dest }
        } else {
            Mount::RoBind { src, dest }
        };
        layered.push((if writable { 2 } else { 1 }, m, Why::Alias));
    }
    let exempt: Vec<PathBuf> = spec
        .rw_host_config
        .iter()
        .map(|p| normalize(p, &host.cwd, &host.home))
        .flat_map(|p| [crate::session::canonical_lenient(&p), p])
        .collect();
    let protected = protect_paths(host, git_rw, &exempt, &mut layered, held)?;
    let state_masks = state_dir_masks(host, &layered)?;
    // What lies under a mask is out of sight: its sockets need no masks of their own.
    found_sockets.retain(|f| !state_masks.iter().any(|m| f.inside.starts_with(m)));
    layered.extend(
        state_masks
            .into_iter()
            .map(|dest| (5, Mount::Mask { dest }, Why::StateMask)),
    );
    warnings.extend(crate::protect::warning(&protected.kept));
    let kept_ro: Vec<PathBuf> = protected.kept.iter().map(|k| k.path.clone()).collect();
    // Made directories are parents of placeholders: created first.
    placeholders.extend(
        protected
            .made
            .iter()
            .map(|d| (d.clone(), PlaceholderKind::Dir)),
    );
    placeholders.extend(protected.settled.placeholders);
    let mut by_dest: BTreeMap<PathBuf, (u8, usize)> = BTreeMap::new();
    for (i, (prio, m, _)) in layered.iter().enumerate() {
        let e = by_dest.entry(m.dest().to_path_buf()).or_insert((*prio, i));
        if *prio >= e.0 {
            *e = (*prio, i);
        }
    }
    let mut keep: Vec<(usize, usize)> = by_dest
        .values()
        .map(|(_, i)| (layered[*i].1.dest().components().count(), *i))
        .collect();
    keep.sort();
    Ok(UserLayer {
        layered,
        keep,
        kept_ro,
        placeholders,
    })
}

/// The host loopback ports of a plan; see [`local_ports`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPorts {
    /// Every allowed port, sorted: what the proxy may dial on host loopback.
    pub allowed: Vec<u16>,
    /// Those a bridge can listen on inside (`127.0.0.1:P` in the sandbox reaches the host's).
    pub bridged: Vec<u16>,
    /// Names the ports left without a bridge, and why.
    pub warning: Option<String>,
}

/// Resolve `allowedLocalPorts` (`None`: the `listening` ports, probed at launch) into a
/// concrete list, and leave the ports below `lowest_bridged` out of the bridges with a
/// warning: the sandbox cannot listen there, and one such port (a resolver on 127.0.0.53:53
/// found by the `null` scan, say) must not stop it from starting. Pure.
pub fn local_ports(spec: Option<&[u32]>, listening: &[u16], lowest_bridged: u16) -> LocalPorts {
    let mut allowed: Vec<u16> = match spec {
        // Validated to 1..=65535 by the spec.
        Some(ports) => ports.iter().map(|p| *p as u16).collect(),
        None => listening.to_vec(),
    };
    allowed.sort_unstable();
    allowed.dedup();
    let (bridged, skipped): (Vec<u16>, Vec<u16>) =
        allowed.iter().partition(|p| **p >= lowest_bridged);
    let warning = (!skipped.is_empty()).then(|| {
        let list: Vec<String> = skipped.iter().map(u16::to_string).collect();
        let (s, first) = (if skipped.len() == 1 { "" } else { "s" }, skipped[0]);
        format!(
            "host loopback port{s} {} not bridged into the sandbox: it cannot listen below {lowest_bridged} in its own network namespace (net.ipv4.ip_unprivileged_port_start, and it has no capabilities), so 127.0.0.1:{first} inside stays closed. In filtered mode the proxy still reaches {} on host loopback for allowed names that resolve there. Fix: serve the host service on a port from {lowest_bridged} up and allow that one",
            list.join(", "),
            if skipped.len() == 1 { "it" } else { "them" },
        )
    });
    LocalPorts {
        allowed,
        bridged,
        warning,
    }
}

/// Closure paths under one directory, staged by the namespace holder: see [`stage_closure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staging {
    /// The directory (`/nix/store`) whose view inside holds only `names`.
    pub dir: PathBuf,
    /// The closure's entries in `dir`.
    pub names: Vec<OsString>,
    /// Where the holder builds that view (an empty directory of the launcher's, outside every
    /// bind): a tmpfs with each entry bound from `dir`. `dir` itself stays untouched in the
    /// holder's namespace, so bwrap, its libraries and any other source there still resolve.
    pub view: PathBuf,
}

/// From this many closure paths in one directory on, they are staged (see [`stage_closure`]).
/// Below it bubblewrap's own binds are cheaper than starting the holder (bench/run).
pub const STAGE_MIN_PATHS: usize = 24;

/// Linux, large closures: bubblewrap re-reads the whole mount table after every bind, so a
/// bind per store path makes start-up grow with the square of the closure (1,000 paths: 1.5 s)
/// and 3,000 paths exceed its argument limit. Instead the namespace holder (a user + mount
/// namespace of its own) builds the view at `view`: a tmpfs holding the directory's closure
/// entries, each bound from the real one; and bwrap, run inside the holder's namespaces, binds
/// `view` onto the directory (`/nix/store`) once, recursively and read-only: the same view
/// inside. That bind comes last, so bwrap's other binds read a mount table without the staged
/// entries. `None` (nothing changed) for small closures, allowNix (the whole store is bound
/// anyway), or when something else is mounted in or over the directory.
pub fn stage_closure(plan: &Plan, mounts: &mut Vec<Mount>, view: &Path) -> Option<Staging> {
    let mut by_dir: BTreeMap<&Path, Vec<&Path>> = BTreeMap::new();
    for p in plan.closure() {
        if let Some(parent) = p.parent().filter(|d| *d != Path::new("/")) {
            by_dir.entry(parent).or_default().push(p);
        }
    }
    let (dir, children) = by_dir.into_iter().max_by_key(|(_, c)| c.len())?;
    if children.len() < STAGE_MIN_PATHS {
        return None;
    }
    let dir = dir.to_path_buf();
    // A spec may list a path twice; the view holds each entry once.
    let mut children: Vec<PathBuf> = children.into_iter().map(Path::to_path_buf).collect();
    children.sort();
    children.dedup();
    // A set: every mount is checked against it (a list made this quadratic).
    let child_set: std::collections::HashSet<&Path> =
        children.iter().map(PathBuf::as_path).collect();
    let is_child_bind = |m: &Mount| matches!(m, Mount::RoBind { src, dest } if src == dest && child_set.contains(src.as_path()));
    // Every child must still be bound on its own (allowNix replaced them with the whole
    // store), and nothing else may be mounted in or over the directory.
    let bound: std::collections::HashSet<&Path> = mounts
        .iter()
        .filter_map(|m| match m {
            Mount::RoBind { src, .. } if is_child_bind(m) => Some(src.as_path()),
            _ => None,
        })
        .collect();
    if bound.len() != children.len() {
        return None;
    }
    let inside = |p: &Path| p.starts_with(&dir);
    let conflict = mounts
        .iter()
        .filter(|m| !is_child_bind(m))
        .any(|m| match m {
            Mount::RoBind { dest, .. }
            | Mount::Bind { dest, .. }
            | Mount::BindFd { dest, .. }
            | Mount::Symlink { dest, .. } => inside(dest),
            Mount::Tmpfs { dest }
            | Mount::Mask { dest }
            | Mount::Proc { dest }
            | Mount::Dev { dest } => inside(dest) || dir.starts_with(dest),
        });
    if conflict {
        return None;
    }
    mounts.retain(|m| !is_child_bind(m));
    mounts.push(Mount::RoBind {
        src: view.to_path_buf(),
        dest: dir.clone(),
    });
    let names = children
        .iter()
        .filter_map(|c| c.file_name().map(OsString::from))
        .collect();
    Some(Staging {
        dir,
        names,
        view: view.to_path_buf(),
    })
}

/// Linux: the identity files (passwd, group, the masks, resolv.conf…) are the same for every
/// session of a user with the same network mode, so they live in one content-addressed
/// directory beside the sessions (`<base>/.identity-<hash>`), written once
/// ([`crate::session::ensure_identity`]): a start then creates no files before bwrap runs.
/// Rebinds `mounts`' binds of those files from `session_dir` there; returns the directory.
pub fn share_identity_files(
    plan: &Plan,
    mounts: &mut [Mount],
    base: &Path,
    session_dir: &Path,
) -> PathBuf {
    // FNV-1a over names and contents: stable across builds and platforms.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, contents) in &plan.session_files {
        for b in name.bytes().chain([0]).chain(contents.bytes()).chain([0]) {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    let dir = base.join(format!(".identity-{hash:016x}"));
    for m in mounts {
        if let Mount::RoBind { src, .. } = m
            && let Ok(rest) = src.strip_prefix(session_dir)
            && plan.session_files.iter().any(|(f, _)| Path::new(f) == rest)
        {
            *src = dir.join(rest);
        }
    }
    dir
}

/// `allowedSockets`, each with its lexical path and, if it exists, its canonical one.
fn allowed_sockets(spec: &Spec, host: &HostContext) -> Vec<Allowed> {
    spec.allowed_sockets
        .iter()
        .map(|given| {
            let p = normalize(given, &host.cwd, &host.home);
            let mut forms = vec![p.clone()];
            forms.extend(std::fs::canonicalize(&p).ok().filter(|c| *c != p));
            Allowed {
                given: given.clone(),
                forms,
            }
        })
        .collect()
}

/// Pins the read-only binds inside what the sandbox may write, and keeps host programs' paths
/// there read-only (`protect`): adds the pins, binds and placeholders to `layered`, their
/// sources to `held`. `layered` holds every bind with a host source by now, modes decided.
fn protect_paths(
    host: &HostContext,
    git_rw: &[PathBuf],
    exempt: &[PathBuf],
    layered: &mut Vec<(u8, Mount, Why)>,
    held: &mut BTreeMap<PathBuf, Held>,
) -> Result<crate::protect::Protected> {
    use crate::protect::{Node, Request};
    // Each destination's mount as `by_dest` will pick it: the highest priority, the last.
    let mut effective: BTreeMap<&Path, (u8, &Mount)> = BTreeMap::new();
    for (prio, m, _) in layered.iter() {
        let e = effective.entry(m.dest()).or_insert((*prio, m));
        if *prio >= e.0 {
            *e = (*prio, m);
        }
    }
    let mut rw: Vec<(PathBuf, PathBuf)> = Vec::new(); // (src, dest)
    let mut req = Request {
        home: host.home.clone(),
        exempt: exempt.to_vec(),
        ..Default::default()
    };
    for (_, m) in effective.values() {
        match m {
            Mount::Bind { src, dest } if held.contains_key(src) => {
                rw.push((src.clone(), dest.clone()));
                req.binds.rw.push(src.clone());
                req.config_roots.push(src.clone());
                let launch = *src == host.cwd;
                if !git_rw.contains(src) && (!launch || host.cwd == host.home) {
                    req.path_roots.push(src.clone());
                }
            }
            Mount::RoBind { src, dest } if held.contains_key(src) => {
                req.binds.ro.push(src.clone());
                if src == dest {
                    req.pin_only.push(src.clone());
                }
            }
            _ => {}
        }
    }
    for entry in std::env::split_paths(&host.caller_path) {
        // Relative entries are the launch directory's: warned about, not protected.
        if let Some(e) = entry.to_str().filter(|_| entry.is_absolute()) {
            let lexical = normalize(e, Path::new("/"), &host.home);
            req.path_dirs
                .push(crate::session::canonical_lenient(&lexical));
        }
    }
    // Only read-write roots can hold what must be kept (and the scan costs a little).
    if !req.path_roots.is_empty() {
        req.path_targets = path_link_targets(&req.path_dirs, &host.home, &req.path_roots);
        // Regression: with `--rw` on the directory it is installed in (not on PATH), the agent
        // replaced agent-sandbox-init, which the next launch ran as the namespace holder.
        req.own_exes = std::iter::once(&host.helper_exe)
            .chain(&host.init_exe)
            .cloned()
            .collect();
    }
    let lstat = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => std::fs::read_link(p).map_or(Node::File, Node::Link),
        Ok(m) if m.is_dir() => Node::Dir,
        Ok(_) => Node::File,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound) => Node::Missing,
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Node::Missing,
        // Not readable: treated as there, so binding it fails below and says so.
        Err(_) => Node::File,
    };
    // The launcher's state directory, when an exposed path holds it, is masked
    // (`state_dir_masks`); the directories above it are pinned, so that renaming one cannot
    // carry the mask away and free its place for a planted copy the launcher would read.
    if let Some(state) = host.session_dir.parent().filter(|s| s.is_dir()) {
        req.pin_only.push(state.to_path_buf());
    }
    let protected = crate::protect::plan(&req, &lstat).map_err(PlanError::Refused)?;
    // A host path's place inside: below the deepest read-write bind holding it.
    let dest_of = |p: &Path| {
        rw.iter()
            .filter(|(src, _)| p.starts_with(src))
            .max_by_key(|(src, _)| src.components().count())
            .map_or(p.to_path_buf(), |(src, dest)| match p.strip_prefix(src) {
                // `join("")` would add a trailing slash.
                Ok(rest) if !rest.as_os_str().is_empty() => dest.join(rest),
                _ => dest.clone(),
            })
    };
    let s = &protected.settled;
    for (p, rw) in s
        .pins
        .iter()
        .map(|p| (p, true))
        .chain(s.ro.iter().map(|p| (p, false)))
    {
        let meta = std::fs::metadata(p).map_err(|e| {
            PlanError::Refused(format!(
                "cannot inspect {} ({e}), which the sandbox keeps in place or read-only. Fix: make it readable, or declare narrower read-write paths",
                p.display()
            ))
        })?;
        held.insert(p.clone(), held_from(&meta));
        let (src, dest) = (p.clone(), dest_of(p));
        layered.push(if rw {
            (3, Mount::Bind { src, dest }, Why::Pin)
        } else {
            (4, Mount::RoBind { src, dest }, Why::Protect)
        });
    }
    for p in &protected.made {
        held.insert(
            p.clone(),
            Held {
                dir: true,
                id: None,
            },
        );
        let (src, dest) = (p.clone(), dest_of(p));
        layered.push((3, Mount::Bind { src, dest }, Why::Pin));
    }
    for (p, kind) in &s.placeholders {
        let dir = *kind == PlaceholderKind::Dir;
        held.insert(p.clone(), Held { dir, id: None });
        layered.push((
            4,
            Mount::RoBind {
                src: p.clone(),
                dest: dest_of(p),
            },
            Why::Placeholder,
        ));
    }
    Ok(protected)
}

/// What the links in the caller's `PATH` directories lead to, resolved: a link into another
/// directory (`~/.local/bin/claude` → `~/.local/share/claude/versions/1.2.3/claude`, npm's
/// `bin/x` → `../lib/node_modules/x/cli.js`) protects that directory, which holds what the
/// program loads, unless it is `$HOME`, above it or straight in it (then the file alone).
/// Only targets inside `roots` (the read-write roots `PATH` protection applies to) count. At
/// most 4096 entries per directory are looked at, each directory once; the system's bin
/// directories (`tools::SYSTEM_DIRS`) are not (their links are the package manager's).
fn path_link_targets(dirs: &[PathBuf], home: &Path, roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    // The system's own bin directories are the package manager's (hundreds of links each,
    // into the system or the store): skipped, so a start does not pay for resolving them.
    let system: Vec<PathBuf> = crate::tools::SYSTEM_DIRS
        .iter()
        .map(|d| crate::session::canonical_lenient(Path::new(d)))
        .collect();
    let mut done = std::collections::BTreeSet::new();
    for dir in dirs {
        if system.contains(dir) || !done.insert(dir) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten().take(4096) {
            let link = e.path();
            if !std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
                continue;
            }
            // A chain: what the link names is a link again, which the agent could repoint if
            // it lies in a read-write path. Its lexical path goes to the protection's walk,
            // which refuses a link in a writable directory and keeps what it resolves to
            // read-only otherwise (regression: only the chain's end was kept, so the agent
            // repointed `~/.local/share/tool/current` and the host ran its script).
            if let Ok(hop) = std::fs::read_link(&link) {
                // Absolute, so that a target spelled `~/…` is not read as the home.
                let hop = normalize(&dir.join(hop).to_string_lossy(), dir, home);
                if std::fs::symlink_metadata(&hop).is_ok_and(|m| m.file_type().is_symlink()) {
                    out.insert(hop);
                    continue;
                }
            }
            let Ok(target) = std::fs::canonicalize(&link) else {
                continue;
            };
            if !target.is_file() || !roots.iter().any(|r| target.starts_with(r)) {
                continue;
            }
            let parent = target.parent().unwrap_or(Path::new("/"));
            let too_broad = home.starts_with(parent) || parent.parent() == Some(home);
            out.insert(if parent != dir.as_path() && !too_broad {
                parent.to_path_buf()
            } else {
                target
            });
        }
    }
    out.into_iter().collect()
}

/// Where the binds in `layered` show the launcher's state directory (`host.session_dir`'s
/// parent: every session's logs and sweep specs, this session's own files, which the launcher
/// reads back after the sandbox exits): each place gets an empty read-only mask. A bind at or
/// inside the state directory is refused.
fn state_dir_masks(host: &HostContext, layered: &[(u8, Mount, Why)]) -> Result<Vec<PathBuf>> {
    let Some(state) = host.session_dir.parent() else {
        return Ok(Vec::new());
    };
    let mut masks = std::collections::BTreeSet::new();
    for (_, m, _) in layered {
        let (Mount::Bind { src, dest } | Mount::RoBind { src, dest }) = m else {
            continue;
        };
        if src.starts_with(state) || dest.starts_with(state) {
            // Fail closed: the agent would see or write the launcher's own files.
            return Err(PlanError::Refused(format!(
                "{} lies inside agent-sandbox's state directory {} (the launcher's logs and session files), which the sandbox must not show. Fix: launch from and declare paths outside it, or set XDG_STATE_HOME to a directory outside the paths you expose",
                if src.starts_with(state) { src } else { dest }.display(),
                state.display()
            )));
        }
        if let Ok(rest) = state.strip_prefix(src) {
            masks.insert(dest.join(rest));
        }
    }
    Ok(masks.into_iter().collect())
}

/// A declared path and where it is bound: `src` at `dest`.
struct Placed {
    src: PathBuf,
    dest: PathBuf,
    /// Set when the declared path is a symlink the sandbox shows as it is (`View::through_link`):
    /// then `src` and `dest` are its target, which the link resolves to inside.
    left_link: Option<LeftLink>,
}

/// A declared symlink left in place inside the sandbox.
#[derive(Debug)]
struct LeftLink {
    declared: PathBuf,
    /// A later link of its chain the sandbox does not have: the link dangles inside.
    hidden_hop: Option<PathBuf>,
}

/// A declared path, bound.
struct UserMount {
    src: PathBuf,
    dest: PathBuf,
    rw: bool,
    left_link: Option<LeftLink>,
}

/// What the sandbox shows at a mount destination, as far as finding symlinks goes.
#[derive(Debug)]
enum Shown {
    /// This host directory (or file).
    Host(PathBuf),
    /// A symlink (bwrap `--symlink`).
    Link,
    /// A fresh tmpfs: bubblewrap creates what is missing there as plain directories.
    Empty,
}

/// The mounts that decide where a declared symlink can be bound: by destination, the host
/// paths shown there. Bubblewrap resolves a destination inside the new root, following any
/// symlink on the way there; a link in a directory the sandbox shows as it is (the launch
/// directory, a declared directory) points to host paths that resolve elsewhere or nowhere
/// inside ("Can't bind mount … No such file or directory"). Regression: issue 10 item 7.
#[derive(Debug, Default)]
struct View {
    shown: Vec<(PathBuf, Shown)>,
}

impl View {
    fn of<'a>(
        system: impl IntoIterator<Item = &'a Mount>,
        store: &std::collections::BTreeSet<PathBuf>,
        host: &HostContext,
        repo_root: &Option<PathBuf>,
        git_rw: &[PathBuf],
        git_ro: &[PathBuf],
    ) -> Self {
        let mut shown = Vec::new();
        for m in system {
            match m {
                Mount::RoBind { src, dest } => shown.push((dest.clone(), Shown::Host(src.clone()))),
                Mount::Symlink { dest, .. } => shown.push((dest.clone(), Shown::Link)),
                _ => {}
            }
        }
        for dir in ["/tmp", "/run"]
            .map(PathBuf::from)
            .into_iter()
            .chain([host.home.clone()])
        {
            shown.push((dir, Shown::Empty));
        }
        let own = store
            .iter()
            .chain([&host.cwd])
            .chain(repo_root)
            .chain(git_rw)
            .chain(git_ro);
        shown.extend(own.map(|p| (p.clone(), Shown::Host(p.clone()))));
        View { shown }
    }

    /// Whether bubblewrap would meet a symlink on its way to `dest` inside the sandbox.
    fn through_link(&self, dest: &Path) -> bool {
        let holder = self
            .shown
            .iter()
            .filter(|(d, _)| dest.starts_with(d) && dest != d)
            .max_by_key(|(d, _)| d.components().count());
        let Some((at, shown)) = holder else {
            return false;
        };
        let src = match shown {
            Shown::Host(src) => src,
            Shown::Link => return true,
            Shown::Empty => return false,
        };
        let mut p = src.clone();
        for c in dest.strip_prefix(at).unwrap_or(Path::new("")).components() {
            p.push(c);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                return true;
            }
        }
        false
    }
}

/// Where each declared path is bound. A path without symlinks at its own place; a declared
/// link at its own place (its target's content there), unless the sandbox shows the link
/// itself (`View::through_link`): then bwrap could not bind there, and need not, since the
/// link resolves inside to its target, which is exposed (every permitted place is) or in the
/// store (bound). Links are placed shallow before deep, each against the view with the ones
/// above it. In declaration order.
fn place_declared(
    resolved: Vec<(&Declared, Resolved)>,
    mut view: View,
) -> Vec<(&Declared, Placed)> {
    let mut placed = Vec::new();
    let mut links = Vec::new();
    for (i, (d, r)) in resolved.into_iter().enumerate() {
        match r {
            Resolved::Direct(p) => {
                view.shown.push((p.clone(), Shown::Host(p.clone())));
                placed.push((
                    i,
                    d,
                    Placed {
                        src: p.clone(),
                        dest: p,
                        left_link: None,
                    },
                ));
            }
            Resolved::ViaLink {
                declared,
                target,
                hidden_hop,
                ..
            } => {
                links.push((i, d, declared, target, hidden_hop));
            }
            Resolved::Refused { .. } | Resolved::Missing(_) => {}
        }
    }
    links.sort_by_key(|(_, _, declared, ..)| declared.components().count());
    for (i, d, declared, target, hidden_hop) in links {
        let p = if view.through_link(&declared) {
            Placed {
                src: target.clone(),
                dest: target,
                left_link: Some(LeftLink {
                    declared,
                    hidden_hop,
                }),
            }
        } else {
            view.shown
                .push((declared.clone(), Shown::Host(target.clone())));
            Placed {
                src: target,
                dest: declared,
                left_link: None,
            }
        };
        placed.push((i, d, p));
    }
    placed.sort_by_key(|(i, ..)| *i);
    placed.into_iter().map(|(_, d, p)| (d, p)).collect()
}

fn read_only_link_warning(declared: &Path, target: &Path) -> String {
    if target.starts_with(symlinks::NIX_STORE) {
        format!(
            "{} is declared read-write but is a symlink into the Nix store ({}), which is read-only; it is exposed read-only",
            declared.display(),
            target.display()
        )
    } else {
        format!(
            "{} is declared read-write but is a symlink to {}, which the sandbox exposes read-only (or which holds read-only paths); it is exposed read-only",
            declared.display(),
            target.display()
        )
    }
}

fn left_link_dangles(declared: &Path, hop: &Path, target: &Path) -> String {
    format!(
        "{} stays a symlink inside the sandbox (it lies in a directory the sandbox shows as it is), and its chain goes through {}, which the sandbox does not have, so it will not resolve there; its target {} is exposed at its own path. Fix: point the link straight at {}",
        declared.display(),
        hop.display(),
        target.display(),
        target.display()
    )
}

/// The host paths the sandbox can write: the sources of the read-write binds.
fn writable_of<'a>(mounts: impl IntoIterator<Item = &'a Mount>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for src in rw_sources(mounts) {
        if !out.iter().any(|w| src.starts_with(w)) {
            out.push(src.to_path_buf());
        }
    }
    out
}

fn rw_sources<'a>(mounts: impl IntoIterator<Item = &'a Mount>) -> impl Iterator<Item = &'a Path> {
    mounts.into_iter().filter_map(|m| match m {
        Mount::Bind { src, .. } | Mount::BindFd { src, rw: true, .. } => Some(src.as_path()),
        _ => None,
    })
}

fn held_from(meta: &std::fs::Metadata) -> Held {
    use std::os::unix::fs::MetadataExt;
    Held {
        dir: meta.is_dir(),
        id: Some((meta.dev(), meta.ino())),
    }
}

/// The mount that shows `path` inside: the deepest one holding it (the last of equals, as
/// bubblewrap applies them in order).
fn holder<'a>(path: &Path, mounts: &[&'a Mount]) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(m.dest()))
        .max_by_key(|m| m.dest().components().count())
        .copied()
}

/// Whether `target`, already exposed through `mounts`, may be bound writable elsewhere: the
/// deepest mount holding it must be a read-write bind, and no read-only mount may lie below it.
fn alias_may_be_writable(target: &Path, mounts: &[&Mount]) -> bool {
    let holder_rw = matches!(holder(target, mounts), Some(Mount::Bind { .. }));
    let ro_below = mounts.iter().any(|m| {
        !matches!(m, Mount::Bind { .. }) && m.dest() != target && m.dest().starts_with(target)
    });
    holder_rw && !ro_below
}

/// In open mode, DNS queries to this address are forwarded by pasta to the host's resolver.
pub const DNS_FORWARD_ADDR: &str = "169.254.1.53";

/// Whether every nameserver in a resolv.conf is on loopback (unreachable from the sandbox).
pub fn resolv_needs_forward(text: &str) -> bool {
    let servers: Vec<std::net::IpAddr> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    !servers.is_empty() && servers.iter().all(|ip| ip.is_loopback())
}

/// The `search`/`options` lines of a resolv.conf, kept when the nameserver is replaced.
fn resolv_options(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("search") || l.starts_with("options") || l.starts_with("domain")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The sandbox's name (messages, the session directory's name): `outName`, else the file name
/// of the program (`program`, else the command line's first word), else "sandbox".
pub fn sandbox_name(spec: &Spec, args: &[OsString]) -> String {
    spec.out_name.clone().unwrap_or_else(|| {
        spec.program
            .as_ref()
            .map(PathBuf::from)
            .or_else(|| args.first().map(PathBuf::from))
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "sandbox".into())
    })
}

fn command_line(spec: &Spec, args: &[OsString]) -> Result<Vec<OsString>> {
    let mut cmd = Vec::new();
    if let Some(p) = &spec.program {
        cmd.push(OsString::from(p));
    }
    cmd.extend(args.iter().cloned());
    if cmd.is_empty() {
        return Err(PlanError::Refused(
            "no command given. Fix: name the command after `--`, e.g. `agent-sandbox run -- bash`"
                .into(),
        ));
    }
    Ok(cmd)
}

fn network_mode(spec: &Spec) -> Network {
    match &spec.allowed_domains {
        None => Network::Open,
        Some(AllowedDomains::List(l)) if l.is_empty() => Network::Blocked,
        Some(AllowedDomains::Rules(r)) if r.is_empty() => Network::Blocked,
        Some(AllowedDomains::List(l)) => Network::Filtered(
            l.iter()
                .filter_map(|d| normalize_domain(d))
                .map(|d| (d, None))
                .collect(),
        ),
        Some(AllowedDomains::Rules(r)) => Network::Filtered(
            r.iter()
                .filter_map(|(d, rule)| {
                    let methods = match rule {
                        MethodRule::Any(_) => None,
                        MethodRule::Methods(m) => Some(m.clone()),
                    };
                    normalize_domain(d).map(|d| (d, methods))
                })
                .collect(),
        ),
    }
}

/// The one-line warning when `git commit` would fail inside for want of an identity: git needs
/// an author and a committer, each a name and an email, from the environment or a config file
/// the sandbox sees (a declared `~/.gitconfig` or `~/.config/git/config`, the repository's own
/// config), and `user.useConfigOnly` stops it guessing (`EMAIL` is such a guess: git ignores it
/// then). Names the missing variables as flags.
fn git_identity_warning(
    spec: &Spec,
    declared: &[Declared],
    home: &Path,
    repo_config: Option<PathBuf>,
) -> Option<String> {
    let global = [home.join(".gitconfig"), home.join(".config/git/config")];
    let files: Vec<PathBuf> = global
        .iter()
        .filter(|f| declared.iter().any(|d| f.starts_with(&d.path)))
        .cloned()
        .chain(repo_config)
        .collect();
    let (config_name, config_email) = git::identity_in_config(&files);
    let has = |k: &str| spec.env.contains_key(k);
    let missing: Vec<&str> = [
        ("GIT_AUTHOR_NAME", config_name),
        ("GIT_AUTHOR_EMAIL", config_email),
        ("GIT_COMMITTER_NAME", config_name),
        ("GIT_COMMITTER_EMAIL", config_email),
    ]
    .into_iter()
    .filter(|(var, other_source)| !has(var) && !other_source)
    .map(|(var, _)| var)
    .collect();
    if missing.is_empty() {
        return None;
    }
    let flags: Vec<String> = missing.iter().map(|v| format!("--env {v}=…")).collect();
    Some(format!(
        "no git identity inside (missing {}), so `git commit` will fail (user.useConfigOnly). Fix: {} (env in mkSandbox), or --ro ~/.gitconfig (roFiles) with user.name and user.email set",
        missing.join(", "),
        flags.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A home with a launch directory in it, on the real filesystem: `build` reads it.
    struct Tree {
        _tmp: tempfile::TempDir,
        home: PathBuf,
        proj: PathBuf,
    }

    impl Tree {
        fn new() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            let root = std::fs::canonicalize(tmp.path()).unwrap();
            let home = root.join("home");
            let proj = home.join("p");
            std::fs::create_dir_all(&proj).unwrap();
            Tree {
                _tmp: tmp,
                home,
                proj,
            }
        }
        fn dir(&self, p: &Path) -> PathBuf {
            std::fs::create_dir_all(p).unwrap();
            p.into()
        }
        fn file(&self, p: &Path) -> PathBuf {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
            p.into()
        }
        fn link(&self, p: &Path, target: &Path) -> PathBuf {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            symlink(target, p).unwrap();
            p.into()
        }
        fn plan(&self, edit: impl FnOnce(&mut Spec)) -> Plan {
            self.try_plan(edit).unwrap()
        }
        fn try_plan(&self, edit: impl FnOnce(&mut Spec)) -> Result<Plan> {
            let mut spec = Spec::new();
            spec.allowed_domains = Some(AllowedDomains::List(vec![]));
            edit(&mut spec);
            let host = HostContext {
                cwd: self.proj.clone(),
                cwd_link: None,
                home: self.home.clone(),
                uid: nix::unistd::getuid().as_raw(),
                gid: nix::unistd::getgid().as_raw(),
                term: None,
                locale: vec![],
                session_dir: self.home.parent().unwrap().join("state/session"),
                helper_exe: "/bin/true".into(),
                init_exe: None,
                listening_ports: vec![],
                lowest_bridged_port: 1024,
                caller_path: "/usr/bin:/bin".into(),
                resolv_conf: None,
                nix: Default::default(),
                system_ca_bundle: None,
                has_bin_bash: true,
                proc_ro: vec![],
            };
            build(&spec, &["true".into()], &host)
        }
    }

    /// Issue 11: a socket declared with `--rw-dir` was "a file; declare it in rwFiles", which
    /// then refused it for another reason. Each kind is named, with its field and its flag.
    #[test]
    fn a_declared_path_of_the_wrong_kind_is_named_for_what_it_is() {
        let t = Tree::new();
        let sock = t.home.join("agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let fifo = t.home.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let file = t.file(&t.home.join("notes"));
        let dir = t.dir(&t.home.join("cache"));
        let err = t
            .try_plan(|spec| {
                spec.rw_dirs = vec![s(&sock), s(&fifo), s(&file)];
                spec.ro_files = vec![s(&dir)];
            })
            .unwrap_err()
            .to_string();
        let want = [
            format!(
                "{} (rwDirs) is a Unix socket, not a directory; declare it in rwFiles (--rw {0}), and allow connecting to it with --allow-socket {0} (allowedSockets)",
                sock.display()
            ),
            format!(
                "{} (rwDirs) is a FIFO (named pipe), not a directory; declare it in rwFiles (--rw {0})",
                fifo.display()
            ),
            format!(
                "{} (rwDirs) is a file, not a directory; declare it in rwFiles (--rw {0})",
                file.display()
            ),
            format!(
                "{} (roFiles) is a directory; declare it in roDirs (--ro {0})",
                dir.display()
            ),
        ];
        for w in &want {
            assert!(err.contains(w.as_str()), "missing {w:?} in {err}");
        }
    }

    fn s(p: &Path) -> String {
        p.to_str().unwrap().to_owned()
    }

    /// The mounts at or below `under`, in order.
    fn mounts_under<'a>(plan: &'a Plan, under: &Path) -> Vec<&'a Mount> {
        plan.mounts
            .iter()
            .map(|e| &e.mount)
            .filter(|m| m.dest().starts_with(under))
            .collect()
    }

    fn bind(src: &Path, dest: &Path) -> Mount {
        Mount::Bind {
            src: src.into(),
            dest: dest.into(),
        }
    }

    fn ro(src: &Path, dest: &Path) -> Mount {
        Mount::RoBind {
            src: src.into(),
            dest: dest.into(),
        }
    }

    /// Issue 10 item 7: a declared link inside the launch directory crashed bubblewrap ("Can't
    /// bind mount … No such file or directory"): its destination is the link itself, which
    /// bubblewrap follows inside the new root. It stays a link; only its mode is honoured.
    #[test]
    fn a_declared_link_in_the_launch_dir_stays_a_link() {
        let t = Tree::new();
        let real = t.dir(&t.proj.join("real"));
        let link = t.link(&t.proj.join("link"), &real);
        let file = t.file(&t.proj.join("file"));
        let flink = t.link(&t.proj.join("flink"), &file);
        let launch = bind(&t.proj, &t.proj);
        // Read-write: the launch directory shows the target writable already.
        let plan = t.plan(|s| s.rw_dirs = vec![self::s(&link)]);
        assert_eq!(mounts_under(&plan, &t.proj), [&launch]);
        assert_eq!(plan.warnings, Vec::<String>::new());
        let plan = t.plan(|s| s.rw_files = vec![self::s(&flink)]);
        assert_eq!(mounts_under(&plan, &t.proj), [&launch]);
        // Read-only: the target itself, at its own place.
        let plan = t.plan(|s| s.ro_dirs = vec![self::s(&link)]);
        assert_eq!(mounts_under(&plan, &t.proj), [&launch, &ro(&real, &real)]);
        assert_eq!(plan.warnings, Vec::<String>::new());
        let plan = t.plan(|s| s.ro_files = vec![self::s(&flink)]);
        assert_eq!(mounts_under(&plan, &t.proj), [&launch, &ro(&file, &file)]);
        // A relative link, and a path below a linked directory.
        let rel = t.link(&t.proj.join("rel"), Path::new("real"));
        let sub = t.dir(&real.join("sub"));
        let plan = t.plan(|s| s.ro_dirs = vec![self::s(&rel)]);
        assert_eq!(mounts_under(&plan, &t.proj), [&launch, &ro(&real, &real)]);
        let plan = t.plan(|s| s.ro_dirs = vec![self::s(&link.join("sub"))]);
        assert_eq!(
            mounts_under(&plan, &t.proj),
            [&launch, &bind(&real, &real), &ro(&sub, &sub)],
            "the read-only path gets its parent pinned"
        );
    }

    #[test]
    fn a_declared_link_in_the_launch_dir_to_a_read_only_place_stays_read_only() {
        let t = Tree::new();
        let other = t.dir(&t.home.join("other"));
        let link = t.link(&t.proj.join("to-other"), &other);
        let plan = t.plan(|s| {
            s.ro_dirs = vec![self::s(&other)];
            s.rw_dirs = vec![self::s(&link)];
        });
        // No mount at the link, none making `other` writable.
        assert_eq!(mounts_under(&plan, &link), Vec::<&Mount>::new());
        assert_eq!(mounts_under(&plan, &other), [&ro(&other, &other)]);
        assert_eq!(
            plan.warnings,
            [format!(
                "{} is declared read-write but is a symlink to {}, which the sandbox exposes read-only (or which holds read-only paths); it is exposed read-only",
                link.display(),
                other.display()
            )]
        );
        // A link to a place not exposed stays refused, as anywhere else.
        let plan = t.plan(|s| s.rw_dirs = vec![self::s(&link)]);
        assert_eq!(mounts_under(&plan, &other), Vec::<&Mount>::new());
        assert_eq!(mounts_under(&plan, &link), Vec::<&Mount>::new());
        assert!(
            plan.warnings[0].starts_with(&format!(
                "{} is a symlink to {}, which is not exposed in the sandbox; it was left out",
                link.display(),
                other.display()
            )),
            "{:?}",
            plan.warnings
        );
    }

    #[test]
    fn a_declared_link_in_home_is_bound_at_its_own_place() {
        // `$HOME` is a tmpfs inside, so the link's place is free: the target's content is
        // bound there, as before.
        let t = Tree::new();
        let data = t.dir(&t.proj.join("claude-data"));
        let claude = t.link(&t.home.join(".claude"), &data);
        let plan = t.plan(|s| s.rw_dirs = vec![self::s(&claude)]);
        assert_eq!(mounts_under(&plan, &claude), [&bind(&data, &claude)]);
        // A link inside that directory is shown as a link there: left in place.
        let notes = t.dir(&t.proj.join("notes"));
        let nested = t.link(&data.join("notes"), &notes);
        let plan = t.plan(|s| {
            s.rw_dirs = vec![self::s(&claude)];
            s.ro_dirs = vec![self::s(&claude.join("notes"))];
        });
        assert_eq!(mounts_under(&plan, &claude), [&bind(&data, &claude)]);
        assert_eq!(mounts_under(&plan, &notes), [&ro(&notes, &notes)]);
        assert!(mounts_under(&plan, &nested).is_empty());
    }

    #[test]
    fn the_view_finds_links_only_where_the_sandbox_shows_host_paths() {
        let t = Tree::new();
        let root = t.home.parent().unwrap().to_path_buf();
        let real = t.dir(&t.proj.join("real"));
        let link = t.link(&t.proj.join("link"), &real);
        t.link(&t.home.join(".claude"), &real);
        let view = View {
            shown: vec![
                (root.clone(), Shown::Host(root.clone())),
                (t.home.clone(), Shown::Empty),
                (t.proj.clone(), Shown::Host(t.proj.clone())),
                ("/bin".into(), Shown::Link),
            ],
        };
        assert!(view.through_link(&link));
        assert!(view.through_link(&link.join("below")));
        assert!(!view.through_link(&real.join("below")));
        // `$HOME` is a tmpfs inside, above the bind of `root` that holds the host's link.
        assert!(!view.through_link(&t.home.join(".claude")));
        assert!(view.through_link(Path::new("/bin/sh")));
        assert!(!view.through_link(Path::new("/opt/x")));
        // A destination is not "through" the mount at its own place.
        assert!(!view.through_link(&t.proj));
    }

    #[test]
    fn a_left_link_through_a_hop_the_sandbox_lacks_is_warned_about() {
        let t = Tree::new();
        let real = t.dir(&t.proj.join("real"));
        let hop = t.link(&t.home.join("hop"), &real);
        let link = t.link(&t.proj.join("link"), &hop);
        let plan = t.plan(|s| s.ro_dirs = vec![self::s(&link)]);
        assert_eq!(
            mounts_under(&plan, &t.proj),
            [&bind(&t.proj, &t.proj), &ro(&real, &real)]
        );
        assert_eq!(
            plan.warnings,
            [format!(
                "{} stays a symlink inside the sandbox (it lies in a directory the sandbox shows as it is), and its chain goes through {}, which the sandbox does not have, so it will not resolve there; its target {} is exposed at its own path. Fix: point the link straight at {}",
                link.display(),
                hop.display(),
                real.display(),
                real.display()
            )]
        );
    }

    #[test]
    fn normalize_folds_dots_and_tilde() {
        let base = Path::new("/w/proj");
        let home = Path::new("/home/u");
        assert_eq!(
            normalize("a/../b/./c", base, home),
            PathBuf::from("/w/proj/b/c")
        );
        assert_eq!(
            normalize("~/.claude", base, home),
            PathBuf::from("/home/u/.claude")
        );
        assert_eq!(normalize("/x/../../y", base, home), PathBuf::from("/y"));
        assert_eq!(normalize("~", base, home), PathBuf::from("/home/u"));
    }

    #[test]
    fn aliases_are_writable_only_where_the_target_is() {
        let bind = |p: &str| Mount::Bind {
            src: p.into(),
            dest: p.into(),
        };
        let ro = |p: &str| Mount::RoBind {
            src: p.into(),
            dest: p.into(),
        };
        let mounts = [
            ro("/usr"),
            bind("/h/proj"),
            bind("/h/proj/.git"),
            ro("/h/proj/.git/hooks"),
            ro("/h/.gitconfig"),
            bind("/h/.claude"),
        ];
        let m: Vec<&Mount> = mounts.iter().collect();
        assert!(alias_may_be_writable(Path::new("/h/proj/src"), &m));
        assert!(alias_may_be_writable(Path::new("/h/.claude/x"), &m));
        assert!(!alias_may_be_writable(Path::new("/usr/share"), &m));
        assert!(!alias_may_be_writable(Path::new("/h/.gitconfig"), &m));
        assert!(!alias_may_be_writable(Path::new("/h/proj/.git/hooks"), &m));
        // The git dir holds read-only hooks: a second, writable view of it would not.
        assert!(!alias_may_be_writable(Path::new("/h/proj/.git"), &m));
        assert!(!alias_may_be_writable(Path::new("/h/proj"), &m));
        assert!(!alias_may_be_writable(Path::new("/elsewhere"), &m));
    }

    #[test]
    fn loopback_resolvers_are_forwarded() {
        assert!(resolv_needs_forward(
            "nameserver 127.0.0.53\noptions edns0\n"
        ));
        assert!(resolv_needs_forward("nameserver ::1\n"));
        assert!(!resolv_needs_forward("nameserver 10.255.255.53\n"));
        assert!(!resolv_needs_forward(
            "nameserver 127.0.0.53\nnameserver 9.9.9.9\n"
        ));
        assert!(!resolv_needs_forward(""));
        assert_eq!(
            resolv_options("nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n"),
            "options edns0 trust-ad\nsearch lan\n"
        );
    }

    #[test]
    fn network_modes() {
        let mut s = Spec::new();
        assert_eq!(network_mode(&s), Network::Open);
        s.allowed_domains = Some(AllowedDomains::List(vec![]));
        assert_eq!(network_mode(&s), Network::Blocked);
        s.allowed_domains = Some(AllowedDomains::List(vec!["Example.COM.".into()]));
        assert_eq!(
            network_mode(&s),
            Network::Filtered([("example.com".to_string(), None)].into())
        );
    }

    /// Issue 9 item 8: `null` meant "every port" to the proxy, and a port below 1024 (the
    /// `null` scan's 127.0.0.53:53, or the summary's own `--allow-local-port 443`) stopped the
    /// sandbox from starting.
    #[test]
    fn local_ports_are_concrete_and_low_ones_are_not_bridged() {
        assert_eq!(
            local_ports(Some(&[6379, 5432, 5432]), &[22, 8080], 1024),
            LocalPorts {
                allowed: vec![5432, 6379],
                bridged: vec![5432, 6379],
                warning: None,
            }
        );
        assert_eq!(
            local_ports(None, &[8080, 53, 5432], 1024),
            LocalPorts {
                allowed: vec![53, 5432, 8080],
                bridged: vec![5432, 8080],
                warning: Some("host loopback port 53 not bridged into the sandbox: it cannot listen below 1024 in its own network namespace (net.ipv4.ip_unprivileged_port_start, and it has no capabilities), so 127.0.0.1:53 inside stays closed. In filtered mode the proxy still reaches it on host loopback for allowed names that resolve there. Fix: serve the host service on a port from 1024 up and allow that one".into()),
            }
        );
        let two = local_ports(Some(&[443, 80, 1024]), &[], 1024);
        assert_eq!(
            (two.allowed, two.bridged),
            (vec![80, 443, 1024], vec![1024])
        );
        assert!(
            two.warning
                .unwrap()
                .starts_with("host loopback ports 80, 443 not bridged into the sandbox: it cannot listen below 1024 in its own network namespace (net.ipv4.ip_unprivileged_port_start, and it has no capabilities), so 127.0.0.1:80 inside stays closed. In filtered mode the proxy still reaches them ")
        );
        // Nothing listening and `null`: no port at all (not "every port").
        assert_eq!(
            local_ports(None, &[], 1024),
            LocalPorts {
                allowed: vec![],
                bridged: vec![],
                warning: None,
            }
        );
        // macOS reaches host ports directly: nothing to skip.
        assert_eq!(local_ports(Some(&[443]), &[], 1).bridged, vec![443]);
    }
}

/// `plan::build` end to end on a closure-mode spec (so that nothing of the host's system
/// layer enters), and the two lowerings of the same plan.
#[cfg(test)]
#[path = "plan_full_tests.rs"]
mod full_tests;
