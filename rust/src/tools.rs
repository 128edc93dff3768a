//! Where the launcher finds the programs it runs *outside* the sandbox: bubblewrap and pasta.
//! They run with the caller's rights (root's, for a root launch), so they come only from fixed
//! system directories or from an explicit `AGENT_SANDBOX_*` override (what the Nix
//! wrapper pins), never through `PATH`: an activated `.venv/bin`, `node_modules/.bin` or a
//! `~/.cargo/bin` the agent can write would otherwise let it plant a `bwrap` that the next
//! launch runs unconfined. Whatever is chosen must also lie outside every path the sandbox
//! can write (an override into the project is refused too).
//!
//! The same rule tells the caller when its own `PATH` holds such a directory: programs the
//! agent plants there run on the host the next time their name is typed.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Searched in this order. Root-owned on every distribution; the last is NixOS's system
/// profile.
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/bin",
    "/sbin",
    "/run/current-system/sw/bin",
];

/// A program the launcher runs on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    pub name: &'static str,
    /// The variable that names it explicitly.
    pub env: &'static str,
    /// How to install it, for the error message.
    pub install: &'static str,
}

pub const BWRAP: Tool = Tool {
    name: "bwrap",
    env: "AGENT_SANDBOX_BWRAP",
    install: "install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap)",
};
pub const PASTA: Tool = Tool {
    name: "pasta",
    env: "AGENT_SANDBOX_PASTA",
    install: "install passt (Debian/Ubuntu: apt install passt; Fedora: dnf install passt), or use --no-network",
};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ToolError {
    #[error(
        "{} was not found in {dirs}. agent-sandbox runs it outside the sandbox, so it does not look it up through PATH. Fix: {}, or set {} to its absolute path",
        .tool.name, .tool.install, .tool.env, dirs = SYSTEM_DIRS.join(", ")
    )]
    NotFound { tool: Tool },
    #[error(
        "{}={given:?} is not an absolute path to an existing file. Fix: set {} to the absolute path of {}, or unset it to use {}",
        .tool.env, .tool.env, .tool.name, SYSTEM_DIRS.join(", ")
    )]
    BadOverride { tool: Tool, given: String },
    #[error(
        "{} would be taken from {}, which lies in {}, a path the sandbox can write: the agent could replace it, and it runs outside the sandbox. Fix: install {} in a system directory ({}) or point {} at a copy outside every writable path",
        .tool.name, .path.display(), .writable.display(), .tool.name, SYSTEM_DIRS.join(", "), .tool.env
    )]
    Writable {
        tool: Tool,
        path: PathBuf,
        writable: PathBuf,
    },
}

/// Finds `tool`: the override variable if set, else the first of [`SYSTEM_DIRS`] that has it.
/// `writable` lists what the sandbox can write (canonical).
pub fn locate(tool: &Tool, writable: &[PathBuf]) -> Result<PathBuf, ToolError> {
    let given = std::env::var_os(tool.env);
    choose(tool, given.as_deref(), writable, |p| {
        let canonical = std::fs::canonicalize(p).ok()?;
        canonical.is_file().then_some(canonical)
    })
}

