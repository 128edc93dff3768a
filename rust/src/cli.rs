//! Command line: parse, merge flags into the spec, plan, and launch. The edge where errors
//! become exit codes (125: the sandbox could not start; 126/127 come from the init).

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use clap::{Parser, Subcommand};

use crate::entry;
use crate::plan::{self, HostContext, Network, Plan};
use crate::spec::Spec;
use crate::{report, session};

/// bubblewrap's own limit on its argument count (MAX_ARGS in bubblewrap.c).
const BWRAP_MAX_ARGS: usize = 9000;
/// In the session directory: where the holder builds the staged closure's view of the store
/// (see `plan::Staging::view`).
const STAGED_VIEW_DIR: &str = "store-view";
/// The file name of the small init binary (`src/bin/agent-sandbox-init.rs`).
const INIT_BINARY: &str = "agent-sandbox-init";

/// Exit status when the sandbox could not be started.
pub const EXIT_SETUP: i32 = 125;

#[derive(Parser, Debug)]
#[command(
    name = "agent-sandbox",
    version,
    about = "Run a command (an AI coding agent) in a declarative sandbox",
    long_about = "Run a command in a sandbox that sees only the launch directory (read-write), \
the paths you declare, and an empty $HOME. Exit status: the command's own (128+N if killed by \
signal N); 125 if the sandbox could not start, 126 if the command is not executable, 127 if \
it was not found."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run COMMAND in the sandbox.
    Run(Box<RunArgs>),
    /// Print the JSON Schema of the spec file.
    Schema,
}

#[derive(clap::Args, Debug, Default)]
struct RunArgs {
    /// Spec file written by the Nix library (flags below add to it).
    #[arg(long, value_name = "FILE")]
    spec: Option<PathBuf>,
    #[command(flatten)]
    flags: crate::flags::SpecFlags,
    /// Print the resolved plan (mounts, environment, network) and start nothing.
    #[arg(long)]
    dry_run: bool,
    /// Plan for this OS: `macos` with --dry-run shows the Seatbelt profile, its -D parameters
    /// and the sandbox-exec argv a Mac would run (on any OS). Default: this machine's.
    #[arg(long, value_name = "OS", value_parser = ["linux", "macos"])]
    target_os: Option<String>,
    /// The command and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

pub fn main() -> i32 {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Fast path for the internal command lines (`entry`), the in-sandbox init above all: no
    // clap, which would add to every start.
    match args.get(1).and_then(|a| a.to_str()) {
        Some(entry::INIT) => return init_main(&args[2..]),
        #[cfg(target_os = "linux")]
        Some(entry::HOLD) => return crate::linux::netns::hold_main(&args[2..]),
        #[cfg(target_os = "linux")]
        Some(entry::ENTER) => return crate::linux::netns::enter_main(&args[2..]),
        Some(entry::SWEEP) => return crate::quarantine::sentinel_main(&args[2..]),
        _ => {}
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_SETUP } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Command::Run(a) => run(*a),
        Command::Schema => {
            print!("{}", crate::spec::schema_json());
            Ok(0)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("agent-sandbox: error: {}", one_line(&e));
            EXIT_SETUP
        }
    }
}

/// The small `agent-sandbox-init` binary: the helper's entry points that run in processes of
/// their own (PID 1 inside, and in open network mode the namespace holder and the namespace
/// entry before bwrap). The launcher prefers it when it sits next to it: an exec of this small
/// binary costs ~0.4 ms less than one of the full helper.
pub fn small_main(args: &[OsString]) -> i32 {
    #[cfg(target_os = "linux")]
    match args.first().and_then(|a| a.to_str()) {
        Some(entry::HOLD) => return crate::linux::netns::hold_main(&args[1..]),
        Some(entry::ENTER) => return crate::linux::netns::enter_main(&args[1..]),
        _ => {}
    }
    init_main(args)
}

/// The sandbox's PID 1: the arguments after `__init` ([`entry::InitArgs`]).
pub fn init_main(args: &[OsString]) -> i32 {
    let entry::InitArgs {
        own_pgrp,
        pass,
        bridges,
        command,
    } = match entry::InitArgs::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("agent-sandbox: error: {e}");
            return EXIT_SETUP;
        }
    };
    #[cfg(target_os = "linux")]
    crate::linux::init::set_own_process_group(own_pgrp);
    #[cfg(not(target_os = "linux"))]
    let _ = (own_pgrp, &pass);
    init_with(command, move || {
        #[cfg(target_os = "linux")]
        for p in &pass {
            // Fail closed: without its proxy port the sandbox would have no way out at all,
            // which is safe, but the command would fail in confusing ways; stop here instead.
            crate::bridge::pass_listeners(p).map_err(|e| {
                format!(
                    "cannot hand 127.0.0.1:{} inside the sandbox to the proxy over {}: {e}",
                    p.port,
                    p.socket.display()
                )
            })?;
        }
        // Fail closed: a port the sandbox was promised but cannot serve stops the start.
        start_sandbox_bridges(&bridges).map_err(|e| one_line(&e))
    })
}

