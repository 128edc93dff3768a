/**
  The library: `mkSandbox` and `commonTools` for a package set. Wiring only.

  # Inputs

  `pkgs`
  : the nixpkgs package set to build with

  `agent-sandbox`
  : the helper package (default: built from `rust/`)
*/
{
  pkgs,
  agent-sandbox ? pkgs.callPackage ./internal/helper-package.nix { },
}:
{
  mkSandbox = import ./mkSandbox.nix { inherit pkgs agent-sandbox; };

  /**
    The everyday tools an agent expects on `PATH`. A list of packages, meant for
    `allowedPackages = commonTools ++ [ … ]`.
  */
  commonTools = with pkgs; [
    coreutils
    which
    git
    ripgrep
    fd
    gnused
    gnugrep
    findutils
    diffutils
    less
    gawk
    jq
  ];
}
