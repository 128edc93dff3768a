//! What the proxy remembers: every denial (for the log file and the exit summary) and the
//! first allowed contact per host. Memory stays bounded whatever the agent sends.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::SystemTime;

use super::policy::{Host, Methods, Policy, codes, printable};
use crate::spec::HTTP_METHODS;
use crate::utc::Utc;

/// Denials kept for the summary; later ones are only counted.
const MAX_DENIALS: usize = 1_000;
/// Hosts remembered for "first allowed contact"; beyond, every contact is logged.
const MAX_CONTACTED: usize = 10_000;

/// One refused CONNECT or request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Seconds since the Unix epoch.
    pub time: u64,
    /// `CONNECT` for tunnel-level denials, else the request method.
    pub method: String,
    /// Normalised host (or the raw, sanitised text if it was not a valid host).
    pub host: String,
    pub port: u16,
    /// Request path without the query (`-` for CONNECT).
    pub path: String,
    /// Stable reason code (see [`super::policy::codes`]).
    pub code: &'static str,
    pub message: String,
    /// The `allowedDomains` entry (domain, methods; `None` = `"*"`) that would have let it
    /// through, when one would.
    pub would_allow: Option<(String, Option<Vec<String>>)>,
    /// For `private-address` when the name resolved to host loopback: the port dialled, which
    /// `allowedLocalPorts` would need. `None` for every other denial (no local port helps).
    pub local_port: Option<u16>,
}

/// An allowed request or tunnel the upstream did not answer: DNS, connect or TLS failed (the
/// client got a 502). Not a denial: no setting would change it, but the agent sees only the 502.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub time: u64,
    pub method: String,
    pub host: String,
    pub port: u16,
    pub path: String,
    /// What failed (`cannot resolve example.com: …`), printable.
    pub message: String,
}

/// What the proxy saw during the session, returned by `RunningProxy::shutdown`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// The first denials, in order (at most 1000).
    pub denials: Vec<Denial>,
    /// Denials beyond those kept in `denials`.
    pub more_denials: u64,
    /// Hosts that were contacted at least once, sorted.
    pub contacted: Vec<String>,
    /// The first upstream failures, in order (at most 1000), and how many more there were.
    pub failures: Vec<Failure>,
    pub more_failures: u64,
}

