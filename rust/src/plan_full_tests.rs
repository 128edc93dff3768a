use std::path::{Path, PathBuf};

use super::*;
use crate::linux::bwrap::{LinuxRun, argv};
use crate::macos::{SeatbeltOptions, plan_seatbelt};

/// A home, a launch directory and a one-package "store" in a temporary directory of /tmp.
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    proj: PathBuf,
    pkg: PathBuf,
}

impl World {
    fn new() -> Self {
        // Under /tmp whatever TMPDIR says: the ancestors the profile names are exact.
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        let proj = home.join("proj");
        let pkg = root.join("store/aaaa-bash");
        for d in [&proj, &pkg.join("bin"), &home.join(".claude")] {
            std::fs::create_dir_all(d).unwrap();
        }
        for f in ["bin/sh", "bin/env"] {
            std::fs::write(pkg.join(f), "").unwrap();
        }
        std::fs::write(home.join(".gitconfig"), "").unwrap();
        World {
            _tmp: tmp,
            root,
            home,
            proj,
            pkg,
        }
    }

    fn spec(&self) -> Spec {
        let mut s = Spec::new();
        s.out_name = Some("claude".into());
        s.closure = Some(vec![self.pkg.display().to_string()]);
        s.path = Some(vec![self.pkg.join("bin").display().to_string()]);
        s.rw_dirs = vec!["~/.claude".into()];
        s.ro_files = vec!["~/.gitconfig".into()];
        s.env.insert("EDITOR".into(), "vi".into());
        s
    }

    fn host(&self) -> HostContext {
        HostContext {
            cwd: self.proj.clone(),
            cwd_link: None,
            home: self.home.clone(),
            uid: 1000,
            gid: 100,
            term: Some("xterm".into()),
            locale: vec![
                ("LANG".into(), "de_DE.UTF-8".into()),
                ("LC_TIME".into(), "en_GB.UTF-8".into()),
                ("COLORTERM".into(), "truecolor".into()),
            ],
            session_dir: self.root.join("state/S"),
            helper_exe: "/opt/as/bin/agent-sandbox".into(),
            init_exe: Some("/opt/as/bin/agent-sandbox-init".into()),
            listening_ports: vec![],
            lowest_bridged_port: 1024,
            caller_path: "/usr/bin:/bin".into(),
            resolv_conf: Some("nameserver 192.0.2.53\n".into()),
            nix: Default::default(),
            system_ca_bundle: None,
            has_bin_bash: true,
            proc_ro: vec!["/proc/sys".into(), "/proc/sysrq-trigger".into()],
        }
    }
}

fn ro(p: &Path) -> Mount {
    Mount::RoBind {
        src: p.into(),
        dest: p.into(),
    }
}

fn rw(p: &Path) -> Mount {
    Mount::Bind {
        src: p.into(),
        dest: p.into(),
    }
}

fn from_session(w: &World, file: &str, dest: &str) -> Mount {
    Mount::RoBind {
        src: w.root.join("state/S").join(file),
        dest: dest.into(),
    }
}

fn labelled(plan: &Plan) -> Vec<(Why, Mount)> {
    plan.mounts
        .iter()
        .map(|e| (e.why, e.mount.clone()))
        .collect()
}

