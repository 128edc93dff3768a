use super::*;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

fn fx() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    Fx { _tmp: tmp, root }
}

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut c = Command::new("git");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            c.env_remove(k);
        }
    }
    c.current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(args)
        .output()
        .unwrap()
}

/// A spec whose session started `ago` before now (negative: in the future).
fn spec(roots: &[&Path], since_from_now_secs: i64) -> SweepSpec {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128;
    SweepSpec {
        roots: roots.iter().map(|p| p.to_path_buf()).collect(),
        binds: Vec::new(),
        since_nanos: (now - since_from_now_secs as i128 * 1_000_000_000) as u128,
    }
}

#[test]
fn a_stray_commondir_is_quarantined_whenever_written() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    fs::create_dir_all(repo.join(".git/evc")).unwrap();
    fs::write(repo.join(".git/commondir"), "evc\n").unwrap();
    // Even a session "starting in an hour" quarantines it: git never writes one there.
    let r = sweep(&spec(&[&repo], -3600));
    assert_eq!(
        r.findings,
        [Finding {
            path: repo.join(".git/commondir"),
            found: "a commondir where git never writes one (git on the host would take config and hooks from where it points)".into(),
            done: format!("moved to {}", repo.join(".git/commondir.agent-sandbox-quarantine").display()),
        }]
    );
    assert!(!repo.join(".git/commondir").exists());
    assert!(git(&repo, &["status"]).status.success());
}

#[test]
fn worktree_commondirs_must_name_their_common_dir() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    );
    git(&repo, &["worktree", "add", "-q", "../wt"]);
    let good = repo.join(".git/worktrees/wt/commondir");
    assert!(good.exists());
    let evil = repo.join(".git/worktrees/evil");
    fs::create_dir_all(&evil).unwrap();
    fs::write(evil.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(evil.join("commondir"), "../../evc\n").unwrap();
    fs::create_dir_all(repo.join(".git/evc")).unwrap();
    let r = sweep(&spec(&[&repo], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [evil.join("commondir").as_path()], "{r:?}");
    assert!(
        r.findings[0]
            .found
            .starts_with("a commondir naming another git directory")
    );
    assert!(good.exists());
}

#[test]
fn config_written_during_the_session_loses_what_runs_programs() {
    let f = fx();
    let vendor = f.root.join("p/vendor");
    fs::create_dir_all(&vendor).unwrap();
    git(&vendor, &["init", "-q"]);
    let marker = f.root.join("pwned");
    for (k, v) in [
        (
            "core.fsmonitor",
            format!("touch {}; false", marker.display()),
        ),
        ("remote.origin.url", "https://example.invalid/r.git".into()),
        ("alias.st", "!touch /tmp/x".into()),
        ("alias.co", "checkout".into()),
        ("filter.lfs.clean", "evil %f".into()),
        ("include.path", "/tmp/evil.cfg".into()),
        ("user.name", "a \"quoted\\ name\"\twith tab".into()),
    ] {
        assert!(git(&vendor, &["config", k, &v]).status.success());
    }
    let r = sweep(&spec(&[&f.root.join("p")], 60));
    let config = vendor.join(".git/config");
    let aside = vendor.join(".git/config.agent-sandbox-quarantine");
    assert_eq!(r.findings.len(), 1, "{r:?}");
    assert_eq!(
        r.findings[0].to_string(),
        format!(
            "{}: written during the session, sets core.fsmonitor, alias.st, filter.lfs.clean, include.path (git on your host would run a program or read config or hooks from elsewhere); moved to {} and rewritten without them",
            config.display(),
            aside.display()
        )
    );
    assert!(aside.exists());
    // git reads the rewritten file to the same safe values, and runs nothing.
    let list = String::from_utf8(git(&vendor, &["config", "--list", "--local"]).stdout).unwrap();
    assert!(
        list.contains("remote.origin.url=https://example.invalid/r.git"),
        "{list}"
    );
    assert!(list.contains("alias.co=checkout"), "{list}");
    assert!(
        list.contains("user.name=a \"quoted\\ name\"\twith tab"),
        "{list}"
    );
    assert!(
        !list.contains("fsmonitor") && !list.contains("filter.") && !list.contains("include"),
        "{list}"
    );
    assert!(git(&vendor, &["status"]).status.success());
    assert!(!marker.exists(), "host git ran the planted fsmonitor");
}

#[test]
fn config_from_before_the_session_is_left_alone() {
    let f = fx();
    let vendor = f.root.join("vendor");
    fs::create_dir_all(&vendor).unwrap();
    git(&vendor, &["init", "-q"]);
    git(&vendor, &["config", "alias.lg", "!git log --oneline"]);
    let r = sweep(&spec(&[&f.root], -3600));
    assert!(r.findings.is_empty(), "{r:?}");
}

#[test]
fn new_executable_hooks_and_set_id_bits() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "--bare", "b.git"]);
    let hook = repo.join("b.git/hooks/post-update");
    fs::write(&hook, "#!/bin/sh\ntouch /tmp/pwned\n").unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    let suid = repo.join("x");
    fs::write(&suid, "x").unwrap();
    fs::set_permissions(&suid, fs::Permissions::from_mode(0o4755)).unwrap();
    let r = sweep(&spec(&[&repo], 60));
    let lines: Vec<String> = r.findings.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        lines,
        [
            format!(
                "{}: an executable git hook written during the session; moved to {}.agent-sandbox-quarantine",
                hook.display(),
                hook.display()
            ),
            format!(
                "{}: written during the session with mode 4755 (setuid/setgid); the bits are cleared (mode now 755)",
                suid.display()
            ),
        ],
        "{r:?}"
    );
    assert_eq!(
        fs::metadata(&suid).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    // The samples git ships are not hooks.
    assert!(repo.join("b.git/hooks/pre-commit.sample").exists());
}

