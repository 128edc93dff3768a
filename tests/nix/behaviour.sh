#!/usr/bin/env bash
# Runs the fixture sandboxes built from tests/nix/fixtures.nix, as the current user, and checks
# what the command inside sees: the behaviours of the Rust integration suite (isolation, binds,
# environment, store isolation, network modes), this time through the generated Nix wrapper.
# Called by tests/nix/build.sh, as root and as an unprivileged user, with SB_* variables:
#   SB_OPEN, SB_OFFLINE      bin/ wrappers of the open and the offline (allowedDomains = [ ]) fixtures
#   SB_HELPER, SB_SPEC_OPEN  the helper binary and the open fixture's spec
#   SB_PROGRAM_OPEN          the program that spec names
#   SB_PATH_OPEN             the PATH the open fixture declares
#   SB_STORE_OPEN            `ls /nix/store` as the open fixture should see it
#   SB_OUTSIDE               a store path in no closure
#   SB_WS                    the open fixture with workspaceDir = "$HOME/ws"
#   SB_ENV_ONLY              a store path (findutils) named only in the fixtures' env
#   SB_SECRET                the value of AGENT_SANDBOX_TEST_SECRET at launch
#   SB_PORT, SB_OTHER_PORT   host loopback servers: allowed to the offline fixture, and not
#   AGENT_SANDBOX_TEST_INET, AGENT_SANDBOX_TEST_HOST_SERVICE
#                            optional: a fake internet host answering "fake internet", and a
#                            service on one of the host's own addresses (scripts/fake-internet)
#   SB_GROUP                 optional: only the "isolation" or the "network" tests
# Usage: behaviour.sh LABEL. Prints PASS/FAIL/SKIP lines; exit status 1 when a test failed.
set -uo pipefail
label=$1
failed=0

