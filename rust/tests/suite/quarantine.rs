//! Issue 9, items 1 and 6: git on the host never obeys a redirection or runs a program the
//! agent planted. The exit sweep quarantines `commondir`/`gitdir` files git never writes and
//! strips program-running keys from git configs written during the session, after a normal
//! exit and after the launcher was killed (its sentinel sweeps then). Host git is run after
//! each attempt, and must not run what was planted.
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use crate::git::{flags, git, init_repo};

/// Host `git status` in `dir`, as a shell prompt would run it; returns whether it succeeded.
fn host_git_status(f: &Fixture, dir: &Path) -> bool {
    Command::new("git")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &f.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .arg("-C")
        .arg(dir)
        .args(["status", "--porcelain"])
        .output()
        .unwrap()
        .status
        .success()
}

/// The reproducer of item 1: a `commondir` in `.git` pointing at a git dir whose config sets
/// `core.fsmonitor`.
fn plant_commondir(marker: &Path) -> String {
    format!(
        "mkdir -p .git/evc && ln -s ../objects .git/evc/objects && ln -s ../refs .git/evc/refs; \
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch {}; false\"\\n' > .git/evc/config; \
         echo evc > .git/commondir",
        marker.display()
    )
}

#[test]
fn a_planted_commondir_is_quarantined_at_exit() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let marker = f.root().join("pwned");
    let o = run(f.sh(&flags(&[]), &plant_commondir(&marker)));
    assert_eq!(o.code, 0, "{o:?}");
    let commondir = f.proj.join(".git/commondir");
    assert!(
        o.stderr.contains(&format!(
            "agent-sandbox: quarantine: {}: a commondir where git never writes one (git on the host would take config and hooks from where it points); moved to {}.agent-sandbox-quarantine\n",
            commondir.display(),
            commondir.display()
        )),
        "{o:?}"
    );
    assert!(!commondir.exists());
    assert!(host_git_status(&f, &f.proj));
    assert!(!marker.exists(), "host git ran the planted fsmonitor");
    // The next launch starts as usual.
    assert_eq!(
        ok(f.sh(&flags(&[]), "git status --porcelain | wc -l")).trim(),
        "0"
    );
}

#[test]
fn the_sentinel_sweeps_when_the_launcher_is_killed() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let marker = f.root().join("pwned");
    // A nested repository's config: only the exit sweep handles those (the in-session watch
    // covers the repository's own git dirs).
    let script = format!(
        "git init -q vendor && git -C vendor config core.fsmonitor 'touch {}; false' && \
         touch planted; sleep {}",
        marker.display(),
        unique_marker()
    );
    let mut c = f.sh(&flags(&[]), &script);
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    assert!(eventually(Duration::from_secs(10), || f
        .proj
        .join("planted")
        .exists()));
    child.kill().unwrap(); // SIGKILL: no exit path of the launcher runs
    child.wait().unwrap();
    let aside = f.proj.join("vendor/.git/config.agent-sandbox-quarantine");
    assert!(
        eventually(Duration::from_secs(10), || aside.exists()),
        "the planted config survived the killed launcher"
    );
    assert!(host_git_status(&f, &f.proj.join("vendor")));
    assert!(!marker.exists(), "host git ran the planted fsmonitor");
}

/// Item 6: a repository the agent creates (a gitlink in the parent repo, or a `git init` in a
/// launch directory that was not a repo) with `core.fsmonitor` set.
#[test]
fn repositories_the_agent_creates_lose_their_program_keys() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let marker = f.root().join("pwned");
    let script = format!(
        "git init -q vendor && git -C vendor config core.fsmonitor 'touch {m}; false' && \
         git -C vendor config alias.st '!touch {m}' && git -C vendor config remote.origin.url https://example.invalid/v && \
         git -C vendor commit -q --allow-empty -m v && git add vendor && \
         printf '#!/bin/sh\\ntouch {m}\\n' > vendor/.git/hooks/pre-commit && chmod +x vendor/.git/hooks/pre-commit",
        m = marker.display()
    );
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    let config = f.proj.join("vendor/.git/config");
    let hook = f.proj.join("vendor/.git/hooks/pre-commit");
    let lines: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.starts_with("agent-sandbox: quarantine: "))
        .collect();
    assert_eq!(
        lines,
        [
            format!(
                "agent-sandbox: quarantine: {}: written during the session, sets core.fsmonitor, alias.st (git on your host would run a program or read config or hooks from elsewhere); moved to {}.agent-sandbox-quarantine and rewritten without them",
                config.display(),
                config.display()
            ),
            format!(
                "agent-sandbox: quarantine: {}: an executable git hook written during the session; moved to {}.agent-sandbox-quarantine",
                hook.display(),
                hook.display()
            ),
        ],
        "{o:?}"
    );
    // Host git in the parent (which recurses into the gitlink) and in vendor runs nothing.
    assert!(host_git_status(&f, &f.proj));
    assert!(host_git_status(&f, &f.proj.join("vendor")));
    git(
        &f,
        &f.proj.join("vendor"),
        &["commit", "-q", "--allow-empty", "-m", "host"],
    );
    assert!(!marker.exists(), "host git ran what the agent planted");
    assert_eq!(
        git(&f, &f.proj.join("vendor"), &["config", "remote.origin.url"]).trim(),
        "https://example.invalid/v"
    );

    // A launch directory that was not a repository.
    let g = Fixture::new();
    let o = run(g.sh(
        &flags(&[]),
        &format!(
            "git init -q && git config core.fsmonitor 'touch {}; false'",
            marker.display()
        ),
    ));
    assert!(o.stderr.contains("sets core.fsmonitor"), "{o:?}");
    assert!(host_git_status(&g, &g.proj));
    assert!(!marker.exists());
}

