//! `agent-sandbox doctor`: what this host lacks for a sandbox, each problem with the command
//! that fixes it. The machine is probed once into [`Facts`]; every check is a pure function
//! of them, so each verdict and its fix are tested on hand-made facts. The user-namespace
//! diagnosis is shared with the launcher, which runs it when bubblewrap (or the namespace
//! holder) fails to set up.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The bubblewrap options the launcher relies on (bubblewrap 0.8.0 has them all).
pub const BWRAP_FLAGS: &[&str] = &[
    "--disable-userns",
    "--bind-fd",
    "--ro-bind-fd",
    "--ro-bind-data",
    "--remount-ro",
    "--json-status-fd",
];

/// How long the user-namespace probe may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the checks look at, read from this machine once ([`Facts::probe`]).
#[derive(Debug, Clone)]
pub struct Facts {
    /// bubblewrap as the launcher finds it ([`crate::tools::locate`]), or why not.
    pub bwrap: Result<PathBuf, String>,
    /// The first line of `bwrap --version`.
    pub bwrap_version: Option<String>,
    /// `bwrap --help`: which options it has.
    pub bwrap_help: String,
    pub userns: Userns,
    /// The result of `bwrap --unshare-user --ro-bind / / true`.
    pub userns_probe: Probe,
    /// `/dev/net/tun`'s permission bits (None: no such device).
    pub tun_mode: Option<u32>,
    pub pasta: Result<PathBuf, String>,
    /// The first line of `pasta --version`.
    pub pasta_version: Option<String>,
    /// `dev.tty.legacy_tiocsti` (None: the kernel predates the setting, so TIOCSTI works).
    pub legacy_tiocsti: Option<u64>,
    /// The Landlock ABI version, or the errno of `landlock_create_ruleset`.
    pub landlock: Result<i64, i32>,
    pub nix_socket: String,
    pub nix_socket_present: bool,
    pub nix_conf: PathBuf,
    pub nix_trust: crate::nixstore::Trust,
}

/// The kernel settings that decide whether an unprivileged process may create a user
/// namespace (None: the setting does not exist on this kernel).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Userns {
    pub root: bool,
    /// `kernel.unprivileged_userns_clone` (Debian's older kernels).
    pub unprivileged_userns_clone: Option<u64>,
    /// `user.max_user_namespaces`.
    pub max_user_namespaces: Option<u64>,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 23.10+).
    pub apparmor_restrict: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Works,
    /// bwrap's exit status and its message.
    Failed(Option<i32>, String),
    TimedOut,
    /// No bwrap to run.
    NotRun,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

