use super::*;
use crate::plan::INIT_PATH;
use crate::plan::{Bridge, LaunchGuard};

const HOME: &str = "/Users/u";
const SESSION: &str = "/Users/u/.local/state/agent-sandbox/S";

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

fn closure() -> Vec<Mount> {
    vec![
        ro("/nix/store/aaa-bash"),
        ro("/nix/store/bbb-claude"),
        Mount::Symlink {
            target: "/nix/store/aaa-bash/bin/sh".into(),
            dest: "/bin/sh".into(),
        },
    ]
}

fn host_system() -> Vec<Mount> {
    vec![ro("/usr"), ro("/bin"), ro("/sbin"), ro("/etc/ssl")]
}

/// What a test plan reaches on the host besides the network: the proxy, or host ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BridgeTo {
    Proxy,
    HostPort(u16),
}

fn bridge(to: BridgeTo) -> BridgeTo {
    to
}

/// A plan laid out as `plan::build` lays one out: the system layer, the Linux plumbing, the
/// user layer shallow before deep (an empty tmpfs on $HOME unless $HOME itself is bound),
/// the init, the session mount.
fn plan(system: Vec<Mount>, user: Vec<Mount>, network: Network, bridges: Vec<BridgeTo>) -> Plan {
    let e = Entry::new;
    let mut mounts: Vec<Entry> = system.into_iter().map(|m| e(Why::System, m)).collect();
    mounts.push(e(
        Why::Kernel,
        Mount::Proc {
            dest: "/proc".into(),
        },
    ));
    mounts.push(e(
        Why::Kernel,
        Mount::Dev {
            dest: "/dev".into(),
        },
    ));
    for (file, dest) in [
        ("passwd", "/etc/passwd"),
        ("group", "/etc/group"),
        ("empty", "/proc/cmdline"),
        ("boot_id", "/proc/sys/kernel/random/boot_id"),
    ] {
        mounts.push(e(
            Why::Identity,
            Mount::RoBind {
                src: Path::new(SESSION).join(file),
                dest: dest.into(),
            },
        ));
    }
    mounts.push(e(
        Why::Resolv,
        match network {
            Network::Open => ro("/etc/resolv.conf"),
            _ => Mount::RoBind {
                src: Path::new(SESSION).join("resolv.conf"),
                dest: "/etc/resolv.conf".into(),
            },
        },
    ));
    for dest in ["/tmp", "/run", HOME] {
        if !user.iter().any(|m| m.dest() == Path::new(dest)) {
            let why = if dest == HOME {
                Why::Home
            } else {
                Why::Scratch
            };
            mounts.push(e(why, Mount::Tmpfs { dest: dest.into() }));
        }
    }
    mounts.extend(user.into_iter().map(|m| match m {
        Mount::Mask { .. } => e(Why::StateMask, m),
        _ => e(Why::Declared, m),
    }));
    mounts.push(e(
        Why::Init,
        Mount::RoBind {
            src: "/opt/agent-sandbox/bin/agent-sandbox".into(),
            dest: INIT_PATH.into(),
        },
    ));
    if !bridges.is_empty() {
        mounts.push(e(
            Why::Session,
            Mount::RoBind {
                src: Path::new(SESSION).join("sandbox"),
                dest: SESSION_MOUNT.into(),
            },
        ));
    }
    let mut env = BTreeMap::from([
        ("HOME".to_string(), HOME.to_string()),
        ("PATH".to_string(), "/nix/store/aaa-bash/bin".to_string()),
        ("TMPDIR".to_string(), "/tmp".to_string()),
        ("ANTHROPIC_API_KEY".to_string(), "sk-secret".to_string()),
    ]);
    let proxy = bridges
        .contains(&BridgeTo::Proxy)
        .then(|| crate::plan::ProxyPort {
            inside_port: 3128,
            socket: "proxy.sock".into(),
        });
    let bridges: Vec<Bridge> = bridges
        .iter()
        .filter_map(|b| match b {
            BridgeTo::HostPort(p) => Some(Bridge {
                inside_port: *p,
                socket: format!("port-{p}.sock"),
                host_port: *p,
            }),
            BridgeTo::Proxy => None,
        })
        .collect();
    if proxy.is_some() {
        env.insert("HTTPS_PROXY".into(), "http://127.0.0.1:3128".into());
        env.insert(
            "SSL_CERT_FILE".into(),
            format!("{SESSION_MOUNT}/ca-bundle.pem"),
        );
    }
    Plan {
        out_name: "claude".into(),
        command: vec!["claude".into(), "--yolo".into()],
        cwd: "/Users/u/proj".into(),
        home: HOME.into(),
        uid: 501,
        gid: 20,
        mounts,
        env,
        network,
        allowed_local_ports: vec![],
        dns_forward: None,
        proxy,
        bridges,
        entry_exe: "/opt/agent-sandbox/bin/agent-sandbox".into(),
        init_is_helper: true,
        upstream_ca_files: vec![],
        ca_bundle_source: None,
        guard: LaunchGuard::Ok,
        placeholders: vec![],
        held: BTreeMap::new(),
        session_files: vec![],
        session_dir: SESSION.into(),
        nix_daemon_socket: None,
        warnings: vec![],
    }
}

fn opts() -> SeatbeltOptions {
    SeatbeltOptions::in_session_dir(Path::new(SESSION), vec!["/dev/ttys003".into()])
}

fn project() -> Vec<Mount> {
    vec![
        rw("/Users/u/proj"),
        ro("/Users/u/.gitconfig"),
        rw("/Users/u/.claude"),
        rw("/Users/u/proj/.git"),
        ro("/Users/u/proj/.git/config"),
        ro("/Users/u/proj/.git/hooks"),
    ]
}

