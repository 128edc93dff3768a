# The spec mkSandbox writes is what the helper reads: every fixture's spec is validated against
# the helper's JSON Schema (rust/spec.schema.json, the schema `agent-sandbox schema` prints),
# and the helper itself parses it (`run --dry-run`, which starts nothing). The fixtures are
# those scripts/test-nix builds with the stand-in package set.
{
  pkgs,
  self,
  sandbox,
  agent-sandbox,
  ...
}:
let
  fixtures = import ../tests/nix/fixtures.nix { inherit pkgs; };
  # Every shape of allowedDomains and allowedLocalPorts.
  filtered = sandbox.mkSandbox {
    pkg = pkgs.bashInteractive;
    binName = "bash";
    outName = "filtered";
    allowedPackages = sandbox.commonTools;
    allowedDomains = {
      "api.github.com" = [
        "GET"
        "HEAD"
      ];
      "api.anthropic.com" = "*";
    };
    allowedLocalPorts = null;
    allowNix = true;
  };
  listed = sandbox.mkSandbox {
    pkg = pkgs.bashInteractive;
    binName = "bash";
    outName = "listed";
    allowedPackages = [ ];
    allowedDomains = [ "api.anthropic.com" ];
  };
in
pkgs.runCommand "spec-matches-schema"
  {
    nativeBuildInputs = [ pkgs.python3 ];
  }
  ''
    python3 ${self}/tests/nix/schema-check.py ${self}/rust/spec.schema.json \
      ${fixtures.open.specFile} ${fixtures.offline.specFile} ${filtered.specFile} ${listed.specFile}
    # The helper reads the spec with unknown fields denied. Filtered network and allowNix are
    # refused by this helper build before --dry-run prints, so only the others are parsed here.
    export HOME=$TMPDIR/home
    mkdir -p "$HOME/proj" "$HOME/.agent-state" "$HOME/.agent-docs"
    touch "$HOME/.agent-history" "$HOME/.agent-config.json" "$HOME/.bashrc"
    cd "$HOME/proj"
    for spec in ${fixtures.open.specFile} ${fixtures.offline.specFile}; do
      AGENT_SANDBOX_BWRAP=${pkgs.bubblewrap}/bin/bwrap \
        ${agent-sandbox}/bin/agent-sandbox run --spec "$spec" --dry-run -- -c true
    done
    touch "$out"
  ''
