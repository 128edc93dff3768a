//! What both platforms' launches prepare the same way: the session directory (its policy file
//! and its shared part) with the placeholders the plan holds, the proxy and the session's CA bundle, the
//! sentinel of the exit sweep, the warnings.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::plan::{self, Plan};
use crate::session;

/// The session directory `base/name` with the sandbox's policy file, its shared part when the
/// plan binds it, and the placeholders the plan holds (created on the host, empty).
pub fn session_dir(plan: &Plan, base: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let dir = session::create(base, name)?;
    // Before the sandbox starts: it is bound read-only (Linux) or read in place (macOS).
    session::write_file(
        &dir,
        plan::POLICY_FILE,
        crate::policy_doc::render(plan).as_bytes(),
    )?;
    if plan.shares_session_dir() {
        session::create(&dir, plan::SESSION_SHARED_DIR)?;
    }
    create_placeholders(plan)?;
    Ok(dir)
}

/// The plan's warnings, once, on stderr.
pub fn print_warnings(plan: &Plan) {
    for w in &plan.warnings {
        eprintln!(
            "agent-sandbox: warning: {}",
            crate::report::terminal_safe(w)
        );
    }
}

/// The session line, right before the sandbox starts: where its logs are (`agent-sandbox
/// log` reads them). `--quiet` hides it.
pub fn announce(session_dir: &Path, quiet: bool) {
    if !quiet {
        eprintln!("agent-sandbox: session {}", session_dir.display());
    }
}

/// The end of the session at the end of its `launch.log`: the exit status, when, how long,
/// and the proxy's summary (`denials`: `None` without a proxy). Best effort: the command's
/// exit status is returned whether or not the log can be written.
pub fn record_ending(
    l: &super::Launch<'_>,
    session_dir: &Path,
    status: i32,
    setup_failed: bool,
    denials: Option<String>,
) {
    let ending = session::Ending {
        status,
        setup_failed,
        ended: crate::proxy::log::now(),
        duration: l.started.elapsed(),
        denials,
    };
    if let Err(e) = ending.append_to(session_dir) {
        eprintln!("agent-sandbox: warning: {e}");
    }
}

/// The exit sweep's spec (the session starts now) and its sentinel, which sweeps if this
/// process dies before it does (see `quarantine`).
pub fn start_sentinel(
    plan: &Plan,
    session_dir: &Path,
) -> anyhow::Result<(crate::quarantine::SweepSpec, crate::quarantine::Sentinel)> {
    let exe = std::env::current_exe().context("cannot locate the agent-sandbox executable")?;
    // Fail closed: without the sentinel a killed launcher would leave the agent's git
    // redirections and hooks for host git to obey.
    crate::quarantine::Sentinel::start(&exe, session_dir, plan.writable_sources(), plan.binds())
        .context("cannot start the exit sweep's sentinel process")
}

