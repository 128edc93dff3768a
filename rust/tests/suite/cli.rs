//! The command line itself: help, exit codes, errors.
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::common::*;

/// The `agent-sandbox: error: …` lines of a run's stderr.
fn error_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("agent-sandbox: error:"))
        .collect()
}

/// A command whose only effect is creating `<root>/ran`, to prove it did (not) run.
fn marker_script(f: &Fixture) -> (String, std::path::PathBuf) {
    let marker = f.proj.join("ran");
    (format!("touch '{}'", marker.display()), marker)
}

#[test]
fn runs_a_command_and_returns_its_status() {
    let f = Fixture::new();
    assert_eq!(ok(f.sh(&[], "echo hello")), "hello\n");
    assert_eq!(run(f.sh(&[], "exit 0")).code, 0);
    assert_eq!(run(f.sh(&[], "exit 42")).code, 42);
}

#[test]
fn a_command_killed_by_signal_n_gives_128_plus_n() {
    let f = Fixture::new();
    let o = run(f.sh(&["--no-network"], "kill -KILL $$; echo survived"));
    assert_eq!(o.code, 137, "{o:?}");
    assert!(!o.stdout.contains("survived"), "{o:?}");
    let o = run(f.sh(&["--no-network"], "kill -TERM $$; echo survived"));
    assert_eq!(o.code, 143, "{o:?}");
}

#[test]
fn command_not_found_is_127_with_one_error_line() {
    let f = Fixture::new();
    let mut c = f.cmd();
    c.args(["run", "--no-network", "--", "no-such-command-4711", "arg"]);
    let o = run(c);
    assert_eq!(o.code, 127, "{o:?}");
    assert_eq!(o.stdout, "", "{o:?}");
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{o:?}");
    assert!(
        errors[0].starts_with(
            "agent-sandbox: error: command not found inside the sandbox: no-such-command-4711"
        ),
        "{o:?}"
    );

    // An absolute path that is not exposed inside is not found either.
    let mut c = f.cmd();
    c.args(["run", "--no-network", "--", "/usr/bin/no-such-command-4711"]);
    let o = run(c);
    assert_eq!(o.code, 127, "{o:?}");
    assert_eq!(error_lines(&o.stderr).len(), 1, "{o:?}");
}

#[test]
fn a_non_executable_file_is_126_and_becomes_runnable_with_chmod() {
    let f = Fixture::new();
    let tool = f.proj.join("tool.sh");
    std::fs::write(&tool, "#!/bin/sh\necho tool ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o644)).unwrap();
    let cmd = |f: &Fixture| {
        let mut c = f.cmd();
        c.args(["run", "--no-network", "--", "./tool.sh"]);
        c
    };
    let o = run(cmd(&f));
    assert_eq!(o.code, 126, "{o:?}");
    assert!(!o.stdout.contains("tool ran"), "{o:?}");
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{o:?}");
    assert!(errors[0].contains("./tool.sh is not executable"), "{o:?}");

    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(ok(cmd(&f)), "tool ran\n");
}

#[test]
fn an_unknown_flag_is_125_and_runs_nothing() {
    let f = Fixture::new();
    let (script, marker) = marker_script(&f);
    let o = run(f.sh(&["--bogus-flag"], &script));
    assert_eq!(o.code, 125, "{o:?}");
    assert!(o.stderr.contains("--bogus-flag"), "{o:?}");
    assert!(!marker.exists(), "the command ran despite the bad flag");
}

#[test]
fn env_without_equals_is_125_and_names_it() {
    let f = Fixture::new();
    let (script, marker) = marker_script(&f);
    let o = run(f.sh(&["--env", "NOEQUALS"], &script));
    assert_eq!(o.code, 125, "{o:?}");
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{o:?}");
    assert!(errors[0].contains("NOEQUALS"), "{o:?}");
    assert!(!marker.exists(), "the command ran despite the bad --env");

    // The well-formed variant works.
    assert_eq!(ok(f.sh(&["--env", "OK_VAR=1"], "echo $OK_VAR")), "1\n");
}

/// `--env NAME` passes the launcher's value on, keeping it off every command line (the
/// launcher's and bwrap's are world-readable in /proc).
#[test]
fn env_by_name_keeps_the_value_off_command_lines() {
    let f = Fixture::new();
    let secret = "s3cret-value-4711";
    let mut c = f.sh(
        &["--env", "MY_TOKEN"],
        "echo $MY_TOKEN; for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null; done | tr '\\0' ' ' | grep -c 's3cret-valu[e]' || true",
    );
    c.env("MY_TOKEN", secret);
    let mut child = c.stdout(std::process::Stdio::piped()).spawn().unwrap();
    // While it runs, no process on the host shows the secret in its command line.
    let mut seen_on_host = false;
    for _ in 0..20 {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
                if String::from_utf8_lossy(&cmd).contains(secret) {
                    seen_on_host = true;
                }
            }
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("{secret}\n0\n"));
    assert!(!seen_on_host, "the secret appeared in a host command line");
}

