#!/usr/bin/env bash
# The README's Nix quick start, run as written, on a copy of this checkout (what a clone holds:
# the files git tracks or would track) with the stand-in package set (tests/nix/host-pkgs):
#   - the published flake URL is defined once (flake.nix's publishedUrl) and the templates and
#     the README name it; the README's two quick-start blocks differ only in where the flake
#     comes from;
#   - flake.lock pins nixpkgs, so `nix flake metadata` needs no network; `nix flake check`
#     passes with nixpkgs overridden to the stand-in (the command the README gives), the VM
#     checks evaluated;
#   - for every template, the README's local-clone block in an empty project directory: init,
#     lock, `nix run` and `nix develop`; then the built bin/<outName> as root and as an
#     unprivileged user, with escape attempts (a file in $HOME, ~/.ssh, writes outside the
#     declared paths) next to the allowed writes;
#   - nix-shell finds each shells/ directory (Nix before 2.24 reads only default.nix).
# Needs root (a local Nix store without a daemon), patchelf, and the helper built by cargo
# (AGENT_SANDBOX_HELPER_BIN); `nix flake check` also needs the unit tests cargo built
# (AGENT_SANDBOX_UNIT_TESTS_BIN; scripts/test-nix sets both). Prints PASS/FAIL/SKIP lines; exit
# status 1 when a test failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export AGENT_SANDBOX_HELPER_BIN=${AGENT_SANDBOX_HELPER_BIN:-$repo/rust/target/debug/agent-sandbox}
# shellcheck source=report.sh
source "$here/report.sh"
check() { # NAME WANT GOT
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected:"$'\n'"$2"$'\n'"got:"$'\n'"$3"; fi
}

