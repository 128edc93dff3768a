# Claude Code, sandboxed as `claude`, in a nix-shell (no flakes needed): the policy of
# templates/claude. From a project:  nix-shell /path/to/agent-sandbox/shells/claude
# Once: mkdir -p ~/.claude && [ -e ~/.claude.json ] || echo '{}' > ~/.claude.json
{
  pkgs ? import <nixpkgs> { config.allowUnfree = true; },
  sandbox ? import ../.. { inherit pkgs; },
}:
let
  claude = sandbox.mkSandbox {
    pkg = pkgs.claude-code;
    binName = "claude";
    outName = "claude";
    allowedPackages = sandbox.commonTools ++ [ pkgs.nodejs ];
    rwDirs = [ "$HOME/.claude" ];
    rwFiles = [ "$HOME/.claude.json" ];
    env = {
      CLAUDE_CODE_OAUTH_TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN";
      ANTHROPIC_API_KEY = "$ANTHROPIC_API_KEY";
    };
    allowedDomains = [
      "anthropic.com"
      "claude.ai"
    ];
  };
in
pkgs.mkShell {
  packages = [ claude ];
  passthru.sandbox = claude;
}
