//! Unix sockets in declared paths: masked unless allowed.
//!
//! Threat: a declared directory may hold a live socket (`~/.gnupg/S.gpg-agent`,
//! `/run/user/UID/bus`). A read-only bind does not stop `connect()`, and the service behind the
//! socket runs outside the sandbox with the user's powers: gpg-agent signs, ssh-agent
//! authenticates, D-Bus starts programs on the host. So every socket the declared-directory scan
//! finds (`symlinks::scan_tree`, the same walk that checks symlinks) gets an empty read-only
//! file bound over it, unless `allowedSockets` / `--allow-socket` names it or a directory above
//! it; `connect()` to the path then fails with ECONNREFUSED. A declared path that is itself a
//! socket is refused unless allowed: it can only have been declared to be reached.
//!
//! Not covered, and said so in the warning and README: sockets created (or re-created by their
//! server) after launch, sockets beyond the scan's entry limit or in directories it could not
//! list, and the launch directory, which is not scanned. Nothing in the kernel can close that
//! cheaply: Landlock (ABI 7 here) scopes abstract sockets only, and seccomp cannot see the path
//! passed to `connect()`.

use std::path::{Path, PathBuf};

use crate::plan::Mount;
use crate::symlinks::{ScanReport, shell_arg, shown};

/// A socket the scan found: its host path, and the path it has inside the sandbox (they differ
/// under a declared symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub host: PathBuf,
    pub inside: PathBuf,
}

/// One `allowedSockets` entry: as written, and the paths it stands for (lexical and canonical).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    pub given: String,
    pub forms: Vec<PathBuf>,
}

impl Allowed {
    /// Whether this entry names `found` or a directory above it, by either of its paths.
    pub fn covers(&self, found: &Found) -> bool {
        self.forms
            .iter()
            .any(|f| found.host.starts_with(f) || found.inside.starts_with(f))
    }
}

