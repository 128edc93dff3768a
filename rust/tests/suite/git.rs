//! Git inside the sandbox: everyday commands work, while everything git on the host would later
//! execute or obey (hooks, config, includes, alternates, worktree and submodule pointers) stays
//! read-only, in every git directory the repository owns.
//!
//! Fixture repositories are made on the host with the real `git`, as the user would have them.
//! Each escape is attempted from inside and must fail, and afterwards the host files must hold the
//! same bytes as before.
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// Host-side `git -C dir ARGS…` as the user would run it: no system config, the fixture's `$HOME`
/// (so no global config either), a fixed identity. Panics on failure; returns stdout.
pub(crate) fn git(f: &Fixture, dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or("/usr/bin:/bin".into()),
        )
        .env("HOME", &f.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "advice.detachedHead=false",
        ])
        .args(["-c", "protocol.file.allow=always"])
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("run git on the host");
    assert!(
        o.status.success(),
        "host git {args:?} in {} failed:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository at `dir` with one commit holding `README`.
pub(crate) fn init_repo(f: &Fixture, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(f, dir, &["init", "-q"]);
    std::fs::write(dir.join("README"), "hello\n").unwrap();
    git(f, dir, &["add", "README"]);
    git(f, dir, &["commit", "-q", "-m", "initial"]);
}

fn commit_count(f: &Fixture, dir: &Path, rev: &str) -> u32 {
    git(f, dir, &["rev-list", "--count", rev])
        .trim()
        .parse()
        .unwrap()
}

/// `--env` flags giving git inside an identity, so commits can work.
const IDENTITY: [&str; 8] = [
    "--env",
    "GIT_AUTHOR_NAME=Agent",
    "--env",
    "GIT_AUTHOR_EMAIL=agent@example.org",
    "--env",
    "GIT_COMMITTER_NAME=Agent",
    "--env",
    "GIT_COMMITTER_EMAIL=agent@example.org",
];

/// The sandbox flags every test here uses: no network needed, and an identity.
pub(crate) fn flags<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--no-network"];
    v.extend(IDENTITY);
    v.extend(extra);
    v
}

/// A script that runs each `(name, command)` in a subshell and prints `name: allowed` or
/// `name: denied`. The commands' own stderr stays visible in failure output.
fn attempts(list: &[(&str, &str)]) -> String {
    list.iter()
        .map(|(name, cmd)| {
            format!(
                "if ( {cmd} ) >/dev/null; then echo '{name}: allowed'; else echo '{name}: denied'; fi\n"
            )
        })
        .collect()
}

/// Asserts every attempt named printed `verdict`; reports all that did not at once.
fn expect(o: &Out, verdict: &str, names: &[&str]) {
    let wrong: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !o.stdout.lines().any(|l| l == format!("{name}: {verdict}")))
        .collect();
    assert!(wrong.is_empty(), "expected {verdict}: {wrong:?}\n{o:?}");
}

/// The bytes of each path (None if missing), to compare before and after a run.
fn snapshot(paths: &[PathBuf]) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    paths
        .iter()
        .map(|p| (p.clone(), std::fs::read(p).ok()))
        .collect()
}

/// Names in a directory, sorted (empty if missing).
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn assert_unchanged(before: &[(PathBuf, Option<Vec<u8>>)]) {
    for (path, bytes) in before {
        assert_eq!(
            &std::fs::read(path).ok(),
            bytes,
            "{} changed on the host",
            path.display()
        );
    }
}

fn launched_from(mut c: Command, dir: &Path) -> Command {
    c.current_dir(dir);
    c
}