fn one_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
    }
    s
}

/// Inside the sandbox, before the command starts: bind the loopback bridges.
fn start_sandbox_bridges(bridges: &[entry::BridgeSpec]) -> anyhow::Result<()> {
    if bridges.is_empty() {
        return Ok(());
    }
    // Bridge threads must not take the signals meant for the init's signalfd.
    let all = nix::sys::signal::SigSet::all();
    let old = all.thread_swap_mask(nix::sys::signal::SigmaskHow::SIG_BLOCK)?;
    let r = bridges.iter().try_for_each(|b| {
        crate::bridge::serve_tcp_to_unix(b).with_context(|| {
            format!(
                "cannot listen on 127.0.0.1:{} inside the sandbox for the bridge to {}",
                b.port,
                b.socket.display()
            )
        })
    });
    old.thread_set_mask()?;
    r
}

/// The hardening first (before the bridges start threads), then `setup`, then the init.
#[cfg(target_os = "linux")]
fn init_with(cmd: Vec<OsString>, setup: impl FnOnce() -> Result<(), String>) -> i32 {
    crate::linux::init::harden_and_run(cmd, setup)
}

#[cfg(not(target_os = "linux"))]
fn init_with(_cmd: Vec<OsString>, _setup: impl FnOnce() -> Result<(), String>) -> i32 {
    eprintln!("agent-sandbox: error: __init is only used inside the Linux sandbox");
    EXIT_SETUP
}

fn host_home() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| anyhow!("HOME is not set. Fix: set HOME to your home directory"))?;
    let canon = std::fs::canonicalize(&home).with_context(|| {
        format!(
            "HOME={} does not exist. Fix: set HOME to an existing directory",
            Path::new(&home).display()
        )
    })?;
    if canon == Path::new("/") {
        // Fail closed: an empty tmpfs over / would make no sense, and / as home hides nothing.
        bail!("HOME is /. Fix: set HOME to a real home directory");
    }
    Ok(canon)
}

