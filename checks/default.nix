# The flake's checks, one scenario per file, named after the behaviour it proves. Wiring only.
# Linux runs the NixOS VM tests; macOS the build and profile check (sandbox-exec cannot nest
# inside the Nix build sandbox).
{
  pkgs,
  self,
  nixpkgs,
}:
let
  system = pkgs.stdenv.hostPlatform.system;
  args = {
    inherit pkgs self nixpkgs;
    sandbox = self.lib.${system};
    agent-sandbox = self.packages.${system}.default;
  };
  call = file: import file args;
in
{
  eval-arguments-and-errors = call ./eval-arguments-and-errors.nix;
  helper-unit-tests = call ./helper-unit-tests.nix;
}
// call ./templates-build.nix
// pkgs.lib.optionalAttrs pkgs.stdenv.hostPlatform.isLinux {
  # Its fixtures use Linux packages (bubblewrap, iproute2).
  spec-matches-schema = call ./spec-matches-schema.nix;
  vm-isolation = call ./vm-isolation.nix;
  vm-network-modes = call ./vm-network-modes.nix;
}
// pkgs.lib.optionalAttrs pkgs.stdenv.hostPlatform.isDarwin {
  darwin-build-and-profile = call ./darwin-build-and-profile.nix;
}
