//! Per-session state: one private directory per launch under `$XDG_STATE_HOME/agent-sandbox`,
//! the newest 25 kept, nothing in the shared `/tmp`.
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::*;

/// The session directories (the shared `.identity-*` directories aside).
fn sessions(f: &Fixture) -> Vec<PathBuf> {
    entries(f, false)
}

fn entries(f: &Fixture, identity: bool) -> Vec<PathBuf> {
    let base = f.state.join("agent-sandbox");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&base)
        .unwrap_or_else(|e| panic!("read {}: {e}", base.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(".identity-") == identity
        })
        .collect();
    v.sort();
    v
}

/// The identity files (passwd, group, masks, resolv.conf) are written once per user and
/// network mode, in a private directory beside the sessions, and reused: the next launch
/// creates no new one, and one whose file was deleted is rebuilt.
#[test]
fn identity_files_are_shared_private_and_rebuilt_when_damaged() {
    let f = Fixture::new();
    let passwd = "head -n1 /etc/passwd; wc -c < /proc/cmdline";
    let first = ok(f.sh(&["--no-network"], passwd));
    let ids = entries(&f, true);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let id = &ids[0];
    assert_eq!(mode(id), 0o700, "{}", id.display());
    for file in ["passwd", "group", "empty", "boot_id", "resolv.conf"] {
        assert_eq!(mode(&id.join(file)), 0o600, "{file}");
    }
    assert!(!sessions(&f)[0].join("passwd").exists());
    assert_eq!(ok(f.sh(&["--no-network"], passwd)), first);
    assert_eq!(entries(&f, true), ids);
    std::fs::remove_file(id.join("passwd")).unwrap();
    assert_eq!(ok(f.sh(&["--no-network"], passwd)), first);
    assert!(id.join("passwd").is_file());
    assert!(first.starts_with("sandbox:x:"), "{first}");
    // Filtered mode needs the same files (no DNS inside either): the same directory.
    let _ = ok(f.sh(&["--allow-domain", "example.com"], "true"));
    assert_eq!(
        entries(&f, true).len(),
        1,
        "blocked and filtered share the empty resolv.conf"
    );
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_session_leaves_a_private_dir_with_the_plan_and_argv() {
    let f = Fixture::new();
    // The session dir is not visible from inside.
    let script = format!(
        "ls '{}' 2>/dev/null && echo STATE-VISIBLE; echo done",
        f.state.display()
    );
    assert_eq!(ok(f.sh(&["--no-network"], &script)), "done\n");
    let dirs = sessions(&f);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = &dirs[0];
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    assert_eq!(mode(&f.state.join("agent-sandbox")), 0o700);
    assert!(
        dir.file_name().unwrap().to_str().unwrap().ends_with("-sh"),
        "{}",
        dir.display()
    );

    let log = std::fs::read_to_string(dir.join("launch.log")).unwrap();
    assert!(
        log.contains(&format!("  rw      {}", f.proj.display())),
        "{log}"
    );
    assert!(log.contains("network: blocked"), "{log}");
    assert_eq!(mode(&dir.join("launch.log")), 0o600);

    let argv: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("argv.json")).unwrap())
            .expect("argv.json is a JSON array of strings");
    assert!(argv[0].ends_with("bwrap"), "{argv:?}");
    assert!(argv.contains(&"--unshare-pid".to_string()), "{argv:?}");
    assert_eq!(
        &argv[argv.len() - 3..],
        &["sh".to_string(), "-c".to_string(), script],
        "{argv:?}"
    );
    assert_eq!(mode(&dir.join("argv.json")), 0o600);
}

#[test]
fn only_the_newest_25_sessions_are_kept() {
    let f = Fixture::new();
    let mut last_pid = 0;
    for _ in 0..27 {
        let mut c = f.cmd();
        c.args(["run", "--no-network", "--", "true"]);
        let child = c.spawn().unwrap();
        last_pid = child.id();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let dirs = sessions(&f);
    assert_eq!(dirs.len(), 25, "{dirs:?}");
    let suffix = format!("-{last_pid:07}-true");
    assert!(
        dirs.iter().any(|d| d.to_str().unwrap().ends_with(&suffix)),
        "the newest session ({suffix}) was rotated away: {dirs:?}"
    );
}

/// Regression: rotation ran after the new session dir was created and sorted only by name, so
/// with 25 dirs named later than now (a clock that was ahead, or moved back) it deleted the new
/// dir itself and every launch failed with "cannot write …/passwd".
#[test]
fn session_dirs_from_the_future_do_not_break_launching() {
    let f = Fixture::new();
    let base = f.state.join("agent-sandbox");
    for i in 0..25 {
        std::fs::create_dir_all(base.join(format!("29991231T0000{i:02}Z-1-old"))).unwrap();
    }
    let mut c = f.cmd();
    c.args(["run", "--no-network", "--", "echo", "hi"]);
    assert_eq!(ok(c), "hi\n");
}

fn tmp_entries() -> BTreeSet<String> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("agent-sandbox") || n.contains("bwrap") || n.contains("sandbox"))
        .collect()
}

#[test]
fn nothing_is_created_in_the_host_tmp() {
    let f = Fixture::new();
    let own_tmp = f.root().join("tmpdir");
    std::fs::create_dir(&own_tmp).unwrap();
    let probe = format!("as-inside-only-{}", std::process::id());
    let before = tmp_entries();
    for extra in [&["--no-network"][..], &[][..], &["--dry-run"][..]] {
        let mut c = f.sh(extra, &format!("echo x > /tmp/{probe}; echo ok"));
        c.env("TMPDIR", &own_tmp);
        let o = run(c);
        assert_eq!(o.code, 0, "{o:?}");
    }
    let after = tmp_entries();
    let new: Vec<&String> = after.difference(&before).collect();
    assert!(new.is_empty(), "created in /tmp: {new:?}");
    assert!(!Path::new("/tmp").join(&probe).exists());
    let in_tmpdir: Vec<_> = std::fs::read_dir(&own_tmp).unwrap().collect();
    assert!(in_tmpdir.is_empty(), "created in $TMPDIR: {in_tmpdir:?}");
}

/// Regression (review): a state dir reached through a symlink into the project slipped past the
/// check that keeps the session files out of every writable bind, and the agent could rewrite
/// the identity files bound into its own (and the next) session. Since issue 10, item 6 the
/// state dir is masked wherever a bind shows it (then refused): found through its real path.
#[test]
fn a_symlinked_state_dir_inside_the_project_is_masked() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.proj.join("statedir")).unwrap();
    let link = f.home.join("st");
    std::os::unix::fs::symlink(f.proj.join("statedir"), &link).unwrap();
    let state = f.proj.join("statedir/agent-sandbox");
    let marker = f.proj.join("ran");
    let script = format!(
        "ls -A {s}; for x in {s}/.identity-*/passwd {s}/planted; do echo x > $x 2>/dev/null && echo WROTE; done; touch {m}",
        s = state.display(),
        m = marker.display()
    );
    let mut c = f.sh(&["--no-network"], &script);
    c.env("XDG_STATE_HOME", &link);
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "", "{o:?}");
    assert!(marker.exists());
    assert!(!state.join("planted").exists());
    let identity: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".identity-")
        })
        .collect();
    assert_eq!(identity.len(), 1, "{identity:?}");
    assert!(
        std::fs::read_to_string(identity[0].join("passwd"))
            .unwrap()
            .starts_with("sandbox:x:"),
        "rewritten"
    );
}
