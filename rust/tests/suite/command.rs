//! Agents installed outside Nix, under `$HOME` (empty inside): found on the caller's PATH and
//! exposed read-only, so `agent-sandbox run -- claude` runs; nothing more of `$HOME` comes
//! along, the files stay read-only, and links into `~/.ssh` are refused.
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

fn script(f: &Fixture, rel: &str, body: &str) -> PathBuf {
    let p = f.write(rel, body);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// `agent-sandbox run [extra…] -- ARGV` with `dirs` first on the caller's PATH.
fn run_with_path(f: &Fixture, dirs: &[&Path], extra: &[&str], argv: &[&str]) -> Command {
    let mut path: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    path.push("/usr/local/bin:/usr/bin:/bin".into());
    let mut c = f.cmd();
    c.env("PATH", path.join(":"))
        .arg("run")
        .arg("--no-network")
        .args(extra)
        .arg("--")
        .args(argv);
    c
}

#[test]
fn an_agent_linked_from_local_bin_runs_with_its_sibling_files_read_only() {
    let f = Fixture::new();
    let version = f.home.join(".local/share/claude/versions/1.2.3");
    let real = script(
        &f,
        "home/.local/share/claude/versions/1.2.3/claude",
        "#!/bin/sh\necho 'agent ok'\ncat \"$(dirname \"$(readlink -f \"$0\")\")/data\"\n",
    );
    f.write("home/.local/share/claude/versions/1.2.3/data", "sibling\n");
    f.write("home/.local/share/other/secret", "OTHER-SECRET\n");
    let bin = f.home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(&real, bin.join("claude")).unwrap();

    let o = run(run_with_path(&f, &[&bin], &[], &["claude"]));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "agent ok\nsibling\n", "{o:?}");
    assert!(
        o.stderr.contains(
            "agent-sandbox: warning: claude is not on the sandbox's PATH but was found on yours at ~/.local/bin/claude -> ~/.local/share/claude/versions/1.2.3/claude; exposed read-only (the same as --ro ~/.local/bin/claude --ro ~/.local/share/claude/versions/1.2.3 --env PATH="
        ),
        "{o:?}"
    );

    // Read-only, and nothing else of ~/.local: the attempts fail, the host files are intact.
    let attempts = format!(
        "echo x > {v}/data || echo denied-data; rm {v}/claude || echo denied-rm; \
         cat ~/.local/share/other/secret || echo no-other; echo PATH=$PATH",
        v = version.display()
    );
    let o = run(run_with_path(&f, &[&bin], &[], &["sh", "-c", &attempts]));
    assert!(o.stdout.contains("denied-data\n"), "{o:?}");
    assert!(o.stdout.contains("denied-rm\n"), "{o:?}");
    assert!(o.stdout.contains("no-other\n"), "{o:?}");
    assert!(!o.stdout.contains("OTHER-SECRET"), "{o:?}");
    // `sh` is found inside: nothing is exposed for it, PATH is the sandbox's own.
    assert!(!o.stdout.contains(&bin.display().to_string()), "{o:?}");
    assert!(!o.stderr.contains("found on yours"), "{o:?}");
    let data = version.join("data");
    assert_eq!(std::fs::read_to_string(data).unwrap(), "sibling\n");
    assert!(real.exists());
}

#[test]
fn an_nvm_style_script_runs_with_the_node_next_to_it() {
    let f = Fixture::new();
    let v = "home/.nvm/versions/node/v20.1.0";
    // The interpreter stand-in: runs its script argument with sh.
    script(
        &f,
        &format!("{v}/bin/node"),
        "#!/bin/sh\necho \"node stand-in\"\nexec /bin/sh \"$@\"\n",
    );
    let pkg = format!("{v}/lib/node_modules/@anthropic-ai/claude-code");
    script(
        &f,
        &format!("{pkg}/cli.js"),
        // Node resolves its main script's links to find its modules; so does this one.
        "#!/usr/bin/env node\necho 'agent ok'\ncat \"$(dirname \"$(readlink -f \"$0\")\")/node_modules/dep/index.js\"\n",
    );
    f.write(format!("{pkg}/node_modules/dep/index.js"), "dep here\n");
    f.write(format!("{v}/lib/node_modules/npm/SECRET"), "NPM-OTHER\n");
    let bin = f.root().join(v).join("bin");
    symlink(
        "../lib/node_modules/@anthropic-ai/claude-code/cli.js",
        bin.join("claude"),
    )
    .unwrap();

    let o = run(run_with_path(&f, &[&bin], &[], &["claude"]));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "node stand-in\nagent ok\ndep here\n", "{o:?}");
    assert!(
        o.stderr.contains(
            ", its interpreter node at ~/.nvm/versions/node/v20.1.0/bin/node; exposed read-only"
        ),
        "{o:?}"
    );
    // Only what it needs: another global package of that node is not there.
    let other = f.root().join(v).join("lib/node_modules/npm/SECRET");
    let o = run(run_with_path(
        &f,
        &[&bin],
        &[],
        &[
            "sh",
            "-c",
            &format!("cat {} || echo absent", other.display()),
        ],
    ));
    assert_eq!(o.stdout, "absent\n", "{o:?}");
}