fn run(a: RunArgs) -> anyhow::Result<i32> {
    // Before any thread exists: forwarded signals must be blocked everywhere (see supervise).
    #[cfg(target_os = "linux")]
    crate::linux::supervise::block_forwarded_signals()?;
    // Read first, before this process opens anything of its own.
    let inherited = inherited_fds();
    let home = host_home()?;
    let cwd_raw = std::env::current_dir()
        .context("cannot read the current directory. Fix: cd into an existing directory")?;
    let cwd = std::fs::canonicalize(&cwd_raw).context("cannot resolve the current directory")?;

    let mut spec = match &a.spec {
        Some(f) => Spec::from_file(f)?,
        None => Spec::new(),
    };
    crate::flags::merge(&mut spec, &a.flags, &cwd, &home, |k| std::env::var(k).ok())?;
    // The spec and --env-file pipes are read: nothing the caller leaked stays open here, so
    // nothing reaches bwrap, pasta or the holder (a directory descriptor would lead out of
    // any mount namespace, a socket to ssh-agent or D-Bus). The init closes them again.
    close_fds(&inherited);
    // The launch directory first: refused, or asked about, before anything is planned,
    // created (the state directory may lie inside it) or repaired in it.
    // workspaceDir stands in for the launch directory everywhere (exposure, git layout, the
    // launch guard, where the command starts).
    let (cwd, cwd_link) = match &spec.workspace_dir {
        Some(w) => crate::guard::resolve_workspace(w, &cwd, &home)?,
        None => {
            let link = std::env::var_os("PWD")
                .and_then(|l| crate::guard::symlinked_launch_dir(Path::new(&l), &cwd, &home));
            (cwd, link)
        }
    };
    let asked = plan::launch_guard(
        &cwd,
        cwd_link.clone(),
        &home,
        nix::unistd::getuid().as_raw(),
    )?;
    if !a.dry_run {
        confirm(asked.reasons(), &cwd)?;
    }

    let out_hint = spec
        .out_name
        .clone()
        .or_else(|| {
            spec.program
                .as_ref()
                .map(PathBuf::from)
                .or_else(|| a.command.first().map(PathBuf::from))
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        })
        .unwrap_or_else(|| "sandbox".into())
        .replace(|c: char| c == '/' || c.is_control(), "_");
    let base = session::base_dir(std::env::var("XDG_STATE_HOME").ok().as_deref(), &home);
    // Canonical, so a symlinked state dir cannot smuggle the session files into a writable
    // bind unnoticed (check_session_dir_hidden compares real paths).
    let base = if a.dry_run {
        // --dry-run creates nothing; the longest existing part is resolved instead.
        session::canonical_lenient(&base)
    } else {
        session::create_base(&base)?
    };
    let name = session::session_name(std::time::SystemTime::now(), std::process::id(), &out_hint);
    let session_dir = base.join(&name);

    let helper_exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot locate the agent-sandbox executable")?;
    let init_exe = init_beside(&helper_exe);
    let target = a.target_os.as_deref().unwrap_or(std::env::consts::OS);
    let host = HostContext {
        cwd,
        cwd_link,
        home,
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        term: std::env::var("TERM").ok(),
        session_dir: session_dir.clone(),
        helper_exe,
        init_exe,
        listening_ports: if spec.allowed_local_ports.is_none() {
            crate::bridge::host_listening_ports()
        } else {
            Vec::new()
        },
        lowest_bridged_port: if target == "macos" { 1 } else { 1024 },
        caller_path: std::env::var_os("PATH").unwrap_or_default(),
    };
    if !a.dry_run {
        eprint!("{}", crate::quarantine::at_start(&host.cwd).render());
    }
    let mut plan = plan::build(&spec, &a.command, &host)?;
    // The declared paths' questions, once the plan has found them.
    let pending: Vec<plan::Confirm> = plan
        .guard
        .reasons()
        .iter()
        .filter(|r| !asked.reasons().contains(r))
        .cloned()
        .collect();

    if target == "macos" {
        if a.dry_run {
            print!("{}", crate::macos::render_dry_run(&plan));
            return Ok(0);
        }
        if cfg!(target_os = "macos") {
            confirm(&pending, &plan.cwd)?;
            return launch_macos(&plan, &base, &name);
        }
        bail!("--target-os macos can only be inspected here: add --dry-run");
    }
    if target != "linux" || !cfg!(target_os = "linux") {
        bail!("agent-sandbox cannot launch sandboxes on {target} (Linux and macOS are supported)");
    }

    let bwrap = crate::tools::locate(&crate::tools::BWRAP, &plan.writable_sources())?;
    let identity = plan::share_identity_files(&mut plan, &base, &session_dir);
    let staging = plan::stage_closure(&mut plan, &session_dir.join(STAGED_VIEW_DIR));
    plan.own_process_group = !foreground_of_a_terminal();
    let argv = crate::linux::bwrap::argv(&plan);
    // bubblewrap refuses more than 9000 arguments with a message that reads like a namespace
    // problem; say what it really is. (It also slows down with the square of the mounts.)
    if argv.len() > BWRAP_MAX_ARGS {
        bail!(
            "the sandbox needs {} bubblewrap arguments ({} mounts), more than bubblewrap accepts ({BWRAP_MAX_ARGS}). Fix: expose fewer paths (closure paths are bound one by one unless at least 24 of them share a directory, such as /nix/store; with Nix, allowNix exposes the whole store in one mount)",
            argv.len(),
            plan.mounts.len()
        );
    }
    if a.dry_run {
        // Opened as a launch would (O_PATH, nothing created), to show the argv it would run.
        let _held = bind_by_fd(&mut plan, true)?;
        let argv = crate::linux::bwrap::argv(&plan);
        print!(
            "{}",
            report::render(
                &plan,
                &bwrap.to_string_lossy(),
                &argv,
                report::Audience::Terminal
            )
        );
        if let Some(st) = &staging {
            println!("{}", staging_note(st));
        }
        return Ok(0);
    }

    confirm(&pending, &plan.cwd)?;
    if spec.allow_nix {
        confirm_nix_trust()?;
    }

    let dir = session::create(&base, &name)?;
    if plan.shares_session_dir() {
        session::create(&dir, plan::SESSION_SHARED_DIR)?;
    }
    session::ensure_identity(&identity, &plan.session_files)?;
    create_placeholders(&plan)?;
    // Last, right before bwrap starts: the descriptors pin what the planner checked.
    let held = bind_by_fd(&mut plan, false)?;
    let argv = crate::linux::bwrap::argv(&plan);
    for w in &plan.warnings {
        eprintln!("agent-sandbox: warning: {w}");
    }
    // The logs and the rotation of old sessions are written while bwrap sets the sandbox up:
    // nothing inside reads them, and they would otherwise add to every start.
    let mut after_spawn = |_bwrap: u32| {
        if let Err(e) = write_launch_logs(&dir, &plan, staging.as_ref(), &bwrap, &argv) {
            eprintln!("agent-sandbox: warning: {}", one_line(&e));
        }
        session::rotate(&base, session::KEEP_SESSIONS, &name);
    };
    launch(
        &plan,
        staging.as_ref(),
        &dir,
        &bwrap,
        &argv,
        &held,
        &mut after_spawn,
    )
}

