//! What the sandbox sees of the filesystem: the project read-write, an empty `$HOME` holding only
//! the declared paths, a private `/tmp`, the host system read-only.
use std::path::{Path, PathBuf};

use crate::common::*;

fn read(p: impl AsRef<Path>) -> String {
    std::fs::read_to_string(p.as_ref())
        .unwrap_or_else(|e| panic!("read {}: {e}", p.as_ref().display()))
}

/// A name unique to this test run, for paths in shared places such as `/tmp`.
fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("as-probe-{tag}-{}-{nanos}", std::process::id())
}

#[test]
fn the_project_is_read_write() {
    let f = Fixture::new();
    std::fs::write(f.proj.join("existing.txt"), "from host\n").unwrap();
    let out = ok(f.sh(
        &["--no-network"],
        "cat existing.txt && echo appended >> existing.txt && echo new > written.txt && cat written.txt",
    ));
    assert_eq!(out, "from host\nnew\n");
    assert_eq!(read(f.proj.join("written.txt")), "new\n");
    assert_eq!(read(f.proj.join("existing.txt")), "from host\nappended\n");
}

#[test]
fn siblings_of_home_are_not_visible() {
    let f = Fixture::new();
    let outside = f.write("outside.txt", "outside-secret\n");
    let script = format!(
        "cat '{}' 2>/dev/null && echo READABLE; echo x > '{}' 2>/dev/null; ls -A '{}'",
        outside.display(),
        f.root().join("planted.txt").display(),
        f.root().display()
    );
    let out = ok(f.sh(&["--no-network"], &script));
    // Only the mount point leading to $HOME exists: no outside.txt, no state dir.
    assert!(!out.contains("outside-secret"), "{out}");
    assert!(!out.contains("READABLE"), "{out}");
    assert!(
        out.lines().all(|l| l != "outside.txt" && l != "state"),
        "{out}"
    );
    assert!(out.lines().any(|l| l == "home"), "{out}");
    assert_eq!(read(&outside), "outside-secret\n");
    assert!(
        !f.root().join("planted.txt").exists(),
        "a write next to $HOME reached the host"
    );
}

#[test]
fn usr_is_read_only() {
    let f = Fixture::new();
    let name = unique("usr");
    let probe = Path::new("/usr").join(&name);
    let script = format!(
        "test -x /usr/bin/env && echo env-ok; \
         if touch /usr/{name} 2>/dev/null; then echo WROTE; else echo denied; fi; \
         if mkdir /usr/bin/{name} 2>/dev/null; then echo WROTE; else echo denied; fi"
    );
    let o = run(f.sh(&["--no-network"], &script));
    // Clean up before asserting: as root a regression would write the host's /usr.
    let leaked = probe.exists() || Path::new("/usr/bin").join(&name).exists();
    let _ = std::fs::remove_file(&probe);
    let _ = std::fs::remove_dir(Path::new("/usr/bin").join(&name));
    assert!(!leaked, "the sandbox wrote the host's /usr: {o:?}");
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "env-ok\ndenied\ndenied\n", "{o:?}");
}

#[test]
fn ssh_keys_in_home_are_not_readable() {
    let f = Fixture::new();
    f.write("home/.ssh/id_ed25519", "PRIVATE-KEY-MARKER\n");
    f.write("home/.aws/credentials", "AWS-MARKER\n");
    std::fs::create_dir(f.home.join(".claude")).unwrap();
    let script = "cat ~/.ssh/id_ed25519 && echo READ; \
                  cat ~/.aws/credentials && echo READ; \
                  grep -rs MARKER ~ /tmp; \
                  ls -A ~";
    let o = run(f.sh(&["--no-network"], script));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stdout.contains("MARKER"), "{o:?}");
    assert!(!o.stdout.contains("READ"), "{o:?}");
    assert!(o.stderr.contains("No such file"), "{o:?}");
    assert!(o.stdout.ends_with("proj\n"), "{o:?}");
    assert_eq!(o.stdout.lines().last(), Some("proj"));
    assert_eq!(o.stdout.lines().count(), 1, "$HOME holds more: {o:?}");

    // With a declared path, exactly that path joins the project.
    let out = ok(f.sh(&["--no-network", "--rw", "~/.claude"], "ls -A ~"));
    assert_eq!(out, ".claude\nproj\n");
}

