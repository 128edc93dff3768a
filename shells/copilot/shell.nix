# GitHub Copilot CLI, sandboxed as `copilot`, in a nix-shell (no flakes needed): the policy of
# templates/copilot. From a project:  nix-shell /path/to/agent-sandbox/shells/copilot
# Once: mkdir -p ~/.copilot
{
  pkgs ? import <nixpkgs> { config.allowUnfree = true; },
  sandbox ? import ../.. { inherit pkgs; },
}:
let
  copilot = sandbox.mkSandbox {
    pkg = pkgs.github-copilot-cli;
    binName = "copilot";
    outName = "copilot";
    allowedPackages = sandbox.commonTools ++ [ pkgs.nodejs ];
    rwDirs = [ "$HOME/.copilot" ];
    env = {
      GH_TOKEN = "$GH_TOKEN";
      GITHUB_TOKEN = "$GITHUB_TOKEN";
    };
    allowedDomains = [
      "github.com"
      "githubcopilot.com"
      "githubusercontent.com"
    ];
  };
in
pkgs.mkShell {
  packages = [ copilot ];
  passthru.sandbox = copilot;
}