/// The descriptors above stderr this process has open (at start: all inherited).
fn inherited_fds() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd").or_else(|_| std::fs::read_dir("/dev/fd"))
    else {
        return Vec::new();
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    // The directory's own descriptor was in the listing and is closed by now; any other
    // descriptor reusing its number later is ours, so leave that number out.
    fds.into_iter()
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0)
        .collect()
}

fn close_fds(fds: &[i32]) {
    for &fd in fds {
        // SAFETY: these numbers were open when the process started and this process never
        // wrapped them in an owning type.
        unsafe { libc::close(fd) };
    }
}

/// Linux: binds the plan's held sources by descriptor ([`crate::linux::pathfd`]).
#[cfg(target_os = "linux")]
fn bind_by_fd(plan: &mut Plan, missing_ok: bool) -> anyhow::Result<Vec<OwnedFd>> {
    Ok(crate::linux::pathfd::bind_by_fd(plan, missing_ok)?)
}

#[cfg(not(target_os = "linux"))]
fn bind_by_fd(_plan: &mut Plan, _missing_ok: bool) -> anyhow::Result<Vec<OwnedFd>> {
    Ok(Vec::new())
}

/// The `--dry-run` / launch.log line for a staged closure.
fn staging_note(st: &plan::Staging) -> String {
    format!(
        "closure: {} paths in {} staged by the namespace holder (a tmpfs at {} holding only them, bound there once, read-only)",
        st.names.len(),
        st.dir.display(),
        st.view.display()
    )
}

/// The small init binary installed beside the helper (cargo and Nix install both), if it is
/// there and executable; otherwise the helper itself serves as the init.
fn init_beside(helper_exe: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::fs::canonicalize(helper_exe.parent()?.join(INIT_BINARY)).ok()?;
    let meta = std::fs::metadata(&path).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(path)
}

/// `argv.json` (the exact bwrap argv, secrets masked) and `launch.log` (the plan as
/// `--dry-run` prints it) in the session directory.
fn write_launch_logs(
    dir: &Path,
    plan: &Plan,
    staging: Option<&plan::Staging>,
    bwrap: &Path,
    argv: &[OsString],
) -> anyhow::Result<()> {
    let argv_json = serde_json::to_string_pretty(
        &std::iter::once(bwrap.to_string_lossy().into_owned())
            .chain(
                report::masked_argv(argv)
                    .iter()
                    .map(|x| x.to_string_lossy().into_owned()),
            )
            .collect::<Vec<_>>(),
    )?;
    session::write_file(dir, "argv.json", argv_json.as_bytes())?;
    let mut log = report::render(plan, &bwrap.to_string_lossy(), argv, report::Audience::Log);
    if let Some(st) = staging {
        log.push_str(&staging_note(st));
        log.push('\n');
    }
    session::write_file(dir, "launch.log", log.as_bytes())?;
    Ok(())
}

