use super::*;

const HELP_0_8: &str = "usage: bwrap [OPTIONS...] [--] COMMAND [ARGS...]
    --bind SRC DEST              Bind mount the host path SRC on DEST
    --bind-fd FD DEST            Bind open directory or path fd on DEST
    --ro-bind-fd FD DEST         Bind open directory or path fd read-only on DEST
    --remount-ro DEST            Remount DEST as readonly; does not recursively remount
    --ro-bind-data FD DEST       Copy from FD to file which is bind-mounted read-only on DEST
    --json-status-fd FD          Write container info as JSON to FD
    --disable-userns             Disable further use of user namespaces inside sandbox
";

/// A healthy machine, as this one is, for an unprivileged user.
fn healthy() -> Facts {
    Facts {
        bwrap: Ok("/usr/bin/bwrap".into()),
        bwrap_version: Some("bubblewrap 0.8.0".into()),
        bwrap_help: HELP_0_8.into(),
        userns: Userns {
            root: false,
            unprivileged_userns_clone: None,
            max_user_namespaces: Some(96363),
            apparmor_restrict: None,
        },
        userns_probe: Probe::Works,
        tun_mode: Some(0o666),
        pasta: Ok("/usr/bin/pasta".into()),
        pasta_version: Some("pasta unknown version".into()),
        legacy_tiocsti: Some(1),
        landlock: Ok(7),
        nix_socket: "/nix/var/nix/daemon-socket/socket".into(),
        nix_socket_present: true,
        nix_conf: "/etc/nix/nix.conf".into(),
        nix_trust: crate::nixstore::Trust {
            user: "alice".into(),
            list: vec!["root".into()],
            trusted: false,
        },
    }
}

fn find(f: &Facts, name: &str) -> Check {
    checks(f).into_iter().find(|c| c.name == name).unwrap()
}

fn failed_probe() -> Probe {
    Probe::Failed(
        Some(1),
        "bwrap: setting up uid map: Permission denied\n".into(),
    )
}

#[test]
fn a_healthy_host_is_all_ok_and_exits_0() {
    let c = checks(&healthy());
    assert_eq!(
        render(&c),
        "ok    bubblewrap: /usr/bin/bwrap (bubblewrap 0.8.0)
ok    user namespaces: bwrap --unshare-user works
ok    /dev/net/tun: mode 0666
ok    pasta: /usr/bin/pasta (pasta unknown version)
ok    TIOCSTI: dev.tty.legacy_tiocsti is 1: the kernel allows terminal input injection; blocked by agent-sandbox's filter
ok    Landlock: ABI 7
ok    Nix daemon: /nix/var/nix/daemon-socket/socket; you (alice) are not a trusted user
"
    );
    assert_eq!(status(&c), 0);
}

#[test]
fn apparmor_restriction_names_the_profile_and_the_sysctl() {
    let mut f = healthy();
    f.userns.apparmor_restrict = Some(1);
    f.userns_probe = failed_probe();
    let c = find(&f, "user namespaces");
    assert_eq!(c.verdict, Verdict::Fail);
    assert_eq!(
        c.detail,
        "kernel.apparmor_restrict_unprivileged_userns is 1 (Ubuntu 23.10+): AppArmor lets only programs with a profile allowing it use user namespaces, and /usr/bin/bwrap has none"
    );
    assert_eq!(
        c.fix.as_deref().unwrap(),
        "give it one: printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile agent-sandbox-bwrap /usr/bin/bwrap flags=(unconfined) {\\n  userns,\\n}\\n' | sudo tee /etc/apparmor.d/agent-sandbox-bwrap && sudo apparmor_parser -r /etc/apparmor.d/agent-sandbox-bwrap; or lift the restriction for the whole machine: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (to keep it after a reboot: echo kernel.apparmor_restrict_unprivileged_userns=0 | sudo tee /etc/sysctl.d/60-agent-sandbox.conf)"
    );
    assert_eq!(status(&checks(&f)), 1);
    // With a profile for bwrap, the restriction is on but bwrap works: ok, said so.
    f.userns_probe = Probe::Works;
    let c = find(&f, "user namespaces");
    assert_eq!(c.verdict, Verdict::Ok);
    assert!(
        c.detail.contains("an AppArmor profile allows bwrap"),
        "{c:?}"
    );
    // Root is not restricted: the restriction is not the cause of a root failure.
    f.userns.root = true;
    f.userns_probe = failed_probe();
    let c = find(&f, "user namespaces");
    assert_eq!(
        c.detail,
        "bwrap --unshare-user: bwrap: setting up uid map: Permission denied"
    );
}

