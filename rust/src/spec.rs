//! The sandbox spec: the one JSON document the Nix library writes (and the CLI flags build).
//!
//! Phase one of input handling: deserialise with unknown fields denied, validate shapes and
//! values, touch nothing on disk. Resolution against the filesystem happens in `plan`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only spec version this helper understands.
pub const SPEC_VERSION: u32 = 1;

/// HTTP methods accepted in `allowedDomains` rules, in the order messages list them. The list
/// lives in `rust/shared/http-methods.json`, which `lib/internal/validate.nix` reads too.
pub static HTTP_METHODS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| shared_list(include_str!("../shared/http-methods.json")));

/// A JSON list of strings from `rust/shared/`, compiled in. The unit tests parse every such
/// file, so a malformed one fails `cargo test` rather than a launch.
pub(crate) fn shared_list(json: &'static str) -> Vec<&'static str> {
    serde_json::from_str(json).expect("a file in rust/shared/ is a JSON list of strings")
}

/// A sandbox description, as written by `mkSandbox` (Nix) or assembled from CLI flags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Spec {
    /// Format version; must be 1.
    pub version: u32,
    /// Name of the sandboxed command (used for the session directory and messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_name: Option<String>,
    /// Absolute path of the program to run; arguments given on the command line follow it.
    /// When absent, the command line names the program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Store paths exposed read-only (the closure). `null`/absent: host-system mode, where
    /// the host's `/usr`, `/bin`, `/lib*` and a few `/etc` entries are exposed instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closure: Option<Vec<String>>,
    /// `PATH` entries inside the sandbox, in order. Absent: the standard system directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Vec<String>>,
    /// Directories exposed read-write at their real paths.
    #[serde(default)]
    pub rw_dirs: Vec<String>,
    /// Files exposed read-write at their real paths.
    #[serde(default)]
    pub rw_files: Vec<String>,
    /// Directories exposed read-only at their real paths.
    #[serde(default)]
    pub ro_dirs: Vec<String>,
    /// Files exposed read-only at their real paths.
    #[serde(default)]
    pub ro_files: Vec<String>,
    /// Files or directories exposed read-write although programs on the host run or obey them
    /// (shell start-up files, git's global config, systemd user units, `PATH` directories…),
    /// which rwDirs/rwFiles keep read-only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rw_host_config: Vec<String>,
    /// Extra environment variables set inside the sandbox.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Let the agent use Nix (whole store read-only, daemon socket reachable).
    #[serde(default)]
    pub allow_nix: bool,
    /// `null`/absent: open network. A list or an attribute set: filtered through the proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_domains: Option<AllowedDomains>,
    /// Host loopback ports reachable from inside. Absent: none. `null`: those listening at launch.
    #[serde(default = "no_ports")]
    pub allowed_local_ports: Option<Vec<u32>>,
    /// Extra CA certificates (PEM files) trusted for upstream TLS by the proxy.
    #[serde(default)]
    pub upstream_ca_files: Vec<String>,
    /// Unix sockets (or directories whose sockets) the sandbox may connect to. Every other
    /// socket found in a declared directory is masked, and a declared socket is refused.
    #[serde(default)]
    pub allowed_sockets: Vec<String>,
    /// The directory exposed read-write in place of the launch directory, which is then not
    /// exposed; the command starts in it. Absent: the launch directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_dir: Option<String>,
}

fn no_ports() -> Option<Vec<u32>> {
    Some(Vec::new())
}

/// `allowedDomains`: a list of domains (every method allowed) or domain → rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AllowedDomains {
    /// Domains allowed with every method.
    List(Vec<String>),
    /// Domain → `"*"` or a list of HTTP methods.
    Rules(BTreeMap<String, MethodRule>),
}

/// Methods allowed for one domain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum MethodRule {
    /// `"*"`: every method, tunnelled without interception.
    Any(String),
    /// Only these HTTP methods (upper case), enforced by intercepting TLS.
    Methods(Vec<String>),
}

