//! `agent-sandbox log`: the sessions recorded in the state directory (see [`crate::session`]),
//! one session's `launch.log` and denials, and the running session's denials as the proxy logs
//! them. Reads only; what it prints is rendered by pure functions of the files' text.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::session::{self, Ended, LAUNCH_LOG, PROXY_LOG};

#[derive(clap::Args, Debug, Default)]
pub struct LogArgs {
    /// The session to show: its directory's name, or a part of it that names only one (the
    /// list shows them). Default with -f: the newest.
    #[arg(value_name = "SESSION", conflicts_with = "last")]
    pub session: Option<String>,
    /// Show the newest session.
    #[arg(long)]
    pub last: bool,
    /// Follow the session's denials as the proxy logs them, until the session ends (Ctrl-C
    /// stops earlier).
    #[arg(short = 'f', long)]
    pub follow: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(
        "no session is recorded in {0} yet (each `agent-sandbox run` records one there; XDG_STATE_HOME moves it)"
    )]
    NoSessions(PathBuf),
    #[error("no session in {base} matches {given:?}. Fix: run `agent-sandbox log` to list them")]
    NoMatch { base: PathBuf, given: String },
    #[error("{given:?} matches {} sessions ({}). Fix: give more of the name", .names.len(), .names.join(", "))]
    Ambiguous { given: String, names: Vec<String> },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, LogError>;

/// How far a session got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Ended(Ended),
    /// No end recorded and its launcher still runs.
    Running,
    /// No end recorded and its launcher is gone (killed, or the machine stopped).
    Gone,
}

/// One session as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub started: String,
    pub state: State,
    /// `None` without a `proxy.log` (the network was not filtered).
    pub denials: Option<usize>,
    /// The `command:` line of its `launch.log` (the sandbox's name when it has none).
    pub command: String,
}

impl Row {
    /// The row of `name` from its files' text; `alive`: whether its launcher still runs.
    pub fn from_files(
        name: &str,
        launch_log: Option<&str>,
        proxy_log: Option<&str>,
        alive: bool,
    ) -> Option<Row> {
        let parts = session::parse_name(name)?;
        let log = launch_log.unwrap_or("");
        let state = match session::ended(log) {
            Some(e) => State::Ended(e),
            None if alive => State::Running,
            None => State::Gone,
        };
        let command = log
            .lines()
            .find_map(|l| l.strip_prefix("command: "))
            .map(str::to_string)
            .unwrap_or(parts.out_name);
        Some(Row {
            name: name.to_string(),
            started: parts.started,
            state,
            denials: proxy_log.map(|p| session::denial_lines(p).count()),
            command,
        })
    }

    fn status(&self) -> String {
        match &self.state {
            State::Ended(e) => format!("exit {}", e.status),
            State::Running => "running".to_string(),
            State::Gone => "no end recorded".to_string(),
        }
    }
}

/// The list: a header, then one line per session, oldest first.
pub fn render_list(rows: &[Row]) -> String {
    let header = ["SESSION", "STARTED", "STATUS", "DENIALS", "COMMAND"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.started.clone(),
                r.status(),
                r.denials.map_or("-".to_string(), |n| n.to_string()),
                r.command.clone(),
            ]
        })
        .collect();
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..4).map(width).collect();
    let line = |c: [&str; 5]| {
        let mut s = String::new();
        for (i, w) in widths.iter().enumerate() {
            s.push_str(&format!("{:<w$}  ", c[i]));
        }
        s.push_str(c[4]);
        s.push('\n');
        s
    };
    let mut out = line(header);
    for c in &cells {
        out.push_str(&line([&c[0], &c[1], &c[2], &c[3], &c[4]]));
    }
    out
}