#[cfg(target_os = "linux")]
fn launch(
    plan: &Plan,
    staging: Option<&plan::Staging>,
    session_dir: &Path,
    bwrap: &Path,
    argv: &[OsString],
    held: &[OwnedFd],
    after_spawn: &mut dyn FnMut(u32),
) -> anyhow::Result<i32> {
    use crate::linux::netns;
    use crate::linux::supervise::{Outcome, supervise};
    use std::os::fd::AsFd;
    // Open mode: the sandbox gets its own network namespace with user-mode networking and
    // the host cut off; the holder keeps that namespace alive until we return.
    // A large closure is staged in the holder's mount namespace, in any network mode.
    let open = plan.network == Network::Open;
    let writable = plan.writable_sources();
    let holder = if open || staging.is_some() {
        // The holder and the namespace entry: the init's binary (the small one when installed).
        let exe = &plan.entry_exe;
        let opts = netns::HolderOptions {
            net: open,
            dns_forward: plan.dns_forward.as_deref(),
            stage: staging,
            writable: &writable,
        };
        Some((netns::setup(exe, session_dir, &opts)?, exe, opts))
    } else {
        None
    };
    // Filtered mode: the per-session proxy, reachable only through its bridge.
    let proxy = match &plan.network {
        Network::Filtered(rules) => Some(start_proxy(plan, rules, session_dir)?),
        _ => {
            if plan.has_session_bundle() {
                write_trust(plan, session_dir, None)?;
            }
            None
        }
    };
    start_host_bridges(plan, session_dir, proxy.as_ref())?;
    let prefix = holder
        .as_ref()
        .map(|(h, exe, opts)| netns::enter_prefix(exe, h.pid(), opts))
        .unwrap_or_default();
    let inherit: Vec<_> = held.iter().map(|fd| fd.as_fd()).collect();
    let (spec, mut sentinel) = start_sentinel(plan, session_dir)?;
    // Fail closed: a repository whose git dirs cannot be watched is not started.
    let rw_binds: Vec<PathBuf> = plan.rw_bind_sources().map(Path::to_path_buf).collect();
    let watch = crate::quarantine::Watch::start(&rw_binds)
        .context("cannot watch the repository's git directories (inotify)")?;
    let mut spawned = |bwrap: u32| {
        sentinel.sandbox_started(bwrap);
        after_spawn(bwrap);
    };
    let outcome = supervise(
        &prefix,
        bwrap,
        argv,
        &inherit,
        Some(&plan.env),
        &mut spawned,
    )?;
    drop(holder);
    if let Some(p) = proxy {
        let summary = p.shutdown().render();
        if !summary.is_empty() {
            eprint!("{summary}");
            if !summary.ends_with('\n') {
                eprintln!();
            }
        }
    }
    let mut report = crate::quarantine::sweep(&spec);
    report.findings.splice(0..0, watch.findings());
    eprint!("{}", report.render());
    sentinel.finish();
    match outcome {
        Outcome::Exited(code) => Ok(code),
        Outcome::SetupFailed { bwrap_status } => {
            eprintln!(
                "agent-sandbox: error: bubblewrap could not set up the sandbox (status {bwrap_status}; its message is above). If it says \"Race condition binding dirfd\", a path it was binding was swapped while the sandbox started (refused: launch again). If it mentions namespaces, uid maps or permissions, unprivileged user namespaces are unavailable: on Ubuntu 24.04+ run `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0` (or install an AppArmor profile for bwrap); elsewhere check `sysctl user.max_user_namespaces`"
            );
            Ok(EXIT_SETUP)
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn launch(
    _plan: &Plan,
    _staging: Option<&plan::Staging>,
    _dir: &Path,
    _bwrap: &Path,
    _argv: &[OsString],
    _held: &[OwnedFd],
    _after_spawn: &mut dyn FnMut(u32),
) -> anyhow::Result<i32> {
    bail!("this build cannot launch sandboxes on this OS yet")
}

/// The exit sweep's spec (the session starts now) and its sentinel, which sweeps if this
/// process dies before it does (see `quarantine`).
fn start_sentinel(
    plan: &Plan,
    session_dir: &Path,
) -> anyhow::Result<(crate::quarantine::SweepSpec, crate::quarantine::Sentinel)> {
    let exe = std::env::current_exe().context("cannot locate the agent-sandbox executable")?;
    // Fail closed: without the sentinel a killed launcher would leave the agent's git
    // redirections and hooks for host git to obey.
    crate::quarantine::Sentinel::start(&exe, session_dir, plan.writable_sources(), plan.binds())
        .context("cannot start the exit sweep's sentinel process")
}

/// macOS: the Seatbelt profile through /usr/bin/sandbox-exec. Compiled on every OS (so it is
/// type-checked everywhere) and called only on macOS; the darwin checks run it for real.
fn launch_macos(plan: &Plan, base: &Path, name: &str) -> anyhow::Result<i32> {
    use crate::macos;
    use crate::plan::BridgeTo;
    use nix::sys::signal::{SigHandler, SigSet, Signal, kill, signal};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let dir = session::create(base, name)?;
    session::rotate(base, session::KEEP_SESSIONS, name);
    if plan.shares_session_dir() {
        session::create(&dir, plan::SESSION_SHARED_DIR)?;
    }
    create_placeholders(plan)?;
    // There is no bridge on macOS: the sandbox talks to the proxy on the host's loopback, so
    // the profile and the proxy variables must name the port it really listens on.
    let mut plan = plan.clone();
    let proxy = match &plan.network {
        Network::Filtered(rules) => Some(start_proxy(&plan, rules, &dir)?),
        _ => {
            if plan.has_session_bundle() {
                write_trust(&plan, &dir, None)?;
            }
            None
        }
    };
    if let Some(p) = &proxy {
        let port = p.addr.port();
        for b in plan.bridges.iter_mut().filter(|b| b.to == BridgeTo::Proxy) {
            b.inside_port = port;
        }
        let url = format!("http://127.0.0.1:{port}");
        for &var in plan::PROXY_VARS {
            if let Some(v) = plan.env.get_mut(var) {
                *v = url.clone();
            }
        }
    }
    let ttys: Vec<PathBuf> = (0..3)
        .filter_map(|fd| {
            // SAFETY: 0..3 are the standard descriptors, valid for the process's lifetime.
            nix::unistd::ttyname(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).ok()
        })
        .collect();
    let sp = macos::plan_seatbelt(&plan, &macos::SeatbeltOptions::in_session_dir(&dir, ttys));
    session::write_file(&dir, "launch.log", macos::render_dry_run(&plan).as_bytes())?;
    macos::prepare(&sp)?;
    for w in &plan.warnings {
        eprintln!("agent-sandbox: warning: {w}");
    }

    // Terminal signals (Ctrl-C, Ctrl-\) reach the command directly (same process group), so
    // the launcher ignores them; signals sent to the launcher itself are passed on.
    let forwarded = SigSet::from_iter([
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ]);
    forwarded.thread_block()?;
    // SAFETY: installing SIG_IGN has no handler code to race with.
    unsafe {
        signal(Signal::SIGINT, SigHandler::SigIgn)?;
        signal(Signal::SIGQUIT, SigHandler::SigIgn)?;
    }
    // Fail closed before the real run: a profile sandbox-exec rejects must stop the start with
    // its message, and afterwards every exit status is the command's own.
    let sep = sp
        .argv
        .iter()
        .position(|a| a == "--")
        .unwrap_or(sp.argv.len());
    let probe = std::process::Command::new(&sp.argv[0])
        .args(&sp.argv[1..sep])
        .args(["--", "/usr/bin/true"])
        .env_clear()
        .envs(&sp.env)
        .current_dir(&sp.cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot run /usr/bin/sandbox-exec")?;
    if !probe.status.success() {
        bail!(
            "sandbox-exec rejected the profile ({}): {}. The sandbox was not started; please report this with the launch.log in {}",
            probe.status,
            String::from_utf8_lossy(&probe.stderr).trim(),
            dir.display()
        );
    }
    let mut cmd = macos::command(&sp);
    // SAFETY: only async-signal-safe calls (sigprocmask, signal) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            SigSet::all().thread_unblock()?;
            signal(Signal::SIGINT, SigHandler::SigDfl)?;
            signal(Signal::SIGQUIT, SigHandler::SigDfl)?;
            Ok(())
        });
    }
    let (spec, mut sentinel) = start_sentinel(&plan, &dir)?;
    let mut child = cmd.spawn().context("cannot run /usr/bin/sandbox-exec")?;
    sentinel.sandbox_started(child.id());
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    std::thread::spawn(move || {
        while let Ok(sig) = forwarded.wait() {
            let _ = kill(pid, sig);
        }
    });
    let status = child.wait().context("lost track of sandbox-exec")?;
    if let Some(p) = proxy {
        let summary = p.shutdown().render();
        if !summary.is_empty() {
            eprint!("{summary}");
        }
    }
    eprint!("{}", crate::quarantine::sweep(&spec).render());
    sentinel.finish();
    let _ = std::fs::remove_dir_all(dir.join("home"));
    let _ = std::fs::remove_dir_all(dir.join("tmp"));
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => EXIT_SETUP,
    })
}

