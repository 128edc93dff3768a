{
  description = "agent-sandbox: run AI coding agents in a declarative sandbox";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  # Thin on purpose: everything is in lib/ (shared with default.nix and the tests that run
  # without nixpkgs), debug/, templates/ and checks/.
  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
        "x86_64-darwin"
        "aarch64-darwin"
      ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      systemOf = pkgs: pkgs.stdenv.hostPlatform.system;
      # Where this flake is published: the templates' agent-sandbox input and the README's quick
      # start name it, and tests/nix/quickstart.sh checks that they all say the same. Change it
      # here and there if the flake is published elsewhere.
      publishedUrl = "github:agent-sandbox/agent-sandbox";
      template = name: description: {
        path = ./templates + "/${name}";
        inherit description;
        # Printed by `nix flake init` (Markdown).
        welcomeText = ''
          # ${description}

          `nix run` starts it in this directory, `nix develop` gives a shell with it. The first
          lines of `flake.nix` say which paths to create before the first run.

          From a local clone of agent-sandbox instead of `${publishedUrl}`, record the clone in
          `flake.lock` once (again to follow its later commits):

          ```sh
          nix flake lock --override-input agent-sandbox /path/to/agent-sandbox
          ```
        '';
      };
      debugShell =
        pkgs:
        import ./debug/bash.shell.nix {
          inherit pkgs;
          sandbox = self.lib.${systemOf pkgs};
        };
    in
    {
      lib = forAllSystems (
        pkgs:
        import ./lib {
          inherit pkgs;
          agent-sandbox = self.packages.${systemOf pkgs}.default;
        }
      );

      packages = forAllSystems (pkgs: {
        default = pkgs.callPackage ./lib/internal/helper-package.nix { };
        bash-sandboxed = (debugShell pkgs).sandbox;
      });

      devShells = forAllSystems (pkgs: {
        default = debugShell pkgs;
      });

      templates = {
        claude = template "claude" "Claude Code in agent-sandbox";
        copilot = template "copilot" "GitHub Copilot CLI in agent-sandbox";
        codex = template "codex" "OpenAI Codex CLI in agent-sandbox";
        gemini = template "gemini" "Gemini CLI in agent-sandbox";
      };

      checks = forAllSystems (pkgs: import ./checks { inherit pkgs self nixpkgs; });

      # On a Mac: `nix run .#darwin-selftest` runs the escape attempts of
      # tests/darwin/selftest.sh through the real sandbox-exec (it cannot nest inside the Nix
      # build sandbox, so it is an app, not a check). python3 and git serve its fixtures outside.
      apps = nixpkgs.lib.genAttrs [ "x86_64-darwin" "aarch64-darwin" ] (
        system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
        in
        {
          darwin-selftest = {
            type = "app";
            program = "${pkgs.writeShellScript "darwin-selftest" ''
              PATH=${nixpkgs.lib.makeBinPath [ pkgs.python3 pkgs.git ]}:/usr/bin:/bin:/usr/sbin:/sbin
              export PATH
              exec ${pkgs.bash}/bin/bash ${./tests/darwin/selftest.sh} ${self.packages.${system}.default}/bin/agent-sandbox "$@"
            ''}";
            meta.description = "macOS self-test: escape attempts through the real Seatbelt sandbox";
          };
        }
      );

      formatter = forAllSystems (pkgs: pkgs.nixfmt-rfc-style);
    };
}
