//! Issue 10, item 6: launching from `$HOME` (and `--rw ~`) with the state directory at its
//! default place inside it. The launch directory is asked about first; once confirmed, the
//! state directory (every session's logs and sweep specs, this session's own files, which the
//! launcher reads back after the sandbox exits) is an empty read-only mask inside, and the
//! directories above it cannot be renamed to free its place for planted files.
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::guard::{answer_on_tty, without_tty};

/// An earlier session's directory in the state dir `state`, with a log the agent must not read.
fn earlier_session(state: &Path) -> PathBuf {
    let old = state.join("20200101T000000Z-0000001-old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("launch.log"), "SECRET-OLD-LOG\n").unwrap();
    old
}

/// Inside: every way at the state dir `s` (read, write, rename it or a directory above it
/// away), then the allowed counterparts next to it.
fn tamper_script(s: &Path, marker: &Path) -> String {
    let s = s.display();
    let parent = Path::new(&s.to_string()).parent().unwrap().to_path_buf();
    let grand = parent.parent().unwrap().to_path_buf();
    format!(
        r#"s='{s}'
echo "list:[$(ls -A "$s" 2>&1)]"
cat "$s"/*/launch.log 2>/dev/null && echo read-old || echo no-read
touch "$s/planted" 2>/dev/null && echo wrote || echo no-write
mkdir "$s/20991231T000000Z-0000002-x" 2>/dev/null && echo made || echo no-mkdir
mv "$s" "$s.old" 2>/dev/null && echo moved-state || echo no-move-state
mv '{p}' '{p}.old' 2>/dev/null && echo moved-parent || echo no-move-parent
mv '{g}' '{g}.old' 2>/dev/null && echo moved-grand || echo no-move-grand
touch '{p}/other-app' && echo beside-ok
touch '{m}' && echo ran"#,
        p = parent.display(),
        g = grand.display(),
        m = marker.display()
    )
}

const TAMPER_FAILED: &str = "list:[]\nno-read\nno-write\nno-mkdir\nno-move-state\nno-move-parent\nno-move-grand\nbeside-ok\nran\n";

/// The host side after the run: the earlier session untouched, nothing planted, and this
/// session's own files where the launcher wrote them.
fn assert_state_intact(state: &Path, old: &Path) {
    assert_eq!(
        std::fs::read_to_string(old.join("launch.log")).unwrap(),
        "SECRET-OLD-LOG\n"
    );
    assert!(!state.join("planted").exists());
    assert!(!state.with_extension("old").exists());
    let sessions: Vec<PathBuf> = std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_dir() && p != old && !p.file_name().unwrap().to_string_lossy().starts_with('.')
        })
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    for f in ["launch.log", "argv.json", "sweep.json"] {
        assert!(sessions[0].join(f).is_file(), "{f} missing in {sessions:?}");
    }
}

/// `agent-sandbox run [extra…] -- sh -c SCRIPT` from `$HOME`, state dir at its default place.
fn from_home(f: &Fixture, extra: &[&str], script: &str) -> Command {
    let mut c = f.sh(extra, script);
    c.env_remove("XDG_STATE_HOME").current_dir(&f.home);
    c
}

fn default_state(f: &Fixture) -> PathBuf {
    f.home.join(".local/state/agent-sandbox")
}

#[test]
fn launch_from_home_with_the_default_state_dir_asks_then_masks_it() {
    let f = Fixture::new();
    let state = default_state(&f);
    let old = earlier_session(&state);
    let marker = f.home.join("ran");
    let c = from_home(&f, &["--no-network"], &tamper_script(&state, &marker));
    let Some((o, tty)) = answer_on_tty(c, b"y\n") else {
        eprintln!("SKIPPED launch_from_home_with_the_default_state_dir_asks_then_masks_it: no pty");
        return;
    };
    assert!(
        tty.contains(&format!(
            "agent-sandbox: you are launching from your home directory {}; the sandboxed command could read and write all of it: your SSH and GPG keys",
            f.home.display()
        )) && tty.contains("continue? [y/N]"),
        "terminal:\n{tty}"
    );
    assert_eq!(o.code, 0, "{o:?}\nterminal:\n{tty}");
    assert_eq!(o.stdout, TAMPER_FAILED, "{o:?}");
    assert!(marker.exists());
    assert_state_intact(&state, &old);
}

#[test]
fn launch_from_home_is_refused_after_n_or_eof_on_the_terminal() {
    for answer in [&b"n\n"[..], b"\x04"] {
        let f = Fixture::new();
        let marker = f.home.join("ran");
        let c = from_home(
            &f,
            &["--no-network"],
            &format!("touch '{}'", marker.display()),
        );
        let Some((o, tty)) = answer_on_tty(c, answer) else {
            eprintln!("SKIPPED launch_from_home_is_refused_after_n_or_eof_on_the_terminal: no pty");
            return;
        };
        assert_eq!(o.code, 125, "{answer:?}: {o:?}\nterminal:\n{tty}");
        assert!(tty.contains("continue? [y/N]"), "{tty}");
        assert!(
            o.stderr
                .contains("refusing to launch from your home directory"),
            "{o:?}"
        );
        assert!(!marker.exists(), "the command ran");
    }
}

/// Without a terminal: refused with the documented message, before anything is created in
/// `$HOME` (not even the state directory).
#[test]
fn launch_from_home_without_a_terminal_is_refused_with_the_documented_message() {
    let f = Fixture::new();
    let marker = f.home.join("ran");
    let mut c = from_home(
        &f,
        &["--no-network"],
        &format!("touch '{}'", marker.display()),
    );
    without_tty(&mut c);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert_eq!(
        o.stderr,
        format!(
            "agent-sandbox: error: refusing to launch from your home directory {} without confirmation: the sandboxed command could read and write all of it: your SSH and GPG keys, cloud and API tokens, browser profiles, shell history and every project (only the files your shell and other host programs run, such as ~/.bashrc, stay read-only). Fix: cd into a project directory, or run from a terminal and answer y\n",
            f.home.display()
        )
    );
    assert!(!marker.exists(), "the command ran");
    assert!(
        !f.home.join(".local").exists(),
        "created before the refusal"
    );
}

#[test]
fn rw_home_from_a_project_asks_then_masks_the_state_dir() {
    let f = Fixture::new();
    let state = default_state(&f);
    let old = earlier_session(&state);
    let marker = f.home.join("ran");
    let mut c = f.sh(
        &["--no-network", "--rw", "~"],
        &tamper_script(&state, &marker),
    );
    c.env_remove("XDG_STATE_HOME");
    let Some((o, tty)) = answer_on_tty(c, b"y\n") else {
        eprintln!("SKIPPED rw_home_from_a_project_asks_then_masks_the_state_dir: no pty");
        return;
    };
    assert!(
        tty.contains(&format!(
            "agent-sandbox: {} (rwDirs) is your home directory, declared read-write; the sandboxed command could read and write all of it: your SSH and GPG keys",
            f.home.display()
        )),
        "terminal:\n{tty}"
    );
    assert_eq!(o.code, 0, "{o:?}\nterminal:\n{tty}");
    assert_eq!(o.stdout, TAMPER_FAILED, "{o:?}");
    assert_state_intact(&state, &old);

    // Without a terminal: refused, saying what it would expose and how to do without.
    let marker2 = f.home.join("ran2");
    let mut c = f.sh(
        &["--no-network", "--rw", "~"],
        &format!("touch '{}'", marker2.display()),
    );
    c.env_remove("XDG_STATE_HOME");
    without_tty(&mut c);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "agent-sandbox: error: refusing to expose {} (rwDirs) without confirmation: it is your home directory, declared read-write, so the sandboxed command could read and write all of it",
        f.home.display()
        )) && o.stderr.contains("Fix: declare the directories the agent needs instead"),
        "{o:?}"
    );
    assert!(!marker2.exists(), "the command ran");
}

#[test]
fn rw_root_is_refused_saying_what_it_exposes() {
    let f = Fixture::new();
    let o = run(f.sh(&["--no-network", "--rw", "/"], "true"));
    assert_eq!(o.code, 125, "{o:?}");
    assert_eq!(
        o.stderr,
        "agent-sandbox: error: / (rwDirs) cannot be exposed: it is the whole machine; every file you may read (your home with its SSH keys and tokens, other users' readable files) and every file you may write would be readable and writable inside the sandbox. Fix: declare the specific directories the agent needs (e.g. --rw ~/proj --ro ~/.config/tool)\n"
    );
    // Above $HOME, read-write: refused too (the launch directory's rule).
    let above = f.home.parent().unwrap().display().to_string();
    let o = run(f.sh(&["--no-network", "--rw", &above], "true"));
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "{above} (rwDirs) cannot be exposed read-write: it contains your home directory"
        )),
        "{o:?}"
    );
}

/// `XDG_STATE_HOME` inside the launch directory: no question (a project directory), the state
/// directory masked all the same.
#[test]
fn a_state_dir_inside_the_launch_directory_is_masked() {
    let f = Fixture::new();
    let xdg = f.proj.join(".state");
    let state = xdg.join("agent-sandbox");
    let old = earlier_session(&state);
    let marker = f.proj.join("ran");
    let mut c = f.sh(&["--no-network"], &tamper_script(&state, &marker));
    c.env("XDG_STATE_HOME", &xdg);
    without_tty(&mut c);
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, TAMPER_FAILED, "{o:?}");
    assert_state_intact(&state, &old);

    // A declared path inside the state directory is refused.
    let mut c = f.sh(
        &["--no-network", "--ro", &old.display().to_string()],
        "true",
    );
    c.env("XDG_STATE_HOME", &xdg);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "lies inside agent-sandbox's state directory {}",
            state.display()
        )),
        "{o:?}"
    );
}
