//! Which directories may be the launch directory (exposed read-write) or a declared path, and
//! which need a `y` typed on the terminal first. Canonical paths are compared throughout, so a
//! symlinked `/home` or `/tmp` does not slip through.
//!
//! * Refused: `/`, any directory above `$HOME`; the shared temporary and runtime directories
//!   (`/tmp`, `/var/tmp`, `/dev/shm`, `/run/user/$UID`), whose whole content — other programs'
//!   files and live sockets such as ssh-agent's — would become writable; anything in `/proc`,
//!   `/sys`, `/dev` or `/run`.
//! * Confirmed: `$HOME` itself; the system directories (`/etc`, `/usr`, `/var`, `/opt`, `/srv`,
//!   `/boot`, `/nix`, and anything inside `/etc`, `/usr`, `/boot`); a launch directory reached
//!   through a symlink that leads out of the directory it sits in (an agent that could write
//!   the project may have planted `proj/docs -> ~/.gnupg` for the user to `cd` into).
//! * Declared paths may not be `/`, `/run`, or anything in `/proc`, `/sys` or `/dev`
//!   (`--ro /proc` would show every host process), nor, read-write, a directory above `$HOME`.
//!   `$HOME` itself (`--rw ~`, `--ro ~`), or read-only a directory above it, is confirmed.

use std::path::{Path, PathBuf};

/// Whether the launch directory needs the user's confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchGuard {
    Ok,
    /// Ask on the terminal, once per reason, in order.
    Confirm(Vec<Confirm>),
}

impl LaunchGuard {
    /// `self` with `reason` asked too (once).
    pub fn and(self, reason: Confirm) -> LaunchGuard {
        let mut v = match self {
            LaunchGuard::Ok => Vec::new(),
            LaunchGuard::Confirm(v) => v,
        };
        if !v.contains(&reason) {
            v.push(reason);
        }
        LaunchGuard::Confirm(v)
    }

    /// The reasons to ask about (none for `Ok`).
    pub fn reasons(&self) -> &[Confirm] {
        match self {
            LaunchGuard::Ok => &[],
            LaunchGuard::Confirm(v) => v,
        }
    }
}

/// Why a launch directory (or a declared path) needs a `y`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    Home,
    SystemDir,
    /// `link` (a component of the launch directory's path as the shell has it, `$PWD`) points
    /// to `target`, outside `link`'s own directory.
    ThroughSymlink {
        link: PathBuf,
        target: PathBuf,
    },
    /// A declared path (`field`) that is `$HOME` (`is_home`) or, read-only, holds it.
    Declared {
        path: PathBuf,
        field: String,
        rw: bool,
        is_home: bool,
    },
}

/// What a read-write `$HOME` hands the agent, in plain words.
const HOME_RW: &str = "the sandboxed command could read and write all of it: your SSH and GPG keys, cloud and API tokens, browser profiles, shell history and every project (only the files your shell and other host programs run, such as ~/.bashrc, stay read-only)";
/// What a read-only `$HOME` hands the agent.
const HOME_RO: &str = "the sandboxed command could read all of it: your SSH and GPG keys, cloud and API tokens, browser profiles, shell history and every project";

impl Confirm {
    pub fn question(&self, cwd: &Path) -> String {
        let cwd = cwd.display();
        match self {
            Confirm::Home => format!(
                "agent-sandbox: you are launching from your home directory {cwd}; {HOME_RW}. continue? [y/N] "
            ),
            Confirm::SystemDir => format!(
                "agent-sandbox: you are launching from the system directory {cwd}; all of it will be writable by the sandboxed command (as far as your user may write it). continue? [y/N] "
            ),
            Confirm::ThroughSymlink { link, target } => format!(
                "agent-sandbox: you reached this directory through the symlink {} -> {}, which leads out of {}; {cwd} will be writable by the sandboxed command. If you did not create that link, an agent may have. continue? [y/N] ",
                link.display(),
                target.display(),
                link.parent().unwrap_or(Path::new("/")).display()
            ),
            Confirm::Declared {
                path,
                field,
                rw,
                is_home,
            } => format!(
                "agent-sandbox: {} ({field}) {}; {}. continue? [y/N] ",
                path.display(),
                declared_what(*rw, *is_home),
                if *rw { HOME_RW } else { HOME_RO }
            ),
        }
    }