#[test]
fn a_dot_git_file_leads_to_its_git_dir() {
    let f = fx();
    let hidden = f.root.join("p/.cache/x");
    fs::create_dir_all(&hidden).unwrap();
    git(&hidden, &["init", "-q", "--bare", "repo"]);
    git(&hidden.join("repo"), &["config", "core.sshCommand", "evil"]);
    let sub = f.root.join("p/sub");
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join(".git"), "gitdir: ../.cache/x/repo\n").unwrap();
    // Only the .git file's directory is a root: the git dir is reached through the pointer.
    let r = sweep(&spec(&[&sub], 60));
    assert_eq!(r.findings.len(), 1, "{r:?}");
    assert_eq!(r.findings[0].path, hidden.join("repo/config"));
}

#[test]
fn render_says_what_to_do() {
    let r = Report {
        findings: vec![Finding {
            path: "/p/.git/commondir".into(),
            found: "f".into(),
            done: "d".into(),
        }],
        incomplete: vec!["stopped after 1 entries".into()],
    };
    assert_eq!(
        r.render(),
        "agent-sandbox: quarantine: /p/.git/commondir: f; d\nagent-sandbox: the agent wrote the files above; host programs would have run what they name. Check them before you restore anything.\nagent-sandbox: warning: the exit sweep stopped after 1 entries\n"
    );
    assert_eq!(Report::default().render(), "");
}

#[test]
fn git_dirs_hidden_in_a_git_dir_or_behind_a_dot_git_link_are_checked() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo.join(".git"), &["init", "-q", "--bare", "evil"]);
    git(
        &repo.join(".git/evil"),
        &["config", "core.pager", "touch /tmp/pwned"],
    );
    git(
        &repo.join(".git/evil"),
        &["config", "hook.pre-commit.command", "touch /tmp/pwned"],
    );
    fs::create_dir(repo.join("sub")).unwrap();
    std::os::unix::fs::symlink("../.git/evil", repo.join("sub/.git")).unwrap();
    let r = sweep(&spec(&[&repo], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [repo.join(".git/evil/config").as_path()], "{r:?}");
    assert!(
        r.findings[0]
            .found
            .contains("sets core.pager, hook.pre-commit.command"),
        "{r:?}"
    );
}

