//! Command line: clap types and dispatch (`run` goes to [`crate::launch`]), and the PID-1
//! entry points. The edge where errors become exit codes (125: the sandbox could not start;
//! 126/127 come from the init).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::entry;

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
    /// Run COMMAND in the sandbox (network by default: the internet, but not this host).
    ///
    /// The sandbox sees the launch directory (read-write), the paths given with --rw/--ro and
    /// an empty $HOME. Network: by default the open internet, without this host's own
    /// addresses (services listening on its loopback or LAN addresses are out of reach);
    /// --allow-domain filters it to the domains given, through the helper's HTTPS proxy;
    /// --no-network blocks it. The command and its arguments go after "--".
    #[command(after_help = crate::manual::examples_help())]
    Run(Box<RunArgs>),
    /// Print the JSON Schema of the spec file.
    Schema,
    /// Check this host (bubblewrap, user namespaces, /dev/net/tun, pasta, Landlock, the Nix
    /// daemon) and print each problem with its fix. Exit status 1 if something fails.
    Doctor,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// bash: `agent-sandbox completions bash > ~/.local/share/bash-completion/completions/agent-sandbox`;
    /// zsh: write `_agent-sandbox` into a directory of $fpath; fish:
    /// `~/.config/fish/completions/agent-sandbox.fish`. The Nix package installs them.
    Completions {
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) of agent-sandbox, or of one of its commands.
    ///
    /// `agent-sandbox man run | man -l -` reads it; `--dir DIR` writes agent-sandbox.1 and
    /// agent-sandbox-COMMAND.1 for every command into DIR (what the Nix package installs).
    Man {
        /// The command whose page to print (e.g. `run`); default: the main page.
        #[arg(value_name = "COMMAND")]
        command: Option<String>,
        /// Write every page into DIR instead of printing one.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        dir: Option<PathBuf>,
    },
    /// List the recorded sessions (newest last), show one (its launch.log and the proxy's
    /// denials), or follow the running one's denials with -f.
    Log(crate::sessionlog::LogArgs),
}

/// The clap definition of the command line, for completions and man pages.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[derive(clap::Args, Debug, Default)]
pub struct RunArgs {
    /// Spec file written by the Nix library (flags below add to it).
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    #[command(flatten)]
    pub flags: crate::flags::SpecFlags,
    /// Print the resolved plan (mounts, environment, network) and start nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: print the plan as JSON (mounts with why each is there, the
    /// environment, the exact argv) instead of text.
    #[arg(long, requires = "dry_run")]
    pub json: bool,
    /// Filtered network: do not print `agent-sandbox: blocked HOST …` on stderr the first
    /// time each host is denied (the summary at exit and the session's proxy.log remain).
    #[arg(long)]
    pub quiet_denials: bool,
    /// Do not print the `agent-sandbox: session DIR` line at start; implies --quiet-denials.
    /// Warnings, errors and the summary at exit remain.
    #[arg(long)]
    pub quiet: bool,
    /// Plan for this OS: `macos` with --dry-run shows the Seatbelt profile, its -D parameters
    /// and the sandbox-exec argv a Mac would run (on any OS). Default: this machine's.
    #[arg(long, value_name = "OS", value_parser = ["linux", "macos"])]
    pub target_os: Option<String>,
    /// The command and its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
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
            if let Some(fixed) = command_before_dashes(&args, &e) {
                eprintln!("agent-sandbox: error: the command goes after \"--\": {fixed}");
                return EXIT_SETUP;
            }
            let code = if e.use_stderr() { EXIT_SETUP } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Command::Run(a) => crate::launch::run(*a),
        Command::Schema => {
            print!("{}", crate::spec::schema_json());
            Ok(0)
        }
        Command::Doctor => Ok(crate::doctor::main()),
        Command::Completions { shell } => crate::manual::completions(shell).map(|()| 0),
        Command::Man { command, dir } => crate::manual::man(command.as_deref(), dir).map(|()| 0),
        Command::Log(a) => crate::sessionlog::main(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "agent-sandbox: error: {}",
                crate::report::terminal_safe(&one_line(&e))
            );
            EXIT_SETUP
        }
    }
}

/// `agent-sandbox run [options] claude …` (the command not after `--`, which `command`'s
/// `last = true` requires): the same command line with `--` inserted before the argument clap
/// found unexpected, if that one parses, else `None` (and clap's own error is printed).
fn command_before_dashes(args: &[OsString], e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument || args.get(1)? != "run" {
        return None;
    }
    let Some(ContextValue::String(unexpected)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    if unexpected.starts_with('-') {
        return None;
    }
    // The unexpected word may also occur as an option's value (`--rw claude claude`): try each
    // place and keep the first that parses.
    (2..args.len())
        .filter(|&i| args[i] == unexpected.as_str())
        .map(|i| {
            let mut fixed = args.to_vec();
            fixed.insert(i, "--".into());
            fixed
        })
        .find(|fixed| Cli::try_parse_from(fixed).is_ok())
        .map(|fixed| {
            let words = fixed[1..].iter().map(|a| shell_word(&a.to_string_lossy()));
            std::iter::once("agent-sandbox".to_string())
                .chain(words)
                .collect::<Vec<_>>()
                .join(" ")
        })
}

/// A word as a shell reads it back: quoted unless it is made of characters that need none.
fn shell_word(w: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c);
    if !w.is_empty() && w.chars().all(plain) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
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

pub fn one_line(e: &anyhow::Error) -> String {
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
