//! What planning reads from the machine: [`HostContext::probe`] gathers it once (ids, `TERM`,
//! the locale and colour variables, the helper's binaries, listening ports, resolv.conf, the Nix daemon, the CA bundle), so
//! that `plan::build` reads only the paths it resolves (declared paths, git layout,
//! symlinks) and is unit-tested on a `HostContext` built by hand.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What the planner needs to know about the host besides the paths it resolves: gathered
/// once by [`HostContext::probe`], passed in so the planner is deterministic under test.
#[derive(Debug, Clone)]
pub struct HostContext {
    /// Canonical launch directory.
    pub cwd: PathBuf,
    /// The symlink on the way to `cwd` that needs a `y` (see `guard::symlinked_launch_dir`),
    /// found by the caller in the same walk that resolved `cwd` where it could race.
    pub cwd_link: Option<crate::guard::Confirm>,
    /// Canonical `$HOME`.
    pub home: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub term: Option<String>,
    /// The launcher's locale and colour variables ([`PASSED_VARIABLES`]), in that list's
    /// order, those with a value that is safe to pass ([`passed_variables`]).
    pub locale: Vec<(String, String)>,
    /// The private per-session directory (outside every bind).
    pub session_dir: PathBuf,
    /// The helper's own executable, bound inside at `INIT_PATH` unless `init_exe` is set.
    pub helper_exe: PathBuf,
    /// The small `agent-sandbox-init` binary installed beside the helper, if there is one:
    /// bound at `INIT_PATH` instead (cheaper to start than the whole helper).
    pub init_exe: Option<PathBuf>,
    /// Ports listening on the host's loopback (or on every address) at launch: what
    /// `allowedLocalPorts = null` stands for. Probed only when the spec says `null`.
    pub listening_ports: Vec<u16>,
    /// The lowest port a bridge can listen on inside: 1024 on Linux, where the sandbox has
    /// its own network namespace (`net.ipv4.ip_unprivileged_port_start` = 1024 there) and no
    /// capabilities; 1 for macOS, whose sandbox reaches host ports directly.
    pub lowest_bridged_port: u16,
    /// The caller's `PATH`: its directories in declared read-write paths (or in a launch
    /// directory that is `$HOME`) are kept read-only (`protect`), the other writable ones
    /// warned about.
    pub caller_path: OsString,
    /// The host's `/etc/resolv.conf` (`None`: there is none): open mode binds it, or a copy
    /// naming pasta's DNS forward when its nameservers are on the host's loopback.
    pub resolv_conf: Option<String>,
    /// The Nix daemon, for `allowNix`.
    pub nix: NixDaemon,
    /// The host's CA bundle (the first of [`SYSTEM_CA_BUNDLES`] that exists): the roots in
    /// host-system mode, and what the session's bundle starts from.
    pub system_ca_bundle: Option<PathBuf>,
    /// Whether `/bin/bash` exists: `SHELL` in host-system mode.
    pub has_bin_bash: bool,
    /// Which of [`PROC_READ_ONLY`] exist: bound read-only over the sandbox's `/proc`.
    pub proc_ro: Vec<PathBuf>,
}

/// Kernel settings bound read-only inside. Fail closed: bwrap 0.8 means to remount /proc/sys
/// read-only but skips it (its write probe on the directory always fails), and launched by
/// root the sandbox user passes /proc/sys's uid check, so core_pattern & co. would be
/// writable: host root.
pub const PROC_READ_ONLY: &[&str] = &["/proc/sys", "/proc/sysrq-trigger"];

/// Where the Nix daemon's socket is (`NIX_DAEMON_SOCKET_PATH`, else Nix's default) and whether
/// it and the store exist.
#[derive(Debug, Clone, Default)]
pub struct NixDaemon {
    pub socket: String,
    pub socket_present: bool,
    pub store_present: bool,
}

/// The launcher's variables passed on as they are, so that programs inside speak the user's
/// language and TUIs pick their characters and colours: the locale (POSIX and glibc
/// categories, GNU's `LANGUAGE`) and `COLORTERM`. None of them holds a secret. An explicit
/// list, not every `LC_*`: `ssh`'s `SendEnv LC_*` makes that prefix a carrier for anything.
pub const PASSED_VARIABLES: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_ADDRESS",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NAME",
    "LC_NUMERIC",
    "LC_PAPER",
    "LC_TELEPHONE",
    "LC_TIME",
    "COLORTERM",
];

/// Longest value of a [`PASSED_VARIABLES`] entry passed on (locale names are short).
pub const PASSED_VALUE_MAX: usize = 256;