#[test]
fn everyday_commands_work_and_reach_the_host() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let script = "set -e
        echo change >> README
        echo new > new.txt
        git status --short
        git add README new.txt
        git commit -q -m 'from the sandbox'
        git branch feature
        git branch --list
        git log --format=%s
        git gc --quiet
        git repack -a -d -q
        git count-objects -v";
    let out = ok(f.sh(&flags(&[]), script));
    assert!(
        out.contains("?? new.txt") || out.contains(" M README"),
        "{out}"
    );
    assert!(out.contains("  feature\n* main\n"), "{out}");
    assert!(out.contains("from the sandbox\ninitial\n"), "{out}");
    assert!(
        out.contains("count: 0\n"),
        "loose objects left after gc: {out}"
    );

    // On the host: the commit, the branch, the packed objects.
    assert_eq!(commit_count(&f, &f.proj, "HEAD"), 2);
    assert_eq!(
        git(&f, &f.proj, &["log", "-1", "--format=%an <%ae> %s"]),
        "Agent <agent@example.org> from the sandbox\n"
    );
    git(
        &f,
        &f.proj,
        &["rev-parse", "--verify", "-q", "refs/heads/feature"],
    );
    let packs = listing(&f.proj.join(".git/objects/pack"));
    assert!(packs.iter().any(|p| p.ends_with(".pack")), "{packs:?}");
    git(&f, &f.proj, &["fsck", "--no-progress"]);
}

#[test]
fn fetch_from_a_declared_read_only_repository() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let upstream = f.home.join("upstream");
    git(
        &f,
        &f.home,
        &["clone", "-q", f.proj.to_str().unwrap(), "upstream"],
    );
    std::fs::write(upstream.join("up.txt"), "upstream\n").unwrap();
    git(&f, &upstream, &["add", "up.txt"]);
    git(&f, &upstream, &["commit", "-q", "-m", "upstream work"]);
    let upstream_head = git(&f, &upstream, &["rev-parse", "HEAD"]);
    let up_git = upstream.join(".git");
    let before = snapshot(&[
        up_git.join("config"),
        up_git.join("HEAD"),
        up_git.join("refs/heads/main"),
        up_git.join("hooks/post-update"),
    ]);
    let up = upstream.to_str().unwrap();

    let script = attempts(&[
        (
            "fetch",
            &format!("git fetch -q {up} main && git merge -q --ff-only FETCH_HEAD"),
        ),
        ("push", &format!("git push -q {up} HEAD:refs/heads/evil")),
        (
            "commit-in-upstream",
            &format!("git -C {up} commit -q --allow-empty -m evil"),
        ),
        (
            "upstream-hook",
            &format!("echo evil > {up}/.git/hooks/post-update"),
        ),
    ]);
    let o = run(f.sh(&flags(&["--ro", up]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    expect(&o, "allowed", &["fetch"]);
    expect(
        &o,
        "denied",
        &["push", "commit-in-upstream", "upstream-hook"],
    );

    assert_eq!(git(&f, &f.proj, &["rev-parse", "HEAD"]), upstream_head);
    assert_eq!(
        std::fs::read_to_string(f.proj.join("up.txt")).unwrap(),
        "upstream\n"
    );
    assert_unchanged(&before);
    assert_eq!(commit_count(&f, &upstream, "--all"), 2);
}

#[test]
fn git_init_in_a_fresh_project() {
    let f = Fixture::new();
    assert!(!f.proj.join(".git").exists());
    ok(f.sh(
        &flags(&[]),
        "set -e; git init -q; echo a > a; git add a; git commit -q -m first; git status --short",
    ));
    assert!(f.proj.join(".git/HEAD").is_file());
    assert_eq!(git(&f, &f.proj, &["log", "--format=%s"]), "first\n");
}

#[test]
fn hooks_and_config_cannot_be_planted() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let g = f.proj.join(".git");
    let before = snapshot(&[
        g.join("config"),
        g.join("hooks/pre-commit"),
        g.join("hooks/pre-commit.sample"),
    ]);
    let hooks_before = listing(&g.join("hooks"));
    assert!(!g.join("config.worktree").exists() && !g.join("objects/info/alternates").exists());

    let script = attempts(&[
        // What the agent may write in the git dir and the project:
        ("exclude", "echo '*.log' >> .git/info/exclude"),
        ("ref", "git update-ref refs/heads/scratch HEAD"),
        ("project-file", "echo data > data.txt"),
        // Escapes:
        ("hook", "echo 'touch /tmp/pwned' > .git/hooks/pre-commit"),
        ("hook-symlink", "ln -s /bin/true .git/hooks/post-checkout"),
        ("hook-sample", "echo evil >> .git/hooks/pre-commit.sample"),
        (
            "config-append",
            "printf '[core]\\n\\thooksPath = /tmp\\n' >> .git/config",
        ),
        (
            "config-worktree",
            "echo '[core] fsmonitor = ./x' > .git/config.worktree",
        ),
        (
            "alternates",
            "echo /tmp/objects > .git/objects/info/alternates",
        ),
        ("git-config", "git config core.hooksPath x"),
        ("rm-config", "rm -f .git/config"),
        ("mv-hooks", "mv .git/hooks .git/hooks.old"),
        (
            "mv-objects-info",
            "mv .git/objects/info .git/objects/info.old",
        ),
        // Last: unconfined, it would break the attempts after it.
        ("mv-dotgit", "mv .git .git.old"),
    ]);
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    expect(
        &o,
        "denied",
        &[
            "hook",
            "hook-symlink",
            "hook-sample",
            "config-append",
            "config-worktree",
            "alternates",
            "git-config",
            "rm-config",
            "mv-hooks",
            "mv-dotgit",
            "mv-objects-info",
        ],
    );
    expect(&o, "allowed", &["exclude", "ref", "project-file"]);

    assert_unchanged(&before);
    assert_eq!(listing(&g.join("hooks")), hooks_before);
    // The launcher creates missing protected files as empty placeholders; nothing else.
    for name in ["config.worktree", "objects/info/alternates"] {
        let bytes = std::fs::read(g.join(name)).unwrap_or_default();
        assert!(bytes.is_empty(), "{name} holds {bytes:?}");
    }
    assert!(!g.join("hooks.old").exists() && !f.proj.join(".git.old").exists());
    assert!(
        std::fs::read_to_string(g.join("info/exclude"))
            .unwrap()
            .contains("*.log")
    );
    git(
        &f,
        &f.proj,
        &["rev-parse", "--verify", "-q", "refs/heads/scratch"],
    );
}

#[test]
fn missing_hooks_dir_cannot_be_created() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let g = f.proj.join(".git");
    std::fs::remove_dir_all(g.join("hooks")).unwrap();
    std::fs::remove_dir_all(g.join("objects/info")).unwrap();

    let script = attempts(&[
        (
            "hook",
            "mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
        ),
        (
            "replace",
            "rm -rf .git/hooks; mkdir -p .git/hooks && echo evil > .git/hooks/post-merge",
        ),
        (
            "alternates",
            "mkdir -p .git/objects/info && echo /tmp > .git/objects/info/alternates",
        ),
        ("commit", "echo x > x && git add x && git commit -q -m x"),
    ]);
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    expect(&o, "denied", &["hook", "replace", "alternates"]);
    expect(&o, "allowed", &["commit"]);

    // The placeholders are empty on the host and nothing got in.
    assert!(g.join("hooks").is_dir());
    assert_eq!(listing(&g.join("hooks")), Vec::<String>::new());
    let alt = std::fs::read(g.join("objects/info/alternates")).unwrap_or_default();
    assert!(alt.is_empty(), "alternates holds {alt:?}");
    assert_eq!(commit_count(&f, &f.proj, "HEAD"), 2);
}