# --- one URL, and the README's blocks ------------------------------------------------------------
readme=$repo/README.md
mapfile -t urls < <(sed -n 's/^ *publishedUrl = "\([^"]*\)";$/\1/p' "$repo/flake.nix")
url=${urls[0]:-}
if [ ${#urls[@]} = 1 ] && [[ "$url" == github:* ]]; then
  pass flake-defines-the-published-url-once
else
  fail flake-defines-the-published-url-once "flake.nix: publishedUrl lines: ${urls[*]:-none}"
fi

templates=()
for d in "$repo"/templates/*/; do templates+=("$(basename "$d")"); done
bad=""
for t in "${templates[@]}"; do
  f=$repo/templates/$t/flake.nix
  grep -qxF "    agent-sandbox.url = \"$url\";" "$f" || bad+="$t: no agent-sandbox.url = \"$url\""$'\n'
  grep -qxF '    nixpkgs.follows = "agent-sandbox/nixpkgs";' "$f" || bad+="$t: nixpkgs does not follow agent-sandbox/nixpkgs"$'\n'
  grep -qF "$t = template \"$t\" " "$repo/flake.nix" || bad+="$t: not in flake.nix's templates"$'\n'
done
if grep -rn 'OWNER' "$repo/templates" "$readme"; then bad+="a placeholder OWNER is left (above)"$'\n'; fi
if [ -z "$bad" ]; then pass templates-use-the-published-url; else fail templates-use-the-published-url "$bad"; fi

# The shell blocks of the README's "### Quick start" section, comments dropped, one command per
# line; blocks separated by a line "--".
quickstart=$(awk '
  /^### / { inside = ($0 == "### Quick start") }
  inside && /^```sh$/ { code = 1; next }
  inside && code && /^```$/ { code = 0; print "--"; next }
  inside && code { sub(/[ \t]+# .*$/, ""); print }
' "$readme")
published=$(printf '%s\n' "$quickstart" | awk 'BEGIN { RS = "--\n" } NR == 1')
local_clone=$(printf '%s\n' "$quickstart" | awk 'BEGIN { RS = "--\n" } NR == 2')
clone_ref=/path/to/agent-sandbox
want_local=$(printf '%s\n' "$published" | sed "s|^nix flake init -t $url#|nix flake init -t $clone_ref#|" |
  sed "/^nix flake init /a nix flake lock --override-input agent-sandbox $clone_ref")
once_claude=$(sed -n '/# Once, before the first run/{n;s/^ *#   //p;}' "$repo/templates/claude/flake.nix")
want_published=$(printf '%s\n' "cd my-project" "nix flake init -t $url#claude" "$once_claude" "nix run" "nix develop")
check readme-quick-start-uses-the-published-url-and-the-template-steps "$want_published" "$published"
check readme-local-clone-block-is-the-quick-start-with-the-clone "$want_local" "$local_clone"

if [ "$(id -u)" != 0 ]; then
  skip flakes-and-shells "not root: building needs a local Nix store (run scripts/test-nix as root)"
  exit "$failed"
fi

tmp=$(mktemp -d /tmp/agent-sandbox-nix-quickstart.XXXXXX)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
# Builds copy host files (no build sandbox); nothing can be substituted here. The stand-in reads
# the host's package database while it evaluates, hence --impure on every flake command.
export NIX_CONFIG=$'experimental-features = nix-command flakes\nsandbox = false\nsubstituters =\nwarn-dirty = false'
nixi() { nix "$@" --impure; }
system=$(nix-instantiate --eval --expr builtins.currentSystem | tr -d '"')

# The clone: what git tracks or would track, committed.
clone=$tmp/agent-sandbox
mkdir -p "$clone"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -C "$clone" -xf -
commit() { git -C "$clone" add -A && git -C "$clone" -c user.name=test -c user.email=test@localhost commit -qm "$1"; }
git -C "$clone" init -q && commit snapshot
standin=path:$clone/tests/nix/host-pkgs

# --- flake.lock, nix flake check ----------------------------------------------------------------
# No network here: anything that tried to fetch nixpkgs would fail.
lock=$(python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["nodes"]["nixpkgs"]; print(n["original"]["ref"], n["locked"]["type"], len(n["locked"]["rev"]), n["locked"]["narHash"][:7])' "$clone/flake.lock" 2>&1)
out=$(nix flake metadata --json "$clone" 2>&1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["locks"]["nodes"]["nixpkgs"]["locked"]["rev"])' 2>&1)
if [ "$lock" = "nixos-unstable github 40 sha256-" ] && [ "$out" = "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"]["nixpkgs"]["locked"]["rev"])' "$clone/flake.lock")" ]; then
  pass flake-lock-pins-nixos-unstable-and-metadata-needs-no-network
else
  fail flake-lock-pins-nixos-unstable-and-metadata-needs-no-network "lock: $lock; metadata: $out"
fi

if [ -z "${AGENT_SANDBOX_UNIT_TESTS_BIN:-}" ]; then
  skip flake-check-with-the-stand-in "AGENT_SANDBOX_UNIT_TESTS_BIN unset: run scripts/test-nix, which builds the unit tests"
elif out=$(cd "$clone" && nix flake check --impure --option sandbox false --option substituters '' \
  --override-input nixpkgs path:./tests/nix/host-pkgs 2>&1); then
  pass flake-check-with-the-stand-in
  vm=$(cd "$clone" && nixi build --override-input nixpkgs path:./tests/nix/host-pkgs --no-link --json \
    ".#checks.$system.vm-isolation" ".#checks.$system.vm-network-modes" 2>"$tmp/vm.log" |
    python3 -c 'import json,sys; [print(open(d["outputs"]["out"]).read(), end="") for d in json.load(sys.stdin)]' 2>&1)
  check vm-checks-evaluate-with-the-stand-in \
    "host-pkgs: NixOS VM test agent-sandbox-vm-isolation evaluated, its script compiles; the VM runs only with nixpkgs
host-pkgs: NixOS VM test agent-sandbox-vm-network-modes evaluated, its script compiles; the VM runs only with nixpkgs" "$vm"
else
  fail flake-check-with-the-stand-in "$(printf '%s\n' "$out" | grep -v '^building\|^copying' | tail -n 30)"
fi
[ -z "$(git -C "$clone" status --porcelain)" ] || fail flake-check-leaves-the-lock-alone "$(git -C "$clone" status --porcelain)"

# --- the templates, as the README's local-clone block says ----------------------------------------
missing=()
for deb in coreutils debianutils git ripgrep fd-find sed grep findutils diffutils less gawk jq nodejs; do
  dpkg-query -W -f '${Status}' "$deb" 2>/dev/null | grep -q 'install ok installed' || missing+=("$deb")
done
# The clone's nixpkgs is the stand-in: its flake.lock says so (flake.nix unchanged).
(cd "$clone" && nixi flake lock --override-input nixpkgs "$standin" 2>/dev/null) && commit "nixpkgs: the stand-in"

user=agent-sandbox-test
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
# Run as the agent: what it sees of home, and where its writes land.
# $1: the declared state directory; $2: a directory outside everything declared.
probe='cat ~/host-secret 2>/dev/null || echo secret-hidden
cat ~/.ssh/id_ed25519 2>/dev/null || echo ssh-key-hidden
{ echo x > ~/planted; } 2>/dev/null
{ echo x > "$2/planted"; } 2>/dev/null || echo outside-unwritable
echo inside > "$1/written-inside" && echo state-written
echo inside > made-inside && echo project-written'
probe_want=$'secret-hidden\nssh-key-hidden\noutside-unwritable\nstate-written\nproject-written'

for t in "${templates[@]}"; do
  f=$repo/templates/$t/flake.nix
  bin=$(sed -n 's/^ *outName = "\([^"]*\)";$/\1/p' "$f")
  pname=$(sed -n 's/^ *pkg = pkgs\.\([^;]*\);$/\1/p' "$f")
  once=$(sed -n '/# Once, before the first run/{n;s/^ *#   //p;}' "$f")
  if [ ${#missing[@]} -gt 0 ]; then
    skip "template-$t-quick-start" "the host lacks ${missing[*]}: apt-get install ${missing[*]}"
    continue
  fi
  home=$tmp/home-$t
  mkdir -p "$home/my-project" "$home/.ssh"
  echo host-secret >"$home/host-secret"
  echo ssh-key >"$home/.ssh/id_ed25519"
  log=$tmp/$t.log
  ok=1
  step() { # the README's line $1, for this template
    local line=$1 claude='#claude'
    line=${line//"$clone_ref"/"$clone"}
    line=${line//"$claude"/"#$t"}
    case "$line" in
    "cd my-project") cd "$home/my-project" ;;
    mkdir*)
      [ "$line" = "$once_claude" ] || { echo "unexpected line: $line"; return 1; }
      before=$(shopt -s dotglob nullglob; a=("$home"/*); echo "${a[@]##*/}")
      (cd "$home" && HOME=$home bash -c "$once")
      # What the line created: the declared paths.
      declared=$(shopt -s dotglob nullglob; a=("$home"/*); comm -13 <(printf '%s\n' $before | sort) <(printf '%s\n' "${a[@]##*/}" | sort))
      ;;
    "nix run")
      local got want
      got=$(HOME=$home nixi run 2>>"$log")
      # shellcheck disable=SC2086
      want="$bin stand-in for $pname (tests/nix/host-pkgs), in $home/my-project; home holds: $(printf '%s\n' $declared my-project | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"
      [ "$got" = "$want" ] || { echo "nix run: expected: $want"$'\n'"got: $got"; return 1; }
      ;;
    "nix develop")
      local got
      # An interactive shell: a terminal (script), the user typing two lines.
      got=$(printf '%s\n' "$bin --version" exit | HOME=$home script -qec "nix develop --impure" /dev/null 2>>"$log" |
        tr -d '\r' | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g')
      [[ "$got" == *$'\n'"$bin stand-in for $pname (tests/nix/host-pkgs)"$'\n'* ]] || { echo "nix develop: $got"; return 1; }
      ;;
    nix\ *)
      # shellcheck disable=SC2086
      (HOME=$home nixi ${line#nix }) >>"$log" 2>&1 || { echo "failed: $line"; return 1; }
      ;;
    *) echo "unexpected line: $line"; return 1 ;;
    esac
  }
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    if ! step "$line" >"$tmp/step" 2>&1; then
      fail "template-$t-quick-start" "$(cat "$tmp/step")"$'\n'"$(tail -n 20 "$log")"
      ok=0
      break
    fi
  done <<<"$local_clone"
  cd "$tmp"
  [ $ok = 1 ] || continue
  pass "template-$t-quick-start"

  # The built command, run directly: as root, then as an unprivileged user with a home of its own.
  out=$(cd "$home/my-project" && HOME=$home nixi build --no-link --json 2>>"$log" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["outputs"]["out"])')
  state=$(printf '%s\n' $declared | while read -r d; do [ -d "$home/$d" ] && echo "$d"; done | head -n 1)
  uhome=$tmp/uhome-$t
  mkdir -p "$uhome/my-project" "$uhome/.ssh"
  echo host-secret >"$uhome/host-secret"
  echo ssh-key >"$uhome/.ssh/id_ed25519"
  (cd "$uhome" && HOME=$uhome bash -c "$once")
  mkdir -p "$tmp/outside-$t-root" "$tmp/outside-$t-user"
  chown -R "$user" "$uhome" "$tmp/outside-$t-user"
  for who in root user; do
    if [ $who = root ]; then h=$home run=(); else h=$uhome run=(runuser -u "$user" --); fi
    outside=$tmp/outside-$t-$who
    got=$(cd "$h/my-project" && "${run[@]}" env -i PATH=/usr/bin:/bin HOME="$h" "$out/bin/$bin" -c "$probe" probe "$h/$state" "$outside" 2>&1 | sed '/^agent-sandbox: session /d')
    where=""
    for p in "$h/planted" "$outside/planted"; do [ ! -e "$p" ] || where+="$p exists; "; done
    [ -f "$h/$state/written-inside" ] || where+="$h/$state/written-inside missing; "
    [ -f "$h/my-project/made-inside" ] || where+="$h/my-project/made-inside missing; "
    if [ "$got" = "$probe_want" ] && [ -z "$where" ]; then
      pass "template-$t-runs-sandboxed-as-$who"
    else
      fail "template-$t-runs-sandboxed-as-$who" "output: $got"$'\n'"host: $where"
    fi
  done
