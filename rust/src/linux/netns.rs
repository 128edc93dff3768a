//! Open network mode: the internet without the host.
//!
//! The launcher starts a small holder process (`agent-sandbox __hold`) that creates a user
//! and network namespace, then attaches pasta (user-mode networking) to it by PID with host
//! loopback mapping off, makes every address of the host unreachable inside the namespace, and
//! finally runs bwrap inside it through `agent-sandbox __enter PID -- bwrap …`.
//!
//! The same holder, with a mount namespace, stages large closures ([`super::stage`]), in any
//! network mode.
//!
//! Why this shape: pasta started as root cannot map users itself, and Debian 12's pasta leaves
//! the host's /proc mounted when it spawns the command, which breaks bwrap. Creating the
//! namespaces ourselves and attaching pasta by PID works for root and non-root alike.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};

use nix::sched::{CloneFlags, setns, unshare};

/// Holder protocol lines.
const READY: &str = "ready";
const GO: &str = "go";
const OK: &str = "ok";

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("open network mode needs pasta and `ip`: {0}")]
    Tool(#[from] crate::tools::ToolError),
    #[error("cannot start the network namespace holder: {0}")]
    Holder(std::io::Error),
    #[error(
        "the network namespace could not be created: {0}. Fix: enable unprivileged user namespaces (Ubuntu 24.04+: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0; elsewhere check sysctl user.max_user_namespaces), or use --no-network"
    )]
    Namespace(String),
    #[error("pasta could not connect the sandbox to the network: {0}")]
    Pasta(String),
    #[error("cannot cut the host off inside the sandbox's network: {0}")]
    Routes(String),
}

pub type Result<T> = std::result::Result<T, NetnsError>;

/// Every address of the host's interfaces except loopback (inside, loopback is the sandbox's
/// own). Services bound to 0.0.0.0 answer on all of these, so all must be unreachable.
pub fn host_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for a in addrs {
            let Some(sa) = a.address else { continue };
            let ip = if let Some(v4) = sa.as_sockaddr_in() {
                IpAddr::V4(v4.ip())
            } else if let Some(v6) = sa.as_sockaddr_in6() {
                IpAddr::V6(v6.ip())
            } else {
                continue;
            };
            if !ip.is_loopback() && !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    out
}

/// pasta's argv to attach to the holder `pid`. Pure.
pub fn pasta_args(
    pid: u32,
    as_root: bool,
    log: &Path,
    pid_file: &Path,
    dns_forward: Option<&str>,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        "--config-net".into(),
        "--quiet".into(),
        // No port forwarding in either direction: the host's loopback services stay out of
        // reach, and nothing on the host can reach into the sandbox.
        "-t".into(),
        "none".into(),
        "-u".into(),
        "none".into(),
        "-T".into(),
        "none".into(),
        "-U".into(),
        "none".into(),
        // The gateway address must lead to the real gateway, not to the host's loopback.
        "--no-map-gw".into(),
        "--log-file".into(),
        log.into(),
        // pasta does not notice when a namespace given as /proc/PID/ns/net goes away, so we
        // stop it ourselves: its daemon's PID lands here.
        "--pid".into(),
        pid_file.into(),
    ];
    if let Some(addr) = dns_forward {
        a.extend(["--dns-forward".into(), addr.into()]);
    }
    if as_root {
        // As root pasta would drop to nobody before opening the namespaces, and fail.
        a.extend(["--runas".into(), "0:0".into()]);
    }
    a.extend([
        "--userns".into(),
        format!("/proc/{pid}/ns/user").into(),
        "--netns".into(),
        format!("/proc/{pid}/ns/net").into(),
    ]);
    a
}

/// The holder: a live process owning the sandbox's user and network namespaces.
pub struct Holder {
    child: Child,
    /// Shared with the address watcher; taken (closed) on drop, which ends the holder.
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    pasta: Option<OwnedFd>,
    watcher: Option<Child>,
}

/// A pidfd for `pid`, if it is still the pasta serving the namespace of `holder_pid` (its
/// command line names that namespace). Signalling through the pidfd cannot hit a process that
/// reused the PID later.
fn pasta_pidfd(pid: i32, holder_pid: u32) -> Option<OwnedFd> {
    // SAFETY: plain syscall; the result is a new descriptor we own, or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is a fresh descriptor returned by the kernel.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let marker = format!("/proc/{holder_pid}/ns/net");
    String::from_utf8_lossy(&cmdline)
        .contains(&marker)
        .then_some(fd)
}

