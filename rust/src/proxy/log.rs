//! What the proxy remembers: every denial (for the log file and the exit summary) and the
//! first allowed contact per host. Memory stays bounded whatever the agent sends.
//!
//! How a denial could be allowed is decided once, by [`Denial::remedy`]: the 403's reason
//! phrase and body ([`Denial::sentence`]), the first-denial notice ([`Denial::notice`]) and
//! the exit summary ([`Summary::render`]) all word it from there.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::policy::{Host, Methods, Policy, codes, printable};
use crate::spec::HTTP_METHODS;
use crate::utc::Utc;

/// Denials kept for the summary; later ones are only counted.
const MAX_DENIALS: usize = 1_000;
/// Hosts remembered for "first allowed contact"; beyond, every contact is logged.
const MAX_CONTACTED: usize = 10_000;
/// Hosts announced by a first-denial notice; beyond, one line says the rest waits for the
/// exit summary (an agent trying thousands of hosts must not flood the terminal).
const MAX_NOTICES: usize = 100;

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

/// How a denied request could be let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// This `allowedDomains` entry (methods: `None` = `"*"`).
    Domain(String, Option<Vec<String>>),
    /// `allowedLocalPorts` with this port: the name resolved to host loopback.
    LocalPort(u16),
    /// A private, link-local or host address: the proxy never dials it, whatever the settings.
    Never,
    /// No setting is involved (a malformed, mismatched or oversized request).
    Nothing,
}

impl Denial {
    /// The one rule for what would have allowed this denial.
    pub fn remedy(&self) -> Remedy {
        if let Some((domain, methods)) = &self.would_allow {
            return Remedy::Domain(domain.clone(), methods.clone());
        }
        match (self.code, self.local_port) {
            (codes::PRIVATE_ADDRESS, Some(port)) => Remedy::LocalPort(port),
            (codes::PRIVATE_ADDRESS, None) => Remedy::Never,
            _ => Remedy::Nothing,
        }
    }

    /// What the client is told, as the 403's reason phrase and its body: the reason and how
    /// to allow it, in both the flag's and the Nix argument's words.
    pub fn sentence(&self) -> String {
        match self.remedy().advice() {
            Some(advice) => format!("Blocked by agent-sandbox: {} ({advice})", self.message),
            None => format!("Blocked by agent-sandbox: {}", self.message),
        }
    }

    /// The launcher's one-line notice the first time this host is denied (no newline).
    pub fn notice(&self) -> String {
        let what = if self.method == "CONNECT" {
            self.host.clone()
        } else {
            format!("{} {}", self.method, self.host)
        };
        // With a fix, the fix; without one, why.
        let code = self.code;
        match self.remedy() {
            r @ (Remedy::Domain(..) | Remedy::LocalPort(_)) => format!(
                "agent-sandbox: blocked {what} ({code}); {}",
                r.advice().unwrap_or_default()
            ),
            Remedy::Never => format!(
                "agent-sandbox: blocked {what} ({code}): {}; no setting allows it",
                self.message
            ),
            Remedy::Nothing => format!("agent-sandbox: blocked {what} ({code}): {}", self.message),
        }
    }
}

impl Remedy {
    /// `allow it with <flag> or <Nix>`, or why nothing would; `None` when no setting is
    /// involved.
    pub fn advice(&self) -> Option<String> {
        match self {
            Remedy::Domain(domain, methods) => {
                let methods = methods.as_ref().map(sorted_methods);
                Some(format!(
                    "allow it with {} or allowedDomains = {{ {} }}",
                    domain_flag(domain, methods.as_deref()),
                    domain_entry(domain, methods.as_deref())
                ))
            }
            Remedy::LocalPort(port) => Some(format!(
                "allow it with {} or allowedLocalPorts = [ {port} ];",
                local_port_flag(*port)
            )),
            // The reason already says that the proxy never dials such addresses.
            Remedy::Never => Some("no setting allows it".to_string()),
            Remedy::Nothing => None,
        }
    }
}

/// Methods in the order of [`HTTP_METHODS`] (unknown ones last, alphabetically), no repeats.
fn sorted_methods<'a>(methods: impl IntoIterator<Item = &'a String>) -> Vec<&'a str> {
    let mut ms: Vec<&str> = methods.into_iter().map(String::as_str).collect();
    ms.sort_by_key(|m| (method_rank(m), m.to_string()));
    ms.dedup();
    ms
}

/// `"example.org" = "*";` or `"example.org" = [ "GET" "POST" ];`
fn domain_entry(domain: &str, methods: Option<&[&str]>) -> String {
    match methods {
        None => format!("\"{domain}\" = \"*\";"),
        Some(ms) => {
            let nix: Vec<String> = ms.iter().map(|m| format!("\"{m}\"")).collect();
            format!("\"{domain}\" = [ {} ];", nix.join(" "))
        }
    }
}

/// `--allow-domain example.org` or `--allow-domain example.org=GET,POST`
fn domain_flag(domain: &str, methods: Option<&[&str]>) -> String {
    match methods {
        None => format!("--allow-domain {domain}"),
        Some(ms) => format!("--allow-domain {domain}={}", ms.join(",")),
    }
}