done

# --- nix-shell on a shells/ directory -------------------------------------------------------------
export NIX_PATH=nixpkgs=$clone/tests/nix/host-pkgs
for d in "$clone"/shells/*; do
  s=$(basename "$d")
  # What `nix-shell DIR` reads on Nix before 2.24: DIR/default.nix, the function of shell.nix.
  out=$(nix-instantiate --eval --strict --expr "builtins.functionArgs (import $d) == builtins.functionArgs (import $d/shell.nix) && builtins.pathExists $d/default.nix" 2>&1)
  [ "$out" = true ] || { fail "shell-$s-dir-has-default-nix" "$out"; continue; }
  case $s in
  claude-uv)
    skip "nix-shell-$s-runs" "the stand-in package set has no uv"
    continue
    ;;
  esac
  bin=$(sed -n 's/^ *outName = "\([^"]*\)";$/\1/p' "$d/shell.nix")
  h=$tmp/shell-$s
  mkdir -p "$h/proj"
  (cd "$h" && HOME=$h bash -c "$(sed -n 's/^# Once: //p' "$d/shell.nix")")
  # allowNix asks root, a trusted user of Nix, to confirm on a terminal: only look the command up.
  cmd="$bin"
  [ "$s" != claude-nix ] || cmd="command -v $bin"
  if got=$(cd "$h/proj" && env -i PATH=/usr/bin:/bin HOME="$h" NIX_PATH="$NIX_PATH" AGENT_SANDBOX_HELPER_BIN="$AGENT_SANDBOX_HELPER_BIN" \
    nix-shell --option sandbox false --option substituters "" "$d" --run "$cmd" 2>"$tmp/shell-$s.log"); then
    case $s in
    claude-nix) [[ "$got" == /nix/store/*/bin/$bin ]] ;;
    *) [[ "$got" == "$bin stand-in for "*", in $h/proj; home holds: "*" proj" ]] ;;
    esac && pass "nix-shell-$s-runs" || fail "nix-shell-$s-runs" "$got"
  else
    fail "nix-shell-$s-runs" "$(tail -n 20 "$tmp/shell-$s.log")"
  fi
done

exit $failed
