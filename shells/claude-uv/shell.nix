# Claude Code for Python projects managed with uv: uv and Python from Nix on PATH, uv's cache
# kept between sessions (~/.cache/uv), PyPI reachable.
#   nix-shell /path/to/agent-sandbox/shells/claude-uv
# Once: mkdir -p ~/.claude ~/.cache/uv && [ -e ~/.claude.json ] || echo '{}' > ~/.claude.json
# uv uses the Nix Python: the Pythons uv downloads expect /lib64 and do not run inside.
{
  pkgs ? import <nixpkgs> { config.allowUnfree = true; },
  sandbox ? import ../.. { inherit pkgs; },
}:
let
  python = pkgs.python3;
  claude = sandbox.mkSandbox {
    pkg = pkgs.claude-code;
    binName = "claude";
    outName = "claude";
    allowedPackages = sandbox.commonTools ++ [
      pkgs.nodejs
      pkgs.uv
      python
    ];
    rwDirs = [
      "$HOME/.claude"
      "$HOME/.cache/uv"
    ];
    rwFiles = [ "$HOME/.claude.json" ];
    env = {
      CLAUDE_CODE_OAUTH_TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN";
      ANTHROPIC_API_KEY = "$ANTHROPIC_API_KEY";
      UV_PYTHON = "${python}/bin/python3";
      UV_PYTHON_DOWNLOADS = "never";
    };
    allowedDomains = [
      "anthropic.com"
      "claude.ai"
      "pypi.org"
      "files.pythonhosted.org"
    ];
  };
in
pkgs.mkShell {
  packages = [ claude ];
  passthru.sandbox = claude;
}
