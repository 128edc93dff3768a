# Claude Code that may use Nix (`allowNix`): `nix build`, `nix develop` and `nix run` through
# the host's daemon, the store read-only. For projects whose agent must build with Nix.
#   nix-shell /path/to/agent-sandbox/shells/claude-nix
# If you are a trusted user of the daemon you are asked to confirm (the agent could make the
# daemon run code as root). The daemon's own downloads do not go through allowedDomains. Your nix.conf is read-only inside (roFiles).
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
    roFiles = [ "/etc/nix/nix.conf" ];
    env = {
      CLAUDE_CODE_OAUTH_TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN";
      ANTHROPIC_API_KEY = "$ANTHROPIC_API_KEY";
    };
    allowNix = true;
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
