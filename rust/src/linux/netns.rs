//! Open network mode: the internet without the host.
//!
//! The launcher starts a small holder process (`agent-sandbox __hold`) that creates a user
//! and network namespace, attaches pasta (user-mode networking) to it by PID with host
//! loopback mapping off, makes every destination of the host unreachable inside the namespace
//! (its interfaces' addresses and every prefix its local routing table delivers to itself), and
//! finally runs bwrap inside it through `agent-sandbox __enter PID -- bwrap …`. Meanwhile the
//! launcher watches the host's routes and reports each new local one (`block PREFIX`).
//!
//! The same holder, with a mount namespace, stages large closures ([`super::stage`]), in any
//! network mode.
//!
//! Why this shape: pasta started as root cannot map users itself, and Debian 12's pasta leaves
//! the host's /proc mounted when it spawns the command, which breaks bwrap. Creating the
//! namespaces ourselves and attaching pasta by PID works for root and non-root alike. pasta is
//! the holder's own child, in the foreground, with a parent-death signal: it cannot outlive the
//! holder however the holder ends (pasta does not notice a namespace given as /proc/PID/ns/net
//! going away, and a daemonised pasta survived a launcher killed with SIGKILL).

use std::ffi::{CString, OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sched::{CloneFlags, setns, unshare};
use nix::unistd::{ForkResult, Pid};

use super::rtnl::{Prefix, RouteWatch};
use crate::entry::{self, EnterArgs, HoldArgs, Namespace, PastaSpec, StageSpec};

/// Holder protocol lines.
const READY: &str = "ready";
const GO: &str = "go";
const OK: &str = "ok";
/// How the holder's answer names a failure of pasta (not of the routes).
const PASTA_FAILED: &str = "pasta: ";

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("open network mode needs pasta: {0}")]
    Tool(#[from] crate::tools::ToolError),
    #[error("cannot start the network namespace holder: {0}")]
    Holder(std::io::Error),
    /// With the cause and its fix when a kernel setting explains it
    /// ([`crate::doctor::namespace_failure_message`]).
    #[error("the network namespace could not be created: {0}")]
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

/// Everything the host answers on itself: its interfaces' addresses and the prefixes its local
/// routing table delivers to it (`ip route add local 192.0.2.0/24 dev lo` hands a service
/// bound to 0.0.0.0 a whole prefix). Sorted, without duplicates.
pub fn host_prefixes() -> Result<Vec<Prefix>> {
    // Fail closed: without the local table, part of the host would stay reachable.
    let table = super::rtnl::host_local_prefixes().map_err(|e| {
        NetnsError::Routes(format!("cannot read the host's local routing table: {e}"))
    })?;
    Ok(merge_prefixes(
        host_addresses().into_iter().map(Prefix::host).chain(table),
    ))
}

/// Sorted and without duplicates. Pure.
fn merge_prefixes(p: impl IntoIterator<Item = Prefix>) -> Vec<Prefix> {
    p.into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// pasta's argv (after its program name) to attach to the holder `pid` in the foreground,
/// writing its PID to the descriptor `ready_fd` once it has set the namespace up. Pure.
pub fn pasta_args(
    pid: u32,
    as_root: bool,
    log: &Path,
    ready_fd: i32,
    dns_forward: Option<&str>,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        "--config-net".into(),
        "--quiet".into(),
        // In the foreground pasta stays the holder's child, with its parent-death signal.
        "--foreground".into(),
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
        // pasta writes its PID once the namespace is configured: our signal that it is ready.
        "--pid".into(),
        format!("/proc/self/fd/{ready_fd}").into(),
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

/// The holder: a live process owning the sandbox's user and network namespaces (and pasta).
pub struct Holder {
    child: Child,
    /// Shared with the route watcher; taken (closed) on drop, which ends the holder.
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    /// Closing it stops the route watcher.
    stop_watch: Option<OwnedFd>,
}

impl Holder {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.stop_watch.take());
        // Closing its stdin ends the holder, and pasta with it (its parent-death signal); the
        // namespace dies with its last process.
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

/// The error a holder's failure line stands for: pasta's (tagged) or `other`. Pure.
fn holder_error(line: &str, other: fn(String) -> NetnsError) -> NetnsError {
    let Some(msg) = line.strip_prefix(PASTA_FAILED) else {
        return other(line.to_string());
    };
    let mut msg = msg.to_string();
    if msg.contains("tun") {
        msg.push_str(
            ". Fix: /dev/net/tun must be usable by your user (mode 0666 on most distributions: sudo chmod 666 /dev/net/tun), or use --no-network",
        );
    }
    NetnsError::Pasta(msg)
}

/// Create the namespaces; in open mode attach pasta and cut the host off; stage a large
/// closure. On success the returned holder keeps the namespaces alive; run bwrap inside with
/// [`enter_prefix`]. `entry_exe` runs the holder (`__hold`): the small `agent-sandbox-init`,
/// or the helper itself.
pub fn setup(entry_exe: &Path, session_dir: &Path, opts: &HolderOptions<'_>) -> Result<Holder> {
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let (mut net, mut watch, mut block) = (None, None, Vec::new());
    if opts.net {
        let pasta = crate::tools::locate(&crate::tools::PASTA, opts.writable)?;
        // Subscribed before the snapshot is read, so no prefix the host gains slips between
        // the two. Fail closed if we cannot watch.
        watch = Some(
            RouteWatch::open()
                .map_err(|e| NetnsError::Routes(format!("cannot watch the host's routes: {e}")))?,
        );
        block = host_prefixes()?;
        net = Some(PastaSpec {
            pasta,
            log: session_dir.join("pasta.log"),
            dns_forward: opts.dns_forward.map(str::to_string),
        });
    }
    let stage = match opts.stage {
        Some(st) => {
            let list = session_dir.join("staged-closure");
            std::fs::write(&list, super::stage::encode_names(&st.names)).map_err(|e| {
                NetnsError::Namespace(format!("cannot write {}: {e}", list.display()))
            })?;
            std::fs::create_dir_all(&st.view).map_err(|e| {
                NetnsError::Namespace(format!("cannot create {}: {e}", st.view.display()))
            })?;
            Some(StageSpec {
                dir: st.dir.clone(),
                list,
                view: st.view.clone(),
            })
        }
        None => None,
    };
    let args = HoldArgs {
        uid,
        gid,
        net,
        stage,
        block,
    };
    let mut cmd = Command::new(entry_exe);
    cmd.arg(entry::HOLD)
        .args(args.to_args())
        .stdin(Stdio::piped())
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
        stop_watch: None,
    };
    let stdout = holder.child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines();
    let mut expect =
        |what: &str, err: fn(String) -> NetnsError, holder: &mut Holder| match lines.next() {
            Some(Ok(l)) if l == what => Ok(()),
            Some(Ok(l)) => Err(holder_error(&l, err)),
            _ => {
                let mut msg = String::new();
                if let Some(mut e) = holder.child.stderr.take() {
                    let _ = e.read_to_string(&mut msg);
                }
                Err(holder_error(msg.trim(), err))
            }
        };
    // The holder's first step is unshare(CLONE_NEWUSER): a failure there is the kernel's
    // user-namespace settings, probed only now.
    expect(READY, NetnsError::Namespace, &mut holder).map_err(|e| match e {
        NetnsError::Namespace(line) => {
            NetnsError::Namespace(crate::doctor::namespace_failure_message(
                &line,
                &crate::doctor::Userns::read(),
                entry_exe,
            ))
        }
        e => e,
    })?;
    let Some(watch) = watch else {
        return Ok(holder);
    };
    let (stop_r, stop_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
        .map_err(|e| NetnsError::Routes(format!("cannot watch the host's routes: {e}")))?;
    holder.stop_watch = Some(stop_w);
    let sink = Arc::downgrade(&holder.stdin);
    std::thread::spawn(move || watch_host_routes(&watch, &stop_r, &sink));
    // Prefixes the watcher reported before this line are cut off together with the snapshot.
    if let Some(stdin) = holder.stdin.lock().ok().as_mut().and_then(|g| g.as_mut()) {
        writeln!(stdin, "{GO}").map_err(|e| NetnsError::Routes(e.to_string()))?;
    }
    expect(OK, NetnsError::Routes, &mut holder)?;
    Ok(holder)
}

/// Reports every local route the host gains to the holder (`block PREFIX`) until `stop`
/// closes or the holder is gone.
fn watch_host_routes(watch: &RouteWatch, stop: &OwnedFd, sink: &Weak<Mutex<Option<ChildStdin>>>) {
    loop {
        let mut fds = [
            PollFd::new(watch.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return;
        }
        let found = match watch.next() {
            Ok(found) => found,
            // The kernel dropped events (our buffer overflowed): read the whole table again.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => match host_prefixes() {
                Ok(all) => all,
                Err(_) => return,
            },
            Err(_) => return,
        };
        if found.is_empty() {
            continue;
        }
        let Some(sink) = sink.upgrade() else { return };
        let Ok(mut guard) = sink.lock() else { return };
        let Some(stdin) = guard.as_mut() else { return };
        for p in found {
            if writeln!(stdin, "block {p}").is_err() {
                return;
            }
        }
    }
}

/// The argv prefix that runs a program inside the holder's namespaces: its user namespace
/// and the ones named (`mnt` when it staged a closure, `net` in open mode).
pub fn enter_prefix(entry_exe: &Path, holder_pid: u32, opts: &HolderOptions<'_>) -> Vec<OsString> {
    let mut namespaces = vec![Namespace::User];
    if opts.stage.is_some() {
        namespaces.push(Namespace::Mnt);
    }
    if opts.net {
        namespaces.push(Namespace::Net);
    }
    let line = EnterArgs {
        holder_pid,
        namespaces,
        command: Vec::new(),
    };
    [entry_exe.into(), entry::ENTER.into()]
        .into_iter()
        .chain(line.to_args())
        .collect()
}

fn write_proc(path: &str, contents: &str) -> std::result::Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("cannot write {path}: {e}"))
}

/// pasta, forked by the holder while it is still in the host's namespaces (pasta must run
/// there), waiting for [`PastaChild::start`].
struct PastaChild {
    pid: Pid,
    go: OwnedFd,
    ready: OwnedFd,
    log: PathBuf,
}

fn cstring(s: &OsStr) -> std::result::Result<CString, String> {
    CString::new(s.as_bytes()).map_err(|_| format!("{s:?} contains a NUL byte"))
}

impl PastaChild {
    /// Forks the child that will exec pasta for the holder (the calling process, which must be
    /// single-threaded). It dies with the holder: a parent-death signal, which exec keeps.
    fn fork(spec: &PastaSpec, as_root: bool) -> std::result::Result<PastaChild, String> {
        let holder = nix::unistd::getpid();
        let pipe = || nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"));
        let ((go_r, go_w), (ready_r, ready_w)) = (pipe()?, pipe()?);
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map_err(|e| format!("cannot open /dev/null: {e}"))?;
        let args = pasta_args(
            holder.as_raw() as u32,
            as_root,
            &spec.log,
            ready_w.as_raw_fd(),
            spec.dns_forward.as_deref(),
        );
        let prog = cstring(spec.pasta.as_os_str())?;
        let argv = std::iter::once(Ok(prog.clone()))
            .chain(args.iter().map(|a| cstring(a)))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // SAFETY: the holder is single-threaded here; the child only makes system calls before
        // exec (the argv is built already).
        match unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))? {
            ForkResult::Parent { child } => Ok(PastaChild {
                pid: child,
                go: go_w,
                ready: ready_r,
                log: spec.log.clone(),
            }),
            ForkResult::Child => {
                // SAFETY: plain system calls on descriptors this process owns, then exec.
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    if libc::getppid() != holder.as_raw() {
                        libc::_exit(1);
                    }
                    // Not the launcher's pipes: they must close when the holder does.
                    for fd in 0..3 {
                        libc::dup2(null.as_raw_fd(), fd);
                    }
                    libc::close(go_w.as_raw_fd());
                    let mut b = 0u8;
                    if libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1) != 1 {
                        libc::_exit(1);
                    }
                    libc::fcntl(ready_w.as_raw_fd(), libc::F_SETFD, 0);
                    // Rust ignores SIGPIPE; Debian 12's pasta then fails to install its
                    // signal handlers and exits.
                    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                    let mut ptrs: Vec<*const libc::c_char> =
                        argv.iter().map(|a| a.as_ptr()).collect();
                    ptrs.push(std::ptr::null());
                    libc::execv(prog.as_ptr(), ptrs.as_ptr());
                    libc::_exit(127)
                }
            }
        }
    }

    /// Lets pasta attach to the holder's namespaces (set up by now) and waits until it has
    /// configured them, or failed.
    fn start(self) -> std::result::Result<(), String> {
        let _ = nix::unistd::write(&self.go, b"g");
        drop(self.go);
        let mut said = String::new();
        let _ = BufReader::new(std::fs::File::from(self.ready)).read_line(&mut said);
        if said.trim().parse::<i32>() == Ok(self.pid.as_raw()) {
            return Ok(());
        }
        // The pipe closed without a PID: pasta has exited, and says why in its log.
        let status = nix::sys::wait::waitpid(self.pid, None);
        let msg: Vec<String> = std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.contains("syslog") && !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        Err(if msg.is_empty() {
            format!(
                "pasta ended ({status:?}) before it was ready, without a word in its log {}",
                self.log.display()
            )
        } else {
            msg.join("; ")
        })
    }
}