pub(crate) struct Events {
    file: Option<Mutex<File>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    denials: Vec<Denial>,
    more_denials: u64,
    contacted: HashSet<String>,
    failures: Vec<Failure>,
    more_failures: u64,
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `2026-11-29T10:04:05Z` for seconds since the epoch (proleptic Gregorian, UTC).
pub fn format_time(secs: u64) -> String {
    let t = Utc::from_unix(secs);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

impl Events {
    pub fn new(file: Option<File>) -> Events {
        Events {
            file: file.map(Mutex::new),
            state: Mutex::new(State::default()),
        }
    }

    fn write_line(&self, line: String) {
        if let Some(file) = &self.file {
            // One write per line on an O_APPEND file: lines never interleave.
            let _ = file.lock().expect("log file").write_all(line.as_bytes());
        }
    }

    pub fn deny(&self, denial: Denial) {
        self.write_line(format!(
            "{} deny {} {} {}:{} {}\n",
            format_time(denial.time),
            denial.code,
            denial.method,
            denial.host,
            denial.port,
            denial.path
        ));
        let mut state = self.state.lock().expect("events");
        if state.denials.len() < MAX_DENIALS {
            state.denials.push(denial);
        } else {
            state.more_denials += 1;
        }
    }

    pub fn fail(&self, failure: Failure) {
        self.write_line(format!(
            "{} fail upstream {} {}:{} {} {}\n",
            format_time(failure.time),
            failure.method,
            failure.host,
            failure.port,
            failure.path,
            failure.message
        ));
        let mut state = self.state.lock().expect("events");
        if state.failures.len() < MAX_DENIALS {
            state.failures.push(failure);
        } else {
            state.more_failures += 1;
        }
    }

    /// Log the first allowed contact with `host`; later ones are not logged.
    pub fn allow(&self, method: &str, host: &str, port: u16, path: &str) {
        {
            let mut state = self.state.lock().expect("events");
            if state.contacted.contains(host) {
                return;
            }
            if state.contacted.len() < MAX_CONTACTED {
                state.contacted.insert(host.to_string());
            }
        }
        self.write_line(format!(
            "{} allow first-contact {method} {host}:{port} {path}\n",
            format_time(now())
        ));
    }

    pub fn summary(&self) -> Summary {
        let state = self.state.lock().expect("events");
        let mut contacted: Vec<String> = state.contacted.iter().cloned().collect();
        contacted.sort();
        Summary {
            denials: state.denials.clone(),
            more_denials: state.more_denials,
            contacted,
            failures: state.failures.clone(),
            more_failures: state.more_failures,
        }
    }
}

/// The request path for logs: no query string (it may carry tokens), printable, bounded.
pub(crate) fn log_path(path: &str) -> String {
    printable(path.split('?').next().unwrap_or(path))
}

/// The `allowedDomains` entry that would have allowed `method` on `host` after a denial with
/// `code`, keeping the methods the governing entry already allows.
pub(crate) fn would_allow(
    policy: &Policy,
    code: &str,
    method: &str,
    host: &str,
) -> Option<(String, Option<Vec<String>>)> {
    let parsed = Host::parse(host)?;
    let adding = if method == "CONNECT" {
        // The methods inside an uninspected tunnel are unknown: only "*" surely allows it.
        None
    } else {
        Some(vec![method.to_string()])
    };
    match code {
        codes::BLOCKED_BY_ALLOWLIST | codes::IP_LITERAL => Some((parsed.to_string(), adding)),
        codes::UPGRADE_NOT_ALLOWED => Some((parsed.to_string(), None)),
        codes::METHOD_NOT_ALLOWED => {
            let Some((_, Methods::Only(existing))) = policy.lookup(&parsed) else {
                return None;
            };
            let mut methods: Vec<String> = existing.iter().cloned().collect();
            methods.extend(adding.unwrap_or_default());
            Some((parsed.to_string(), Some(methods)))
        }
        _ => None,
    }
}

fn method_rank(m: &str) -> usize {
    HTTP_METHODS
        .iter()
        .position(|x| *x == m)
        .unwrap_or(HTTP_METHODS.len())
}

impl Summary {
    /// A short report for the end of the session: what was blocked, and the `allowedDomains`
    /// entries (Nix and CLI syntax) that would allow it. Empty when nothing was blocked.
    pub fn render(&self) -> String {
        if self.denials.is_empty() {
            return self.render_failures();
        }
        let total = self.denials.len() as u64 + self.more_denials;
        let mut out = format!(
            "agent-sandbox: the network proxy blocked {total} request{}:\n",
            if total == 1 { "" } else { "s" }
        );

        // Identical denials are folded, in order of first occurrence.
        let mut seen: Vec<(String, usize)> = Vec::new();
        for d in &self.denials {
            let target = if d.method == "CONNECT" {
                format!("{}:{}", d.host, d.port)
            } else {
                let scheme = if d.port == 80 { "http" } else { "https" };
                format!("{scheme}://{}{}", d.host, d.path)
            };
            let line = format!("  {} {target} ({})", d.method, d.code);
            match seen.iter_mut().find(|(l, _)| *l == line) {
                Some((_, n)) => *n += 1,
                None => seen.push((line, 1)),
            }
        }
        const SHOWN: usize = 20;
        for (line, n) in seen.iter().take(SHOWN) {
            out.push_str(line);
            if *n > 1 {
                out.push_str(&format!(" x{n}"));
            }
            out.push('\n');
        }
        if seen.len() > SHOWN {
            out.push_str(&format!("  … and {} more\n", seen.len() - SHOWN));
        }

        // Merge the suggestions per domain: "*" wins, method lists are united.
        let mut entries: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
        for (domain, methods) in self.denials.iter().filter_map(|d| d.would_allow.clone()) {
            let slot = entries
                .entry(domain)
                .or_insert_with(|| Some(BTreeSet::new()));
            match (slot.as_mut(), methods) {
                (Some(set), Some(ms)) => set.extend(ms),
                _ => *slot = None,
            }
        }
        if !entries.is_empty() {
            out.push_str("To allow them, set these allowedDomains entries:\n");
            let mut flags = Vec::new();
            for (domain, methods) in &entries {
                match methods {
                    None => {
                        out.push_str(&format!("  \"{domain}\" = \"*\";\n"));
                        flags.push(format!("--allow-domain {domain}"));
                    }
                    Some(set) => {
                        let mut ms: Vec<&String> = set.iter().collect();
                        ms.sort_by_key(|m| (method_rank(m), m.to_string()));
                        let nix: Vec<String> = ms.iter().map(|m| format!("\"{m}\"")).collect();
                        let cli: Vec<&str> = ms.iter().map(|m| m.as_str()).collect();
                        out.push_str(&format!("  \"{domain}\" = [ {} ];\n", nix.join(" ")));
                        flags.push(format!("--allow-domain {domain}={}", cli.join(",")));
                    }
                }
            }
            out.push_str(&format!("or on the command line: {}\n", flags.join(" ")));
        }

        // Only a name that resolved to host loopback can be let through by allowedLocalPorts;
        // for the others (LAN, link-local, the host's own addresses) no setting would help, so
        // none is suggested.
        let private = || {
            self.denials
                .iter()
                .filter(|d| d.code == codes::PRIVATE_ADDRESS)
        };
        let loopback_ports: BTreeSet<u16> = private().filter_map(|d| d.local_port).collect();
        if !loopback_ports.is_empty() {
            let ports: Vec<String> = loopback_ports.iter().map(u16::to_string).collect();
            let flags: Vec<String> = ports
                .iter()
                .map(|p| format!("--allow-local-port {p}"))
                .collect();
            out.push_str(&format!(
                "Names that resolve to this host's loopback need allowedLocalPorts = [ {} ]; ({}).\n",
                ports.join(" "),
                flags.join(" ")
            ));
        }
        let unreachable: BTreeSet<&str> = private()
            .filter(|d| d.local_port.is_none())
            .map(|d| d.host.as_str())
            .collect();
        if !unreachable.is_empty() {
            let hosts: Vec<&str> = unreachable.into_iter().collect();
            out.push_str(&format!(
                "{} resolve{} to private, link-local or this host's own addresses, which the proxy never dials (no setting allows it).\n",
                hosts.join(", "),
                if hosts.len() == 1 { "s" } else { "" }
            ));
        }
        out.push_str(&self.render_failures());
        out
    }

    /// The allowed requests the upstream did not answer, folded per target and reason.
    fn render_failures(&self) -> String {
        if self.failures.is_empty() {
            return String::new();
        }
        let total = self.failures.len() as u64 + self.more_failures;
        let mut out = format!(
            "agent-sandbox: {total} allowed request{} failed upstream (the client got 502; see proxy.log):\n",
            if total == 1 { "" } else { "s" }
        );
        let mut seen: Vec<(String, usize)> = Vec::new();
        for f in &self.failures {
            let line = format!("  {} {}:{}: {}", f.method, f.host, f.port, f.message);
            match seen.iter_mut().find(|(l, _)| *l == line) {
                Some((_, n)) => *n += 1,
                None => seen.push((line, 1)),
            }
        }
        const SHOWN: usize = 20;
        for (line, n) in seen.iter().take(SHOWN) {
            out.push_str(line);
            if *n > 1 {
                out.push_str(&format!(" x{n}"));
            }
            out.push('\n');
        }
        if seen.len() > SHOWN {
            out.push_str(&format!("  … and {} more\n", seen.len() - SHOWN));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_format() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_time(1_798_545_845), "2026-12-29T12:04:05Z");
        assert_eq!(format_time(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    fn denial(method: &str, host: &str, port: u16, path: &str, code: &'static str) -> Denial {
        let policy = Policy::new(
            &[
                ("api.example.org".to_string(), Some(vec!["GET".to_string()])),
                (
                    "example.net".to_string(),
                    Some(vec!["HEAD".to_string(), "GET".to_string()]),
                ),
            ]
            .into(),
        )
        .unwrap();
        Denial {
            time: 0,
            method: method.into(),
            host: host.into(),
            port,
            path: path.into(),
            code,
            message: String::new(),
            would_allow: would_allow(&policy, code, method, host),
            local_port: (code == codes::PRIVATE_ADDRESS && host.starts_with("db.")).then_some(5432),
        }
    }

    #[test]
    fn empty_summary_renders_nothing() {
        assert_eq!(Summary::default().render(), "");
    }

    /// Issue 11: an allowed request whose upstream failed left only a 502 with the agent.
    #[test]
    fn upstream_failures_are_summarised_after_the_denials() {
        let fail = |method: &str, host: &str, message: &str| Failure {
            time: 0,
            method: method.into(),
            host: host.into(),
            port: 443,
            path: "/".into(),
            message: message.into(),
        };
        let mut s = Summary {
            failures: vec![
                fail("GET", "gone.test", "cannot resolve gone.test: no address"),
                fail(
                    "CONNECT",
                    "down.test",
                    "cannot connect to down.test:443: refused",
                ),
                fail("GET", "gone.test", "cannot resolve gone.test: no address"),
            ],
            more_failures: 1,
            ..Summary::default()
        };
        let failures =
            "agent-sandbox: 4 allowed requests failed upstream (the client got 502; see proxy.log):
  GET gone.test:443: cannot resolve gone.test: no address x2
  CONNECT down.test:443: cannot connect to down.test:443: refused
";
        assert_eq!(s.render(), failures);
        s.denials = vec![denial(
            "CONNECT",
            "evil.test",
            443,
            "-",
            codes::BLOCKED_BY_ALLOWLIST,
        )];
        assert!(
            s.render()
                .ends_with(&format!("--allow-domain evil.test\n{failures}")),
            "{}",
            s.render()
        );
    }

    #[test]
    fn summary_render_exact() {
        let s = Summary {
            denials: vec![
                denial(
                    "POST",
                    "api.example.org",
                    443,
                    "/v1/upload",
                    codes::METHOD_NOT_ALLOWED,
                ),
                denial(
                    "CONNECT",
                    "evil.test",
                    443,
                    "-",
                    codes::BLOCKED_BY_ALLOWLIST,
                ),
                denial(
                    "POST",
                    "api.example.org",
                    443,
                    "/v1/upload",
                    codes::METHOD_NOT_ALLOWED,
                ),
                denial(
                    "DELETE",
                    "www.example.net",
                    443,
                    "/x",
                    codes::METHOD_NOT_ALLOWED,
                ),
                denial(
                    "PUT",
                    "api.example.org",
                    443,
                    "/y",
                    codes::METHOD_NOT_ALLOWED,
                ),
                denial("GET", "plain.test", 80, "/", codes::BLOCKED_BY_ALLOWLIST),
                denial("GET", "api.example.org", 443, "/", codes::HOST_MISMATCH),
                denial(
                    "CONNECT",
                    "db.example.org",
                    443,
                    "-",
                    codes::PRIVATE_ADDRESS,
                ),
                denial(
                    "CONNECT",
                    "lan.example.org",
                    443,
                    "-",
                    codes::PRIVATE_ADDRESS,
                ),
            ],
            more_denials: 2,
            ..Summary::default()
        };
        assert_eq!(
            s.render(),
            "agent-sandbox: the network proxy blocked 11 requests:
  POST https://api.example.org/v1/upload (method-not-allowed) x2
  CONNECT evil.test:443 (blocked-by-allowlist)
  DELETE https://www.example.net/x (method-not-allowed)
  PUT https://api.example.org/y (method-not-allowed)
  GET http://plain.test/ (blocked-by-allowlist)
  GET https://api.example.org/ (host-mismatch)
  CONNECT db.example.org:443 (private-address)
  CONNECT lan.example.org:443 (private-address)
To allow them, set these allowedDomains entries:
  \"api.example.org\" = [ \"GET\" \"POST\" \"PUT\" ];
  \"evil.test\" = \"*\";
  \"plain.test\" = [ \"GET\" ];
  \"www.example.net\" = [ \"GET\" \"HEAD\" \"DELETE\" ];
or on the command line: --allow-domain api.example.org=GET,POST,PUT --allow-domain evil.test --allow-domain plain.test=GET --allow-domain www.example.net=GET,HEAD,DELETE
Names that resolve to this host's loopback need allowedLocalPorts = [ 5432 ]; (--allow-local-port 5432).
lan.example.org resolves to private, link-local or this host's own addresses, which the proxy never dials (no setting allows it).
"
        );
    }
}