/// The decision of [`locate`], with the filesystem behind `existing_file` (the canonical path
/// of the candidate if it is an existing file). Pure given that.
///
/// The tool is run by the path it was found at, not by its canonical one: pasta is a link to
/// `passt` and behaves by the name it is called with. The canonical target is what must lie
/// outside the writable paths.
pub fn choose(
    tool: &Tool,
    given: Option<&OsStr>,
    writable: &[PathBuf],
    existing_file: impl Fn(&Path) -> Option<PathBuf>,
) -> Result<PathBuf, ToolError> {
    let found = match given {
        Some(p) => {
            let bad = || ToolError::BadOverride {
                tool: *tool,
                given: p.to_string_lossy().into_owned(),
            };
            let path = Path::new(p);
            // Fail closed: a relative override would be looked up from wherever we run.
            if !path.is_absolute() {
                return Err(bad());
            }
            let real = existing_file(path).ok_or_else(bad)?;
            (path.to_path_buf(), real)
        }
        None => SYSTEM_DIRS
            .iter()
            .find_map(|d| {
                let candidate = Path::new(d).join(tool.name);
                existing_file(&candidate).map(|real| (candidate, real))
            })
            .ok_or(ToolError::NotFound { tool: *tool })?,
    };
    let (path, real) = found;
    // Fail closed: a tool the agent can replace would run unconfined at the next launch.
    if let Some(root) = writable
        .iter()
        .find(|w| real.starts_with(w) || path.starts_with(w))
    {
        return Err(ToolError::Writable {
            tool: *tool,
            path,
            writable: root.clone(),
        });
    }
    Ok(path)
}

/// The entries of the caller's `PATH` that lie in a path the sandbox can write, with the
/// writable path, in `PATH` order. `canonical` resolves an entry (None: it does not exist).
pub fn writable_path_entries(
    path: &OsStr,
    writable: &[PathBuf],
    canonical: impl Fn(&Path) -> Option<PathBuf>,
) -> Vec<(PathBuf, PathBuf)> {
    let mut out: Vec<(PathBuf, PathBuf)> = Vec::new();
    for entry in std::env::split_paths(path) {
        // An empty or relative entry means a directory relative to wherever the shell is,
        // the project included.
        let resolved = if entry.is_absolute() {
            canonical(&entry)
        } else {
            None
        };
        let hit = match &resolved {
            Some(dir) => writable.iter().find(|w| dir.starts_with(w)),
            None if !entry.is_absolute() => writable.first(),
            None => None,
        };
        if let Some(w) = hit {
            if !out.iter().any(|(e, _)| *e == entry) {
                out.push((entry, w.clone()));
            }
        }
    }
    out
}

