# The flake's outputs, evaluated with the stand-in package set (tests/nix/host-pkgs) as nixpkgs,
# so tests/nix/build.sh can evaluate every output and build the checks that need no real
# nixpkgs (the evaluation tests, the schema check). The source is the working tree, filtered.
let
  system = builtins.currentSystem;
  # The stand-in's own flake outputs, as `--override-input nixpkgs path:./tests/nix/host-pkgs` gives.
  standIn = ./host-pkgs;
  nixpkgs = (import (standIn + "/flake.nix")).outputs { self = nixpkgs; } // {
    outPath = standIn;
  };
  source = builtins.path {
    name = "source";
    path = ../..;
    filter =
      path: type:
      !(builtins.elem (baseNameOf path) [
        ".git"
        "target"
        "result"
      ]);
  };
  self = (import ../../flake.nix).outputs { inherit self nixpkgs; } // {
    outPath = source;
  };
in
self
// {
  inherit system;
  # Output names per kind, for the structure test.
  names = {
    lib = builtins.attrNames self.lib.${system};
    packages = builtins.attrNames self.packages.${system};
    devShells = builtins.attrNames self.devShells.${system};
    templates = builtins.attrNames self.templates;
    checks = builtins.attrNames self.checks.${system};
    systems = builtins.attrNames self.packages;
  };
}
