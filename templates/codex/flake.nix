{
  description = "OpenAI Codex CLI in agent-sandbox";

  # nixpkgs is the revision agent-sandbox's flake.lock pins. For your own, replace its line with
  # nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable"; agent-sandbox.inputs.nixpkgs.follows = "nixpkgs";
  inputs = {
    agent-sandbox.url = "github:agent-sandbox/agent-sandbox";
    nixpkgs.follows = "agent-sandbox/nixpkgs";
  };

  # nix run            -> codex, sandboxed in the current directory
  # nix develop        -> a shell with `codex` on PATH
  # Once, before the first run (declared paths must exist):
  #   mkdir -p ~/.codex
  outputs =
    {
      self,
      nixpkgs,
      agent-sandbox,
    }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
        "x86_64-darwin"
        "aarch64-darwin"
      ];
      forAllSystems =
        f:
        nixpkgs.lib.genAttrs systems (
          system:
          f system nixpkgs.legacyPackages.${system}
        );
    in
    {
      packages = forAllSystems (
        system: pkgs:
        let
          sandbox = agent-sandbox.lib.${system};
        in
        {
          default = sandbox.mkSandbox {
            pkg = pkgs.codex;
            binName = "codex";
            outName = "codex";
            allowedPackages = sandbox.commonTools;
            # Settings, sessions and login; "$HOME" is expanded when codex starts.
            rwDirs = [ "$HOME/.codex" ];
            # Read from your environment at each launch, never stored; unset when empty.
            env = {
              OPENAI_API_KEY = "$OPENAI_API_KEY";
            };
            # Only OpenAI's API and ChatGPT login, subdomains included. Add what your projects
            # fetch, e.g. "registry.npmjs.org". Blocked requests are listed when the
            # agent exits, with the entries that would allow them.
            allowedDomains = [
              "openai.com"
              "chatgpt.com"
            ];
          };
        }
      );

      devShells = forAllSystems (
        system: pkgs: {
          default = pkgs.mkShell { packages = [ self.packages.${system}.default ]; };
        }
      );
    };
}
