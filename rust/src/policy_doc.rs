//! The sandbox's description of itself for the programs inside ([`crate::plan::POLICY_PATH`],
//! named by `AGENT_SANDBOX_POLICY`): what they can read, write and reach, what is protected
//! and why, and how the user grants more. Agents read files, so they get one instead of
//! learning the rules from failures.
//!
//! A pure function of the plan's labelled mounts and network: deterministic (the plan's
//! order, no dates, no session paths), so one sandbox always reads the same.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::plan::{Mount, Network, Plan, Why};
use crate::report::escape_controls;

/// The Markdown text of the policy file.
pub fn render(plan: &Plan) -> String {
    let mut s = String::new();
    s.push_str("# agent-sandbox policy\n\n");
    s.push_str(
        "You are inside agent-sandbox (`AGENT_SANDBOX=1`). This file says what the sandbox \
allows. It is read-only, and nothing inside can widen the sandbox: only the user who starts \
it can (see \"Asking for more\").\n",
    );
    files(&mut s, plan);
    network(&mut s, plan);
    asking(&mut s);
    s
}

/// A path as Markdown code, control characters escaped.
fn code(p: &Path) -> String {
    format!("`{}`", escape_controls(&p.display().to_string()))
}

/// A bind's source, destination and whether it is writable; `None` for other mounts.
fn bind(m: &Mount) -> Option<(&Path, &Path, bool)> {
    match m {
        Mount::Bind { src, dest } => Some((src, dest, true)),
        Mount::RoBind { src, dest } => Some((src, dest, false)),
        Mount::BindFd { src, dest, rw, .. } => Some((src, dest, *rw)),
        _ => None,
    }
}

/// One line of a list, unless a line before it already covers its path.
fn push_item(list: &mut Vec<(PathBuf, String)>, path: &Path, line: String) {
    if !list.iter().any(|(p, _)| path.starts_with(p)) {
        list.push((path.to_path_buf(), line));
    }
}

