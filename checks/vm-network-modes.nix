# On NixOS, the network modes hold for a normal user: allowedDomains = [ ] reaches nothing (no
# route, no DNS, no host loopback) except the allowedLocalPorts bridge; open mode has its own
# default route, reaches the (fake) internet node, and neither the host's loopback nor the
# host's own address. tests/nix/behaviour.sh's "network" group, in a VM with a second node.
{ pkgs, ... }:
import ../tests/nix/vm-behaviour.nix {
  inherit pkgs;
  name = "agent-sandbox-vm-network-modes";
  group = "network";
  withInternet = true;
}