#[test]
fn home_writes_vanish_after_exit() {
    let f = Fixture::new();
    let out = ok(f.sh(
        &["--no-network"],
        "echo scratch > ~/scratch && cat ~/scratch && mkdir -p ~/.cache/x && echo ok",
    ));
    assert_eq!(out, "scratch\nok\n", "writing into the empty $HOME works");
    assert!(!f.home.join("scratch").exists(), "reached the host's $HOME");
    assert!(!f.home.join(".cache").exists(), "reached the host's $HOME");
    let out = ok(f.sh(
        &["--no-network"],
        "test -e ~/scratch && echo present || echo absent",
    ));
    assert_eq!(out, "absent\n");
}

#[test]
fn tmp_writes_vanish_after_exit() {
    let f = Fixture::new();
    let name = unique("tmp");
    let script = format!("echo t > /tmp/{name} && cat /tmp/{name}");
    assert_eq!(ok(f.sh(&["--no-network"], &script)), "t\n");
    assert!(
        !Path::new("/tmp").join(&name).exists(),
        "the sandbox's /tmp is the host's"
    );
    let script = format!("test -e /tmp/{name} && echo present || echo absent");
    assert_eq!(ok(f.sh(&["--no-network"], &script)), "absent\n");
}

#[test]
fn a_declared_rw_dir_persists_writes() {
    let f = Fixture::new();
    f.write("home/.claude/seen", "host data\n");
    let out = ok(f.sh(
        &["--no-network", "--rw", "~/.claude"],
        "cat ~/.claude/seen && echo agent > ~/.claude/new && mkdir ~/.claude/sub && echo ok",
    ));
    assert_eq!(out, "host data\nok\n");
    assert_eq!(read(f.home.join(".claude/new")), "agent\n");
    assert!(f.home.join(".claude/sub").is_dir());
}

#[test]
fn a_declared_ro_dir_is_readable_but_not_writable() {
    let f = Fixture::new();
    let conf = f.write("home/.config/tool/conf", "v=1\n");
    let script = "cat ~/.config/tool/conf; \
                  (echo evil > ~/.config/tool/conf) 2>/dev/null && echo WROTE; \
                  touch ~/.config/tool/new 2>/dev/null && echo CREATED; \
                  rm -f ~/.config/tool/conf 2>/dev/null; \
                  mv ~/.config/tool ~/.config/moved 2>/dev/null && echo MOVED; \
                  echo done";
    let out = ok(f.sh(&["--no-network", "--ro", "~/.config/tool"], script));
    assert_eq!(out, "v=1\ndone\n");
    assert_eq!(read(&conf), "v=1\n");
    assert!(!f.home.join(".config/tool/new").exists());
}

#[test]
fn declared_files_rw_and_ro() {
    let f = Fixture::new();
    let json = f.write("home/.claude.json", "{}\n");
    let gitconfig = f.write("home/.gitconfig", "[user]\n\tname = Me\n");
    let script = "cat ~/.claude.json; echo '{\"a\":1}' > ~/.claude.json && echo rw-ok; \
                  cat ~/.gitconfig; \
                  (echo '[core]' >> ~/.gitconfig) 2>/dev/null && echo WROTE; \
                  rm -f ~/.gitconfig 2>/dev/null; \
                  echo done";
    let out = ok(f.sh(
        &[
            "--no-network",
            "--rw",
            "~/.claude.json",
            "--ro",
            "~/.gitconfig",
        ],
        script,
    ));
    assert_eq!(out, "{}\nrw-ok\n[user]\n\tname = Me\ndone\n");
    assert_eq!(read(&json), "{\"a\":1}\n");
    assert_eq!(read(&gitconfig), "[user]\n\tname = Me\n");
}

#[test]
fn declared_paths_appear_at_their_real_paths_with_parents_created() {
    let f = Fixture::new();
    f.write("home/.config/a/b/deep/file", "deep\n");
    f.write("home/.config/a/sibling-secret", "SIBLING\n");
    f.write("home/.config/other-secret", "OTHER\n");
    let shared = f.write("shared/data/file", "shared\n");
    let shared_dir = shared.parent().unwrap().to_path_buf();
    f.write("shared/not-declared", "NOT-DECLARED\n");
    let script = format!(
        "cat ~/.config/a/b/deep/file; ls -A ~/.config; ls -A ~/.config/a; \
         cat '{0}/file'; ls -A '{1}'; cat ~/.config/other-secret '{1}/not-declared' 2>/dev/null; \
         echo done",
        shared_dir.display(),
        shared_dir.parent().unwrap().display()
    );
    let out = ok(f.sh(
        &[
            "--no-network",
            "--ro",
            "~/.config/a/b/deep",
            "--ro",
            shared_dir.to_str().unwrap(),
        ],
        &script,
    ));
    assert_eq!(out, "deep\na\nb\nshared\ndata\ndone\n");
}