/// One session: its `launch.log` (the plan, and the end once it ended), then its denials.
pub fn render_show(
    dir: &Path,
    launch_log: Option<&str>,
    proxy_log: Option<&str>,
    state: &State,
    pid: u32,
) -> String {
    let mut out = format!("== {}\n", dir.join(LAUNCH_LOG).display());
    match launch_log {
        Some(log) => {
            out.push_str(log);
            if !log.is_empty() && !log.ends_with('\n') {
                out.push('\n');
            }
        }
        None => out.push_str("(not written: the session stopped before its sandbox started)\n"),
    }
    match state {
        State::Ended(_) => {}
        State::Running => out.push_str(&format!(
            "== still running (launcher pid {pid}); `agent-sandbox log -f` follows its denials\n"
        )),
        State::Gone => out.push_str(&format!(
            "== no end recorded: its launcher (pid {pid}) is gone\n"
        )),
    }
    match proxy_log {
        Some(p) => {
            let lines: Vec<&str> = session::denial_lines(p).collect();
            out.push_str(&format!(
                "== {}: {} denial{}\n",
                dir.join(PROXY_LOG).display(),
                lines.len(),
                if lines.len() == 1 { "" } else { "s" }
            ));
            for l in lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        None => out.push_str("== no proxy.log (the network was not filtered)\n"),
    }
    out
}

/// `agent-sandbox log`.
pub fn main(a: &LogArgs) -> anyhow::Result<i32> {
    let home = crate::launch::host_home()?;
    let base = session::base_dir_from_env(&home);
    let names = match session::list(&base) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => Err(LogError::Read {
            path: base.clone(),
            source,
        })?,
    };
    if a.session.is_none() && !a.last && !a.follow {
        if names.is_empty() {
            eprintln!("agent-sandbox: {}", LogError::NoSessions(base));
            return Ok(0);
        }
        let rows: Vec<Row> = names.iter().filter_map(|n| read_row(&base, n)).collect();
        print_out(&render_list(&rows));
        return Ok(0);
    }
    let name = pick(&base, &names, a.session.as_deref())?;
    let dir = base.join(&name);
    let pid = session::parse_name(&name).map_or(0, |p| p.pid);
    if a.follow {
        return follow(&dir, pid);
    }
    let launch = read_opt(&dir.join(LAUNCH_LOG))?;
    let proxy = read_opt(&dir.join(PROXY_LOG))?;
    let state = match launch.as_deref().and_then(session::ended) {
        Some(e) => State::Ended(e),
        None if alive(pid) => State::Running,
        None => State::Gone,
    };
    print_out(&render_show(
        &dir,
        launch.as_deref(),
        proxy.as_deref(),
        &state,
        pid,
    ));
    Ok(0)
}

/// The session `given` names (exactly, or as the one name containing it), else the newest.
pub fn pick(base: &Path, names: &[String], given: Option<&str>) -> Result<String> {
    let Some(given) = given else {
        return names
            .last()
            .cloned()
            .ok_or_else(|| LogError::NoSessions(base.to_path_buf()));
    };
    if names.iter().any(|n| n == given) {
        return Ok(given.to_string());
    }
    let found: Vec<String> = names
        .iter()
        .filter(|n| n.contains(given))
        .cloned()
        .collect();
    match found.len() {
        1 => Ok(found[0].clone()),
        0 => Err(LogError::NoMatch {
            base: base.to_path_buf(),
            given: given.to_string(),
        }),
        _ => Err(LogError::Ambiguous {
            given: given.to_string(),
            names: found,
        }),
    }
}

fn read_row(base: &Path, name: &str) -> Option<Row> {
    let dir = base.join(name);
    let launch = std::fs::read_to_string(dir.join(LAUNCH_LOG)).ok();
    let proxy = std::fs::read_to_string(dir.join(PROXY_LOG)).ok();
    let pid = session::parse_name(name)?.pid;
    Row::from_files(name, launch.as_deref(), proxy.as_deref(), alive(pid))
}