#[test]
fn max_user_namespaces_0_is_the_cause_before_anything_else() {
    let mut f = healthy();
    f.userns.max_user_namespaces = Some(0);
    f.userns.apparmor_restrict = Some(1);
    f.userns_probe = Probe::Failed(
        Some(1),
        "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)".into(),
    );
    let c = checks(&f);
    let text = render(&c);
    assert!(
        text.contains(
            "FAIL  user namespaces: user.max_user_namespaces is 0: no process may create a user namespace
      fix: sudo sysctl -w user.max_user_namespaces=15000 (to keep it after a reboot: echo user.max_user_namespaces=15000 | sudo tee /etc/sysctl.d/60-agent-sandbox.conf)
"
        ),
        "{text}"
    );
    assert_eq!(status(&c), 1);
    f.userns.max_user_namespaces = Some(15000);
    f.userns.apparmor_restrict = None;
    f.userns.unprivileged_userns_clone = Some(0);
    let c = find(&f, "user namespaces");
    assert!(
        c.fix
            .unwrap()
            .starts_with("sudo sysctl -w kernel.unprivileged_userns_clone=1"),
    );
}

#[test]
fn a_failure_no_setting_explains_shows_bwraps_message() {
    let mut f = healthy();
    f.userns_probe = failed_probe();
    let c = find(&f, "user namespaces");
    assert_eq!(c.verdict, Verdict::Fail);
    assert_eq!(
        c.detail,
        "bwrap --unshare-user: bwrap: setting up uid map: Permission denied"
    );
    f.userns_probe = Probe::TimedOut;
    assert_eq!(
        find(&f, "user namespaces").detail,
        "bwrap --unshare-user did not finish within 5 s"
    );
}

#[test]
fn tun_0600_fails_for_a_user_not_for_root() {
    let mut f = healthy();
    f.tun_mode = Some(0o600);
    let c = checks(&f);
    assert!(
        render(&c).contains(
            "FAIL  /dev/net/tun: mode 0600: not usable by your user, and open network mode (the default) needs it for pasta
      fix: sudo chmod 0666 /dev/net/tun (to keep it after a reboot: echo 'KERNEL==\"tun\", MODE=\"0666\"' | sudo tee /etc/udev/rules.d/60-agent-sandbox-tun.rules); or run with --no-network or allowedDomains
"
        ),
        "{}",
        render(&c)
    );
    assert_eq!(status(&c), 1);
    f.userns.root = true;
    assert_eq!(find(&f, "/dev/net/tun").verdict, Verdict::Ok);
    f.tun_mode = None;
    let c = find(&f, "/dev/net/tun");
    assert_eq!(c.verdict, Verdict::Fail);
    assert!(c.fix.unwrap().starts_with("sudo modprobe tun"));
}

#[test]
fn pasta_missing_fails_with_the_install_command() {
    let mut f = healthy();
    f.pasta = Err(crate::tools::ToolError::NotFound {
        tool: crate::tools::PASTA,
    }
    .to_string());
    let c = find(&f, "pasta");
    assert_eq!(c.verdict, Verdict::Fail);
    assert_eq!(
        c.detail,
        "pasta was not found in /usr/bin, /usr/sbin, /bin, /sbin, /run/current-system/sw/bin. agent-sandbox runs it outside the sandbox, so it does not look it up through PATH: open network mode (the default) needs it"
    );
    assert_eq!(
        c.fix.unwrap(),
        "install passt (Debian/Ubuntu: apt install passt; Fedora: dnf install passt), or use --no-network, or set AGENT_SANDBOX_PASTA to its absolute path"
    );
}

#[test]
fn an_old_bwrap_fails_naming_the_missing_options() {
    let mut f = healthy();
    f.bwrap_version = Some("bubblewrap 0.6.2".into());
    f.bwrap_help = HELP_0_8
        .lines()
        .filter(|l| !l.contains("--disable-userns") && !l.contains("-bind-fd"))
        .collect::<Vec<_>>()
        .join("\n");
    let c = find(&f, "bubblewrap");
    assert_eq!(c.verdict, Verdict::Fail);
    assert_eq!(
        c.detail,
        "/usr/bin/bwrap (bubblewrap 0.6.2) lacks --disable-userns, --bind-fd, --ro-bind-fd, which agent-sandbox uses"
    );
    assert!(
        c.fix
            .unwrap()
            .starts_with("install bubblewrap 0.8.0 or later")
    );
    // --ro-bind-fd in the help does not count as --bind-fd.
    assert!(!has_flag("    --ro-bind-fd FD DEST", "--bind-fd"));
    f.bwrap = Err(crate::tools::ToolError::NotFound {
        tool: crate::tools::BWRAP,
    }
    .to_string());
    f.userns_probe = Probe::NotRun;
    let c = checks(&f);
    assert_eq!(c[0].verdict, Verdict::Fail);
    assert!(
        c[0].fix
            .as_deref()
            .unwrap()
            .starts_with("install bubblewrap (Debian/Ubuntu"),
        "{c:?}"
    );
    assert_eq!(c[1].verdict, Verdict::Fail);
}