fn worktree() -> Plan {
    let mut p = plan(
        closure(),
        vec![
            rw("/Users/u/wt"),
            rw("/Users/u/repo/.git"),
            ro("/Users/u/wt/.git"),
            ro("/Users/u/repo/.git/config"),
            ro("/Users/u/repo/.git/hooks"),
            rw("/Users/u/repo/.git/worktrees"),
            rw("/Users/u/repo/.git/worktrees/wt"),
            ro("/Users/u/repo/.git/worktrees/wt/commondir"),
            ro("/Users/u/repo/.git/worktrees/wt/gitdir"),
        ],
        Network::Blocked,
        vec![],
    );
    p.cwd = "/Users/u/wt".into();
    p
}

fn symlinked() -> Plan {
    plan(
        closure(),
        vec![
            ro("/tmp/scratch"),
            rw("/Users/u/proj"),
            Mount::Bind {
                src: "/Users/u/dotfiles/claude.json".into(),
                dest: "/Users/u/.claude.json".into(),
            },
            Mount::RoBind {
                src: "/opt/shared/gh".into(),
                dest: "/Users/u/.config/gh".into(),
            },
        ],
        Network::Blocked,
        vec![],
    )
}

fn filtered() -> Plan {
    plan(
        host_system(),
        vec![rw("/Users/u/proj")],
        Network::Filtered(BTreeMap::from([("api.anthropic.com".to_string(), None)])),
        vec![bridge(BridgeTo::Proxy), bridge(BridgeTo::HostPort(5432))],
    )
}

fn allow_nix() -> Plan {
    let mut p = plan(
        vec![ro("/nix/store"), ro("/nix/var")],
        vec![rw("/Users/u/proj")],
        Network::Blocked,
        vec![],
    );
    p.env.insert("NIX_REMOTE".into(), "daemon".into());
    p.env.insert(
        "NIX_DAEMON_SOCKET_PATH".into(),
        "/nix/var/nix/daemon-socket/socket".into(),
    );
    p.nix_daemon_socket = Some("/nix/var/nix/daemon-socket/socket".into());
    p
}

/// The proxy's real port (macOS has no bridge) reaches the profile's rule and the proxy
/// variables through the options; the plan itself is not changed (it used to be patched
/// in a clone by the launcher).
#[test]
fn the_proxys_real_port_comes_from_the_options() {
    let p = plan(
        host_system(),
        vec![rw("/Users/u/proj")],
        Network::Filtered(BTreeMap::from([("api.anthropic.com".to_string(), None)])),
        vec![bridge(BridgeTo::Proxy)],
    );
    let o = SeatbeltOptions {
        proxy_port: Some(49152),
        ..opts()
    };
    let sp = plan_seatbelt(&p, &o);
    assert!(
        sp.profile.contains("(remote ip \"localhost:49152\")"),
        "{}",
        sp.profile
    );
    assert!(!sp.profile.contains("localhost:3128"), "{}", sp.profile);
    assert_eq!(sp.env["HTTPS_PROXY"], "http://127.0.0.1:49152");
    // Without it (a dry run), the plan's port.
    let dry = plan_seatbelt(&p, &opts());
    assert!(dry.profile.contains("(remote ip \"localhost:3128\")"));
    assert_eq!(p.proxy.as_ref().unwrap().inside_port, 3128);
}

fn params(sp: &SeatbeltPlan) -> Vec<(&str, &str)> {
    sp.params
        .iter()
        .map(|(k, v)| (k.as_str(), v.to_str().unwrap()))
        .collect()
}

fn pos(haystack: &str, needle: &str) -> usize {
    haystack
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in the profile"))
}

