//! Questions on the terminal (`continue? [y/N]`): refused without one, with the flag or the
//! change that avoids the question.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::anyhow;

use crate::plan;

/// A user the Nix daemon trusts can make it run code as root: granting that to the agent
/// takes a yes on the terminal.
pub fn confirm_nix_trust() -> anyhow::Result<()> {
    let crate::nixstore::Trust {
        user,
        list,
        trusted,
    } = crate::nixstore::caller_trust();
    if !trusted {
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
pub fn confirm(reasons: &[plan::Confirm], cwd: &Path) -> anyhow::Result<()> {
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