#[test]
fn missing_declared_paths_are_reported_together() {
    let f = Fixture::new();
    let marker = f.proj.join("ran");
    let o = run(f.sh(
        &["--rw", "~/nope-a", "--ro", "~/nope-b"],
        &format!("touch '{}'", marker.display()),
    ));
    assert_eq!(o.code, 125, "{o:?}");
    let errors: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.starts_with("agent-sandbox: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{o:?}");
    for p in ["nope-a", "nope-b"] {
        let want = f.home.join(p).display().to_string();
        assert!(errors[0].contains(&want), "{want} missing from {o:?}");
    }
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn a_declared_path_of_the_wrong_kind_is_reported() {
    let f = Fixture::new();
    let file = f.write("home/.claude.json", "{}");
    std::fs::create_dir(f.home.join(".claude")).unwrap();
    let spec = f.write(
        "spec.json",
        &format!(
            r#"{{"version": 1, "rwDirs": ["{}"], "roFiles": ["{}"]}}"#,
            file.display(),
            f.home.join(".claude").display()
        ),
    );
    let o = run(f.sh(&["--spec", spec.to_str().unwrap()], "echo RAN"));
    assert_eq!(o.code, 125, "{o:?}");
    assert!(!o.stdout.contains("RAN"), "{o:?}");
    assert!(
        o.stderr
            .contains(&format!("{} (rwDirs) is a file", file.display())),
        "{o:?}"
    );
    assert!(
        o.stderr.contains(&format!(
            "{} (roFiles) is a directory",
            f.home.join(".claude").display()
        )),
        "{o:?}"
    );
}

/// argv never goes through a shell: odd names reach bubblewrap as they are, and a `*` is not a
/// glob that could widen the declaration.
#[test]
fn declared_paths_with_odd_names_work() {
    let f = Fixture::new();
    let names = [
        "with space",
        "single'quote",
        "double\"quote",
        "star*",
        "new\nline",
        "$(touch pwned)",
    ];
    let mut paths: Vec<PathBuf> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let p = f.home.join(n);
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), format!("content {i}\n")).unwrap();
        paths.push(p);
    }
    // What a glob `star*` would also match.
    f.write("home/star-decoy/inside", "DECOY\n");
    let odd_file = f.write("home/file with 'quotes' and\nnewline", "odd file\n");

    let mut flags: Vec<&str> = vec!["--no-network"];
    for (i, p) in paths.iter().enumerate() {
        flags.push(if i % 2 == 0 { "--rw" } else { "--ro" });
        flags.push(p.to_str().unwrap());
    }
    flags.extend(["--ro", odd_file.to_str().unwrap()]);
    let script = r#"for p in "$@"; do cat "$p/inside"; done
        cat "$HOME/star-decoy/inside" 2>/dev/null
        echo written > "$1/new" && echo rw-ok
        (echo x > "$2/new") 2>/dev/null && echo RO-WROTE
        cat "$HOME/file with 'quotes' and
newline""#;
    let mut c = f.sh(&flags, script);
    c.arg("sh").args(&paths);
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    let mut want: String = (0..names.len()).map(|i| format!("content {i}\n")).collect();
    want.push_str("rw-ok\nodd file\n");
    assert_eq!(o.stdout, want, "{o:?}");
    assert_eq!(read(paths[0].join("new")), "written\n");
    assert!(!paths[1].join("new").exists());
    assert!(!f.home.join("pwned").exists() && !f.proj.join("pwned").exists());
}

#[test]
fn host_system_mode_exposes_programs_and_no_secrets() {
    let f = Fixture::new();
    let script = "test -x /bin/sh && test -x /usr/bin/env && echo programs-ok; \
                  ls /etc/ssl/certs | grep -q . && echo certs-ok; \
                  cat /etc/shadow 2>/dev/null && echo SHADOW; test -e /etc/shadow && echo SHADOW-EXISTS; \
                  echo \"PATH=$PATH\"; \
                  ls -A /etc";
    let out = ok(f.sh(&["--no-network"], script));
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("programs-ok"), "{out}");
    assert_eq!(lines.next(), Some("certs-ok"), "{out}");
    assert_eq!(
        lines.next(),
        Some("PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"),
        "{out}"
    );
    // Only the entries programs need, plus the synthetic identity files.
    let allowed = [
        "ssl",
        "ca-certificates",
        "pki",
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "alternatives",
        "localtime",
        "timezone",
        "nsswitch.conf",
        "hosts",
        "host.conf",
        "gai.conf",
        "resolv.conf",
        "services",
        "protocols",
        "mime.types",
        "terminfo",
        "passwd",
        "group",
    ];
    let etc: Vec<&str> = lines.collect();
    assert!(etc.contains(&"passwd") && etc.contains(&"ssl"), "{out}");
    let extra: Vec<&&str> = etc.iter().filter(|e| !allowed.contains(e)).collect();
    assert!(
        extra.is_empty(),
        "unexpected /etc entries inside: {extra:?}"
    );
    if !Path::new("/etc/shadow").exists() {
        eprintln!("NOTE host_system_mode: the host has no /etc/shadow; the check is weaker");
    }
}

