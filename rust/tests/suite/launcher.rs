//! The launcher's own footing: the programs it runs outside the sandbox (bwrap, pasta, ip)
//! never come from a directory the agent can write, the descriptors its caller leaked reach
//! none of its helpers, and the session log holds no environment values.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::*;

/// A planted tool: records that it ran (it would run outside the sandbox), then execs the
/// real one so the launch would otherwise go on as usual.
fn plant(dir: &Path, name: &str, real: &str, marker: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\necho ran >> '{}'\nexec {real} \"$@\"\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Regression (issue 9, item 2): the launcher found bwrap, pasta and ip through PATH, so an
/// agent-writable `.venv/bin` on PATH ran the agent's `bwrap` unconfined at the next launch.
#[test]
fn tools_on_a_writable_path_entry_are_never_run() {
    let f = Fixture::new();
    let bin = f.proj.join(".venv/bin");
    let marker = f.root().join("planted-ran");
    for (name, real) in [
        ("bwrap", "/usr/bin/bwrap"),
        ("pasta", "/usr/bin/pasta"),
        ("ip", "/usr/sbin/ip"),
    ] {
        plant(&bin, name, real, &marker);
    }
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin", bin.display());
    for mode in [&["--no-network"][..], &[][..]] {
        let mut c = f.sh(mode, "echo inside");
        c.env("PATH", &path);
        let o = run(c);
        assert_eq!(o.code, 0, "{o:?}");
        assert_eq!(o.stdout, "inside\n", "{o:?}");
        assert!(!marker.exists(), "a planted tool ran on the host: {o:?}");
        assert!(
            o.stderr.contains(&format!(
                "agent-sandbox: warning: your PATH holds {} (in {}), which the sandbox can write: a program the agent plants there runs on your host, unconfined, the next time you type its name.",
                bin.display(),
                f.proj.display()
            )),
            "{o:?}"
        );
    }
    // An explicit override into a writable path is refused too.
    let mut c = f.sh(&["--no-network"], "echo inside");
    c.env("AGENT_SANDBOX_BWRAP", bin.join("bwrap"));
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "agent-sandbox: error: bwrap would be taken from {}, which lies in {}, a path the sandbox can write",
            bin.join("bwrap").display(),
            f.proj.display()
        )),
        "{o:?}"
    );
    assert!(!marker.exists());
    // A PATH without writable entries gives no warning.
    let o = run(f.sh(&["--no-network"], "true"));
    assert!(!o.stderr.contains("your PATH holds"), "{o:?}");
}

/// Regression (issue 9, item 4): descriptors the caller leaked were passed on to bwrap, the
/// namespace holder and pasta (processes outside the sandbox's mount namespace). None of the
/// session's processes may hold them.
#[test]
fn leaked_descriptors_reach_no_process_of_the_session() {
    let f = Fixture::new();
    let secret = f.write("home/.ssh/id_ed25519", "PRIVATE-KEY-3f1a\n");
    let marker = unique_marker();
    let ready = f.proj.join("ready");
    let mut c = f.sh(&[], &format!("touch ready; sleep {marker}"));
    let home = std::fs::File::open(&f.home).unwrap();
    let key = std::fs::File::open(&secret).unwrap();
    leak_fds(&mut c, &[(&home, 7), (&key, 9)]);
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    assert!(eventually(std::time::Duration::from_secs(10), || ready.exists()));
    let mut pids: Vec<i32> = processes_with(&marker).iter().map(|p| p.0).collect();
    // pasta and the holder carry no marker: the session's pasta.pid names pasta.
    for e in std::fs::read_dir(f.state.join("agent-sandbox"))
        .unwrap()
        .flatten()
    {
        if let Ok(p) = std::fs::read_to_string(e.path().join("pasta.pid")) {
            pids.extend(p.trim().parse::<i32>().ok());
        }
    }
    let mut leaks = Vec::new();
    for pid in &pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let target = std::fs::read_link(fd.path()).unwrap_or_default();
            if target == f.home || target == secret {
                leaks.push(format!(
                    "{pid}: {} -> {}",
                    fd.path().display(),
                    target.display()
                ));
            }
        }
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    assert!(
        pids.len() >= 3,
        "did not find the session's processes: {pids:?}"
    );
    assert!(leaks.is_empty(), "leaked descriptors: {leaks:?}");
}

/// Regression (issue 9, item 15): `--env NAME` values landed in clear in launch.log unless the
/// name looked secret. The log names the variables only.
#[test]
fn the_session_log_holds_no_environment_values() {
    let f = Fixture::new();
    let mut c = f.sh(
        &[
            "--no-network",
            "--env",
            "PLAIN_NAME",
            "--env",
            "EDITOR=vim-value-8a1c",
        ],
        "echo $PLAIN_NAME",
    );
    c.env("PLAIN_NAME", "tok-value-4d2b");
    assert_eq!(ok(c), "tok-value-4d2b\n");
    let base = f.state.join("agent-sandbox");
    let mut found = 0;
    for e in std::fs::read_dir(&base).unwrap().flatten() {
        for file in ["launch.log", "argv.json"] {
            let Ok(text) = std::fs::read_to_string(e.path().join(file)) else {
                continue;
            };
            found += 1;
            assert!(!text.contains("tok-value-4d2b"), "{file}: {text}");
            assert!(!text.contains("vim-value-8a1c"), "{file}: {text}");
            if file == "launch.log" {
                assert!(text.contains("\n  PLAIN_NAME\n"), "{text}");
                assert!(text.contains("\n  EDITOR\n"), "{text}");
            }
        }
    }
    assert_eq!(found, 2);
    // --dry-run, on the terminal, still shows the non-secret values.
    let o = ok(f.sh(&["--dry-run", "--env", "EDITOR=vim-value-8a1c"], "true"));
    assert!(o.contains("  EDITOR=\"vim-value-8a1c\""), "{o}");
}