/// Start the session's proxy and write the CA files the sandbox trusts.
fn start_proxy(
    plan: &Plan,
    rules: &std::collections::BTreeMap<String, Option<Vec<String>>>,
    session_dir: &Path,
) -> anyhow::Result<crate::proxy::RunningProxy> {
    let proxy = crate::proxy::start(crate::proxy::ProxyConfig {
        rules: rules.clone(),
        upstream_ca_files: plan.upstream_ca_files.clone(),
        allowed_local_ports: plan.allowed_local_ports.clone(),
        log_path: Some(session_dir.join("proxy.log")),
        ..Default::default()
    })
    .context("cannot start the filtering proxy")?;
    write_trust(plan, session_dir, Some(&proxy.ca_pem))?;
    Ok(proxy)
}

/// Write the session's trust files (see [`plan::SESSION_CA_BUNDLE`]): the roots the sandbox
/// would trust anyway, the upstream CAs the user named, and the proxy's CA when there is one.
fn write_trust(plan: &Plan, session_dir: &Path, proxy_ca: Option<&str>) -> anyhow::Result<()> {
    let mut extra = String::new();
    for f in &plan.upstream_ca_files {
        let pem = crate::proxy::read_ca_file(f)
            .with_context(|| format!("cannot read the upstream CA file {}", f.display()))?;
        let pem = String::from_utf8_lossy(&pem);
        // Only the certificates go inside: a PEM file may hold the CA's private key as well.
        let certs = pem_certificates(&pem);
        // Fail closed: a CA the sandbox was told to trust but cannot is not silently dropped.
        if certs.is_empty() {
            bail!(
                "the upstream CA file {} holds no PEM certificate (no \"-----BEGIN CERTIFICATE-----\" line). Fix: give the CA certificate in PEM form (openssl x509 -in ca.der -inform der -out ca.pem)",
                f.display()
            );
        }
        push_pem(&mut extra, &certs);
    }
    if let Some(ca) = proxy_ca {
        push_pem(&mut extra, ca);
    }
    let mut bundle = match &plan.ca_bundle_source {
        Some(src) => std::fs::read_to_string(src).with_context(|| {
            format!(
                "cannot read the CA bundle {} to add the session's CAs to it. Fix: point SSL_CERT_FILE at a readable PEM bundle",
                src.display()
            )
        })?,
        None => String::new(),
    };
    push_pem(&mut bundle, &extra);
    let shared = session_dir.join(plan::SESSION_SHARED_DIR);
    // SSL_CERT_FILE replaces the default store: system roots plus our CAs in one file.
    session::write_file(&shared, plan::SESSION_CA_BUNDLE, bundle.as_bytes())?;
    // NODE_EXTRA_CA_CERTS adds to Node's roots: the CAs alone.
    session::write_file(&shared, plan::SESSION_EXTRA_CAS, extra.as_bytes())?;
    Ok(())
}