/// Why a spec was rejected. Every message names what was given, what was expected, and the fix.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read spec file {path}: {source}. Fix: pass an existing, readable JSON file")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "spec {path} is not a valid sandbox spec: {source}. Expected the JSON format of `agent-sandbox schema`"
    )]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, SpecError>;

impl Spec {
    /// An empty spec for plain CLI use (host-system mode, open network).
    pub fn new() -> Self {
        Spec {
            version: SPEC_VERSION,
            allowed_local_ports: no_ports(),
            ..Default::default()
        }
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::from_json(&text, &shown)
    }

    pub fn from_json(text: &str, origin: &str) -> Result<Self> {
        let spec: Spec = serde_json::from_str(text).map_err(|source| SpecError::Parse {
            path: origin.to_string(),
            source,
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// Shape and value checks that need no filesystem. All problems are reported together.
    pub fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        if self.version != SPEC_VERSION {
            problems.push(format!(
                "version is {}, expected {SPEC_VERSION}; regenerate the spec with a matching mkSandbox",
                self.version
            ));
        }
        if let Some(name) = &self.out_name {
            if name.is_empty() || name.contains('/') || name.chars().any(char::is_control) {
                problems.push(format!(
                    "outName {name:?} must be a non-empty file name without '/' or control characters"
                ));
            }
        }
        if let Some(p) = &self.program {
            if !p.starts_with('/') {
                problems.push(format!("program {p:?} must be an absolute path"));
            }
        }
        if let Some(closure) = &self.closure {
            for p in closure {
                if !p.starts_with('/') {
                    problems.push(format!("closure entry {p:?} must be an absolute path"));
                }
            }
        }
        if let Some(path) = &self.path {
            for p in path {
                if !p.starts_with('/') || p.contains(':') {
                    problems.push(format!(
                        "path entry {p:?} must be an absolute directory without ':'"
                    ));
                }
            }
        }
        for (field, list) in [
            ("rwDirs", &self.rw_dirs),
            ("rwFiles", &self.rw_files),
            ("roDirs", &self.ro_dirs),
            ("roFiles", &self.ro_files),
            ("rwHostConfig", &self.rw_host_config),
            ("upstreamCaFiles", &self.upstream_ca_files),
            ("allowedSockets", &self.allowed_sockets),
        ] {
            for p in list {
                if p.is_empty() || p.contains('\0') {
                    problems.push(format!("{field} entry {p:?} must be a non-empty path"));
                }
            }
        }
        if let Some(w) = &self.workspace_dir {
            // Fail closed: "" would silently stand for the launch directory, which a workspace
            // is there to replace (a `"$WS"` whose variable was unset at launch).
            if w.is_empty() || w.contains('\0') {
                problems.push(format!(
                    "workspaceDir {w:?} must be a non-empty path (was it a variable, unset at launch?)"
                ));
            }
        }
        for (name, value) in &self.env {
            if !valid_env_name(name) {
                problems.push(format!(
                    "env name {name:?} is not a valid variable name (expected letters, digits and '_', not starting with a digit)"
                ));
            }
            if value.contains('\0') {
                problems.push(format!("env {name} contains a NUL byte"));
            }
        }
        if let Some(domains) = &self.allowed_domains {
            problems.extend(validate_domains(domains));
        }
        if let Some(ports) = &self.allowed_local_ports {
            let bad: Vec<String> = ports
                .iter()
                .filter(|p| !(1..=65535).contains(*p))
                .map(|p| p.to_string())
                .collect();
            if !bad.is_empty() {
                problems.push(format!(
                    "allowedLocalPorts has {} outside 1..65535; expected port numbers, or null for the ports listening at launch",
                    bad.join(", ")
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SpecError::Invalid(format!(
                "invalid sandbox spec: {}",
                problems.join("; ")
            )))
        }
    }
}

pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The domain-name rule of `allowedDomains` and of the proxy's host matching (for a name without
/// its trailing dot): labels of ASCII letters, digits, '-' and '_', 1..63 bytes, not starting or
/// ending with '-', at most 253 bytes in all. `lib/internal/validate.nix` has the same rule as a
/// regex; both sides are tested against `rust/shared/domain-cases.json`.
pub fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        })
}

/// Lower-case, strip one trailing dot; `None` if it is not a plausible host name or IP literal.
pub fn normalize_domain(domain: &str) -> Option<String> {
    let d = domain
        .strip_suffix('.')
        .unwrap_or(domain)
        .to_ascii_lowercase();
    let ok = is_dns_name(&d);
    let ip = d
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok();
    (ok || ip).then_some(d)
}

/// Suffixes under which unrelated parties register names (`co.uk`, `github.io`): allowing one
/// would allow every site under it, since a rule covers its subdomains. The common multi-label
/// ones of the Public Suffix List, from `rust/shared/public-suffixes.json` (which
/// `lib/internal/validate.nix` reads too); every single label other than `localhost` is refused
/// on its own, so top-level domains need no list.
pub static PUBLIC_SUFFIXES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| shared_list(include_str!("../shared/public-suffixes.json")));

