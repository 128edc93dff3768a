#!/usr/bin/env bash
# Builds the fixture sandboxes of tests/nix/fixtures.nix with the stand-in package set
# (tests/nix/host-pkgs, a nixpkgs made of the host's Debian packages) and runs them, as root and
# as the unprivileged user agent-sandbox-test (tests/nix/behaviour.sh). Also checks what the
# build itself promises: the spec matches the helper's schema, its closure is complete, no
# launch-time secret reaches the store, and bad arguments fail at evaluation or build time.
#
# Needs root (a local Nix store without a daemon), patchelf, and the helper built by cargo
# (AGENT_SANDBOX_HELPER_BIN, default rust/target/debug/agent-sandbox). Prints PASS/FAIL/SKIP
# lines; exit status 1 when a test failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export NIX_PATH=nixpkgs=$repo/tests/nix/host-pkgs
export AGENT_SANDBOX_HELPER_BIN=${AGENT_SANDBOX_HELPER_BIN:-$repo/rust/target/debug/agent-sandbox}
# Builds copy host files (no build sandbox); nothing can be substituted here.
nixopts=(--option sandbox false --option substituters "")
# shellcheck source=report.sh
source "$here/report.sh"

if [ "$(id -u)" != 0 ]; then
  skip all "not root: building needs a local Nix store (run scripts/test-nix as root)"
  exit 0
fi

tmp=$(mktemp -d /tmp/agent-sandbox-nix-build.XXXXXX)
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
other_port=$(free_port)

# --- evaluation and build failures ------------------------------------------------------------
out=$(nix-instantiate "${nixopts[@]}" "$here/fixtures.nix" -A v0 2>&1)
first=$(printf '%s\n' "$out" | head -n 1)
if [ "$first" = "error: mkSandbox: removed v0 argument(s) extraEnv (now env), stateDirs (now rwDirs); rename them as in the migration table:" ] &&
  [ "$(printf '%s\n' "$out" | grep -c -- ' -> ')" = 4 ]; then
  pass v0-arguments-fail-evaluation-with-the-migration-table
else
  fail v0-arguments-fail-evaluation-with-the-migration-table "$out"
fi

out=$(nix-build "${nixopts[@]}" "$here/fixtures.nix" -A wrong-bin-name --no-out-link 2>&1)
if [ $? != 0 ] && [[ "$out" == *"mkSandbox: /nix/store/"*"-coreutils-host/bin/claude is not an executable; binName must name a program in pkg's bin/, which holds: "*" cat "* ]]; then
  pass wrong-bin-name-fails-the-build-naming-the-programs
else
  fail wrong-bin-name-fails-the-build-naming-the-programs "$out"
fi

# --- the fixtures -----------------------------------------------------------------------------
if ! built=$(nix-build "${nixopts[@]}" "$here/fixtures.nix" --arg port "$port" \
  -A open -A offline -A outside -A env-only -A workspace --no-out-link 2>"$tmp/build.log"); then
  fail build-fixtures "$(tail -n 30 "$tmp/build.log")"
  exit 1
fi
pass build-fixtures
{ read -r open; read -r offline; read -r outside; read -r env_only; read -r workspace; } <<<"$built"
spec_open=$open/share/agent-sandbox/sb-open.json
spec_offline=$offline/share/agent-sandbox/sb-offline.json
closure() { python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["closure"]))' "$1"; }

if out=$(python3 "$here/schema-check.py" "$repo/rust/spec.schema.json" "$spec_open" "$spec_offline" 2>&1); then
  pass spec-matches-the-helper-schema
else
  fail spec-matches-the-helper-schema "$out"
fi

# The closure lists every path the sandbox needs (closed under references), and exactly the
# paths the spec itself refers to.
ok=1
for spec in "$spec_open" "$spec_offline"; do
  want=$(closure "$spec" | LC_ALL=C sort)
  # shellcheck disable=SC2046
  closed=$(nix-store -qR $(closure "$spec") | LC_ALL=C sort)
  refs=$(nix-store -q --references "$(readlink -f "$spec")" | LC_ALL=C sort)
  if [ "$want" != "$closed" ] || [ "$want" != "$refs" ]; then
    ok=0
    detail="$spec: closure/closed/references differ:"$'\n'"$(diff <(echo "$want") <(echo "$closed"))"$'\n'"$(diff <(echo "$want") <(echo "$refs"))"
  fi
done
if [ $ok = 1 ]; then pass spec-closure-is-complete; else fail spec-closure-is-complete "$detail"; fi

if grep -qF '"$AGENT_SANDBOX_TEST_SECRET"' "$open/bin/sb-open" && grep -qF '$(cat "$HOME/.secret-file")' "$open/bin/sb-open"; then
  pass wrapper-keeps-dynamic-values-unexpanded
else
  fail wrapper-keeps-dynamic-values-unexpanded "$(cat "$open/bin/sb-open")"
fi