#[test]
fn launched_from_a_subdirectory_the_root_is_read_only() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let sub = f.proj.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("lib.txt"), "lib\n").unwrap();
    git(&f, &f.proj, &["add", "sub"]);
    git(&f, &f.proj, &["commit", "-q", "-m", "sub"]);
    let before = snapshot(&[
        f.proj.join("README"),
        f.proj.join("new-at-root"),
        f.proj.join(".git/config"),
        f.proj.join(".git/hooks/pre-commit"),
    ]);

    let script = attempts(&[
        ("root-file", "echo evil > ../README"),
        ("root-new", "echo evil > ../new-at-root"),
        ("hook", "echo evil > ../.git/hooks/pre-commit"),
        ("config", "echo evil >> ../.git/config"),
        (
            "commit",
            "echo here > here.txt && git add here.txt && git commit -q -m 'in sub'",
        ),
        ("status", "git status --short"),
    ]);
    let o = run(launched_from(f.sh(&flags(&[]), &script), &sub));
    assert_eq!(o.code, 0, "{o:?}");
    expect(&o, "denied", &["root-file", "root-new", "hook", "config"]);
    expect(&o, "allowed", &["commit", "status"]);

    assert_unchanged(&before);
    assert_eq!(git(&f, &f.proj, &["show", "HEAD:sub/here.txt"]), "here\n");
    assert_eq!(commit_count(&f, &f.proj, "HEAD"), 3);
}

