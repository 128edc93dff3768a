//! Human-readable rendering of a plan for `--dry-run`. Pure.

use std::fmt::Write;

use crate::plan::{Mount, Network, Plan};

/// Environment names whose values are masked in the dry-run output.
const SECRET_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "AUTH",
    "CREDENTIAL",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // GIT_CONFIG_KEY_n names a git setting, not a key; AGENT_SANDBOX_SESSION is ours.
    !upper.starts_with("GIT_CONFIG_")
        && !upper.starts_with("AGENT_SANDBOX_")
        && SECRET_MARKERS.iter().any(|m| upper.contains(m))
}

/// An environment value as the dry-run shows it: quoted, or masked (with its length, so an
/// empty or truncated secret still shows) when the name looks secret.
pub fn shown_env_value(name: &str, value: &str) -> String {
    if looks_secret(name) {
        format!("<masked, {} chars>", value.chars().count())
    } else {
        format!("{value:?}")
    }
}

/// The argv with the values of secret-looking `--setenv NAME VALUE` replaced, for display and
/// for the session log: secrets do not belong in files at rest.
pub fn masked_argv(argv: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let mut out = argv.to_vec();
    let mut i = 0;
    while i + 2 < out.len() {
        if out[i] == "--setenv" && looks_secret(&out[i + 1].to_string_lossy()) {
            out[i + 2] = "<masked>".into();
            i += 3;
        } else {
            i += 1;
        }
    }
    out
}

/// Who reads a rendering: the terminal (`--dry-run`) sees the environment's values except
/// secret-looking ones; the session's `launch.log`, a file at rest, gets only the names (a
/// value passed with `--env NAME` is often a token whatever its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Terminal,
    Log,
}

pub fn render(
    plan: &Plan,
    mounts: &[Mount],
    bwrap: &str,
    argv: &[std::ffi::OsString],
    audience: Audience,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "sandbox: {}", plan.out_name);
    let _ = writeln!(s, "command: {}", quote_all(plan.command.iter()));
    let _ = writeln!(s, "launch dir (read-write): {}", plan.cwd.display());
    let _ = writeln!(s, "home (empty tmpfs): {}", plan.home.display());
    let _ = writeln!(
        s,
        "identity: uid {} gid {}, hostname sandbox",
        plan.uid, plan.gid
    );
    let _ = writeln!(s, "mounts (in order):");
    for m in mounts {
        let line = match m {
            Mount::RoBind { src, dest } if src == dest => format!("  ro      {}", dest.display()),
            Mount::RoBind { src, dest } => {
                format!("  ro      {} <- {}", dest.display(), src.display())
            }
            Mount::Bind { src, dest } if src == dest => format!("  rw      {}", dest.display()),
            Mount::Bind { src, dest } => {
                format!("  rw      {} <- {}", dest.display(), src.display())
            }
            Mount::BindFd { src, dest, rw, .. } => {
                let mode = if *rw { "rw" } else { "ro" };
                if src == dest {
                    format!("  {mode}      {} (by descriptor)", dest.display())
                } else {
                    format!(
                        "  {mode}      {} <- {} (by descriptor)",
                        dest.display(),
                        src.display()
                    )
                }
            }
            Mount::Tmpfs { dest } => format!("  tmpfs   {}", dest.display()),
            Mount::Mask { dest } => format!("  masked  {} (empty, read-only)", dest.display()),
            Mount::Proc { dest } => format!("  proc    {}", dest.display()),
            Mount::Dev { dest } => format!("  dev     {}", dest.display()),
            Mount::Symlink { target, dest } => {
                format!("  symlink {} -> {}", dest.display(), target.display())
            }
        };
        let _ = writeln!(s, "{}", escape_controls(&line));
    }
    if audience == Audience::Log {
        let _ = writeln!(s, "environment (names only, values are not logged):");
        for k in plan.env.keys() {
            let _ = writeln!(s, "  {k}");
        }
    } else {
        let _ = writeln!(s, "environment:");
    }
    for (k, v) in plan.env.iter().filter(|_| audience == Audience::Terminal) {
        let _ = writeln!(s, "  {k}={}", shown_env_value(k, v));
    }
    let _ = writeln!(s, "network: {}", network_line(&plan.network));
    let ports = match &plan.allowed_local_ports[..] {
        [] => "none".to_string(),
        p => p.iter().map(u16::to_string).collect::<Vec<_>>().join(", "),
    };
    let _ = writeln!(s, "host loopback ports: {ports}");
    if let Some(p) = &plan.proxy {
        let _ = writeln!(
            s,
            "  proxy   127.0.0.1:{} (inside; the listening socket is handed to the proxy over {})",
            p.inside_port,
            p.inside_socket().display()
        );
    }
    for b in &plan.bridges {
        let _ = writeln!(
            s,
            "  bridge  127.0.0.1:{} (inside) -> {} -> host 127.0.0.1:{}",
            b.inside_port,
            b.inside_socket().display(),
            b.host_port
        );
    }
    for w in &plan.warnings {
        let _ = writeln!(s, "warning: {}", terminal_safe(w));
    }
    let _ = writeln!(
        s,
        "bwrap argv: {} {}",
        bwrap,
        quote_all(masked_argv(argv).iter())
    );
    s
}