fn files(s: &mut String, plan: &Plan) {
    let mut rw: Vec<(PathBuf, String)> = Vec::new();
    let mut ro: Vec<(PathBuf, String)> = Vec::new();
    let mut protected: Vec<String> = Vec::new();
    let mut hidden: Vec<String> = Vec::new();
    let git_dirs: Vec<&Path> = plan
        .mounts
        .iter()
        .filter(|e| e.why == Why::GitDir)
        .map(|e| e.mount.dest())
        .collect();
    for e in &plan.mounts {
        let dest = e.mount.dest();
        let what = match e.why {
            Why::Launch => "the launch directory",
            Why::Repo => "the repository around the launch directory",
            Why::GitDir => "a git directory of the repository",
            Why::Declared => "declared",
            Why::Alias => "declared",
            Why::Command => "the command you ran, found on your PATH",
            Why::Protect | Why::Placeholder => {
                let git = git_dirs.iter().any(|g| dest.starts_with(g))
                    || dest.components().any(|c| c.as_os_str() == ".git");
                let why = if git {
                    "git on the host would run or obey it"
                } else {
                    "programs on the host run or obey it"
                };
                protected.push(format!("- {}: {why}", code(dest)));
                continue;
            }
            Why::StateMask => {
                hidden.push(format!("- {}: the launcher's state directory", code(dest)));
                continue;
            }
            Why::SocketMask => {
                hidden.push(format!(
                    "- {}: a Unix socket not allowed (allowedSockets, --allow-socket)",
                    code(dest)
                ));
                continue;
            }
            // The system layer is summed up below; pins grant nothing; the rest is plumbing.
            Why::System
            | Why::Closure
            | Why::NixDaemon
            | Why::Kernel
            | Why::Scratch
            | Why::Home
            | Why::Identity
            | Why::Resolv
            | Why::Pin
            | Why::Init
            | Why::Policy
            | Why::Session => continue,
        };
        let Some((src, dest, writable)) = bind(&e.mount) else {
            continue;
        };
        let line = if src == dest {
            format!("- {}: {what}", code(dest))
        } else {
            format!("- {} (a link to {}): {what}", code(dest), code(src))
        };
        push_item(if writable { &mut rw } else { &mut ro }, dest, line);
    }
    s.push_str("\n## Files\n\nRead-write (what you change stays on the host):\n");
    for (_, line) in &rw {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(
        s,
        "\nPrivate to this session and discarded at exit: `$HOME` ({}), empty apart from the paths listed here, and `$TMPDIR`.",
        code(&plan.home)
    );
    s.push_str("\nRead-only:\n");
    for (_, line) in &ro {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s, "- {}", system_line(plan));
    if !protected.is_empty() {
        s.push_str(
            "\nProtected: read-only inside the read-write paths, because programs on the host \
would run or obey what is written there. Writing one fails with EROFS (\"Read-only file \
system\"); replacing, renaming or removing one fails with EBUSY (\"Device or resource busy\"), \
so `git config` fails with EBUSY (git renames `.git/config.lock` over `.git/config`), and so \
do editors that save by renaming:\n",
        );
        for line in &protected {
            let _ = writeln!(s, "{line}");
        }
    }
    if !hidden.is_empty() {
        s.push_str("\nHidden (empty here, whatever the host has there):\n");
        for line in &hidden {
            let _ = writeln!(s, "{line}");
        }
    }
    s.push_str("\nNothing else of the host's files is visible.\n");
}

/// The system layer in one line: the host's system directories, or the Nix store paths.
fn system_line(plan: &Plan) -> String {
    let mut dirs: Vec<&Path> = Vec::new();
    let mut etc = 0;
    let mut store_paths = 0;
    let mut whole_store = false;
    for e in &plan.mounts {
        let Some((_, dest, _)) = bind(&e.mount) else {
            continue;
        };
        match e.why {
            Why::System if dest.starts_with("/etc") => etc += 1,
            Why::System => dirs.push(dest),
            Why::Closure if dest == Path::new("/nix/store") => whole_store = true,
            Why::Closure => store_paths += 1,
            _ => {}
        }
    }
    if whole_store {
        return "`/nix/store`: the whole Nix store (allowNix); the Nix daemon builds outside \
the sandbox (`NIX_REMOTE=daemon`)"
            .into();
    }
    if store_paths > 0 {
        let s = if store_paths == 1 { "" } else { "s" };
        return format!("the sandbox's packages: {store_paths} Nix store path{s}");
    }
    let dirs: Vec<String> = dirs.iter().map(|d| code(d)).collect();
    format!(
        "the host's system: {} and {etc} `/etc` entries programs need (TLS roots, loader cache, time zone, name service)",
        dirs.join(", ")
    )
}

fn network(s: &mut String, plan: &Plan) {
    s.push_str("\n## Network\n\n");
    match &plan.network {
        Network::Open => s.push_str(
            "Open: the internet, directly. The host itself (its addresses and the services \
listening on them) is not reachable.\n",
        ),
        Network::Blocked => s.push_str("Blocked: no network at all (no route, no DNS).\n"),
        Network::Filtered(rules) => {
            let proxy = plan.proxy.as_ref().map_or(String::new(), |p| {
                format!(" at `http://127.0.0.1:{}`", p.inside_port)
            });
            let _ = writeln!(
                s,
                "Filtered: no route and no DNS; HTTPS and HTTP (ports 443 and 80) to the domains \
below only, through the proxy{proxy} (`HTTPS_PROXY`, `HTTP_PROXY` and `ALL_PROXY` name it). A \
domain covers its subdomains. A denied request gets `403` with an `x-agent-sandbox-denied` \
header saying why."
            );
            for (domain, methods) in rules {
                let allowed = match methods {
                    None => "every method".to_string(),
                    Some(m) => format!("{} only", m.join(", ")),
                };
                let _ = writeln!(s, "- `{}`: {allowed}", escape_controls(domain));
            }
        }
    }
    let bridged: Vec<String> = plan
        .bridges
        .iter()
        .map(|b| b.inside_port.to_string())
        .collect();
    let proxy_only: Vec<String> = plan
        .allowed_local_ports
        .iter()
        .filter(|p| !plan.bridges.iter().any(|b| b.host_port == **p))
        .map(u16::to_string)
        .collect();
    if bridged.is_empty() {
        s.push_str("\nHost ports: none.\n");
    } else {
        let _ = writeln!(
            s,
            "\nHost ports: `127.0.0.1:P` (`localhost:P`) here reaches the host's `127.0.0.1:P` for P = {}; no other host port.",
            bridged.join(", ")
        );
    }
    if !proxy_only.is_empty() {
        let _ = writeln!(
            s,
            "Host ports only the proxy may dial (an allowed domain that resolves to the host): {}.",
            proxy_only.join(", ")
        );
    }
}

fn asking(s: &mut String) {
    s.push_str(
        "\n## Asking for more\n\n\
Only the user can grant more, when starting the sandbox: with a flag of `agent-sandbox run`, \
or in the sandbox's Nix definition (`mkSandbox`):\n\n\
| to | flag | Nix argument |\n\
| --- | --- | --- |\n\
| write a path | `--rw PATH` | `rwDirs`, `rwFiles` |\n\
| read a path | `--ro PATH` | `roDirs`, `roFiles` |\n\
| reach a domain | `--allow-domain DOMAIN` | `allowedDomains` |\n\
| reach a host port | `--allow-local-port PORT` | `allowedLocalPorts` |\n\
| write a host program's configuration | `--rw-host-config PATH` | `rwHostConfig` |\n\n\
Git's protected files stay read-only whatever is granted. Ask the user for what you need and \
say why.\n",
    );
}

#[cfg(test)]
#[path = "policy_doc_tests.rs"]
mod tests;
