#!/usr/bin/env bash
# The macOS self-test: escape attempts (and things that must keep working) run for real through
# `agent-sandbox run` -> /usr/bin/sandbox-exec on a Mac. sandbox-exec cannot nest inside the Nix
# build sandbox, so this is not a derivation: run it as
#
#   nix run .#darwin-selftest                  # the flake's helper, python3 and git on PATH
#   bash tests/darwin/selftest.sh [HELPER]     # HELPER: the agent-sandbox binary (or a
#                                              # package dir with bin/agent-sandbox); default:
#                                              # agent-sandbox on PATH
#
# It builds a throwaway world under /tmp: a fake HOME with a planted ~/.ssh/id_ed25519, a git
# project inside it, a sibling directory, declared rw/ro directories, loopback HTTP servers it
# starts itself, and a marker process. HOME points at the fake home for every launch; nothing
# is planted in the real home, and no network test leaves this machine (only 127.0.0.1 servers
# started here, and a request for a .invalid name that the proxy must refuse).
#
# Each check prints `PASS name`, `FAIL name` (with the exit status and output) or `SKIP name
# (reason)` when a precondition is missing on this Mac (shown by a control run outside the
# sandbox: e.g. TIOCSTI refused by the kernel even outside). Last line:
# `darwin selftest: N passed, N failed (N skipped)`. Exit status 1 if any check failed, 2 if it
# cannot run here (not macOS, no helper).
#
# Environment:
#   DARWIN_SELFTEST_DRY=1      list the checks without running anything (works on any OS)
#   DARWIN_SELFTEST_ONLY=GLOB  run only the checks whose name matches GLOB (e.g. 'git_*')
#   DARWIN_SELFTEST_KEEP=1     keep the temporary directory (with each session's launch.log)
#   DARWIN_SELFTEST_TIMEOUT=S  seconds before one sandboxed command is stopped (default 60)
#
# Written for macOS's /bin/bash 3.2 and BSD tools: no associative arrays, no mapfile, no GNU
# flags. Where the project lives matters: it is under /tmp, not under $TMPDIR
# (/var/folders/…), because the profile denies /private/var/folders outside the session's own
# directories (project_in_user_tmpdir_works checks that case separately).

# The programs for `sh -c` are single-quoted on purpose (their $1… expand inside), and the
# checks are called through `check`.
# shellcheck disable=SC2016,SC2317

DRY=${DARWIN_SELFTEST_DRY:-0}
ONLY=${DARWIN_SELFTEST_ONLY:-}
KEEP=${DARWIN_SELFTEST_KEEP:-0}
TIMEOUT=${DARWIN_SELFTEST_TIMEOUT:-60}

PASSED=0
FAILED=0
SKIPPED=0
BG_PIDS=
LAUNCHD_LABEL=
ROOT=
UT_MARK=
UT_PROJ=
TMP_MARK=

# ---- Programs run inside (and outside, as controls) ------------------------------------------
# No single quotes inside: they are passed as one argument.

# TIOCSTI pushes a byte into the terminal's input queue (typing into the user's shell).
PY_TIOCSTI='
import fcntl, termios
req = getattr(termios, "TIOCSTI", 0x80017472)
try:
    fcntl.ioctl(0, req, b"#")
except OSError as e:
    print("TIOCSTI-DENIED errno=%d" % e.errno)
else:
    print("TIOCSTI-ALLOWED")
'
PL_TIOCSTI='
my $c = "#";
if (ioctl(STDIN, 0x80017472, $c)) { print "TIOCSTI-ALLOWED\n" }
else { printf "TIOCSTI-DENIED errno=%d\n", $! + 0 }
'

# sysctl {CTL_KERN, KERN_PROCARGS2, pid}: another process argv and environment.
PY_PROCARGS='
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
mib = (ctypes.c_int * 3)(1, 49, int(sys.argv[1]))
size = ctypes.c_size_t(4 << 20)
buf = ctypes.create_string_buffer(size.value)
if libc.sysctl(mib, 3, buf, ctypes.byref(size), None, ctypes.c_size_t(0)) != 0:
    print("PROCARGS-DENIED errno=%d" % ctypes.get_errno())
else:
    print("PROCARGS-READ")
    print(buf.raw[:size.value].replace(b"\0", b"\n").decode("latin-1"))
'

# A loopback HTTP server on a free port: writes the port to FILE, answers every GET with TEXT.
PY_SERVER='
import http.server, os, socketserver, sys
path, text = sys.argv[1], sys.argv[2].encode()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(text)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(text)
    def log_message(self, *args):
        pass
class Server(http.server.HTTPServer):
    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "selftest", self.server_address[1]
server = Server(("127.0.0.1", 0), Handler)
with open(path + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(path + ".tmp", path)
server.serve_forever()
'

# ---- Small helpers -----------------------------------------------------------------------------

say() { printf '%s\n' "darwin-selftest: $*" >&2; }

contains() { # HAYSTACK NEEDLE
    case $1 in
    *"$2"*) return 0 ;;
    esac
    return 1
}

lower() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]'; }

# skip_unless VALUE REASON: VALUE must be 1, otherwise the check is skipped with REASON.
skip_unless() {
    [ "$1" = 1 ] && return 0
    SKIP_REASON=$2
    return 1
}

ran() { contains "$OUT" SELFTEST-END; }