fn pidfd_kill(fd: &OwnedFd) {
    // SAFETY: pidfd_send_signal with a valid pidfd, no siginfo.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
}

impl Holder {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        // pasta would outlive the namespace (and hold ~30 MB) if nobody stopped it.
        if let Some(fd) = &self.pasta {
            pidfd_kill(fd);
        }
        if let Some(w) = self.watcher.as_mut() {
            let _ = w.kill();
            let _ = w.wait();
        }
        // Closing its stdin ends the holder; the namespace dies with its last process.
        if let Ok(mut stdin) = self.stdin.lock() {
            drop(stdin.take());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the holder sets up besides its user namespace.
pub struct HolderOptions<'a> {
    /// Open network mode: a network namespace with pasta, the host cut off.
    pub net: bool,
    /// Open mode: the address inside that pasta forwards to the host's resolver.
    pub dns_forward: Option<&'a str>,
    /// A mount namespace with this directory staged (large closures).
    pub stage: Option<&'a crate::plan::Staging>,
    /// What the sandbox can write: pasta and `ip` must not come from there.
    pub writable: &'a [PathBuf],
}

/// Create the namespaces; in open mode attach pasta and cut the host off; stage a large
/// closure. On success the returned holder keeps the namespaces alive; run bwrap inside with
/// [`enter_prefix`]. `entry_exe` runs the holder (`__hold`): the small `agent-sandbox-init`,
/// or the helper itself.
pub fn setup(entry_exe: &Path, session_dir: &Path, opts: &HolderOptions<'_>) -> Result<Holder> {
    let tools = if opts.net {
        Some((
            crate::tools::locate(&crate::tools::PASTA, opts.writable)?,
            crate::tools::locate(&crate::tools::IP, opts.writable)?,
        ))
    } else {
        None
    };
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let mut cmd = Command::new(entry_exe);
    cmd.arg("__hold")
        .arg(uid.to_string())
        .arg(gid.to_string())
        .arg(if opts.net { "net" } else { "-" });
    match opts.stage {
        Some(st) => {
            let list = session_dir.join("staged-closure");
            std::fs::write(&list, super::stage::encode_names(&st.names)).map_err(|e| {
                NetnsError::Namespace(format!("cannot write {}: {e}", list.display()))
            })?;
            std::fs::create_dir_all(&st.view).map_err(|e| {
                NetnsError::Namespace(format!("cannot create {}: {e}", st.view.display()))
            })?;
            cmd.arg(&st.dir).arg(list).arg(&st.view);
        }
        None => {
            cmd.args(["-", "-", "-"]);
        }
    }
    if opts.net {
        cmd.args(host_addresses().iter().map(|a| a.to_string()));
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The holder must not outlive the launcher.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd.spawn().map_err(NetnsError::Holder)?;
    let stdin = child.stdin.take();
    let mut holder = Holder {
        child,
        stdin: Arc::new(Mutex::new(stdin)),
        pasta: None,
        watcher: None,
    };
    let stdout = holder.child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines();
    let mut expect =
        |what: &str, err: fn(String) -> NetnsError, holder: &mut Holder| match lines.next() {
            Some(Ok(l)) if l == what => Ok(()),
            Some(Ok(l)) => Err(err(l)),
            _ => {
                let mut msg = String::new();
                if let Some(mut e) = holder.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut msg);
                }
                Err(err(msg.trim().to_string()))
            }
        };
    expect(READY, NetnsError::Namespace, &mut holder)?;
    let Some((pasta, ip)) = tools else {
        return Ok(holder);
    };

