//! The Linux launch: a [`LinuxRun`] of the plan lowered to a bubblewrap argv, run under the
//! launcher's supervision with the namespace holder (open mode, staged closures), the proxy
//! and the bridges (filtered mode, host ports), the sentinel and the exit sweep.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::{Launch, prepare, prompts};
use crate::linux::bwrap::LinuxRun;
use crate::plan::{self, Network, Plan};
use crate::{report, session};

/// The Linux sequence: bubblewrap located, the run decided (identity files, staging, process
/// group), the argv checked; a dry run prints it; otherwise the questions, the session
/// directory, binds by descriptor, and the supervised sandbox.
pub fn launch(l: &Launch<'_>) -> anyhow::Result<i32> {
    let plan = l.plan;
    let bwrap = crate::tools::locate(&crate::tools::BWRAP, &plan.writable_sources())?;
    let mut run = LinuxRun::new(
        plan,
        l.base,
        l.session_dir,
        &l.session_dir.join(STAGED_VIEW_DIR),
        !foreground_of_a_terminal(),
    );
    let argv = crate::linux::bwrap::argv(plan, &run);
    // bubblewrap refuses more than 9000 arguments with a message that reads like a namespace
    // problem; say what it really is. (It also slows down with the square of the mounts.)
    if argv.len() > BWRAP_MAX_ARGS {
        bail!(
            "the sandbox needs {} bubblewrap arguments ({} mounts), more than bubblewrap accepts ({BWRAP_MAX_ARGS}). Fix: expose fewer paths (closure paths are bound one by one unless at least 24 of them share a directory, such as /nix/store; with Nix, allowNix exposes the whole store in one mount)",
            argv.len(),
            run.mounts.len()
        );
    }
    if l.dry_run {
        // Opened as a launch would (O_PATH, nothing created), to show the argv it would run.
        let _held = bind_by_fd(plan, &mut run, true)?;
        let argv = crate::linux::bwrap::argv(plan, &run);
        if l.json {
            print!(
                "{}",
                report::json(
                    plan,
                    &run.mounts,
                    run.staging.as_ref(),
                    &bwrap.to_string_lossy(),
                    &argv
                )
            );
            return Ok(0);
        }
        print!(
            "{}",
            report::render(
                plan,
                &run.mounts,
                &bwrap.to_string_lossy(),
                &argv,
                report::Audience::Terminal
            )
        );
        if let Some(st) = &run.staging {
            println!("{}", staging_note(st));
        }
        return Ok(0);
    }

    prompts::confirm(l.pending, &plan.cwd)?;
    if l.allow_nix {
        prompts::confirm_nix_trust()?;
    }

    let dir = prepare::session_dir(plan, l.base, l.name)?;
    if let Some(identity) = &run.identity {
        session::ensure_identity(identity, &plan.session_files)?;
    }
    // Last, right before bwrap starts: the descriptors pin what the planner checked.
    let held = bind_by_fd(plan, &mut run, false)?;
    let argv = crate::linux::bwrap::argv(plan, &run);
    prepare::print_warnings(plan);
    prepare::announce(&dir, l.quiet);
    // The logs and the rotation of old sessions are written while bwrap sets the sandbox up:
    // nothing inside reads them, and they would otherwise add to every start.
    let mut after_spawn = |_bwrap: u32| {
        if let Err(e) = write_launch_logs(&dir, plan, &run, &bwrap, &argv) {
            eprintln!(
                "agent-sandbox: warning: {}",
                crate::report::terminal_safe(&crate::cli::one_line(&e))
            );
        }
        session::rotate(l.base, session::KEEP_SESSIONS, l.name);
    };
    supervised(
        l,
        run.staging.as_ref(),
        &dir,
        &bwrap,
        &argv,
        &held,
        &mut after_spawn,
    )
}

/// bubblewrap's own limit on its argument count (MAX_ARGS in bubblewrap.c).
const BWRAP_MAX_ARGS: usize = 9000;

/// In the session directory: where the holder builds the staged closure's view of the store
/// (see `plan::Staging::view`).
const STAGED_VIEW_DIR: &str = "store-view";

/// Linux: binds the plan's held sources by descriptor ([`crate::linux::pathfd`]).
#[cfg(target_os = "linux")]
fn bind_by_fd(plan: &Plan, run: &mut LinuxRun, missing_ok: bool) -> anyhow::Result<Vec<OwnedFd>> {
    Ok(crate::linux::pathfd::bind_by_fd(plan, run, missing_ok)?)
}