/// A first-denial notice on the launcher's stderr, which is the user's terminal shared with
/// the agent's interface: one line (the proxy made it printable ASCII), written at once so
/// it never interleaves with other output, no escape sequences.
fn notice(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Start the session's proxy and write the CA files the sandbox trusts. Unless `quiet`, the
/// first denial of each host is announced on this process's stderr as it happens.
pub fn start_proxy(
    plan: &Plan,
    rules: &std::collections::BTreeMap<String, Option<Vec<String>>>,
    session_dir: &Path,
    quiet: bool,
) -> anyhow::Result<crate::proxy::RunningProxy> {
    let proxy = crate::proxy::start(crate::proxy::ProxyConfig {
        rules: rules.clone(),
        upstream_ca_files: plan.upstream_ca_files.clone(),
        allowed_local_ports: plan.allowed_local_ports.clone(),
        log_path: Some(session_dir.join(session::PROXY_LOG)),
        on_first_denial: (!quiet).then(|| crate::proxy::Notify(std::sync::Arc::new(notice))),
        ..Default::default()
    })
    .context("cannot start the filtering proxy")?;
    write_trust(plan, session_dir, Some(&proxy.ca_pem))?;
    Ok(proxy)
}

/// Write the session's trust files (see [`plan::SESSION_CA_BUNDLE`]): the roots the sandbox
/// would trust anyway, the upstream CAs the user named, and the proxy's CA when there is one.
pub fn write_trust(plan: &Plan, session_dir: &Path, proxy_ca: Option<&str>) -> anyhow::Result<()> {
    let mut extra = String::new();
    for f in &plan.upstream_ca_files {
        let pem = crate::proxy::read_ca_file(f)
            .with_context(|| format!("cannot read the upstream CA file {}", f.display()))?;
        let pem = String::from_utf8_lossy(&pem);
        // Only the certificates go inside: a PEM file may hold the CA's private key as well.
        let certs = pem_certificates(&pem);
        // Fail closed: a CA the sandbox was told to trust but cannot is not silently dropped.
        if certs.is_empty() {
            bail!(
                "the upstream CA file {} holds no PEM certificate (no \"-----BEGIN CERTIFICATE-----\" line). Fix: give the CA certificate in PEM form (openssl x509 -in ca.der -inform der -out ca.pem)",
                f.display()
            );
        }
        push_pem(&mut extra, &certs);
    }
    if let Some(ca) = proxy_ca {
        push_pem(&mut extra, ca);
    }
    let mut bundle = match &plan.ca_bundle_source {
        Some(src) => std::fs::read_to_string(src).with_context(|| {
            format!(
                "cannot read the CA bundle {} to add the session's CAs to it. Fix: point SSL_CERT_FILE at a readable PEM bundle",
                src.display()
            )
        })?,
        None => String::new(),
    };
    push_pem(&mut bundle, &extra);
    let shared = session_dir.join(plan::SESSION_SHARED_DIR);
    // SSL_CERT_FILE replaces the default store: system roots plus our CAs in one file.
    session::write_file(&shared, plan::SESSION_CA_BUNDLE, bundle.as_bytes())?;
    // NODE_EXTRA_CA_CERTS adds to Node's roots: the CAs alone.
    session::write_file(&shared, plan::SESSION_EXTRA_CAS, extra.as_bytes())?;
    Ok(())
}

/// The `CERTIFICATE` blocks of a PEM text, each on lines of its own; nothing else (keys,
/// comments) is kept. A block is kept only when every line between its `BEGIN` and `END`
/// lines is base64: one whose `END` line is missing must not carry along the key after it.
fn pem_certificates(pem: &str) -> String {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let base64 = |l: &str| {
        l.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    };
    let mut out = String::new();
    let mut block: Option<String> = None;
    for line in pem.lines() {
        let line = line.trim_end_matches('\r');
        if line == BEGIN {
            block = Some(format!("{BEGIN}\n"));
        } else if let Some(b) = block.as_mut() {
            if line == END {
                out.push_str(b);
                out.push_str(END);
                out.push('\n');
                block = None;
            } else if base64(line) {
                b.push_str(line);
                b.push('\n');
            } else {
                // Fail closed: not a certificate's body; the block is dropped whole.
                block = None;
            }
        }
    }
    out
}

/// Append one PEM text to another, on a line of its own.
fn push_pem(to: &mut String, pem: &str) {
    if !to.is_empty() && !to.ends_with('\n') {
        to.push('\n');
    }
    to.push_str(pem);
}

fn create_placeholders(plan: &Plan) -> anyhow::Result<()> {
    use crate::git::PlaceholderKind;
    for (p, kind) in &plan.placeholders {
        let r = match kind {
            PlaceholderKind::Dir => std::fs::create_dir_all(p),
            PlaceholderKind::File => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map(|_| ()),
        };
        r.with_context(|| {
            format!(
                "cannot create the protected git placeholder {} (it keeps the agent from planting it)",
                p.display()
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nTUlJQ2Zh\na2U=\n-----END CERTIFICATE-----\n";

    #[test]
    fn only_whole_certificate_blocks_are_kept() {
        let key = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n";
        assert_eq!(pem_certificates(&format!("{key}subject=x\r\n{CERT}")), CERT);
        assert_eq!(pem_certificates(&CERT.replace('\n', "\r\n")), CERT);
        // Review 4: a block without its END line took along the key that followed, up to the
        // next certificate's END line.
        let torn = "-----BEGIN CERTIFICATE-----\nTUlJ\n";
        assert_eq!(pem_certificates(&format!("{torn}{key}{CERT}")), CERT);
        assert_eq!(pem_certificates(torn), "");
        let not_base64 = "-----BEGIN CERTIFICATE-----\nAWS_SECRET=abc\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_certificates(not_base64), "");
    }

    #[test]
    fn a_ca_file_that_is_no_regular_file_is_refused_without_waiting() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("ca.pem");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = crate::proxy::read_ca_file(&fifo).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let e = crate::proxy::read_ca_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let big = tmp.path().join("big.pem");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len((16 << 20) + 1).unwrap();
        let e = crate::proxy::read_ca_file(&big).unwrap_err();
        assert!(e.to_string().contains("too large for a CA file"), "{e}");
        std::fs::write(&big, CERT).unwrap();
        assert_eq!(crate::proxy::read_ca_file(&big).unwrap(), CERT.as_bytes());
    }
}
