{
  description = "GitHub Copilot CLI in agent-sandbox";

  # nixpkgs is the revision agent-sandbox's flake.lock pins. For your own, replace its line with
  # nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable"; agent-sandbox.inputs.nixpkgs.follows = "nixpkgs";
  inputs = {
    agent-sandbox.url = "github:agent-sandbox/agent-sandbox";
    nixpkgs.follows = "agent-sandbox/nixpkgs";
  };

  # nix run            -> copilot, sandboxed in the current directory
  # nix develop        -> a shell with `copilot` on PATH
  # Once, before the first run (declared paths must exist):
  #   mkdir -p ~/.copilot
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
          f system (
            import nixpkgs {
              inherit system;
              config.allowUnfree = true; # github-copilot-cli is unfree
            }
          )
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
            pkg = pkgs.github-copilot-cli;
            binName = "copilot";
            outName = "copilot";
            allowedPackages = sandbox.commonTools ++ [ pkgs.nodejs ];
            # Settings, sessions and login; "$HOME" is expanded when copilot starts.
            rwDirs = [ "$HOME/.copilot" ];
            # Read from your environment at each launch, never stored; unset when empty.
            env = {
              GH_TOKEN = "$GH_TOKEN";
              GITHUB_TOKEN = "$GITHUB_TOKEN";
            };
            # Only GitHub and the Copilot API, subdomains included. Add what your projects
            # fetch, e.g. "registry.npmjs.org". Blocked requests are listed when the
            # agent exits, with the entries that would allow them.
            allowedDomains = [
              "github.com"
              "githubcopilot.com"
              "githubusercontent.com"
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
