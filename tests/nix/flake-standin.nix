# The flake's outputs, evaluated with the stand-in package set (checks/host-pkgs) as nixpkgs,
# so tests/nix/build.sh can evaluate every output and build the checks that need no real
# nixpkgs (the evaluation tests, the schema check). The source is the working tree, filtered.
let
  system = builtins.currentSystem;
  standIn = ../../checks/host-pkgs;
  lib = import (standIn + "/lib.nix");
  nixpkgs = {
    outPath = standIn;
    inherit lib;
    legacyPackages = lib.genAttrs [
      "x86_64-linux"
      "aarch64-linux"
      "x86_64-darwin"
      "aarch64-darwin"
    ] (s: import standIn { system = s; });
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