fn local_port_flag(port: u16) -> String {
    format!("--allow-local-port {port}")
}

/// Receives the one-line notice (without newline) the first time each host is denied.
#[derive(Clone)]
pub struct Notify(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notify(..)")
    }
}

impl PartialEq for Notify {
    fn eq(&self, other: &Notify) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
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
    notify: Option<Notify>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    denials: Vec<Denial>,
    more_denials: u64,
    contacted: HashSet<String>,
    /// Hosts whose first denial was announced.
    noticed: HashSet<String>,
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
    pub fn new(file: Option<File>, notify: Option<Notify>) -> Events {
        Events {
            file: file.map(Mutex::new),
            notify,
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
        let notice = self.notify.as_ref().and_then(|_| {
            let mut state = self.state.lock().expect("events");
            if state.noticed.contains(&denial.host) || state.noticed.len() > MAX_NOTICES {
                return None;
            }
            state.noticed.insert(denial.host.clone());
            Some(if state.noticed.len() > MAX_NOTICES {
                format!(
                    "agent-sandbox: blocked more than {MAX_NOTICES} hosts; the others are listed at exit"
                )
            } else {
                denial.notice()
            })
        });
        {
            let mut state = self.state.lock().expect("events");
            if state.denials.len() < MAX_DENIALS {
                state.denials.push(denial);
            } else {
                state.more_denials += 1;
            }
        }
        // Outside the lock: the notice may block on a slow terminal.
        if let (Some(notify), Some(line)) = (&self.notify, notice) {
            (notify.0)(&line);
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
    } else if !HTTP_METHODS.contains(&method) {
        // No setting names it (allowedDomains takes only these methods), and the agent picks
        // it: an advice quoting it would let the agent write arbitrary text, of any length,
        // into the launcher's notice and summary.
        return None;
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
        out.push_str(&counted_lines(self.denials.iter().map(|d| {
            let target = if d.method == "CONNECT" {
                format!("{}:{}", d.host, d.port)
            } else {
                let scheme = if d.port == 80 { "http" } else { "https" };
                format!("{scheme}://{}{}", d.host, d.path)
            };
            format!("  {} {target} ({})", d.method, d.code)
        })));

        // Merge the suggestions per domain: "*" wins, method lists are united.
        let remedies: Vec<(&Denial, Remedy)> =
            self.denials.iter().map(|d| (d, d.remedy())).collect();
        let mut entries: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
        let mut loopback_ports: BTreeSet<u16> = BTreeSet::new();
        // Only a name that resolved to host loopback can be let through by allowedLocalPorts;
        // for the others (LAN, link-local, the host's own addresses) no setting would help, so
        // none is suggested.
        let mut unreachable: BTreeSet<&str> = BTreeSet::new();
        for (d, remedy) in &remedies {
            match remedy {
                Remedy::Domain(domain, methods) => {
                    let slot = entries
                        .entry(domain.clone())
                        .or_insert_with(|| Some(BTreeSet::new()));
                    match (slot.as_mut(), methods) {
                        (Some(set), Some(ms)) => set.extend(ms.iter().cloned()),
                        _ => *slot = None,
                    }
                }
                Remedy::LocalPort(port) => {
                    loopback_ports.insert(*port);
                }
                Remedy::Never => {
                    unreachable.insert(d.host.as_str());
                }
                Remedy::Nothing => {}
            }
        }
        if !entries.is_empty() {
            out.push_str("To allow them, set these allowedDomains entries:\n");
            let mut flags = Vec::new();
            for (domain, methods) in &entries {
                let methods = methods.as_ref().map(sorted_methods);
                out.push_str(&format!("  {}\n", domain_entry(domain, methods.as_deref())));
                flags.push(domain_flag(domain, methods.as_deref()));
            }
            out.push_str(&format!("or on the command line: {}\n", flags.join(" ")));
        }
        if !loopback_ports.is_empty() {
            let ports: Vec<String> = loopback_ports.iter().map(u16::to_string).collect();
            let flags: Vec<String> = loopback_ports.iter().map(|p| local_port_flag(*p)).collect();
            out.push_str(&format!(
                "Names that resolve to this host's loopback need allowedLocalPorts = [ {} ]; ({}).\n",
                ports.join(" "),
                flags.join(" ")
            ));
        }
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
        out.push_str(&counted_lines(self.failures.iter().map(|f| {
            format!("  {} {}:{}: {}", f.method, f.host, f.port, f.message)
        })));
        out
    }
}

/// Summary lines, each once in first-seen order with ` xN` when repeated; the first 20, then
/// how many more.
fn counted_lines(lines: impl Iterator<Item = String>) -> String {
    const SHOWN: usize = 20;
    let mut seen: Vec<(String, usize)> = Vec::new();
    for line in lines {
        match seen.iter_mut().find(|(l, _)| *l == line) {
            Some((_, n)) => *n += 1,
            None => seen.push((line, 1)),
        }
    }
    let mut out = String::new();
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
    fn an_unknown_method_gets_no_advice_and_a_bounded_notice() {
        let huge = "X".repeat(60_000);
        for code in [codes::BLOCKED_BY_ALLOWLIST, codes::METHOD_NOT_ALLOWED] {
            let d = denial(&huge, "api.example.org", 443, "/", code);
            assert_eq!(d.would_allow, None, "{code}");
            assert_eq!(d.remedy(), Remedy::Nothing, "{code}");
        }
        // The proxy records the method through `printable`, which bounds it.
        let mut d = denial(
            &huge,
            "blocked.example",
            80,
            "/",
            codes::BLOCKED_BY_ALLOWLIST,
        );
        d.method = printable(&huge);
        assert!(d.notice().len() < 400, "{}", d.notice().len());
        let mut summary = Summary::default();
        summary.denials.push(d);
        assert!(summary.render().len() < 1_000, "{}", summary.render().len());
    }

    #[test]
    fn each_remedy_in_the_sentence_and_the_notice() {
        let cases = [
            (
                denial(
                    "CONNECT",
                    "evil.test",
                    443,
                    "-",
                    codes::BLOCKED_BY_ALLOWLIST,
                ),
                "allow it with --allow-domain evil.test or allowedDomains = { \"evil.test\" = \"*\"; }",
                "evil.test",
            ),
            (
                denial(
                    "DELETE",
                    "www.example.net",
                    443,
                    "/x",
                    codes::METHOD_NOT_ALLOWED,
                ),
                "allow it with --allow-domain www.example.net=GET,HEAD,DELETE or allowedDomains = { \"www.example.net\" = [ \"GET\" \"HEAD\" \"DELETE\" ]; }",
                "DELETE www.example.net",
            ),
            (
                denial(
                    "CONNECT",
                    "db.example.org",
                    443,
                    "-",
                    codes::PRIVATE_ADDRESS,
                ),
                "allow it with --allow-local-port 5432 or allowedLocalPorts = [ 5432 ];",
                "db.example.org",
            ),
        ];
        for (mut d, advice, what) in cases {
            d.message = "why".into();
            assert_eq!(
                d.sentence(),
                format!("Blocked by agent-sandbox: why ({advice})")
            );
            assert_eq!(
                d.notice(),
                format!("agent-sandbox: blocked {what} ({}); {advice}", d.code)
            );
        }
        // Nothing would allow it: the reason, and that no setting helps.
        let mut d = denial(
            "CONNECT",
            "lan.example.org",
            443,
            "-",
            codes::PRIVATE_ADDRESS,
        );
        d.message = "lan.example.org resolves only to non-public addresses (10.0.0.1)".into();
        assert_eq!(d.remedy(), Remedy::Never);
        assert_eq!(
            d.sentence(),
            "Blocked by agent-sandbox: lan.example.org resolves only to non-public addresses (10.0.0.1) (no setting allows it)"
        );
        assert_eq!(
            d.notice(),
            "agent-sandbox: blocked lan.example.org (private-address): lan.example.org resolves only to non-public addresses (10.0.0.1); no setting allows it"
        );
        // No setting is involved: the reason alone.
        let mut d = denial("GET", "api.example.org", 443, "/", codes::HOST_MISMATCH);
        d.message = "request for x inside a tunnel opened for api.example.org".into();
        assert_eq!(d.remedy(), Remedy::Nothing);
        assert_eq!(
            d.sentence(),
            "Blocked by agent-sandbox: request for x inside a tunnel opened for api.example.org"
        );
        assert_eq!(
            d.notice(),
            "agent-sandbox: blocked GET api.example.org (host-mismatch): request for x inside a tunnel opened for api.example.org"
        );
    }

    #[test]
    fn notices_once_per_host_and_bounded() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        let events = Events::new(
            None,
            Some(Notify(Arc::new(move |l: &str| {
                sink.lock().unwrap().push(l.to_string())
            }))),
        );
        events.deny(denial(
            "CONNECT",
            "a.test",
            443,
            "-",
            codes::BLOCKED_BY_ALLOWLIST,
        ));
        events.deny(denial(
            "GET",
            "a.test",
            80,
            "/",
            codes::BLOCKED_BY_ALLOWLIST,
        ));
        events.deny(denial(
            "CONNECT",
            "b.test",
            443,
            "-",
            codes::BLOCKED_BY_ALLOWLIST,
        ));
        assert_eq!(lines.lock().unwrap().len(), 2);
        assert!(lines.lock().unwrap()[1].starts_with("agent-sandbox: blocked b.test "));
        for i in 0..2 * MAX_NOTICES {
            let host = format!("h{i}.test");
            events.deny(denial(
                "CONNECT",
                &host,
                443,
                "-",
                codes::BLOCKED_BY_ALLOWLIST,
            ));
        }
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), MAX_NOTICES + 1);
        assert_eq!(
            lines.last().unwrap(),
            "agent-sandbox: blocked more than 100 hosts; the others are listed at exit"
        );
        // Every denial still reaches the summary.
        assert_eq!(events.summary().denials.len(), 3 + 2 * MAX_NOTICES);
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
