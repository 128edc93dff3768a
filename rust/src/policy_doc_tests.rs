use std::collections::BTreeMap;

use super::*;
use crate::plan::{Bridge, Entry, LaunchGuard, ProxyPort};

fn ro(p: &str) -> Mount {
    Mount::RoBind {
        src: p.into(),
        dest: p.into(),
    }
}

fn rw(p: &str) -> Mount {
    Mount::Bind {
        src: p.into(),
        dest: p.into(),
    }
}

fn tmpfs(p: &str) -> Mount {
    Mount::Tmpfs { dest: p.into() }
}

/// A hand-built plan: a closure, a launch directory in a repository whose git directory is
/// protected, declared paths (one of them a link), a host program's file kept read-only, a
/// masked socket and state directory, filtered network, two host ports (one below 1024, so
/// not bridged), and the plumbing every plan has.
fn plan(network: Network) -> Plan {
    let e = Entry::new;
    let mounts = vec![
        e(Why::Closure, ro("/nix/store/aaa-bash")),
        e(Why::Closure, ro("/nix/store/bbb-claude")),
        e(
            Why::System,
            Mount::Symlink {
                target: "/nix/store/aaa-bash/bin/sh".into(),
                dest: "/bin/sh".into(),
            },
        ),
        e(
            Why::Kernel,
            Mount::Proc {
                dest: "/proc".into(),
            },
        ),
        e(
            Why::Identity,
            Mount::RoBind {
                src: "/s/S/passwd".into(),
                dest: "/etc/passwd".into(),
            },
        ),
        e(Why::Scratch, tmpfs("/tmp")),
        e(Why::Scratch, tmpfs("/run")),
        e(Why::Home, tmpfs("/home/u")),
        e(Why::Repo, ro("/home/u/repo")),
        e(Why::Launch, rw("/home/u/repo/app")),
        e(Why::GitDir, rw("/home/u/repo/.git")),
        e(Why::Declared, rw("/home/u/.claude")),
        e(Why::Declared, ro("/home/u/.gitconfig")),
        e(
            Why::Alias,
            Mount::RoBind {
                src: "/data/notes".into(),
                dest: "/home/u/notes".into(),
            },
        ),
        // Under the launch directory: covered by its line.
        e(Why::Declared, rw("/home/u/repo/app/build")),
        // A read-only path inside a read-write one is listed.
        e(Why::Declared, ro("/home/u/repo/app/vendor")),
        e(Why::Pin, rw("/home/u/repo/.git")),
        e(Why::Protect, ro("/home/u/repo/.git/config")),
        e(Why::Protect, ro("/home/u/repo/.git/hooks")),
        e(Why::Placeholder, ro("/home/u/repo/.git/info/attributes")),
        e(Why::Protect, ro("/home/u/repo/app/.envrc")),
        e(
            Why::StateMask,
            Mount::Mask {
                dest: "/home/u/.claude/state".into(),
            },
        ),
        e(
            Why::SocketMask,
            Mount::RoBind {
                src: "/s/S/empty".into(),
                dest: "/home/u/.claude/ide.sock".into(),
            },
        ),
        e(
            Why::Init,
            Mount::RoBind {
                src: "/opt/as/bin/agent-sandbox-init".into(),
                dest: crate::plan::INIT_PATH.into(),
            },
        ),
        e(
            Why::Policy,
            Mount::RoBind {
                src: "/s/S/policy.md".into(),
                dest: crate::plan::POLICY_PATH.into(),
            },
        ),
    ];
    let filtered = matches!(network, Network::Filtered(_));
    Plan {
        out_name: "claude".into(),
        command: vec!["claude".into()],
        cwd: "/home/u/repo/app".into(),
        home: "/home/u".into(),
        uid: 1000,
        gid: 100,
        mounts,
        env: BTreeMap::new(),
        network,
        allowed_local_ports: vec![80, 5432],
        dns_forward: None,
        proxy: filtered.then(|| ProxyPort {
            inside_port: 3128,
            socket: "proxy.sock".into(),
        }),
        bridges: vec![Bridge {
            inside_port: 5432,
            socket: "port-5432.sock".into(),
            host_port: 5432,
        }],
        entry_exe: "/opt/as/bin/agent-sandbox-init".into(),
        init_is_helper: false,
        upstream_ca_files: vec![],
        ca_bundle_source: None,
        guard: LaunchGuard::Ok,
        placeholders: vec![],
        held: BTreeMap::new(),
        session_files: vec![],
        session_dir: "/s/S".into(),
        nix_daemon_socket: None,
        warnings: vec![],
    }
}

const HEAD: &str = "# agent-sandbox policy

