//! The macOS launch: the Seatbelt profile through /usr/bin/sandbox-exec. Compiled on every OS
//! (so it is type-checked everywhere) and called only on macOS; the darwin checks run it for
//! real.

use std::path::PathBuf;

use anyhow::{Context, bail};

use super::{Launch, prepare, prompts};
use crate::plan::Network;
use crate::session;

/// macOS: the Seatbelt profile through /usr/bin/sandbox-exec. Compiled on every OS (so it is
/// type-checked everywhere) and called only on macOS; the darwin checks run it for real.
pub fn launch(l: &Launch<'_>) -> anyhow::Result<i32> {
    use crate::macos;
    use nix::sys::signal::{SigHandler, SigSet, Signal, kill, signal};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    prompts::confirm(l.pending, &l.plan.cwd)?;
    let plan = l.plan;
    let dir = prepare::session_dir(plan, l.base, l.name)?;
    session::rotate(l.base, session::KEEP_SESSIONS, l.name);
    let proxy = match &plan.network {
        Network::Filtered(rules) => Some(prepare::start_proxy(plan, rules, &dir, l.quiet_denials)?),
        _ => {
            if plan.has_session_bundle() {
                prepare::write_trust(plan, &dir, None)?;
            }
            None
        }
    };
    let ttys: Vec<PathBuf> = (0..3)
        .filter_map(|fd| {
            // SAFETY: 0..3 are the standard descriptors, valid for the process's lifetime.
            nix::unistd::ttyname(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).ok()
        })
        .collect();
    // There is no bridge on macOS: the sandbox talks to the proxy on the host's loopback, so
    // the profile and the proxy variables name the port it really listens on.
    let opts = macos::SeatbeltOptions {
        proxy_port: proxy.as_ref().map(|p| p.addr.port()),
        ..macos::SeatbeltOptions::in_session_dir(&dir, ttys)
    };
    let sp = macos::plan_seatbelt(plan, &opts);
    session::write_file(
        &dir,
        session::LAUNCH_LOG,
        macos::render_with(plan, &opts).as_bytes(),
    )?;
    macos::prepare(&sp)?;
    prepare::print_warnings(plan);
    prepare::announce(&dir, l.quiet);

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
    let (spec, mut sentinel) = prepare::start_sentinel(plan, &dir)?;
    let mut child = cmd.spawn().context("cannot run /usr/bin/sandbox-exec")?;
    sentinel.sandbox_started(child.id());
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    std::thread::spawn(move || {
        while let Ok(sig) = forwarded.wait() {
            let _ = kill(pid, sig);
        }
    });
    let status = child.wait().context("lost track of sandbox-exec")?;
    let denials = proxy.map(|p| p.shutdown().render());
    if let Some(summary) = denials.as_deref().filter(|s| !s.is_empty()) {
        eprint!("{summary}");
    }
    eprint!("{}", crate::quarantine::sweep(&spec).render());
    sentinel.finish();
    let _ = std::fs::remove_dir_all(dir.join("home"));
    let _ = std::fs::remove_dir_all(dir.join("tmp"));
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => crate::cli::EXIT_SETUP,
    };
    prepare::record_ending(l, &dir, code, false, denials);
    Ok(code)
}