#[test]
fn open_closure_exact_profile_and_params() {
    let sp = plan_seatbelt(&plan(closure(), project(), Network::Open, vec![]), &opts());
    let expected = format!(
        "{BASE_PROFILE}{}{TAIL_PROFILE}",
        r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_1")))
(deny file-write* file-clone network-bind (subpath (param "PATH_1")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_2")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_3")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_4")))
(deny file-write* file-clone network-bind (subpath (param "PATH_4")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_5")))
(deny file-write* file-clone network-bind (subpath (param "PATH_5")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink
  (literal (param "PIN_0"))
  (literal (param "PIN_1"))
  (literal (param "PIN_2")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink
  (literal (param "LINK_0"))
  (literal (param "LINK_1"))
  (literal (param "LINK_2")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; ---- Network: open ----
;; The internet, not this host: "localhost" is every address of this machine, so the
;; deny covers its LAN addresses too. No listening on IP ports (no inbound rule).
(allow network-outbound (remote ip "*:*"))
(deny network-outbound (remote ip "localhost:*"))
;; Names resolve through mDNSResponder (its socket, the DNS configuration); TLS
;; trust through trustd (Go, Security.framework). No other unix socket of the host.
(allow network-outbound (literal "/private/var/run/mDNSResponder"))
(allow mach-lookup
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.trustd.agent"))
(allow file-read* (literal "/private/var/run/resolv.conf"))
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
    );
    assert_eq!(sp.profile, expected);
    assert_eq!(
        params(&sp),
        [
            ("EXEC_0", "/nix/store/aaa-bash"),
            ("EXEC_1", "/nix/store/bbb-claude"),
            ("ANCESTOR_0", "/Users"),
            ("ANCESTOR_1", "/Users/u"),
            ("ANCESTOR_2", "/Users/u/.local"),
            ("ANCESTOR_3", "/Users/u/.local/state"),
            ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
            ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
            ("ANCESTOR_6", "/nix"),
            ("ANCESTOR_7", "/nix/store"),
            ("PATH_0", "/Users/u/proj"),
            ("PATH_1", "/Users/u/.gitconfig"),
            ("PATH_2", "/Users/u/.claude"),
            ("PATH_3", "/Users/u/proj/.git"),
            ("PATH_4", "/Users/u/proj/.git/config"),
            ("PATH_5", "/Users/u/proj/.git/hooks"),
            ("PIN_0", "/Users/u/proj"),
            ("PIN_1", "/Users/u/.claude"),
            ("PIN_2", "/Users/u/proj/.git"),
            ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
            ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
            ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
            (
                "LINK_1",
                "/Users/u/.local/state/agent-sandbox/S/home/.gitconfig"
            ),
            (
                "LINK_2",
                "/Users/u/.local/state/agent-sandbox/S/home/.claude"
            ),
            ("TTY_0", "/dev/ttys003"),
            ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
        ]
    );
}

#[test]
fn filtered_host_system_exact_profile_params_and_env() {
    let sp = plan_seatbelt(&filtered(), &opts());
    let expected = format!(
        "{BASE_PROFILE}{}{TAIL_PROFILE}",
        r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; Host-system mode: the host's tools, and the developer tools /usr/bin's shims run.
(allow file-read* process-exec file-map-executable
  (subpath "/Library/Developer/CommandLineTools")
  (subpath "/Applications/Xcode.app"))
(allow file-read* (literal "/private/var/db/xcode_select_link"))
(allow file-read-metadata
  (literal "/Library/Developer")
  (literal "/Applications"))
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1"))
  (subpath (param "EXEC_2")))
(allow file-read* (subpath (param "SYSTEM_0")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink (literal (param "PIN_0")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink (literal (param "LINK_0")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; The session's CA files (read-only).
(allow file-read* (subpath (param "SESSION_SHARED")))
;; ---- Network: filtered ----
;; Only the session's proxy on this host (it resolves names after its policy check) and
;; the allowed host ports. No DNS and no trustd: both would carry requests past the proxy.
(allow network-outbound (remote ip "localhost:3128"))
(allow network-outbound (remote ip "localhost:5432"))
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
    );
    assert_eq!(sp.profile, expected);
    assert_eq!(
        params(&sp),
        [
            ("EXEC_0", "/usr"),
            ("EXEC_1", "/bin"),
            ("EXEC_2", "/sbin"),
            ("SYSTEM_0", "/private/etc/ssl"),
            ("ANCESTOR_0", "/Users"),
            ("ANCESTOR_1", "/Users/u"),
            ("ANCESTOR_2", "/Users/u/.local"),
            ("ANCESTOR_3", "/Users/u/.local/state"),
            ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
            ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
            ("PATH_0", "/Users/u/proj"),
            ("PIN_0", "/Users/u/proj"),
            ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
            ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
            ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
            ("TTY_0", "/dev/ttys003"),
            (
                "SESSION_SHARED",
                "/Users/u/.local/state/agent-sandbox/S/sandbox"
            ),
            ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
        ]
    );
    // The CA bundle is read where the session keeps it (no /run on macOS), and Go 1.27+
    // is told to read it.
    assert_eq!(
        sp.env["SSL_CERT_FILE"],
        "/Users/u/.local/state/agent-sandbox/S/sandbox/ca-bundle.pem"
    );
    assert_eq!(sp.env["GODEBUG"], "x509sslcertoverrideplatform=1");
    assert_eq!(sp.env["HTTPS_PROXY"], "http://127.0.0.1:3128");
}

#[test]
fn local_ports_exact_profile_and_params() {
    let blocked = plan(
        closure(),
        vec![rw("/Users/u/proj")],
        Network::Blocked,
        vec![
            bridge(BridgeTo::HostPort(5432)),
            bridge(BridgeTo::HostPort(6379)),
        ],
    );
    let sp = plan_seatbelt(&blocked, &opts());
    let expected = format!(
        "{BASE_PROFILE}{}{TAIL_PROFILE}",
        r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink (literal (param "PIN_0")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink (literal (param "LINK_0")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; The session's CA files (read-only).
(allow file-read* (subpath (param "SESSION_SHARED")))
;; ---- Network: blocked ----
;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.
;; Allowed host ports (allowedLocalPorts).
(allow network-outbound
  (remote ip "localhost:5432")
  (remote ip "localhost:6379"))
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
    );
    assert_eq!(sp.profile, expected);
    assert_eq!(
        params(&sp),
        [
            ("EXEC_0", "/nix/store/aaa-bash"),
            ("EXEC_1", "/nix/store/bbb-claude"),
            ("ANCESTOR_0", "/Users"),
            ("ANCESTOR_1", "/Users/u"),
            ("ANCESTOR_2", "/Users/u/.local"),
            ("ANCESTOR_3", "/Users/u/.local/state"),
            ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
            ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
            ("ANCESTOR_6", "/nix"),
            ("ANCESTOR_7", "/nix/store"),
            ("PATH_0", "/Users/u/proj"),
            ("PIN_0", "/Users/u/proj"),
            ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
            ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
            ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
            ("TTY_0", "/dev/ttys003"),
            (
                "SESSION_SHARED",
                "/Users/u/.local/state/agent-sandbox/S/sandbox"
            ),
            ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
        ]
    );

    let open = plan(
        closure(),
        vec![rw("/Users/u/proj")],
        Network::Open,
        vec![bridge(BridgeTo::HostPort(5432))],
    );
    let sp = plan_seatbelt(&open, &opts());
    let expected = format!(
        "{BASE_PROFILE}{}{TAIL_PROFILE}",
        r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink (literal (param "PIN_0")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink (literal (param "LINK_0")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; The session's CA files (read-only).
(allow file-read* (subpath (param "SESSION_SHARED")))
;; ---- Network: open ----
;; The internet, not this host: "localhost" is every address of this machine, so the
;; deny covers its LAN addresses too. No listening on IP ports (no inbound rule).
(allow network-outbound (remote ip "*:*"))
(deny network-outbound (remote ip "localhost:*"))
;; Allowed host ports (allowedLocalPorts), after the deny they punch through.
(allow network-outbound (remote ip "localhost:5432"))
;; Names resolve through mDNSResponder (its socket, the DNS configuration); TLS
;; trust through trustd (Go, Security.framework). No other unix socket of the host.
(allow network-outbound (literal "/private/var/run/mDNSResponder"))
(allow mach-lookup
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.trustd.agent"))
(allow file-read* (literal "/private/var/run/resolv.conf"))
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
    );
    assert_eq!(sp.profile, expected);
    assert_eq!(
        params(&sp),
        [
            ("EXEC_0", "/nix/store/aaa-bash"),
            ("EXEC_1", "/nix/store/bbb-claude"),
            ("ANCESTOR_0", "/Users"),
            ("ANCESTOR_1", "/Users/u"),
            ("ANCESTOR_2", "/Users/u/.local"),
            ("ANCESTOR_3", "/Users/u/.local/state"),
            ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
            ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
            ("ANCESTOR_6", "/nix"),
            ("ANCESTOR_7", "/nix/store"),
            ("PATH_0", "/Users/u/proj"),
            ("PIN_0", "/Users/u/proj"),
            ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
            ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
            ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
            ("TTY_0", "/dev/ttys003"),
            (
                "SESSION_SHARED",
                "/Users/u/.local/state/agent-sandbox/S/sandbox"
            ),
            ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
        ]
    );
    // The port allow comes after the loopback deny it punches through, which comes after
    // the internet allow.
    let p = &sp.profile;
    assert!(
        pos(p, "(allow network-outbound (remote ip \"*:*\"))")
            < pos(p, "(deny network-outbound (remote ip \"localhost:*\"))")
    );
    assert!(
        pos(p, "(deny network-outbound (remote ip \"localhost:*\"))")
            < pos(p, "(allow network-outbound (remote ip \"localhost:5432\"))")
    );
}

#[test]
fn worktree_exact_profile_and_pins() {
    let sp = plan_seatbelt(&worktree(), &opts());
    let expected = format!(
        "{BASE_PROFILE}{}{TAIL_PROFILE}",
        r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7"))
  (literal (param "ANCESTOR_8")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_1")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_2")))
(deny file-write* file-clone network-bind (subpath (param "PATH_2")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_3")))
(deny file-write* file-clone network-bind (subpath (param "PATH_3")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_4")))
(deny file-write* file-clone network-bind (subpath (param "PATH_4")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_5")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_6")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_7")))
(deny file-write* file-clone network-bind (subpath (param "PATH_7")))
(allow file-read* process-exec file-map-executable (subpath (param "PATH_8")))
(deny file-write* file-clone network-bind (subpath (param "PATH_8")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink
  (literal (param "PIN_0"))
  (literal (param "PIN_1"))
  (literal (param "PIN_2"))
  (literal (param "PIN_3")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink
  (literal (param "LINK_0"))
  (literal (param "LINK_1")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; ---- Network: blocked ----
;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
    );
    assert_eq!(sp.profile, expected);
    assert_eq!(
        params(&sp),
        [
            ("EXEC_0", "/nix/store/aaa-bash"),
            ("EXEC_1", "/nix/store/bbb-claude"),
            ("ANCESTOR_0", "/Users"),
            ("ANCESTOR_1", "/Users/u"),
            ("ANCESTOR_2", "/Users/u/.local"),
            ("ANCESTOR_3", "/Users/u/.local/state"),
            ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
            ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
            ("ANCESTOR_6", "/Users/u/repo"),
            ("ANCESTOR_7", "/nix"),
            ("ANCESTOR_8", "/nix/store"),
            ("PATH_0", "/Users/u/wt"),
            ("PATH_1", "/Users/u/repo/.git"),
            ("PATH_2", "/Users/u/wt/.git"),
            ("PATH_3", "/Users/u/repo/.git/config"),
            ("PATH_4", "/Users/u/repo/.git/hooks"),
            ("PATH_5", "/Users/u/repo/.git/worktrees"),
            ("PATH_6", "/Users/u/repo/.git/worktrees/wt"),
            ("PATH_7", "/Users/u/repo/.git/worktrees/wt/commondir"),
            ("PATH_8", "/Users/u/repo/.git/worktrees/wt/gitdir"),
            ("PIN_0", "/Users/u/wt"),
            ("PIN_1", "/Users/u/repo/.git"),
            ("PIN_2", "/Users/u/repo/.git/worktrees"),
            ("PIN_3", "/Users/u/repo/.git/worktrees/wt"),
            ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
            ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
            ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/wt"),
            (
                "LINK_1",
                "/Users/u/.local/state/agent-sandbox/S/home/repo/.git"
            ),
            ("TTY_0", "/dev/ttys003"),
            ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
        ]
    );
}

#[test]
fn symlinked_declared_paths_exact_profile_links_and_params() {
    let sp = plan_seatbelt(&symlinked(), &opts());
    let expected = format!(
        "{BASE_PROFILE}{}{TAIL_PROFILE}",
        r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable
  (subpath (param "EXEC_0"))
  (subpath (param "EXEC_1")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6"))
  (literal (param "ANCESTOR_7"))
  (literal (param "ANCESTOR_8"))
  (literal (param "ANCESTOR_9"))
  (literal (param "ANCESTOR_10"))
  (literal (param "ANCESTOR_11")))
;; Declared symlinks, granted on their real targets. Allows only: never weaker than
;; the rules below for the same place.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "TARGET_0")))
(allow file-read* process-exec file-map-executable (subpath (param "TARGET_1")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* process-exec file-map-executable (subpath (param "PATH_0")))
(deny file-write* file-clone network-bind (subpath (param "PATH_0")))
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_1")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_1")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink
  (literal (param "PIN_0"))
  (literal (param "PIN_1")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink
  (literal (param "LINK_0"))
  (literal (param "LINK_1"))
  (literal (param "LINK_2")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; ---- Network: blocked ----
;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
    );
    assert_eq!(sp.profile, expected);
    assert_eq!(
        params(&sp),
        [
            ("EXEC_0", "/nix/store/aaa-bash"),
            ("EXEC_1", "/nix/store/bbb-claude"),
            ("ANCESTOR_0", "/Users"),
            ("ANCESTOR_1", "/Users/u"),
            ("ANCESTOR_2", "/Users/u/.local"),
            ("ANCESTOR_3", "/Users/u/.local/state"),
            ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
            ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
            ("ANCESTOR_6", "/Users/u/dotfiles"),
            ("ANCESTOR_7", "/nix"),
            ("ANCESTOR_8", "/nix/store"),
            ("ANCESTOR_9", "/opt"),
            ("ANCESTOR_10", "/opt/shared"),
            ("ANCESTOR_11", "/private/tmp"),
            ("TARGET_0", "/Users/u/dotfiles/claude.json"),
            ("TARGET_1", "/opt/shared/gh"),
            ("PATH_0", "/private/tmp/scratch"),
            ("PATH_1", "/Users/u/proj"),
            ("PIN_0", "/Users/u/dotfiles/claude.json"),
            ("PIN_1", "/Users/u/proj"),
            ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
            ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
            (
                "LINK_0",
                "/Users/u/.local/state/agent-sandbox/S/home/.claude.json"
            ),
            ("LINK_1", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
            (
                "LINK_2",
                "/Users/u/.local/state/agent-sandbox/S/home/.config/gh"
            ),
            ("TTY_0", "/dev/ttys003"),
            ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
        ]
    );
    let h = Path::new(SESSION).join("home");
    assert_eq!(
        sp.home_links,
        [
            (
                h.join(".claude.json"),
                "/Users/u/dotfiles/claude.json".into()
            ),
            (h.join("proj"), "/Users/u/proj".into()),
            (h.join(".config/gh"), "/opt/shared/gh".into()),
        ]
    );
}

#[test]
fn allow_nix_reaches_the_daemon_socket_and_executes_only_the_store() {
    let sp = plan_seatbelt(&allow_nix(), &opts());
    let expected = format!(
        "{BASE_PROFILE}{}{TAIL_PROFILE}",
        r#"
;; ---- Generated for this session. Every path is a parameter (-D), never text ----
;; The closure: the only system executables besides /bin/sh, /bin/bash, /usr/bin/env
;; (the host's /usr/bin is not exposed).
(allow file-read* process-exec file-map-executable (subpath (param "EXEC_0")))
(allow file-read* (subpath (param "SYSTEM_0")))
;; The directories above granted paths: stat only, no listing (realpath lstats each).
(allow file-read-metadata
  (literal (param "ANCESTOR_0"))
  (literal (param "ANCESTOR_1"))
  (literal (param "ANCESTOR_2"))
  (literal (param "ANCESTOR_3"))
  (literal (param "ANCESTOR_4"))
  (literal (param "ANCESTOR_5"))
  (literal (param "ANCESTOR_6")))
;; Exposed paths, shallow before deep; a read-only path also denies writes, so the
;; deepest rule wins, as the deepest mount does on Linux.
(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param "PATH_0")))
(allow network-bind network-inbound network-outbound (subpath (param "PATH_0")))
;; Pins: writable roots and the directories above protected paths cannot be renamed
;; or removed (a rename would carry the protected path away from its rule).
(deny file-write-unlink (literal (param "PIN_0")))
;; The private per-session directories: HOME (when empty on Linux) and TMPDIR.
(allow file-read* file-write* file-clone process-exec file-map-executable
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
(allow network-bind network-inbound network-outbound
  (subpath (param "HOME_DIR"))
  (subpath (param "TMP_DIR")))
;; The links in the private home stand for Linux's mount points: they cannot be
;; replaced, so a write-and-rename onto one fails (EBUSY there) instead of silently
;; replacing the link with a file that vanishes at exit.
(deny file-write-unlink (literal (param "LINK_0")))
;; The session's own terminal, by name.
(allow file-read* file-write* file-ioctl (literal (param "TTY_0")))
;; allowNix: the Nix daemon's socket (the daemon builds outside this sandbox).
(allow network-outbound (literal (param "NIX_DAEMON_SOCKET")))
;; ---- Network: blocked ----
;; No IP networking, no name resolution; unix sockets only in the sandbox's own directories.
;; ---- Final denies ----
;; Other sessions' and other programs' temporary directories.
(deny file-read-data file-write*
  (require-all
    (subpath "/private/var/folders")
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
;; The session directory: its logs and files are the launcher's.
(deny file-write*
  (require-all
    (subpath (param "SESSION_DIR"))
    (require-not (subpath (param "HOME_DIR")))
    (require-not (subpath (param "TMP_DIR")))))
"#
    );
    assert_eq!(sp.profile, expected);
    assert_eq!(
        params(&sp),
        [
            ("EXEC_0", "/nix/store"),
            ("SYSTEM_0", "/nix/var"),
            ("ANCESTOR_0", "/Users"),
            ("ANCESTOR_1", "/Users/u"),
            ("ANCESTOR_2", "/Users/u/.local"),
            ("ANCESTOR_3", "/Users/u/.local/state"),
            ("ANCESTOR_4", "/Users/u/.local/state/agent-sandbox"),
            ("ANCESTOR_5", "/Users/u/.local/state/agent-sandbox/S"),
            ("ANCESTOR_6", "/nix"),
            ("PATH_0", "/Users/u/proj"),
            ("PIN_0", "/Users/u/proj"),
            ("HOME_DIR", "/Users/u/.local/state/agent-sandbox/S/home"),
            ("TMP_DIR", "/Users/u/.local/state/agent-sandbox/S/tmp"),
            ("LINK_0", "/Users/u/.local/state/agent-sandbox/S/home/proj"),
            ("TTY_0", "/dev/ttys003"),
            ("NIX_DAEMON_SOCKET", "/nix/var/nix/daemon-socket/socket"),
            ("SESSION_DIR", "/Users/u/.local/state/agent-sandbox/S"),
        ]
    );
}

/// The adversarial case: a declared path built to close the filter and open a new rule.
/// Issue 10, item 6: launched from $HOME, the state dir inside it is masked; Seatbelt
/// denies reading and writing it, sparing only this session's private HOME and TMPDIR.
#[test]
fn a_masked_state_dir_is_denied_but_the_private_dirs() {
    let state = "/Users/u/.local/state/agent-sandbox";
    let mut p = plan(
        closure(),
        vec![
            rw(HOME),
            rw("/Users/u/.local"),
            rw("/Users/u/.local/state"),
            Mount::Mask { dest: state.into() },
        ],
        Network::Blocked,
        vec![],
    );
    p.cwd = HOME.into();
    let sp = plan_seatbelt(&p, &opts());
    let rule = "(deny file-read-data file-write*\n  (require-all\n    (subpath (param \"MASK_0\"))\n    (require-not (subpath (param \"TMP_DIR\")))))";
    assert!(sp.profile.contains(rule), "{}", sp.profile);
    assert!(params(&sp).contains(&("MASK_0", state)));
    // After every allow: the deepest rule, the mask, decides.
    assert!(pos(&sp.profile, rule) > pos(&sp.profile, "(allow file-read* file-write*"));
    // The directories above it are pinned: renaming one cannot carry the rule away.
    for pin in ["/Users/u/.local", "/Users/u/.local/state"] {
        assert!(
            params(&sp)
                .iter()
                .any(|(k, v)| k.starts_with("PIN_") && *v == pin),
            "{pin}"
        );
    }
}

/// The policy file is read where the launcher wrote it (macOS has no /run): one literal,
/// readable through a mask of the state directory, never writable, and the variable naming
/// it points there.
#[test]
fn the_policy_file_is_readable_in_the_session_dir_and_named_by_its_variable() {
    let state = "/Users/u/.local/state/agent-sandbox";
    let mut p = plan(
        closure(),
        vec![rw("/Users/u/.local"), Mount::Mask { dest: state.into() }],
        Network::Blocked,
        vec![],
    );
    p.mounts.push(Entry::new(
        Why::Policy,
        Mount::RoBind {
            src: Path::new(SESSION).join("policy.md"),
            dest: crate::plan::POLICY_PATH.into(),
        },
    ));
    p.env.insert(
        "AGENT_SANDBOX_POLICY".into(),
        crate::plan::POLICY_PATH.into(),
    );
    let sp = plan_seatbelt(&p, &opts());
    let real = format!("{SESSION}/policy.md");
    assert!(
        params(&sp).contains(&("POLICY", real.as_str())),
        "{:?}",
        sp.params
    );
    assert_eq!(sp.env["AGENT_SANDBOX_POLICY"], real);
    let allow = "(allow file-read* (literal (param \"POLICY\")))";
    assert_eq!(sp.profile.matches(allow).count(), 1, "{}", sp.profile);
    assert!(!sp.profile.contains("/run"), "{}", sp.profile);
    let mask = "(deny file-read-data file-write*\n  (require-all\n    (subpath (param \"MASK_0\"))\n    (require-not (subpath (param \"HOME_DIR\")))\n    (require-not (subpath (param \"TMP_DIR\")))\n    (require-not (literal (param \"POLICY\")))))";
    assert!(sp.profile.contains(mask), "{}", sp.profile);
    assert!(pos(&sp.profile, mask) > pos(&sp.profile, allow));
    // Writes stay denied: the session directory's rule spares only the private dirs.
    let session = "(deny file-write*\n  (require-all\n    (subpath (param \"SESSION_DIR\"))\n    (require-not (subpath (param \"HOME_DIR\")))\n    (require-not (subpath (param \"TMP_DIR\")))))";
    assert!(sp.profile.contains(session), "{}", sp.profile);
    // The Linux path is nowhere, and no other variable changed.
    let before = plan_seatbelt(
        &{
            let mut q = p.clone();
            q.mounts.retain(|e| e.why != Why::Policy);
            q
        },
        &opts(),
    );
    let mut env = sp.env.clone();
    env.remove("AGENT_SANDBOX_POLICY");
    let mut env_before = before.env.clone();
    env_before.remove("AGENT_SANDBOX_POLICY");
    assert_eq!(env, env_before);
}

#[test]
fn hostile_path_changes_params_never_the_profile() {
    let hostile = "/Users/u/x\")) (allow file-write* (subpath \"/\"))\n(allow default)";
    let benign = "/Users/u/benign/path";
    assert_eq!(depth(Path::new(hostile)), depth(Path::new(benign)));
    let with = |declared: &str| {
        let mut user = project();
        user.push(rw(declared));
        user.push(Mount::Bind {
            src: format!("{declared}/target").into(),
            dest: "/Users/u/link".into(),
        });
        plan_seatbelt(&plan(closure(), user, Network::Open, vec![]), &opts())
    };
    let (bad, good) = (with(hostile), with(benign));
    assert_eq!(bad.profile, good.profile);
    assert!(!bad.profile.contains("(allow default)"));
    assert!(!bad.profile.contains("(subpath \"/\")"));
    // The path travels only as parameter values, each one argv element.
    let carrying: Vec<&str> = params(&bad)
        .into_iter()
        .filter(|(_, v)| v.contains("(allow default)"))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(carrying, ["TARGET_0", "PATH_4", "PIN_0", "PIN_4", "LINK_4"]);
    let arg = OsString::from(format!("-DPATH_4={hostile}"));
    assert_eq!(bad.argv.iter().filter(|a| **a == arg).count(), 1);
    assert_eq!(bad.argv[2], OsString::from(&bad.profile));
}

#[test]
fn canonicalises_root_symlinks() {
    for (given, want) in [
        ("/tmp", "/private/tmp"),
        ("/tmp/x/y", "/private/tmp/x/y"),
        ("/var/folders/ab/T", "/private/var/folders/ab/T"),
        ("/etc/ssl", "/private/etc/ssl"),
        ("/private/tmp/x", "/private/tmp/x"),
        ("/tmpfoo", "/tmpfoo"),
        ("/Users/u/tmp", "/Users/u/tmp"),
    ] {
        assert_eq!(canonical(Path::new(given)), PathBuf::from(want), "{given}");
    }
    // Everywhere: declared paths, session directories, terminals.
    let mut p = plan(closure(), vec![ro("/tmp/in")], Network::Blocked, vec![]);
    p.cwd = "/var/folders/ab/proj".into();
    p.mounts
        .push(Entry::new(Why::Declared, rw("/var/folders/ab/proj")));
    let o = SeatbeltOptions {
        home_dir: "/var/folders/ab/T/s/home".into(),
        tmp_dir: "/tmp/s".into(),
        ttys: vec![],
        proxy_port: None,
    };
    let sp = plan_seatbelt(&p, &o);
    let values: Vec<&str> = params(&sp).into_iter().map(|(_, v)| v).collect();
    for v in &values {
        assert!(!v.starts_with("/tmp") && !v.starts_with("/var/"), "{v}");
    }
    assert!(values.contains(&"/private/tmp/in"));
    assert_eq!(sp.cwd, PathBuf::from("/private/var/folders/ab/proj"));
    assert_eq!(sp.env["TMPDIR"], "/private/tmp/s");
    assert_eq!(sp.env["HOME"], "/private/var/folders/ab/T/s/home");
    // A project inside the user's temp dir is spared by the final temp-dir deny (the last
    // matching rule wins, so without this it would be unusable).
    let project = params(&sp)
        .into_iter()
        .find(|(_, v)| *v == "/private/var/folders/ab/proj")
        .map(|(n, _)| n.to_string())
        .expect("the project is a parameter");
    let deny = sp
        .profile
        .split(";; Other sessions' and other programs' temporary directories.\n")
        .nth(1)
        .unwrap();
    assert!(
        deny.contains(&format!("(require-not (subpath (param \"{project}\")))")),
        "{deny}"
    );
}

#[test]
fn argv_is_sandbox_exec_profile_params_then_the_command() {
    let mut p = plan(closure(), project(), Network::Open, vec![]);
    p.command = vec!["claude".into(), "--yolo".into(), "a b\n'c'".into()];
    let sp = plan_seatbelt(&p, &opts());
    let mut want: Vec<OsString> = vec![
        "/usr/bin/sandbox-exec".into(),
        "-p".into(),
        sp.profile.clone().into(),
    ];
    for (k, v) in &sp.params {
        let mut a = OsString::from(format!("-D{k}="));
        a.push(v);
        want.push(a);
    }
    want.extend([
        "--".into(),
        "claude".into(),
        "--yolo".into(),
        "a b\n'c'".into(),
    ]);
    assert_eq!(sp.argv, want);
    assert_eq!(sp.argv[3], "-DEXEC_0=/nix/store/aaa-bash");
    assert_eq!(sp.cwd, PathBuf::from("/Users/u/proj"));
}

/// Last match wins: each deny must come after every allow it overrides.
#[test]
fn denies_follow_the_allows_they_override() {
    let sp = plan_seatbelt(&plan(closure(), project(), Network::Open, vec![]), &opts());
    let p = &sp.profile;
    let name = |value: &str| {
        sp.params
            .iter()
            .find(|(_, v)| v == value)
            .map(|(k, _)| k.clone())
            .unwrap()
    };
    let allow_rw = |path: &str| {
        pos(
            p,
            &format!("(allow {OPS_RW} (subpath (param \"{}\")))", name(path)),
        )
    };
    let deny = |path: &str| {
        pos(
            p,
            &format!("(deny {OPS_PROTECT} (subpath (param \"{}\")))", name(path)),
        )
    };
    for protected in ["/Users/u/proj/.git/hooks", "/Users/u/proj/.git/config"] {
        assert!(deny(protected) > allow_rw("/Users/u/proj"));
        assert!(deny(protected) > allow_rw("/Users/u/proj/.git"));
    }
    // Pins after every path rule; the private dirs' allow cannot reach them.
    assert!(pos(p, "(deny file-write-unlink") > deny("/Users/u/proj/.git/hooks"));
    // TIOCSTI after every ioctl allow; the process table after the sysctl allow.
    let tiocsti = pos(p, "(deny file-ioctl (ioctl-command 2147578994))");
    assert!(tiocsti > p.rfind("file-ioctl (literal").unwrap());
    assert!(tiocsti > pos(p, "(allow file-ioctl (regex"));
    assert!(pos(p, "(deny sysctl-read") > pos(p, "(allow sysctl-read)"));
    // The final denies after everything the sandbox is granted.
    let last_allow = p.rfind("(allow ").unwrap();
    assert!(pos(p, ";; ---- Final denies ----") > last_allow);
}

#[test]
fn base_and_tail_are_constant_and_fail_closed() {
    assert!(BASE_PROFILE.starts_with("(version 1)\n"));
    let deny_default = pos(BASE_PROFILE, "\n(deny default)\n");
    assert!(deny_default < pos(BASE_PROFILE, "\n(allow "));
    let code = |text: &str| -> String {
        text.lines()
            .map(|l| l.split(';').next().unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    };
    for text in [BASE_PROFILE, TAIL_PROFILE] {
        assert!(!code(text).contains("(param"));
        assert!(!code(text).contains("(allow default"));
    }
    assert!(!code(TAIL_PROFILE).contains("(allow"));
    // TIOCSTI = _IOW('t', 114, char): IOC_IN | sizeof(char) << 16 | 't' << 8 | 114.
    let tiocsti = 0x8000_0000u32 | (1 << 16) | ((b't' as u32) << 8) | 114;
    assert!(TAIL_PROFILE.contains(&format!("(deny file-ioctl (ioctl-command {tiocsti}))")));
    for d in BASE_STAT_DIRS {
        assert!(
            BASE_PROFILE.contains(&format!("  (literal \"{d}\")")),
            "{d}"
        );
    }
    // Parentheses balance (the compiler would reject the profile otherwise).
    let sp = plan_seatbelt(&symlinked(), &opts());
    let code = code(&sp.profile);
    assert_eq!(code.matches('(').count(), code.matches(')').count());
}

#[test]
fn launched_from_home_keeps_the_real_home() {
    let mut p = plan(closure(), vec![rw(HOME)], Network::Blocked, vec![]);
    p.cwd = HOME.into();
    let sp = plan_seatbelt(&p, &opts());
    assert_eq!(sp.home_dir, None);
    assert!(sp.home_links.is_empty());
    assert_eq!(sp.env["HOME"], HOME);
    assert!(!sp.profile.contains("HOME_DIR"));
    assert!(params(&sp).contains(&("PATH_0", HOME)));
}

#[test]
fn prepare_creates_private_dirs_and_links_and_refuses_existing() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path();
    let target = session.join("real-claude");
    std::fs::create_dir(&target).unwrap();
    let sp = SeatbeltPlan {
        profile: String::new(),
        params: vec![],
        argv: vec![SANDBOX_EXEC.into()],
        env: BTreeMap::new(),
        cwd: session.into(),
        home_dir: Some(session.join("home")),
        tmp_dir: session.join("tmp"),
        home_links: vec![
            (session.join("home/.claude"), target.clone()),
            (session.join("home/.config/gh"), "/nonexistent/gh".into()),
        ],
    };
    prepare(&sp).unwrap();
    for d in ["home", "tmp", "home/.config"] {
        let m = std::fs::metadata(session.join(d)).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.permissions().mode() & 0o777, 0o700, "{d}");
    }
    assert_eq!(
        std::fs::read_link(session.join("home/.claude")).unwrap(),
        target
    );
    assert_eq!(
        std::fs::read_link(session.join("home/.config/gh")).unwrap(),
        PathBuf::from("/nonexistent/gh")
    );
    // A second session with the same directories: refused, nothing reused.
    let err = prepare(&sp).unwrap_err().to_string();
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn command_clears_the_environment() {
    let sp = plan_seatbelt(&filtered(), &opts());
    let c = command(&sp);
    assert_eq!(c.get_program(), SANDBOX_EXEC);
    let args: Vec<&std::ffi::OsStr> = c.get_args().collect();
    assert_eq!(
        args,
        sp.argv[1..]
            .iter()
            .map(|a| a.as_os_str())
            .collect::<Vec<_>>()
    );
    assert_eq!(c.get_current_dir(), Some(Path::new("/Users/u/proj")));
    let envs: BTreeMap<String, String> = c
        .get_envs()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.unwrap().to_string_lossy().into_owned(),
            )
        })
        .collect();
    assert_eq!(envs, sp.env);
}

#[test]
fn dry_run_shows_profile_params_argv_and_masks_secrets() {
    let mut p = plan(closure(), project(), Network::Open, vec![]);
    p.mounts
        .push(Entry::new(Why::Declared, rw("/Users/u/new\nline")));
    let out = render_dry_run(&p);
    assert!(out.contains("ANTHROPIC_API_KEY=<masked, 9 chars>"));
    assert!(!out.contains("sk-secret"));
    assert!(out.contains(BASE_PROFILE));
    assert!(out.contains("\n  PATH_0=/Users/u/proj\n"));
    assert!(out.contains("=/Users/u/new\\nline\n"));
    assert!(!out.contains("new\nline"));
    assert!(out.contains(
            "sandbox-exec argv: /usr/bin/sandbox-exec -p '<the profile above>' -DEXEC_0=/nix/store/aaa-bash "
        ));
    assert!(out.contains(" -- claude --yolo\n"));
    // The session directory comes from the plan; no terminal is known before launch.
    assert!(out.contains(
        "home: private per-session directory /Users/u/.local/state/agent-sandbox/S/home\n"
    ));
    assert!(!out.contains("TTY_0"));
}
