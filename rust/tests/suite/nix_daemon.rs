//! allowNix: the agent uses the host's Nix daemon; the store is visible read-only; a user the
//! daemon trusts must confirm on the terminal. Needs a running nix-daemon (scripts/test starts
//! one); skips loudly otherwise.

use crate::common::*;
use crate::guard::{answer_on_tty, without_tty};

fn daemon_socket() -> Option<String> {
    let s = "/nix/var/nix/daemon-socket/socket".to_string();
    if std::path::Path::new(&s).exists() && std::path::Path::new("/usr/bin/nix-store").exists() {
        Some(s)
    } else {
        eprintln!("SKIPPED: no Nix daemon (scripts/test starts one as root)");
        None
    }
}

/// Adds a file to the store through the daemon from inside and reads it back.
const ADD_AND_READ: &str = "echo from-the-sandbox > /tmp/payload && p=$(nix-store --add /tmp/payload) && \
     case $p in /nix/store/*-payload) cat \"$p\";; *) echo \"bad path $p\";; esac && \
     (touch /nix/store/x 2>/dev/null && echo store-writable || echo store-read-only) && \
     echo \"$NIX_REMOTE\"";

#[test]
fn allow_nix_reaches_the_daemon_and_the_store_stays_read_only() {
    if daemon_socket().is_none() {
        return;
    }
    let f = Fixture::new();
    let c = f.sh(&["--allow-nix"], ADD_AND_READ);
    let out = if is_root() {
        // root is a trusted user by default: the sandbox asks first.
        match answer_on_tty(c, b"y\n") {
            Some((o, tty)) => {
                assert!(tty.contains("trusted user of the Nix daemon"), "{tty}");
                assert_eq!(o.code, 0, "{o:?}");
                o.stdout
            }
            None => return,
        }
    } else {
        ok(c)
    };
    assert_eq!(out, "from-the-sandbox\nstore-read-only\ndaemon\n");
}

#[test]
fn without_allow_nix_the_daemon_is_unreachable() {
    if daemon_socket().is_none() {
        return;
    }
    let f = Fixture::new();
    let out = ok(f.sh(
        &[],
        "ls /nix/var/nix/daemon-socket/socket 2>/dev/null || echo no-socket; ls /nix/store 2>/dev/null | wc -l",
    ));
    assert_eq!(out, "no-socket\n0\n");
}

#[test]
fn a_trusted_user_without_a_terminal_is_refused() {
    if daemon_socket().is_none() {
        return;
    }
    if !is_root() {
        eprintln!("SKIPPED: only root is a trusted user of the test daemon");
        return;
    }
    let f = Fixture::new();
    let marker = f.proj.join("ran");
    let mut c = f.sh(&["--allow-nix"], &format!("touch {}", marker.display()));
    c.stdin(std::process::Stdio::null());
    without_tty(&mut c);
    let o = run(c);
    assert_eq!(o.code, 125, "{o:?}");
    assert!(
        o.stderr.contains(
            "refusing allowNix without confirmation: root is a trusted user of the Nix daemon"
        ),
        "{o:?}"
    );
    assert!(!marker.exists());
}

#[test]
fn allow_nix_with_a_filtered_network_warns_about_daemon_downloads() {
    if daemon_socket().is_none() {
        return;
    }
    let f = Fixture::new();
    let o = run(f.sh(&["--allow-nix", "--no-network", "--dry-run"], "true"));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("ro      /nix/store"), "{o:?}");
    assert!(o.stdout.contains("NIX_REMOTE=\"daemon\""), "{o:?}");
    assert!(
        o.stdout.contains(
            "its own downloads (substituters, fetchers) are not limited by allowedDomains"
        ),
        "{o:?}"
    );
}
