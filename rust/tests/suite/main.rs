//! Integration suite: drives the real `agent-sandbox` binary with real bubblewrap and attempts
//! the escapes a YOLO-mode agent would try. One binary, topical modules.
//!
//! `AGENT_SANDBOX_BIN` overrides the binary under test (used to run this suite as an
//! unprivileged user from a copy, see scripts/test).

mod common;

mod bind_race;
mod cli;
mod command;
mod denials;
mod doctor;
mod environment;
mod filesystem;
mod git;
mod guard;
mod home_launch;
mod identity;
mod launcher;
mod network;
mod nix_daemon;
mod pid1;
mod policy;
mod protect;
mod quarantine;
mod session;
mod sessionlog;
mod setid;
mod signals;
mod sockets;
mod store_links;
mod symlinks;
mod terminal;
mod usage;