#[test]
fn a_command_found_nowhere_still_fails_with_not_found() {
    let f = Fixture::new();
    let bin = f.home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let o = run(run_with_path(&f, &[&bin], &[], &["no-such-agent-xyz"]));
    assert_eq!(o.code, 127, "{o:?}");
    assert!(
        o.stderr
            .contains("command not found inside the sandbox: no-such-agent-xyz"),
        "{o:?}"
    );
    assert!(!o.stderr.contains("found on yours"), "{o:?}");
}

#[test]
fn a_command_linked_into_ssh_is_refused_and_the_flags_printed() {
    let f = Fixture::new();
    f.write("home/.ssh/id_ed25519", "PRIVATE-KEY-MARKER-77\n");
    let tool = script(
        &f,
        "home/.ssh/tool",
        "#!/bin/sh\ncat \"$(dirname \"$0\")/id_ed25519\"\n",
    );
    let bin = f.home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(&tool, bin.join("tool")).unwrap();
    let o = run(run_with_path(&f, &[&bin], &[], &["tool"]));
    assert_eq!(o.code, 127, "{o:?}");
    assert!(!o.stdout.contains("PRIVATE-KEY"), "{o:?}");
    assert!(
        o.stderr.contains(
            "not exposed automatically: ~/.ssh/tool is or holds a sensitive directory. If you mean it: --ro ~/.local/bin/tool --ro ~/.ssh/tool --env PATH="
        ),
        "{o:?}"
    );
}

#[test]
fn closure_mode_does_not_look_at_the_callers_path() {
    let f = Fixture::new();
    let real = script(&f, "home/.local/share/a/1.0/claude", "#!/bin/sh\necho hi\n");
    let bin = f.home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(&real, bin.join("claude")).unwrap();
    let tools = f.root().join("store/x-tools");
    std::fs::create_dir_all(tools.join("bin")).unwrap();
    let spec = f.write(
        "spec.json",
        &format!(
            r#"{{"version": 1, "closure": ["{t}"], "path": ["{t}/bin"]}}"#,
            t = tools.display()
        ),
    );
    let spec = spec.to_str().unwrap();
    let o = run(run_with_path(
        &f,
        &[&bin],
        &["--spec", spec, "--dry-run", "--json"],
        &["claude"],
    ));
    assert_eq!(o.code, 0, "{o:?}");
    let plan: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let mounts = plan["mounts"].as_array().unwrap();
    assert!(mounts.iter().all(|m| m["why"] != "Command"), "{o:?}");
    assert!(!o.stdout.contains(".local"), "{o:?}");
    assert_eq!(plan["env"]["PATH"], format!("{}/bin", tools.display()));
    assert!(!o.stderr.contains("found on yours"), "{o:?}");
}