/// `agent-sandbox __hold …` ([`HoldArgs`]) — runs in the holder process: creates the
/// namespaces, stages the closure, and in open mode starts pasta and cuts the host off.
pub fn hold_main(args: &[OsString]) -> i32 {
    let fail = |msg: String| {
        eprintln!("{msg}");
        1
    };
    let a = match HoldArgs::parse(args) {
        Ok(a) => a,
        Err(e) => return fail(e.to_string()),
    };
    // Forked before unshare: pasta runs in the host's namespaces, as our child.
    let pasta = match &a.net {
        Some(spec) => match PastaChild::fork(spec, a.uid == 0) {
            Ok(p) => Some(p),
            Err(e) => {
                return fail(format!(
                    "{PASTA_FAILED}cannot start {}: {e}",
                    spec.pasta.display()
                ));
            }
        },
        None => None,
    };
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if pasta.is_some() {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if a.stage.is_some() {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    if let Err(e) = unshare(flags) {
        return fail(format!("unshare({flags:?}) failed: {e}"));
    }
    // Map ourselves to root of the new namespace: the holder configures routes and mounts,
    // and bwrap, entering later, maps the sandbox user back to the caller's uid.
    let maps = write_proc("/proc/self/setgroups", "deny")
        .and_then(|_| write_proc("/proc/self/uid_map", &format!("0 {} 1", a.uid)))
        .and_then(|_| write_proc("/proc/self/gid_map", &format!("0 {} 1", a.gid)));
    if let Err(e) = maps {
        return fail(e);
    }
    if let Some(StageSpec { dir, list, view }) = &a.stage {
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
    let Some(pasta) = pasta else {
        // Hold the namespaces until the launcher closes our stdin (or dies).
        let mut rest = String::new();
        while stdin.lock().read_line(&mut rest).unwrap_or(0) > 0 {
            rest.clear();
        }
        return 0;
    };
    let mut line = String::new();
    // Prefixes the watcher reports before "go" are blocked together with the snapshot.
    let mut block = a.block;
    loop {
        line.clear();
        if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
            return 1;
        }
        match line.trim() {
            GO => break,
            l => match l.strip_prefix("block ").map(str::parse::<Prefix>) {
                Some(Ok(p)) => block.push(p),
                _ => return 1,
            },
        }
    }
    if let Err(e) = pasta.start() {
        let _ = writeln!(out, "{PASTA_FAILED}{e}");
        return 1;
    }
    // Straight through rtnetlink, all in one message: `ip -batch` cost ~2 ms (bench/run).
    let block = merge_prefixes(block);
    if let Err(msg) = super::rtnl::add_unreachable_routes(&block, false) {
        let _ = writeln!(out, "{msg}");
        return 1;
    }
    // Fail closed: the routes alone are walked past by packets with a chosen interface
    // (see `nft`); without the filter the host is not cut off.
    if let Err(msg) = super::nft::drop_to(&block, true) {
        let _ = writeln!(out, "{msg}");
        return 1;
    }
    let _ = writeln!(out, "{OK}");
    let _ = out.flush();
    // Hold the namespace until the launcher closes our stdin (or dies); pasta ends with us.
    // Meanwhile the launcher reports prefixes the host gains (`block PREFIX`): cut them off too.
    let mut rest = String::new();
    while stdin.lock().read_line(&mut rest).unwrap_or(0) > 0 {
        if let Some(p) = rest
            .trim()
            .strip_prefix("block ")
            .and_then(|p| p.parse::<Prefix>().ok())
        {
            // Already blocked is fine. A failure cannot be reported to anyone from here; the
            // prefix simply stays as unreachable as the launch found it.
            let _ = super::rtnl::add_unreachable_routes(&[p], true);
            let _ = super::nft::drop_to(&[p], false);
        }
        rest.clear();
    }
    0
}

/// `agent-sandbox __enter PID NAMESPACES -- PROGRAM ARGS…` — join the holder PID's
/// namespaces named in `NAMESPACES` (`user,mnt,net`, user first), then exec. Each must differ
/// from ours: the holder made it, and joining our own would run bwrap less confined than
/// planned without a word.
pub fn enter_main(args: &[OsString]) -> i32 {
    let EnterArgs {
        holder_pid: pid,
        namespaces,
        command: rest,
    } = match EnterArgs::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("agent-sandbox: error: {e}");
            return 125;
        }
    };
    // Joining a mount namespace moves the working directory to its root: come back after.
    let cwd = std::env::current_dir().ok();
    for ns in namespaces {
        let flag = match ns {
            Namespace::User => CloneFlags::CLONE_NEWUSER,
            Namespace::Mnt => CloneFlags::CLONE_NEWNS,
            Namespace::Net => CloneFlags::CLONE_NEWNET,
        };
        let ns = ns.name();
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

    /// The prefix and the program appended to it make the line `__enter` reads back.
    #[test]
    fn enter_prefix_and_a_program_parse_back() {
        let opts = HolderOptions {
            net: true,
            dns_forward: None,
            stage: None,
            writable: &[],
        };
        let mut line = enter_prefix(Path::new("/x/agent-sandbox-init"), 42, &opts);
        line.extend(["/usr/bin/bwrap".into(), "--die-with-parent".into()]);
        assert_eq!(line[1], entry::ENTER);
        assert_eq!(
            EnterArgs::parse(&line[2..]).unwrap(),
            EnterArgs {
                holder_pid: 42,
                namespaces: vec![Namespace::User, Namespace::Net],
                command: vec!["/usr/bin/bwrap".into(), "--die-with-parent".into()],
            }
        );
    }

    #[test]
    fn pasta_argv_exact() {
        let a = pasta_args(42, false, Path::new("/s/pasta.log"), 7, None);
        let s: Vec<&str> = a.iter().map(|x| x.to_str().unwrap()).collect();
        assert_eq!(
            s,
            [
                "--config-net",
                "--quiet",
                "--foreground",
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
                "/proc/self/fd/7",
                "--userns",
                "/proc/42/ns/user",
                "--netns",
                "/proc/42/ns/net"
            ]
        );
        let r = pasta_args(42, true, Path::new("/l"), 3, Some("169.254.1.53"));
        let d = r.iter().position(|x| x == "--dns-forward").unwrap();
        assert_eq!(r[d + 1], "169.254.1.53");
        let i = r.iter().position(|x| x == "--runas").unwrap();
        assert_eq!(r[i + 1], "0:0");
    }

    #[test]
    fn holder_failures_name_pasta_or_the_step_that_failed() {
        match holder_error(
            "pasta: Failed to open tun socket in namespace",
            NetnsError::Routes,
        ) {
            NetnsError::Pasta(m) => {
                assert!(m.starts_with("Failed to open tun socket"), "{m}");
                assert!(m.contains("sudo chmod 666 /dev/net/tun"), "{m}");
            }
            e => panic!("{e}"),
        }
        match holder_error(
            "route add unreachable 192.0.2.0/24: File exists",
            NetnsError::Routes,
        ) {
            NetnsError::Routes(m) => {
                assert_eq!(m, "route add unreachable 192.0.2.0/24: File exists")
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn merged_prefixes_are_sorted_and_unique() {
        let p = |s: &str| s.parse::<Prefix>().unwrap();
        let got = merge_prefixes([p("198.51.100.1"), p("192.0.2.0/24"), p("198.51.100.1/32")]);
        assert_eq!(got, [p("192.0.2.0/24"), p("198.51.100.1")]);
    }

    /// The launch path reads the local table as whatever user runs it (the suite runs this as
    /// root and as an unprivileged user); the host's interface addresses are in it too.
    #[test]
    fn host_prefixes_hold_the_interface_addresses_and_no_loopback() {
        let all = host_prefixes().unwrap();
        assert!(all.iter().all(|p| !p.addr().is_loopback()), "{all:?}");
        for a in host_addresses() {
            assert!(
                all.iter().any(|p| p.contains(a)),
                "{a} missing from {all:?}"
            );
        }
    }

    #[test]
    fn host_addresses_exclude_loopback() {
        assert!(host_addresses().iter().all(|a| !a.is_loopback()));
    }
}