wait_for_file() { # FILE TENTHS
    local i=0
    while [ "$i" -lt "$2" ]; do
        [ -s "$1" ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# Stops PID after SECONDS unless it ended; the caller kills this watchdog once PID is reaped.
watchdog() {
    local i=0
    while [ "$i" -lt "$2" ]; do
        sleep 1
        kill -0 "$1" 2>/dev/null || return 0
        i=$((i + 1))
    done
    say "a sandboxed command ran longer than $2 s; stopping it (pid $1)"
    kill -TERM "$1" 2>/dev/null
}

# launch DIR TTY [run flags…] -- COMMAND…: `agent-sandbox run` from DIR with HOME=the fake
# home, a clean environment, stdin from /dev/null (TTY=tty: under `script`, on a fresh
# pseudo-terminal). Sets CODE, OUT, ERR.
launch() {
    local dir=$1 tty=$2 pid wd
    shift 2
    if [ "$tty" = tty ]; then
        (cd "$dir" && exec env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME="$FAKE_HOME" \
            XDG_STATE_HOME="$STATE" TERM=xterm SELFTEST_LAUNCHER_SECRET="$LAUNCHER_SECRET" \
            /usr/bin/script -q /dev/null "$HELPER" run "$@") \
            </dev/null >"$ROOT/out" 2>"$ROOT/err" &
    else
        (cd "$dir" && exec env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME="$FAKE_HOME" \
            XDG_STATE_HOME="$STATE" TERM=dumb SELFTEST_LAUNCHER_SECRET="$LAUNCHER_SECRET" \
            "$HELPER" run "$@") \
            </dev/null >"$ROOT/out" 2>"$ROOT/err" &
    fi
    pid=$!
    watchdog "$pid" "$TIMEOUT" &
    wd=$!
    wait "$pid"
    CODE=$?
    kill "$wd" 2>/dev/null
    wait "$wd" 2>/dev/null
    OUT=$(tr -d '\r' <"$ROOT/out")
    ERR=$(tr -d '\r' <"$ROOT/err")
}
sb() { launch "$PROJ" notty "$@"; }
sb_in() {
    local dir=$1
    shift
    launch "$dir" notty "$@"
}
sb_tty() { launch "$PROJ" tty "$@"; }

GIT_ID="--env GIT_AUTHOR_NAME=Selftest --env GIT_AUTHOR_EMAIL=selftest@example.invalid --env GIT_COMMITTER_NAME=Selftest --env GIT_COMMITTER_EMAIL=selftest@example.invalid"

# git on the host, for the fixtures only: no user or system config, none of the caller's GIT_*.
hgit() {
    env -i PATH="$PATH" HOME="$FAKE_HOME" GIT_CONFIG_NOSYSTEM=1 \
        GIT_AUTHOR_NAME=Selftest GIT_AUTHOR_EMAIL=selftest@example.invalid \
        GIT_COMMITTER_NAME=Selftest GIT_COMMITTER_EMAIL=selftest@example.invalid \
        "$HOST_GIT" -c init.defaultBranch=main "$@"
}

# ---- The checks --------------------------------------------------------------------------------
# Each returns 0 (pass, or skip when it set SKIP_REASON) or 1 (fail; NOTE says why when the
# output alone does not).

c_sandbox_starts() {
    sb -- /bin/sh -c 'echo started; exit 7'
    [ "$CODE" = 7 ] && [ "$OUT" = started ]
}

c_launcher_environment_not_inherited() {
    sb -- /bin/sh -c 'env; echo SELFTEST-END'
    ran && ! contains "$OUT" "$LAUNCHER_SECRET"
}

c_ssh_key_unreadable() {
    sb -- /bin/sh -c 'cat "$1"; ls -a "$2"; ls -a "$3"; cat ~/.ssh/id_ed25519; echo SELFTEST-END' \
        sh "$FAKE_HOME/.ssh/id_ed25519" "$FAKE_HOME/.ssh" "$FAKE_HOME"
    ran && ! contains "$OUT$ERR" "$SECRET" && ! contains "$OUT" id_ed25519 && ! contains "$OUT" .ssh
}

c_ssh_key_via_firmlink_unreadable() {
    skip_unless "$CTRL_FIRMLINK" "/System/Volumes/Data$FAKE_HOME is not readable even outside" || return 0
    sb -- /bin/sh -c 'cat "$1"; ls -a "$2"; echo SELFTEST-END' \
        sh "/System/Volumes/Data$FAKE_HOME/.ssh/id_ed25519" "/System/Volumes/Data$FAKE_HOME/.ssh"
    ran && ! contains "$OUT$ERR" "$SECRET" && ! contains "$OUT" id_ed25519
}

c_ssh_key_case_variants_unreadable() {
    skip_unless "$CASE_INSENSITIVE" "the volume of $ROOT is case-sensitive, so case variants name other files" || return 0
    sb -- /bin/sh -c 'cat "$1/.SSH/id_ed25519"; cat "$1/.ssh/ID_ED25519"; cat "$1/.Ssh/Id_Ed25519"; ls -a "$1/.SSH"; echo SELFTEST-END' \
        sh "$FAKE_HOME"
    ran && ! contains "$OUT$ERR" "$SECRET" && ! contains "$OUT" id_ed25519
}

c_write_outside_denied() {
    sb -- /bin/sh -c 'echo x > "$1/new-file"; mkdir "$1/new-dir"; echo x > "$2"; touch "$3"; echo SELFTEST-END' \
        sh "$SIBLING" "$FAKE_HOME/planted-in-home" "$ROOT/planted-in-root"
    # shellcheck disable=SC2012 # for people to read
    NOTE="afterwards on the host: $(ls -A "$SIBLING" | tr '\n' ' ')"
    ran && [ ! -e "$SIBLING/new-file" ] && [ ! -e "$SIBLING/new-dir" ] &&
        [ ! -e "$FAKE_HOME/planted-in-home" ] && [ ! -e "$ROOT/planted-in-root" ]
}

# The protected git files are unchanged on the host (and put back if a check changed them).
git_untouched() {
    local ok=0
    if ! cmp -s "$PROJ/.git/hooks/pre-commit" "$ROOT/pre-commit.orig"; then
        ok=1
        NOTE="$NOTE .git/hooks/pre-commit changed;"
        cp "$ROOT/pre-commit.orig" "$PROJ/.git/hooks/pre-commit"
    fi
    if ! cmp -s "$PROJ/.git/config" "$ROOT/config.orig"; then
        ok=1
        NOTE="$NOTE .git/config changed;"
        cp "$ROOT/config.orig" "$PROJ/.git/config"
    fi
    local f
    for f in post-checkout post-merge post-rewrite; do
        if [ -e "$PROJ/.git/hooks/$f" ]; then
            ok=1
            NOTE="$NOTE .git/hooks/$f was created;"
            rm -f "$PROJ/.git/hooks/$f"
        fi
    done
    if [ -s "$PROJ/.git/config.worktree" ]; then
        ok=1
        NOTE="$NOTE .git/config.worktree was written;"
        : >"$PROJ/.git/config.worktree"
    fi
    return "$ok"
}

c_git_hooks_write_denied() {
    skip_unless "$HAVE_REPO" "no git on the host to create the project repository" || return 0
    sb -- /bin/sh -c 'echo "echo PWNED" >> .git/hooks/pre-commit
        printf "#!/bin/sh\necho PWNED\n" > .git/hooks/post-checkout
        chmod +x .git/hooks/post-checkout
        rm -f .git/hooks/pre-commit
        echo SELFTEST-END'
    ran && git_untouched
}

c_git_config_write_denied() {
    skip_unless "$HAVE_REPO" "no git on the host to create the project repository" || return 0
    sb -- /bin/sh -c 'printf "[core]\n\thooksPath = /tmp/evil\n" >> .git/config
        printf "[core]\n\tfsmonitor = /tmp/evil\n" > .git/config.worktree
        echo SELFTEST-END'
    ran && git_untouched
}

c_git_case_variants_denied() {
    skip_unless "$HAVE_REPO" "no git on the host to create the project repository" || return 0
    skip_unless "$CASE_INSENSITIVE" "the volume of $ROOT is case-sensitive" || return 0
    sb -- /bin/sh -c 'echo "echo PWNED" >> .GIT/HOOKS/pre-commit
        echo "echo PWNED" > .Git/Hooks/post-merge
        printf "[core]\n\thooksPath = /tmp/evil\n" >> .git/CONFIG
        echo SELFTEST-END'
    ran && git_untouched
}

c_git_dir_rename_denied() {
    skip_unless "$HAVE_REPO" "no git on the host to create the project repository" || return 0
    sb -- /bin/sh -c 'mv .git g; mv .git/hooks .git/hooks-away; mv .git/config .git/config-away
        echo SELFTEST-END'
    local ok=0
    [ -d "$PROJ/.git/hooks" ] && [ -f "$PROJ/.git/config" ] || ok=1
    # Put things back so that the other checks see the project as set up.
    if [ -d "$PROJ/g" ] && [ ! -e "$PROJ/.git" ]; then
        mv "$PROJ/g" "$PROJ/.git"
        NOTE="$NOTE .git was renamed;"
        ok=1
    fi
    if [ -d "$PROJ/.git/hooks-away" ]; then
        mv "$PROJ/.git/hooks-away" "$PROJ/.git/hooks"
        NOTE="$NOTE .git/hooks was renamed;"
        ok=1
    fi
    if [ -f "$PROJ/.git/config-away" ]; then
        mv "$PROJ/.git/config-away" "$PROJ/.git/config"
        NOTE="$NOTE .git/config was renamed;"
        ok=1
    fi
    ran && [ "$ok" = 0 ]
}

c_git_hook_hard_link_denied() {
    skip_unless "$HAVE_REPO" "no git on the host to create the project repository" || return 0
    sb -- /bin/sh -c 'ln .git/hooks/pre-commit hook-link; ln .git/config config-link; echo SELFTEST-END'
    local ok=0
    if [ -e "$PROJ/hook-link" ] || [ -e "$PROJ/config-link" ]; then
        NOTE="a hard link to a protected git file was created in the project"
        rm -f "$PROJ/hook-link" "$PROJ/config-link"
        ok=1
    fi
    ran && [ "$ok" = 0 ]
}

c_git_hook_via_firmlink_denied() {
    skip_unless "$HAVE_REPO" "no git on the host to create the project repository" || return 0
    skip_unless "$CTRL_FIRMLINK" "/System/Volumes/Data$FAKE_HOME is not readable even outside" || return 0
    sb -- /bin/sh -c 'echo "echo PWNED" > "$1/.git/hooks/post-rewrite"
        echo "echo PWNED" >> "$1/.git/hooks/pre-commit"
        printf "[core]\n\thooksPath = /tmp/evil\n" >> "$1/.git/config"
        echo SELFTEST-END' sh "/System/Volumes/Data$PROJ"
    ran && git_untouched
}

c_tmp_not_listable() {
    sb -- /bin/sh -c 'ls -a /tmp/; ls -a /private/tmp/; cat "$1"; echo SELFTEST-END' sh "$TMP_MARK"
    NOTE="the listing must not show $(basename "$TMP_MARK") or $(basename "$ROOT")"
    ran && ! contains "$OUT$ERR" "$TMP_SECRET" && ! contains "$OUT" "$(basename "$TMP_MARK")" &&
        ! contains "$OUT" "$(basename "$ROOT")"
}

c_user_tmpdir_not_listable() {
    skip_unless "$HAVE_UT" "getconf DARWIN_USER_TEMP_DIR gave no usable directory" || return 0
    sb -- /bin/sh -c 'ls -a "$1"; cat "$2"; ls -a /private/var/folders/; ls -d /private/var/folders/*/*/T; echo SELFTEST-END' \
        sh "$UT" "$UT_MARK"
    ran && ! contains "$OUT$ERR" "$UT_SECRET" && ! contains "$OUT" "$(basename "$UT_MARK")" &&
        ! contains "$OUT" "/T"
}

c_library_preferences_unreadable() {
    skip_unless "$HAVE_PREF" "no readable file in /Library/Preferences even outside" || return 0
    sb -- /bin/sh -c 'cat "$1" > /dev/null && echo READ-OK; ls -a /Library/Preferences/ && echo LIST-OK
        echo SELFTEST-END' sh "$PREF_FILE"
    ran && ! contains "$OUT" READ-OK && ! contains "$OUT" LIST-OK
}

c_ps_hides_host_processes() {
    skip_unless "$CTRL_PS" "ps outside does not show the marker process" || return 0
    sb -- /bin/sh -c 'ps -A -ww -o pid,command; echo SELFTEST-END'
    NOTE="the marker is 'sleep $MARK_SECS' (pid $MARK_PID)"
    ran && ! contains "$OUT" "sleep $MARK_SECS"
}

c_ps_E_hides_environments() {
    skip_unless "$CTRL_PSE" "ps -E outside does not show the marker's environment" || return 0
    sb -- /bin/sh -c 'ps -A -E -ww -o pid,command; ps -E -ww -p "$1"; echo SELFTEST-END' sh "$MARK_PID"
    NOTE="the marker's environment holds $ENV_MARK"
    ran && ! contains "$OUT" "$ENV_MARK"
}

c_procargs2_denied() {
    skip_unless "$INNER_PY" "no working python3 inside the sandbox (Command Line Tools?)" || return 0
    skip_unless "$CTRL_PROCARGS" "kern.procargs2 does not show the marker even outside" || return 0
    sb -- /bin/sh -c 'python3 -c "$1" "$2"; echo SELFTEST-END' sh "$PY_PROCARGS" "$MARK_PID"
    ran && ! contains "$OUT" "$ENV_MARK" && ! contains "$OUT" PROCARGS-READ
}

c_signal_host_process_denied() {
    sb -- /bin/sh -c 'kill -CONT "$1" && echo SIGNAL-SENT; echo SELFTEST-END' sh "$MARK_PID"
    ran && ! contains "$OUT" SIGNAL-SENT && kill -0 "$MARK_PID" 2>/dev/null
}

c_tiocsti_denied() {
    skip_unless "$CTRL_TIOCSTI" "$TIOCSTI_SKIP" || return 0
    if [ "$INNER_PY" = 1 ]; then
        sb_tty -- /bin/sh -c 'exec python3 -c "$1"' sh "$PY_TIOCSTI"
    elif [ "$INNER_PERL" = 1 ]; then
        sb_tty -- /bin/sh -c 'exec perl -e "$1"' sh "$PL_TIOCSTI"
    else
        SKIP_REASON="neither python3 nor perl works inside the sandbox"
        return 0
    fi
    contains "$OUT" TIOCSTI-DENIED && ! contains "$OUT" TIOCSTI-ALLOWED
}

c_launchctl_submit_denied() {
    LAUNCHD_LABEL="org.agent-sandbox.selftest.$$"
    sb -- /bin/sh -c 'launchctl submit -l "$1" -- /usr/bin/touch "$2"; echo "launchctl status $?"
        echo SELFTEST-END' sh "$LAUNCHD_LABEL" "$SIBLING/launchd-escaped"
    sleep 2
    NOTE="a launchd job would run outside the sandbox and create $SIBLING/launchd-escaped"
    ran && [ ! -e "$SIBLING/launchd-escaped" ]
}

# curl from inside: $1 = port; prints the body (or the error), never through a proxy.
CURL_DIRECT='for host in 127.0.0.1 localhost; do
    curl -sS --max-time 5 --noproxy "*" "http://$host:$1/"; echo " [curl $host:$1: $?]"
done'

c_open_host_loopback_denied() {
    skip_unless "$HAVE_SERVERS" "$SERVERS_SKIP" || return 0
    sb -- /bin/sh -c "$CURL_DIRECT"'
        echo SELFTEST-END' sh "$PORT_DENIED"
    ran && ! contains "$OUT" "$DENIED_BODY"
}

c_filtered_host_loopback_denied() {
    skip_unless "$HAVE_SERVERS" "$SERVERS_SKIP" || return 0
    sb --allow-domain example.com -- /bin/sh -c "$CURL_DIRECT"'
        echo SELFTEST-END' sh "$PORT_DENIED"
    ran && ! contains "$OUT" "$DENIED_BODY"
}

c_filtered_proxy_refuses_host_loopback() {
    skip_unless "$HAVE_SERVERS" "$SERVERS_SKIP" || return 0
    sb --allow-domain example.com -- /bin/sh -c 'echo "proxy: $HTTP_PROXY"
        curl -sS -i --max-time 10 -x "$HTTP_PROXY" "http://127.0.0.1:$1/"; echo " [curl: $?]"
        echo SELFTEST-END' sh "$PORT_DENIED"
    ran && ! contains "$OUT" "$DENIED_BODY"
}

c_project_writable() {
    sb -- /bin/sh -c 'echo inside > made-inside && mkdir -p sub/dir && echo deep > sub/dir/f &&
        mv made-inside renamed && rm sub/dir/f && echo SELFTEST-END'
    ran && [ "$(cat "$PROJ/renamed" 2>/dev/null)" = inside ] && [ ! -e "$PROJ/sub/dir/f" ]
}

c_rw_dir_writable() {
    sb --rw "$RWDIR" -- /bin/sh -c 'echo real > "$1/by-real-path" && echo link > "$HOME/rwdir/by-home-link" &&
        echo SELFTEST-END' sh "$RWDIR"
    ran && [ "$(cat "$RWDIR/by-real-path" 2>/dev/null)" = real ] &&
        [ "$(cat "$RWDIR/by-home-link" 2>/dev/null)" = link ]
}

c_ro_dir_read_only() {
    sb --ro "$RODIR" -- /bin/sh -c 'cat "$1/readme"; cat "$HOME/rodir/readme"; echo x >> "$1/readme"; echo x > "$1/new"
        echo SELFTEST-END' sh "$RODIR"
    ran && contains "$OUT" "read-only docs" && [ "$(cat "$RODIR/readme")" = "read-only docs" ] &&
        [ ! -e "$RODIR/new" ]
}

c_git_commit_in_repo() {
    skip_unless "$HAVE_REPO" "no git on the host to create the project repository" || return 0
    skip_unless "$INNER_GIT" "no working git inside the sandbox (Command Line Tools?)" || return 0
    # shellcheck disable=SC2086 # GIT_ID is a list of flags
    sb $GIT_ID -- /bin/sh -c 'echo two > two.txt && git add two.txt && git commit -q -m second &&
        git log -1 --format=%s && echo SELFTEST-END'
    ran && contains "$OUT" second && [ "$(hgit -C "$PROJ" log -1 --format=%s)" = second ]
}

c_git_init_and_commit_fresh_project() {
    skip_unless "$INNER_GIT" "no working git inside the sandbox (Command Line Tools?)" || return 0
    # shellcheck disable=SC2086 # GIT_ID is a list of flags
    sb_in "$FRESH" $GIT_ID -- /bin/sh -c 'git init -q && echo one > one.txt && git add one.txt &&
        git commit -q -m first && git log -1 --format=%s && echo SELFTEST-END'
    ran && contains "$OUT" first
}

c_usr_bin_git_version() {
    skip_unless "$DEVTOOLS" "no developer tools (xcode-select -p fails), so /usr/bin/git is only a stub" || return 0
    sb -- /usr/bin/git --version
    [ "$CODE" = 0 ] && contains "$OUT" "git version"
}

c_stty_under_tty() {
    sb_tty -- /bin/sh -c 'stty -a && stty raw -echo && stty sane && echo STTY-OK'
    contains "$OUT" STTY-OK && contains "$OUT" speed
}

c_shebang_scripts_run() {
    sb -- /bin/sh -c './hello.sh && ./hello-env.sh && echo SELFTEST-END'
    ran && contains "$OUT" SHEBANG-SH-OK && contains "$OUT" SHEBANG-ENV-OK
}

c_open_allowed_local_port_reachable() {
    skip_unless "$HAVE_SERVERS" "$SERVERS_SKIP" || return 0
    sb --allow-local-port "$PORT_ALLOWED" -- /bin/sh -c "$CURL_DIRECT"'
        set -- "$2"; '"$CURL_DIRECT"'
        echo SELFTEST-END' sh "$PORT_ALLOWED" "$PORT_DENIED"
    NOTE="port $PORT_ALLOWED must answer $ALLOWED_BODY, port $PORT_DENIED must stay unreachable"
    ran && contains "$OUT" "$ALLOWED_BODY" && ! contains "$OUT" "$DENIED_BODY"
}

c_filtered_allowed_local_port_reachable() {
    skip_unless "$HAVE_SERVERS" "$SERVERS_SKIP" || return 0
    sb --allow-domain example.com --allow-local-port "$PORT_ALLOWED" -- /bin/sh -c "$CURL_DIRECT"'
        set -- "$2"; '"$CURL_DIRECT"'
        echo SELFTEST-END' sh "$PORT_ALLOWED" "$PORT_DENIED"
    NOTE="port $PORT_ALLOWED must answer $ALLOWED_BODY, port $PORT_DENIED must stay unreachable"
    ran && contains "$OUT" "$ALLOWED_BODY" && ! contains "$OUT" "$DENIED_BODY"
}

c_filtered_proxy_answers() {
    # A name the proxy must refuse before any lookup: nothing leaves this machine.
    sb --allow-domain example.com -- /bin/sh -c 'echo "proxy: $HTTP_PROXY"
        curl -sS -i --max-time 10 -x "$HTTP_PROXY" http://denied.invalid/; echo " [curl: $?]"
        echo SELFTEST-END'
    NOTE="expected the proxy named by HTTP_PROXY to answer 403 with x-agent-sandbox-denied"
    ran && contains "$OUT" " 403" && contains "$(lower "$OUT")" x-agent-sandbox-denied
}

c_project_in_user_tmpdir_works() {
    skip_unless "$HAVE_UT" "getconf DARWIN_USER_TEMP_DIR gave no usable directory" || return 0
    sb_in "$UT_PROJ" -- /bin/sh -c 'ls -a . && echo ok > f && cat f && echo SELFTEST-END'
    NOTE="launch directory $UT_PROJ (as after cd \$(mktemp -d))"
    ran && [ "$(cat "$UT_PROJ/f" 2>/dev/null)" = ok ]
}

# The list: name, function, what it shows. DARWIN_SELFTEST_DRY=1 prints it.
all_checks() {
    check sandbox_starts c_sandbox_starts \
        "a command runs in the sandbox and its exit status comes back"
    check launcher_environment_not_inherited c_launcher_environment_not_inherited \
        "a variable of the launcher's environment is not visible inside"
    # Must fail inside.
    check ssh_key_unreadable c_ssh_key_unreadable \
        "the planted \$HOME/.ssh/id_ed25519 (not declared) cannot be read; the real home cannot be listed"
    check ssh_key_via_firmlink_unreadable c_ssh_key_via_firmlink_unreadable \
        "nor as /System/Volumes/Data\$HOME/.ssh/id_ed25519"
    check ssh_key_case_variants_unreadable c_ssh_key_case_variants_unreadable \
        "nor as \$HOME/.SSH/id_ed25519, .ssh/ID_ED25519 (case-insensitive volume)"
    check write_outside_denied c_write_outside_denied \
        "no file or directory can be created in a sibling of the project, the home or the temp root"
    check git_hooks_write_denied c_git_hooks_write_denied \
        ".git/hooks/pre-commit cannot be appended to or removed, .git/hooks/post-checkout not created"
    check git_config_write_denied c_git_config_write_denied \
        ".git/config cannot be appended to, .git/config.worktree not written"
    check git_case_variants_denied c_git_case_variants_denied \
        "nor through .GIT/HOOKS/…, .Git/Hooks/…, .git/CONFIG"
    check git_dir_rename_denied c_git_dir_rename_denied \
        "mv .git g, mv .git/hooks …, mv .git/config … all fail"
    check git_hook_hard_link_denied c_git_hook_hard_link_denied \
        "ln .git/hooks/pre-commit x (hard link) and ln .git/config y fail"
    check git_hook_via_firmlink_denied c_git_hook_via_firmlink_denied \
        "nor can hooks or config be written as /System/Volumes/Data<project>/.git/…"
    check tmp_not_listable c_tmp_not_listable \
        "/tmp and /private/tmp cannot be listed, a file planted there cannot be read"
    check user_tmpdir_not_listable c_user_tmpdir_not_listable \
        "the user's /private/var/folders/*/*/T cannot be listed, a file planted there cannot be read"
    check library_preferences_unreadable c_library_preferences_unreadable \
        "/Library/Preferences cannot be listed, its files cannot be read"
    check ps_hides_host_processes c_ps_hides_host_processes \
        "ps -A does not show a marker sleep started outside"
    check ps_E_hides_environments c_ps_E_hides_environments \
        "ps -E does not show the marker's environment"
    check procargs2_denied c_procargs2_denied \
        "sysctl kern.procargs2 of the marker fails (python3 ctypes)"
    check signal_host_process_denied c_signal_host_process_denied \
        "kill -CONT of the marker fails"
    check tiocsti_denied c_tiocsti_denied \
        "TIOCSTI on the terminal fails (python3 fcntl.ioctl, or perl; under script -q /dev/null)"
    check launchctl_submit_denied c_launchctl_submit_denied \
        "launchctl submit cannot start a job outside the sandbox"
    check open_host_loopback_denied c_open_host_loopback_denied \
        "open mode: a server on the host's 127.0.0.1 (started here) is unreachable, also as localhost"
    check filtered_host_loopback_denied c_filtered_host_loopback_denied \
        "filtered mode (--allow-domain example.com): the same server is unreachable directly"
    check filtered_proxy_refuses_host_loopback c_filtered_proxy_refuses_host_loopback \
        "filtered mode: nor through the proxy"
    # Must succeed inside.
    check project_writable c_project_writable \
        "files and directories can be created, renamed and removed in the project"
    check rw_dir_writable c_rw_dir_writable \
        "a --rw directory is writable at its real path and as \$HOME/<name>"
    check ro_dir_read_only c_ro_dir_read_only \
        "a --ro directory is readable (also as \$HOME/<name>) and not writable"
    check git_commit_in_repo c_git_commit_in_repo \
        "git add && git commit work in the protected repository (identity from --env)"
    check git_init_and_commit_fresh_project c_git_init_and_commit_fresh_project \
        "git init && git commit work in a project without a repository"
    check usr_bin_git_version c_usr_bin_git_version \
        "/usr/bin/git --version works (the Xcode shim finds the developer tools)"
    check stty_under_tty c_stty_under_tty \
        "stty -a and raw mode work on the terminal (under script -q /dev/null)"
    check shebang_scripts_run c_shebang_scripts_run \
        "#!/bin/sh and #!/usr/bin/env sh scripts in the project run"
    check open_allowed_local_port_reachable c_open_allowed_local_port_reachable \
        "open mode, --allow-local-port P: the host's 127.0.0.1:P answers, another port does not"
    check filtered_allowed_local_port_reachable c_filtered_allowed_local_port_reachable \
        "filtered mode, --allow-local-port P: the same"
    check filtered_proxy_answers c_filtered_proxy_answers \
        "filtered mode: the proxy named by HTTP_PROXY answers (403 for a .invalid name, no lookup)"
    check project_in_user_tmpdir_works c_project_in_user_tmpdir_works \
        "a project under \$TMPDIR (/var/folders/…/T, as mktemp -d makes) is usable, as on Linux"
}

check() {
    local name=$1 fn=$2 desc=$3
    if [ "$DRY" = 1 ]; then
        printf 'CHECK %s: %s\n' "$name" "$desc"
        PASSED=$((PASSED + 1))
        return 0
    fi
    if [ -n "$ONLY" ]; then
        # shellcheck disable=SC2254 # ONLY is a glob on purpose
        case $name in
        $ONLY) ;;
        *) return 0 ;;
        esac
    fi
    CODE='' OUT='' ERR='' NOTE='' SKIP_REASON=''
    if "$fn"; then
        if [ -n "$SKIP_REASON" ]; then
            printf 'SKIP %s (%s)\n' "$name" "$SKIP_REASON"
            SKIPPED=$((SKIPPED + 1))
        else
            printf 'PASS %s\n' "$name"
            PASSED=$((PASSED + 1))
        fi
    else
        printf 'FAIL %s\n' "$name"
        printf '    what: %s\n' "$desc"
        [ -z "$NOTE" ] || printf '    note: %s\n' "$NOTE"
        printf '    exit status: %s\n' "$CODE"
        printf '%s\n' "$OUT" | head -n 40 | sed 's/^/    out| /'
        printf '%s\n' "$ERR" | head -n 40 | sed 's/^/    err| /'
        FAILED=$((FAILED + 1))
    fi
}

