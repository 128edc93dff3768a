# On NixOS, a normal user's sandbox sees an empty $HOME with only the declared paths (read-write
# or read-only as declared, $HOME expanded at launch), the launch directory read-write, exactly
# its closure in /nix/store, and the declared environment (launch-time values expanded, never
# stored); ~/.ssh stays invisible. tests/nix/behaviour.sh's "isolation" group, in a VM.
{ pkgs, ... }:
import ../tests/nix/vm-behaviour.nix {
  inherit pkgs;
  name = "agent-sandbox-vm-isolation";
  group = "isolation";
}