/// A closure too large for one bind per path is staged by the namespace holder: inside, the
/// store directory holds exactly the closure's entries (directories, a file, a symlink), read
/// only, and nothing else of the real directory; the launch says so, and bwrap gets one bind.
/// In every network mode (open mode joins the same holder's network namespace).
#[test]
fn a_large_closure_shows_exactly_its_paths_read_only() {
    let f = Fixture::new();
    // Not under /tmp: the sandbox mounts its own /tmp over it.
    let base = tempfile::Builder::new()
        .prefix("as-store.")
        .tempdir_in("/var/tmp")
        .unwrap();
    let store = std::fs::canonicalize(base.path()).unwrap().join("store");
    let tools = store.join("00000000000000000000000000000000-tools");
    std::fs::create_dir_all(tools.join("bin")).unwrap();
    for b in ["sh", "ls", "cat", "touch", "readlink", "wc", "env"] {
        let src = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| std::path::Path::new(d).join(b))
            .find(|p| p.exists())
            .unwrap();
        std::fs::copy(
            std::fs::canonicalize(src).unwrap(),
            tools.join("bin").join(b),
        )
        .unwrap();
    }
    let mut closure = vec![tools.clone()];
    for p in ["/lib", "/lib64", "/usr/lib"] {
        if std::path::Path::new(p).exists() {
            closure.push(p.into());
        }
    }
    for i in 0..40 {
        let p = store.join(format!("{:032x}-pkg{i}", i * 7919));
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("data"), format!("pkg{i}")).unwrap();
        closure.push(p);
    }
    let file = store.join("11111111111111111111111111111111-a.patch");
    std::fs::write(&file, "patch").unwrap();
    let link = store.join("22222222222222222222222222222222-link");
    let pkg0 = closure
        .iter()
        .find(|p| p.to_string_lossy().ends_with("-pkg0"))
        .unwrap()
        .clone();
    std::os::unix::fs::symlink(&pkg0, &link).unwrap();
    closure.push(file.clone());
    closure.push(link.clone());
    let hidden = store.join("33333333333333333333333333333333-secret");
    std::fs::create_dir_all(&hidden).unwrap();
    std::fs::write(hidden.join("data"), "secret").unwrap();
    let spec = f.write(
        "closure.json",
        &serde_json::json!({
            "version": 1,
            "closure": closure,
            "path": [tools.join("bin")],
        })
        .to_string(),
    );
    let spec = spec.to_str().unwrap();
    let dry_run = |mut c: std::process::Command| {
        c.args([
            "run",
            "--no-network",
            "--spec",
            spec,
            "--dry-run",
            "--",
            "true",
        ]);
        ok(c)
    };
    let dry = dry_run(f.cmd());
    assert!(
        dry.contains(&format!("closure: 43 paths in {} staged", store.display())),
        "{dry}"
    );
    let argv = dry.lines().find(|l| l.starts_with("bwrap argv:")).unwrap();
    let one_bind = format!("/store-view {} ", store.display());
    assert_eq!(argv.matches(&one_bind).count(), 1, "{argv}");
    assert!(!argv.contains("-pkg"), "{argv}");

    let s = store.display();
    let script = format!(
        "ls {s} | wc -l; cat {s}/*-pkg7/data; echo; cat {s}/*-a.patch; echo; \
         readlink {s}/*-link; \
         ls {s}/*-secret 2>/dev/null || echo SECRET-HIDDEN; \
         touch {s}/*-pkg7/new 2>/dev/null || echo PKG-RO; \
         touch {s}/new 2>/dev/null || echo DIR-RO"
    );
    let mut modes: Vec<&[&str]> = vec![&["--no-network"], &["--allow-domain", "example.invalid"]];
    if std::path::Path::new("/dev/net/tun").exists() {
        modes.push(&[]);
    }
    // The helper installed in the store directory itself, outside the closure (as with Nix):
    // its init is bound from the real directory, and its package stays invisible.
    let installed = store.join("44444444444444444444444444444444-agent-sandbox/bin");
    std::fs::create_dir_all(&installed).unwrap();
    for b in ["agent-sandbox", "agent-sandbox-init"] {
        let from = bin().with_file_name(b);
        if from.exists() && std::fs::hard_link(&from, installed.join(b)).is_err() {
            std::fs::copy(&from, installed.join(b)).unwrap();
        }
    }
    // The fixture's clean environment, with the installed copy as the program.
    let installed_cmd = || {
        let mut c = std::process::Command::new(installed.join("agent-sandbox"));
        c.env_clear()
            .envs(f.cmd().get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .current_dir(&f.proj);
        c
    };
    for (k, mode) in modes.into_iter().enumerate() {
        let mut c = f.cmd();
        if k == 0 {
            c = installed_cmd();
            let dry = dry_run(installed_cmd());
            // The init binary comes straight from the store (left in place for the holder).
            assert!(
                dry.contains(&format!(
                    "{}/bin/agent-sandbox",
                    installed.parent().unwrap().display()
                )),
                "{dry}"
            );
        }
        c.arg("run")
            .args(mode)
            .args(["--spec", spec, "--", "sh", "-c", &script]);
        let o = run(c);
        assert_eq!(o.code, 0, "{mode:?}: {o:?}");
        assert_eq!(
            o.stdout,
            format!(
                "43\npkg7\npatch\n{}\nSECRET-HIDDEN\nPKG-RO\nDIR-RO\n",
                pkg0.display()
            ),
            "{mode:?}: {o:?}"
        );
    }
    // The host's view is untouched.
    assert!(hidden.join("data").exists());
}

