# mkSandbox's arguments -> spec, wrapper text and every validation error, exactly: the same
# evaluation tests scripts/test-nix runs (tests/nix/eval.py with the fake package set), here
# inside a build with nixpkgs' Nix. They need no store (`--store dummy://`).
{ pkgs, self, ... }:
pkgs.runCommand "eval-arguments-and-errors"
  {
    nativeBuildInputs = [
      pkgs.nix
      pkgs.python3
    ];
  }
  ''
    export HOME=$TMPDIR NIX_STATE_DIR=$TMPDIR/nix-state NIX_CONF_DIR=$TMPDIR/nix-conf
    mkdir -p "$NIX_STATE_DIR" "$NIX_CONF_DIR"
    status=0
    python3 ${self}/tests/nix/eval.py > "$out" || status=$?
    cat "$out"
    exit $status
  ''
