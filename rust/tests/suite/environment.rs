//! The environment inside: cleared, then only the documented variables and the declared ones.
use std::collections::BTreeSet;

use crate::common::*;

/// Names the sandbox sets, plus what `sh` adds on its own.
const DOCUMENTED: &[&str] = &[
    "HOME",
    "TERM",
    "SHELL",
    "PATH",
    "TMPDIR",
    "SSL_CERT_FILE",
    "NIX_SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "CARGO_HTTP_CAINFO",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_0",
    "GIT_CONFIG_VALUE_0",
    "AGENT_SANDBOX",
    "AGENT_SANDBOX_SESSION",
    "AGENT_SANDBOX_POLICY",
];
const SHELL_ADDED: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_"];

fn names(env_output: &str) -> BTreeSet<String> {
    env_output
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.to_string())
        .collect()
}

#[test]
fn only_documented_and_declared_variables_exist() {
    let f = Fixture::new();
    let mut c = f.cmd();
    c.args([
        "run",
        "--no-network",
        "--env",
        "EDITOR=vi",
        "--env",
        "ANTHROPIC_API_KEY=sk-test",
        "--",
        "env",
    ]);
    let out = ok(c);
    let got = names(&out);
    let allowed: BTreeSet<String> = DOCUMENTED
        .iter()
        .chain(SHELL_ADDED)
        .chain(&["EDITOR", "ANTHROPIC_API_KEY"])
        .map(|s| s.to_string())
        .collect();
    let extra: Vec<&String> = got.difference(&allowed).collect();
    assert!(extra.is_empty(), "undocumented variables: {extra:?}\n{out}");
    for required in ["HOME", "PATH", "TERM", "SHELL", "TMPDIR", "EDITOR"] {
        assert!(got.contains(required), "{required} missing:\n{out}");
    }
    let lines: Vec<&str> = out.lines().collect();
    for want in [
        format!("HOME={}", f.home.display()),
        "TMPDIR=/tmp".to_string(),
        "EDITOR=vi".to_string(),
        "ANTHROPIC_API_KEY=sk-test".to_string(),
    ] {
        assert!(lines.contains(&want.as_str()), "{want} missing:\n{out}");
    }
}

#[test]
fn launcher_variables_do_not_leak() {
    let f = Fixture::new();
    // The allowed counterpart: a declared variable does arrive.
    let mut c = f.sh(
        &["--no-network", "--env", "DECLARED=yes"],
        "env; echo --; printenv DECLARED",
    );
    c.env("SECRET_MARKER", "launcher-secret-77aa")
        .env("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock")
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-77aa")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1/bus")
        .env("XDG_RUNTIME_DIR", "/run/user/1")
        .env("LD_PRELOAD", "/nonexistent/evil.so");
    let out = ok(c);
    let (env, declared) = out.split_once("--\n").unwrap();
    assert_eq!(declared, "yes\n");
    for leaked in [
        "SECRET_MARKER",
        "launcher-secret-77aa",
        "SSH_AUTH_SOCK",
        "aws-secret-77aa",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
        "XDG_STATE_HOME",
        "LD_PRELOAD",
    ] {
        assert!(!env.contains(leaked), "{leaked} leaked:\n{env}");
    }
}

#[test]
fn term_is_passed() {
    let f = Fixture::new();
    assert_eq!(ok(f.sh(&["--no-network"], "echo $TERM")), "xterm-test\n");
    let mut c = f.sh(&["--no-network"], "echo $TERM");
    c.env("TERM", "screen-256color");
    assert_eq!(ok(c), "screen-256color\n");
}

#[test]
fn declared_values_arrive_verbatim() {
    let f = Fixture::new();
    let tricky = "x y $(touch pwned) `id` \"q\" 'r' \\n ; | & *";
    let cases = [
        ("A", tricky.to_string()),
        ("B", String::new()),
        ("C", "a=b=c".to_string()),
        ("D", "line1\nline2".to_string()),
    ];
    for (name, value) in &cases {
        let mut c = f.cmd();
        c.args(["run", "--no-network", "--env"])
            .arg(format!("{name}={value}"))
            .args(["--", "printenv", name]);
        assert_eq!(ok(c), format!("{value}\n"), "{name}");
    }
    assert!(!f.proj.join("pwned").exists() && !f.home.join("pwned").exists());
}

#[test]
fn git_identity_is_never_invented() {
    let f = Fixture::new();
    let o = run(f.sh(
        &["--no-network"],
        "command -v git >/dev/null || exit 99; git config user.useConfigOnly",
    ));
    if o.code == 99 {
        eprintln!("SKIPPED git_identity_is_never_invented: no git inside");
        return;
    }
    assert_eq!(o.stdout, "true\n", "{o:?}");

    // Without a declared identity git refuses to make one up (e.g. root@sandbox)…
    let o = run(f.sh(&["--no-network"], "git var GIT_AUTHOR_IDENT"));
    assert_ne!(o.code, 0, "git invented an identity: {o:?}");
    assert_eq!(o.stdout, "", "{o:?}");

    // …and uses the declared one.
    let out = ok(f.sh(
        &[
            "--no-network",
            "--env",
            "GIT_AUTHOR_NAME=Ada",
            "--env",
            "GIT_AUTHOR_EMAIL=ada@example.org",
        ],
        "git var GIT_AUTHOR_IDENT",
    ));
    assert!(out.starts_with("Ada <ada@example.org> "), "{out}");
}
