//! Programs are told they are sandboxed: `AGENT_SANDBOX=1`, the session's name, and a
//! read-only policy file saying what the sandbox allows (issue 11).
use std::path::PathBuf;

use crate::common::*;

/// The session directories under the fixture's state directory (not the shared identity
/// files).
fn sessions(f: &Fixture) -> Vec<PathBuf> {
    let base = f.state.join("agent-sandbox");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    out.sort();
    out
}

/// The lines of one section of the policy's "Files" part, from its heading to the blank line.
fn section<'a>(policy: &'a str, heading: &str) -> Vec<&'a str> {
    policy
        .lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn programs_are_told_they_are_sandboxed_and_read_the_policy() {
    let f = Fixture::new();
    let data = f.root().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut c = f.sh(
        &[
            "--ro",
            data.to_str().unwrap(),
            "--allow-domain",
            "example.com",
            // A declared value cannot say "not a sandbox".
            "--env",
            "AGENT_SANDBOX=0",
        ],
        r#"echo "$AGENT_SANDBOX"; echo "$AGENT_SANDBOX_SESSION"; echo "$AGENT_SANDBOX_POLICY"; echo --; cat "$AGENT_SANDBOX_POLICY""#,
    );
    c.env("AGENT_SANDBOX_SESSION", "from-the-launcher");
    let out = ok(c);
    let (vars, policy) = out.split_once("--\n").unwrap();
    let vars: Vec<&str> = vars.lines().collect();
    let sessions = sessions(&f);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let name = sessions[0].file_name().unwrap().to_str().unwrap();
    assert_eq!(vars, ["1", name, "/run/agent-sandbox/policy.md"], "{out}");
    assert!(policy.starts_with("# agent-sandbox policy\n"), "{policy}");
    let rw = section(policy, "Read-write");
    let ro = section(policy, "Read-only");
    let launch = format!("- `{}`: the launch directory", f.proj.display());
    assert!(rw.contains(&launch.as_str()), "{rw:?}\n{policy}");
    let declared = format!("- `{}`: declared", data.display());
    assert!(ro.contains(&declared.as_str()), "{ro:?}\n{policy}");
    assert!(!rw.contains(&declared.as_str()), "{policy}");
    assert!(
        policy.contains("\n- `example.com`: every method\n"),
        "{policy}"
    );
    assert!(
        policy.contains("`--allow-domain DOMAIN` | `allowedDomains`"),
        "{policy}"
    );
    // What the sandbox read is the file the launcher wrote, in the session directory.
    let on_host = std::fs::read_to_string(sessions[0].join("policy.md")).unwrap();
    assert_eq!(on_host, policy);
}

#[test]
fn the_policy_file_cannot_be_changed_from_inside() {
    let f = Fixture::new();
    let script = r#"p=$AGENT_SANDBOX_POLICY
try() { if "$@" 2>/dev/null; then echo "$1 ok"; else echo "$1 refused"; fi; }
try sh -c 'echo forged > "$0"' "$p"
try sh -c 'echo forged >> "$0"' "$p"
try rm -f "$p"
try mv "$p" /tmp/moved
try sh -c 'echo forged > /tmp/f && mv /tmp/f "$0"' "$p"
try chmod 666 "$p"
try mv /run/agent-sandbox /run/moved
head -n 1 "$p""#;
    let out = ok(f.sh(&["--no-network"], script));
    assert_eq!(
        out,
        "sh refused\nsh refused\nrm refused\nmv refused\nsh refused\nchmod refused\nmv refused\n# agent-sandbox policy\n",
        "{out}"
    );
    let on_host = std::fs::read_to_string(sessions(&f)[0].join("policy.md")).unwrap();
    assert!(on_host.starts_with("# agent-sandbox policy\n"), "{on_host}");
    assert!(!on_host.contains("forged"), "{on_host}");
}

/// What the policy says about git's protected files is what happens.
#[test]
fn git_config_fails_as_the_policy_says() {
    let f = Fixture::new();
    let g = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&f.proj)
        .status();
    if !g.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED git_config_fails_as_the_policy_says: no git on the host");
        return;
    }
    let out = ok(f.sh(
        &["--no-network"],
        r#"command -v git >/dev/null || { echo nogit; exit 0; }
grep -c '\.git/config`: git on the host would run or obey it' "$AGENT_SANDBOX_POLICY"
git config user.name x 2>&1; echo "rc=$?"
{ echo '[core]' >> .git/config; } 2>&1; echo "rc=$?""#,
    ));
    if out == "nogit\n" {
        eprintln!("SKIPPED git_config_fails_as_the_policy_says: no git inside");
        return;
    }
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "1", "{out}");
    assert!(
        out.contains("Device or resource busy\nrc=") && !out.contains("rc=0"),
        "{out}"
    );
    assert!(out.contains("Read-only file system"), "{out}");
    let config = std::fs::read_to_string(f.proj.join(".git/config")).unwrap();
    assert!(!config.contains("name = x"), "{config}");
}

#[test]
fn locale_and_colour_variables_pass_and_a_declared_value_wins() {
    let f = Fixture::new();
    let mut c = f.sh(&["--no-network", "--env", "LC_TIME=en_GB.UTF-8"], "env");
    c.env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("LANGUAGE", "de:en")
        .env("LC_TIME", "de_DE.UTF-8")
        .env("COLORTERM", "truecolor")
        // Not passed: not a locale variable, an unlisted LC_ name, a value with an escape.
        .env("LESSOPEN", "| /tmp/evil %s")
        .env("LC_TERMINAL", "iTerm2")
        .env("LC_CTYPE", "C.UTF-8\u{1b}]0;x\u{7}");
    let out = ok(c);
    let lines: Vec<&str> = out.lines().collect();
    for want in [
        "LANG=C.UTF-8",
        "LC_ALL=C.UTF-8",
        "LANGUAGE=de:en",
        "LC_TIME=en_GB.UTF-8",
        "COLORTERM=truecolor",
    ] {
        assert!(lines.contains(&want), "{want} missing:\n{out}");
    }
    for absent in ["LESSOPEN", "LC_TERMINAL", "LC_CTYPE", "de_DE"] {
        assert!(!out.contains(absent), "{absent} passed:\n{out}");
    }
}

#[test]
fn without_locale_variables_none_appear() {
    let f = Fixture::new();
    let out = ok(f.sh(&["--no-network"], "env"));
    for absent in ["LANG=", "LANGUAGE=", "LC_", "COLORTERM="] {
        assert!(
            !out.lines().any(|l| l.starts_with(absent)),
            "{absent}:\n{out}"
        );
    }
}