#[test]
fn linked_worktree_outside_the_tree() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let wt = f.home.join("wt");
    git(
        &f,
        &f.proj,
        &["worktree", "add", "-q", "-b", "wt", wt.to_str().unwrap()],
    );
    let common = f.proj.join(".git");
    let wt_git = common.join("worktrees/wt");
    assert!(wt_git.join("commondir").is_file() && wt_git.join("gitdir").is_file());
    let before = snapshot(&[
        wt.join(".git"),
        common.join("config"),
        common.join("hooks/pre-commit"),
        wt_git.join("commondir"),
        wt_git.join("gitdir"),
        f.proj.join("README"),
    ]);
    let c = common.display();
    let w = wt_git.display();

    let script = attempts(&[
        (
            "commit",
            "echo y > y.txt && git add y.txt && git commit -q -m 'in worktree'",
        ),
        ("pointer", "echo 'gitdir: /tmp/evil' > .git"),
        ("rm-pointer", "rm -f .git"),
        ("hook", &format!("echo evil > {c}/hooks/pre-commit")),
        ("config", &format!("echo evil >> {c}/config")),
        ("commondir", &format!("echo /tmp > {w}/commondir")),
        ("gitdir", &format!("echo /tmp/.git > {w}/gitdir")),
        ("wt-config", &format!("echo evil > {w}/config.worktree")),
        ("mv-wt-dir", &format!("mv {w} {c}/worktrees/moved")),
    ]);
    let o = run(launched_from(f.sh(&flags(&[]), &script), &wt));
    assert_eq!(o.code, 0, "{o:?}");
    expect(&o, "allowed", &["commit"]);
    expect(
        &o,
        "denied",
        &[
            "pointer",
            "rm-pointer",
            "hook",
            "config",
            "commondir",
            "gitdir",
            "wt-config",
            "mv-wt-dir",
        ],
    );

    assert_unchanged(&before);
    assert!(!common.join("worktrees/moved").exists());
    assert_eq!(commit_count(&f, &f.proj, "wt"), 2);
    assert_eq!(
        git(&f, &f.proj, &["log", "-1", "--format=%s", "wt"]),
        "in worktree\n"
    );
}

