//! Plan → bubblewrap argv. Pure: the exact argv is unit-tested, order included.
//!
//! The plan is never changed after `plan::build`; what one Linux launch adds to it (shared
//! identity files, a staged closure, binds by descriptor, the process group) is a
//! [`LinuxRun`], and [`argv`] lowers the two together.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::entry::{self, BridgeSpec, InitArgs};
use crate::plan::{HOSTNAME, INIT_PATH, Mount, Network, Plan, Staging};

/// One Linux launch of a plan: the facts decided at launch time, not by the planner.
#[derive(Debug, Clone, PartialEq)]
pub struct LinuxRun {
    /// The mounts bwrap gets: the plan's, with the identity files read from the directory
    /// they share with other sessions, a large closure bound once from its staged view, and
    /// (once [`crate::linux::pathfd::bind_by_fd`] ran) held sources bound by descriptor.
    pub mounts: Vec<Mount>,
    /// Where the identity files are (see `plan::share_identity_files`); `None`: in the
    /// session directory, as planned.
    pub identity: Option<PathBuf>,
    /// The closure view the namespace holder builds (see `plan::stage_closure`).
    pub staging: Option<Staging>,
    /// Run the command in a process group of its own: whenever the launcher is not the
    /// foreground job of a terminal (see `linux::init::set_own_process_group`).
    pub own_process_group: bool,
}

impl LinuxRun {
    /// The plan as planned: nothing shared, staged or held (dry runs of tests, benchmarks).
    pub fn plain(plan: &Plan) -> Self {
        LinuxRun {
            mounts: plan.bare_mounts(),
            identity: None,
            staging: None,
            own_process_group: false,
        }
    }

    /// A launch from the session directory `session_dir` in the state directory `base`; the
    /// staged closure view (if any) goes to `view`.
    pub fn new(
        plan: &Plan,
        base: &Path,
        session_dir: &Path,
        view: &Path,
        own_process_group: bool,
    ) -> Self {
        let mut mounts = plan.bare_mounts();
        let identity = crate::plan::share_identity_files(plan, &mut mounts, base, session_dir);
        let staging = crate::plan::stage_closure(plan, &mut mounts, view);
        LinuxRun {
            mounts,
            identity: Some(identity),
            staging,
            own_process_group,
        }
    }
}

/// Namespace and hardening flags, in the order emitted.
fn base_flags(plan: &Plan) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        // The sandbox must not outlive its launcher (which later also runs the proxy).
        "--die-with-parent".into(),
        "--unshare-user".into(),
        // No nested user namespaces: they are kernel attack surface and could re-grant caps.
        "--disable-userns".into(),
        "--unshare-pid".into(),
        "--unshare-ipc".into(),
        "--unshare-uts".into(),
        "--unshare-cgroup-try".into(),
    ];
    if plan.network != Network::Open {
        // Fail closed: anything but open mode starts with no network at all.
        a.push("--unshare-net".into());
    }
    a.extend([
        "--hostname".into(),
        HOSTNAME.into(),
        "--uid".into(),
        plan.uid.to_string().into(),
        "--gid".into(),
        plan.gid.to_string().into(),
        // Root launching us must not hand the agent root's capabilities inside.
        "--cap-drop".into(),
        "ALL".into(),
        // Our init is PID 1: it forwards signals, reaps, and installs the seccomp filter.
        "--as-pid-1".into(),
    ]);
    a
}