You are inside agent-sandbox (`AGENT_SANDBOX=1`). This file says what the sandbox allows. It is read-only, and nothing inside can widen the sandbox: only the user who starts it can (see \"Asking for more\").

## Files

Read-write (what you change stays on the host):
- `/home/u/repo/app`: the launch directory
- `/home/u/repo/.git`: a git directory of the repository
- `/home/u/.claude`: declared

Private to this session and discarded at exit: `$HOME` (`/home/u`), empty apart from the paths listed here, and `$TMPDIR`.

Read-only:
- `/home/u/repo`: the repository around the launch directory
- `/home/u/.gitconfig`: declared
- `/home/u/notes` (a link to `/data/notes`): declared
- the sandbox's packages: 2 Nix store paths

Protected: read-only inside the read-write paths, because programs on the host would run or obey what is written there. Writing one fails with EROFS (\"Read-only file system\"); replacing, renaming or removing one fails with EBUSY (\"Device or resource busy\"), so `git config` fails with EBUSY (git renames `.git/config.lock` over `.git/config`), and so do editors that save by renaming:
- `/home/u/repo/.git/config`: git on the host would run or obey it
- `/home/u/repo/.git/hooks`: git on the host would run or obey it
- `/home/u/repo/.git/info/attributes`: git on the host would run or obey it
- `/home/u/repo/app/.envrc`: programs on the host run or obey it

Hidden (empty here, whatever the host has there):
- `/home/u/.claude/state`: the launcher's state directory
- `/home/u/.claude/ide.sock`: a Unix socket not allowed (allowedSockets, --allow-socket)

Nothing else of the host's files is visible.

## Network

";

const TAIL: &str = "
## Asking for more

Only the user can grant more, when starting the sandbox: with a flag of `agent-sandbox run`, or in the sandbox's Nix definition (`mkSandbox`):

| to | flag | Nix argument |
| --- | --- | --- |
| write a path | `--rw PATH` | `rwDirs`, `rwFiles` |
| read a path | `--ro PATH` | `roDirs`, `roFiles` |
| reach a domain | `--allow-domain DOMAIN` | `allowedDomains` |
| reach a host port | `--allow-local-port PORT` | `allowedLocalPorts` |
| write a host program's configuration | `--rw-host-config PATH` | `rwHostConfig` |

Git's protected files stay read-only whatever is granted. Ask the user for what you need and say why.
";

const PORTS: &str = "
Host ports: `127.0.0.1:P` (`localhost:P`) here reaches the host's `127.0.0.1:P` for P = 5432; no other host port.
Host ports only the proxy may dial (an allowed domain that resolves to the host): 80.
";

#[test]
fn the_whole_policy_of_a_filtered_plan() {
    let rules = BTreeMap::from([
        ("api.anthropic.com".to_string(), None),
        (
            "github.com".to_string(),
            Some(vec!["GET".to_string(), "HEAD".to_string()]),
        ),
    ]);
    let got = render(&plan(Network::Filtered(rules)));
    let net = "Filtered: no route and no DNS; HTTPS and HTTP (ports 443 and 80) to the domains below only, through the proxy at `http://127.0.0.1:3128` (`HTTPS_PROXY`, `HTTP_PROXY` and `ALL_PROXY` name it). A domain covers its subdomains. A denied request gets `403` with an `x-agent-sandbox-denied` header saying why.
- `api.anthropic.com`: every method
- `github.com`: GET, HEAD only
";
    assert_eq!(got, format!("{HEAD}{net}{PORTS}{TAIL}"));
}

#[test]
fn open_and_blocked_networks_and_the_host_system() {
    let got = render(&plan(Network::Open));
    let open = "Open: the internet, directly. The host itself (its addresses and the services listening on them) is not reachable.\n";
    assert_eq!(got, format!("{HEAD}{open}{PORTS}{TAIL}"));

    let mut p = plan(Network::Blocked);
    p.bridges.clear();
    p.allowed_local_ports.clear();
    // Host-system mode: the host's directories and /etc entries in place of the closure.
    p.mounts.retain(|e| e.why != Why::Closure);
    p.mounts.splice(
        0..0,
        [
            Entry::new(Why::System, ro("/usr")),
            Entry::new(
                Why::System,
                Mount::Symlink {
                    target: "usr/bin".into(),
                    dest: "/bin".into(),
                },
            ),
            Entry::new(Why::System, ro("/lib")),
            Entry::new(Why::System, ro("/etc/ssl")),
            Entry::new(Why::System, ro("/etc/localtime")),
        ],
    );
    let got = render(&p);
    let head = HEAD.replace(
        "- the sandbox's packages: 2 Nix store paths",
        "- the host's system: `/usr`, `/lib` and 2 `/etc` entries programs need (TLS roots, loader cache, time zone, name service)",
    );
    let blocked = "Blocked: no network at all (no route, no DNS).\n\nHost ports: none.\n";
    assert_eq!(got, format!("{head}{blocked}{TAIL}"));
}

#[test]
fn the_whole_store_and_unusual_paths() {
    let mut p = plan(Network::Blocked);
    p.mounts.retain(|e| e.why != Why::Closure);
    p.mounts
        .insert(0, Entry::new(Why::Closure, ro("/nix/store")));
    p.mounts
        .push(Entry::new(Why::Declared, ro("/home/u/we`ird\nname")));
    let got = render(&p);
    assert!(
        got.contains("- `/nix/store`: the whole Nix store (allowNix); the Nix daemon builds outside the sandbox (`NIX_REMOTE=daemon`)\n"),
        "{got}"
    );
    // A newline in a path cannot start a line of its own.
    assert!(
        got.contains("- `/home/u/we`ird\\nname`: declared\n"),
        "{got}"
    );
}