    pub fn refusal(&self, cwd: &Path) -> String {
        let shown = cwd.display();
        match self {
            Confirm::Home => format!(
                "refusing to launch from your home directory {shown} without confirmation: {HOME_RW}. Fix: cd into a project directory, or run from a terminal and answer y"
            ),
            Confirm::SystemDir => format!(
                "refusing to launch from the system directory {shown} without confirmation (it would be exposed read-write). Fix: cd into a project directory, or run from a terminal and answer y"
            ),
            Confirm::ThroughSymlink { link, target } => format!(
                "refusing to launch through the symlink {} -> {} without confirmation (it leads out of its directory, and {shown} would be exposed read-write). Fix: if you mean it, cd to the real directory ({shown}) and launch again; if you did not create the link, remove it",
                link.display(),
                target.display()
            ),
            Confirm::Declared {
                path,
                field,
                rw,
                is_home,
            } => format!(
                "refusing to expose {} ({field}) without confirmation: it {}, so {}. Fix: declare the directories the agent needs instead (e.g. --rw ~/proj --ro ~/.config/tool), or run from a terminal and answer y",
                path.display(),
                declared_what(*rw, *is_home),
                if *rw { HOME_RW } else { HOME_RO }
            ),
        }
    }
}

fn declared_what(rw: bool, is_home: bool) -> &'static str {
    match (rw, is_home) {
        (true, _) => "is your home directory, declared read-write",
        (false, true) => "is your home directory, declared read-only",
        (false, false) => "holds your home directory, declared read-only",
    }
}

/// Shared temporary and runtime directories: refused as the launch directory itself.
fn shared_dirs(uid: u32) -> Vec<PathBuf> {
    ["/tmp", "/var/tmp", "/dev/shm", "/run/user"]
        .iter()
        .map(PathBuf::from)
        .chain([PathBuf::from(format!("/run/user/{uid}"))])
        .collect()
}

/// Kernel and runtime filesystems: refused at any depth.
const PSEUDO_ROOTS: &[&str] = &["/proc", "/sys", "/dev", "/run"];

/// System directories asked about when they are the launch directory itself.
const SYSTEM_DIRS: &[&str] = &["/etc", "/usr", "/var", "/opt", "/srv", "/boot", "/nix"];
/// System directories asked about at any depth.
const SYSTEM_TREES: &[&str] = &["/etc", "/usr", "/boot"];

/// The rules for the canonical launch directory `cwd`. Pure.
pub fn launch_dir(cwd: &Path, home: &Path, uid: u32) -> Result<LaunchGuard, String> {
    if cwd == Path::new("/") {
        // Fail closed: exposing / read-write would hand the agent the whole machine.
        return Err(
            "refusing to launch from / (it would be exposed read-write). Fix: cd into your project directory first".into(),
        );
    }
    if shared_dirs(uid).iter().any(|d| cwd == d) {
        // Fail closed: every other program's files and sockets there would become writable.
        return Err(format!(
            "refusing to launch from {}: it is a shared temporary or runtime directory, and all of it (other programs' files and live sockets, e.g. ssh-agent's) would be exposed read-write. Fix: mkdir a project directory inside it and cd there",
            cwd.display()
        ));
    }
    if let Some(root) = PSEUDO_ROOTS.iter().find(|r| cwd.starts_with(r)) {
        // Fail closed: kernel and runtime state is no project.
        return Err(format!(
            "refusing to launch from {}: it is inside {root}, which holds kernel or runtime state, not a project. Fix: cd into your project directory first",
            cwd.display()
        ));
    }
    if cwd == home {
        return Ok(LaunchGuard::Confirm(vec![Confirm::Home]));
    }
    if home.starts_with(cwd) {
        // Fail closed: a directory above $HOME would expose every file of the user.
        return Err(format!(
            "refusing to launch from {} because it contains your home directory {} (it would be exposed read-write). Fix: cd into your project directory first",
            cwd.display(),
            home.display()
        ));
    }
    let system = SYSTEM_DIRS.iter().any(|d| cwd == Path::new(d))
        || SYSTEM_TREES.iter().any(|d| cwd.starts_with(d));
    Ok(if system {
        LaunchGuard::Confirm(vec![Confirm::SystemDir])
    } else {
        LaunchGuard::Ok
    })
}