/// One line of the report, with the fix for a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Check {
            name,
            verdict: Verdict::Ok,
            detail: detail.into(),
            fix: None,
        }
    }
    fn problem(
        name: &'static str,
        verdict: Verdict,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Check {
            name,
            verdict,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Why user namespaces are unavailable, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub cause: String,
    pub fix: String,
}

fn sysctl_fix(name: &str, value: &str) -> String {
    format!(
        "sudo sysctl -w {name}={value} (to keep it after a reboot: echo {name}={value} | sudo tee /etc/sysctl.d/60-agent-sandbox.conf)"
    )
}

/// An AppArmor profile that lets `program` create user namespaces (Ubuntu's way to lift the
/// restriction for one program instead of the whole machine).
fn apparmor_profile_fix(program: &Path) -> String {
    let name = format!(
        "agent-sandbox-{}",
        program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bwrap".into())
    );
    format!(
        "printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile {name} {} flags=(unconfined) {{\\n  userns,\\n}}\\n' | sudo tee /etc/apparmor.d/{name} && sudo apparmor_parser -r /etc/apparmor.d/{name}",
        program.display()
    )
}

/// The setting that keeps `program` from creating a user namespace, if one does. Called
/// once user namespaces are known not to work.
pub fn userns_cause(u: &Userns, program: &Path) -> Option<Cause> {
    if u.max_user_namespaces == Some(0) {
        return Some(Cause {
            cause: "user.max_user_namespaces is 0: no process may create a user namespace".into(),
            fix: sysctl_fix("user.max_user_namespaces", "15000"),
        });
    }
    if !u.root && u.unprivileged_userns_clone == Some(0) {
        return Some(Cause {
            cause: "kernel.unprivileged_userns_clone is 0: only root may create user namespaces"
                .into(),
            fix: sysctl_fix("kernel.unprivileged_userns_clone", "1"),
        });
    }
    if !u.root && u.apparmor_restrict == Some(1) {
        return Some(Cause {
            cause: format!(
                "kernel.apparmor_restrict_unprivileged_userns is 1 (Ubuntu 23.10+): AppArmor lets only programs with a profile allowing it use user namespaces, and {} has none",
                program.display()
            ),
            fix: format!(
                "give it one: {}; or lift the restriction for the whole machine: {}",
                apparmor_profile_fix(program),
                sysctl_fix("kernel.apparmor_restrict_unprivileged_userns", "0")
            ),
        });
    }
    None
}

/// The launcher's message when bubblewrap exits before the command started (`status`), with
/// the user-namespace settings and the probe taken then.
pub fn setup_failure_message(status: i32, u: &Userns, probe: &Probe, bwrap: &Path) -> String {
    let head =
        format!("bubblewrap could not set up the sandbox (status {status}; its message is above)");
    match probe {
        Probe::Works | Probe::NotRun => format!(
            "{head}. If it says \"Race condition binding dirfd\", a path it was binding was swapped while the sandbox started (refused: launch again). User namespaces work here, so they are not the cause; `agent-sandbox doctor` checks the rest of the host"
        ),
        _ => match userns_cause(u, bwrap) {
            Some(c) => format!(
                "{head}: user namespaces are unavailable: {}. Fix: {}",
                c.cause, c.fix
            ),
            None => format!(
                "{head}: user namespaces are unavailable ({}), and no kernel setting says why (a container or a seccomp policy may forbid them). `agent-sandbox doctor` checks the host",
                probe_summary(probe)
            ),
        },
    }
}

/// The namespace holder's failure (`line`: what it reported), with the cause when a kernel
/// setting explains it. `program` is the holder's binary.
pub fn namespace_failure_message(line: &str, u: &Userns, program: &Path) -> String {
    match userns_cause(u, program) {
        Some(c) => format!("{line}: {}. Fix: {}, or use --no-network", c.cause, c.fix),
        None => format!(
            "{line}. `agent-sandbox doctor` checks the host's user namespaces; or use --no-network"
        ),
    }
}

fn probe_summary(p: &Probe) -> String {
    match p {
        Probe::Works => "it works".into(),
        Probe::Failed(status, msg) => {
            let msg = msg.trim();
            let status = status.map_or("killed".into(), |s| format!("status {s}"));
            if msg.is_empty() {
                format!("bwrap --unshare-user failed with {status}")
            } else {
                format!("bwrap --unshare-user: {msg}")
            }
        }
        Probe::TimedOut => format!(
            "bwrap --unshare-user did not finish within {} s",
            PROBE_TIMEOUT.as_secs()
        ),
        Probe::NotRun => "not probed: no bwrap".into(),
    }
}

/// Splits a "…. Fix: …" message (the tools' errors) into the problem and its fix.
fn split_fix(msg: &str) -> (String, String) {
    match msg.split_once(". Fix: ") {
        Some((what, fix)) => (what.to_string(), fix.to_string()),
        None => (msg.to_string(), String::new()),
    }
}

fn check_bwrap(f: &Facts) -> Check {
    const NAME: &str = "bubblewrap";
    let path = match &f.bwrap {
        Ok(p) => p,
        Err(e) => {
            let (what, fix) = split_fix(e);
            return Check::problem(NAME, Verdict::Fail, what, fix);
        }
    };
    let version = f.bwrap_version.as_deref().unwrap_or("unknown version");
    let missing: Vec<&str> = BWRAP_FLAGS
        .iter()
        .copied()
        .filter(|flag| !has_flag(&f.bwrap_help, flag))
        .collect();
    if !missing.is_empty() {
        return Check::problem(
            NAME,
            Verdict::Fail,
            format!(
                "{} ({version}) lacks {}, which agent-sandbox uses",
                path.display(),
                missing.join(", ")
            ),
            "install bubblewrap 0.8.0 or later, or set AGENT_SANDBOX_BWRAP to the absolute path of one (with Nix: nix build nixpkgs#bubblewrap)",
        );
    }
    Check::ok(NAME, format!("{} ({version})", path.display()))
}

/// Whether `--help` lists `flag` as an option (not as a prefix of a longer one).
fn has_flag(help: &str, flag: &str) -> bool {
    help.split_whitespace()
        .any(|w| w.trim_end_matches([',', '=']) == flag)
}

fn check_userns(f: &Facts) -> Check {
    const NAME: &str = "user namespaces";
    let program = f.bwrap.as_deref().unwrap_or(Path::new("/usr/bin/bwrap"));
    match &f.userns_probe {
        Probe::Works => {
            let mut detail = "bwrap --unshare-user works".to_string();
            if f.userns.apparmor_restrict == Some(1) && !f.userns.root {
                detail.push_str(
                    " (kernel.apparmor_restrict_unprivileged_userns is 1, and an AppArmor profile allows bwrap)",
                );
            }
            Check::ok(NAME, detail)
        }
        Probe::NotRun => Check::problem(
            NAME,
            Verdict::Fail,
            "not probed: bubblewrap is missing",
            "install bubblewrap (see above)",
        ),
        probe => match userns_cause(&f.userns, program) {
            Some(c) => Check::problem(NAME, Verdict::Fail, c.cause, c.fix),
            None => Check::problem(
                NAME,
                Verdict::Fail,
                probe_summary(probe),
                "no kernel setting explains it: inside a container, allow user namespaces (Docker: --security-opt seccomp=unconfined, or run the sandbox on the host); otherwise see bwrap's message",
            ),
        },
    }
}

fn check_tun(f: &Facts) -> Check {
    const NAME: &str = "/dev/net/tun";
    const WHY: &str = "open network mode (the default) needs it for pasta";
    match f.tun_mode {
        None => Check::problem(
            NAME,
            Verdict::Fail,
            format!("missing: {WHY}"),
            "sudo modprobe tun (to load it at boot: echo tun | sudo tee /etc/modules-load.d/tun.conf); or run with --no-network or allowedDomains",
        ),
        Some(mode) if !f.userns.root && mode & 0o006 != 0o006 => Check::problem(
            NAME,
            Verdict::Fail,
            format!("mode {mode:04o}: not usable by your user, and {WHY}"),
            "sudo chmod 0666 /dev/net/tun (to keep it after a reboot: echo 'KERNEL==\"tun\", MODE=\"0666\"' | sudo tee /etc/udev/rules.d/60-agent-sandbox-tun.rules); or run with --no-network or allowedDomains",
        ),
        Some(mode) => Check::ok(NAME, format!("mode {mode:04o}")),
    }
}

fn check_pasta(f: &Facts) -> Check {
    const NAME: &str = "pasta";
    match &f.pasta {
        Ok(p) => Check::ok(
            NAME,
            format!(
                "{} ({})",
                p.display(),
                f.pasta_version.as_deref().unwrap_or("unknown version")
            ),
        ),
        Err(e) => {
            let (what, fix) = split_fix(e);
            Check::problem(
                NAME,
                Verdict::Fail,
                format!("{what}: open network mode (the default) needs it"),
                fix,
            )
        }
    }
}

fn check_tiocsti(f: &Facts) -> Check {
    const NAME: &str = "TIOCSTI";
    Check::ok(
        NAME,
        match f.legacy_tiocsti {
            Some(0) => "dev.tty.legacy_tiocsti is 0: the kernel refuses terminal input injection".to_string(),
            Some(v) => format!(
                "dev.tty.legacy_tiocsti is {v}: the kernel allows terminal input injection; blocked by agent-sandbox's filter"
            ),
            None => "no dev.tty.legacy_tiocsti (kernel before 6.2): the kernel allows terminal input injection; blocked by agent-sandbox's filter".to_string(),
        },
    )
}

fn check_landlock(f: &Facts) -> Check {
    const NAME: &str = "Landlock";
    match f.landlock {
        Ok(abi) => Check::ok(NAME, format!("ABI {abi}")),
        Err(errno) if errno == libc::EOPNOTSUPP => Check::problem(
            NAME,
            Verdict::Warn,
            "built into the kernel but not enabled at boot (agent-sandbox does not need it today)",
            "add landlock to the kernel's lsm= boot parameter (e.g. lsm=landlock,lockdown,yama,integrity,apparmor,bpf in GRUB_CMDLINE_LINUX), then reboot",
        ),
        Err(errno) => Check::problem(
            NAME,
            Verdict::Warn,
            format!(
                "unavailable ({}; agent-sandbox does not need it today)",
                nix::errno::Errno::from_raw(errno).desc()
            ),
            "use a kernel 5.13 or later built with CONFIG_SECURITY_LANDLOCK=y",
        ),
    }
}

fn check_nix(f: &Facts) -> Check {
    const NAME: &str = "Nix daemon";
    if !f.nix_socket_present {
        return Check::ok(
            NAME,
            format!(
                "no socket at {}: allowNix is unavailable (nothing else needs it)",
                f.nix_socket
            ),
        );
    }
    let t = &f.nix_trust;
    if t.trusted {
        return Check::problem(
            NAME,
            Verdict::Warn,
            format!(
                "{}; you ({}) are a trusted user (trusted-users = {}): with allowNix the agent could make the daemon run code as root, so agent-sandbox asks first",
                f.nix_socket,
                t.user,
                t.list.join(" ")
            ),
            if f.userns.root {
                "launch as an unprivileged user when you use allowNix".to_string()
            } else {
                format!(
                    "remove {} from trusted-users in {}, then restart the daemon (sudo systemctl restart nix-daemon)",
                    t.user,
                    f.nix_conf.display()
                )
            },
        );
    }
    Check::ok(
        NAME,
        format!("{}; you ({}) are not a trusted user", f.nix_socket, t.user),
    )
}

/// Every check, in the order printed.
pub fn checks(f: &Facts) -> Vec<Check> {
    vec![
        check_bwrap(f),
        check_userns(f),
        check_tun(f),
        check_pasta(f),
        check_tiocsti(f),
        check_landlock(f),
        check_nix(f),
    ]
}

/// One line per check, the fix indented under each problem.
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let tag = match c.verdict {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        };
        out.push_str(&format!("{tag:<5} {}: {}\n", c.name, c.detail));
        if let Some(fix) = c.fix.as_deref().filter(|f| !f.is_empty()) {
            out.push_str(&format!("      fix: {fix}\n"));
        }
    }
    out
}

