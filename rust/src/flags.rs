//! Command-line flags that describe a sandbox (the same things a spec file declares), and how
//! they merge into the spec. `cli` flattens [`SpecFlags`] into `run`'s arguments.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};

use crate::spec::{AllowedDomains, MethodRule, Spec};

/// The flags of `agent-sandbox run` that add to the spec.
#[derive(clap::Args, Debug, Default)]
pub struct SpecFlags {
    /// Expose PATH (directory or file) read-write at its real location.
    #[arg(long, value_name = "PATH")]
    pub rw: Vec<String>,
    /// Expose PATH (directory or file) read-only at its real location.
    #[arg(long, value_name = "PATH")]
    pub ro: Vec<String>,
    /// Expose the directory DIR read-write (like --rw, but DIR must be a directory).
    #[arg(long, value_name = "DIR")]
    pub rw_dir: Vec<String>,
    /// Expose the file FILE read-write (like --rw, but FILE must be a file).
    #[arg(long, value_name = "FILE")]
    pub rw_file: Vec<String>,
    /// Expose the directory DIR read-only.
    #[arg(long, value_name = "DIR")]
    pub ro_dir: Vec<String>,
    /// Expose the file FILE read-only.
    #[arg(long, value_name = "FILE")]
    pub ro_file: Vec<String>,
    /// Expose PATH read-write although programs on the host run or obey it (~/.bashrc,
    /// ~/.config/git, ~/.config/systemd, a PATH directory…), which --rw keeps read-only.
    #[arg(long, value_name = "PATH")]
    pub rw_host_config: Vec<String>,
    /// Set an environment variable inside the sandbox; `--env NAME` passes on the launcher's
    /// value of NAME (keeps secrets off command lines).
    #[arg(long, value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// Read NAME=VALUE entries, separated by NUL bytes, from FILE (e.g. a `<(printf …)` pipe):
    /// how the Nix wrapper hands over values expanded at launch without a command line.
    #[arg(long, value_name = "FILE")]
    pub env_file: Vec<PathBuf>,
    /// Filter the network: allow DOMAIN (and its subdomains), optionally only some methods.
    #[arg(long, value_name = "DOMAIN[=METHOD,…]")]
    pub allow_domain: Vec<String>,
    /// No network at all.
    #[arg(long, conflicts_with = "allow_domain")]
    pub no_network: bool,
    /// Let the sandbox reach the host's 127.0.0.1:PORT.
    #[arg(long, value_name = "PORT")]
    pub allow_local_port: Vec<u32>,
    /// Let the sandbox reach every port listening on the host's loopback at launch (those
    /// below 1024 only through the proxy, with a warning).
    #[arg(long, conflicts_with = "allow_local_port")]
    pub allow_all_local_ports: bool,
    /// Let the agent use Nix (the store read-only, the daemon reachable).
    #[arg(long)]
    pub allow_nix: bool,
    /// Extra CA certificate (PEM) the proxy trusts for upstream TLS.
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Vec<String>,
    /// Let the sandbox connect to the Unix socket PATH (or to every socket under the directory
    /// PATH) in a declared path. Other sockets there are masked, and a declared socket is
    /// refused, since the service behind one acts outside the sandbox.
    #[arg(long, value_name = "PATH")]
    pub allow_socket: Vec<String>,
    /// Expose DIR read-write in place of the launch directory (which is then not exposed),
    /// and start the command in it.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<String>,
}

