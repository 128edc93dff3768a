//! Help, the hint for a command given without `--`, shell completions and man pages: what the
//! binary generates from its clap definitions.
use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::*;

/// `PROGRAM ARGS…` fed `input` on stdin.
fn with_stdin(program: &str, args: &[&str], input: &str) -> Out {
    let mut child = Command::new(program)
        .args(args)
        .env("MANWIDTH", "200")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn installed(program: &str) -> bool {
    std::env::split_paths("/usr/local/bin:/usr/bin:/bin").any(|d| d.join(program).exists())
}

#[test]
fn run_help_states_the_default_network_and_every_example_is_a_valid_command_line() {
    let f = Fixture::new();
    let mut c = f.cmd();
    c.args(["run", "--help"]);
    let help = ok(c);
    assert!(
        help.contains("Network: by default the open internet, without this host's own addresses"),
        "{help}"
    );
    assert!(help.contains("--allow-domain filters it"), "{help}");
    assert!(help.contains("--no-network blocks it"), "{help}");
    let examples: Vec<&str> = help
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("agent-sandbox run "))
        .collect();
    for expected in [
        "agent-sandbox run -- claude",
        "--rw ~/.claude",
        "--allow-domain anthropic.com",
        "--no-network -- make test",
        "--dry-run",
    ] {
        assert!(
            examples.iter().any(|e| e.contains(expected)),
            "no example with {expected:?}: {examples:?}"
        );
    }
    // The short help names the default too.
    let mut c = f.cmd();
    c.args(["--help"]);
    assert!(ok(c).contains("network by default: the internet, but not this host"));

    // Each example, as a shell would pass it (`~` expanded), is accepted: planned with
    // --dry-run, exit 0.
    std::fs::create_dir_all(f.home.join(".claude")).unwrap();
    std::fs::write(f.home.join(".claude.json"), "{}").unwrap();
    std::fs::write(f.home.join(".gitconfig"), "").unwrap();
    for example in &examples {
        let home = f.home.to_str().unwrap();
        let words: Vec<String> = example
            .split_whitespace()
            .skip(2)
            .map(|w| w.replacen("~/", &format!("{home}/"), 1))
            .collect();
        let mut c = f.cmd();
        c.arg("run");
        if !words.iter().any(|w| w == "--dry-run") {
            c.arg("--dry-run");
        }
        c.args(&words);
        let o = run(c);
        assert_eq!(o.code, 0, "example {example:?}: {o:?}");
    }
}

#[test]
fn a_command_without_dashes_is_refused_with_the_command_line_that_works() {
    let f = Fixture::new();
    let marker = f.proj.join("ran");
    let script = format!("touch '{}'", marker.display());
    let mut c = f.cmd();
    c.args(["run", "--no-network", "sh", "-c", &script]);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(!marker.exists(), "the command ran");
    let hint = "agent-sandbox: error: the command goes after \"--\": agent-sandbox run \
                --no-network -- sh -c ";
    assert_eq!(o.stderr.lines().count(), 1, "{o:?}");
    assert!(o.stderr.starts_with(hint), "{o:?}");

    // The command line it gives, pasted into a shell, runs the command.
    let fixed = o
        .stderr
        .trim_end()
        .split_once(": agent-sandbox ")
        .unwrap()
        .1;
    let mut sh = Command::new("/bin/sh");
    sh.args(["-c", &format!("'{}' {fixed}", bin().display())])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &f.home)
        .env("XDG_STATE_HOME", &f.state)
        .current_dir(&f.proj);
    assert_eq!(run(sh).code, 0);
    assert!(
        marker.exists(),
        "the suggested command line did not run the command"
    );

    // The shortest case, word for word.
    let mut c = f.cmd();
    c.args(["run", "claude"]);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert_eq!(
        o.stderr,
        "agent-sandbox: error: the command goes after \"--\": agent-sandbox run -- claude\n"
    );

    // An unknown option is still named as such, not taken for the command.
    let mut c = f.cmd();
    c.args(["run", "--bogus-flag", "claude"]);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains("unexpected argument '--bogus-flag'"),
        "{o:?}"
    );
    assert!(!o.stderr.contains("goes after"), "{o:?}");
}

