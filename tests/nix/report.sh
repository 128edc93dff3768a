# Sourced by the Nix layer's test scripts: one PASS/FAIL/SKIP line per test, as
# scripts/test-nix counts them; `failed` is set when a test failed.
failed=0
pass() { echo "PASS nix-build/$1"; }
fail() {
  echo "FAIL nix-build/$1"
  [ $# -lt 2 ] || printf '%s\n' "$2" | sed 's/^/    /'
  failed=1
}
skip() { echo "SKIP nix-build/$1 ($2)"; }