#[test]
fn a_spec_with_an_unknown_field_is_125_and_names_it() {
    let f = Fixture::new();
    let (script, marker) = marker_script(&f);
    let spec = f.write("spec.json", r#"{"version": 1, "extraEnv": {"A": "b"}}"#);
    let o = run(f.sh(&["--spec", spec.to_str().unwrap()], &script));
    assert_eq!(o.code, 125, "{o:?}");
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{o:?}");
    assert!(errors[0].contains("extraEnv"), "{o:?}");
    assert!(!marker.exists(), "the command ran despite the bad spec");

    // The same spec with the real field name is accepted.
    let spec = f.write("good.json", r#"{"version": 1, "env": {"A": "from-spec"}}"#);
    assert_eq!(
        ok(f.sh(&["--spec", spec.to_str().unwrap()], "echo $A")),
        "from-spec\n"
    );
}

#[test]
fn a_spec_of_version_2_is_125() {
    let f = Fixture::new();
    let (script, marker) = marker_script(&f);
    let spec = f.write("spec.json", r#"{"version": 2}"#);
    let o = run(f.sh(&["--spec", spec.to_str().unwrap()], &script));
    assert_eq!(o.code, 125, "{o:?}");
    let errors = error_lines(&o.stderr);
    assert_eq!(errors.len(), 1, "{o:?}");
    assert!(errors[0].contains("version is 2, expected 1"), "{o:?}");
    assert!(!marker.exists(), "the command ran despite the bad spec");
}

#[test]
fn schema_prints_the_checked_in_schema() {
    let f = Fixture::new();
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("spec.schema.json");
    let Ok(expected) = std::fs::read_to_string(&file) else {
        eprintln!(
            "SKIPPED schema_prints_the_checked_in_schema: cannot read {}",
            file.display()
        );
        return;
    };
    let mut c = f.cmd();
    c.arg("schema");
    let printed = ok(c);
    assert_eq!(printed, expected);
    let v: serde_json::Value = serde_json::from_str(&printed).unwrap();
    assert!(v["properties"]["rwDirs"].is_object(), "{printed}");
}

/// `agent-sandbox run --dry-run [extra…] -- sh -c 'touch <proj>/ran'`.
fn dry_run(f: &Fixture, extra: &[&str]) -> (Out, std::path::PathBuf) {
    let (script, marker) = marker_script(f);
    let mut args = vec!["--dry-run"];
    args.extend_from_slice(extra);
    (run(f.sh(&args, &script)), marker)
}

#[test]
fn dry_run_lists_mounts_with_their_modes() {
    let f = Fixture::new();
    let claude = f.home.join(".claude");
    let gitconfig = f.home.join(".gitconfig");
    std::fs::create_dir(&claude).unwrap();
    std::fs::write(&gitconfig, "").unwrap();
    let (o, _) = dry_run(&f, &["--rw", "~/.claude", "--ro", "~/.gitconfig"]);
    assert_eq!(o.code, 0, "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    // Declared paths and the launch directory are bound by descriptor (see bind_race.rs).
    for want in [
        format!("  rw      {} (by descriptor)", f.proj.display()),
        format!("  tmpfs   {}", f.home.display()),
        format!("  rw      {} (by descriptor)", claude.display()),
        format!("  ro      {} (by descriptor)", gitconfig.display()),
        "  ro      /usr".to_string(),
        "  tmpfs   /tmp".to_string(),
    ] {
        assert!(lines.contains(&want.as_str()), "missing {want:?}\n{o:?}");
    }
    // The home tmpfs comes before what is mounted inside it, or it would hide them.
    let pos = |s: &str| lines.iter().position(|l| *l == s).unwrap();
    assert!(
        pos(&format!("  tmpfs   {}", f.home.display()))
            < pos(&format!("  rw      {} (by descriptor)", f.proj.display())),
        "{o:?}"
    );
}

#[test]
fn dry_run_masks_secret_looking_values() {
    let f = Fixture::new();
    let (o, _) = dry_run(&f, &["--env", "API_TOKEN=hunter2", "--env", "EDITOR=vim"]);
    assert_eq!(o.code, 0, "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(
        lines.contains(&"  API_TOKEN=<masked, 7 chars>"),
        "secret not masked in the environment section\n{o:?}"
    );
    assert!(lines.contains(&"  EDITOR=\"vim\""), "{o:?}");
    let leaks: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("hunter2"))
        .collect();
    assert!(
        leaks.is_empty(),
        "the secret value is printed by --dry-run in: {leaks:#?}"
    );
}

#[test]
fn dry_run_shows_the_network_policy() {
    let f = Fixture::new();
    let (o, _) = dry_run(&f, &["--no-network"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stdout.lines().any(|l| l.starts_with("network: blocked")),
        "{o:?}"
    );
    let (o, _) = dry_run(&f, &[]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stdout.lines().any(|l| l.starts_with("network: open")),
        "{o:?}"
    );
    assert!(!o.stdout.contains("network: blocked"), "{o:?}");
}

#[test]
fn dry_run_starts_nothing() {
    let f = Fixture::new();
    let (o, marker) = dry_run(&f, &["--no-network"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("touch"), "the command is shown: {o:?}");
    assert!(!marker.exists(), "--dry-run ran the command");
    assert!(
        !f.state.join("agent-sandbox").exists(),
        "--dry-run created a session directory"
    );
    // The same invocation without --dry-run does run it.
    let (script, marker) = marker_script(&f);
    ok(f.sh(&["--no-network"], &script));
    assert!(marker.exists());
}

/// Regression guard for `x=$(agent-sandbox run -- …)`: a helper thread or a leftover process
/// holding stdout open made the capture wait.
#[test]
fn captured_stdout_returns_promptly() {
    let f = Fixture::new();
    let start = Instant::now();
    let mut c = f.cmd();
    c.args(["run", "--no-network", "--", "echo", "hi"]);
    assert_eq!(ok(c), "hi\n");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );

    // A background process that inherited stdout dies with the sandbox, so it cannot hold the
    // pipe open either.
    let start = Instant::now();
    assert_eq!(ok(f.sh(&["--no-network"], "sleep 30 & echo hi")), "hi\n");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

/// Where user namespaces are unavailable, bubblewrap fails at setup: the sandbox must not run
/// anything and must say what it found. Simulated with a stand-in bwrap that fails the way the
/// real one does (the user-namespace probe runs it too) while no kernel setting explains it;
/// the settings that do are tested for real in `doctor.rs`.
#[test]
fn no_user_namespaces_fails_closed_with_the_fix() {
    let f = Fixture::new();
    let fake = f.root().join("fake-bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let marker = f.proj.join("ran");
    let mut c = f.sh(&["--no-network"], &format!("touch {}", marker.display()));
    c.env("AGENT_SANDBOX_BWRAP", &fake);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr
            .contains("bwrap: No permissions to creating new namespace"),
        "{o:?}"
    );
    assert!(
        o.stderr
            .contains("agent-sandbox: error: bubblewrap could not set up the sandbox")
            && o.stderr.contains(
                "user namespaces are unavailable (bwrap --unshare-user: bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.), and no kernel setting says why"
            )
            && o.stderr.contains("`agent-sandbox doctor` checks the host"),
        "{o:?}"
    );
    assert!(!marker.exists());
}

/// `--env-file` takes NUL-separated NAME=VALUE entries (what the Nix wrapper passes through a
/// `<(printf …)` pipe); values keep newlines and `=`.
#[test]
fn env_file_entries_arrive_verbatim() {
    let f = Fixture::new();
    let file = f.write("envs", "A=x=y\nz\0B=\0\0");
    let out = ok(f.sh(
        &["--env-file", file.to_str().unwrap()],
        "printf '%s|%s|%s' \"$A\" \"${B-unset}\" \"${C-unset}\"",
    ));
    assert_eq!(out, "x=y\nz||unset");
}

/// `--dry-run --target-os macos` shows what a Mac would run, here on Linux: the Seatbelt
/// profile, its parameters and the sandbox-exec argv. A hostile declared path only ever
/// appears as a parameter value, never in the profile text.
#[test]
fn dry_run_for_macos_shows_the_profile_and_keeps_paths_out_of_it() {
    let f = Fixture::new();
    let hostile = f.home.join("x\")) (allow file-write* (subpath \"/\"))");
    std::fs::create_dir_all(&hostile).unwrap();
    let o = run(f.sh(
        &[
            "--dry-run",
            "--target-os",
            "macos",
            "--rw",
            hostile.to_str().unwrap(),
        ],
        "true",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("(deny default)"), "{o:?}");
    assert!(o.stdout.contains("/usr/bin/sandbox-exec"), "{o:?}");
    let profile_lines: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('('))
        .collect();
    assert!(!profile_lines.is_empty(), "{o:?}");
    assert!(
        profile_lines
            .iter()
            .all(|l| !l.contains("allow file-write* (subpath \"/\")")),
        "the hostile path reached the profile text: {o:?}"
    );
    assert!(o.stdout.contains("-D"), "{o:?}");
    // Without --dry-run a macOS plan is refused on Linux, before anything starts.
    let o = run(f.sh(&["--target-os", "macos"], "true"));
    assert_eq!(o.code, 125, "{o:?}");
    assert!(o.stderr.contains("add --dry-run"), "{o:?}");
}

/// PID 1 inside is the small `agent-sandbox-init` when it is installed beside the helper, and
/// the helper itself (`__init`) when the helper is installed alone; both run the command, pass
/// its status on and keep the seccomp filter (TIOCSTI refused is checked elsewhere; here the
/// filter's presence shows in /proc/1/status).
#[test]
fn pid_1_is_the_small_init_beside_the_helper_or_the_helper_alone() {
    let f = Fixture::new();
    let script = "tr '\\0' ' ' < /proc/1/cmdline; echo; grep ^Seccomp: /proc/1/status; exit 7";
    let beside = bin().parent().unwrap().join("agent-sandbox-init");
    let o = run(f.sh(&["--no-network"], script));
    assert_eq!(o.code, 7, "{o:?}");
    let first = o.stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        first.starts_with("/run/agent-sandbox/agent-sandbox "),
        "{o:?}"
    );
    assert_eq!(first.contains(" __init "), !beside.exists(), "{o:?}");
    assert!(o.stdout.contains("Seccomp:\t2"), "{o:?}");

    // The helper alone in a directory of its own (a hard link keeps it cheap; a copy when the
    // temp dir is on another filesystem).
    let alone = f.root().join("alone");
    std::fs::create_dir(&alone).unwrap();
    let helper = alone.join("agent-sandbox");
    if std::fs::hard_link(bin(), &helper).is_err() {
        std::fs::copy(bin(), &helper).unwrap();
    }
    let c = f.sh(&["--no-network"], script);
    let mut c2 = std::process::Command::new(&helper);
    c2.env_clear()
        .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .current_dir(&f.proj)
        .args(c.get_args());
    let o = run(c2);
    assert_eq!(o.code, 7, "{o:?}");
    assert!(o.stdout.contains(" __init --"), "{o:?}");
    assert!(o.stdout.contains("Seccomp:\t2"), "{o:?}");
}

/// `--dry-run --json`: the plan as data, each mount with why it is there, secrets masked, the
/// exact bwrap argv (what the benchmark reads).
#[test]
fn dry_run_json_is_the_plan_as_data() {
    let f = Fixture::new();
    std::fs::create_dir(f.home.join(".claude")).unwrap();
    let o = run({
        let mut c = f.cmd();
        c.env("MY_TOKEN", "sk-very-secret").args([
            "run",
            "--dry-run",
            "--json",
            "--no-network",
            "--rw",
            "~/.claude",
            "--env",
            "MY_TOKEN",
            "--",
            "true",
        ]);
        c
    });
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stdout.contains("sk-very-secret"), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    let mounts = v["mounts"].as_array().unwrap();
    let find = |dest: &std::path::Path| {
        mounts
            .iter()
            .find(|m| m["dest"] == dest.to_str().unwrap())
            .unwrap_or_else(|| panic!("no mount at {}: {v}", dest.display()))
    };
    assert_eq!(find(&f.proj)["why"], "Launch");
    assert_eq!(find(&f.proj)["mode"], "rw");
    assert_eq!(find(&f.home.join(".claude"))["why"], "Declared");
    assert_eq!(find(&f.home)["why"], "Home");
    assert_eq!(v["env"]["MY_TOKEN"], "<masked, 14 chars>");
    assert_eq!(v["argv"][0], "--die-with-parent");
    assert!(v["program"].as_str().unwrap().ends_with("bwrap"), "{v}");
    // Without --dry-run it is refused (nothing would print it).
    let o = run(f.sh(&["--json"], "true"));
    assert_ne!(o.code, 0, "{o:?}");
}

/// Issue 11: `--allow-domain com` allowed every .com site (a rule covers its subdomains). Too
/// broad and internationalised entries are refused before anything starts, with the fix;
/// the registrable domain under the suffix is accepted.
#[test]
fn too_broad_or_internationalised_domains_are_refused_with_the_fix() {
    let f = Fixture::new();
    for (domain, want) in [
        (
            "com",
            "allowedDomains entry \"com\" is a single label (a top-level domain)",
        ),
        ("co.uk", "allowedDomains entry \"co.uk\" is a public suffix"),
        (
            "github.io",
            "expected a registrable domain such as \"example.github.io\"",
        ),
        (
            "bücher.example",
            "write it in its ASCII (punycode) form, which starts with xn--",
        ),
    ] {
        let (o, marker) = dry_run(&f, &["--allow-domain", domain]);
        assert_ne!(o.code, 0, "{domain}: {o:?}");
        assert!(o.stderr.contains(want), "{domain}: {o:?}");
        assert!(!marker.exists());
    }
    let (o, _) = dry_run(&f, &["--allow-domain", "example.co.uk"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stderr.contains("allowedDomains"), "{o:?}");
}

/// `localhost` in allowedDomains is the sandbox's own loopback: the warning names the flag
/// that reaches the host's.
#[test]
fn a_localhost_domain_points_at_allow_local_port() {
    let f = Fixture::new();
    let (o, _) = dry_run(
        &f,
        &["--allow-domain", "localhost", "--allow-domain", "::1"],
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stdout.contains("warning: allowedDomains has \"::1\", \"localhost\": clients do not send loopback to the proxy")
            && o.stdout.contains("bridge its port: --allow-local-port PORT"),
        "{o:?}"
    );
    let (o, _) = dry_run(&f, &["--allow-domain", "localhost.example.com"]);
    assert!(!o.stdout.contains("allowedDomains has"), "{o:?}");
}

/// Issue 11: `--rw-dir` on a socket said "is a file; declare it in rwFiles". The message names
/// the socket as one and both flags it takes; following it (`--rw` + `--allow-socket`) works.
#[test]
fn a_socket_declared_as_a_directory_is_named_for_what_it_is() {
    let f = Fixture::new();
    let sock = f.home.join("agent.sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let s = sock.to_str().unwrap();
    let (o, marker) = dry_run(&f, &["--rw-dir", s]);
    assert_ne!(o.code, 0, "{o:?}");
    assert!(
        o.stderr.contains(&format!(
            "{s} (rwDirs) is a Unix socket, not a directory; declare it in rwFiles (--rw {s}), and allow connecting to it with --allow-socket {s} (allowedSockets)"
        )),
        "{o:?}"
    );
    assert!(!marker.exists());
    let (o, _) = dry_run(&f, &["--rw", s, "--allow-socket", s]);
    assert_eq!(o.code, 0, "{o:?}");
}

/// Issue 11: `--dry-run` said nothing about a command the launch then could not find. It now
/// warns when the command does not resolve inside: a name not on the sandbox's PATH, or a
/// program that exists on the host but in a place the sandbox does not expose.
#[test]
fn dry_run_warns_when_the_command_does_not_exist_inside() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let tool = f.write("home/bin/tool", "#!/bin/sh\necho tool\n");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = tool.to_str().unwrap();
    let dry = |extra: &[&str], cmd: &[&str]| {
        let mut c = f.cmd();
        c.args(["run", "--dry-run", "--no-network"])
            .args(extra)
            .arg("--")
            .args(cmd);
        run(c)
    };
    let o = dry(&[], &["no-such-command-4f1"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr.contains("warning: command not found inside the sandbox: no-such-command-4f1 (PATH=/usr/local/bin:")
            && o.stderr.contains("so the launch would fail"),
        "{o:?}"
    );
    // On the host, hidden inside (the home is an empty tmpfs): warned; a real run fails alike.
    let o = dry(&[], &[t]);
    assert!(
        o.stderr
            .contains(&format!("command not found inside the sandbox: {t} ")),
        "{o:?}"
    );
    let real = run({
        let mut c = f.cmd();
        c.args(["run", "--no-network", "--", t]);
        c
    });
    assert_ne!(real.code, 0, "{real:?}");
    // Exposed, or on the sandbox's PATH: no warning, and it runs.
    for (extra, cmd) in [(&["--ro", "~/bin"][..], t), (&[][..], "sh")] {
        let o = dry(extra, &[cmd, "-c", "true"]);
        assert!(!o.stderr.contains("command not found"), "{cmd}: {o:?}");
    }
    let mut c = f.cmd();
    c.args(["run", "--no-network", "--ro", "~/bin", "--", t]);
    assert_eq!(ok(c), "tool\n");
}

/// Issue 11: a token written as `--env NAME=VALUE` sits on a world-readable command line; the
/// warning says so (without the value) and names `--env NAME`, which does not warn.
#[test]
fn a_secret_looking_inline_env_value_is_warned_about() {
    let f = Fixture::new();
    let (o, _) = dry_run(&f, &["--env", "API_TOKEN=hunter2-inline"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(
        o.stderr
            .contains("warning: --env API_TOKEN=… on the command line")
            && o.stderr
                .contains("pass --env API_TOKEN (the value is taken from"),
        "{o:?}"
    );
    assert!(!o.stderr.contains("hunter2-inline"), "{o:?}");
    let mut c = f.cmd();
    c.env("API_TOKEN", "hunter2")
        .args(["run", "--dry-run", "--env", "API_TOKEN", "--", "true"]);
    let o = run(c);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stderr.contains("on the command line"), "{o:?}");
}