/// The warning for [`writable_path_entries`], or None.
pub fn path_warning(entries: &[(PathBuf, PathBuf)]) -> Option<String> {
    if entries.is_empty() {
        return None;
    }
    let list = entries
        .iter()
        .map(|(e, w)| {
            if e.as_os_str().is_empty() || !e.is_absolute() {
                format!(
                    "{:?} (relative: the current directory)",
                    e.display().to_string()
                )
            } else if e == w {
                e.display().to_string()
            } else {
                format!("{} (in {})", e.display(), w.display())
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "your PATH holds {list}, which the sandbox can write: a program the agent plants there runs on your host, unconfined, the next time you type its name. Fix: take it off PATH (deactivate the venv, drop node_modules/.bin), or do not declare it read-write. agent-sandbox itself never looks up its tools through PATH"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn fs(files: &[&str]) -> impl Fn(&Path) -> Option<PathBuf> {
        let set: BTreeSet<PathBuf> = files.iter().map(PathBuf::from).collect();
        move |p: &Path| match p.to_str() {
            // A system link into a writable place is judged by its target.
            Some("/usr/bin/pasta") => Some(PathBuf::from("/usr/bin/passt")),
            Some("/usr/sbin/ip") => Some(PathBuf::from("/home/u/proj/ip")),
            _ => set.contains(p).then(|| p.to_path_buf()),
        }
    }

    #[test]
    fn system_dirs_only_never_path() {
        let files = fs(&["/home/u/proj/.venv/bin/bwrap", "/usr/bin/bwrap"]);
        let got = choose(&BWRAP, None, &[], files).unwrap();
        assert_eq!(got, PathBuf::from("/usr/bin/bwrap"));
        // Run by the name it was found at (pasta is a link to passt).
        let got = choose(&PASTA, None, &[], fs(&[])).unwrap();
        assert_eq!(got, PathBuf::from("/usr/bin/pasta"));
        let w = [PathBuf::from("/home/u/proj")];
        let e = choose(&PASTA, Some("/usr/sbin/ip".as_ref()), &w, fs(&[])).unwrap_err();
        assert!(matches!(e, ToolError::Writable { .. }), "{e}");
        assert_eq!(
            choose(&BWRAP, None, &[], fs(&["/home/u/bin/bwrap"])),
            Err(ToolError::NotFound { tool: BWRAP })
        );
    }

    #[test]
    fn overrides_are_absolute_existing_and_outside_writable_paths() {
        let w = vec![PathBuf::from("/home/u/proj")];
        let files = fs(&["/nix/store/x-bwrap/bin/bwrap", "/home/u/proj/bin/bwrap"]);
        let got = choose(
            &BWRAP,
            Some("/nix/store/x-bwrap/bin/bwrap".as_ref()),
            &w,
            &files,
        );
        assert_eq!(got.unwrap(), PathBuf::from("/nix/store/x-bwrap/bin/bwrap"));
        let e = choose(&BWRAP, Some("bin/bwrap".as_ref()), &w, &files).unwrap_err();
        assert_eq!(
            e.to_string(),
            "AGENT_SANDBOX_BWRAP=\"bin/bwrap\" is not an absolute path to an existing file. Fix: set AGENT_SANDBOX_BWRAP to the absolute path of bwrap, or unset it to use /usr/bin, /usr/sbin, /bin, /sbin, /run/current-system/sw/bin"
        );
        let e = choose(&BWRAP, Some("/home/u/proj/bin/bwrap".as_ref()), &w, &files).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bwrap would be taken from /home/u/proj/bin/bwrap, which lies in /home/u/proj, a path the sandbox can write: the agent could replace it, and it runs outside the sandbox. Fix: install bwrap in a system directory (/usr/bin, /usr/sbin, /bin, /sbin, /run/current-system/sw/bin) or point AGENT_SANDBOX_BWRAP at a copy outside every writable path"
        );
    }

    #[test]
    fn not_found_names_the_dirs_and_the_fix() {
        assert_eq!(
            ToolError::NotFound { tool: PASTA }.to_string(),
            "pasta was not found in /usr/bin, /usr/sbin, /bin, /sbin, /run/current-system/sw/bin. agent-sandbox runs it outside the sandbox, so it does not look it up through PATH. Fix: install passt (Debian/Ubuntu: apt install passt; Fedora: dnf install passt), or use --no-network, or set AGENT_SANDBOX_PASTA to its absolute path"
        );
    }

    #[test]
    fn writable_path_entries_in_order() {
        let w = vec![PathBuf::from("/h/proj"), PathBuf::from("/h/.cargo")];
        let canon = |p: &Path| {
            let s = p.to_str().unwrap();
            match s {
                "/h/link-to-proj/bin" => Some(PathBuf::from("/h/proj/bin")),
                "/missing" => None,
                _ => Some(p.to_path_buf()),
            }
        };
        let path =
            "/usr/bin:/h/proj/.venv/bin:/h/.cargo/bin:/h/link-to-proj/bin:/missing::/h/.cargo/bin";
        let got = writable_path_entries(path.as_ref(), &w, canon);
        let want: Vec<(PathBuf, PathBuf)> = [
            ("/h/proj/.venv/bin", "/h/proj"),
            ("/h/.cargo/bin", "/h/.cargo"),
            ("/h/link-to-proj/bin", "/h/proj"),
            ("", "/h/proj"),
        ]
        .iter()
        .map(|(a, b)| (PathBuf::from(a), PathBuf::from(b)))
        .collect();
        assert_eq!(got, want);
        let msg = path_warning(&got).unwrap();
        assert!(
            msg.starts_with(
                "your PATH holds /h/proj/.venv/bin (in /h/proj), /h/.cargo/bin (in /h/.cargo), /h/link-to-proj/bin (in /h/proj), \"\" (relative: the current directory), which the sandbox can write"
            ),
            "{msg}"
        );
        assert_eq!(path_warning(&[]), None);
    }
}
