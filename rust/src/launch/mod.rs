//! Launching a sandbox: [`run`] turns the command line into a plan (spec, flags, the launch
//! directory's questions, the host probe), then the platform's sequence takes over:
//! [`linux`] (bubblewrap, namespaces, the init) or [`macos`] (Seatbelt). What both prepare the
//! same way (session directory, placeholders, the proxy and the CA bundle, the sentinel) is
//! in [`prepare`]; questions on the terminal in [`prompts`].

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};

use crate::cli::RunArgs;
use crate::plan::{self, HostContext, Plan};
use crate::session;
use crate::spec::Spec;

pub mod linux;
pub mod macos;
pub mod prepare;
pub mod prompts;

/// What the platform's launch gets from [`run`].
pub struct Launch<'a> {
    pub plan: &'a Plan,
    /// Questions about declared paths not asked yet (the launch directory's were asked).
    pub pending: &'a [plan::Confirm],
    /// The state directory and this session's name in it.
    pub base: &'a Path,
    pub name: &'a str,
    pub session_dir: &'a Path,
    pub dry_run: bool,
    /// With `dry_run`: as JSON ([`crate::report::json`]).
    pub json: bool,
    pub allow_nix: bool,
    /// No first-denial notices from the proxy (`--quiet-denials`, or `--quiet`).
    pub quiet_denials: bool,
    /// No `agent-sandbox: session DIR` line at start (`--quiet`).
    pub quiet: bool,
    /// When the launch began: the session's duration in its `launch.log`.
    pub started: std::time::Instant,
}

/// `$HOME`, canonical; the state directory's base (see [`session::base_dir`]) is found from it.
pub(crate) fn host_home() -> anyhow::Result<PathBuf> {
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

/// `agent-sandbox run`: the spec and flags, the launch directory's questions, the session
/// directory's name, the host probe and the plan; then the platform's launch.
pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    let started = std::time::Instant::now();
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
    if let Some(w) = crate::flags::inline_secret_warning(&a.flags) {
        eprintln!("agent-sandbox: warning: {w}");
    }
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
        prompts::confirm(asked.reasons(), &cwd)?;
    }

    // The session directory's name: no separators or control characters.
    let out_hint =
        plan::sandbox_name(&spec, &a.command).replace(|c: char| c == '/' || c.is_control(), "_");
    let base = session::base_dir_from_env(&home);
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

    let target = a.target_os.as_deref().unwrap_or(std::env::consts::OS);
    let host = HostContext::probe(crate::host::Settled {
        cwd,
        cwd_link,
        home,
        session_dir: session_dir.clone(),
        spec: &spec,
        target,
    })?;
    if !a.dry_run {
        eprint!("{}", crate::quarantine::at_start(&host.cwd).render());
    }
    let plan = plan::build(&spec, &a.command, &host)?;
    // The declared paths' questions, once the plan has found them.
    let pending: Vec<plan::Confirm> = plan
        .guard
        .reasons()
        .iter()
        .filter(|r| !asked.reasons().contains(r))
        .cloned()
        .collect();

    // A real launch fails with the same words from the sandbox's init; --dry-run says so first.
    if a.dry_run && target == "linux" {
        if let Some(w) = crate::inside::command_warning(&plan) {
            eprintln!("agent-sandbox: warning: {w}");
        }
    }

    let ctx = Launch {
        plan: &plan,
        pending: &pending,
        base: &base,
        name: &name,
        session_dir: &session_dir,
        dry_run: a.dry_run,
        json: a.json,
        allow_nix: spec.allow_nix,
        quiet_denials: a.quiet_denials || a.quiet,
        quiet: a.quiet,
        started,
    };
    if target == "macos" {
        if a.dry_run {
            if a.json {
                let sp = crate::macos::plan_seatbelt(
                    &plan,
                    &crate::macos::SeatbeltOptions::in_session_dir(&plan.session_dir, vec![]),
                );
                let program = sp.argv.first().map(|a| a.to_string_lossy().into_owned());
                let argv = sp.argv.get(1..).unwrap_or_default();
                print!(
                    "{}",
                    crate::report::json(
                        &plan,
                        &plan.bare_mounts(),
                        None,
                        &program.unwrap_or_default(),
                        argv
                    )
                );
            } else {
                print!("{}", crate::macos::render_dry_run(&plan));
            }
            return Ok(0);
        }
        if cfg!(target_os = "macos") {
            return macos::launch(&ctx);
        }
        bail!("--target-os macos can only be inspected here: add --dry-run");
    }
    if target != "linux" || !cfg!(target_os = "linux") {
        bail!("agent-sandbox cannot launch sandboxes on {target} (Linux and macOS are supported)");
    }
    linux::launch(&ctx)
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