/// What is wrong with one `allowedDomains` entry, if anything: the text after "allowedDomains
/// entry NAME". `lib/internal/validate.nix` (`domainProblem`) words it the same way.
fn domain_problem(d: &str) -> Option<String> {
    if !d.is_ascii() {
        return Some(format!(
            "{d:?} is an internationalised name; write it in its ASCII (punycode) form, which starts with xn-- (e.g. \"bücher.example\" is \"xn--bcher-kva.example\"; python3 -c 'print({d:?}.encode(\"idna\").decode())' prints yours)"
        ));
    }
    let Some(name) = normalize_domain(d) else {
        return Some(format!(
            "{d:?} is not a domain name (expected e.g. \"api.anthropic.com\"; no scheme, port, path or wildcard)"
        ));
    };
    if ip_literal(&name).is_some() || name == "localhost" {
        return None;
    }
    // Fail closed: a rule covers every name under it, so a suffix would open whole registries.
    if !name.contains('.') {
        return Some(format!(
            "{d:?} is a single label (a top-level domain): it would allow every name under it; expected a registrable domain such as \"example.com\", or a host name in it"
        ));
    }
    if PUBLIC_SUFFIXES.contains(&name.as_str()) {
        return Some(format!(
            "{d:?} is a public suffix: it would allow every site registered under it; expected a registrable domain such as \"example.{name}\", or a host name in it"
        ));
    }
    None
}