# Short paths: the session's socket paths must fit in sockaddr_un.
tmp=$(mktemp -d /tmp/asn.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
root=$(cd "$tmp" && pwd -P)

# A fake $HOME with what an agent's declaration names, plus secrets it must not see.
make_home() {
  local h=$1
  mkdir -p "$h/proj" "$h/ws" "$h/.agent-state" "$h/.agent-docs" "$h/.ssh"
  echo '{"model":"x"}' >"$h/.agent-config.json"
  : >"$h/.agent-history"
  echo 'echo RC-SOURCED' >"$h/.bashrc"
  echo from-a-command >"$h/.secret-file"
  echo PRIVATE-KEY >"$h/.ssh/id_ed25519"
  chmod 600 "$h/.ssh/id_ed25519"
  echo notes >"$h/notes.txt"
  echo docs >"$h/.agent-docs/readme"
}
home=$root/home
make_home "$home"
mkdir -p "$root/s"

# run SANDBOX ARGS…: launched from $home/proj with a clean environment; sets out, err, code.
run() {
  local sb=$1
  shift
  out=$(cd "$home/proj" && env -i PATH=/usr/bin:/bin HOME="$home" XDG_STATE_HOME="$root/s" \
    TERM=dumb AGENT_SANDBOX_TEST_SECRET="$SB_SECRET" "$sb" "$@" 2>"$root/stderr")
  code=$?
  err=$(cat "$root/stderr")
}

# check GROUP NAME FUNCTION
check() {
  local name=$2
  [ -z "${SB_GROUP:-}" ] || [ "$1" = any ] || [ "$SB_GROUP" = "$1" ] || return 0
  shift 2
  out= err= code=
  if "$@"; then
    echo "PASS nix-build/$label/$name"
  else
    echo "FAIL nix-build/$label/$name"
    printf '    exit %s\n    --- stdout\n%s\n    --- stderr\n%s\n' "$code" "$out" "$err" | sed 's/^/    /'
    failed=1
  fi
}

runs_and_returns_the_status() {
  run "$SB_OPEN" -c 'echo ok; exit 7'
  [ "$code" = 7 ] && [ "$out" = ok ]
}

home_holds_only_the_declared_paths() {
  run "$SB_OPEN" -c 'ls -A ~'
  [ "$out" = $'.agent-config.json\n.agent-docs\n.agent-history\n.agent-state\n.bashrc\nproj' ]
}

ssh_key_and_undeclared_files_are_invisible() {
  run "$SB_OPEN" -c 'cat ~/.ssh/id_ed25519 ~/notes.txt; echo end'
  [ "$out" = end ] && [[ "$err" != *PRIVATE-KEY* ]]
}

project_is_read_write() {
  run "$SB_OPEN" -c 'echo inside > made-inside'
  [ "$code" = 0 ] && [ "$(cat "$home/proj/made-inside")" = inside ]
}

rw_dirs_and_files_persist() {
  run "$SB_OPEN" -c 'echo s > ~/.agent-state/new && echo h >> ~/.agent-history'
  [ "$code" = 0 ] && [ "$(cat "$home/.agent-state/new")" = s ] && [ "$(cat "$home/.agent-history")" = h ]
}

ro_dirs_and_files_are_read_only() {
  run "$SB_OPEN" -c 'cat ~/.agent-config.json ~/.agent-docs/readme
    echo x >> ~/.agent-config.json && echo wrote-file
    touch ~/.agent-docs/new && echo wrote-dir; true'
  [ "$out" = $'{"model":"x"}\ndocs' ] && [ ! -e "$home/.agent-docs/new" ] &&
    [ "$(cat "$home/.agent-config.json")" = '{"model":"x"}' ]
}

home_paths_are_expanded_at_launch() {
  # The same wrapper, launched with another $HOME, binds that home's paths.
  local other=$root/other-home
  make_home "$other"
  home=$other run "$SB_OPEN" -c 'echo launched > ~/.agent-state/where'
  [ "$code" = 0 ] && [ "$(cat "$other/.agent-state/where")" = launched ] &&
    [ ! -e "$root/home/.agent-state/where" ]
}

env_static_verbatim_dynamic_expanded_at_launch() {
  run "$SB_OPEN" -c 'printf "%s|" "$STATIC_VAR" "$SECRET" "$FROM_CMD" "${MAYBE-unset}"'
  [ "$out" = "plain value|$SB_SECRET|from-a-command|unset|" ]
}

path_is_exactly_the_declared_one() {
  run "$SB_OPEN" -c 'echo "$PATH"'
  [ "$out" = "$SB_PATH_OPEN" ]
}

tls_roots_come_from_cacert() {
  run "$SB_OPEN" -c 'echo "$SSL_CERT_FILE"
    while read -r line; do [[ $line != *"BEGIN CERTIFICATE"* ]] || { echo has-certificates; break; }; done < "$SSL_CERT_FILE"'
  [[ "$out" == /nix/store/*-cacert-*/etc/ssl/certs/ca-bundle.crt$'\nhas-certificates' ]]
}

store_holds_only_the_closure() {
  run "$SB_OPEN" -c "ls /nix/store; cat '$SB_OUTSIDE' 2>/dev/null && echo OUTSIDE-VISIBLE; true"
  [ "$out" = "$SB_STORE_OPEN" ]
}

closure_programs_work() {
  run "$SB_OPEN" -c 'git init -q repo && cd repo &&
    git -c user.name=t -c user.email=t@example.org commit -q --allow-empty -m first &&
    git log --format=%s && python3 -c "import ssl, json; print(\"python ok\")" &&
    curl --version >/dev/null && echo curl ok'
  [ "$out" = $'first\npython ok\ncurl ok' ]
}

store_paths_named_only_in_env_are_invisible() {
  # It exists on the host; inside, the variable names it but nothing is there.
  [ -x "$SB_ENV_ONLY/bin/find" ] || return 1
  run "$SB_OPEN" -c 'echo "$EXTRA_TOOL"; test -e "$EXTRA_TOOL" && echo VISIBLE || echo invisible'
  [ "$out" = "$SB_ENV_ONLY/bin/find"$'\n'invisible ]
}

store_paths_in_env_that_allowed_packages_name_stay_visible() {
  run "$SB_OPEN" -c '"$ALLOWED_TOOL" -c "print(6 * 7)"'
  [ "$out" = 42 ]
}

pkg_config_path_finds_dev_outputs() {
  # The .pc file of a dev output, and the library and headers it names, are all inside.
  run "$SB_OPEN" -c 'IFS=:; for d in $PKG_CONFIG_PATH; do [ -f "$d/fakelib.pc" ] && pc=$d/fakelib.pc; done
    [ -n "$pc" ] || { echo "no fakelib.pc in PKG_CONFIG_PATH=$PKG_CONFIG_PATH"; exit 1; }
    while IFS=" " read -r k a _; do case $k in Libs:) lib=${a#-L} ;; Cflags:) inc=${a#-I} ;; esac; done <"$pc"
    cat "$lib/libfake.so" "$inc/fake.h"'
  [ "$out" = $'fake library\nint fake(void);' ]
}

workspace_dir_replaces_the_launch_dir() {
  run "$SB_WS" -c 'pwd; echo w > made; ls "$HOME/proj" 2>/dev/null || echo no-launch-dir'
  [ "$out" = "$home/ws"$'\n'no-launch-dir ] && [ "$(cat "$home/ws/made")" = w ]
}

bash_program_reads_no_rc_files() {
  # The program bash runs with --norc; a nested interactive bash shows the file is there.
  run "$SB_OPEN" -i -c 'echo outer; bash -i -c "echo nested" 2>/dev/null'
  [ "$out" = $'outer\nRC-SOURCED\nnested' ]
}

helper_accepts_the_spec() {
  local bwrap
  bwrap=$(sed -n "s/^export AGENT_SANDBOX_BWRAP='\(.*\)'$/\1/p" "$SB_OPEN")
  out=$(cd "$home/proj" && env -i PATH=/usr/bin:/bin HOME="$home" XDG_STATE_HOME="$root/s" \
    AGENT_SANDBOX_BWRAP="$bwrap" "$SB_HELPER" run --spec "$SB_SPEC_OPEN" --dry-run -- -c true 2>"$root/stderr")
  code=$?
  err=$(cat "$root/stderr")
  [ "$code" = 0 ] && [[ "$out" == *$'\n'"command: $SB_PROGRAM_OPEN -c true"$'\n'* ]]
}

blocked_network_reaches_nothing() {
  run "$SB_OFFLINE" -c "curl -s -m 3 -o /dev/null -w '%{http_code}\n' http://127.0.0.1:$SB_OTHER_PORT/
    (echo x > /dev/tcp/127.0.0.1/$SB_OTHER_PORT) 2>/dev/null && echo tcp-open
    ip route | wc -l; wc -c < /etc/resolv.conf"
  [ "$out" = $'000\n0\n0' ]
}

allowed_local_port_is_bridged_when_blocked() {
  run "$SB_OFFLINE" -c "curl -s -m 3 http://127.0.0.1:$SB_PORT/"
  [ "$out" = host-secret ]
}

open_network_has_its_own_route_not_host_loopback() {
  run "$SB_OPEN" -c "ip route | head -n 1 | cut -d ' ' -f 1-2
    curl -s -m 3 -o /dev/null -w '%{http_code}\n' http://127.0.0.1:$SB_PORT/"
  [ "$out" = $'default via\n000' ]
}

open_network_does_not_reach_the_hosts_own_address() {
  run "$SB_OPEN" -c "curl -s -m 3 -o /dev/null -w '%{http_code}' http://$AGENT_SANDBOX_TEST_HOST_SERVICE/"
  [ "$out" = 000 ]
}

open_network_reaches_the_internet_blocked_does_not() {
  run "$SB_OPEN" -c "curl -s -m 5 http://$AGENT_SANDBOX_TEST_INET/"
  local open=$out
  run "$SB_OFFLINE" -c "curl -s -m 3 -o /dev/null -w '%{http_code}' http://$AGENT_SANDBOX_TEST_INET/"
  out="open: $open / blocked: $out"
  [ "$out" = "open: fake internet / blocked: 000" ]
}

# Processes other than this script whose command line names this test's directory: what the
# sandboxes above left running (pasta, bwrap, the command). Pure bash: no helper process of
# ours matches.
leftovers() {
  local p cmd
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" != $$ ] || continue
    cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
    [[ "$cmd" != *"$root/"* ]] || echo "${p#/proc/} $cmd"
  done
}

no_process_outlives_its_sandbox() {
  local i
  for i in $(seq 20); do
    out=$(leftovers)
    [ -n "$out" ] || return 0
    sleep 0.1
  done
  # Stop them (they are ours), so that a failing run cannot fill the machine.
  for i in $(printf '%s\n' "$out" | cut -d ' ' -f 1); do kill -9 "$i" 2>/dev/null; done
  return 1
}

check isolation runs-and-returns-the-status runs_and_returns_the_status
check isolation home-holds-only-the-declared-paths home_holds_only_the_declared_paths
check isolation ssh-key-and-undeclared-files-are-invisible ssh_key_and_undeclared_files_are_invisible
check isolation project-is-read-write project_is_read_write
check isolation rw-dirs-and-files-persist rw_dirs_and_files_persist
check isolation ro-dirs-and-files-are-read-only ro_dirs_and_files_are_read_only
check isolation home-paths-are-expanded-at-launch home_paths_are_expanded_at_launch
check isolation env-static-verbatim-dynamic-expanded-at-launch env_static_verbatim_dynamic_expanded_at_launch
check isolation path-is-exactly-the-declared-one path_is_exactly_the_declared_one
check isolation tls-roots-come-from-cacert tls_roots_come_from_cacert
check isolation store-holds-only-the-closure store_holds_only_the_closure
check isolation closure-programs-work closure_programs_work
check isolation store-paths-named-only-in-env-are-invisible store_paths_named_only_in_env_are_invisible
check isolation store-paths-in-env-that-allowed-packages-name-stay-visible store_paths_in_env_that_allowed_packages_name_stay_visible
check isolation pkg-config-path-finds-dev-outputs pkg_config_path_finds_dev_outputs
check isolation workspace-dir-replaces-the-launch-dir workspace_dir_replaces_the_launch_dir
check isolation bash-program-reads-no-rc-files bash_program_reads_no_rc_files
check isolation helper-accepts-the-spec helper_accepts_the_spec
check network blocked-network-reaches-nothing blocked_network_reaches_nothing
check network allowed-local-port-is-bridged-when-blocked allowed_local_port_is_bridged_when_blocked
check network open-network-has-its-own-route-not-host-loopback open_network_has_its_own_route_not_host_loopback
if [ -n "${AGENT_SANDBOX_TEST_INET:-}" ]; then
  check network open-network-reaches-the-internet-blocked-does-not open_network_reaches_the_internet_blocked_does_not
elif [ "${SB_GROUP:-network}" = network ]; then
  echo "SKIP nix-build/$label/open-network-reaches-the-internet-blocked-does-not (no fake internet: run scripts/fake-internet up and export its AGENT_SANDBOX_TEST_INET)"
fi
if [ -n "${AGENT_SANDBOX_TEST_HOST_SERVICE:-}" ]; then
  check network open-network-does-not-reach-the-hosts-own-address open_network_does_not_reach_the_hosts_own_address
elif [ "${SB_GROUP:-network}" = network ]; then
  echo "SKIP nix-build/$label/open-network-does-not-reach-the-hosts-own-address (no host service: run scripts/fake-internet up and export its AGENT_SANDBOX_TEST_HOST_SERVICE)"
fi
check any no-process-outlives-its-sandbox no_process_outlives_its_sandbox
exit $failed
