# The helper's unit tests (`cargo test --lib`), run in the package's check phase. The
# integration suite needs user namespaces and runs in the VM checks and in scripts/test.
{ agent-sandbox, ... }:
agent-sandbox.overrideAttrs {
  doCheck = true;
  # Nix builds cannot create set-user-ID files (its seccomp filter refuses the chmod), which
  # this test plants; `cargo test` outside Nix (scripts/test) runs it.
  checkFlags = [ "--skip=quarantine::tests::new_executable_hooks_and_set_id_bits" ];
}