/// Removes a path outside the fixture when the test ends, however it ends.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[test]
fn a_link_to_a_program_straight_in_a_shared_temporary_directory_exposes_the_program_alone() {
    // /var/tmp holds other programs' files and sockets (a read-only bind leaves a socket
    // connectable): the attempt reads a neighbour of the program there, and fails.
    let f = Fixture::new();
    let id = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let tool = PathBuf::from(format!("/var/tmp/as-test-tool-{id}"));
    let secret = PathBuf::from(format!("/var/tmp/as-test-neighbour-{id}"));
    let _cleanup = RemoveOnDrop(vec![tool.clone(), secret.clone()]);
    std::fs::write(&secret, "NEIGHBOUR-SECRET-31\n").unwrap();
    std::fs::write(
        &tool,
        format!(
            "#!/bin/sh\necho tool-ran\ncat {} || echo no-neighbour\n",
            secret.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = f.home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(&tool, bin.join("tmptool")).unwrap();

    let o = run(run_with_path(&f, &[&bin], &[], &["tmptool"]));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, "tool-ran\nno-neighbour\n", "{o:?}");
    assert!(!o.stdout.contains("NEIGHBOUR-SECRET"), "{o:?}");
    assert!(
        o.stderr
            .contains(&format!("--ro {} --env PATH=", tool.display())),
        "{o:?}"
    );
}

#[test]
fn an_installation_directory_holding_a_socket_is_not_exposed_automatically() {
    // Declared directories get their sockets masked; an automatic exposure would not, and a
    // read-only bind leaves a socket connectable. The attempt connects from inside.
    let f = Fixture::new();
    let version = f.home.join(".local/share/tool/1.0");
    script(
        &f,
        "home/.local/share/tool/1.0/tool",
        "#!/bin/sh\necho tool-ran\ntest -S \"$(dirname \"$(readlink -f \"$0\")\")\"/agent.sock && echo socket-visible\n",
    );
    let sock = version.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let bin = f.home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(version.join("tool"), bin.join("tool")).unwrap();

    let o = run(run_with_path(&f, &[&bin], &[], &["tool"]));
    assert_eq!(o.code, 127, "{o:?}");
    assert!(!o.stdout.contains("socket-visible"), "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "not exposed automatically: {} holds the Unix socket {}, which a read-only bind leaves connectable. If you mean it: --ro ~/.local/bin/tool --ro ~/.local/share/tool/1.0 --env PATH=",
            version.display(),
            sock.display()
        )),
        "{o:?}"
    );
    // The flags printed do expose it, with the socket masked.
    let o = run(run_with_path(
        &f,
        &[&bin],
        &["--ro", &version.display().to_string()],
        &[
            "sh",
            "-c",
            &format!(
                "{}/tool; test -S {} || echo masked",
                version.display(),
                sock.display()
            ),
        ],
    ));
    assert_eq!(o.stdout, "tool-ran\nmasked\n", "{o:?}");
}

#[test]
fn a_directory_holding_the_state_directory_is_not_exposed_automatically() {
    // The launcher's logs and other sessions' files: a program lying next to them.
    let f = Fixture::new();
    f.write(
        "state/agent-sandbox/old-session/launch.log",
        "OLD-SESSION-LOG-55\n",
    );
    let tool = script(
        &f,
        "state/tool",
        "#!/bin/sh\necho tool-ran\ncat \"$(dirname \"$(readlink -f \"$0\")\")\"/agent-sandbox/old-session/launch.log\n",
    );
    let bin = f.home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(&tool, bin.join("tool")).unwrap();
    let o = run(run_with_path(&f, &[&bin], &[], &["tool"]));
    assert!(!o.stdout.contains("OLD-SESSION-LOG"), "{o:?}");
    assert_eq!(o.code, 127, "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "not exposed automatically: {} holds agent-sandbox's state directory {}",
            f.state.display(),
            f.state.join("agent-sandbox").display()
        )),
        "{o:?}"
    );
}

#[test]
fn an_escape_sequence_in_a_found_path_does_not_reach_the_terminal() {
    // Whoever could write the installation directory chose its names; the warning quotes them.
    let f = Fixture::new();
    let real = script(
        &f,
        "home/.local/share/ev\u{1b}]0;pwned\u{7}\u{1b}[2J/1.0/tool",
        "#!/bin/sh\necho tool-ran\n",
    );
    let bin = f.home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(&real, bin.join("tool")).unwrap();
    let o = run(run_with_path(&f, &[&bin], &[], &["tool"]));
    assert_eq!(o.stdout, "tool-ran\n", "{o:?}");
    assert!(!o.stderr.contains('\u{1b}'), "{o:?}");
    assert!(!o.stderr.contains('\u{7}'), "{o:?}");
    assert!(
        o.stderr
            .contains("~/.local/share/ev\\u{1b}]0;pwned\\u{7}\\u{1b}[2J/1.0/tool"),
        "{o:?}"
    );
}