/// Review finding: a git dir whose HEAD (or objects) is a symlink, which host git accepts, was
/// not taken for a git dir, and its config went unchecked.
#[test]
fn git_dirs_with_linked_head_or_objects_are_git_dirs() {
    let f = fx();
    for (name, how) in [("a", "head"), ("b", "objects")] {
        let repo = f.root.join(name);
        fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        let g = repo.join(".git");
        if how == "head" {
            fs::remove_file(g.join("HEAD")).unwrap();
            std::os::unix::fs::symlink("refs/heads/master", g.join("HEAD")).unwrap();
        } else {
            fs::rename(g.join("objects"), repo.join(".o")).unwrap();
            std::os::unix::fs::symlink("../.o", g.join("objects")).unwrap();
        }
        git(
            &repo,
            &["config", "core.fsmonitor", "touch /tmp/pwned; false #"],
        );
    }
    let r = sweep(&spec(&[&f.root], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    let (a, b) = (f.root.join("a/.git/config"), f.root.join("b/.git/config"));
    assert_eq!(paths, [a.as_path(), b.as_path()], "{r:?}");
}

/// Review finding: a config written in an earlier session while its directory was no git dir
/// (HEAD renamed away) slipped through once HEAD was renamed back: the git dir is new, so its
/// config and hooks are checked whatever their age.
#[test]
fn a_git_dir_made_during_the_session_has_its_old_config_checked() {
    let f = fx();
    let repo = f.root.join("stage/r");
    fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    git(
        &repo,
        &["config", "core.fsmonitor", "touch /tmp/pwned; false #"],
    );
    let hook = repo.join(".git/hooks/post-checkout");
    fs::write(&hook, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    fs::rename(repo.join(".git/HEAD"), repo.join(".git/HEAD.x")).unwrap();
    // "Session 1" ended: nothing is a git dir, nothing is reported.
    assert!(sweep(&spec(&[&f.root], 60)).findings.is_empty());
    std::thread::sleep(std::time::Duration::from_millis(20));
    let session2 = spec(&[&f.root], 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::rename(repo.join(".git/HEAD.x"), repo.join(".git/HEAD")).unwrap();
    let r = sweep(&session2);
    let lines: Vec<String> = r.findings.iter().map(|f| f.to_string()).collect();
    assert_eq!(lines.len(), 2, "{r:?}");
    assert!(
        lines[0].contains(
            "/stage/r/.git/config: in a git dir made during the session, sets core.fsmonitor"
        ),
        "{lines:?}"
    );
    assert!(lines[1].contains("/stage/r/.git/hooks/post-checkout: an executable git hook in a git dir made during the session"), "{lines:?}");
}

/// Review finding: a directory the agent made unreadable (`chmod 311`) hid a git dir from the
/// sweep in silence. It is opened up for its owner and swept.
#[test]
fn unreadable_directories_are_opened_and_swept() {
    let f = fx();
    let hidden = f.root.join(".c");
    fs::create_dir(&hidden).unwrap();
    git(&hidden, &["init", "-q", "--bare", "g"]);
    git(&hidden.join("g"), &["config", "core.sshCommand", "evil"]);
    fs::set_permissions(&hidden, fs::Permissions::from_mode(0o311)).unwrap();
    let r = sweep(&spec(&[&f.root], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [hidden.join("g/config").as_path()], "{r:?}");
    assert!(r.incomplete.is_empty(), "{r:?}");
}

/// What was read-only inside the sandbox is never touched: the launch repository's own config
/// (the user's `!` alias) stays as it is although its git dir changed during the session.
#[test]
fn read_only_binds_are_left_alone() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["config", "alias.lg", "!git log --oneline"]);
    let mut s = spec(&[&repo], 60);
    s.binds = vec![
        (repo.clone(), true),
        (repo.join(".git"), true),
        (repo.join(".git/config"), false),
        (repo.join(".git/hooks"), false),
    ];
    assert!(sweep(&s).findings.is_empty());
    // Without the read-only bind the same config would be stripped.
    s.binds.pop();
    s.binds.pop();
    assert_eq!(sweep(&s).findings.len(), 1);
}

/// Review finding: keys that run commands and were not stripped.
#[test]
fn every_key_that_runs_a_command_is_stripped() {
    let f = fx();
    let repo = f.root.join("r");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let bad = [
        ("credential.helper", "x; touch /tmp/p #"),
        ("credential.https://h.example.helper", "!touch /tmp/p"),
        ("gpg.ssh.defaultKeyCommand", "touch /tmp/p"),
        ("protocol.allow", "always"),
        ("protocol.ext.allow", "always"),
        ("remote.origin.url", "ext::sh -c touch% /tmp/p"),
        ("url.ext::sh -c x.insteadOf", "https://h.example/"),
        ("tar.tgz.command", "touch /tmp/p"),
        ("trailer.sign.command", "touch /tmp/p"),
        ("sendemail.smtpServer", "/tmp/p"),
        ("imap.tunnel", "touch /tmp/p"),
        ("hook.pre-commit.command", "touch /tmp/p"),
        ("lfs.customtransfer.x.path", "/tmp/p"),
        ("guitool.x.cmd", "touch /tmp/p"),
    ];
    let good = [
        ("credential.helper", "store --file ~/.creds"),
        ("remote.upstream.url", "https://h.example/r.git"),
        ("user.name", "Someone"),
    ];
    for (k, v) in bad.iter().chain(&good) {
        assert!(
            git(&repo, &["config", "--add", k, v]).status.success(),
            "{k}"
        );
    }
    let r = sweep(&spec(&[&repo], 60));
    assert_eq!(r.findings.len(), 1, "{r:?}");
    let list = String::from_utf8(git(&repo, &["config", "--list", "--local"]).stdout).unwrap();
    for (k, v) in &bad {
        let line = format!("{k}={v}").to_ascii_lowercase();
        let kept = list.lines().any(|l| l.to_ascii_lowercase() == line);
        assert!(!kept, "{k} kept:\n{list}");
    }
    for (k, v) in &good {
        assert!(list.contains(&format!("{k}={v}")), "{k} lost:\n{list}");
    }
}

/// Review 2, finding 1: a worktree git dir whose common dir has no HEAD; git takes config
/// from the common dir, which the sweep never looked at.
#[test]
fn a_worktree_git_dirs_common_dir_is_checked_head_or_not() {
    let f = fx();
    let x = f.root.join("plain");
    fs::create_dir_all(x.join("objects")).unwrap();
    fs::create_dir_all(x.join("refs")).unwrap();
    fs::create_dir_all(x.join("worktrees/w")).unwrap();
    fs::write(
        x.join("config"),
        "[core]\n\tfsmonitor = \"touch /tmp/pwned; false\"\n",
    )
    .unwrap();
    fs::write(x.join("worktrees/w/HEAD"), "ref: refs/heads/master\n").unwrap();
    fs::write(x.join("worktrees/w/commondir"), "../..\n").unwrap();
    fs::create_dir(f.root.join("sub5")).unwrap();
    fs::write(
        f.root.join("sub5/.git"),
        format!("gitdir: {}\n", x.join("worktrees/w").display()),
    )
    .unwrap();
    let r = sweep(&spec(&[&f.root], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [x.join("config").as_path()], "{r:?}");
}

/// Review 2, finding 2: a git dir hidden below another's `objects/`, reached through a `.git`
/// symlink to a gitfile; and one planted in an earlier session, pointed at in this one.
#[test]
fn git_dirs_under_objects_and_behind_gitfile_links_are_checked() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let evil = repo.join(".git/objects/zz/evil");
    fs::create_dir_all(evil.join("objects")).unwrap();
    fs::create_dir_all(evil.join("refs")).unwrap();
    fs::write(evil.join("HEAD"), "ref: refs/heads/master\n").unwrap();
    fs::write(
        evil.join("config"),
        "[core]\n\tfsmonitor = \"touch /tmp/pwned; false\"\n",
    )
    .unwrap();
    // Session 1 ends: evil/config is old from here on.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let session2 = spec(&[&repo], 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::create_dir(repo.join("sub")).unwrap();
    fs::write(
        repo.join("sub/gitfile"),
        format!("gitdir: {}\n", evil.display()),
    )
    .unwrap();
    std::os::unix::fs::symlink("gitfile", repo.join("sub/.git")).unwrap();
    let r = sweep(&session2);
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [evil.join("config").as_path()], "{r:?}");
    // Without the pointer, the walk below objects/ finds it too (one session).
    let g = fx();
    let repo = g.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let hidden = repo.join(".git/objects/zz/evil");
    fs::create_dir_all(&hidden).unwrap();
    git(&hidden, &["init", "-q", "--bare", "."]);
    git(&hidden, &["config", "core.pager", "touch /tmp/pwned"]);
    let r = sweep(&spec(&[&repo], 60));
    assert_eq!(r.findings.len(), 1, "{r:?}");
}

/// Review 2, finding 5: an interrupted rebase whose todo list has `exec` lines.
#[test]
fn rebase_todo_lists_with_exec_lines_are_quarantined() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    fs::create_dir_all(repo.join(".git/rebase-merge")).unwrap();
    let todo = repo.join(".git/rebase-merge/git-rebase-todo");
    fs::write(&todo, "break\nexec touch /tmp/pwned\n").unwrap();
    fs::create_dir_all(repo.join(".git/sequencer")).unwrap();
    fs::write(repo.join(".git/sequencer/todo"), "pick abc x\n").unwrap();
    let r = sweep(&spec(&[&repo], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [todo.as_path()], "{r:?}");
}

/// Review 2 finding 3, review 4: a git dir deeper than PATH_MAX (built with *at calls, as the
/// agent would) was skipped in silence, or listed but its config not read; a rename in the
/// next session then brought it within reach of host git. It is swept where it is.
#[test]
fn git_dirs_deeper_than_path_max_are_swept() {
    use std::os::fd::{AsRawFd, FromRawFd};
    let f = fx();
    let name = "d".repeat(250);
    let mut cur = fs::File::open(&f.root).unwrap();
    let mut deep = f.root.clone();
    let at = |n: &str| std::ffi::CString::new(n).unwrap();
    let mkdir_open = |dir: &fs::File, n: &str| {
        let c = at(n);
        unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o755) };
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY,
            )
        };
        assert!(fd >= 0, "{n}");
        unsafe { fs::File::from_raw_fd(fd) }
    };
    let write_at = |dir: &fs::File, n: &str, text: &str| {
        let c = at(n);
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT,
                0o644,
            )
        };
        assert!(fd >= 0);
        let mut file = unsafe { fs::File::from_raw_fd(fd) };
        file.write_all(text.as_bytes()).unwrap();
    };
    for _ in 0..17 {
        cur = mkdir_open(&cur, &name);
        deep.push(&name);
    }
    let git = mkdir_open(&cur, ".git");
    mkdir_open(&git, "objects");
    mkdir_open(&git, "refs");
    write_at(&git, "HEAD", "ref: refs/heads/master\n");
    write_at(
        &git,
        "config",
        "[core]\n\tfsmonitor = \"touch /tmp/pwned; false\"\n",
    );
    assert!(deep.join(".git/config").as_os_str().len() > 4096);
    let r = sweep(&spec(&[&f.root], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(
        paths,
        [deep.join(".git/config").as_path()],
        "{:?}",
        r.incomplete
    );
    assert!(
        r.findings[0]
            .done
            .starts_with(&format!("moved to {}", deep.display()))
    );
    assert!(r.incomplete.is_empty(), "{:?}", r.incomplete);
}

/// An old `include.path` (the user's, or one planted in an earlier session) naming a file the
/// agent writes in this one: the included file is checked like a config written now, also
/// when the including config was read-only inside (the launch repository's own).
#[test]
fn files_an_old_config_includes_are_checked_when_written() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["config", "include.path", "../shared.gitconfig"]);
    git(&repo, &["config", "alias.lg", "!git log"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let session = spec(&[&f.root], 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let shared = repo.join("shared.gitconfig");
    fs::write(
        &shared,
        "[core]\n\tfsmonitor = \"touch /tmp/pwned; false\"\n",
    )
    .unwrap();
    let mut s = session.clone();
    s.binds = vec![(f.root.clone(), true), (repo.join(".git/config"), false)];
    let r = sweep(&s);
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [shared.as_path()], "{r:?}");
    // The including config itself (old, read-only inside) is untouched, its `!` alias too.
    let list = String::from_utf8(git(&repo, &["config", "--list", "--local"]).stdout).unwrap();
    assert!(list.contains("alias.lg=!git log"), "{list}");
    assert!(!list.contains("fsmonitor"), "{list}");
}

/// Review 3: a gitfile ending in "\n\0" names a dir whose name ends in a newline, as git reads
/// it; and it was hidden in a fan-out dir of objects/.
#[test]
fn gitfiles_are_read_in_gits_order_and_fan_out_dirs_are_not_hiding_places() {
    let f = fx();
    let repo = f.root.join("p");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let g = repo.join(".git/objects/ab/G\n");
    fs::create_dir_all(g.join("objects")).unwrap();
    fs::create_dir_all(g.join("refs")).unwrap();
    fs::write(g.join("HEAD"), "ref: refs/heads/master\n").unwrap();
    fs::write(
        g.join("config"),
        "[core]\n\tfsmonitor = \"touch /tmp/pwned; false\"\n",
    )
    .unwrap();
    fs::create_dir(repo.join("wt2")).unwrap();
    fs::write(repo.join("wt2/.git"), "gitdir: ../.git/objects/ab/G\n\0").unwrap();
    let r = sweep(&spec(&[&repo], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [g.join("config").as_path()], "{r:?}");
}

/// Review 3: a `.git` pointer written now that names nothing yet (a later rename would make it
/// name a git dir hidden elsewhere) is quarantined; an old dangling one is left alone.
#[test]
fn dangling_pointers_written_during_the_session_are_quarantined() {
    let f = fx();
    fs::create_dir(f.root.join("wt3")).unwrap();
    fs::write(f.root.join("wt3/.git"), "gitdir: ../nowhere/G\n").unwrap();
    let r = sweep(&spec(&[&f.root], 60));
    assert_eq!(r.findings.len(), 1, "{r:?}");
    assert!(
        r.findings[0]
            .found
            .starts_with("a .git pointer written during the session that names no git directory"),
        "{r:?}"
    );
    assert!(!f.root.join("wt3/.git").exists());
    fs::write(f.root.join("wt3/.git"), "gitdir: ../nowhere/G\n").unwrap();
    assert!(sweep(&spec(&[&f.root], -3600)).findings.is_empty());
}

/// Review 3: a linked hooks dir, dangling in one session and given a target by a rename in the
/// next, ran an old executable as `pre-commit`. The link goes when it is written (or its
/// target renamed into place) during a session.
#[test]
fn linked_hooks_dirs_written_or_retargeted_during_the_session_are_quarantined() {
    let f = fx();
    let n = f.root.join("n");
    fs::create_dir(&n).unwrap();
    git(&n, &["init", "-q"]);
    fs::remove_dir_all(n.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../../hk", n.join(".git/hooks")).unwrap();
    fs::create_dir(f.root.join("tools")).unwrap();
    let hook = f.root.join("tools/pre-commit");
    fs::write(&hook, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    // Session 1 ends; the link is old from here on (the sweep of session 1 is skipped here).
    std::thread::sleep(std::time::Duration::from_millis(20));
    let session2 = spec(&[&f.root], 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::rename(f.root.join("tools"), f.root.join("hk")).unwrap();
    let r = sweep(&session2);
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [n.join(".git/hooks").as_path()], "{r:?}");
    assert!(
        f.root.join("hk/pre-commit").exists(),
        "the scripts themselves are left alone"
    );
    // Written in this session, dangling: caught at once, in the session that wrote it.
    let g = fx();
    let m = g.root.join("m");
    fs::create_dir(&m).unwrap();
    git(&m, &["init", "-q"]);
    fs::remove_dir_all(m.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../../hk", m.join(".git/hooks")).unwrap();
    let r = sweep(&spec(&[&g.root], 60));
    let paths: Vec<&Path> = r.findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [m.join(".git/hooks").as_path()], "{r:?}");
}