#[test]
fn no_landlock_is_a_warning_not_a_failure() {
    let mut f = healthy();
    f.landlock = Err(libc::ENOSYS);
    let c = checks(&f);
    let l = c.iter().find(|c| c.name == "Landlock").unwrap();
    assert_eq!(l.verdict, Verdict::Warn);
    assert!(
        render(&c).contains("warn  Landlock: unavailable (Function not implemented; agent-sandbox does not need it today)\n      fix: use a kernel 5.13 or later built with CONFIG_SECURITY_LANDLOCK=y\n"),
        "{}",
        render(&c)
    );
    assert_eq!(status(&c), 0);
    f.landlock = Err(libc::EOPNOTSUPP);
    assert!(
        find(&f, "Landlock")
            .fix
            .unwrap()
            .starts_with("add landlock to the kernel's lsm=")
    );
}

#[test]
fn tiocsti_is_informational() {
    let mut f = healthy();
    f.legacy_tiocsti = Some(0);
    assert_eq!(
        find(&f, "TIOCSTI").detail,
        "dev.tty.legacy_tiocsti is 0: the kernel refuses terminal input injection"
    );
    f.legacy_tiocsti = None;
    let c = find(&f, "TIOCSTI");
    assert_eq!(c.verdict, Verdict::Ok);
    assert!(
        c.detail.ends_with("blocked by agent-sandbox's filter"),
        "{c:?}"
    );
}

#[test]
fn a_trusted_nix_user_is_warned_and_no_daemon_is_fine() {
    let mut f = healthy();
    f.nix_trust = crate::nixstore::Trust {
        user: "alice".into(),
        list: vec!["root".into(), "@wheel".into()],
        trusted: true,
    };
    let c = find(&f, "Nix daemon");
    assert_eq!(c.verdict, Verdict::Warn);
    assert_eq!(
        c.detail,
        "/nix/var/nix/daemon-socket/socket; you (alice) are a trusted user (trusted-users = root @wheel): with allowNix the agent could make the daemon run code as root, so agent-sandbox asks first"
    );
    assert_eq!(
        c.fix.unwrap(),
        "remove alice from trusted-users in /etc/nix/nix.conf, then restart the daemon (sudo systemctl restart nix-daemon)"
    );
    f.userns.root = true;
    assert_eq!(
        find(&f, "Nix daemon").fix.unwrap(),
        "launch as an unprivileged user when you use allowNix"
    );
    f.nix_socket_present = false;
    let c = find(&f, "Nix daemon");
    assert_eq!(c.verdict, Verdict::Ok);
    assert!(c.detail.contains("allowNix is unavailable"), "{c:?}");
}

#[test]
fn the_launchers_setup_failure_names_the_cause() {
    let bwrap = Path::new("/usr/bin/bwrap");
    let mut u = healthy().userns;
    // User namespaces work: they are not blamed.
    let m = setup_failure_message(1, &u, &Probe::Works, bwrap);
    assert!(m.starts_with("bubblewrap could not set up the sandbox (status 1; its message is above). If it says \"Race condition binding dirfd\""), "{m}");
    assert!(m.ends_with("User namespaces work here, so they are not the cause; `agent-sandbox doctor` checks the rest of the host"), "{m}");
    assert!(!m.contains("apparmor"), "{m}");
    u.apparmor_restrict = Some(1);
    let m = setup_failure_message(1, &u, &failed_probe(), bwrap);
    assert!(m.starts_with("bubblewrap could not set up the sandbox (status 1; its message is above): user namespaces are unavailable: kernel.apparmor_restrict_unprivileged_userns is 1"), "{m}");
    assert!(m.contains("Fix: give it one: printf"), "{m}");
    u.apparmor_restrict = None;
    let m = setup_failure_message(1, &u, &failed_probe(), bwrap);
    assert_eq!(
        m,
        "bubblewrap could not set up the sandbox (status 1; its message is above): user namespaces are unavailable (bwrap --unshare-user: bwrap: setting up uid map: Permission denied), and no kernel setting says why (a container or a seccomp policy may forbid them). `agent-sandbox doctor` checks the host"
    );
    // The holder's failure: the profile is for the holder's own binary.
    u.apparmor_restrict = Some(1);
    let m = namespace_failure_message(
        "unshare(CLONE_NEWUSER) failed: EPERM",
        &u,
        Path::new("/opt/as/agent-sandbox-init"),
    );
    assert!(
        m.contains(
            "profile agent-sandbox-agent-sandbox-init /opt/as/agent-sandbox-init flags=(unconfined)"
        ),
        "{m}"
    );
    assert!(m.ends_with(", or use --no-network"), "{m}");
}