/// The [`PASSED_VARIABLES`] `get` has, in the list's order. A value that is empty, not UTF-8,
/// longer than [`PASSED_VALUE_MAX`] or holds a control character is left out: a locale name
/// never does, and an escape sequence in `$LANG` would reach every program that prints it.
pub fn passed_variables(get: impl Fn(&str) -> Option<OsString>) -> Vec<(String, String)> {
    PASSED_VARIABLES
        .iter()
        .filter_map(|&name| {
            let value = get(name)?.into_string().ok()?;
            let fine = !value.is_empty()
                && value.len() <= PASSED_VALUE_MAX
                && !value.chars().any(char::is_control);
            fine.then(|| (name.to_string(), value))
        })
        .collect()
}

/// Well-known CA bundle locations (after `SSL_CERT_FILE` and `NIX_SSL_CERT_FILE`, which the
/// proxy reads first).
pub const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/cacert.pem",
    "/nix/var/nix/profiles/default/etc/ssl/certs/ca-bundle.crt",
];

/// What the launcher has already settled before probing: the launch directory (after the
/// launch guard), the home, the session directory, and what the spec asks to be probed.
pub struct Settled<'a> {
    pub cwd: PathBuf,
    pub cwd_link: Option<crate::guard::Confirm>,
    pub home: PathBuf,
    pub session_dir: PathBuf,
    pub spec: &'a crate::spec::Spec,
    /// `linux` or `macos`: the platform planned for.
    pub target: &'a str,
}

impl HostContext {
    /// Read everything the planner needs from this machine and this process.
    pub fn probe(s: Settled<'_>) -> anyhow::Result<Self> {
        use anyhow::Context;
        let helper_exe = std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .context("cannot locate the agent-sandbox executable")?;
        let init_exe = init_beside(&helper_exe);
        let socket = crate::nixstore::socket_path();
        Ok(HostContext {
            cwd: s.cwd,
            cwd_link: s.cwd_link,
            home: s.home,
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            term: std::env::var("TERM").ok(),
            locale: passed_variables(|k| std::env::var_os(k)),
            session_dir: s.session_dir,
            helper_exe,
            init_exe,
            // Probed only when asked for: reading /proc/net/tcp costs a little at every start.
            listening_ports: if s.spec.allowed_local_ports.is_none() {
                crate::bridge::host_listening_ports()
            } else {
                Vec::new()
            },
            lowest_bridged_port: if s.target == "macos" { 1 } else { 1024 },
            caller_path: std::env::var_os("PATH").unwrap_or_default(),
            resolv_conf: std::fs::read_to_string("/etc/resolv.conf").ok(),
            nix: NixDaemon {
                socket_present: Path::new(&socket).exists(),
                socket,
                store_present: Path::new("/nix/store").is_dir(),
            },
            system_ca_bundle: SYSTEM_CA_BUNDLES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists()),
            has_bin_bash: Path::new("/bin/bash").exists(),
            proc_ro: PROC_READ_ONLY
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.exists())
                .collect(),
        })
    }
}

/// The file name of the small init binary (`src/bin/agent-sandbox-init.rs`), installed beside
/// the helper.
pub const INIT_BINARY: &str = "agent-sandbox-init";

/// The small `agent-sandbox-init` beside the helper, when it is an executable file.
fn init_beside(helper_exe: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::fs::canonicalize(helper_exe.parent()?.join(INIT_BINARY)).ok()?;
    let meta = std::fs::metadata(&path).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_variables_with_plain_values_are_passed() {
        let host: std::collections::BTreeMap<&str, &str> = [
            ("LANG", "de_DE.UTF-8"),
            ("LC_ALL", "C.UTF-8"),
            ("LC_TIME", "en_GB.UTF-8"),
            ("COLORTERM", "truecolor"),
            ("LANGUAGE", "de:en"),
            // Not in the list: an `LC_`-prefixed name is no locale category by itself.
            ("LC_TERMINAL", "iTerm2"),
            ("LC_SECRET", "token"),
            ("LESSOPEN", "| lesspipe %s"),
            // Refused values.
            ("LC_CTYPE", "en_US.UTF-8\u{1b}]0;pwned\u{7}"),
            ("LC_NUMERIC", ""),
        ]
        .into();
        let long = "x".repeat(PASSED_VALUE_MAX + 1);
        let got = passed_variables(|k| match k {
            "LC_PAPER" => Some(long.clone().into()),
            "LC_NAME" => {
                use std::os::unix::ffi::OsStringExt;
                Some(OsString::from_vec(vec![0xff, b'C']))
            }
            _ => host.get(k).map(OsString::from),
        });
        let want: Vec<(String, String)> = [
            ("LANG", "de_DE.UTF-8"),
            ("LANGUAGE", "de:en"),
            ("LC_ALL", "C.UTF-8"),
            ("LC_TIME", "en_GB.UTF-8"),
            ("COLORTERM", "truecolor"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        let at_limit = "y".repeat(PASSED_VALUE_MAX);
        let got = passed_variables(|k| (k == "LANG").then(|| at_limit.clone().into()));
        assert_eq!(got, vec![("LANG".to_string(), at_limit)]);
    }
}
