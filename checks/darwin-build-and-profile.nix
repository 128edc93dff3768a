# macOS: the helper builds and reads a mkSandbox spec (`run --dry-run`, which starts nothing;
# sandbox-exec cannot nest inside the Nix build sandbox, so nothing is launched). A placeholder
# until the Seatbelt backend lands: it will then compare the generated profile.
{
  pkgs,
  sandbox,
  agent-sandbox,
  ...
}:
let
  bash = sandbox.mkSandbox {
    pkg = pkgs.bashInteractive;
    binName = "bash";
    outName = "bash-sandboxed";
    allowedPackages = sandbox.commonTools;
    allowedDomains = [ ];
  };
in
pkgs.runCommand "darwin-build-and-profile" { } ''
  export HOME=$TMPDIR/home
  mkdir -p "$HOME/proj"
  cd "$HOME/proj"
  # --dry-run names a bwrap until the Seatbelt backend replaces it on macOS; nothing runs it.
  AGENT_SANDBOX_BWRAP=/nonexistent/bwrap \
    ${agent-sandbox}/bin/agent-sandbox run --spec ${bash.specFile} --dry-run -- -c true > "$out"
  cat "$out"
  # The self-test `nix run .#darwin-selftest` runs on a Mac outside this build: here it must
  # parse and list its checks.
  bash -n ${../tests/darwin/selftest.sh}
  DARWIN_SELFTEST_DRY=1 bash ${../tests/darwin/selftest.sh} > /dev/null
''
