//! Staging a large closure in the namespace holder's mount namespace (see
//! [`crate::plan::stage_closure`]): a tmpfs beside the store directory holding only the
//! closure's entries, each bound from the real one. bwrap, run inside the holder's
//! namespaces, then binds that view onto the store directory once, recursively and read-only.
//!
//! Runs in the holder right after it unshared its user and mount namespaces (it holds every
//! capability there, and only there). Nothing here touches the host's mount table.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The staging list as the launcher writes it: entry names, each followed by a NUL. Pure.
pub fn encode_names(names: &[OsString]) -> Vec<u8> {
    names
        .iter()
        .flat_map(|n| n.as_bytes().iter().copied().chain([0]))
        .collect()
}

/// The names of a staging list; refuses anything that is not a plain entry name (a `/`,
/// `.`, `..` or an empty name would reach outside the directory). Pure.
pub fn decode_names(bytes: &[u8]) -> Result<Vec<OsString>, String> {
    let mut out = Vec::new();
    for raw in bytes.split(|b| *b == 0) {
        if raw.is_empty() {
            continue;
        }
        if raw.contains(&b'/') || raw == b"." || raw == b".." {
            return Err(format!(
                "not a store entry name: {:?}",
                OsStr::from_bytes(raw)
            ));
        }
        out.push(OsStr::from_bytes(raw).to_os_string());
    }
    Ok(out)
}

fn cstr(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("NUL in {}", p.display()))
}

fn mount(
    src: Option<&Path>,
    dest: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let src_c = src.map(cstr).transpose()?;
    let dest_c = cstr(dest)?;
    let fstype_c = fstype.map(|t| CString::new(t).unwrap());
    let data_c = data.map(|d| CString::new(d).unwrap());
    // SAFETY: every pointer is a valid NUL-terminated string or null.
    let r = unsafe {
        libc::mount(
            src_c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            dest_c.as_ptr(),
            fstype_c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            flags,
            data_c
                .as_ref()
                .map_or(std::ptr::null(), |c| c.as_ptr().cast()),
        )
    };
    if r != 0 {
        return Err(format!(
            "mount {} on {}: {}",
            src.map(|s| s.display().to_string())
                .unwrap_or_else(|| fstype.unwrap_or("-").to_string()),
            dest.display(),
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Builds at `view` (an existing empty directory) a tmpfs holding exactly `names`, each the
/// entry of `dir` bound in place (symlinks recreated). Every name must exist in `dir`, which
/// itself is left as it is.
pub fn stage(dir: &Path, names: &[OsString], view: &Path) -> Result<(), String> {
    // Nothing done here may propagate back to the host's namespace.
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    mount(
        Some(Path::new("tmpfs")),
        view,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755"),
    )?;
    for name in names {
        let src = dir.join(name);
        let dest = view.join(name);
        let meta = std::fs::symlink_metadata(&src)
            .map_err(|e| format!("closure path {}: {e}", src.display()))?;
        let ft = meta.file_type();
        let made = if ft.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| format!("{}: {e}", src.display()))?;
            std::os::unix::fs::symlink(target, &dest)
                .map_err(|e| format!("cannot recreate {}: {e}", dest.display()))?;
            continue;
        } else if ft.is_dir() {
            std::fs::create_dir(&dest)
        } else {
            std::fs::File::create(&dest).map(drop)
        };
        made.map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
        mount(Some(&src), &dest, None, libc::MS_BIND | libc::MS_REC, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::testutil::{run_in_fork, wait_code};

    #[test]
    fn names_round_trip_and_escapes_are_refused() {
        let names: Vec<OsString> = vec!["abc-bash".into(), "x y\n".into()];
        assert_eq!(decode_names(&encode_names(&names)).unwrap(), names);
        for bad in [&b"a/b\0"[..], b"..\0", b".\0"] {
            assert!(decode_names(bad).is_err(), "{bad:?}");
        }
    }

    /// In a user + mount namespace of our own: the view holds only the listed entries, with
    /// their real contents, a symlink stays a symlink, and the host's view is untouched.
    #[test]
    fn staging_shows_exactly_the_listed_entries() {
        let t = tempfile::tempdir().unwrap();
        let store = t.path().join("store");
        for d in ["aaa-one", "bbb-two", "ccc-hidden"] {
            std::fs::create_dir_all(store.join(d).join("bin")).unwrap();
            std::fs::write(store.join(d).join("bin/tool"), d).unwrap();
        }
        std::fs::write(store.join("ddd-file"), "file").unwrap();
        std::os::unix::fs::symlink("aaa-one", store.join("eee-link")).unwrap();
        let store2 = store.clone();
        let child = run_in_fork(move || {
            use nix::sched::{CloneFlags, unshare};
            let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
            if unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS).is_err() {
                return 77;
            }
            let _ = std::fs::write("/proc/self/setgroups", "deny");
            let _ = std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"));
            let _ = std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"));
            let names: Vec<OsString> = vec!["aaa-one".into(), "ddd-file".into(), "eee-link".into()];
            let view = store2.with_file_name("view");
            std::fs::create_dir(&view).unwrap();
            if let Err(e) = stage(&store2, &names, &view) {
                eprintln!("{e}");
                return 2;
            }
            let mut seen: Vec<String> = std::fs::read_dir(&view)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            seen.sort();
            if seen != ["aaa-one", "ddd-file", "eee-link"] {
                eprintln!("{seen:?}");
                return 3;
            }
            let ok = std::fs::read_to_string(view.join("aaa-one/bin/tool")).ok()
                == Some("aaa-one".into())
                && std::fs::read_to_string(view.join("ddd-file")).ok() == Some("file".into())
                && std::fs::read_link(view.join("eee-link")).ok() == Some("aaa-one".into())
                && !view.join("ccc-hidden").exists()
                // The directory itself is left as it is.
                && store2.join("ccc-hidden/bin/tool").exists();
            if !ok {
                return 4;
            }
            // An entry that does not exist is an error, not a hole.
            match stage(&store2, &["zzz-missing".into()], &view) {
                Err(e) if e.contains("zzz-missing") => 0,
                _ => 5,
            }
        });
        match wait_code(child, std::time::Duration::from_secs(20)) {
            77 => eprintln!("SKIPPED: no unprivileged user namespaces here"),
            code => assert_eq!(code, 0),
        }
        // The host still sees everything.
        assert!(store.join("ccc-hidden/bin/tool").exists());
    }
}