# ---- Setup and controls (outside the sandbox) --------------------------------------------------

cleanup() {
    local p
    for p in $BG_PIDS; do
        kill "$p" 2>/dev/null
    done
    [ -z "$LAUNCHD_LABEL" ] || launchctl remove "$LAUNCHD_LABEL" 2>/dev/null
    [ -z "$UT_MARK" ] || rm -f "$UT_MARK"
    [ -z "$UT_PROJ" ] || rm -rf "$UT_PROJ"
    [ -z "$TMP_MARK" ] || rm -f "$TMP_MARK"
    if [ -n "$ROOT" ]; then
        if [ "$KEEP" = 1 ]; then
            say "kept $ROOT (sessions in $ROOT/state/agent-sandbox)"
        else
            rm -rf "$ROOT"
        fi
    fi
}

setup() {
    ROOT=$(mktemp -d /tmp/agent-sandbox-selftest.XXXXXX) || return 1
    ROOT=$(cd "$ROOT" && pwd -P) || return 1 # /private/tmp/…: the path the kernel sees
    FAKE_HOME=$ROOT/home
    PROJ=$FAKE_HOME/proj
    FRESH=$FAKE_HOME/fresh
    SIBLING=$FAKE_HOME/sibling
    RWDIR=$FAKE_HOME/rwdir
    RODIR=$FAKE_HOME/rodir
    STATE=$ROOT/state
    mkdir -p "$PROJ" "$FRESH" "$SIBLING" "$RWDIR" "$RODIR" "$FAKE_HOME/.ssh" "$STATE" || return 1

    local r="$$-$RANDOM$RANDOM"
    SECRET="FAKE-PRIVATE-KEY-$r"
    TMP_SECRET="SELFTEST-TMP-SECRET-$r"
    UT_SECRET="SELFTEST-USER-TMPDIR-SECRET-$r"
    ENV_MARK="SELFTEST-ENV-MARK-$r"
    LAUNCHER_SECRET="SELFTEST-LAUNCHER-SECRET-$r"
    ALLOWED_BODY="SELFTEST-ALLOWED-PORT-$r"
    DENIED_BODY="SELFTEST-DENIED-PORT-$r"
    MARK_SECS=$((3000000 + $$))

    chmod 700 "$FAKE_HOME/.ssh"
    printf '%s\n' "$SECRET" >"$FAKE_HOME/.ssh/id_ed25519"
    chmod 600 "$FAKE_HOME/.ssh/id_ed25519"
    printf 'read-only docs\n' >"$RODIR/readme"
    printf '#!/bin/sh\necho SHEBANG-SH-OK\n' >"$PROJ/hello.sh"
    printf '#!/usr/bin/env sh\necho SHEBANG-ENV-OK\n' >"$PROJ/hello-env.sh"
    chmod +x "$PROJ/hello.sh" "$PROJ/hello-env.sh"
    printf 'selftest project\n' >"$PROJ/README"

    # Developer tools: without them /usr/bin/git and /usr/bin/python3 are stubs that offer to
    # install them (a dialog), so never run those stubs outside when this fails.
    DEVTOOLS=0
    xcode-select -p >/dev/null 2>&1 && DEVTOOLS=1
    HOST_PY=$(command -v python3 2>/dev/null)
    [ "$HOST_PY" != /usr/bin/python3 ] || [ "$DEVTOOLS" = 1 ] || HOST_PY=
    HOST_GIT=$(command -v git 2>/dev/null)
    [ "$HOST_GIT" != /usr/bin/git ] || [ "$DEVTOOLS" = 1 ] || HOST_GIT=

    # The project is a git repository with a (harmless) pre-commit hook, made on the host.
    HAVE_REPO=0
    if [ -n "$HOST_GIT" ]; then
        printf '#!/bin/sh\nexit 0\n' >"$ROOT/pre-commit.orig"
        if hgit -C "$PROJ" init -q &&
            cp "$ROOT/pre-commit.orig" "$PROJ/.git/hooks/pre-commit" &&
            chmod +x "$PROJ/.git/hooks/pre-commit" &&
            hgit -C "$PROJ" add README hello.sh hello-env.sh &&
            hgit -C "$PROJ" commit -q -m init &&
            cp "$PROJ/.git/config" "$ROOT/config.orig"; then
            HAVE_REPO=1
        else
            say "could not create the project repository with $HOST_GIT"
        fi
    fi

    CASE_INSENSITIVE=0
    [ -e "$FAKE_HOME/.SSH/id_ed25519" ] && CASE_INSENSITIVE=1
    CTRL_FIRMLINK=0
    [ "$(cat "/System/Volumes/Data$FAKE_HOME/.ssh/id_ed25519" 2>/dev/null)" = "$SECRET" ] && CTRL_FIRMLINK=1

    TMP_MARK=$(mktemp /tmp/agent-sandbox-selftest-marker.XXXXXX) || return 1
    TMP_MARK=$(cd /tmp && pwd -P)/$(basename "$TMP_MARK") # /private/tmp/…
    printf '%s\n' "$TMP_SECRET" >"$TMP_MARK"

    HAVE_UT=0
    UT=$(getconf DARWIN_USER_TEMP_DIR 2>/dev/null)
    if [ -n "$UT" ] && [ -d "$UT" ]; then
        UT=$(cd "$UT" && pwd -P)
        UT_MARK=$(mktemp "$UT/agent-sandbox-selftest-marker.XXXXXX") &&
            UT_PROJ=$(mktemp -d "$UT/agent-sandbox-selftest-proj.XXXXXX") &&
            printf '%s\n' "$UT_SECRET" >"$UT_MARK" && HAVE_UT=1
        # The control: outside, the listing shows the marker.
        # shellcheck disable=SC2010
        if [ "$HAVE_UT" = 1 ] && ! ls -a "$UT" | grep -q "$(basename "$UT_MARK")"; then
            HAVE_UT=0
        fi
    fi

    HAVE_PREF=0
    PREF_FILE=
    local f
    for f in /Library/Preferences/.GlobalPreferences.plist /Library/Preferences/*.plist; do
        if [ -f "$f" ] && [ -r "$f" ] && cat "$f" >/dev/null 2>&1; then
            PREF_FILE=$f
            HAVE_PREF=1
            break
        fi
    done

    # The marker process: a sleep with a unique argument and environment.
    env -i SELFTEST_ENV_MARK="$ENV_MARK" /bin/sleep "$MARK_SECS" </dev/null >/dev/null 2>&1 &
    MARK_PID=$!
    BG_PIDS="$BG_PIDS $MARK_PID"
    sleep 0.5
    CTRL_PS=0
    # shellcheck disable=SC2009 # the control for ps inside
    ps -A -ww -o pid,command | grep -q "sleep $MARK_SECS" && CTRL_PS=1
    CTRL_PSE=0
    ps -E -ww -p "$MARK_PID" 2>/dev/null | grep -q "$ENV_MARK" && CTRL_PSE=1
    CTRL_PROCARGS=0
    if [ -n "$HOST_PY" ] && "$HOST_PY" -c "$PY_PROCARGS" "$MARK_PID" 2>/dev/null | grep -q "$ENV_MARK"; then
        CTRL_PROCARGS=1
    fi

    # TIOCSTI must work outside, or its refusal inside proves nothing.
    CTRL_TIOCSTI=0
    local outside=
    if [ -n "$HOST_PY" ]; then
        outside=$(/usr/bin/script -q /dev/null "$HOST_PY" -c "$PY_TIOCSTI" </dev/null 2>&1 | tr -d '\r')
    elif [ -x /usr/bin/perl ]; then
        outside=$(/usr/bin/script -q /dev/null /usr/bin/perl -e "$PL_TIOCSTI" </dev/null 2>&1 | tr -d '\r')
    fi
    if contains "$outside" TIOCSTI-ALLOWED; then
        CTRL_TIOCSTI=1
    else
        outside=$(printf '%s\n' "$outside" | head -n 1)
        TIOCSTI_SKIP="TIOCSTI does not work outside the sandbox either (${outside:-no python3 or perl on the host})"
    fi

    # Loopback servers: one the sandbox may be allowed to reach, one it must never reach.
    HAVE_SERVERS=0
    SERVERS_SKIP="no python3 on the host for the loopback servers (nix run .#darwin-selftest provides one)"
    if [ -n "$HOST_PY" ]; then
        "$HOST_PY" -c "$PY_SERVER" "$ROOT/port-allowed" "$ALLOWED_BODY" </dev/null >/dev/null 2>"$ROOT/server-allowed.log" &
        BG_PIDS="$BG_PIDS $!"
        "$HOST_PY" -c "$PY_SERVER" "$ROOT/port-denied" "$DENIED_BODY" </dev/null >/dev/null 2>"$ROOT/server-denied.log" &
        BG_PIDS="$BG_PIDS $!"
        if wait_for_file "$ROOT/port-allowed" 100 && wait_for_file "$ROOT/port-denied" 100; then
            PORT_ALLOWED=$(cat "$ROOT/port-allowed")
            PORT_DENIED=$(cat "$ROOT/port-denied")
            if [ "$(curl -sS --max-time 5 --noproxy '*' "http://127.0.0.1:$PORT_ALLOWED/")" = "$ALLOWED_BODY" ] &&
                [ "$(curl -sS --max-time 5 --noproxy '*' "http://127.0.0.1:$PORT_DENIED/")" = "$DENIED_BODY" ]; then
                HAVE_SERVERS=1
            else
                SERVERS_SKIP="the loopback servers do not answer curl outside the sandbox"
            fi
        else
            SERVERS_SKIP="the loopback servers did not start: $(cat "$ROOT/server-allowed.log" "$ROOT/server-denied.log")"
        fi
    fi

    # What works inside (probed through the sandbox itself; the stubs cannot open dialogs there).
    INNER_PY=0 INNER_PERL=0 INNER_GIT=0
    sb -- /bin/sh -c 'python3 -c pass && echo PY-OK; perl -e 1 && echo PERL-OK; git --version && echo GIT-OK; true'
    contains "$OUT" PY-OK && INNER_PY=1
    contains "$OUT" PERL-OK && INNER_PERL=1
    contains "$OUT" GIT-OK && INNER_GIT=1
    return 0
}

main() {
    case ${1:-} in
    -h | --help)
        sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'
        return 0
        ;;
    esac
    if [ "$DRY" = 1 ]; then
        printf '%s\n' "darwin selftest: the checks (DARWIN_SELFTEST_DRY=1: nothing is run)"
        all_checks
        printf 'darwin selftest: %s checks\n' "$PASSED"
        return 0
    fi
    if [ "$(uname -s)" != Darwin ]; then
        say "this runs only on macOS (it drives /usr/bin/sandbox-exec); this is $(uname -s). DARWIN_SELFTEST_DRY=1 lists the checks anywhere."
        return 2
    fi
    HELPER=${1:-$(command -v agent-sandbox 2>/dev/null)}
    [ ! -d "$HELPER" ] || HELPER=$HELPER/bin/agent-sandbox
    if [ -z "$HELPER" ] || [ ! -x "$HELPER" ]; then
        say "no agent-sandbox helper: pass its path as the first argument, put it on PATH, or use nix run .#darwin-selftest"
        return 2
    fi
    case $HELPER in
    /*) ;;
    *) HELPER=$(pwd -P)/$HELPER ;;
    esac
    if [ ! -x /usr/bin/sandbox-exec ]; then
        say "/usr/bin/sandbox-exec is missing: agent-sandbox cannot run on this macOS"
        return 2
    fi

    trap cleanup EXIT
    trap 'exit 130' INT TERM HUP
    if ! setup; then
        say "setup failed"
        return 2
    fi
    say "helper $HELPER ($("$HELPER" --version 2>&1)), macOS $(sw_vers -productVersion 2>/dev/null), $(uname -m)"
    say "world in $ROOT; developer tools: $DEVTOOLS, inside: python3 $INNER_PY perl $INNER_PERL git $INNER_GIT"
    all_checks
    printf 'darwin selftest: %s passed, %s failed (%s skipped)\n' "$PASSED" "$FAILED" "$SKIPPED"
    [ "$FAILED" = 0 ]
}

main "$@"
exit $?