/// The inside paths to mask, sorted and deduplicated: the found sockets no entry allows and
/// that `mounts` (the declared layer, in the order applied) really show at that path. A socket
/// found under one bind but hidden there by a deeper one is left to that one: binding a mask
/// onto whatever the deeper bind shows would mask (or, bwrap creating it, plant) the wrong file.
pub fn masks(found: &[Found], allowed: &[Allowed], mounts: &[&Mount]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = found
        .iter()
        .filter(|f| !allowed.iter().any(|a| a.covers(f)))
        .filter(|f| shows(mounts, &f.inside, &f.host))
        .map(|f| f.inside.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether the deepest of `mounts` holding `inside` is a bind that shows `host` there.
fn shows(mounts: &[&Mount], inside: &Path, host: &Path) -> bool {
    let deepest = mounts
        .iter()
        .filter(|m| inside.starts_with(m.dest()))
        .max_by_key(|m| m.dest().components().count());
    match deepest {
        Some(
            m @ (Mount::Bind { src, .. } | Mount::RoBind { src, .. } | Mount::BindFd { src, .. }),
        ) => inside
            .strip_prefix(m.dest())
            .is_ok_and(|rest| src.join(rest) == host),
        _ => false,
    }
}

/// The warning naming every masked socket and the option that allows one; `None` for none.
pub fn masked_warning(masked: &[PathBuf]) -> Option<String> {
    let (n, first) = (masked.len(), masked.first()?);
    let (s, are, it) = if n == 1 {
        ("", "is", "it")
    } else {
        ("s", "are", "them")
    };
    let mut out = format!(
        "{n} Unix socket{s} in declared directories {are} masked, so the agent cannot connect() to the service{s} behind {it} outside the sandbox (inside, connect() fails with ECONNREFUSED):\n"
    );
    for m in masked {
        out.push_str(&format!("  {}\n", shown(m)));
    }
    let flag = if n == 1 {
        shell_arg(first)
    } else {
        "PATH".into()
    };
    out.push_str(&format!(
        "To allow one, pass --allow-socket {flag} (allowedSockets in the spec). Sockets created after launch, or re-created by their server during the session, are not masked."
    ));
    Some(out)
}

/// A warning when the scan of declared directory `dir` (as seen inside) did not see all of it,
/// so sockets there stay reachable; `None` when it saw everything.
pub fn unscanned_warning(dir: &Path, report: &ScanReport) -> Option<String> {
    let mut parts = Vec::new();
    if report.truncated {
        parts.push(format!(
            "the scan of declared directory {} stopped after {} entries, so Unix sockets beyond those were not masked and the agent can connect() to them. Fix: declare the subdirectories you need instead",
            shown(dir),
            report.entries
        ));
    }
    if report.unreadable > 0 {
        let (n, y, it) = match report.unreadable {
            1 => (1, "y", "it"),
            n => (n, "ies", "them"),
        };
        parts.push(format!(
            "{n} director{y} under declared directory {} could not be listed, so Unix sockets in {it} were not masked and the agent can connect() to them by name. Fix: make {it} readable, or stop declaring {}",
            shown(dir),
            shown(dir)
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Why a declared path that is a socket, and not allowed, stops the start.
pub fn declared_socket_refusal(path: &Path, field: &str) -> String {
    format!(
        "{} ({field}) is a Unix socket: exposing it lets the agent connect() to the service behind it outside the sandbox (a D-Bus bus, gpg-agent or ssh-agent acts with your powers). Fix: if that is what you want, also pass --allow-socket {} (allowedSockets); otherwise stop declaring it",
        shown(path),
        shell_arg(path)
    )
}

/// The warning for an `allowedSockets` entry that matched no socket at launch.
pub fn unused_warning(a: &Allowed) -> String {
    format!(
        "--allow-socket {} (allowedSockets) matches no Unix socket in the declared paths at launch, so it changes nothing. Expected a socket (or a directory holding sockets) inside a declared path; declare its directory (--ro DIR / --rw DIR), or drop the entry",
        a.given
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(host: &str, inside: &str) -> Found {
        Found {
            host: host.into(),
            inside: inside.into(),
        }
    }

    fn allowed(forms: &[&str]) -> Allowed {
        Allowed {
            given: forms[0].into(),
            forms: forms.iter().map(PathBuf::from).collect(),
        }
    }

    fn bind(src: &str, dest: &str) -> Mount {
        Mount::Bind {
            src: src.into(),
            dest: dest.into(),
        }
    }

    #[test]
    fn unallowed_sockets_are_masked_once_each() {
        let mounts = [
            Mount::Tmpfs { dest: "/h".into() },
            bind("/h/.gnupg", "/h/.gnupg"),
            Mount::RoBind {
                src: "/run/user/1".into(),
                dest: "/run/user/1".into(),
            },
        ];
        let m: Vec<&Mount> = mounts.iter().collect();
        let f = [
            found("/run/user/1/bus", "/run/user/1/bus"),
            found("/h/.gnupg/S.gpg-agent", "/h/.gnupg/S.gpg-agent"),
            found("/h/.gnupg/S.gpg-agent.ssh", "/h/.gnupg/S.gpg-agent.ssh"),
            // Found again by the scan of a declared dir above it.
            found("/run/user/1/bus", "/run/user/1/bus"),
        ];
        assert_eq!(
            masks(&f, &[], &m),
            [
                "/h/.gnupg/S.gpg-agent",
                "/h/.gnupg/S.gpg-agent.ssh",
                "/run/user/1/bus"
            ]
            .map(PathBuf::from)
        );
        // An entry allows a socket by name, or every socket below a directory.
        assert_eq!(
            masks(&f, &[allowed(&["/run/user/1/bus"])], &m),
            ["/h/.gnupg/S.gpg-agent", "/h/.gnupg/S.gpg-agent.ssh"].map(PathBuf::from)
        );
        assert_eq!(
            masks(&f, &[allowed(&["/h/.gnupg"])], &m),
            ["/run/user/1/bus"].map(PathBuf::from)
        );
        // Component-wise: `/h/.gnupg/S.gpg-agent` does not allow `S.gpg-agent.ssh`.
        assert_eq!(
            masks(&f, &[allowed(&["/h/.gnupg/S.gpg-agent"])], &m),
            ["/h/.gnupg/S.gpg-agent.ssh", "/run/user/1/bus"].map(PathBuf::from)
        );
    }

    #[test]
    fn sockets_under_a_declared_link_are_masked_at_the_link_and_allowed_by_either_path() {
        // `~/.gnupg -> /data/gnupg`: found at the host path, masked where the sandbox shows it.
        let mounts = [bind("/data/gnupg", "/h/.gnupg")];
        let m: Vec<&Mount> = mounts.iter().collect();
        let f = [found("/data/gnupg/S.agent", "/h/.gnupg/S.agent")];
        assert_eq!(masks(&f, &[], &m), [PathBuf::from("/h/.gnupg/S.agent")]);
        assert!(masks(&f, &[allowed(&["/h/.gnupg/S.agent"])], &m).is_empty());
        assert!(masks(&f, &[allowed(&["/data/gnupg"])], &m).is_empty());
    }

    #[test]
    fn a_socket_hidden_by_a_deeper_bind_is_not_masked_there() {
        // `/h/p` holds `sub/s`, but `/h/p/sub` shows another directory: no mask lands on it.
        let mounts = [bind("/h/p", "/h/p"), bind("/elsewhere", "/h/p/sub")];
        let m: Vec<&Mount> = mounts.iter().collect();
        assert!(masks(&[found("/h/p/sub/s", "/h/p/sub/s")], &[], &m).is_empty());
        // The same directory bound deeper at its own path shows the same socket: masked.
        let mounts = [bind("/h/p", "/h/p"), bind("/h/p/sub", "/h/p/sub")];
        let m: Vec<&Mount> = mounts.iter().collect();
        assert_eq!(
            masks(&[found("/h/p/sub/s", "/h/p/sub/s")], &[], &m),
            [PathBuf::from("/h/p/sub/s")]
        );
        // Under a tmpfs (nothing bound there) there is nothing to mask.
        let t = Mount::Tmpfs { dest: "/h".into() };
        assert!(masks(&[found("/h/s", "/h/s")], &[], &[&t]).is_empty());
    }

    #[test]
    fn warning_texts() {
        assert_eq!(masked_warning(&[]), None);
        assert_eq!(
            masked_warning(&["/h/.gnupg/S.gpg-agent".into()]).unwrap(),
            "1 Unix socket in declared directories is masked, so the agent cannot connect() to \
             the service behind it outside the sandbox (inside, connect() fails with \
             ECONNREFUSED):\n  /h/.gnupg/S.gpg-agent\nTo allow one, pass --allow-socket \
             /h/.gnupg/S.gpg-agent (allowedSockets in the spec). Sockets created after launch, \
             or re-created by their server during the session, are not masked."
        );
        assert_eq!(
            masked_warning(&["/r/bus".into(), "/r/a b\nc".into()]).unwrap(),
            "2 Unix sockets in declared directories are masked, so the agent cannot connect() \
             to the services behind them outside the sandbox (inside, connect() fails with \
             ECONNREFUSED):\n  /r/bus\n  \"/r/a b\\nc\"\nTo allow one, pass --allow-socket PATH \
             (allowedSockets in the spec). Sockets created after launch, or re-created by their \
             server during the session, are not masked."
        );
        let full = ScanReport::default();
        assert_eq!(unscanned_warning(Path::new("/h/c"), &full), None);
        let cut = ScanReport {
            entries: 200_000,
            truncated: true,
            unreadable: 2,
            ..ScanReport::default()
        };
        assert_eq!(
            unscanned_warning(Path::new("/h/c"), &cut).unwrap(),
            "the scan of declared directory /h/c stopped after 200000 entries, so Unix sockets \
             beyond those were not masked and the agent can connect() to them. Fix: declare the \
             subdirectories you need instead; 2 directories under declared directory /h/c could \
             not be listed, so Unix sockets in them were not masked and the agent can connect() \
             to them by name. Fix: make them readable, or stop declaring /h/c"
        );
        assert_eq!(
            declared_socket_refusal(Path::new("/run/user/1/bus"), "rwFiles"),
            "/run/user/1/bus (rwFiles) is a Unix socket: exposing it lets the agent connect() to \
             the service behind it outside the sandbox (a D-Bus bus, gpg-agent or ssh-agent acts \
             with your powers). Fix: if that is what you want, also pass --allow-socket \
             /run/user/1/bus (allowedSockets); otherwise stop declaring it"
        );
        assert_eq!(
            unused_warning(&allowed(&["~/.gnupg/S.x"])),
            "--allow-socket ~/.gnupg/S.x (allowedSockets) matches no Unix socket in the declared \
             paths at launch, so it changes nothing. Expected a socket (or a directory holding \
             sockets) inside a declared path; declare its directory (--ro DIR / --rw DIR), or \
             drop the entry"
        );
    }
}
