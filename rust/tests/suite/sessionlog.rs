//! The session line at start, the end of `launch.log`, and `agent-sandbox log` (issue 11,
//! items 5 and 6).
//!
//! The denied requests never leave the machine: the proxy refuses an unlisted host at CONNECT,
//! before any DNS lookup or dial.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::*;

/// The allowlist of the filtered runs here.
const RULES: &[&str] = &["--allow-domain", "example.invalid=GET"];
/// A request the proxy denies (and how its summary and proxy.log name it).
const DENIED: &str =
    "curl -sS -m 5 -o /dev/null https://files.pythonhosted.org/ 2>/dev/null || true";
const SUMMARY: &str = "agent-sandbox: the network proxy blocked 1 request:
  CONNECT files.pythonhosted.org:443 (blocked-by-allowlist)
To allow them, set these allowedDomains entries:
  \"files.pythonhosted.org\" = \"*\";
or on the command line: --allow-domain files.pythonhosted.org
";
const DENY_LINE: &str = " deny blocked-by-allowlist CONNECT files.pythonhosted.org:443 -";

fn sessions(f: &Fixture) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(f.state.join("agent-sandbox")) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    v.sort();
    v
}

fn launch_log(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("launch.log")).unwrap()
}

/// Checked in a fixture of its own: the tests count their sessions.
fn has_curl(test: &str) -> bool {
    let o = run(Fixture::new().sh(&["--quiet"], "curl --version >/dev/null 2>&1 && echo yes"));
    if o.stdout.trim() == "yes" {
        return true;
    }
    eprintln!("SKIPPED {test}: no curl inside the sandbox");
    false
}

fn log(f: &Fixture, args: &[&str]) -> Out {
    let mut c = f.cmd();
    c.arg("log").args(args);
    run(c)
}

#[test]
fn the_session_line_names_the_directory_and_quiet_hides_it() {
    let f = Fixture::new();
    let o = run(f.sh(&["--no-network"], "true"));
    assert_eq!(o.code, 0, "{o:?}");
    let dirs = sessions(&f);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert_eq!(
        o.stderr,
        format!("agent-sandbox: session {}\n", dirs[0].display()),
        "{o:?}"
    );
    let o = run(f.sh(&["--no-network", "--quiet"], "true"));
    assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{o:?}");
    assert_eq!(sessions(&f).len(), 2);
    // A dry run starts no session.
    let o = run(f.sh(&["--no-network", "--dry-run"], "true"));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stderr.contains("agent-sandbox: session"), "{o:?}");
}

/// --quiet implies --quiet-denials: no first-denial notice, but the summary at exit stays.
#[test]
fn quiet_also_hides_the_first_denial_notice_but_not_the_summary() {
    let f = Fixture::new();
    if !has_curl("quiet_also_hides_the_first_denial_notice_but_not_the_summary") {
        return;
    }
    let mut extra = RULES.to_vec();
    let o = run(f.sh(&extra, DENIED));
    assert!(
        o.stderr
            .contains("agent-sandbox: blocked files.pythonhosted.org (blocked-by-allowlist)"),
        "{o:?}"
    );
    extra.push("--quiet");
    let o = run(f.sh(&extra, DENIED));
    assert_eq!(o.stderr, SUMMARY, "{o:?}");
}

#[test]
fn launch_log_records_the_exit_status_end_and_duration() {
    let f = Fixture::new();
    let before = agent_sandbox::proxy::log::format_time(now());
    let o = run(f.sh(&["--no-network", "--quiet"], "sleep 0.3; exit 3"));
    let after = agent_sandbox::proxy::log::format_time(now());
    assert_eq!(o.code, 3, "{o:?}");
    let log = launch_log(&sessions(&f)[0]);
    let end: Vec<&str> = log.lines().rev().take(3).collect();
    assert_eq!(end[2], "exit status: 3", "{log}");
    let ended = end[1].strip_prefix("ended: ").expect(&log);
    // ISO times in UTC sort as text.
    assert!(before.as_str() <= ended && ended <= after.as_str(), "{log}");
    let secs: f64 = end[0]
        .strip_prefix("duration: ")
        .and_then(|d| d.strip_suffix(" s"))
        .and_then(|d| d.parse().ok())
        .expect(&log);
    assert!((0.3..30.0).contains(&secs), "{log}");
    // The plan is still above it, written once.
    assert_eq!(log.matches("exit status: ").count(), 1, "{log}");
    assert!(log.starts_with("sandbox: sh\n"), "{log}");
}