#[test]
fn nested_submodules_are_protected_at_every_depth() {
    let f = Fixture::new();
    let src = f.home.join("src");
    let (a_src, b_src) = (src.join("a"), src.join("b"));
    init_repo(&f, &b_src);
    init_repo(&f, &a_src);
    git(
        &f,
        &a_src,
        &["submodule", "add", "-q", b_src.to_str().unwrap(), "b"],
    );
    git(&f, &a_src, &["commit", "-q", "-m", "add b"]);
    init_repo(&f, &f.proj);
    git(
        &f,
        &f.proj,
        &["submodule", "add", "-q", a_src.to_str().unwrap(), "a"],
    );
    git(&f, &f.proj, &["commit", "-q", "-m", "add a"]);
    git(
        &f,
        &f.proj,
        &["submodule", "update", "-q", "--init", "--recursive"],
    );

    let g = f.proj.join(".git");
    let a_git = g.join("modules/a");
    let b_git = a_git.join("modules/b");
    assert!(
        b_git.join("HEAD").is_file(),
        "the nested submodule was not absorbed"
    );
    assert!(f.proj.join("a/.git").is_file() && f.proj.join("a/b/.git").is_file());
    let before = snapshot(&[
        a_git.join("hooks/post-checkout"),
        a_git.join("config"),
        b_git.join("hooks/x"),
        b_git.join("config"),
        f.proj.join("a/.git"),
        f.proj.join("a/b/.git"),
    ]);
    let a_hooks = listing(&a_git.join("hooks"));
    let b_hooks = listing(&b_git.join("hooks"));

    let script = attempts(&[
        ("status", "git status --short && git -C a/b status --short"),
        (
            "commit-in-a",
            "cd a && echo z > z && git add z && git commit -q -m 'in a'",
        ),
        ("a-git-config", "git -C a config core.hooksPath /tmp"),
        ("b-git-config", "git -C a/b config core.hooksPath /tmp"),
        ("a-hook", "echo evil > .git/modules/a/hooks/post-checkout"),
        ("b-hook", "echo evil > .git/modules/a/modules/b/hooks/x"),
        ("a-config", "echo evil >> .git/modules/a/config"),
        ("b-config", "echo evil >> .git/modules/a/modules/b/config"),
        ("a-pointer", "echo 'gitdir: /tmp/evil' > a/.git"),
        ("b-pointer", "echo 'gitdir: /tmp/evil' > a/b/.git"),
        ("mv-a-gitdir", "mv .git/modules/a .git/modules/a2"),
    ]);
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    expect(
        &o,
        "denied",
        &[
            "a-hook",
            "b-hook",
            "a-pointer",
            "b-pointer",
            "a-config",
            "b-config",
            "a-git-config",
            "b-git-config",
            "mv-a-gitdir",
        ],
    );
    expect(&o, "allowed", &["status", "commit-in-a"]);

    assert_unchanged(&before);
    assert_eq!(listing(&a_git.join("hooks")), a_hooks);
    assert_eq!(listing(&b_git.join("hooks")), b_hooks);
    assert_eq!(
        git(&f, &f.proj.join("a"), &["log", "-1", "--format=%s"]),
        "in a\n"
    );
}

#[test]
fn repo_local_hooks_path_inside_the_tree_is_read_only() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    git(&f, &f.proj, &["config", "core.hooksPath", ".githooks"]);
    let hooks = f.proj.join(".githooks");
    std::fs::create_dir(&hooks).unwrap();
    std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    let before = snapshot(&[hooks.join("pre-commit"), hooks.join("post-checkout")]);

    let script = attempts(&[
        ("hook", "echo 'touch /tmp/pwned' > .githooks/pre-commit"),
        ("new-hook", "echo evil > .githooks/post-checkout"),
        ("mv-dir", "mv .githooks .githooks.old"),
        ("project-file", "echo ok > notes.txt"),
    ]);
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    expect(&o, "denied", &["hook", "new-hook", "mv-dir"]);
    expect(&o, "allowed", &["project-file"]);
    assert_unchanged(&before);
    assert_eq!(listing(&hooks), ["pre-commit"]);
}

#[test]
fn repo_local_hooks_path_that_does_not_exist_yet_cannot_be_created() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    git(&f, &f.proj, &["config", "core.hooksPath", ".githooks"]);
    let hooks = f.proj.join(".githooks");
    assert!(!hooks.exists());

    let script = attempts(&[(
        "hook",
        "mkdir -p .githooks && echo evil > .githooks/pre-commit",
    )]);
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    expect(&o, "denied", &["hook"]);
    assert_eq!(listing(&hooks), Vec::<String>::new());
}

#[test]
fn included_config_inside_the_tree_is_read_only() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let shared = f.proj.join("shared.gitconfig");
    std::fs::write(&shared, "[alias]\n\tst = status --short\n").unwrap();
    // Relative to the including file, .git/config.
    git(
        &f,
        &f.proj,
        &["config", "include.path", "../shared.gitconfig"],
    );
    let before = snapshot(&[shared.clone(), f.proj.join(".git/config")]);

    let script = attempts(&[
        (
            "include-append",
            "printf '[core]\\n\\thooksPath = /tmp\\n' >> shared.gitconfig",
        ),
        ("include-replace", "rm -f shared.gitconfig"),
        ("include-read", "git st"),
    ]);
    let o = run(f.sh(&flags(&[]), &script));
    assert_eq!(o.code, 0, "{o:?}");
    expect(&o, "denied", &["include-append", "include-replace"]);
    expect(&o, "allowed", &["include-read"]);
    assert_unchanged(&before);
}