#[cfg(not(target_os = "linux"))]
fn bind_by_fd(
    _plan: &Plan,
    _run: &mut LinuxRun,
    _missing_ok: bool,
) -> anyhow::Result<Vec<OwnedFd>> {
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

/// `argv.json` (the exact bwrap argv, secrets masked) and `launch.log` (the plan as
/// `--dry-run` prints it) in the session directory.
fn write_launch_logs(
    dir: &Path,
    plan: &Plan,
    run: &LinuxRun,
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
    let mut log = report::render(
        plan,
        &run.mounts,
        &bwrap.to_string_lossy(),
        argv,
        report::Audience::Log,
    );
    if let Some(st) = &run.staging {
        log.push_str(&staging_note(st));
        log.push('\n');
    }
    session::write_file(dir, session::LAUNCH_LOG, log.as_bytes())?;
    Ok(())
}

/// Namespaces, the proxy, the bridges and the sentinel around bwrap; the exit sweep after.
#[cfg(target_os = "linux")]
fn supervised(
    l: &Launch<'_>,
    staging: Option<&plan::Staging>,
    session_dir: &Path,
    bwrap: &Path,
    argv: &[OsString],
    held: &[OwnedFd],
    after_spawn: &mut dyn FnMut(u32),
) -> anyhow::Result<i32> {
    let plan = l.plan;
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
        Network::Filtered(rules) => Some(prepare::start_proxy(
            plan,
            rules,
            session_dir,
            l.quiet_denials,
        )?),
        _ => {
            if plan.has_session_bundle() {
                prepare::write_trust(plan, session_dir, None)?;
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
    let (spec, mut sentinel) = prepare::start_sentinel(plan, session_dir)?;
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
    let denials = proxy.map(|p| p.shutdown().render());
    if let Some(summary) = denials.as_deref().filter(|s| !s.is_empty()) {
        eprint!("{summary}");
        if !summary.ends_with('\n') {
            eprintln!();
        }
    }
    let mut report = crate::quarantine::sweep(&spec);
    report.findings.splice(0..0, watch.findings());
    eprint!("{}", report.render());
    sentinel.finish();
    let code = match outcome {
        Outcome::Exited(code) => code,
        Outcome::SetupFailed { bwrap_status } => {
            // Probed only now, on failure: the start itself pays nothing for the diagnosis.
            let msg = crate::doctor::setup_failure_message(
                bwrap_status,
                &crate::doctor::Userns::read(),
                &crate::doctor::probe_userns(bwrap),
                bwrap,
            );
            eprintln!("agent-sandbox: error: {msg}");
            crate::cli::EXIT_SETUP
        }
    };
    prepare::record_ending(
        l,
        session_dir,
        code,
        matches!(outcome, Outcome::SetupFailed { .. }),
        denials,
    );
    Ok(code)
}

#[cfg(not(target_os = "linux"))]
fn supervised(
    _l: &Launch<'_>,
    _staging: Option<&plan::Staging>,
    _dir: &Path,
    _bwrap: &Path,
    _argv: &[OsString],
    _held: &[OwnedFd],
    _after_spawn: &mut dyn FnMut(u32),
) -> anyhow::Result<i32> {
    bail!("this build cannot launch sandboxes on this OS yet")
}

/// On the host: one Unix socket per bridge in the session's shared directory (Linux: macOS
/// has no bridges; its sandbox talks to the proxy on the host's loopback).
#[cfg(target_os = "linux")]
fn start_host_bridges(
    plan: &Plan,
    session_dir: &Path,
    proxy: Option<&crate::proxy::RunningProxy>,
) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd;
    if plan.bridges.is_empty() && plan.proxy.is_none() {
        return Ok(());
    }
    let shared = session_dir.join(plan::SESSION_SHARED_DIR);
    // Socket paths are limited to 108 bytes and a session dir under a long $HOME can exceed
    // that: bind through a short /proc/self/fd/N/ path to the directory instead.
    let dir = std::fs::File::open(&shared)
        .with_context(|| format!("cannot open the session directory {}", shared.display()))?;
    let short = |socket: &str| PathBuf::from(format!("/proc/self/fd/{}/{socket}", dir.as_raw_fd()));
    let failed = |socket: &str| {
        format!(
            "cannot create the bridge socket {}",
            shared.join(socket).display()
        )
    };
    if let Some(p) = &plan.proxy {
        // Fail closed: no proxy means no way out, never a direct one.
        let adopter = proxy
            .and_then(|p| p.adopter())
            .context("internal error: a proxy port without a proxy")?;
        // The init passes its listening sockets out; the proxy accepts on them.
        let real = shared.join(&p.socket);
        crate::bridge::receive_listeners(
            &short(&p.socket),
            &real,
            p.inside_port,
            move |listeners| {
                for l in listeners {
                    if let Err(e) = adopter.adopt(l) {
                        // The sandbox is left without this proxy port: it fails closed.
                        eprintln!(
                            "agent-sandbox: warning: the proxy cannot serve the sandbox's port: {e}"
                        );
                    }
                }
            },
        )
        .with_context(|| failed(&p.socket))?;
    }
    for b in &plan.bridges {
        crate::bridge::serve_unix_to_tcp(
            &short(&b.socket),
            std::net::SocketAddr::from(([127, 0, 0, 1], b.host_port)),
        )
        .with_context(|| failed(&b.socket))?;
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
