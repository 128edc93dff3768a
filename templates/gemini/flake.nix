{
  description = "Gemini CLI in agent-sandbox";

  # nixpkgs is the revision agent-sandbox's flake.lock pins. For your own, replace its line with
  # nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable"; agent-sandbox.inputs.nixpkgs.follows = "nixpkgs";
  inputs = {
    agent-sandbox.url = "github:agent-sandbox/agent-sandbox";
    nixpkgs.follows = "agent-sandbox/nixpkgs";
  };

  # nix run            -> gemini, sandboxed in the current directory
  # nix develop        -> a shell with `gemini` on PATH
  # Once, before the first run (declared paths must exist):
  #   mkdir -p ~/.gemini
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
            pkg = pkgs.gemini-cli;
            binName = "gemini";
            outName = "gemini";
            allowedPackages = sandbox.commonTools ++ [ pkgs.nodejs ];
            # Settings, sessions and login; "$HOME" is expanded when gemini starts.
            rwDirs = [ "$HOME/.gemini" ];
            # Read from your environment at each launch, never stored; unset when empty.
            env = {
              GEMINI_API_KEY = "$GEMINI_API_KEY";
              GOOGLE_API_KEY = "$GOOGLE_API_KEY";
            };
            # Only Google's APIs and login, subdomains included. Add what your projects
            # fetch, e.g. "registry.npmjs.org". Blocked requests are listed when the
            # agent exits, with the entries that would allow them.
            allowedDomains = [
              "googleapis.com"
              "accounts.google.com"
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