/// The whole labelled plan of an agent's declaration in filtered mode: the closure and its
/// shell links, the Linux plumbing, the launch directory and the declared paths (shallow
/// before deep), the init, the session's shared directory; and its environment.
#[test]
fn a_filtered_closure_plan_in_full() {
    let w = World::new();
    let mut spec = w.spec();
    spec.allowed_domains = Some(AllowedDomains::List(vec!["api.anthropic.com".into()]));
    // The spec's value wins over the launcher's locale; the sandbox's own variables win over
    // the spec's.
    spec.env.insert("LANG".into(), "C.UTF-8".into());
    spec.env.insert("AGENT_SANDBOX".into(), "0".into());
    let plan = build(&spec, &["claude".into(), "--yolo".into()], &w.host()).unwrap();
    let p = |s: &str| PathBuf::from(s);
    let want: Vec<(Why, Mount)> = vec![
        (Why::Closure, ro(&w.pkg)),
        (
            Why::System,
            Mount::Symlink {
                target: w.pkg.join("bin/sh"),
                dest: p("/bin/sh"),
            },
        ),
        (
            Why::System,
            Mount::Symlink {
                target: w.pkg.join("bin/env"),
                dest: p("/usr/bin/env"),
            },
        ),
        (Why::Kernel, Mount::Proc { dest: p("/proc") }),
        (Why::Kernel, ro(Path::new("/proc/sys"))),
        (Why::Kernel, ro(Path::new("/proc/sysrq-trigger"))),
        (Why::Kernel, Mount::Dev { dest: p("/dev") }),
        (Why::Identity, from_session(&w, "passwd", "/etc/passwd")),
        (Why::Identity, from_session(&w, "group", "/etc/group")),
        (Why::Identity, from_session(&w, "hosts", "/etc/hosts")),
        (
            Why::Identity,
            from_session(&w, "nsswitch.conf", "/etc/nsswitch.conf"),
        ),
        (Why::Identity, from_session(&w, "empty", "/proc/cmdline")),
        (
            Why::Identity,
            from_session(&w, "boot_id", "/proc/sys/kernel/random/boot_id"),
        ),
        (
            Why::Resolv,
            from_session(&w, "resolv.conf", "/etc/resolv.conf"),
        ),
        (Why::Scratch, Mount::Tmpfs { dest: p("/tmp") }),
        (Why::Scratch, Mount::Tmpfs { dest: p("/run") }),
        (
            Why::Scratch,
            Mount::Tmpfs {
                dest: p("/run/agent-sandbox"),
            },
        ),
        (
            Why::Home,
            Mount::Tmpfs {
                dest: w.home.clone(),
            },
        ),
        // Same depth: in the order planned (the launch directory first).
        (Why::Launch, rw(&w.proj)),
        (Why::Declared, rw(&w.home.join(".claude"))),
        (Why::Declared, ro(&w.home.join(".gitconfig"))),
        (
            Why::Init,
            Mount::RoBind {
                src: p("/opt/as/bin/agent-sandbox-init"),
                dest: p(INIT_PATH),
            },
        ),
        (Why::Policy, from_session(&w, "policy.md", POLICY_PATH)),
        (
            Why::Session,
            Mount::RoBind {
                src: w.root.join("state/S/sandbox"),
                dest: p(SESSION_MOUNT),
            },
        ),
    ];
    assert_eq!(labelled(&plan), want);
    assert_eq!(
        plan.proxy,
        Some(ProxyPort {
            inside_port: 3128,
            socket: "proxy.sock".into()
        })
    );
    assert_eq!(plan.bridges, vec![]);
    assert_eq!(plan.closure(), vec![w.pkg.as_path()]);
    assert_eq!(
        plan.network,
        Network::Filtered(BTreeMap::from([("api.anthropic.com".to_string(), None)]))
    );
    let bundle = format!("{SESSION_MOUNT}/ca-bundle.pem");
    let proxy = "http://127.0.0.1:3128".to_string();
    let mut env: BTreeMap<String, String> = BTreeMap::from([
        ("AGENT_SANDBOX".into(), "1".into()),
        ("AGENT_SANDBOX_POLICY".into(), POLICY_PATH.into()),
        ("AGENT_SANDBOX_SESSION".into(), "S".into()),
        ("COLORTERM".into(), "truecolor".into()),
        ("EDITOR".into(), "vi".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("LC_TIME".into(), "en_GB.UTF-8".into()),
        ("GIT_CONFIG_COUNT".into(), "1".into()),
        ("GIT_CONFIG_KEY_0".into(), "user.useConfigOnly".into()),
        ("GIT_CONFIG_VALUE_0".into(), "true".into()),
        ("HOME".into(), w.home.display().to_string()),
        (
            "NODE_EXTRA_CA_CERTS".into(),
            format!("{SESSION_MOUNT}/proxy-ca.pem"),
        ),
        ("NO_PROXY".into(), "localhost,127.0.0.1,::1".into()),
        ("no_proxy".into(), "localhost,127.0.0.1,::1".into()),
        ("PATH".into(), w.pkg.join("bin").display().to_string()),
        ("SHELL".into(), "/bin/sh".into()),
        ("TERM".into(), "xterm".into()),
        ("TMPDIR".into(), "/tmp".into()),
    ]);
    for v in CA_BUNDLE_VARS.iter() {
        env.insert(v.to_string(), bundle.clone());
    }
    for v in PROXY_VARS {
        env.insert(v.to_string(), proxy.clone());
    }
    assert_eq!(plan.env, env);
    assert_eq!(plan.warnings, Vec::<String>::new());
    assert_eq!(plan.command, ["claude", "--yolo"]);
}

/// The same plan lowered both ways: bubblewrap binds exactly the labelled mounts in order, and
/// Seatbelt turns the same labels into rules (the Linux plumbing left out, the home and /tmp
/// private, the declared paths with their modes).
#[test]
fn one_plan_two_lowerings() {
    let w = World::new();
    let plan = build(&w.spec(), &["claude".into()], &w.host()).unwrap();
    let a = argv(&plan, &LinuxRun::plain(&plan));
    let strs: Vec<String> = a.iter().map(|x| x.to_string_lossy().into_owned()).collect();
    let from = strs.iter().position(|x| x == "--as-pid-1").unwrap() + 1;
    let to = strs.iter().position(|x| x == "--remount-ro").unwrap();
    let s = |p: &Path| p.display().to_string();
    let sess = |f: &str| s(&w.root.join("state/S").join(f));
    let want: Vec<String> = [
        vec!["--ro-bind".into(), s(&w.pkg), s(&w.pkg)],
        vec![
            "--symlink".into(),
            s(&w.pkg.join("bin/sh")),
            "/bin/sh".into(),
        ],
        vec![
            "--symlink".into(),
            s(&w.pkg.join("bin/env")),
            "/usr/bin/env".into(),
        ],
        vec!["--proc".into(), "/proc".into()],
        vec!["--ro-bind".into(), "/proc/sys".into(), "/proc/sys".into()],
        vec![
            "--ro-bind".into(),
            "/proc/sysrq-trigger".into(),
            "/proc/sysrq-trigger".into(),
        ],
        vec!["--dev".into(), "/dev".into()],
        vec!["--ro-bind".into(), sess("passwd"), "/etc/passwd".into()],
        vec!["--ro-bind".into(), sess("group"), "/etc/group".into()],
        vec!["--ro-bind".into(), sess("hosts"), "/etc/hosts".into()],
        vec![
            "--ro-bind".into(),
            sess("nsswitch.conf"),
            "/etc/nsswitch.conf".into(),
        ],
        vec!["--ro-bind".into(), sess("empty"), "/proc/cmdline".into()],
        vec![
            "--ro-bind".into(),
            sess("boot_id"),
            "/proc/sys/kernel/random/boot_id".into(),
        ],
        // Open mode: the host's resolver is reachable (its nameserver is not on loopback).
        vec![
            "--ro-bind".into(),
            "/etc/resolv.conf".into(),
            "/etc/resolv.conf".into(),
        ],
        vec!["--tmpfs".into(), "/tmp".into()],
        vec!["--tmpfs".into(), "/run".into()],
        vec!["--tmpfs".into(), "/run/agent-sandbox".into()],
        vec!["--tmpfs".into(), s(&w.home)],
        vec!["--bind".into(), s(&w.proj), s(&w.proj)],
        vec![
            "--bind".into(),
            s(&w.home.join(".claude")),
            s(&w.home.join(".claude")),
        ],
        vec![
            "--ro-bind".into(),
            s(&w.home.join(".gitconfig")),
            s(&w.home.join(".gitconfig")),
        ],
        vec![
            "--ro-bind".into(),
            "/opt/as/bin/agent-sandbox-init".into(),
            INIT_PATH.into(),
        ],
        vec!["--ro-bind".into(), sess("policy.md"), POLICY_PATH.into()],
    ]
    .concat();
    assert_eq!(strs[from..to], want[..]);

    let sp = plan_seatbelt(
        &plan,
        &SeatbeltOptions::in_session_dir(&w.root.join("state/S"), vec![]),
    );
    let params: BTreeMap<String, String> = sp
        .params
        .iter()
        .map(|(k, v)| (k.clone(), v.display().to_string()))
        .collect();
    // What the profile names, exactly: the closure (executable), the launch directory and
    // the declared paths (PATH_*, the writable ones pinned), their ancestors (readable for
    // lookups), the private home holding links to them, the private TMPDIR, and the session
    // directory (the launcher's). Nothing of the Linux plumbing.
    let c = |p: &Path| crate::macos::seatbelt::canonical(p).display().to_string();
    let sess = w.root.join("state/S");
    let want: BTreeMap<String, String> = [
        ("ANCESTOR_0", "/private/tmp".to_string()),
        ("ANCESTOR_1", c(&w.root)),
        ("ANCESTOR_2", c(&w.home)),
        ("ANCESTOR_3", c(&w.root.join("state"))),
        ("ANCESTOR_4", c(&sess)),
        ("ANCESTOR_5", c(&w.root.join("store"))),
        ("EXEC_0", c(&w.pkg)),
        ("HOME_DIR", c(&sess.join("home"))),
        ("LINK_0", c(&sess.join("home/proj"))),
        ("LINK_1", c(&sess.join("home/.claude"))),
        ("LINK_2", c(&sess.join("home/.gitconfig"))),
        ("PATH_0", c(&w.proj)),
        ("PATH_1", c(&w.home.join(".claude"))),
        ("PATH_2", c(&w.home.join(".gitconfig"))),
        ("PIN_0", c(&w.proj)),
        ("PIN_1", c(&w.home.join(".claude"))),
        ("POLICY", c(&sess.join("policy.md"))),
        ("SESSION_DIR", c(&sess)),
        ("TMP_DIR", c(&sess.join("tmp"))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(params, want);
    let names = |p: &Path| -> Vec<&String> {
        params
            .iter()
            .filter(|(_, v)| **v == c(p))
            .map(|(k, _)| k)
            .collect()
    };
    for linux_only in [
        "/proc/sys",
        "/etc/passwd",
        "/etc/resolv.conf",
        INIT_PATH,
        POLICY_PATH,
    ] {
        assert!(
            !params.values().any(|v| v == linux_only),
            "{linux_only} in {params:?}"
        );
        assert!(
            !sp.profile.contains(linux_only),
            "{linux_only} in the profile"
        );
    }
    // Modes, as the labels say: the launch directory (PATH_0) and the declared directory
    // (PATH_1) writable, the declared file (PATH_2) read-only.
    for line in [
        "(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param \"PATH_0\")))",
        "(allow file-read* file-write* file-clone process-exec file-map-executable (subpath (param \"PATH_1\")))",
        "(allow file-read* process-exec file-map-executable (subpath (param \"PATH_2\")))",
        "(deny file-write* file-clone network-bind (subpath (param \"PATH_2\")))",
    ] {
        assert!(
            sp.profile.lines().any(|l| l == line),
            "{line} not in\n{}",
            sp.profile
        );
    }
    assert_eq!(names(&w.proj), ["PATH_0", "PIN_0"]);
    // macOS has no /run: the policy file is read where the launcher wrote it, and the
    // variable naming it says so.
    assert!(
        sp.profile
            .lines()
            .any(|l| l == "(allow file-read* (literal (param \"POLICY\")))"),
        "{}",
        sp.profile
    );
    assert_eq!(
        sp.env["AGENT_SANDBOX_POLICY"],
        c(&sess.join("policy.md")),
        "{:?}",
        sp.env
    );
}