/// The allowed counterparts: everyday git inside, a new repository, a submodule added from a
/// local repository; nothing is reported and host git works on all of it.
#[test]
fn everyday_git_is_left_alone() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let o = run(f.sh(
        &flags(&[]),
        "git init -q lib && git -C lib commit -q --allow-empty -m lib && \
         git -c protocol.file.allow=always submodule add -q ./lib libmod && \
         git commit -q -m 'add libmod' && echo x > README && git commit -qam edit && \
         git init -q scratch && git -C scratch config user.name Someone && \
         git -C scratch config alias.co checkout && git log --oneline | wc -l",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout.trim(), "3", "{o:?}");
    assert!(!o.stderr.contains("quarantine"), "{o:?}");
    assert!(host_git_status(&f, &f.proj));
    git(&f, &f.proj, &["submodule", "status"]);
    assert!(f.proj.join(".git/modules/libmod/config").exists());
}

/// Item 6: a git dir under `.git/modules` that is no registered submodule (planted by an
/// earlier session) is protected like one at launch: its hooks and config are read-only, so
/// `git submodule update --init` on the host cannot be made to run code through it.
#[test]
fn unregistered_module_git_dirs_are_protected_at_launch() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let module = f.proj.join(".git/modules/evil");
    std::fs::create_dir_all(module.parent().unwrap()).unwrap();
    git(
        &f,
        &f.proj,
        &["init", "-q", "--bare", module.to_str().unwrap()],
    );
    let o = run(f.sh(
        &flags(&[]),
        ".git/modules/evil/hooks/post-checkout 2>/dev/null; \
         printf '#!/bin/sh\\ntouch x\\n' > .git/modules/evil/hooks/post-checkout 2>&1 || echo hook-refused; \
         git -C .git/modules/evil config core.fsmonitor x 2>/dev/null || echo config-refused",
    ));
    assert!(o.stdout.contains("hook-refused"), "{o:?}");
    assert!(o.stdout.contains("config-refused"), "{o:?}");
    assert!(!module.join("hooks/post-checkout").exists());
}

/// While the session runs, a `commondir` planted in the repository's git dir is quarantined at
/// once, so host git run meanwhile (a shell prompt in another terminal) never follows it.
#[test]
fn a_commondir_is_quarantined_while_the_session_runs() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let marker = f.root().join("pwned");
    let script = format!(
        "{}; for i in $(seq 50); do [ -e .git/commondir ] || break; sleep 0.05; done; \
         [ -e .git/commondir ] && echo still-there || echo gone",
        plant_commondir(&marker)
    );
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.stdout, "gone\n", "{o:?}");
    let commondir = f.proj.join(".git/commondir");
    assert_eq!(
        o.stderr.matches("agent-sandbox: quarantine: ").count(),
        1,
        "{o:?}"
    );
    assert!(
        o.stderr.contains(&format!(
            "{}: a commondir where git never writes one",
            commondir.display()
        )),
        "{o:?}"
    );
    assert!(host_git_status(&f, &f.proj));
    assert!(!marker.exists());
}

/// Item 1, "at every start": a stray commondir left behind (the machine went down before any
/// sweep ran) is quarantined before planning, and the launch goes on.
#[test]
fn a_stray_commondir_left_behind_is_quarantined_at_start() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    std::fs::create_dir_all(f.proj.join(".git/evc")).unwrap();
    std::fs::write(f.proj.join(".git/commondir"), "evc\n").unwrap();
    let o = run(f.sh(&flags(&[]), "echo started"));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "started\n");
    assert!(
        o.stderr.contains(&format!(
            "agent-sandbox: quarantine: {}: a commondir where git never writes one",
            f.proj.join(".git/commondir").display()
        )),
        "{o:?}"
    );
    assert!(!f.proj.join(".git/commondir").exists());
    // From a subdirectory of the repository, too.
    std::fs::write(f.proj.join(".git/commondir"), "evc\n").unwrap();
    std::fs::create_dir_all(f.proj.join("sub")).unwrap();
    let mut c = f.sh(&flags(&[]), "echo started");
    c.current_dir(f.proj.join("sub"));
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!f.proj.join(".git/commondir").exists());
}

/// Review finding: a nested repository whose `.git/HEAD` is a symlink (git accepts it) was
/// no git dir to the sweep; added to the outer index as a gitlink, a plain `git status` in
/// the user's project then ran its fsmonitor.
#[test]
fn a_nested_repository_with_a_linked_head_is_swept() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    git(&f, &f.proj, &["config", "alias.lg", "!git log --oneline"]);
    let config_before = std::fs::read(f.proj.join(".git/config")).unwrap();
    let marker = f.root().join("pwned");
    let script = format!(
        "git init -q sub5 && cd sub5 && git commit -q --allow-empty -m x && cd .git && rm HEAD && \
         ln -s refs/heads/master HEAD && git config core.fsmonitor 'touch {}; false #' && cd ../.. && \
         git update-index --add --cacheinfo 160000,$(git -C sub5 rev-parse HEAD),sub5 && git lg | wc -l",
        marker.display()
    );
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "agent-sandbox: quarantine: {}: written during the session, sets core.fsmonitor",
            f.proj.join("sub5/.git/config").display()
        )),
        "{o:?}"
    );
    assert!(host_git_status(&f, &f.proj));
    assert!(
        !marker.exists(),
        "host git status in the project ran the planted fsmonitor"
    );
    // The launch repository's own config, read-only inside, is untouched (its `!` alias too).
    assert_eq!(
        std::fs::read(f.proj.join(".git/config")).unwrap(),
        config_before
    );
}