    let log = session_dir.join("pasta.log");
    let pid_file = session_dir.join("pasta.pid");
    let as_root = uid == 0;
    let out = Command::new(&pasta)
        .args(pasta_args(
            holder.pid(),
            as_root,
            &log,
            &pid_file,
            opts.dns_forward,
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| NetnsError::Pasta(format!("cannot run {}: {e}", pasta.display())))?;
    if !out.status.success() {
        let mut msg: String = String::from_utf8_lossy(&out.stderr)
            .lines()
            .chain(std::fs::read_to_string(&log).unwrap_or_default().lines())
            .filter(|l| !l.contains("syslog") && !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        if msg.contains("tun") {
            msg.push_str(
                ". Fix: /dev/net/tun must be usable by your user (mode 0666 on most distributions: sudo chmod 666 /dev/net/tun), or use --no-network",
            );
        }
        return Err(NetnsError::Pasta(msg));
    }
    let pasta_pid: Option<i32> = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    holder.pasta = pasta_pid.and_then(|p| pasta_pidfd(p, holder.pid()));
    let (Some(pasta_pid), Some(_)) = (pasta_pid, &holder.pasta) else {
        // Fail closed on bookkeeping too: an unstoppable pasta would leak with every launch.
        return Err(NetnsError::Pasta(format!(
            "pasta started but did not write its PID to {}",
            pid_file.display()
        )));
    };
    // Watch for addresses the host gains during the session, from before the snapshot is
    // applied, so none slips between the two. Fail closed if we cannot watch.
    let mut watcher = Command::new(&ip)
        .args(["-o", "monitor", "address"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| NetnsError::Routes(format!("cannot watch the host's addresses: {e}")))?;
    let events = watcher.stdout.take().expect("piped");
    holder.watcher = Some(watcher);
    let sink = Arc::downgrade(&holder.stdin);
    std::thread::spawn(move || {
        for line in BufReader::new(events).lines() {
            let Ok(line) = line else { break };
            let Some(addr) = new_address(&line) else {
                continue;
            };
            let Some(sink) = sink.upgrade() else { break };
            let Ok(mut guard) = sink.lock() else { break };
            let Some(stdin) = guard.as_mut() else { break };
            if writeln!(stdin, "block {addr}").is_err() {
                break;
            }
        }
    });
    if let Some(stdin) = holder.stdin.lock().ok().as_mut().and_then(|g| g.as_mut()) {
        writeln!(stdin, "{GO} {pasta_pid}").map_err(|e| NetnsError::Routes(e.to_string()))?;
    }
    expect(OK, NetnsError::Routes, &mut holder)?;
    Ok(holder)
}

/// The address an `ip -o monitor address` line announces, if it is a new, non-loopback one.
/// Pure.
pub fn new_address(line: &str) -> Option<IpAddr> {
    if line.starts_with("Deleted") {
        return None;
    }
    let mut words = line.split_whitespace();
    words.find(|w| *w == "inet" || *w == "inet6")?;
    let addr: IpAddr = words.next()?.split('/').next()?.parse().ok()?;
    (!addr.is_loopback()).then_some(addr)
}

/// The argv prefix that runs a program inside the holder's namespaces: its user namespace
/// and the ones named (`mnt` when it staged a closure, `net` in open mode).
pub fn enter_prefix(entry_exe: &Path, holder_pid: u32, opts: &HolderOptions<'_>) -> Vec<OsString> {
    let mut ns = vec!["user"];
    if opts.stage.is_some() {
        ns.push("mnt");
    }
    if opts.net {
        ns.push("net");
    }
    vec![
        entry_exe.into(),
        "__enter".into(),
        holder_pid.to_string().into(),
        ns.join(",").into(),
        "--".into(),
    ]
}

fn write_proc(path: &str, contents: &str) -> std::result::Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("cannot write {path}: {e}"))
}

/// `agent-sandbox __hold UID GID NET STAGE-DIR STAGE-LIST VIEW ADDR…` — runs in the holder
/// process. `NET` is `net` (own network namespace, pasta, the host's ADDRs cut off) or `-`;
/// `STAGE-DIR STAGE-LIST VIEW` name the directory to stage, the file listing its entries and
/// where to build the view ([`super::stage`]), or are `-`.
pub fn hold_main(args: &[OsString]) -> i32 {
    let fail = |msg: String| {
        eprintln!("{msg}");
        1
    };
    let [uid, gid, net, stage_dir, stage_list, stage_view, addrs @ ..] = args else {
        return fail("usage: __hold UID GID net|- STAGE-DIR|- STAGE-LIST|- VIEW|- ADDR…".into());
    };
    let (uid, gid) = (uid.to_string_lossy(), gid.to_string_lossy());
    let net = net == "net";
    let stage = (stage_dir != "-").then(|| {
        (
            Path::new(stage_dir),
            Path::new(stage_list),
            Path::new(stage_view),
        )
    });
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if net {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if stage.is_some() {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    if let Err(e) = unshare(flags) {
        return fail(format!("unshare({flags:?}) failed: {e}"));
    }
    // Map ourselves to root of the new namespace: the holder configures routes and mounts,
    // and bwrap, entering later, maps the sandbox user back to the caller's uid.
    let maps = write_proc("/proc/self/setgroups", "deny")
        .and_then(|_| write_proc("/proc/self/uid_map", &format!("0 {uid} 1")))
        .and_then(|_| write_proc("/proc/self/gid_map", &format!("0 {gid} 1")));
    if let Err(e) = maps {
        return fail(e);
    }
    if let Some((dir, list, view)) = stage {
        let staged = std::fs::read(list)
            .map_err(|e| format!("cannot read the staging list {}: {e}", list.display()))
            .and_then(|bytes| super::stage::decode_names(&bytes))
            .and_then(|names| super::stage::stage(dir, &names, view));
        if let Err(e) = staged {
            return fail(format!(
                "cannot stage the closure in {}: {e}",
                dir.display()
            ));
        }
    }
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{READY}");
    let _ = out.flush();
    let stdin = std::io::stdin();
    if !net {
        // Hold the namespaces until the launcher closes our stdin (or dies).
        let mut rest = String::new();
        while stdin.lock().read_line(&mut rest).unwrap_or(0) > 0 {
            rest.clear();
        }
        return 0;
    }
    let mut line = String::new();
    // Addresses the watcher reports before "go" are blocked together with the snapshot.
    let mut early: Vec<IpAddr> = Vec::new();
    let pasta = loop {
        line.clear();
        if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
            return 1;
        }
        match line.trim().split_once(' ') {
            Some((GO, pid)) => {
                break pid
                    .parse::<i32>()
                    .ok()
                    .and_then(|p| pasta_pidfd(p, std::process::id()));
            }
            Some(("block", a)) => early.extend(a.parse::<IpAddr>().ok()),
            _ => return 1,
        }
    };
    let addrs: Vec<IpAddr> = addrs
        .iter()
        .filter_map(|a| a.to_str().and_then(|s| s.parse().ok()))
        .chain(early)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // Straight through rtnetlink, all in one message: `ip -batch` cost ~2 ms (bench/run).
    if let Err(msg) = super::rtnl::add_unreachable_routes(&addrs, false) {
        let _ = writeln!(out, "{msg}");
        return 1;
    }
    let _ = writeln!(out, "{OK}");
    let _ = out.flush();
    // Hold the namespace until the launcher closes our stdin (or dies), then make sure pasta
    // goes too: the launcher may have been killed before it could stop it.
    // Meanwhile the launcher reports addresses the host gains (`block ADDR`): cut them off too.
    let mut rest = String::new();
    while stdin.lock().read_line(&mut rest).unwrap_or(0) > 0 {
        if let Some(addr) = rest
            .trim()
            .strip_prefix("block ")
            .and_then(|a| a.parse().ok())
        {
            // Already blocked is fine. A failure cannot be reported to anyone from here; the
            // address simply stays as unreachable as the launch found it.
            let _ = super::rtnl::add_unreachable_routes(&[addr], true);
        }
        rest.clear();
    }
    if let Some(fd) = &pasta {
        pidfd_kill(fd);
    }
    0
}

/// `agent-sandbox __enter PID NAMESPACES -- PROGRAM ARGS…` — join the holder PID's
/// namespaces named in `NAMESPACES` (`user,mnt,net`, user first), then exec. Each must differ
/// from ours: the holder made it, and joining our own would run bwrap less confined than
/// planned without a word.
pub fn enter_main(args: &[OsString]) -> i32 {
    let (pid, namespaces, rest) = match args {
        [pid, ns, sep, rest @ ..] if sep == "--" && !rest.is_empty() => (pid, ns, rest),
        _ => {
            eprintln!("agent-sandbox: error: usage: __enter PID user[,mnt][,net] -- PROGRAM ARGS…");
            return 125;
        }
    };
    let pid = pid.to_string_lossy();
    // Joining a mount namespace moves the working directory to its root: come back after.
    let cwd = std::env::current_dir().ok();
    for ns in namespaces.to_string_lossy().split(',') {
        let flag = match ns {
            "user" => CloneFlags::CLONE_NEWUSER,
            "mnt" => CloneFlags::CLONE_NEWNS,
            "net" => CloneFlags::CLONE_NEWNET,
            other => {
                eprintln!("agent-sandbox: error: __enter: unknown namespace {other:?}");
                return 125;
            }
        };
        let path = format!("/proc/{pid}/ns/{ns}");
        let theirs = std::fs::read_link(&path).ok();
        if theirs.is_none() || theirs == std::fs::read_link(format!("/proc/self/ns/{ns}")).ok() {
            // Fail closed: never run bwrap in the host's namespaces by accident.
            eprintln!(
                "agent-sandbox: error: the sandbox's {ns} namespace ({path}) is missing or the host's own"
            );
            return 125;
        }
        let r = std::fs::File::open(&path)
            .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
            .and_then(|f| setns(f.as_fd(), flag));
        if let Err(e) = r {
            eprintln!("agent-sandbox: error: cannot join the sandbox's namespace {path}: {e}");
            return 125;
        }
    }
    if let Some(cwd) = cwd
        && let Err(e) = std::env::set_current_dir(&cwd)
    {
        eprintln!(
            "agent-sandbox: error: cannot return to {} in the sandbox's namespace: {e}",
            cwd.display()
        );
        return 125;
    }
    let err = Command::new(&rest[0]).args(&rest[1..]).exec();
    eprintln!(
        "agent-sandbox: error: cannot run {}: {err}",
        Path::new(&rest[0]).display()
    );
    125
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fail closed: a namespace that turns out to be the caller's own (the holder is gone and
    /// its PID is ours, or it never made one) stops `__enter` before anything runs.
    #[test]
    fn enter_refuses_namespaces_that_are_our_own() {
        let me: OsString = std::process::id().to_string().into();
        for ns in ["user", "user,net", "mnt", "user,bogus"] {
            let args: Vec<OsString> = vec![me.clone(), ns.into(), "--".into(), "/bin/true".into()];
            assert_eq!(enter_main(&args), 125, "{ns}");
        }
        assert_eq!(enter_main(&[me, "--".into(), "/bin/true".into()]), 125);
    }

    #[test]
    fn enter_prefix_names_the_namespaces_the_holder_made() {
        let st = crate::plan::Staging {
            dir: "/nix/store".into(),
            names: vec![],
            view: "/s/store-view".into(),
        };
        for (net, stage, want) in [
            (true, None, "user,net"),
            (false, Some(&st), "user,mnt"),
            (true, Some(&st), "user,mnt,net"),
        ] {
            let opts = HolderOptions {
                net,
                dns_forward: None,
                stage,
                writable: &[],
            };
            let p = enter_prefix(Path::new("/x/agent-sandbox-init"), 42, &opts);
            let p: Vec<&str> = p.iter().map(|a| a.to_str().unwrap()).collect();
            assert_eq!(p, ["/x/agent-sandbox-init", "__enter", "42", want, "--"]);
        }
    }

    #[test]
    fn pasta_argv_exact() {
        let a = pasta_args(
            42,
            false,
            Path::new("/s/pasta.log"),
            Path::new("/s/pasta.pid"),
            None,
        );
        let s: Vec<&str> = a.iter().map(|x| x.to_str().unwrap()).collect();
        assert_eq!(
            s,
            [
                "--config-net",
                "--quiet",
                "-t",
                "none",
                "-u",
                "none",
                "-T",
                "none",
                "-U",
                "none",
                "--no-map-gw",
                "--log-file",
                "/s/pasta.log",
                "--pid",
                "/s/pasta.pid",
                "--userns",
                "/proc/42/ns/user",
                "--netns",
                "/proc/42/ns/net"
            ]
        );
        let r = pasta_args(
            42,
            true,
            Path::new("/l"),
            Path::new("/p"),
            Some("169.254.1.53"),
        );
        let d = r.iter().position(|x| x == "--dns-forward").unwrap();
        assert_eq!(r[d + 1], "169.254.1.53");
        let i = r.iter().position(|x| x == "--runas").unwrap();
        assert_eq!(r[i + 1], "0:0");
    }

    #[test]
    fn monitor_lines_announce_new_addresses() {
        assert_eq!(
            new_address(
                "2: eth0    inet 203.0.113.77/32 scope global eth0\\       valid_lft forever"
            ),
            Some("203.0.113.77".parse().unwrap())
        );
        assert_eq!(
            new_address("3: wlan0    inet6 2001:db8::5/64 scope global dynamic"),
            Some("2001:db8::5".parse().unwrap())
        );
        assert_eq!(
            new_address("Deleted 2: eth0    inet 203.0.113.77/32 scope global"),
            None
        );
        assert_eq!(new_address("1: lo    inet 127.0.0.2/8 scope host lo"), None);
        assert_eq!(new_address("garbage"), None);
    }

    #[test]
    fn host_addresses_exclude_loopback() {
        assert!(host_addresses().iter().all(|a| !a.is_loopback()));
    }
}