/// The `CERTIFICATE` blocks of a PEM text, each on lines of its own; nothing else (keys,
/// comments) is kept. A block is kept only when every line between its `BEGIN` and `END`
/// lines is base64: one whose `END` line is missing must not carry along the key after it.
fn pem_certificates(pem: &str) -> String {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let base64 = |l: &str| {
        l.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    };
    let mut out = String::new();
    let mut block: Option<String> = None;
    for line in pem.lines() {
        let line = line.trim_end_matches('\r');
        if line == BEGIN {
            block = Some(format!("{BEGIN}\n"));
        } else if let Some(b) = block.as_mut() {
            if line == END {
                out.push_str(b);
                out.push_str(END);
                out.push('\n');
                block = None;
            } else if base64(line) {
                b.push_str(line);
                b.push('\n');
            } else {
                // Fail closed: not a certificate's body; the block is dropped whole.
                block = None;
            }
        }
    }
    out
}

/// Append one PEM text to another, on a line of its own.
fn push_pem(to: &mut String, pem: &str) {
    if !to.is_empty() && !to.ends_with('\n') {
        to.push('\n');
    }
    to.push_str(pem);
}

/// On the host: one Unix socket per bridge in the session's shared directory (Linux: macOS
/// has no bridges; its sandbox talks to the proxy on the host's loopback).
#[cfg(target_os = "linux")]
fn start_host_bridges(
    plan: &Plan,
    session_dir: &Path,
    proxy: Option<&crate::proxy::RunningProxy>,
) -> anyhow::Result<()> {
    use crate::plan::BridgeTo;
    use std::os::fd::AsRawFd;
    if plan.bridges.is_empty() {
        return Ok(());
    }
    let shared = session_dir.join(plan::SESSION_SHARED_DIR);
    // Socket paths are limited to 108 bytes and a session dir under a long $HOME can exceed
    // that: bind through a short /proc/self/fd/N/ path to the directory instead.
    let dir = std::fs::File::open(&shared)
        .with_context(|| format!("cannot open the session directory {}", shared.display()))?;
    for b in &plan.bridges {
        let path = PathBuf::from(format!("/proc/self/fd/{}/{}", dir.as_raw_fd(), b.socket));
        let served = match b.to {
            BridgeTo::HostPort(p) => crate::bridge::serve_unix_to_tcp(
                &path,
                std::net::SocketAddr::from(([127, 0, 0, 1], p)),
            ),
            BridgeTo::Proxy => {
                // Fail closed: no proxy means no way out, never a direct one.
                let adopter = proxy
                    .and_then(|p| p.adopter())
                    .context("internal error: proxy bridge without a proxy")?;
                // The init passes its listening sockets out; the proxy accepts on them.
                let real = shared.join(&b.socket);
                crate::bridge::receive_listeners(&path, &real, b.inside_port, move |listeners| {
                    for l in listeners {
                        if let Err(e) = adopter.adopt(l) {
                            // The sandbox is left without this proxy port: it fails closed.
                            eprintln!(
                                "agent-sandbox: warning: the proxy cannot serve the sandbox's port: {e}"
                            );
                        }
                    }
                })
            }
        };
        served.with_context(|| {
            format!(
                "cannot create the bridge socket {}",
                shared.join(&b.socket).display()
            )
        })?;
    }
    Ok(())
}

