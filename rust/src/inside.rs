//! What a path inside the sandbox shows, read off the plan's mounts on the host: for
//! `--dry-run`'s check that the command exists inside, before anything is started. Reads the
//! host's filesystem (metadata and links only), writes nothing.

use std::path::{Component, Path, PathBuf};

use crate::plan::{Mount, Plan};

/// Links followed before giving up, as the kernel's MAXSYMLINKS.
const MAX_HOPS: usize = 40;

/// The host file that `inside` shows in the sandbox, following links as the sandbox would see
/// them (an absolute link target is a path inside). `None` where the sandbox has nothing: no
/// mount, an empty tmpfs, a dangling link. The mount on top is the last one over the path.
pub fn host_file(mounts: &[&Mount], inside: &Path) -> Option<PathBuf> {
    let mut path = lexical(inside)?;
    'hop: for _ in 0..MAX_HOPS {
        let m = mounts.iter().rev().find(|m| path.starts_with(m.dest()))?;
        let rest = path.strip_prefix(m.dest()).ok()?.to_path_buf();
        let src = match m {
            Mount::RoBind { src, .. } | Mount::Bind { src, .. } | Mount::BindFd { src, .. } => src,
            Mount::Symlink { target, dest } => {
                path = lexical(&dest.parent()?.join(target).join(rest))?;
                continue 'hop;
            }
            // Fresh, empty file systems: only their top exists.
            _ => return rest.as_os_str().is_empty().then(|| PathBuf::from("/")),
        };
        let mut host = src.clone();
        let mut seen = m.dest().to_path_buf();
        let parts: Vec<_> = rest.components().collect();
        for (i, c) in parts.iter().enumerate() {
            host.push(c);
            seen.push(c);
            let meta = std::fs::symlink_metadata(&host).ok()?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&host).ok()?;
                let mut next = seen.parent()?.join(target);
                next.extend(&parts[i + 1..]);
                path = lexical(&next)?;
                continue 'hop;
            }
        }
        return Some(host);
    }
    None
}

/// `path` absolute with `.` and `..` resolved lexically (a link's `..` was resolved already,
/// since links are followed one at a time from the top).
fn lexical(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::Prefix(_) => return None,
        }
    }
    path.is_absolute().then_some(out)
}

fn executable(host: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(host).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The warning when the plan's command does not resolve to an executable file inside: a name
/// is looked up on the sandbox's `PATH`, a path relative to the launch directory.
pub fn command_warning(plan: &Plan) -> Option<String> {
    let name = plan.command.first()?;
    let mounts = plan.bare_mounts();
    let mounts: Vec<&Mount> = mounts.iter().collect();
    let path_var = plan.env.get("PATH").map(String::as_str).unwrap_or("");
    let name_path = Path::new(name);
    let found = if name_path.components().count() > 1 || name_path.is_absolute() {
        host_file(&mounts, &plan.cwd.join(name_path)).is_some_and(|h| executable(&h))
    } else {
        path_var
            .split(':')
            .filter(|d| d.starts_with('/'))
            .any(|d| host_file(&mounts, &Path::new(d).join(name)).is_some_and(|h| executable(&h)))
    };
    (!found).then(|| {
        format!(
            "command not found inside the sandbox: {} (PATH={path_var}), so the launch would fail. Fix: add the package providing it (allowedPackages), or use an absolute path that is exposed in the sandbox (--ro DIR)",
            crate::symlinks::shown(name_path)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    #[test]
    fn paths_are_followed_through_binds_links_and_the_mounts_on_top() {
        let tmp = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(h.join("usr/bin")).unwrap();
        std::fs::create_dir_all(h.join("etc/alt")).unwrap();
        std::fs::write(h.join("usr/bin/real"), "").unwrap();
        // /usr/bin/tool -> /etc/alt/tool -> /usr/bin/real, as Debian's alternatives.
        symlink("/etc/alt/tool", h.join("usr/bin/tool")).unwrap();
        symlink("/usr/bin/real", h.join("etc/alt/tool")).unwrap();
        symlink("/nowhere", h.join("usr/bin/dangling")).unwrap();
        symlink("../bin/real", h.join("usr/bin/rel")).unwrap();
        let usr = Mount::RoBind {
            src: h.join("usr"),
            dest: "/usr".into(),
        };
        let etc = Mount::RoBind {
            src: h.join("etc/alt"),
            dest: "/etc/alt".into(),
        };
        let bin = Mount::Symlink {
            target: "usr/bin".into(),
            dest: "/bin".into(),
        };
        let tmp_over = Mount::Tmpfs {
            dest: "/usr/bin".into(),
        };
        let real = Some(h.join("usr/bin/real"));
        let at = |ms: &[&Mount], p: &str| host_file(ms, Path::new(p));
        assert_eq!(at(&[&usr, &etc, &bin], "/bin/tool"), real);
        assert_eq!(at(&[&usr, &etc, &bin], "/usr/bin/rel"), real);
        assert_eq!(at(&[&usr, &etc, &bin], "/usr/./bin/../bin/real"), real);
        // Without /etc/alt inside, the link chain dangles there.
        assert_eq!(at(&[&usr, &bin], "/bin/tool"), None);
        assert_eq!(at(&[&usr], "/usr/bin/dangling"), None);
        assert_eq!(at(&[&usr], "/opt/x"), None);
        // A later mount over the directory hides what the bind showed.
        assert_eq!(at(&[&usr, &tmp_over], "/usr/bin/real"), None);
        // A link to itself ends.
        symlink("/usr/loop", h.join("usr/loop")).unwrap();
        assert_eq!(at(&[&usr], "/usr/loop"), None);
        let mode = std::fs::metadata(h.join("usr/bin/real"))
            .unwrap()
            .permissions();
        assert_eq!(mode.mode() & 0o111, 0);
        assert!(!executable(&h.join("usr/bin/real")));
    }
}