/// The whole bwrap argument list (without the program name).
pub fn argv(plan: &Plan, run: &LinuxRun) -> Vec<OsString> {
    // The environment is not in the argv: command lines are world-readable in /proc, and
    // values such as API tokens must not be. bwrap gets exactly `plan.env` as its own
    // environment (see `supervise::supervise`) and passes it on unchanged.
    let mut a = base_flags(plan);
    for m in &run.mounts {
        match m {
            Mount::RoBind { src, dest } => {
                a.extend(["--ro-bind".into(), src.into(), dest.into()]);
            }
            Mount::Bind { src, dest } => {
                a.extend(["--bind".into(), src.into(), dest.into()]);
            }
            Mount::BindFd { fd, dest, rw, .. } => {
                let flag = if *rw { "--bind-fd" } else { "--ro-bind-fd" };
                a.extend([flag.into(), fd.to_string().into(), dest.into()]);
            }
            Mount::Tmpfs { dest } => a.extend(["--tmpfs".into(), dest.into()]),
            // Read-only at once: nothing can be written there before or after.
            Mount::Mask { dest } => a.extend([
                "--tmpfs".into(),
                dest.into(),
                "--remount-ro".into(),
                dest.into(),
            ]),
            Mount::Proc { dest } => a.extend(["--proc".into(), dest.into()]),
            Mount::Dev { dest } => a.extend(["--dev".into(), dest.into()]),
            Mount::Symlink { target, dest } => {
                a.extend(["--symlink".into(), target.into(), dest.into()]);
            }
        }
    }
    // The sandbox's root is bwrap's tmpfs: once every mount point is in place, nothing may
    // use `/`, `/etc` or `/opt` as scratch space (only that mount: $HOME, /tmp and the binds
    // keep their own modes).
    a.extend(["--remount-ro".into(), "/".into()]);
    a.push("--chdir".into());
    a.push(plan.cwd.clone().into());
    a.push("--".into());
    a.push(INIT_PATH.into());
    if plan.init_is_helper {
        a.push(entry::INIT.into());
    }
    a.extend(init_args(plan, run).to_args());
    a
}