/// Merge the flags into the spec: they add to what the spec file declares (`--workspace`
/// replaces its `workspaceDir`). `--rw`/`--ro` look at the path to tell a file from a
/// directory, `--env-file` is read, and `env` answers `--env NAME` (the launcher's variables).
///
/// The warning for secret-looking values written as `--env NAME=VALUE`: command lines are
/// world-readable in /proc while agent-sandbox runs, and stay in shell history.
pub fn inline_secret_warning(a: &SpecFlags) -> Option<String> {
    let names: Vec<&str> = a
        .env
        .iter()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
        .filter(|k| crate::report::looks_secret(k))
        .collect();
    let first = names.first()?;
    Some(format!(
        "{} on the command line: the value is readable by every process while agent-sandbox runs (ps, /proc) and stays in your shell history. Fix: export {first}=… and pass --env {first} (the value is taken from agent-sandbox's environment), or use --env-file",
        names
            .iter()
            .map(|k| format!("--env {k}=…"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

pub fn merge(
    spec: &mut Spec,
    a: &SpecFlags,
    cwd: &Path,
    home: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<()> {
    for (list, rw) in [(&a.rw, true), (&a.ro, false)] {
        for p in list {
            // Anything but a directory (a socket, too) is a file; a missing path a directory.
            let is_file =
                std::fs::metadata(crate::plan::normalize(p, cwd, home)).is_ok_and(|m| !m.is_dir());
            let target = match (rw, is_file) {
                (true, false) => &mut spec.rw_dirs,
                (true, true) => &mut spec.rw_files,
                (false, false) => &mut spec.ro_dirs,
                (false, true) => &mut spec.ro_files,
            };
            target.push(from_here(p, cwd));
        }
    }
    spec.rw_dirs
        .extend(a.rw_dir.iter().map(|p| from_here(p, cwd)));
    spec.rw_files
        .extend(a.rw_file.iter().map(|p| from_here(p, cwd)));
    spec.ro_dirs
        .extend(a.ro_dir.iter().map(|p| from_here(p, cwd)));
    spec.ro_files
        .extend(a.ro_file.iter().map(|p| from_here(p, cwd)));
    spec.rw_host_config
        .extend(a.rw_host_config.iter().map(|p| from_here(p, cwd)));
    for kv in &a.env {
        match kv.split_once('=') {
            Some((k, v)) => {
                spec.env.insert(k.to_string(), v.to_string());
            }
            // `--env NAME` passes the launcher's value on without putting it on a command
            // line (those are world-readable in /proc): the way to hand over secrets.
            None => {
                let v = env(kv).ok_or_else(|| {
                    anyhow!(
                        "--env {kv:?}: {kv} is not set (or not UTF-8) in agent-sandbox's environment. Fix: export {kv}=… first, or write --env {kv}=VALUE"
                    )
                })?;
                spec.env.insert(kv.clone(), v);
            }
        }
    }
    for file in &a.env_file {
        let bytes = std::fs::read(file)
            .with_context(|| format!("cannot read --env-file {}", file.display()))?;
        for record in bytes.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let record = String::from_utf8_lossy(record);
            let (k, v) = record.split_once('=').ok_or_else(|| {
                anyhow!(
                    "--env-file {}: an entry is not NAME=VALUE (entries are separated by NUL bytes)",
                    file.display()
                )
            })?;
            spec.env.insert(k.to_string(), v.to_string());
        }
    }
    if a.no_network {
        if spec.allowed_domains.as_ref().is_some_and(|d| !is_empty(d)) {
            bail!("--no-network contradicts the spec's allowedDomains. Fix: drop one of them");
        }
        spec.allowed_domains = Some(AllowedDomains::List(vec![]));
    }
    if !a.allow_domain.is_empty() {
        let mut rules: std::collections::BTreeMap<String, MethodRule> =
            match spec.allowed_domains.take() {
                None => Default::default(),
                Some(AllowedDomains::List(l)) => l
                    .into_iter()
                    .map(|d| (d, MethodRule::Any("*".into())))
                    .collect(),
                Some(AllowedDomains::Rules(r)) => r,
            };
        for item in &a.allow_domain {
            let (domain, rule) = match item.split_once('=') {
                None => (item.clone(), MethodRule::Any("*".into())),
                Some((d, "*")) => (d.to_string(), MethodRule::Any("*".into())),
                Some((d, m)) => (
                    d.to_string(),
                    MethodRule::Methods(
                        m.split(',')
                            .map(|x| x.trim().to_ascii_uppercase())
                            .filter(|x| !x.is_empty())
                            .collect(),
                    ),
                ),
            };
            rules.insert(domain, rule);
        }
        spec.allowed_domains = Some(AllowedDomains::Rules(rules));
    }
    if a.allow_all_local_ports {
        spec.allowed_local_ports = None;
    } else if !a.allow_local_port.is_empty() {
        if let Some(p) = spec.allowed_local_ports.as_mut() {
            p.extend(&a.allow_local_port);
        }
    }
    spec.allow_nix |= a.allow_nix;
    spec.upstream_ca_files
        .extend(a.upstream_ca.iter().map(|p| from_here(p, cwd)));
    spec.allowed_sockets
        .extend(a.allow_socket.iter().map(|p| from_here(p, cwd)));
    if let Some(w) = &a.workspace {
        spec.workspace_dir = Some(w.clone());
    }
    spec.validate()?;
    Ok(())
}

/// A relative path given on the command line is relative to where the command was typed, also
/// when `--workspace` moves the launch directory elsewhere (a spec file's relative paths are
/// relative to the launch directory). `~` paths are left to the planner.
fn from_here(p: &str, cwd: &Path) -> String {
    if p.starts_with('/') || p == "~" || p.starts_with("~/") {
        p.to_string()
    } else {
        cwd.join(p).to_string_lossy().into_owned()
    }
}

fn is_empty(d: &AllowedDomains) -> bool {
    match d {
        AllowedDomains::List(l) => l.is_empty(),
        AllowedDomains::Rules(r) => r.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::collections::BTreeMap;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        flags: SpecFlags,
    }

    fn flags(args: &[&str]) -> SpecFlags {
        Cmd::parse_from(std::iter::once("run").chain(args.iter().copied())).flags
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn merged(spec: Spec, args: &[&str]) -> anyhow::Result<Spec> {
        let dir = tempfile::tempdir().unwrap();
        merged_in(spec, args, dir.path())
    }

    fn merged_in(mut spec: Spec, args: &[&str], cwd: &Path) -> anyhow::Result<Spec> {
        merge(&mut spec, &flags(args), cwd, cwd, no_env)?;
        Ok(spec)
    }

    #[test]
    fn rw_and_ro_sort_paths_by_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "").unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let s = merged_in(
            Spec::new(),
            &[
                "--rw",
                "f",
                "--rw",
                "d",
                "--rw",
                "missing",
                "--ro",
                "f",
                "--ro",
                "d",
                "--rw-dir",
                "x",
                "--ro-file",
                "y",
            ],
            dir.path(),
        )
        .unwrap();
        // Relative to where the command was typed, made absolute (see from_here).
        let at = |p: &str| dir.path().join(p).to_string_lossy().into_owned();
        assert_eq!(s.rw_files, [at("f")]);
        // A missing path is a directory: the planner then says it does not exist.
        assert_eq!(s.rw_dirs, [at("d"), at("missing"), at("x")]);
        assert_eq!(s.ro_files, [at("f"), at("y")]);
        assert_eq!(s.ro_dirs, [at("d")]);
    }

    #[test]
    fn home_and_absolute_paths_stay_as_given() {
        let s = merged(
            Spec::new(),
            &["--rw", "~/.claude", "--ro-dir", "/srv", "--rw", "~"],
        )
        .unwrap();
        assert_eq!(s.rw_dirs, ["~/.claude", "~"]);
        assert_eq!(s.ro_dirs, ["/srv"]);
    }

    #[test]
    fn flags_add_to_the_spec() {
        let mut spec = Spec::new();
        spec.rw_dirs = vec!["~/.claude".into()];
        spec.env.insert("A".into(), "spec".into());
        spec.upstream_ca_files = vec!["/etc/a.pem".into()];
        let s = merged(
            spec,
            &[
                "--rw-dir",
                "/srv",
                "--env",
                "A=flag",
                "--env",
                "B=2=3",
                "--upstream-ca",
                "/etc/b.pem",
                "--allow-socket",
                "/run/s",
                "--rw-host-config",
                "~/.bashrc",
                "--allow-nix",
            ],
        )
        .unwrap();
        assert_eq!(s.rw_dirs, ["~/.claude", "/srv"]);
        assert_eq!(
            s.env,
            BTreeMap::from([("A".into(), "flag".into()), ("B".into(), "2=3".into())])
        );
        assert_eq!(s.upstream_ca_files, ["/etc/a.pem", "/etc/b.pem"]);
        assert_eq!(s.allowed_sockets, ["/run/s"]);
        assert_eq!(s.rw_host_config, ["~/.bashrc"]);
        assert!(s.allow_nix);
    }

    #[test]
    fn env_name_alone_passes_the_launchers_value_or_fails_saying_how() {
        let mut spec = Spec::new();
        let f = flags(&["--env", "TOKEN"]);
        merge(&mut spec, &f, Path::new("/"), Path::new("/"), |k| {
            (k == "TOKEN").then(|| "secret".to_string())
        })
        .unwrap();
        assert_eq!(spec.env["TOKEN"], "secret");
        let e = merged(Spec::new(), &["--env", "TOKEN"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--env \"TOKEN\": TOKEN is not set") && e.contains("export TOKEN="),
            "{e}"
        );
    }

    /// Issue 11: a token written as `--env NAME=VALUE` is on a world-readable command line.
    #[test]
    fn secret_looking_inline_values_are_warned_about() {
        let w = inline_secret_warning(&flags(&[
            "--env",
            "GITHUB_TOKEN=ghp_x",
            "--env",
            "EDITOR=vi",
            "--env",
            "API_KEY",
            "--env",
            "DB_PASSWORD=p",
        ]))
        .unwrap();
        assert_eq!(
            w,
            "--env GITHUB_TOKEN=…, --env DB_PASSWORD=… on the command line: the value is readable by every process while agent-sandbox runs (ps, /proc) and stays in your shell history. Fix: export GITHUB_TOKEN=… and pass --env GITHUB_TOKEN (the value is taken from agent-sandbox's environment), or use --env-file"
        );
        assert!(!w.contains("ghp_x"));
        assert_eq!(
            inline_secret_warning(&flags(&["--env", "EDITOR=vi", "--env", "API_KEY"])),
            None
        );
    }

    #[test]
    fn env_files_hold_nul_separated_entries() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, b"A=1\0B=x=y\0\0").unwrap();
        let s = merged(Spec::new(), &["--env-file", good.to_str().unwrap()]).unwrap();
        assert_eq!(
            s.env,
            BTreeMap::from([("A".into(), "1".into()), ("B".into(), "x=y".into())])
        );
        let bad = dir.path().join("bad");
        std::fs::write(&bad, b"A=1\0oops\0").unwrap();
        let e = merged(Spec::new(), &["--env-file", bad.to_str().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("an entry is not NAME=VALUE"), "{e}");
    }

    #[test]
    fn allow_domain_merges_with_the_specs_domains() {
        let mut spec = Spec::new();
        spec.allowed_domains = Some(AllowedDomains::List(vec!["a.example".into()]));
        let s = merged(
            spec,
            &[
                "--allow-domain",
                "b.example=get, head",
                "--allow-domain",
                "c.example=*",
            ],
        )
        .unwrap();
        let any = || MethodRule::Any("*".into());
        assert_eq!(
            s.allowed_domains,
            Some(AllowedDomains::Rules(BTreeMap::from([
                ("a.example".into(), any()),
                (
                    "b.example".into(),
                    MethodRule::Methods(vec!["GET".into(), "HEAD".into()])
                ),
                ("c.example".into(), any()),
            ])))
        );
    }

    #[test]
    fn no_network_blocks_and_contradicts_domains() {
        let s = merged(Spec::new(), &["--no-network"]).unwrap();
        assert_eq!(s.allowed_domains, Some(AllowedDomains::List(vec![])));
        let mut spec = Spec::new();
        spec.allowed_domains = Some(AllowedDomains::List(vec!["a.example".into()]));
        let e = merged(spec, &["--no-network"]).unwrap_err().to_string();
        assert!(e.contains("--no-network contradicts"), "{e}");
    }

    #[test]
    fn local_ports_extend_or_open_all() {
        let mut spec = Spec::new();
        spec.allowed_local_ports = Some(vec![5432]);
        let s = merged(spec, &["--allow-local-port", "3000"]).unwrap();
        assert_eq!(s.allowed_local_ports, Some(vec![5432, 3000]));
        let s = merged(Spec::new(), &["--allow-all-local-ports"]).unwrap();
        assert_eq!(s.allowed_local_ports, None);
    }

    #[test]
    fn workspace_replaces_the_specs() {
        let mut spec = Spec::new();
        spec.workspace_dir = Some("/srv/a".into());
        let s = merged(spec.clone(), &[]).unwrap();
        assert_eq!(s.workspace_dir.as_deref(), Some("/srv/a"));
        let s = merged(spec, &["--workspace", "~/b"]).unwrap();
        assert_eq!(s.workspace_dir.as_deref(), Some("~/b"));
    }

    #[test]
    fn merged_specs_are_validated() {
        let e = merged(Spec::new(), &["--allow-domain", "https://x.example/"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a domain name"), "{e}");
    }
}
