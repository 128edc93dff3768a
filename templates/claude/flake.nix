{
  description = "Claude Code in agent-sandbox";

  # nixpkgs is the revision agent-sandbox's flake.lock pins. For your own, replace its line with
  # nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable"; agent-sandbox.inputs.nixpkgs.follows = "nixpkgs";
  inputs = {
    agent-sandbox.url = "github:agent-sandbox/agent-sandbox";
    nixpkgs.follows = "agent-sandbox/nixpkgs";
  };

  # nix run            -> claude, sandboxed in the current directory
  # nix develop        -> a shell with `claude` on PATH
  # Once, before the first run (declared paths must exist):
  #   mkdir -p ~/.claude && [ -e ~/.claude.json ] || echo '{}' > ~/.claude.json
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
              config.allowUnfree = true; # claude-code is unfree
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
            pkg = pkgs.claude-code;
            binName = "claude";
            outName = "claude";
            allowedPackages = sandbox.commonTools ++ [ pkgs.nodejs ];
            # Settings, sessions and login; "$HOME" is expanded when claude starts.
            rwDirs = [ "$HOME/.claude" ];
            rwFiles = [ "$HOME/.claude.json" ];
            # Read from your environment at each launch, never stored; unset when empty.
            env = {
              CLAUDE_CODE_OAUTH_TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN";
              ANTHROPIC_API_KEY = "$ANTHROPIC_API_KEY";
            };
            # Only Anthropic's API and login, subdomains included. Add what your projects
            # fetch, e.g. "registry.npmjs.org". Blocked requests are listed when the
            # agent exits, with the entries that would allow them.
            allowedDomains = [
              "anthropic.com"
              "claude.ai"
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