/// A declared path (canonical or normalised; `rw`: read-write) that must not be exposed at
/// all (`Err`), or only after a `y` (`Some`). Pure.
pub fn declared_path(
    path: &Path,
    field: &str,
    rw: bool,
    home: &Path,
) -> Result<Option<Confirm>, String> {
    if path == Path::new("/") {
        // Fail closed: / is the whole machine.
        return Err(format!(
            "/ ({field}) cannot be exposed: it is the whole machine; every file you may read (your home with its SSH keys and tokens, other users' readable files){} would be {} inside the sandbox. Fix: declare the specific directories the agent needs (e.g. --rw ~/proj --ro ~/.config/tool)",
            if rw {
                " and every file you may write"
            } else {
                ""
            },
            if rw {
                "readable and writable"
            } else {
                "readable"
            }
        ));
    }
    let refused = path == Path::new("/run")
        || ["/proc", "/sys", "/dev"]
            .iter()
            .any(|r| path.starts_with(r));
    if refused {
        // Fail closed: these would expose every host process or the host's devices and
        // runtime sockets.
        return Err(format!(
            "{} ({field}) cannot be exposed: /run and everything in /proc, /sys and /dev are refused (they would show every host process, or the host's devices and sockets; the sandbox has its own /proc, /dev and /run). Fix: declare the specific file or directory you need, e.g. /run/user/UID/SOCKET with --allow-socket",
            path.display()
        ));
    }
    if rw && home.starts_with(path) && home != path {
        // Fail closed, as for the launch directory: every file of the user, writable.
        return Err(format!(
            "{} ({field}) cannot be exposed read-write: it contains your home directory {}, so {}. Fix: declare the specific directories the agent needs (e.g. --rw ~/proj)",
            path.display(),
            home.display(),
            HOME_RW
        ));
    }
    let confirm = home.starts_with(path).then(|| Confirm::Declared {
        path: path.to_path_buf(),
        field: field.to_string(),
        rw,
        is_home: home == path,
    });
    Ok(confirm)
}

/// The launch directory as the shell reached it (`logical`, from `$PWD`, which must resolve to
/// the canonical `cwd`), checked for a symlink that leads out of the directory it sits in (see
/// [`link_out_of_a_writable_dir`]). Reads the filesystem.
pub fn symlinked_launch_dir(logical: &Path, cwd: &Path, home: &Path) -> Option<Confirm> {
    if !logical.is_absolute() {
        return None;
    }
    let (real, links) = resolve_noting_links(logical).ok()?;
    if real != cwd {
        return None;
    }
    link_out_of_a_writable_dir(&links, home)
}

/// The first of `links` that leads out of the directory it sits in, when an agent may have
/// written that directory: one below `$HOME`, or elsewhere one we can write (for root, which
/// can write anywhere: a world-writable one such as `/tmp`). Links in system directories (the
/// administrator's `/home -> /data/home`) and links directly in `$HOME` (the user's own
/// `~/code -> /mnt/code`) are not asked about: no sandbox could have written them without that
/// being confirmed already.
fn link_out_of_a_writable_dir(links: &[Link], home: &Path) -> Option<Confirm> {
    links
        .iter()
        .find(|l| agent_may_have_written(&l.dir, home) && !l.target.starts_with(&l.dir))
        .map(|l| Confirm::ThroughSymlink {
            link: l.link.clone(),
            target: l.target.clone(),
        })
}

/// A symlink met while resolving a path: where it is, the real directory it sits in, and the
/// real path it leads to.
#[derive(Debug)]
struct Link {
    link: PathBuf,
    dir: PathBuf,
    target: PathBuf,
}

/// Most symlinks followed in one resolution, as the kernel allows (`ELOOP` past it).
const MAX_LINKS: u32 = 40;