fn ip_literal(name: &str) -> Option<std::net::IpAddr> {
    name.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The warning for entries naming loopback (`localhost`, `127.0.0.1`, `::1`): clients never send
/// them to the proxy (`NO_PROXY`), and inside the sandbox they are its own loopback; the host's
/// services are reached through bridged ports (the entry matters only to a client that ignores
/// `NO_PROXY`).
pub fn loopback_domains_warning(domains: Option<&AllowedDomains>) -> Option<String> {
    let names: Vec<&String> = match domains? {
        AllowedDomains::List(list) => list.iter().collect(),
        AllowedDomains::Rules(rules) => rules.keys().collect(),
    };
    let loopback: Vec<String> = names
        .into_iter()
        .filter(|d| {
            normalize_domain(d).is_some_and(|n| {
                n == "localhost" || ip_literal(&n).is_some_and(|ip| ip.is_loopback())
            })
        })
        .map(|d| format!("{d:?}"))
        .collect();
    (!loopback.is_empty()).then(|| {
        format!(
            "allowedDomains has {}: clients do not send loopback to the proxy (NO_PROXY lists it), and inside the sandbox it is the sandbox's own loopback. To reach a service listening on the host's loopback, bridge its port: --allow-local-port PORT (allowedLocalPorts in mkSandbox)",
            loopback.join(", ")
        )
    })
}

fn validate_domains(domains: &AllowedDomains) -> Vec<String> {
    let mut problems = Vec::new();
    let check_domain = |d: &str, problems: &mut Vec<String>| {
        if let Some(p) = domain_problem(d) {
            problems.push(format!("allowedDomains entry {p}"));
        }
    };
    match domains {
        AllowedDomains::List(list) => {
            for d in list {
                check_domain(d, &mut problems);
            }
        }
        AllowedDomains::Rules(rules) => {
            for (d, rule) in rules {
                check_domain(d, &mut problems);
                match rule {
                    MethodRule::Any(s) if s == "*" => {}
                    MethodRule::Any(s) => problems.push(format!(
                        "allowedDomains.{d:?} is {s:?}; expected \"*\" or a list of HTTP methods"
                    )),
                    MethodRule::Methods(m) if m.is_empty() => problems.push(format!(
                        "allowedDomains.{d:?} is an empty list; expected \"*\" or at least one HTTP method (remove the domain to block it)"
                    )),
                    MethodRule::Methods(methods) => {
                        for m in methods {
                            if !HTTP_METHODS.contains(&m.as_str()) {
                                problems.push(format!(
                                    "allowedDomains.{d:?} has unknown method {m:?}; expected one of {}",
                                    HTTP_METHODS.join(", ")
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    problems
}

/// The JSON Schema of the spec, as committed in `rust/spec.schema.json`.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(Spec);
    let mut s = serde_json::to_string_pretty(&schema).expect("schema serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_spec_defaults() {
        let s = Spec::from_json(r#"{"version":1}"#, "t").unwrap();
        assert_eq!(s, Spec::new());
        assert_eq!(s.allowed_local_ports, Some(vec![]));
    }

    #[test]
    fn null_ports_means_all() {
        let s = Spec::from_json(r#"{"version":1,"allowedLocalPorts":null}"#, "t").unwrap();
        assert_eq!(s.allowed_local_ports, None);
    }

    #[test]
    fn unknown_field_rejected() {
        let e = Spec::from_json(r#"{"version":1,"extraEnv":{}}"#, "s.json").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("spec s.json is not a valid sandbox spec: unknown field `extraEnv`"),
            "{msg}"
        );
    }

    #[test]
    fn all_problems_reported_together() {
        let e = Spec::from_json(
            r#"{"version":2,"allowedLocalPorts":[0,80,70000],"env":{"1X":"v"},
                "allowedDomains":{"a.com":[],"b.com":["FETCH"],"c.com":"all","http://x":"*"}}"#,
            "t",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid sandbox spec: version is 2, expected 1; regenerate the spec with a matching mkSandbox; \
env name \"1X\" is not a valid variable name (expected letters, digits and '_', not starting with a digit); \
allowedDomains.\"a.com\" is an empty list; expected \"*\" or at least one HTTP method (remove the domain to block it); \
allowedDomains.\"b.com\" has unknown method \"FETCH\"; expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT; \
allowedDomains.\"c.com\" is \"all\"; expected \"*\" or a list of HTTP methods; \
allowedDomains entry \"http://x\" is not a domain name (expected e.g. \"api.anthropic.com\"; no scheme, port, path or wildcard); \
allowedLocalPorts has 0, 70000 outside 1..65535; expected port numbers, or null for the ports listening at launch"
        );
    }

    #[test]
    fn domains_normalised() {
        assert_eq!(
            normalize_domain("API.Example.COM."),
            Some("api.example.com".into())
        );
        assert_eq!(normalize_domain("127.0.0.1"), Some("127.0.0.1".into()));
        assert_eq!(normalize_domain("*.example.com"), None);
        assert_eq!(normalize_domain("example.com:443"), None);
        assert_eq!(normalize_domain(""), None);
    }

    /// The cases `tests/nix/cases.nix` runs through the Nix library's rule too.
    #[test]
    fn domain_rule_matches_the_shared_cases() {
        let cases: serde_json::Value =
            serde_json::from_str(include_str!("../shared/domain-cases.json")).unwrap();
        let list = |v: &serde_json::Value| -> Vec<String> {
            serde_json::from_value(v.clone()).expect("a list of strings")
        };
        let valid = list(&cases["valid"]);
        let mut invalid = list(&cases["invalid"]);
        invalid.extend(list(&cases["nixAcceptsHelperRefuses"]["cases"]));
        assert!(valid.len() > 10 && invalid.len() > 10);
        for d in &valid {
            assert!(normalize_domain(d).is_some(), "{d:?} should be accepted");
        }
        for d in &invalid {
            assert_eq!(normalize_domain(d), None, "{d:?} should be refused");
        }
        let too_broad = list(&cases["tooBroad"]);
        assert!(too_broad.len() > 5);
        for d in &valid {
            assert_eq!(domain_problem(d), None, "{d:?} should be accepted");
        }
        for d in invalid.iter().chain(&too_broad) {
            assert!(domain_problem(d).is_some(), "{d:?} should be refused");
        }
    }

    /// Issue 11: `--allow-domain com` allowed every .com site (a rule covers its subdomains).
    #[test]
    fn single_labels_public_suffixes_and_idns_are_refused_with_the_fix() {
        let spec = |d: &str| {
            let mut s = Spec::new();
            s.allowed_domains = Some(AllowedDomains::List(vec![d.into()]));
            s.validate().map_err(|e| e.to_string())
        };
        assert_eq!(
            spec("com").unwrap_err(),
            "invalid sandbox spec: allowedDomains entry \"com\" is a single label (a top-level domain): it would allow every name under it; expected a registrable domain such as \"example.com\", or a host name in it"
        );
        assert_eq!(
            spec("Co.UK.").unwrap_err(),
            "invalid sandbox spec: allowedDomains entry \"Co.UK.\" is a public suffix: it would allow every site registered under it; expected a registrable domain such as \"example.co.uk\", or a host name in it"
        );
        assert_eq!(
            spec("bücher.example").unwrap_err(),
            "invalid sandbox spec: allowedDomains entry \"bücher.example\" is an internationalised name; write it in its ASCII (punycode) form, which starts with xn-- (e.g. \"bücher.example\" is \"xn--bcher-kva.example\"; python3 -c 'print(\"bücher.example\".encode(\"idna\").decode())' prints yours)"
        );
        for ok in [
            "example.co.uk",
            "user.github.io",
            "xn--bcher-kva.example",
            "localhost",
            "::1",
            "10.0.0.1",
        ] {
            assert_eq!(spec(ok), Ok(()), "{ok}");
        }
        for s in PUBLIC_SUFFIXES.iter() {
            assert!(is_dns_name(s) && s.contains('.'), "{s}: a multi-label name");
        }
    }

    #[test]
    fn loopback_entries_are_warned_about_with_the_port_flag() {
        let list = |v: &[&str]| AllowedDomains::List(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            loopback_domains_warning(Some(&list(&["localhost", "api.example.com", "127.0.0.1", "[::1]"]))),
            Some("allowedDomains has \"localhost\", \"127.0.0.1\", \"[::1]\": clients do not send loopback to the proxy (NO_PROXY lists it), and inside the sandbox it is the sandbox's own loopback. To reach a service listening on the host's loopback, bridge its port: --allow-local-port PORT (allowedLocalPorts in mkSandbox)".into())
        );
        assert_eq!(
            loopback_domains_warning(Some(&list(&["api.example.com", "127.1.example"]))),
            None
        );
        assert_eq!(loopback_domains_warning(None), None);
    }

    #[test]
    fn shared_lists_parse() {
        assert_eq!(HTTP_METHODS.first(), Some(&"GET"));
        assert_eq!(HTTP_METHODS.len(), 9);
        assert_eq!(crate::plan::CA_BUNDLE_VARS.first(), Some(&"SSL_CERT_FILE"));
        assert_eq!(crate::plan::CA_BUNDLE_VARS.len(), 7);
    }

    #[test]
    fn committed_schema_is_current() {
        let committed = include_str!("../spec.schema.json");
        assert!(
            committed == schema_json(),
            "rust/spec.schema.json is stale; regenerate it with `cargo run --bin agent-sandbox -- schema > spec.schema.json` (in rust/)"
        );
    }
}