#[test]
fn bash_completion_is_valid_and_completes_run_options() {
    let f = Fixture::new();
    let mut c = f.cmd();
    c.args(["completions", "bash"]);
    let script = ok(c);
    assert!(script.contains("--allow-domain"), "{script}");
    let o = with_stdin("bash", &["-n"], &script);
    assert_eq!(o.code, 0, "bash -n: {o:?}");

    // Loaded into bash: `agent-sandbox run --allow-d<TAB>` completes the option (a hyphenated
    // program name broke this in clap_complete: clap-rs/clap#6421).
    let path = f.root().join("agent-sandbox.bash");
    std::fs::write(&path, &script).unwrap();
    let complete = |words: &str, cword: usize, cur: &str, prev: &str| {
        let probe = format!(
            ". '{}'; COMP_WORDS=({words}); COMP_CWORD={cword}; _agent__sandbox agent-sandbox '{cur}' '{prev}'; echo \"${{COMPREPLY[*]}}\"",
            path.display()
        );
        let o = with_stdin("bash", &["-s"], &probe);
        assert_eq!(o.code, 0, "{o:?}");
        o.stdout.trim().to_string()
    };
    assert_eq!(
        complete("agent-sandbox run --allow-d", 2, "--allow-d", "run"),
        "--allow-domain"
    );
    assert_eq!(
        complete("agent-sandbox compl", 1, "compl", "agent-sandbox"),
        "completions"
    );
}

#[test]
fn zsh_and_fish_completions_parse_where_those_shells_are_installed() {
    let f = Fixture::new();
    for (shell, first) in [("zsh", "#compdef agent-sandbox"), ("fish", "")] {
        let mut c = f.cmd();
        c.args(["completions", shell]);
        let script = ok(c);
        assert!(script.starts_with(first), "{shell}: {script}");
        assert!(script.contains("allow-domain"), "{shell}: {script}");
        if !installed(shell) {
            eprintln!("SKIP: {shell} is not installed; its completion script is not parsed");
            continue;
        }
        let o = with_stdin(shell, &["-n"], &script);
        assert_eq!(o.code, 0, "{shell} -n: {o:?}");
        assert_eq!(o.stderr, "", "{shell} -n: {o:?}");
    }
    // An unknown shell is a usage error naming the ones there are.
    let mut c = f.cmd();
    c.args(["completions", "tcsh"]);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains("bash") && o.stderr.contains("fish"),
        "{o:?}"
    );
}

#[test]
fn man_pages_render_with_the_options_and_examples() {
    let f = Fixture::new();
    let page = |args: &[&str]| {
        let mut c = f.cmd();
        c.arg("man").args(args);
        ok(c)
    };
    let main = page(&[]);
    for name in ["", "run", "schema", "doctor", "completions", "man"] {
        let text = page(&[name][..usize::from(!name.is_empty())]);
        assert!(text.is_ascii(), "the page of {name:?} is not ASCII: {text}");
    }
    assert!(main.contains("\n.TH agent-sandbox 1 "), "{main}");
    assert!(main.contains("agent\\-sandbox\\-run(1)"), "{main}");
    let run_page = page(&["run"]);
    assert!(
        run_page.contains("\n.TH agent-sandbox-run 1 "),
        "{run_page}"
    );
    assert!(run_page.contains(".SH EXAMPLES"), "{run_page}");

    // `--dir` writes one page per command.
    let dir = f.root().join("man");
    std::fs::create_dir(&dir).unwrap();
    page(&["--dir", dir.to_str().unwrap()]);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for expected in [
        "agent-sandbox.1",
        "agent-sandbox-run.1",
        "agent-sandbox-doctor.1",
        "agent-sandbox-completions.1",
        "agent-sandbox-man.1",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("agent-sandbox-run.1")).unwrap(),
        run_page
    );

    // A page that does not exist is an error naming the ones that do.
    let mut c = f.cmd();
    c.args(["man", "nosuch"]);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains("\"nosuch\"") && o.stderr.contains("run"),
        "{o:?}"
    );

    if !installed("man") {
        eprintln!("SKIP: man is not installed; the pages are not rendered");
        return;
    }
    // In the C locale (ASCII output), where a character outside ASCII draws a warning.
    let o = with_stdin(
        "env",
        &["LC_ALL=C", "man", "--warnings", "-l", "-"],
        &run_page,
    );
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stderr, "", "man --warnings: {o:?}");
    for expected in [
        "agent-sandbox-run - Run COMMAND in the sandbox",
        "--allow-domain <DOMAIN[=METHOD,...]>",
        "EXAMPLES",
        "agent-sandbox run --no-network -- make test",
        "by default the open internet",
    ] {
        assert!(
            o.stdout.contains(expected),
            "{expected:?} missing: {}",
            o.stdout
        );
    }
}