/// Whether we are the foreground job of our controlling terminal (an interactive launch).
fn foreground_of_a_terminal() -> bool {
    use std::os::fd::AsFd;
    let Ok(tty) = std::fs::File::open("/dev/tty") else {
        return false;
    };
    nix::unistd::tcgetpgrp(tty.as_fd()).is_ok_and(|pg| pg == nix::unistd::getpgrp())
}

fn create_placeholders(plan: &Plan) -> anyhow::Result<()> {
    use crate::git::PlaceholderKind;
    for (p, kind) in &plan.placeholders {
        let r = match kind {
            PlaceholderKind::Dir => std::fs::create_dir_all(p),
            PlaceholderKind::File => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map(|_| ()),
        };
        r.with_context(|| {
            format!(
                "cannot create the protected git placeholder {} (it keeps the agent from planting it)",
                p.display()
            )
        })?;
    }
    Ok(())
}

/// A user the Nix daemon trusts can make it run code as root: granting that to the agent
/// takes a yes on the terminal.
fn confirm_nix_trust() -> anyhow::Result<()> {
    use crate::nixstore;
    let uid = nix::unistd::getuid();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string());
    let groups: Vec<String> = nix::unistd::getgroups()
        .unwrap_or_default()
        .into_iter()
        .chain([nix::unistd::getgid()])
        .filter_map(|g| nix::unistd::Group::from_gid(g).ok().flatten())
        .map(|g| g.name)
        .collect();
    let list = nixstore::trusted_users(&nixstore::read_config());
    if !nixstore::is_trusted(&list, &user, &groups) {
        return Ok(());
    }
    ask_on_tty(
        &format!(
            "agent-sandbox: allowNix: you ({user}) are a trusted user of the Nix daemon (trusted-users = {}), so the sandboxed agent could make the daemon run code as root. continue? [y/N] ",
            list.join(" ")
        ),
        || {
            anyhow!(
                "refusing allowNix without confirmation: {user} is a trusted user of the Nix daemon (trusted-users = {}), which lets the agent run code as root through it. Fix: remove {user} from trusted-users in nix.conf, run from a terminal and answer y, or drop allowNix / --allow-nix",
                list.join(" ")
            )
        },
    )
}

/// The launch directory's and the declared paths' confirmations (see `guard`), each asked on
/// the terminal: launching from $HOME exposes all of it read-write.
fn confirm(reasons: &[plan::Confirm], cwd: &Path) -> anyhow::Result<()> {
    for reason in reasons {
        ask_on_tty(&reason.question(cwd), || anyhow!("{}", reason.refusal(cwd)))?;
    }
    Ok(())
}

/// Ask a yes/no question on /dev/tty (never stdin, which may be a pipe the agent controls);
/// anything but yes, or no terminal at all, is a refusal.
fn ask_on_tty(question: &str, refuse: impl Fn() -> anyhow::Error) -> anyhow::Result<()> {
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return Err(refuse());
    };
    let mut w = &tty;
    let _ = write!(w, "{question}");
    let _ = w.flush();
    let mut line = String::new();
    std::io::BufReader::new(&tty)
        .read_line(&mut line)
        .map_err(|_| refuse())?;
    if matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        Ok(())
    } else {
        Err(refuse())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nTUlJQ2Zh\na2U=\n-----END CERTIFICATE-----\n";

    #[test]
    fn only_whole_certificate_blocks_are_kept() {
        let key = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n";
        assert_eq!(pem_certificates(&format!("{key}subject=x\r\n{CERT}")), CERT);
        assert_eq!(pem_certificates(&CERT.replace('\n', "\r\n")), CERT);
        // Review 4: a block without its END line took along the key that followed, up to the
        // next certificate's END line.
        let torn = "-----BEGIN CERTIFICATE-----\nTUlJ\n";
        assert_eq!(pem_certificates(&format!("{torn}{key}{CERT}")), CERT);
        assert_eq!(pem_certificates(torn), "");
        let not_base64 = "-----BEGIN CERTIFICATE-----\nAWS_SECRET=abc\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_certificates(not_base64), "");
    }

    #[test]
    fn a_ca_file_that_is_no_regular_file_is_refused_without_waiting() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("ca.pem");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = crate::proxy::read_ca_file(&fifo).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let e = crate::proxy::read_ca_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let big = tmp.path().join("big.pem");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len((16 << 20) + 1).unwrap();
        let e = crate::proxy::read_ca_file(&big).unwrap_err();
        assert!(e.to_string().contains("too large for a CA file"), "{e}");
        std::fs::write(&big, CERT).unwrap();
        assert_eq!(crate::proxy::read_ca_file(&big).unwrap(), CERT.as_bytes());
    }
}