/// A filtered session's denial is in its launch.log (the summary printed at exit), in `log
/// --last` (with proxy.log's line) and counted in the list, next to a blocked session's.
#[test]
fn denials_show_in_launch_log_and_in_log() {
    let f = Fixture::new();
    if !has_curl("denials_show_in_launch_log_and_in_log") {
        return;
    }
    let o = run(f.sh(&["--no-network", "--quiet"], "exit 3"));
    assert_eq!(o.code, 3, "{o:?}");
    let mut extra = RULES.to_vec();
    extra.push("--quiet");
    let o = run(f.sh(&extra, DENIED));
    assert_eq!(o.stderr, SUMMARY, "{o:?}");
    let dirs = sessions(&f);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let log_text = launch_log(&dirs[1]);
    assert!(log_text.ends_with(SUMMARY), "{log_text}");
    assert!(log_text.contains("\nexit status: 0\n"), "{log_text}");

    let shown = log(&f, &["--last"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    let proxy_log = dirs[1].join("proxy.log");
    let expected_head = format!(
        "== {}\n{log_text}== {}: 1 denial\n",
        dirs[1].join("launch.log").display(),
        proxy_log.display()
    );
    assert!(shown.stdout.starts_with(&expected_head), "{shown:?}");
    let rest: Vec<&str> = shown.stdout[expected_head.len()..].lines().collect();
    assert_eq!(rest.len(), 1, "{shown:?}");
    assert!(rest[0].ends_with(DENY_LINE), "{shown:?}");

    // Named by a part of its name: the blocked one.
    let first = dirs[0].file_name().unwrap().to_str().unwrap();
    // Its time and pid: unique.
    let shown = log(&f, &[&first[..24]]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(
        shown.stdout.contains("\nexit status: 3\nended: "),
        "{shown:?}"
    );
    assert!(
        shown
            .stdout
            .ends_with("== no proxy.log (the network was not filtered)\n"),
        "{shown:?}"
    );

    // The list: oldest first, status and denials.
    let listed = log(&f, &[]);
    assert_eq!(listed.code, 0, "{listed:?}");
    let lines: Vec<Vec<&str>> = listed
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 3, "{listed:?}");
    assert_eq!(
        lines[0],
        ["SESSION", "STARTED", "STATUS", "DENIALS", "COMMAND"]
    );
    assert_eq!(lines[1][0], first, "{listed:?}");
    assert_eq!(&lines[1][2..6], ["exit", "3", "-", "sh"], "{listed:?}");
    assert_eq!(
        lines[2][0],
        dirs[1].file_name().unwrap().to_str().unwrap(),
        "{listed:?}"
    );
    assert_eq!(&lines[2][2..5], ["exit", "0", "1"], "{listed:?}");

    // An ended session: -f prints its denials and its end, and returns at once.
    let followed = log(&f, &["-f", "--last"]);
    assert_eq!(followed.code, 0, "{followed:?}");
    let out: Vec<&str> = followed.stdout.lines().collect();
    assert_eq!(out.len(), 4, "{followed:?}");
    assert!(out[0].ends_with(DENY_LINE), "{followed:?}");
    assert_eq!(out[1], "exit status: 0", "{followed:?}");

    // A name that matches nothing: what was given, and how to list them.
    let missing = log(&f, &["codex"]);
    assert_eq!(missing.code, 125, "{missing:?}");
    assert!(
        missing
            .stderr
            .contains("matches \"codex\". Fix: run `agent-sandbox log` to list them"),
        "{missing:?}"
    );
}

#[test]
fn log_lists_nothing_before_the_first_session() {
    let f = Fixture::new();
    let o = log(&f, &[]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""), "{o:?}");
    assert!(o.stderr.contains("no session is recorded in"), "{o:?}");
    let o = log(&f, &["--last"]);
    assert_eq!(o.code, 125, "{o:?}");
}

/// `log -f` prints a denial made after it started, keeps following, and returns when the
/// session ends (with the end's lines).
#[test]
fn log_f_follows_the_running_session_until_it_ends() {
    let f = Fixture::new();
    if !has_curl("log_f_follows_the_running_session_until_it_ends") {
        return;
    }
    let mut extra = RULES.to_vec();
    extra.push("--quiet");
    let script = format!(
        "while [ ! -e go ]; do sleep 0.05; done; {DENIED}; while [ ! -e end ]; do sleep 0.05; done"
    );
    let mut sandbox = f.sh(&extra, &script);
    let mut sandbox = Killed(sandbox.stdout(Stdio::null()).spawn().unwrap());
    assert!(
        eventually(Duration::from_secs(20), || !sessions(&f).is_empty()),
        "no session directory appeared"
    );
    let dir = sessions(&f)[0].clone();

    let mut c: Command = f.cmd();
    c.args(["log", "-f"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut follower = Killed(c.spawn().unwrap());
    let lines = |r: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(r).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        rx
    };
    let out = lines(Box::new(follower.0.stdout.take().unwrap()));
    let err = lines(Box::new(follower.0.stderr.take().unwrap()));
    let started = err.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        started,
        format!(
            "agent-sandbox: following the denials of {} until it ends (Ctrl-C stops)",
            dir.display()
        )
    );
    assert!(out.try_recv().is_err(), "nothing is denied yet");

    std::fs::write(f.proj.join("go"), "").unwrap();
    let denial = out.recv_timeout(Duration::from_secs(15)).unwrap();
    assert!(denial.ends_with(DENY_LINE), "{denial}");
    // Still following while the session runs.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        follower.0.try_wait().unwrap().is_none(),
        "log -f stopped early"
    );

    std::fs::write(f.proj.join("end"), "").unwrap();
    let status = sandbox.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        out.recv_timeout(Duration::from_secs(5)).unwrap(),
        "exit status: 0"
    );
    assert!(
        eventually(Duration::from_secs(5), || follower
            .0
            .try_wait()
            .unwrap()
            .is_some()),
        "log -f did not stop when the session ended"
    );
    assert_eq!(follower.0.wait().unwrap().code(), Some(0));
    let rest: Vec<String> = out.iter().collect();
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert!(rest[0].starts_with("ended: "), "{rest:?}");
    assert!(rest[1].starts_with("duration: "), "{rest:?}");
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A child killed (SIGTERM: the launcher forwards it) if the test fails while it runs.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = self.0.wait();
        }
    }
}