#[test]
fn dotgit_file_pointing_at_ssh_refuses_to_start() {
    for pointer in ["gitdir: {home}/.ssh\n", "gitdir: ../.ssh\n"] {
        let f = Fixture::new();
        let ssh = f.home.join(".ssh");
        std::fs::create_dir(&ssh).unwrap();
        std::fs::write(ssh.join("id_ed25519"), "SECRET-KEY\n").unwrap();
        let dotgit = f.proj.join(".git");
        let contents = pointer.replace("{home}", f.home.to_str().unwrap());
        std::fs::write(&dotgit, &contents).unwrap();

        let o = run(f.sh(&flags(&[]), "touch ran; cat ~/.ssh/id_ed25519"));
        assert_eq!(o.code, 125, "{contents:?}: {o:?}");
        assert!(
            o.stderr.contains("agent-sandbox: error:")
                && o.stderr.contains(&dotgit.display().to_string()),
            "the error does not name the pointer {}: {o:?}",
            dotgit.display()
        );
        assert!(!o.stdout.contains("SECRET"), "{o:?}");
        assert!(!f.proj.join("ran").exists(), "the command ran");
        assert_eq!(listing(&ssh), ["id_ed25519"]);
    }
}

#[test]
fn repository_at_home_is_not_exposed() {
    let f = Fixture::new();
    git(&f, &f.home, &["init", "-q"]);
    let hg = f.home.join(".git");
    let before = snapshot(&[hg.join("config"), hg.join("hooks/pre-commit")]);
    let hooks_before = listing(&hg.join("hooks"));

    let script = "git status; echo status=$?
        test -e ~/.git && echo HOME-GIT-VISIBLE
        mkdir -p ~/.git/hooks && echo evil > ~/.git/hooks/pre-commit
        true";
    let o = run(f.sh(&flags(&[]), script));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("warning: git: not exposing the repository at")
            && o.stderr.contains(&f.home.display().to_string()),
        "{o:?}"
    );
    assert!(o.stderr.contains("not a git repository"), "{o:?}");
    assert!(o.stdout.contains("status=128"), "{o:?}");
    assert!(!o.stdout.contains("HOME-GIT-VISIBLE"), "{o:?}");
    // The write above landed in the sandbox's own empty $HOME, not on the host.
    assert_unchanged(&before);
    assert_eq!(listing(&hg.join("hooks")), hooks_before);
}

#[test]
fn no_identity_is_invented() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let script = "echo x > f; git add f
        git commit -q -m try; echo commit=$?
        git var GIT_COMMITTER_IDENT; echo var=$?";
    let o = run(f.sh(&["--no-network"], script));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr.contains("warning: no git identity inside (missing GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL), so `git commit` will fail"),
        "{o:?}"
    );
    assert!(
        !o.stdout.contains("commit=0"),
        "git commit succeeded: {o:?}"
    );
    assert!(
        !o.stdout.contains("var=0"),
        "git invented an identity: {o:?}"
    );
    assert!(!o.stdout.contains("sandbox"), "{o:?}");
    assert_eq!(commit_count(&f, &f.proj, "--all"), 1);
    let idents = git(&f, &f.proj, &["log", "--all", "--format=%an %ae %cn %ce"]);
    assert!(!idents.contains("sandbox"), "{idents}");

    // With an identity declared, the same commit works (and no warning).
    let o = run(f.sh(&flags(&[]), "git commit -q -m try && echo committed"));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("committed"), "{o:?}");
    assert!(!o.stderr.contains("no git identity"), "{o:?}");
    assert_eq!(
        git(&f, &f.proj, &["log", "-1", "--format=%an <%ae>"]),
        "Agent <agent@example.org>\n"
    );
}