/// The init's command line.
fn init_args(plan: &Plan, run: &LinuxRun) -> InitArgs {
    // The proxy's port: the init passes its listening sockets to the proxy. Host ports: the
    // init bridges each connection to the launcher's socket.
    let pass = plan
        .proxy
        .iter()
        .map(|p| BridgeSpec {
            port: p.inside_port,
            socket: p.inside_socket(),
        })
        .collect();
    let bridges = plan
        .bridges
        .iter()
        .map(|b| BridgeSpec {
            port: b.inside_port,
            socket: b.inside_socket(),
        })
        .collect();
    InitArgs {
        own_pgrp: run.own_process_group,
        pass,
        bridges,
        command: plan.command.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Entry, LaunchGuard, Why};
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    /// A mount of a test plan: the lowering does not read the label.
    fn decl(m: Mount) -> Entry {
        Entry::new(Why::Declared, m)
    }

    fn plain_argv(p: &Plan) -> Vec<OsString> {
        argv(p, &LinuxRun::plain(p))
    }

    /// The run of `p` with its closure staged to `view` (and nothing else changed).
    fn staged(p: &Plan, view: &Path) -> (Option<Staging>, LinuxRun) {
        let mut run = LinuxRun::plain(p);
        let st = crate::plan::stage_closure(p, &mut run.mounts, view);
        run.staging = st.clone();
        (st, run)
    }

    fn plan(network: Network) -> Plan {
        Plan {
            out_name: "claude".into(),
            command: vec!["claude".into(), "--yolo".into(), "a b\n'c'".into()],
            cwd: "/home/u/my proj".into(),
            home: "/home/u".into(),
            uid: 1000,
            gid: 100,
            mounts: vec![
                Mount::RoBind {
                    src: "/nix/store/abc-bash".into(),
                    dest: "/nix/store/abc-bash".into(),
                },
                Mount::Symlink {
                    target: "/nix/store/abc-bash/bin/sh".into(),
                    dest: "/bin/sh".into(),
                },
                Mount::Proc {
                    dest: "/proc".into(),
                },
                Mount::Dev {
                    dest: "/dev".into(),
                },
                Mount::Tmpfs {
                    dest: "/home/u".into(),
                },
                Mount::Bind {
                    src: "/home/u/my proj".into(),
                    dest: "/home/u/my proj".into(),
                },
            ]
            .into_iter()
            .map(decl)
            .collect(),
            env: BTreeMap::from([
                ("HOME".to_string(), "/home/u".to_string()),
                ("PATH".to_string(), "/nix/store/abc-bash/bin".to_string()),
            ]),
            network,
            allowed_local_ports: vec![],
            dns_forward: None,
            proxy: None,
            bridges: vec![],
            entry_exe: "/opt/agent-sandbox/bin/agent-sandbox".into(),
            init_is_helper: true,
            upstream_ca_files: vec![],
            ca_bundle_source: None,
            guard: LaunchGuard::Ok,
            placeholders: vec![],
            held: BTreeMap::new(),
            session_files: vec![],
            session_dir: "/s".into(),
            nix_daemon_socket: None,
            warnings: vec![],
        }
    }

    fn strs(v: &[OsString]) -> Vec<&str> {
        v.iter().map(|s| s.to_str().unwrap()).collect()
    }

    /// A mask is an empty tmpfs made read-only at once, after the bind it covers.
    #[test]
    fn a_mask_is_a_read_only_tmpfs() {
        let mut p = plan(Network::Open);
        p.mounts.push(decl(Mount::Mask {
            dest: "/home/u/my proj/.state".into(),
        }));
        let a = plain_argv(&p);
        let s = strs(&a);
        let at = s.iter().position(|x| *x == "--remount-ro").unwrap();
        assert_eq!(
            s[at - 2..at + 2],
            [
                "--tmpfs",
                "/home/u/my proj/.state",
                "--remount-ro",
                "/home/u/my proj/.state"
            ]
        );
        let bind = s.iter().position(|x| *x == "--bind").unwrap();
        assert!(bind < at - 2);
    }

    #[test]
    fn exact_argv_open_network() {
        let a = plain_argv(&plan(Network::Open));
        assert_eq!(
            strs(&a),
            [
                "--die-with-parent",
                "--unshare-user",
                "--disable-userns",
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--unshare-cgroup-try",
                "--hostname",
                "sandbox",
                "--uid",
                "1000",
                "--gid",
                "100",
                "--cap-drop",
                "ALL",
                "--as-pid-1",
                "--ro-bind",
                "/nix/store/abc-bash",
                "/nix/store/abc-bash",
                "--symlink",
                "/nix/store/abc-bash/bin/sh",
                "/bin/sh",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--tmpfs",
                "/home/u",
                "--bind",
                "/home/u/my proj",
                "/home/u/my proj",
                "--remount-ro",
                "/",
                "--chdir",
                "/home/u/my proj",
                "--",
                "/run/agent-sandbox/agent-sandbox",
                "__init",
                "--",
                "claude",
                "--yolo",
                "a b\n'c'",
            ]
        );
    }

    /// Held sources are bound by descriptor: `--bind-fd FD DEST` / `--ro-bind-fd FD DEST`, in
    /// the place (and order) the by-path bind had.
    #[test]
    fn exact_argv_binds_by_descriptor() {
        let mut p = plan(Network::Open);
        p.mounts.push(decl(Mount::RoBind {
            src: "/home/u/my proj/.git/hooks".into(),
            dest: "/home/u/my proj/.git/hooks".into(),
        }));
        p.mounts.push(decl(Mount::RoBind {
            src: "/home/u/real settings.json".into(),
            dest: "/home/u/.claude/settings.json".into(),
        }));
        let mut run = LinuxRun::plain(&p);
        for (m, fd) in run.mounts[5..].iter_mut().zip([3, 4, 5]) {
            crate::linux::pathfd::rewrite(m, fd);
        }
        let a = argv(&p, &run);
        let i = a.iter().position(|x| x == "--as-pid-1").unwrap();
        let j = a.iter().position(|x| x == "--chdir").unwrap();
        assert_eq!(
            strs(&a[i + 1..j]),
            [
                "--ro-bind",
                "/nix/store/abc-bash",
                "/nix/store/abc-bash",
                "--symlink",
                "/nix/store/abc-bash/bin/sh",
                "/bin/sh",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--tmpfs",
                "/home/u",
                "--bind-fd",
                "3",
                "/home/u/my proj",
                "--ro-bind-fd",
                "4",
                "/home/u/my proj/.git/hooks",
                "--ro-bind-fd",
                "5",
                "/home/u/.claude/settings.json",
                "--remount-ro",
                "/",
            ]
        );
    }

    #[test]
    fn blocked_and_filtered_unshare_net() {
        for n in [
            Network::Blocked,
            Network::Filtered(BTreeMap::from([("example.com".to_string(), None)])),
        ] {
            let a = plain_argv(&plan(n));
            let i = a.iter().position(|x| x == "--unshare-net").unwrap();
            assert_eq!(a[i - 1], "--unshare-cgroup-try");
            assert_eq!(a[i + 1], "--hostname");
        }
        let open = plain_argv(&plan(Network::Open));
        assert!(!open.iter().any(|x| x == "--unshare-net"));
    }

    /// The proxy's port is passed out as listening sockets (`--pass`), host ports are bridged
    /// (`--bridge`); the small init binary takes no `__init`; `--own-pgrp` comes first.
    #[test]
    fn init_tail_with_bridges_and_the_small_init() {
        let mut p = plan(Network::Filtered(BTreeMap::from([(
            "example.com".to_string(),
            None,
        )])));
        p.init_is_helper = false;
        let run = with_proxy_and_a_host_port(&mut p);
        let a = argv(&p, &run);
        let i = a.iter().position(|x| x == INIT_PATH).unwrap();
        assert_eq!(
            strs(&a[i - 1..]),
            [
                "--",
                "/run/agent-sandbox/agent-sandbox",
                "--own-pgrp",
                "--pass",
                "3128=/run/agent-sandbox/session/proxy.sock",
                "--bridge",
                "5432=/run/agent-sandbox/session/port-5432.sock",
                "--",
                "claude",
                "--yolo",
                "a b\n'c'",
            ]
        );
    }

    /// The init's line in the argv is the one the init reads back: the launcher's writer and
    /// the init's parser are one type (`entry::InitArgs`).
    #[test]
    fn the_init_reads_back_the_line_bwrap_is_given() {
        let mut p = plan(Network::Filtered(BTreeMap::from([(
            "example.com".to_string(),
            None,
        )])));
        let run = with_proxy_and_a_host_port(&mut p);
        let a = argv(&p, &run);
        let i = a.iter().position(|x| x == INIT_PATH).unwrap();
        assert_eq!(a[i + 1], entry::INIT);
        let init = InitArgs::parse(&a[i + 2..]).unwrap();
        assert_eq!(
            init,
            InitArgs {
                own_pgrp: true,
                pass: vec![BridgeSpec {
                    port: 3128,
                    socket: "/run/agent-sandbox/session/proxy.sock".into(),
                }],
                bridges: vec![BridgeSpec {
                    port: 5432,
                    socket: "/run/agent-sandbox/session/port-5432.sock".into(),
                }],
                command: p.command.clone(),
            }
        );
    }

    /// `p` in filtered mode's shape: the proxy's port 3128 and a bridge to host port 5432; run
    /// in a process group of its own.
    fn with_proxy_and_a_host_port(p: &mut Plan) -> LinuxRun {
        p.proxy = Some(crate::plan::ProxyPort {
            inside_port: 3128,
            socket: "proxy.sock".into(),
        });
        p.bridges = vec![crate::plan::Bridge {
            inside_port: 5432,
            socket: "port-5432.sock".into(),
            host_port: 5432,
        }];
        LinuxRun {
            own_process_group: true,
            ..LinuxRun::plain(p)
        }
    }

    /// A plan whose closure is `n` store paths (the first being abc-bash) plus /lib.
    fn closure_plan(n: usize) -> Plan {
        let mut p = plan(Network::Blocked);
        let mut paths: Vec<PathBuf> = vec!["/nix/store/abc-bash".into()];
        paths.extend((1..n).map(|i| PathBuf::from(format!("/nix/store/h{i:03}-pkg"))));
        let extra: Vec<Mount> = paths[1..]
            .iter()
            .chain([PathBuf::from("/lib")].iter())
            .map(|q| Mount::RoBind {
                src: q.clone(),
                dest: q.clone(),
            })
            .collect();
        p.mounts.splice(1..1, extra.into_iter().map(closure));
        // The fixture's first mount, abc-bash, is a closure path too.
        p.mounts[0].why = Why::Closure;
        p
    }

    /// A closure path's mount.
    fn closure(m: Mount) -> Entry {
        Entry::new(Why::Closure, m)
    }

    #[test]
    fn a_large_closure_becomes_one_bind_of_the_staged_view_last() {
        let n = crate::plan::STAGE_MIN_PATHS;
        let mut p = closure_plan(n);
        // Sources in the store outside the closure (a helper installed there) stay as they
        // are: the holder leaves the real store in place.
        p.mounts.push(decl(Mount::RoBind {
            src: "/nix/store/zzz-agent-sandbox/bin/agent-sandbox-init".into(),
            dest: INIT_PATH.into(),
        }));
        let (staging, run) = staged(&p, Path::new("/s/store-view"));
        let staging = staging.expect("staged");
        assert_eq!(staging.dir, PathBuf::from("/nix/store"));
        assert_eq!(staging.view, PathBuf::from("/s/store-view"));
        assert_eq!(staging.names.len(), n);
        assert_eq!(staging.names[0], "abc-bash");
        assert_eq!(staging.names[n - 1], format!("h{:03}-pkg", n - 1).as_str());
        // A path listed twice is staged once.
        let mut twice = closure_plan(n);
        twice.mounts.insert(
            0,
            closure(Mount::RoBind {
                src: "/nix/store/h001-pkg".into(),
                dest: "/nix/store/h001-pkg".into(),
            }),
        );
        let (st, twice_run) = staged(&twice, Path::new("/s/store-view"));
        assert_eq!(st.unwrap().names.len(), n);
        assert!(
            !argv(&twice, &twice_run)
                .iter()
                .any(|x| x == "/nix/store/h001-pkg")
        );
        let a = argv(&p, &run);
        let i = a.iter().position(|x| x == "--as-pid-1").unwrap();
        let j = a.iter().position(|x| x == "--chdir").unwrap();
        assert_eq!(
            strs(&a[i + 1..j]),
            [
                "--ro-bind",
                "/lib",
                "/lib",
                "--symlink",
                "/nix/store/abc-bash/bin/sh",
                "/bin/sh",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--tmpfs",
                "/home/u",
                "--bind",
                "/home/u/my proj",
                "/home/u/my proj",
                "--ro-bind",
                "/nix/store/zzz-agent-sandbox/bin/agent-sandbox-init",
                "/run/agent-sandbox/agent-sandbox",
                "--ro-bind",
                "/s/store-view",
                "/nix/store",
                "--remount-ro",
                "/",
            ]
        );
    }

    #[test]
    fn small_closures_allow_nix_and_foreign_mounts_are_not_staged() {
        let view = Path::new("/s/store-view");
        let small = closure_plan(crate::plan::STAGE_MIN_PATHS - 1);
        let (st, run) = staged(&small, view);
        assert_eq!(st, None);
        assert_eq!(run, LinuxRun::plain(&small));
        // Something mounted inside the store directory, or over it: staging would hide it.
        for extra in [
            Mount::Bind {
                src: "/home/u/state".into(),
                dest: "/nix/store/zzz-state".into(),
            },
            Mount::Tmpfs {
                dest: "/nix".into(),
            },
        ] {
            let mut foreign = closure_plan(40);
            foreign.mounts.push(decl(extra));
            let (st, run) = staged(&foreign, view);
            assert_eq!(st, None);
            assert_eq!(run, LinuxRun::plain(&foreign));
        }
        // allowNix: the whole store is bound instead of the closure paths.
        let mut nix = closure_plan(40);
        nix.mounts.retain(
            |e| !matches!(&e.mount, Mount::RoBind { dest, .. } if dest.starts_with("/nix/store")),
        );
        nix.mounts.insert(
            0,
            closure(Mount::RoBind {
                src: "/nix/store".into(),
                dest: "/nix/store".into(),
            }),
        );
        assert_eq!(staged(&nix, view).0, None);
    }

    #[test]
    fn command_follows_init_verbatim() {
        let a = plain_argv(&plan(Network::Open));
        let tail: Vec<PathBuf> = a[a.len() - 3..].iter().map(PathBuf::from).collect();
        assert_eq!(tail[2], PathBuf::from("a b\n'c'"));
    }
}