/// workspaceDir / --workspace: that directory is the read-write launch view and the command
/// starts in it; the directory launched from is not exposed.
#[test]
fn a_workspace_replaces_the_launch_dir() {
    let f = Fixture::new();
    let ws = f.root().join("work/ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(f.proj.join("launch-secret"), "launch-secret").unwrap();
    let o = run(f.sh(
        &["--workspace", ws.to_str().unwrap()],
        &format!(
            "pwd; echo made > made; cat {p}/launch-secret || echo no-launch-dir; touch {p}/x || echo ro-launch-dir",
            p = f.proj.display()
        ),
    ));
    assert_eq!(o.code, 0, "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines,
        [ws.to_str().unwrap(), "no-launch-dir", "ro-launch-dir"],
        "{o:?}"
    );
    assert_eq!(read(ws.join("made")), "made\n");
    assert!(!f.proj.join("x").exists());
}

#[test]
fn a_relative_workspace_is_resolved_against_the_launch_dir() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.proj.join("sub")).unwrap();
    let out = ok(f.sh(&["--workspace", "sub"], "pwd"));
    assert_eq!(out.trim(), f.proj.join("sub").to_str().unwrap());
}

#[test]
fn a_missing_workspace_is_refused() {
    let f = Fixture::new();
    let o = run(f.sh(&["--workspace", "~/nowhere"], "echo started"));
    assert_ne!(o.code, 0, "{o:?}");
    assert!(!o.stdout.contains("started"), "{o:?}");
    let want = format!(
        "workspaceDir ~/nowhere ({}) cannot be used",
        f.home.join("nowhere").display()
    );
    assert!(o.stderr.contains(&want), "{o:?}");
    assert!(o.stderr.contains("mkdir -p"), "{o:?}");
}

/// Review 4: `--workspace ""` (a Nix `workspaceDir = "$WS"` with WS unset at launch) ran in
/// the launch directory, the one a workspace is there to replace.
#[test]
fn an_empty_workspace_is_refused() {
    let f = Fixture::new();
    let o = run(f.sh(&["--no-network", "--workspace", ""], "echo started"));
    assert_eq!(o.code, 125, "{o:?}");
    assert!(!o.stdout.contains("started"), "{o:?}");
    assert!(
        o.stderr.contains(
            "workspaceDir \"\" must be a non-empty path (was it a variable, unset at launch?)"
        ),
        "{o:?}"
    );
}

/// With --workspace, a relative path on the command line still means where it was typed.
#[test]
fn relative_flags_are_relative_to_where_they_were_typed_with_a_workspace() {
    let f = Fixture::new();
    let ws = f.root().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(f.proj.join("docs")).unwrap();
    std::fs::write(f.proj.join("docs/readme"), "launch-dir docs").unwrap();
    let out = ok(f.sh(
        &["--workspace", ws.to_str().unwrap(), "--ro", "docs"],
        &format!("cat {}/docs/readme", f.proj.display()),
    ));
    assert_eq!(out, "launch-dir docs");
}