# --- host loopback servers for the network tests ------------------------------------------------
for p in "$port" "$other_port"; do
  python3 "$here/serve.py" 127.0.0.1 "$p" host-secret &
  servers+=($!)
done
for _ in $(seq 100); do
  curl -fs -m 1 "http://127.0.0.1:$port/" >/dev/null && curl -fs -m 1 "http://127.0.0.1:$other_port/" >/dev/null && break
  sleep 0.05
done

# The fake internet (scripts/fake-internet) counts only if it answers from the host right now.
if [ -n "${AGENT_SANDBOX_TEST_INET:-}" ] &&
  [ "$(curl -s -m 3 "http://$AGENT_SANDBOX_TEST_INET/")" != "fake internet" ]; then
  echo "note: AGENT_SANDBOX_TEST_INET=$AGENT_SANDBOX_TEST_INET does not answer \"fake internet\"; ignoring it"
  AGENT_SANDBOX_TEST_INET=
fi
if [ -n "${AGENT_SANDBOX_TEST_HOST_SERVICE:-}" ] &&
  [ "$(curl -s -m 3 "http://$AGENT_SANDBOX_TEST_HOST_SERVICE/")" != "host service" ]; then
  echo "note: AGENT_SANDBOX_TEST_HOST_SERVICE=$AGENT_SANDBOX_TEST_HOST_SERVICE does not answer \"host service\"; ignoring it"
  AGENT_SANDBOX_TEST_HOST_SERVICE=
fi

# --- behaviour, as root and as an unprivileged user ---------------------------------------------
secret=agent-sandbox-secret-$RANDOM$RANDOM$RANDOM
helper=$(sed -n "s/^exec '\([^']*\)' run .*/\1/p" "$open/bin/sb-open")
vars=(
  SB_OPEN="$open/bin/sb-open"
  SB_OFFLINE="$offline/bin/sb-offline"
  SB_HELPER="$helper"
  SB_SPEC_OPEN="$spec_open"
  SB_PROGRAM_OPEN="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["program"])' "$spec_open")"
  SB_PATH_OPEN="$(python3 -c 'import json,sys; print(":".join(json.load(open(sys.argv[1]))["path"]))' "$spec_open")"
  SB_STORE_OPEN="$(closure "$spec_open" | xargs -n 1 basename | LC_ALL=C sort)"
  SB_OUTSIDE="$outside"
  SB_ENV_ONLY="$env_only"
  SB_WS="$workspace/bin/sb-ws"
  SB_SECRET="$secret"
  SB_PORT="$port"
  SB_OTHER_PORT="$other_port"
  AGENT_SANDBOX_TEST_INET="${AGENT_SANDBOX_TEST_INET:-}"
  AGENT_SANDBOX_TEST_HOST_SERVICE="${AGENT_SANDBOX_TEST_HOST_SERVICE:-}"
)
cp "$here/behaviour.sh" "$tmp/behaviour.sh"
chmod 755 "$tmp" "$tmp/behaviour.sh"

env "${vars[@]}" bash "$tmp/behaviour.sh" root || failed=1

user=agent-sandbox-test
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
(cd / && runuser -u "$user" -- env -i PATH=/usr/bin:/bin "${vars[@]}" bash "$tmp/behaviour.sh" user) || failed=1

# Neither the wrappers, the specs nor anything else in their closures holds the secret.
# shellcheck disable=SC2046
if hits=$(grep -rlF "$secret" $(nix-store -qR "$open" "$offline") 2>/dev/null); then
  fail launch-time-secret-never-reaches-the-store "$hits"
else
  pass launch-time-secret-never-reaches-the-store
fi

# --- commonTools, when the host has every package for it -----------------------------------------
missing=()
for deb in coreutils debianutils git ripgrep fd-find sed grep findutils diffutils less gawk jq; do
  dpkg-query -W -f '${Status}' "$deb" 2>/dev/null | grep -q 'install ok installed' || missing+=("$deb")
done
if [ ${#missing[@]} -gt 0 ]; then
  skip common-tools-are-on-path "the host lacks ${missing[*]}: apt-get install ${missing[*]}"
elif ! tools=$(nix-build "${nixopts[@]}" "$here/fixtures.nix" -A common-tools --no-out-link 2>"$tmp/tools.log"); then
  fail common-tools-are-on-path "$(tail -n 30 "$tmp/tools.log")"
else
  mkdir -p "$tmp/th/proj"
  out=$(cd "$tmp/th/proj" && env -i PATH=/usr/bin:/bin HOME="$tmp/th" XDG_STATE_HOME="$tmp/ts" "$tools/bin/sb-tools" -c \
    'for t in ls which git rg fd sed grep find diff less awk jq; do command -v $t >/dev/null || echo "missing $t"; done
     echo "{\"a\":1}" | jq -c .a; echo x | awk "{print \"awk ok\"}"; rg --version >/dev/null && echo rg ok' 2>&1 | sed '/^agent-sandbox: session /d')
  if [ "$out" = $'1\nawk ok\nrg ok' ]; then pass common-tools-are-on-path; else fail common-tools-are-on-path "$out"; fi
fi

# --- a closure large enough to be staged ----------------------------------------------------------
# The holder puts only the closure's entries in /nix/store (a tmpfs, each entry bound in) and
# the helper itself, installed in the store but outside the closure, is read through the real
# store: the sandbox sees exactly its closure, read-only, and the launch log says it was staged.
if ! many=$(nix-build "${nixopts[@]}" "$here/fixtures.nix" -A many --no-out-link 2>"$tmp/many.log"); then
  fail large-closure-is-staged-and-shows-only-itself "$(tail -n 30 "$tmp/many.log")"
else
  n=$(closure "$many/share/agent-sandbox/sb-many.json" | grep -c '^/nix/store/[^/]*$')
  mkdir -p "$tmp/mh/proj"
  out=$(cd "$tmp/mh/proj" && env -i PATH=/usr/bin:/bin HOME="$tmp/mh" XDG_STATE_HOME="$tmp/ms" "$many/bin/sb-many" -c \
    "cat /nix/store/*-agent-sandbox-dummy-7/share/dummy; ls /nix/store | wc -l
     ls $outside >/dev/null 2>&1 || echo outside-hidden
     touch /nix/store/new 2>/dev/null || echo store-read-only" 2>&1 | sed '/^agent-sandbox: session /d')
  log=$(cat "$tmp"/ms/agent-sandbox/*-sb-many/launch.log 2>/dev/null)
  if [ "$out" = $'dummy 7\n'"$n"$'\noutside-hidden\nstore-read-only' ] && [ "$n" -ge 24 ] &&
    [[ "$log" == *"closure: $n paths in /nix/store staged by the namespace holder"* ]]; then
    pass large-closure-is-staged-and-shows-only-itself
  else
    fail large-closure-is-staged-and-shows-only-itself "closure $n; output: $out; log: $(printf '%s\n' "$log" | tail -n 3)"
  fi
fi

# --- the debug shell's sandbox (debug/bash.shell.nix) ---------------------------------------------
if [ ${#missing[@]} -gt 0 ]; then
  skip debug-shell-sandbox-runs "the host lacks ${missing[*]}: apt-get install ${missing[*]}"
elif ! debug=$(nix-build "${nixopts[@]}" -E "(import $repo/debug/bash.shell.nix { }).sandbox" --no-out-link 2>"$tmp/debug.log"); then
  fail debug-shell-sandbox-runs "$(tail -n 30 "$tmp/debug.log")"
else
  mkdir -p "$tmp/dh/proj"
  out=$(cd "$tmp/dh/proj" && env -i PATH=/usr/bin:/bin HOME="$tmp/dh" XDG_STATE_HOME="$tmp/ds" "$debug/bin/bash-sandboxed" -i -c \
    'echo "$PS1"; ls -A ~; for t in curl ip rg; do command -v $t >/dev/null || echo "missing $t"; done' 2>/dev/null)
  if [ "$out" = $'[sandbox \\w]> \nproj' ]; then pass debug-shell-sandbox-runs; else fail debug-shell-sandbox-runs "$out"; fi
fi

# --- the flake, with the stand-in as its nixpkgs input (tests/nix/flake-standin.nix) --------------
flake=$here/flake-standin.nix
out=$(nix-instantiate --eval --strict --json "${nixopts[@]}" -A names "$flake" 2>&1)
want='{"checks":["eval-arguments-and-errors","helper-unit-tests","spec-matches-schema","template-claude","template-codex","template-copilot","template-gemini","vm-isolation","vm-network-modes"],"devShells":["default"],"lib":["commonTools","mkSandbox"],"packages":["bash-sandboxed","default"],"systems":["aarch64-darwin","aarch64-linux","x86_64-darwin","x86_64-linux"],"templates":["claude","codex","copilot","gemini"]}'
if [ "$out" = "$want" ]; then pass flake-outputs-have-the-documented-names; else fail flake-outputs-have-the-documented-names "$out"; fi

system=$(nix-instantiate --eval --json "${nixopts[@]}" -A system "$flake" | tr -d '"')
attrs=(-A "checks.$system.eval-arguments-and-errors" -A "packages.$system.default")
if [ ${#missing[@]} -gt 0 ]; then
  skip flake-schema-check-and-debug-package-build "the host lacks ${missing[*]}: apt-get install ${missing[*]}"
else
  attrs+=(-A "checks.$system.spec-matches-schema" -A "packages.$system.bash-sandboxed")
fi
if out=$(nix-build "${nixopts[@]}" "$flake" "${attrs[@]}" --no-out-link 2>&1); then
  pass flake-checks-and-packages-build
else
  fail flake-checks-and-packages-build "$(printf '%s\n' "$out" | tail -n 30)"
fi

exit $failed
