//! `agent-sandbox doctor` on this machine, and the launcher's diagnosis when user namespaces
//! are unavailable (made so for real: a user namespace whose `user.max_user_namespaces` is 0).
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::*;

/// This kernel's Landlock ABI, asked directly.
fn landlock_abi() -> i64 {
    // SAFETY: null attributes, size 0, LANDLOCK_CREATE_RULESET_VERSION: only returns a number.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    }
}

#[test]
fn doctor_reports_this_host_as_it_is() {
    let f = Fixture::new();
    let mut c = f.cmd();
    c.arg("doctor");
    let o = run(c);
    let line = |name: &str| {
        o.stdout
            .lines()
            .find(|l| {
                l.get(6..)
                    .is_some_and(|rest| rest.starts_with(&format!("{name}: ")))
            })
            .unwrap_or_else(|| panic!("no {name} line: {o:?}"))
            .to_string()
    };
    let version = Command::new("/usr/bin/bwrap")
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    assert_eq!(
        line("bubblewrap"),
        format!("ok    bubblewrap: /usr/bin/bwrap ({})", version.trim())
    );
    assert_eq!(
        line("user namespaces"),
        "ok    user namespaces: bwrap --unshare-user works"
    );
    let abi = landlock_abi();
    assert!(abi >= 1, "this machine has Landlock (ABI 7): got {abi}");
    assert_eq!(line("Landlock"), format!("ok    Landlock: ABI {abi}"));
    let mode = std::fs::metadata("/dev/net/tun")
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    let tun = line("/dev/net/tun");
    if is_root() || mode & 0o006 == 0o006 {
        assert_eq!(tun, format!("ok    /dev/net/tun: mode {mode:04o}"));
    } else {
        assert!(
            tun.starts_with(&format!("FAIL  /dev/net/tun: mode {mode:04o}")),
            "{o:?}"
        );
        assert!(
            o.stdout.contains("fix: sudo chmod 0666 /dev/net/tun"),
            "{o:?}"
        );
    }
    assert!(
        line("TIOCSTI").ends_with("blocked by agent-sandbox's filter"),
        "{o:?}"
    );
    // Nothing fails on this machine (with /dev/net/tun usable): exit 0.
    let fails = o.stdout.lines().any(|l| l.starts_with("FAIL"));
    assert_eq!(o.code, i32::from(fails), "{o:?}");
}

/// `sh -c SCRIPT` in a new user namespace (mapped to root) whose user.max_user_namespaces is
/// 0: nothing inside can create another one. None if this kernel cannot nest them.
fn without_user_namespaces(f: &Fixture, args: &str) -> Option<Out> {
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces || exit 99; exec '{}' {args}",
        bin().display()
    );
    // The fixture's environment, with unshare in front.
    let env = f.cmd();
    let mut c = Command::new("unshare");
    c.env_clear()
        .envs(env.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .current_dir(&f.proj)
        .args(["-Ur", "sh", "-c", &script]);
    let o = run(c);
    if o.code == 99 || o.stderr.contains("unshare failed") {
        eprintln!("SKIP: cannot make a user namespace without user namespaces here: {o:?}");
        return None;
    }
    Some(o)
}

#[test]
fn a_launch_without_user_namespaces_names_the_setting_and_its_fix() {
    let f = Fixture::new();
    let fix = "Fix: sudo sysctl -w user.max_user_namespaces=15000";
    // bubblewrap's own failure (no network namespace holder before it).
    let Some(o) = without_user_namespaces(&f, "run --no-network -- true") else {
        return;
    };
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains(&format!("agent-sandbox: error: bubblewrap could not set up the sandbox (status 1; its message is above): user namespaces are unavailable: user.max_user_namespaces is 0: no process may create a user namespace. {fix}")),
        "{o:?}"
    );
    assert!(!o.stderr.contains("apparmor"), "{o:?}");
    // Open mode: the namespace holder fails first, with the same diagnosis.
    let o = without_user_namespaces(&f, "run -- true").unwrap();
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr
            .contains("agent-sandbox: error: the network namespace could not be created: "),
        "{o:?}"
    );
    assert!(
        o.stderr.contains(&format!(
            "user.max_user_namespaces is 0: no process may create a user namespace. {fix}"
        )),
        "{o:?}"
    );
    // The doctor there says the same, and fails.
    let o = without_user_namespaces(&f, "doctor").unwrap();
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.stdout.contains(
            "FAIL  user namespaces: user.max_user_namespaces is 0: no process may create a user namespace\n      fix: sudo sysctl -w user.max_user_namespaces=15000"
        ),
        "{o:?}"
    );
}

#[test]
fn doctor_does_not_hang_on_a_bubblewrap_that_hangs() {
    // The doctor is what one runs when something hangs: a bwrap that never answers --help or
    // --version is killed after the probe's 5 s, like the user-namespace probe.
    let f = Fixture::new();
    let stuck = f.write("stuck-bwrap", "#!/bin/sh\nexec sleep 120\n");
    std::fs::set_permissions(&stuck, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = f.cmd();
    c.env("AGENT_SANDBOX_BWRAP", &stuck)
        .arg("doctor")
        .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let finished = eventually(std::time::Duration::from_secs(60), || {
        child.try_wait().unwrap().is_some()
    });
    if !finished {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(finished, "the doctor hung: {stdout}");
    assert!(
        stdout.contains("(unknown version) lacks --disable-userns"),
        "{stdout}"
    );
    assert!(
        stdout.contains("bwrap --unshare-user did not finish within 5 s"),
        "{stdout}"
    );
}