/// Issue 11: `GIT_AUTHOR_EMAIL` alone silenced the identity warning, and the commit then
/// failed for want of a committer. The warning names what is missing as the flags to pass,
/// in one line; following it makes the commit work; an identity in the repository's own
/// config, which the sandbox reads, needs no warning.
#[test]
fn the_identity_warning_names_what_is_missing_and_following_it_works() {
    let f = Fixture::new();
    init_repo(&f, &f.proj);
    let commit = "echo y > g; git add g; git commit -q -m try && echo committed";
    let o = run(f.sh(
        &["--no-network", "--env", "GIT_AUTHOR_EMAIL=a@example.org"],
        commit,
    ));
    let warning: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.contains("git identity"))
        .collect();
    assert_eq!(
        warning,
        [
            "agent-sandbox: warning: no git identity inside (missing GIT_AUTHOR_NAME, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL), so `git commit` will fail (user.useConfigOnly). Fix: --env GIT_AUTHOR_NAME=… --env GIT_COMMITTER_NAME=… --env GIT_COMMITTER_EMAIL=… (env in mkSandbox), or --ro ~/.gitconfig (roFiles) with user.name and user.email set"
        ],
        "{o:?}"
    );
    assert!(!o.stdout.contains("committed"), "{o:?}");

    // EMAIL is a guess git ignores under user.useConfigOnly: still warned, still failing.
    let mut fix = vec![
        "--no-network",
        "--env",
        "GIT_AUTHOR_EMAIL=a@example.org",
        "--env",
        "GIT_AUTHOR_NAME=A",
        "--env",
        "GIT_COMMITTER_NAME=C",
        "--env",
        "EMAIL=c@example.org",
    ];
    let o = run(f.sh(&fix, commit));
    assert!(!o.stdout.contains("committed"), "{o:?}");
    assert!(o.stderr.contains("(missing GIT_COMMITTER_EMAIL)"), "{o:?}");
    fix.extend(["--env", "GIT_COMMITTER_EMAIL=c@example.org"]);
    let o = run(f.sh(&fix, commit));
    assert!(o.stdout.contains("committed"), "{o:?}");
    assert!(!o.stderr.contains("git identity"), "{o:?}");
    assert_eq!(
        git(&f, &f.proj, &["log", "-1", "--format=%an <%ae> %cn <%ce>"]),
        "A <a@example.org> C <c@example.org>\n"
    );

    // A declared ~/.gitconfig without user.email still leaves the commit to fail: warned.
    f.write("home/.gitconfig", "[user]\n\tname = From Config\n");
    let o = run(f.sh(&["--no-network", "--ro", "~/.gitconfig"], commit));
    assert!(!o.stdout.contains("committed"), "{o:?}");
    assert!(
        o.stderr
            .contains("(missing GIT_AUTHOR_EMAIL, GIT_COMMITTER_EMAIL)"),
        "{o:?}"
    );

    git(&f, &f.proj, &["config", "user.name", "Repo"]);
    git(&f, &f.proj, &["config", "user.email", "repo@example.org"]);
    let o = run(f.sh(
        &["--no-network"],
        "echo z > h; git add h; git commit -q -m try && echo committed",
    ));
    assert!(o.stdout.contains("committed"), "{o:?}");
    assert!(!o.stderr.contains("git identity"), "{o:?}");
}

/// Every git dir, not only the launch repository's: a repository at the top of a declared
/// read-write directory (`--rw ~/other-repo`) gets the same protection, while its working
/// tree stays writable.
#[test]
fn a_repository_in_a_declared_rw_dir_is_protected_too() {
    let f = Fixture::new();
    let other = f.home.join("other-repo");
    init_repo(&f, &other);
    let before = snapshot(&[other.join(".git/config")]);
    let script = format!(
        "cd '{o}'; printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/post-checkout 2>/dev/null || echo hook-refused; \
         git config core.fsmonitor 'touch pwned' 2>/dev/null || echo config-refused; \
         echo x > README && git commit -qam edit && echo committed",
        o = other.display()
    );
    let o = run(f.sh(&flags(&["--rw", other.to_str().unwrap()]), &script));
    assert_eq!(
        o.stdout, "hook-refused\nconfig-refused\ncommitted\n",
        "{o:?}"
    );
    assert_unchanged(&before);
    assert!(!other.join(".git/hooks/post-checkout").exists());
    assert_eq!(commit_count(&f, &other, "HEAD"), 2);
}