fn read_opt(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LogError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether the process `pid` exists (another user's counts: it answers EPERM).
fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

/// stdout, ignoring a closed pipe (`agent-sandbox log | head`).
fn print_out(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|_| out.flush());
}

/// How often `-f` looks at the session's files.
const POLL: Duration = Duration::from_millis(100);

/// `log -f`: the session's denials so far, then each one as the proxy appends it, until its
/// `launch.log` records the end (printed last) or its launcher is gone.
fn follow(dir: &Path, pid: u32) -> anyhow::Result<i32> {
    eprintln!(
        "agent-sandbox: following the denials of {} until it ends (Ctrl-C stops)",
        dir.display()
    );
    let mut tail = Tail::new(dir.join(PROXY_LOG));
    loop {
        // The end first: the proxy's last line is written before the end is appended, so
        // after the end is seen, one more read of proxy.log finds every denial.
        let ended = read_opt(&dir.join(LAUNCH_LOG))?
            .as_deref()
            .and_then(session::ended);
        let gone = ended.is_none() && !alive(pid);
        let mut out = String::new();
        for line in tail.read_lines() {
            if session::denial_lines(&line).next().is_some() {
                out.push_str(&line);
                out.push('\n');
            }
        }
        if let Some(e) = &ended {
            out.push_str(&format!(
                "exit status: {}\nended: {}\nduration: {}\n",
                e.status, e.ended, e.duration
            ));
        }
        print_out(&out);
        if ended.is_some() {
            return Ok(0);
        }
        if gone {
            eprintln!(
                "agent-sandbox: the session's launcher (pid {pid}) is gone without recording its end"
            );
            return Ok(1);
        }
        std::thread::sleep(POLL);
    }
}

/// The complete lines appended to a file since the last read (the file may not exist yet).
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail {
            path,
            offset: 0,
            partial: Vec::new(),
        }
    }

    fn read_lines(&mut self) -> Vec<String> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        // A line is printed once its newline is there: the proxy writes each in one write,
        // but a read may still land in the middle of one.
        let Some(last_nl) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last_nl + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        String::from_utf8_lossy(&complete)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "sandbox: sh\ncommand: 'sh' '-c' 'exit 3'\nnetwork: filtered\n";
    const END: &str = "exit status: 3\nended: 2026-11-29T10:15:05Z\nduration: 5.2 s\n";
    const PROXY: &str = "2026-11-29T10:15:01Z allow first-contact CONNECT a.test:443 -\n\
        2026-11-29T10:15:02Z deny blocked-by-allowlist CONNECT evil.test:443 -\n";

    #[test]
    fn the_list_shows_status_denials_and_command() {
        let ended = format!("{PLAN}{END}");
        let rows = vec![
            Row::from_files(
                "20261129T101500Z-0000042-sh",
                Some(&ended),
                Some(PROXY),
                false,
            )
            .unwrap(),
            Row::from_files(
                "20261129T101600Z-0000043-claude",
                Some("sandbox: claude\n"),
                None,
                true,
            )
            .unwrap(),
            Row::from_files("20261129T101700Z-0000044-x", None, None, false).unwrap(),
        ];
        assert_eq!(
            render_list(&rows),
            "SESSION                          STARTED               STATUS           DENIALS  COMMAND
20261129T101500Z-0000042-sh      2026-11-29T10:15:00Z  exit 3           1        'sh' '-c' 'exit 3'
20261129T101600Z-0000043-claude  2026-11-29T10:16:00Z  running          -        claude
20261129T101700Z-0000044-x       2026-11-29T10:17:00Z  no end recorded  -        x
"
        );
        assert_eq!(Row::from_files(".identity-01", None, None, true), None);
    }

    #[test]
    fn one_session_shows_its_log_and_denials() {
        let dir = Path::new("/s/20261129T101500Z-0000042-sh");
        let ended = format!("{PLAN}{END}");
        let state = State::Ended(session::ended(&ended).unwrap());
        assert_eq!(
            render_show(dir, Some(&ended), Some(PROXY), &state, 42),
            format!(
                "== /s/20261129T101500Z-0000042-sh/launch.log\n{PLAN}{END}\
                 == /s/20261129T101500Z-0000042-sh/proxy.log: 1 denial\n\
                 2026-11-29T10:15:02Z deny blocked-by-allowlist CONNECT evil.test:443 -\n"
            )
        );
        assert_eq!(
            render_show(dir, Some(PLAN), None, &State::Running, 42),
            format!(
                "== /s/20261129T101500Z-0000042-sh/launch.log\n{PLAN}\
                 == still running (launcher pid 42); `agent-sandbox log -f` follows its denials\n\
                 == no proxy.log (the network was not filtered)\n"
            )
        );
    }

    #[test]
    fn a_session_is_picked_by_name_part_or_newest() {
        let base = Path::new("/s");
        let names: Vec<String> = [
            "20261129T101500Z-0000042-sh",
            "20261129T101600Z-0000043-claude",
            "20261129T101700Z-0000044-sh",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(pick(base, &names, None).unwrap(), names[2]);
        assert_eq!(pick(base, &names, Some("claude")).unwrap(), names[1]);
        assert_eq!(pick(base, &names, Some(&names[0])).unwrap(), names[0]);
        assert_eq!(
            pick(base, &names, Some("-sh")).unwrap_err().to_string(),
            "\"-sh\" matches 2 sessions (20261129T101500Z-0000042-sh, 20261129T101700Z-0000044-sh). Fix: give more of the name"
        );
        assert_eq!(
            pick(base, &names, Some("codex")).unwrap_err().to_string(),
            "no session in /s matches \"codex\". Fix: run `agent-sandbox log` to list them"
        );
        assert!(matches!(
            pick(base, &[], None),
            Err(LogError::NoSessions(_))
        ));
    }

    #[test]
    fn tail_returns_only_complete_new_lines() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("proxy.log");
        let mut tail = Tail::new(p.clone());
        assert!(tail.read_lines().is_empty());
        std::fs::write(&p, "one\ntw").unwrap();
        assert_eq!(tail.read_lines(), ["one"]);
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"o\nthree\n").unwrap();
        assert_eq!(tail.read_lines(), ["two", "three"]);
        assert!(tail.read_lines().is_empty());
    }
}
