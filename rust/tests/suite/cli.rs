//! The command line itself: help, exit codes, errors.
use crate::common::*;

#[test]
fn runs_a_command_and_returns_its_status() {
    let f = Fixture::new();
    assert_eq!(ok(f.sh(&[], "echo hello")), "hello\n");
    assert_eq!(run(f.sh(&[], "exit 42")).code, 42);
}
