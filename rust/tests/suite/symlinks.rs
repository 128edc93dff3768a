//! Symlinks in declared paths: followed only to places the sandbox exposes anyway, so a link an
//! agent planted in an earlier session cannot widen what the next session sees.
use std::os::unix::fs::symlink;
use std::path::Path;

use crate::common::*;

const KEY: &str = "PRIVATE-KEY-MARKER-0b1c\n";

/// Plants `~/.ssh/id_ed25519` on the host; returns its path.
fn plant_key(f: &Fixture) -> std::path::PathBuf {
    f.write("home/.ssh/id_ed25519", KEY)
}

fn warnings(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.starts_with("agent-sandbox: error:"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_declared_file_linked_to_an_ssh_key_is_left_out_with_a_warning() {
    let f = Fixture::new();
    let key = plant_key(&f);
    let link = f.home.join(".claude.json");
    symlink(&key, &link).unwrap();
    let script = "cat ~/.claude.json 2>/dev/null; \
                  test -e ~/.claude.json && echo exposed || echo absent";
    for flag in ["--rw", "--ro"] {
        let o = run(f.sh(&["--no-network", flag, "~/.claude.json"], script));
        assert_eq!(o.code, 0, "{flag}: {o:?}");
        assert!(
            !o.stdout.contains("PRIVATE-KEY"),
            "{flag}: key leaked {o:?}"
        );
        assert_eq!(o.stdout, "absent\n", "{flag}: {o:?}");
        let w = warnings(&o.stderr);
        assert!(
            w.contains(&format!(
                "agent-sandbox: warning: {} is a symlink to {}",
                link.display(),
                key.display()
            )),
            "{flag}: no warning naming the link: {o:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(&key).unwrap(), KEY);

    // Declaring the target itself (what the warning suggests) makes the link resolve.
    let out = ok(f.sh(
        &[
            "--no-network",
            "--ro",
            "~/.claude.json",
            "--ro",
            key.to_str().unwrap(),
        ],
        "cat ~/.claude.json",
    ));
    assert_eq!(out, KEY);
}

#[test]
fn a_regular_declared_file_is_exposed() {
    // The allowed counterpart of the test above: no link, no warning.
    let f = Fixture::new();
    f.write("home/.claude.json", "{\"ok\":true}\n");
    let o = run(f.sh(
        &["--no-network", "--rw", "~/.claude.json"],
        "cat ~/.claude.json",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "{\"ok\":true}\n");
    assert!(!o.stderr.contains("symlink"), "{o:?}");
}

#[test]
fn a_declared_dir_linked_into_the_project_works() {
    let f = Fixture::new();
    f.write("home/proj/claude-data/settings.json", "{}\n");
    symlink(f.proj.join("claude-data"), f.home.join(".claude")).unwrap();
    let o = run(f.sh(
        &["--no-network", "--rw", "~/.claude"],
        "cat ~/.claude/settings.json && echo new > ~/.claude/new && echo ok",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "{}\nok\n");
    assert!(!o.stderr.contains("symlink"), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(f.proj.join("claude-data/new")).unwrap(),
        "new\n"
    );
}

#[test]
fn a_link_in_a_parent_component_to_an_unexposed_place_is_left_out() {
    let f = Fixture::new();
    let elsewhere = f.root().join("elsewhere");
    f.write("elsewhere/tool/secret", "ELSEWHERE-SECRET\n");
    symlink(&elsewhere, f.home.join(".config")).unwrap();
    let script = "cat ~/.config/tool/secret 2>/dev/null; \
                  test -e ~/.config/tool && echo exposed || echo absent";
    let o = run(f.sh(&["--no-network", "--ro", "~/.config/tool"], script));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stdout.contains("ELSEWHERE-SECRET"), "{o:?}");
    assert_eq!(o.stdout, "absent\n", "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "{} resolves through the symlink {}",
            f.home.join(".config/tool").display(),
            f.home.join(".config").display()
        )),
        "no warning naming the link: {o:?}"
    );

    // Once the target is declared too, the link leads to an exposed place and is followed.
    let out = ok(f.sh(
        &[
            "--no-network",
            "--ro",
            "~/.config/tool",
            "--ro",
            elsewhere.to_str().unwrap(),
        ],
        "cat ~/.config/tool/secret",
    ));
    assert_eq!(out, "ELSEWHERE-SECRET\n");
}

#[test]
fn a_nested_link_to_ssh_dangles_inside_and_is_listed() {
    let f = Fixture::new();
    plant_key(&f);
    std::fs::create_dir_all(f.home.join(".claude/a/b/c")).unwrap();
    let nested = f.home.join(".claude/a/b/c/keys");
    symlink(f.home.join(".ssh"), &nested).unwrap();
    // A nested link into the project resolves inside, and is not listed.
    std::fs::write(f.proj.join("notes"), "project notes\n").unwrap();
    let fine = f.home.join(".claude/a/b/c/project");
    symlink(&f.proj, &fine).unwrap();
    let script = "cat ~/.claude/a/b/c/keys/id_ed25519 2>/dev/null; \
                  ls ~/.claude/a/b/c/keys/ 2>/dev/null; \
                  test -L ~/.claude/a/b/c/keys && ! test -e ~/.claude/a/b/c/keys && echo dangling; \
                  cat ~/.claude/a/b/c/project/notes";
    let o = run(f.sh(&["--no-network", "--rw", "~/.claude"], script));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stdout.contains("PRIVATE-KEY"), "key leaked: {o:?}");
    assert_eq!(o.stdout, "dangling\nproject notes\n", "{o:?}");
    let listed = format!("{} -> {}", nested.display(), f.home.join(".ssh").display());
    assert!(o.stderr.contains(&listed), "{listed} not listed: {o:?}");
    assert!(
        !o.stderr.contains(&fine.display().to_string()),
        "a link into the project was listed: {o:?}"
    );
}

/// The planted-in-one-session scenario end to end: session 1 may write `~/.claude` and plants a
/// link to the key (which it cannot see); session 2 declares the link.
#[test]
fn a_link_planted_in_one_session_does_not_expose_the_key_in_the_next() {
    let f = Fixture::new();
    plant_key(&f);
    std::fs::create_dir(f.home.join(".claude")).unwrap();
    let out = ok(f.sh(
        &["--no-network", "--rw", "~/.claude"],
        "ln -s \"$HOME/.ssh/id_ed25519\" ~/.claude/creds && \
         (test -e ~/.ssh/id_ed25519 && echo key-visible || echo key-hidden)",
    ));
    assert_eq!(out, "key-hidden\n");
    let creds = f.home.join(".claude/creds");
    assert!(
        std::fs::symlink_metadata(&creds)
            .unwrap()
            .file_type()
            .is_symlink(),
        "session 1 could not plant the link on the host"
    );

    // Session 2 declares the planted link itself.
    let o = run(f.sh(
        &["--no-network", "--ro", "~/.claude/creds"],
        "cat ~/.claude/creds 2>/dev/null; echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "done\n", "key leaked: {o:?}");
    assert!(
        o.stderr
            .contains(&format!("{} is a symlink to", creds.display())),
        "{o:?}"
    );

    // Session 3 declares the directory again: the nested link dangles.
    let o = run(f.sh(
        &["--no-network", "--rw", "~/.claude"],
        "cat ~/.claude/creds 2>/dev/null; echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "done\n", "key leaked: {o:?}");
    assert!(o.stderr.contains(&creds.display().to_string()), "{o:?}");
}

/// A read-write declaration of a link must not turn a read-only target writable: the agent
/// plants `~/.claude/settings.json -> ~/.gitconfig` while `~/.claude` is writable; a later
/// session declares the file read-write and `~/.gitconfig` read-only.
#[test]
fn a_rw_link_to_a_read_only_declared_file_does_not_make_it_writable() {
    let f = Fixture::new();
    let gitconfig = f.write("home/.gitconfig", "[user]\n\tname = Me\n");
    std::fs::create_dir(f.home.join(".claude")).unwrap();
    symlink(&gitconfig, f.home.join(".claude/settings.json")).unwrap();
    let o = run(f.sh(
        &[
            "--no-network",
            "--ro",
            "~/.gitconfig",
            "--rw",
            "~/.claude/settings.json",
        ],
        "cat ~/.gitconfig; \
         (printf '[core]\\n\\thooksPath = /tmp/evil\\n' >> ~/.claude/settings.json) 2>/dev/null \
           && echo WROTE-THROUGH-LINK; \
         (echo x >> ~/.gitconfig) 2>/dev/null && echo WROTE; echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        std::fs::read_to_string(&gitconfig).unwrap(),
        "[user]\n\tname = Me\n",
        "the read-only ~/.gitconfig was written through the rw-declared link: {o:?}"
    );
    assert_eq!(o.stdout, "[user]\n\tname = Me\ndone\n", "{o:?}");
}

/// Same mode escalation with the protected git hooks as the target.
#[test]
fn a_rw_link_to_the_git_hooks_does_not_make_them_writable() {
    let f = Fixture::new();
    // Create the repository with the sandbox's own git, so the host needs none.
    let o = run(f.sh(
        &["--no-network"],
        "command -v git >/dev/null || exit 99; git init -q . && echo init-ok",
    ));
    if o.code == 99 {
        eprintln!("SKIPPED a_rw_link_to_the_git_hooks_does_not_make_them_writable: no git");
        return;
    }
    assert_eq!(o.stdout, "init-ok\n", "{o:?}");
    let hooks = f.proj.join(".git/hooks");
    assert!(hooks.is_dir(), "{o:?}");
    std::fs::create_dir(f.home.join(".claude")).unwrap();
    symlink(&hooks, f.home.join(".claude/hooks")).unwrap();
    let o = run(f.sh(
        &["--no-network", "--rw", "~/.claude/hooks"],
        "(printf '#!/bin/sh\\necho pwned\\n' > ~/.claude/hooks/pre-commit) 2>/dev/null \
           && echo WROTE-THROUGH-LINK; \
         (echo x > .git/hooks/post-commit) 2>/dev/null && echo WROTE; echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        !hooks.join("pre-commit").exists(),
        "a git hook was planted through the rw-declared link: {o:?}"
    );
    assert!(!hooks.join("post-commit").exists(), "{o:?}");
    assert_eq!(o.stdout, "done\n", "{o:?}");
}

#[test]
fn a_dangling_declared_link_is_reported_as_missing() {
    // A dangling declared link is reported as missing, not silently dropped.
    let f = Fixture::new();
    symlink(
        Path::new("/nonexistent/target"),
        f.home.join(".claude.json"),
    )
    .unwrap();
    let o = run(f.sh(&["--no-network", "--rw", "~/.claude.json"], "echo RAN"));
    assert_eq!(o.code, 125, "{o:?}");
    assert!(!o.stdout.contains("RAN"), "{o:?}");
    assert!(
        o.stderr
            .contains(&f.home.join(".claude.json").display().to_string()),
        "{o:?}"
    );
}

/// Same mode escalation with the read-only host system as the target. As root (whose file
/// modes allow writing `/usr`) this hands the agent the host's `/usr`; for any user the mount
/// itself must not be read-write.
#[test]
fn a_rw_link_into_usr_does_not_make_usr_writable() {
    let f = Fixture::new();
    std::fs::create_dir(f.home.join(".claude")).unwrap();
    let link = f.home.join(".claude/share");
    symlink("/usr/share", &link).unwrap();
    let probe = format!("as-probe-{}", std::process::id());
    let script = format!(
        "awk -v p='{}' '$5 == p {{ split($6, o, \",\"); print \"mount \" o[1] }}' /proc/self/mountinfo; \
         touch ~/.claude/share/{probe} 2>/dev/null && echo WROTE-THROUGH-LINK; echo done",
        link.display()
    );
    // The allowed counterpart: declared read-only, the link is followed and stays read-only.
    let o = run(f.sh(&["--no-network", "--ro", "~/.claude/share"], &script));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.starts_with("mount ro\n"), "{o:?}");
    assert!(o.stdout.ends_with("\ndone\n"), "{o:?}");

    let o = run(f.sh(&["--no-network", "--rw", "~/.claude/share"], &script));
    let host_probe = Path::new("/usr/share").join(&probe);
    let leaked = host_probe.exists();
    // Clean up before asserting.
    let _ = std::fs::remove_file(&host_probe);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!leaked, "the agent wrote the host's /usr/share: {o:?}");
    assert!(
        !o.stdout.contains("mount rw"),
        "/usr/share is mounted read-write through the link: {o:?}"
    );
    assert!(o.stdout.ends_with("done\n"), "{o:?}");
}

/// Issue 10 item 7: a declared link inside the launch directory crashed bubblewrap ("Can't
/// bind mount … No such file or directory", exit 125). It stays a link there, resolving to its
/// target; declared read-only, the target is read-only.
#[test]
fn a_declared_link_in_the_launch_dir_works_and_keeps_its_mode() {
    let f = Fixture::new();
    f.write("home/proj/real/f", "real\n");
    f.write("home/proj/file", "file\n");
    symlink(f.proj.join("real"), f.proj.join("link")).unwrap();
    symlink("file", f.proj.join("flink")).unwrap();
    let script = "cat link/f flink; \
                  (echo dir >> link/f) 2>/dev/null && echo wrote-dir; \
                  (echo file >> flink) 2>/dev/null && echo wrote-file; \
                  test -L link && test -L flink && echo links";
    let o = run(f.sh(&["--no-network", "--rw", "link", "--rw", "flink"], script));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        o.stdout, "real\nfile\nwrote-dir\nwrote-file\nlinks\n",
        "{o:?}"
    );
    assert!(!o.stderr.contains("warning"), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(f.proj.join("real/f")).unwrap(),
        "real\ndir\n"
    );

    let o = run(f.sh(&["--no-network", "--ro", "link", "--ro", "flink"], script));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "real\ndir\nfile\nfile\nlinks\n", "{o:?}");
    // Through the target's own path too: it is the same object.
    let o = run(f.sh(
        &["--no-network", "--ro", "link"],
        "(echo x >> real/f) 2>/dev/null && echo WROTE; echo done",
    ));
    assert_eq!(o.stdout, "done\n", "{o:?}");
    assert_eq!(
        std::fs::read_to_string(f.proj.join("real/f")).unwrap(),
        "real\ndir\n"
    );
}

#[test]
fn a_declared_link_in_the_launch_dir_to_elsewhere_follows_the_usual_rules() {
    let f = Fixture::new();
    let key = plant_key(&f);
    f.write("home/other/notes", "notes\n");
    symlink(&key, f.proj.join("key")).unwrap();
    symlink(f.home.join("other"), f.proj.join("other")).unwrap();
    // To a place the sandbox does not expose: left out (dangling inside), not a crash.
    let o = run(f.sh(
        &["--no-network", "--ro", "key", "--rw", "other"],
        "cat key other/notes 2>/dev/null; echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "done\n", "key leaked: {o:?}");
    assert!(
        o.stderr.contains(&format!(
            "{} is a symlink to {}, which is not exposed",
            f.proj.join("key").display(),
            key.display()
        )),
        "{o:?}"
    );
    // Its target declared (read-only) too: the link resolves, read-only even if declared rw.
    let other = f.home.join("other");
    let o = run(f.sh(
        &[
            "--no-network",
            "--rw",
            "other",
            "--ro",
            other.to_str().unwrap(),
        ],
        "cat other/notes; (echo x >> other/notes) 2>/dev/null && echo WROTE; echo done",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "notes\ndone\n", "{o:?}");
    assert!(
        o.stderr
            .contains("is declared read-write but is a symlink to"),
        "{o:?}"
    );
    assert_eq!(
        std::fs::read_to_string(other.join("notes")).unwrap(),
        "notes\n"
    );
}

/// Issue 11: `--ro /usr` listed hundreds of `/usr/bin/awk -> /etc/alternatives/awk` as
/// pointing outside the sandbox, although the host system's binds make them resolve inside.
/// A link through the system layer (`/etc/alternatives`, merged-/usr `/lib64`) resolves and
/// is not listed; a link to a place the sandbox lacks still is.
#[test]
fn links_through_the_host_system_layer_are_not_listed_as_outside() {
    let Ok(alt) = std::fs::read_dir("/etc/alternatives") else {
        eprintln!("SKIPPED: no /etc/alternatives on this host");
        return;
    };
    let Some(name) = alt.flatten().map(|e| e.file_name()).find(|n| {
        std::fs::metadata(Path::new("/etc/alternatives").join(n)).is_ok_and(|m| m.is_file())
    }) else {
        eprintln!("SKIPPED: no resolvable entry in /etc/alternatives");
        return;
    };
    let f = Fixture::new();
    let tools = f.home.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let via_system = Path::new("/etc/alternatives").join(&name);
    symlink(&via_system, tools.join("alt")).unwrap();
    symlink("/var/lib", tools.join("hidden")).unwrap();
    let o = run(f.sh(
        &["--no-network", "--ro", "~/tools", "--ro", "/usr"],
        "test -e ~/tools/alt && echo resolves; test -e ~/tools/hidden || echo dangles",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "resolves\ndangles\n", "{o:?}");
    let w = warnings(&o.stderr);
    assert!(
        w.contains("1 symlink in a declared directory points outside the sandbox")
            && w.contains(&format!("{} -> /var/lib", tools.join("hidden").display())),
        "{o:?}"
    );
    assert!(
        !w.contains("/usr/"),
        "the host system's own links were listed: {o:?}"
    );
}