/// `path` resolved one component at a time, as the kernel resolves it, with every symlink met
/// on the way. One walk gives both the real path and the links behind it, so a link that an
/// agent in another session swaps in and out between two looks (a `canonicalize`, then a scan
/// for links) cannot make the two disagree.
fn resolve_noting_links(path: &Path) -> std::io::Result<(PathBuf, Vec<Link>)> {
    let mut links = Vec::new();
    let mut budget = MAX_LINKS;
    let real = walk(PathBuf::from("/"), path, &mut budget, &mut links)?;
    Ok((real, links))
}

fn walk(
    start: PathBuf,
    rest: &Path,
    budget: &mut u32,
    links: &mut Vec<Link>,
) -> std::io::Result<PathBuf> {
    use std::path::Component;
    let mut real = start;
    for c in rest.components() {
        match c {
            Component::RootDir => real = PathBuf::from("/"),
            Component::ParentDir => {
                // `real` holds no link, so its parent is the real parent.
                real.pop();
            }
            Component::Normal(n) => {
                let here = real.join(n);
                // A file followed by more components fails here with ENOTDIR.
                if std::fs::symlink_metadata(&here)?.file_type().is_symlink() {
                    if *budget == 0 {
                        return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
                    }
                    *budget -= 1;
                    let content = std::fs::read_link(&here)?;
                    let target = walk(real.clone(), &content, budget, links)?;
                    links.push(Link {
                        link: here,
                        dir: real,
                        target: target.clone(),
                    });
                    real = target;
                } else {
                    real = here;
                }
            }
            Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(real)
}

fn agent_may_have_written(dir: &Path, home: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    if dir == home {
        return false;
    }
    if dir.starts_with(home) {
        return true;
    }
    if nix::unistd::geteuid().is_root() {
        return std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o002 != 0);
    }
    writable_by_us(dir)
}

fn writable_by_us(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string; access only reads.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// `workspaceDir` / `--workspace`: the real path of the directory that replaces the launch
/// directory (expanded against `cwd` and `home`), and the symlink on its way that needs a `y`
/// (as a launch directory reached through it would). Both come from one walk: a path
/// resolved twice could lead to `~/.ssh` the first time and look link-free the second.
/// Fails closed: a missing workspace is refused, never replaced by the launch directory.
pub fn resolve_workspace(
    raw: &str,
    cwd: &Path,
    home: &Path,
) -> anyhow::Result<(PathBuf, Option<Confirm>)> {
    let given = crate::plan::normalize(raw, cwd, home);
    match resolve_noting_links(&given) {
        Ok((real, links)) if real.is_dir() => Ok((real, link_out_of_a_writable_dir(&links, home))),
        Ok((real, _)) => anyhow::bail!(
            "workspaceDir {raw} ({}) is not a directory. Fix: point workspaceDir / --workspace at the project directory",
            real.display()
        ),
        Err(e) => anyhow::bail!(
            "workspaceDir {raw} ({}) cannot be used: {e}. Fix: create it (mkdir -p {}) or point workspaceDir / --workspace at an existing directory",
            given.display(),
            given.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(cwd: &str) -> Result<LaunchGuard, String> {
        launch_dir(Path::new(cwd), Path::new("/home/u"), 1000)
    }

    #[test]
    fn root_and_above_home_are_refused() {
        assert_eq!(
            guard("/").unwrap_err(),
            "refusing to launch from / (it would be exposed read-write). Fix: cd into your project directory first"
        );
        assert_eq!(
            guard("/home").unwrap_err(),
            "refusing to launch from /home because it contains your home directory /home/u (it would be exposed read-write). Fix: cd into your project directory first"
        );
        assert_eq!(
            guard("/home/u").unwrap(),
            LaunchGuard::Confirm(vec![Confirm::Home])
        );
        assert_eq!(guard("/home/u/p").unwrap(), LaunchGuard::Ok);
        assert_eq!(guard("/home/uu").unwrap(), LaunchGuard::Ok);
    }

    #[test]
    fn shared_temporary_and_runtime_dirs_are_refused_their_subdirs_not() {
        for d in [
            "/tmp",
            "/var/tmp",
            "/dev/shm",
            "/run/user/1000",
            "/run/user",
        ] {
            let e = guard(d).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "refusing to launch from {d}: it is a shared temporary or runtime directory, and all of it (other programs' files and live sockets, e.g. ssh-agent's) would be exposed read-write. Fix: mkdir a project directory inside it and cd there"
                )
            );
        }
        assert_eq!(guard("/tmp/proj").unwrap(), LaunchGuard::Ok);
        assert_eq!(guard("/var/tmp/proj").unwrap(), LaunchGuard::Ok);
        for d in [
            "/proc/1",
            "/sys",
            "/dev/shm/x",
            "/run/user/1000/x",
            "/run",
            "/proc",
        ] {
            assert!(
                guard(d)
                    .unwrap_err()
                    .contains("holds kernel or runtime state"),
                "{d}"
            );
        }
    }

    #[test]
    fn system_dirs_are_confirmed() {
        let confirm = LaunchGuard::Confirm(vec![Confirm::SystemDir]);
        for d in [
            "/etc",
            "/usr",
            "/var",
            "/opt",
            "/srv",
            "/usr/local/src",
            "/etc/nginx",
            "/nix",
        ] {
            assert_eq!(guard(d).unwrap(), confirm, "{d}");
        }
        for d in ["/opt/proj", "/srv/www", "/var/lib/proj", "/nix/store/x"] {
            assert_eq!(guard(d).unwrap(), LaunchGuard::Ok, "{d}");
        }
        assert_eq!(
            Confirm::SystemDir.refusal(Path::new("/etc")),
            "refusing to launch from the system directory /etc without confirmation (it would be exposed read-write). Fix: cd into a project directory, or run from a terminal and answer y"
        );
    }

    #[test]
    fn declared_pseudo_filesystems_are_refused() {
        let home = Path::new("/home/u");
        for p in [
            "/",
            "/run",
            "/proc",
            "/proc/1/root",
            "/sys/kernel",
            "/dev",
            "/dev/sda",
        ] {
            let e = declared_path(Path::new(p), "roDirs", false, home).unwrap_err();
            assert!(
                e.starts_with(&format!("{p} (roDirs) cannot be exposed: ")),
                "{e}"
            );
        }
        for p in ["/run/user/1000", "/home/u/.gnupg", "/etc/hosts", "/devices"] {
            for rw in [false, true] {
                assert_eq!(
                    declared_path(Path::new(p), "roDirs", rw, home),
                    Ok(None),
                    "{p}"
                );
            }
        }
    }

    /// Issue 10, item 6: `--rw /` and `--rw ~` say plainly what they would expose.
    #[test]
    fn declared_root_and_home_say_what_they_expose() {
        let home = Path::new("/home/u");
        assert_eq!(
            declared_path(Path::new("/"), "rwDirs", true, home).unwrap_err(),
            "/ (rwDirs) cannot be exposed: it is the whole machine; every file you may read (your home with its SSH keys and tokens, other users' readable files) and every file you may write would be readable and writable inside the sandbox. Fix: declare the specific directories the agent needs (e.g. --rw ~/proj --ro ~/.config/tool)"
        );
        assert_eq!(
            declared_path(Path::new("/home"), "rwDirs", true, home).unwrap_err(),
            format!(
                "/home (rwDirs) cannot be exposed read-write: it contains your home directory /home/u, so {HOME_RW}. Fix: declare the specific directories the agent needs (e.g. --rw ~/proj)"
            )
        );
        let rw_home = declared_path(home, "rwDirs", true, home).unwrap().unwrap();
        assert_eq!(
            rw_home.question(Path::new("/home/u/p")),
            format!(
                "agent-sandbox: /home/u (rwDirs) is your home directory, declared read-write; {HOME_RW}. continue? [y/N] "
            )
        );
        assert_eq!(
            rw_home.refusal(Path::new("/home/u/p")),
            format!(
                "refusing to expose /home/u (rwDirs) without confirmation: it is your home directory, declared read-write, so {HOME_RW}. Fix: declare the directories the agent needs instead (e.g. --rw ~/proj --ro ~/.config/tool), or run from a terminal and answer y"
            )
        );
        assert!(HOME_RW.contains("SSH and GPG keys") && HOME_RW.contains("~/.bashrc"));
        // Read-only: $HOME and the directories above it are asked about, not refused.
        let ro_above = declared_path(Path::new("/home"), "roDirs", false, home)
            .unwrap()
            .unwrap();
        assert_eq!(
            ro_above.refusal(Path::new("/home/u/p")),
            format!(
                "refusing to expose /home (roDirs) without confirmation: it holds your home directory, declared read-only, so {HOME_RO}. Fix: declare the directories the agent needs instead (e.g. --rw ~/proj --ro ~/.config/tool), or run from a terminal and answer y"
            )
        );
        assert!(
            declared_path(home, "roDirs", false, home)
                .unwrap()
                .is_some()
        );
        assert_eq!(
            Confirm::Home.refusal(home),
            format!(
                "refusing to launch from your home directory /home/u without confirmation: {HOME_RW}. Fix: cd into a project directory, or run from a terminal and answer y"
            )
        );
    }

    #[test]
    fn a_link_out_of_a_writable_dir_is_asked_about() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        let proj = home.join("proj");
        let secret = home.join(".gnupg");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::create_dir_all(proj.join("src")).unwrap();
        std::os::unix::fs::symlink(&secret, proj.join("docs")).unwrap();
        std::os::unix::fs::symlink("src", proj.join("source")).unwrap();
        std::os::unix::fs::symlink(&proj, home.join("code")).unwrap();
        let check = |logical: PathBuf| {
            let cwd = std::fs::canonicalize(&logical).unwrap();
            symlinked_launch_dir(&logical, &cwd, &home)
        };
        assert_eq!(
            check(proj.join("docs")),
            Some(Confirm::ThroughSymlink {
                link: proj.join("docs"),
                target: secret.clone()
            })
        );
        // Inside its own directory, in $HOME itself, or no link at all: nothing to ask.
        assert_eq!(check(proj.join("source")), None);
        assert_eq!(check(home.join("code")), None);
        assert_eq!(check(proj.clone()), None);
        // $PWD that does not lead to the real cwd is not trusted for anything.
        assert_eq!(symlinked_launch_dir(&proj.join("docs"), &proj, &home), None);
    }

    #[test]
    fn one_walk_resolves_as_canonicalize_does_and_names_the_links() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join("proj/src")).unwrap();
        std::fs::create_dir_all(home.join(".gnupg/sub")).unwrap();
        std::os::unix::fs::symlink("../.gnupg", home.join("proj/keys")).unwrap();
        // A link whose own content goes through another link.
        std::os::unix::fs::symlink("keys/sub", home.join("proj/deep")).unwrap();
        std::os::unix::fs::symlink("loop", home.join("proj/loop")).unwrap();
        std::fs::write(home.join("proj/file"), "").unwrap();
        for p in [
            "proj/deep",
            "proj/keys/sub/..",
            "proj/src/../keys",
            "proj/src",
        ] {
            let p = home.join(p);
            let (real, _) = resolve_noting_links(&p).unwrap();
            assert_eq!(real, std::fs::canonicalize(&p).unwrap(), "{}", p.display());
        }
        let (ws, link) = resolve_workspace("proj/deep", &home, &home).unwrap();
        assert_eq!(ws, home.join(".gnupg/sub"));
        assert_eq!(
            link,
            Some(Confirm::ThroughSymlink {
                link: home.join("proj/keys"),
                target: home.join(".gnupg")
            })
        );
        assert_eq!(
            resolve_workspace("~/proj/src", &root, &home).unwrap(),
            (home.join("proj/src"), None)
        );
        let e = resolve_workspace("proj/loop", &home, &home)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot be used") && e.contains("os error 40"),
            "{e}"
        );
        let e = resolve_workspace("proj/file/x", &home, &home)
            .unwrap_err()
            .to_string();
        assert!(e.contains("os error 20"), "{e}");
        let e = resolve_workspace("proj/file", &home, &home)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a directory"), "{e}");
    }
}