/// 0 when nothing fails, 1 otherwise.
pub fn status(checks: &[Check]) -> i32 {
    i32::from(checks.iter().any(|c| c.verdict == Verdict::Fail))
}

/// `agent-sandbox doctor`.
pub fn main() -> i32 {
    if !cfg!(target_os = "linux") {
        println!(
            "agent-sandbox doctor checks Linux hosts (bubblewrap); on macOS the sandbox uses sandbox-exec, which needs no setup"
        );
        return 0;
    }
    let c = checks(&Facts::probe());
    print!("{}", render(&c));
    status(&c)
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn first_line(program: &Path, arg: &str) -> Option<String> {
    let out = output_within(program, arg)?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_string())
}

/// `program arg`'s output, or `None` if it cannot run or takes longer than [`PROBE_TIMEOUT`]
/// (then it is killed): the doctor is run when something hangs, and must not hang itself.
fn output_within(program: &Path, arg: &str) -> Option<std::process::Output> {
    use std::io::Read;
    let mut child = std::process::Command::new(program)
        .arg(arg)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    // Read both pipes while waiting: a long help text must not fill one and stall the child.
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = std::time::Instant::now() + PROBE_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    Some(std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

impl Userns {
    pub fn read() -> Self {
        Userns {
            root: nix::unistd::geteuid().is_root(),
            unprivileged_userns_clone: read_number("/proc/sys/kernel/unprivileged_userns_clone"),
            max_user_namespaces: read_number("/proc/sys/user/max_user_namespaces"),
            apparmor_restrict: read_number(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            ),
        }
    }
}

/// Runs `bwrap --unshare-user --ro-bind / / true`, killed after [`PROBE_TIMEOUT`].
pub fn probe_userns(bwrap: &Path) -> Probe {
    use std::io::Read;
    let child = std::process::Command::new(bwrap)
        .args(["--unshare-user", "--ro-bind", "/", "/", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return Probe::Failed(None, format!("cannot run {}: {e}", bwrap.display())),
    };
    let deadline = std::time::Instant::now() + PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                let mut msg = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut msg);
                }
                return if st.success() {
                    Probe::Works
                } else {
                    Probe::Failed(st.code(), msg)
                };
            }
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Probe::TimedOut;
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn landlock_abi() -> Result<i64, i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel only
    // returns the ABI version (or an error); nothing is read or written.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if r < 0 {
        Err(nix::errno::Errno::last_raw())
    } else {
        Ok(r)
    }
}