/// `--dry-run --json`: the plan as data (for scripts and the benchmark), with what `--dry-run`
/// prints: every mount with why it is there, the environment (secret-looking values masked),
/// the network, the warnings, and the exact argv the platform would run.
pub fn json(
    plan: &Plan,
    mounts: &[Mount],
    staging: Option<&crate::plan::Staging>,
    program: &str,
    argv: &[std::ffi::OsString],
) -> String {
    use serde_json::{Value, json};
    let path = |p: &std::path::Path| Value::String(p.display().to_string());
    // The labels come from the plan; a lowering (LinuxRun) may replace mounts one for one
    // (binds by descriptor) or stage a closure (one bind instead of many): label by position
    // while the two agree, else by destination.
    let label = |i: usize, m: &Mount| {
        plan.mounts
            .get(i)
            .filter(|e| e.mount.dest() == m.dest())
            .or_else(|| plan.mounts.iter().find(|e| e.mount.dest() == m.dest()))
            .map(|e| format!("{:?}", e.why))
    };
    let mounts: Vec<Value> = mounts
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let (kind, src, mode) = match m {
                Mount::RoBind { src, .. } => ("bind", Some(src), "ro"),
                Mount::Bind { src, .. } => ("bind", Some(src), "rw"),
                Mount::BindFd { src, rw, .. } => {
                    ("bind-fd", Some(src), if *rw { "rw" } else { "ro" })
                }
                Mount::Tmpfs { .. } => ("tmpfs", None, "rw"),
                Mount::Mask { .. } => ("mask", None, "ro"),
                Mount::Proc { .. } => ("proc", None, "rw"),
                Mount::Dev { .. } => ("dev", None, "rw"),
                Mount::Symlink { target, .. } => ("symlink", Some(target), "ro"),
            };
            json!({
                "why": label(i, m),
                "kind": kind,
                "src": src.map(|p| path(p)),
                "dest": path(m.dest()),
                "mode": mode,
            })
        })
        .collect();
    let env: serde_json::Map<String, Value> = plan
        .env
        .iter()
        .map(|(k, v)| {
            let shown = if looks_secret(k) {
                format!("<masked, {} chars>", v.chars().count())
            } else {
                v.clone()
            };
            (k.clone(), Value::String(shown))
        })
        .collect();
    let argv: Vec<String> = masked_argv(argv)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let v = json!({
        "sandbox": plan.out_name,
        "command": plan.command.iter().map(|c| c.to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "cwd": path(&plan.cwd),
        "home": path(&plan.home),
        "network": network_line(&plan.network),
        "hostLoopbackPorts": plan.allowed_local_ports,
        "mounts": mounts,
        "env": env,
        "warnings": plan.warnings,
        // A large closure the namespace holder stages: the directory it replaces, the view.
        "staging": staging.map(|st| json!({
            "dir": path(&st.dir),
            "view": path(&st.view),
            "entries": st.names.len(),
        })),
        "program": program,
        "argv": argv,
    });
    let mut out = serde_json::to_string_pretty(&v).expect("a JSON value serialises");
    out.push('\n');
    out
}

fn network_line(n: &Network) -> String {
    match n {
        Network::Open => "open (internet)".into(),
        Network::Blocked => "blocked (no network at all)".into(),
        Network::Filtered(rules) => {
            let parts: Vec<String> = rules
                .iter()
                .map(|(d, m)| match m {
                    None => format!("{d} (any method)"),
                    Some(ms) => format!("{d} ({})", ms.join(",")),
                })
                .collect();
            format!("filtered through the proxy: {}", parts.join("; "))
        }
    }
}

/// Shell-style quoting for display only (nothing is ever run through a shell).
pub fn quote_all<'a>(items: impl Iterator<Item = &'a std::ffi::OsString>) -> String {
    items
        .map(|a| {
            let s = a.to_string_lossy();
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                s.into_owned()
            } else {
                escape_controls(&format!("'{}'", s.replace('\'', r"'\''")))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Make newlines and other control characters visible; leave everything else as is.
pub fn escape_controls(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A warning for a terminal: [`escape_controls`] but for its line breaks. Warnings quote host
/// paths and link targets (which whoever can write there chose), so an escape sequence in a
/// name must not reach the terminal as one.
pub fn terminal_safe(s: &str) -> String {
    s.split('\n')
        .map(escape_controls)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_safe_keeps_line_breaks_and_escapes_the_rest() {
        assert_eq!(
            terminal_safe("a\u{1b}]0;t\u{7}\r\nb\tc"),
            "a\\u{1b}]0;t\\u{7}\\r\nb\\tc"
        );
    }

    #[test]
    fn secret_names() {
        for n in [
            "ANTHROPIC_API_KEY",
            "GH_TOKEN",
            "aws_secret_access_key",
            "DB_PASSWORD",
        ] {
            assert!(looks_secret(n), "{n}");
        }
        for n in ["HOME", "PATH", "TERM", "EDITOR", "GIT_CONFIG_KEY_0"] {
            assert!(!looks_secret(n), "{n}");
        }
        for n in ["AGENT_SANDBOX_SESSION", "AGENT_SANDBOX_POLICY"] {
            assert!(!looks_secret(n), "{n}");
        }
    }

    #[test]
    fn argv_masks_secret_values_only() {
        let a: Vec<std::ffi::OsString> = [
            "--setenv",
            "API_TOKEN",
            "hunter2",
            "--setenv",
            "HOME",
            "/h",
            "--bind",
            "/a",
            "/a",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let m = masked_argv(&a);
        let m: Vec<&str> = m.iter().map(|x| x.to_str().unwrap()).collect();
        assert_eq!(
            m,
            [
                "--setenv",
                "API_TOKEN",
                "<masked>",
                "--setenv",
                "HOME",
                "/h",
                "--bind",
                "/a",
                "/a"
            ]
        );
    }

    #[test]
    fn quoting() {
        let v: Vec<std::ffi::OsString> =
            vec!["a".into(), "b c".into(), "it's".into(), "x\ny".into()];
        assert_eq!(quote_all(v.iter()), r#"a 'b c' 'it'\''s' 'x\ny'"#);
    }
}
