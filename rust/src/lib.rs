//! agent-sandbox: run AI coding agents in a declarative sandbox.
//!
//! Input flows in two phases: `spec` (deserialised, validated, nothing touched) → `plan`
//! (canonical paths, checked symlinks, git layout). The backends derive their argv from the plan.
pub mod bridge;
pub mod cli;
pub mod command;
pub mod doctor;
pub mod entry;
pub mod flags;
pub mod git;
pub mod guard;
pub mod host;
pub mod inside;
pub mod launch;
pub mod linux;
pub mod macos;
pub mod manual;
pub mod nixstore;
pub mod plan;
pub mod policy_doc;
pub mod protect;
pub mod proxy;
pub mod quarantine;
pub mod report;
pub mod session;
pub mod sessionlog;
pub mod sockets;
pub mod spec;
pub mod symlinks;
pub mod tools;
pub mod utc;
