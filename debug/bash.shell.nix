# A sandboxed bash with an agent's policy, for poking around: what does the agent see, what
# can it write, does the network answer?
#   nix-shell debug/bash.shell.nix   (or `nix develop` in this repository), then: bash-sandboxed
#   nix run .#bash-sandboxed
# The launch directory read-write, an empty $HOME, `commonTools` (plus curl and ip) from the
# store, open network; bash runs with --norc --noprofile, like any bash that is the program.
{
  pkgs ? import <nixpkgs> { },
  sandbox ? import ../. { inherit pkgs; },
}:
let
  bash-sandboxed = sandbox.mkSandbox {
    pkg = pkgs.bashInteractive;
    binName = "bash";
    outName = "bash-sandboxed";
    allowedPackages = sandbox.commonTools ++ [
      pkgs.curl
      pkgs.iproute2
    ];
    env.PS1 = "[sandbox \\w]> ";
  };
in
pkgs.mkShell {
  packages = [ bash-sandboxed ];
  shellHook = ''
    echo "bash-sandboxed: a bash with an agent's policy (see debug/bash.shell.nix)"
  '';
  passthru.sandbox = bash-sandboxed;
}