#[cfg(not(target_os = "linux"))]
fn landlock_abi() -> Result<i64, i32> {
    Err(libc::ENOSYS)
}

impl Facts {
    /// Read this machine. bubblewrap and pasta are found as the launcher finds them (with no
    /// writable paths to rule out: there is no sandbox yet).
    pub fn probe() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let bwrap = crate::tools::locate(&crate::tools::BWRAP, &[]).map_err(|e| e.to_string());
        let pasta = crate::tools::locate(&crate::tools::PASTA, &[]).map_err(|e| e.to_string());
        let bwrap_help = bwrap
            .as_ref()
            .ok()
            .and_then(|b| output_within(b, "--help"))
            .map(|o| {
                // Some versions print their help on stderr.
                let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
                s.push_str(&String::from_utf8_lossy(&o.stderr));
                s
            })
            .unwrap_or_default();
        let nix_socket = crate::nixstore::socket_path();
        Facts {
            bwrap_version: bwrap.as_ref().ok().and_then(|b| first_line(b, "--version")),
            bwrap_help,
            userns: Userns::read(),
            userns_probe: bwrap.as_ref().map_or(Probe::NotRun, |b| probe_userns(b)),
            bwrap,
            tun_mode: std::fs::metadata("/dev/net/tun")
                .ok()
                .map(|m| m.permissions().mode() & 0o7777),
            pasta_version: pasta.as_ref().ok().and_then(|p| first_line(p, "--version")),
            pasta,
            legacy_tiocsti: read_number("/proc/sys/dev/tty/legacy_tiocsti"),
            landlock: landlock_abi(),
            nix_socket_present: Path::new(&nix_socket).exists(),
            nix_socket,
            nix_conf: crate::nixstore::config_files()
                .into_iter()
                .next()
                .unwrap_or_else(|| "/etc/nix/nix.conf".into()),
            nix_trust: crate::nixstore::caller_trust(),
        }
    }
}

#[cfg(test)]
#[path = "doctor_tests.rs"]
mod tests;
