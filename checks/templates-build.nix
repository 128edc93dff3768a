# Each template builds: its flake's outputs, evaluated with this repository as the
# agent-sandbox input and our nixpkgs, give packages.<system>.default (the sandboxed agent).
# Returns one check per template: template-claude, template-copilot, …
{
  pkgs,
  self,
  nixpkgs,
  ...
}:
let
  system = pkgs.stdenv.hostPlatform.system;
  build =
    name:
    let
      dir = ../templates + "/${name}";
      outputs = (import (dir + "/flake.nix")).outputs {
        self = outputs // {
          outPath = dir;
        };
        inherit nixpkgs;
        agent-sandbox = self;
      };
    in
    outputs.packages.${system}.default;
  names = [
    "claude"
    "copilot"
    "codex"
    "gemini"
  ];
in
builtins.listToAttrs (
  map (name: {
    name = "template-${name}";
    value = build name;
  }) names
)
