//! What is generated from the clap definitions in [`crate::cli`]: `run`'s examples (in its
//! `--help` and its man page alike), shell completions, man pages.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap_mangen::roff::{Roff, roman};

/// `agent-sandbox run` examples: the command line and what it does.
const RUN_EXAMPLES: &[(&str, &str)] = &[
    (
        "agent-sandbox run -- claude",
        "The launch directory read-write, an empty $HOME, the internet but not this host.",
    ),
    (
        "agent-sandbox run --rw ~/.claude --rw ~/.claude.json --ro ~/.gitconfig -- claude",
        "Also Claude's state read-write and git's configuration read-only.",
    ),
    (
        "agent-sandbox run --allow-domain anthropic.com --allow-domain github.com=GET,HEAD -- claude",
        "Filtered network: only these domains and their subdomains, github.com only for GET and HEAD.",
    ),
    (
        "agent-sandbox run --no-network -- make test",
        "No network at all.",
    ),
    (
        "agent-sandbox run --dry-run --rw ~/.claude -- claude",
        "Print the mounts, the environment and the network policy; start nothing.",
    ),
];

/// `run`'s `after_help`.
pub fn examples_help() -> String {
    let mut s = String::from("Examples:\n");
    for (cmd, what) in RUN_EXAMPLES {
        s.push_str(&format!("  {cmd}\n      {what}\n"));
    }
    s
}

/// `agent-sandbox completions SHELL`: the script on stdout.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut cmd = crate::cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "agent-sandbox", &mut out);
    if shell == clap_complete::Shell::Bash {
        out = bash_arms_fixed(&out);
    }
    std::io::stdout()
        .write_all(&out)
        .context("cannot write the completion script to stdout")
}

/// clap_complete's bash script spells a hyphenated program's state two ways: the loop over the
/// words sets `agent__sandbox__subcmd__run`, the arms match `agent__subcmd__sandbox__subcmd__run`,
/// so no option of a subcommand ever completes (clap-rs/clap#6421, open in clap_complete 4.6.12).
/// Spell the arms as the loop does; a no-op once clap_complete is fixed.
fn bash_arms_fixed(script: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(script)
        .replace("agent__subcmd__sandbox", "agent__sandbox")
        .into_bytes()
}

/// `agent-sandbox man [COMMAND]` (one page on stdout) or `man --dir DIR` (every page).
pub fn man(command: Option<&str>, dir: Option<PathBuf>) -> anyhow::Result<()> {
    let mut top = crate::cli::command();
    top.build();
    if let Some(dir) = dir {
        return write_pages(&top, &dir);
    }
    let cmd = match command {
        None => &top,
        Some(name) => top.find_subcommand(name).ok_or_else(|| {
            anyhow::anyhow!(
                "no man page for {name:?}: expected one of {} (or none, for the main page)",
                page_names(&top).join(", ")
            )
        })?,
    };
    std::io::stdout()
        .write_all(&page(cmd))
        .context("cannot write the man page to stdout")
}

fn page_names(top: &clap::Command) -> Vec<String> {
    visible(top).map(|c| c.get_name().to_string()).collect()
}

fn visible(top: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    top.get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
}

fn write_pages(top: &clap::Command, dir: &Path) -> anyhow::Result<()> {
    for cmd in std::iter::once(top).chain(visible(top)) {
        let man = clap_mangen::Man::new(cmd.clone());
        let path = dir.join(man.get_filename());
        std::fs::write(&path, page(cmd))
            .with_context(|| format!("cannot write the man page {}", path.display()))?;
    }
    Ok(())
}

/// One page (`cmd` built, so a subcommand's is `agent-sandbox-run`): clap_mangen's sections,
/// with `run`'s examples as an EXAMPLES section of their own (clap_mangen would fill the
/// `after_help` lines into one paragraph under "EXTRA").
pub fn page(cmd: &clap::Command) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd.clone())
        .source(format!("agent-sandbox {}", env!("CARGO_PKG_VERSION")));
    let mut out = Vec::new();
    let mut render = |f: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        f(&mut out).expect("rendering into memory does not fail")
    };
    render(&|w| man.render_title(w));
    render(&|w| man.render_name_section(w));
    render(&|w| man.render_synopsis_section(w));
    render(&|w| man.render_description_section(w));
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        render(&|w| man.render_options_section(w));
    }
    if cmd.has_subcommands() {
        render(&|w| man.render_subcommands_section(w));
    }
    if cmd.get_name() == "run" {
        render(&|w| examples_roff().to_writer(w));
    }
    if cmd.get_version().or(cmd.get_long_version()).is_some() {
        render(&|w| man.render_version_section(w));
    }
    ascii(&out)
}

/// man renders a page in the locale's charset, ASCII under `LANG=C`, where troff cannot
/// print a `…` (the help's `DOMAIN[=METHOD,…]`): the pages are plain ASCII.
fn ascii(page: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(page)
        .replace('…', "...")
        .into_bytes()
}

fn examples_roff() -> Roff {
    let mut r = Roff::default();
    r.control("SH", ["EXAMPLES"]);
    for (cmd, what) in RUN_EXAMPLES {
        r.control("TP", []);
        r.text([roman(*cmd)]);
        r.text([roman(*what)]);
    }
    r
}
