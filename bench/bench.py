#!/usr/bin/env python3
"""The benchmark driver behind bench/run (see bench/README.md for what each row measures).

Start-up rows are timed with hyperfine (all commands of a group in one hyperfine call, several
interleaved rounds, timings pooled); peak memory comes from wait4(). Proxy rows run in a
private user + network namespace (`unshare -Urn`) that holds only a loopback interface: the
upstream server listens on 127.0.0.1:443 there, so nothing can leave the machine.

Only loopback is ever contacted. Everything is created under one work directory in /var/tmp
(not /tmp: the sandbox mounts its own /tmp over it) and removed at the end unless --keep.
"""

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# Rows that fail because of a known limit of the product or of bubblewrap, reported in the
# table (and in the reply to the lead) rather than treated as a harness failure. A listed row
# that fails for another reason, or any unlisted failure, makes the run fail. --strict counts
# these too.
KNOWN_LIMITS = {
    "closure-5000": (
        "Exceeded maximum number of arguments|more than bubblewrap accepts",
        "bwrap accepts at most 9000 arguments (each bind mount takes 3)",
    ),
    "bare:closure-5000": (
        "Exceeded maximum number of arguments|more than bubblewrap accepts",
        "bwrap accepts at most 9000 arguments (each bind mount takes 3)",
    ),
}

# Buffer per direction of the reference relay (the proxy's tunnels use tokio's 8 KiB).
RELAY_BUF = 64 * 1024

FAILURES = []  # (name, message)
KNOWN = []  # (name, message)


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def fail(name, message):
    message = message.strip()
    limit = KNOWN_LIMITS.get(name)
    if limit and any(m in message for m in limit[0].split("|")):
        KNOWN.append((name, limit[1]))
        log(f"{name}: fails as known: {limit[1]}")
        return
    FAILURES.append((name, message))
    log(f"FAILED {name}: {message[-600:]}")


# --------------------------------------------------------------------------- helpers


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def tool_version(argv):
    try:
        out = run(argv, timeout=10)
        text = (out.stdout or out.stderr).strip().splitlines()
        return text[0] if text else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "not found"


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
            mem = f"{kib / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return {
        "load": load,
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "memory": mem,
        "user": "root" if os.getuid() == 0 else f"uid {os.getuid()}",
        "bwrap": tool_version(["bwrap", "--version"]),
        "pasta": tool_version(["pasta", "--version"]),
        "hyperfine": tool_version(["hyperfine", "--version"]),
    }


class Ctx:
    def __init__(self, args, work):
        self.args = args
        self.quick = args.quick
        self.sandbox = os.path.abspath(args.sandbox)
        self.loadgen = os.path.abspath(args.loadgen)
        self.work = work
        self.launch = os.path.join(work, "launch")
        self.state = os.path.join(work, "state")
        self.baseline = os.path.join(work, "baseline")
        self.store = os.path.join(work, "store")
        for d in (self.launch, self.state, self.baseline, self.store):
            os.makedirs(d, exist_ok=True)
        self.env = dict(os.environ)
        # Session directories of the measured runs go here, not into the user's state.
        self.env["XDG_STATE_HOME"] = self.state

    def sb(self, *args):
        return [self.sandbox, "run", *args]


# --------------------------------------------------------------------------- fixtures


def make_closure(ctx, n):
    """A spec whose closure has n paths: a tools dir (true, sh, env), the host's /lib and
    /lib64 (the loader and libc: a real Nix closure holds glibc), and store-like dirs."""
    tools = os.path.join(ctx.store, "0" * 32 + "-bench-tools")
    if not os.path.isdir(tools):
        os.makedirs(os.path.join(tools, "bin"))
        for b in ("true", "sh", "env"):
            src = shutil.which(b) or f"/bin/{b}"
            shutil.copy2(os.path.realpath(src), os.path.join(tools, "bin", b))
    real = [p for p in ("/lib", "/lib64") if os.path.exists(p)]
    paths = [tools, *real]
    i = 0
    while len(paths) < n:
        h = f"{(i * 2654435761) % (1 << 128):032x}"[-32:]
        p = os.path.join(ctx.store, f"{h}-pkg{i}")
        if not os.path.isdir(p):
            os.makedirs(os.path.join(p, "bin"))
            os.makedirs(os.path.join(p, "lib"))
            with open(os.path.join(p, "lib", f"libpkg{i}.so"), "w") as f:
                f.write("x")
        paths.append(p)
        i += 1
    spec = {"version": 1, "closure": paths[:n], "path": [os.path.join(tools, "bin")]}
    f = os.path.join(ctx.work, f"closure-{n}.json")
    with open(f, "w") as out:
        json.dump(spec, out)
    return f


def make_tree(ctx, files):
    """A declared directory holding `files` files in leaf dirs of 100, three levels deep, with
    symlinks at depth: one relative link inside per leaf, and every tenth leaf a link out of
    the tree (/etc/hostname: warned about) and a link to its parent dir (a loop if followed)."""
    root = os.path.join(ctx.work, f"tree-{files}")
    leaves = max(1, files // 100)
    fan = 1
    while fan ** 3 < leaves:
        fan += 1
    made = 0
    leaf = 0
    links = 0
    for a in range(fan):
        for b in range(fan):
            for c in range(fan):
                if leaf >= leaves:
                    break
                d = os.path.join(root, f"a{a}", f"b{b}", f"c{c}")
                os.makedirs(d)
                per = min(100, files - made)
                for k in range(per):
                    fd = os.open(os.path.join(d, f"f{k}.txt"), os.O_CREAT | os.O_WRONLY, 0o644)
                    os.close(fd)
                made += per
                os.symlink("../c0/f0.txt", os.path.join(d, "link-in"))
                links += 1
                if leaf % 10 == 0:
                    os.symlink("/etc/hostname", os.path.join(d, "link-out"))
                    os.symlink("..", os.path.join(d, "link-up"))
                    links += 2
                leaf += 1
    return root, made, links


INIT_PATH = "/run/agent-sandbox/agent-sandbox"


def bare_bwrap(ctx, agent_args):
    """The bwrap argv agent-sandbox would run for `agent_args` (from --dry-run --json), made to run
    bare: `--as-pid-1` dropped, the init (`…/agent-sandbox [__init] [--bridge …] -- true`) replaced by the
    path of `true`, session files (passwd, group, masks, resolv.conf) pointed at copies in the
    baseline dir, the plan's environment set with --clearenv/--setenv. Same namespaces, mounts
    (the helper binary's bind included) and environment."""
    out = run(ctx.sb("--dry-run", "--json", *agent_args, "--", "true"), cwd=ctx.launch, env=ctx.env, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"--dry-run --json failed: {out.stderr.strip()}")
    plan = json.loads(out.stdout)
    # The environment bwrap hands to the sandbox (the helper passes it as bwrap's own
    # environment; the twin sets the same with --clearenv/--setenv).
    env = list(plan["env"].items())
    argv = [plan["program"]] + list(plan["argv"])
    prefix = os.path.join(ctx.state, "agent-sandbox") + "/"
    fixed = []
    for a in argv:
        if a.startswith(prefix):
            name = os.path.basename(a)
            dst = os.path.join(ctx.baseline, name)
            if not os.path.exists(dst):
                with open(dst, "w") as f:
                    if name == "passwd":
                        f.write(f"sandbox:x:{os.getuid()}:{os.getgid()}:sandbox:/:/bin/sh\n")
                    elif name == "group":
                        f.write(f"sandbox:x:{os.getgid()}:\n")
                    elif name == "hosts":
                        f.write("127.0.0.1 localhost\n")
                    elif name == "boot_id":
                        f.write("00000000-0000-0000-0000-000000000000\n")
            a = dst
        fixed.append(a)
    if "--as-pid-1" in fixed:
        fixed.remove("--as-pid-1")
    # Binds by descriptor (`--bind-fd FD DEST`): the descriptors are the launcher's own; the
    # twin binds the same paths by name (declared paths, the launch dir and git's are bound at
    # their own path).
    for k in range(len(fixed) - 2):
        if fixed[k] in ("--bind-fd", "--ro-bind-fd"):
            fixed[k] = "--bind" if fixed[k] == "--bind-fd" else "--ro-bind"
            fixed[k + 1] = fixed[k + 2]
    # The tail: `-- /run/agent-sandbox/agent-sandbox [__init] [...] -- true` (the init is
    # the small agent-sandbox-init bound there, or the helper itself with `__init`).
    init = next((i for i in range(1, len(fixed)) if fixed[i - 1] == "--" and fixed[i] == INIT_PATH), None)
    if init is None:
        raise RuntimeError(f"bwrap argv has no `-- {INIT_PATH}` tail")
    head = fixed[:init]
    if head and head[-1] == "--":
        head = head[:-1]
    # A staged closure (agent-sandbox's holder puts only the closure's entries in the store
    # directory, built beside it and bound onto it once): bare bwrap has no holder, so it binds
    # each closure path of that directory itself, in place of that bind (the last one, its
    # cheapest position).
    staged = plan.get("staging")
    if staged:
        sdir = staged["dir"]
        spec = next((agent_args[i + 1] for i, a in enumerate(agent_args) if a == "--spec"), None)
        with open(spec) as f:
            closure = json.load(f)["closure"]
        # `--ro-bind <session>/store-view DIR`: the holder's view (its source was rewritten
        # above like the other session files); found by its destination.
        k = next(k for k in range(len(head) - 2) if head[k] == "--ro-bind" and head[k + 2] == sdir)
        binds = []
        for c in closure:
            if os.path.dirname(c) == sdir:
                binds += ["--ro-bind", c, c]
        head[k:k + 3] = binds
    for k, v in env:
        head += ["--setenv", k, v]
    if env:
        head[1:1] = ["--clearenv"]
    # bwrap looks the command up in its own (outer) PATH: name `true` by its path inside.
    path = dict(env).get("PATH", "")
    for k in range(len(head) - 2):
        if head[k] == "--setenv" and head[k + 1] == "PATH":
            path = head[k + 2]
    true = next((os.path.join(d, "true") for d in path.split(":") if d and os.access(os.path.join(d, "true"), os.X_OK)), None)
    if true is None:
        raise RuntimeError(f"no `true` on the sandbox PATH {path}")
    return head + ["--", true]


# --------------------------------------------------------------------------- start-up


def wait4_rss(ctx, argv):
    """Run argv once under `loadgen rss`; (exit status, peak RSS in KiB of the largest process
    it waited for, stderr). A small spawner, because ru_maxrss counts the RSS a child had
    before exec (a fork of this Python process would read ~27 MiB)."""
    p = run([ctx.loadgen, "rss", "--", *argv], cwd=ctx.launch, env=ctx.env, timeout=600)
    try:
        kib = int(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        kib = None
    return p.returncode, kib, p.stderr


def hyperfine(ctx, cmds, rounds, warmup, runs):
    """Time `cmds` ({name: argv}) with hyperfine, `rounds` interleaved calls; pooled seconds."""
    times = {n: [] for n in cmds}
    for r in range(rounds):
        out = os.path.join(ctx.work, f"hf-{len(os.listdir(ctx.work))}.json")
        argv = ["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs), "--export-json", out]
        names = list(cmds)
        if r % 2 == 1:
            names.reverse()  # alternate the order: drift hits every command alike
        for n in names:
            argv += ["-n", n, shlex.join(cmds[n])]
        res = run(argv, cwd=ctx.launch, env=ctx.env, timeout=1800)
        if res.returncode != 0:
            for n in names:
                fail(n, f"hyperfine failed: {res.stderr.strip()[-400:]}")
            return {}
        with open(out) as f:
            for result in json.load(f)["results"]:
                times[result["command"]].extend(result["times"])
    return times


def startup(ctx):
    q = ctx.quick
    closure_sizes = [10, 100, 1000, 5000]
    tree_sizes = [1000, 10000] if q else [10000, 100000]
    log("creating fixtures (closures, declared trees)")
    specs = {n: make_closure(ctx, n) for n in closure_sizes}
    trees = {}
    for n in tree_sizes:
        trees[n] = make_tree(ctx, n)

    # name -> (agent-sandbox args, or a full argv for floors), group
    agent = {
        "fs": ["--no-network"],
        "filtered": ["--allow-domain", "example.com"],
        "open": [],
    }
    for n in closure_sizes:
        agent[f"closure-{n}"] = ["--no-network", "--spec", specs[n]]
    for n in tree_sizes:
        agent[f"tree-{n}"] = ["--no-network", "--ro", trees[n][0]]

    cmds = {}
    for name, a in agent.items():
        cmds[name] = ctx.sb(*a, "--", "true")
    # Floors: bare bwrap with the same mounts, for every filesystem-only variant.
    for name in ["fs"] + [f"closure-{n}" for n in closure_sizes] + [f"tree-{n}" for n in tree_sizes]:
        try:
            cmds[f"bare:{name}"] = bare_bwrap(ctx, agent[name])
        except RuntimeError as e:
            fail(f"bare:{name}", str(e))
    cmds["pasta-floor"] = [ctx.loadgen, "pasta-floor", "--", "true"]
    # A command line string may hold at most 128 KiB: longer argvs (the bare twin of the
    # 1,000-path closure) are exec'd from a file by `loadgen exec` (one extra exec, ~1 ms).
    wrapped = []
    for name, argv in list(cmds.items()):
        if len(shlex.join(argv)) > 100_000:
            f = os.path.join(ctx.work, f"argv-{name.replace(':', '-')}")
            with open(f, "wb") as out:
                out.write(b"\0".join(a.encode() for a in argv))
            cmds[name] = [ctx.loadgen, "exec", f]
            wrapped.append(name)

    # Check every command once (exit status, stderr) and take its peak memory.
    log("checking each start-up command once")
    rss = {}
    ok = {}
    for name, argv in cmds.items():
        t0 = time.monotonic()
        try:
            code, kib, err = wait4_rss(ctx, argv)
        except OSError as e:
            fail(name, str(e))
            continue
        if code != 0:
            fail(name, f"exit {code}: {err}")
            continue
        rss[name] = [kib]
        ok[name] = time.monotonic() - t0
    # Two more memory samples for the fast ones.
    for name in ok:
        if ok[name] < 0.5:
            for _ in range(1 if q else 2):
                code, kib, _ = wait4_rss(ctx, cmds[name])
                if code == 0:
                    rss[name].append(kib)

    floor = wait4_rss(ctx, ["true"])[1]
    fast = {n: cmds[n] for n in ok if ok[n] < 0.4}
    slow = {n: cmds[n] for n in ok if ok[n] >= 0.4}
    log(f"timing {len(fast)} fast commands" + (f", {len(slow)} slow ones" if slow else ""))
    times = {}
    if q:
        times.update(hyperfine(ctx, fast, rounds=1, warmup=0, runs=2))
        if slow:
            times.update(hyperfine(ctx, slow, rounds=1, warmup=0, runs=1))
    else:
        # Many short rounds in alternating order: a burst of other load hits every row alike.
        # Three warm-up runs per row and round: the rows in between (100,000-file trees,
        # pasta) evict the caches, and a row measured right after them would pay for that.
        times.update(hyperfine(ctx, fast, rounds=6, warmup=3, runs=8))
        if slow:
            times.update(hyperfine(ctx, slow, rounds=3, warmup=0, runs=2))
    stats = {}
    for name, ts in times.items():
        if ts:
            ms = [t * 1000 for t in ts]
            stats[name] = {
                "median_ms": median(ms),
                "min_ms": min(ms),
                "max_ms": max(ms),
                "runs": len(ms),
                "rss_kib": median(rss.get(name, [])) if rss.get(name) else None,
            }
    return {
        "stats": stats,
        "closure_sizes": closure_sizes,
        "trees": {str(n): {"files": trees[n][1], "links": trees[n][2]} for n in tree_sizes},
        "argv": {n: shlex.join(a) for n, a in cmds.items()},
        "wrapped": wrapped,
        "rss_floor_kib": floor,
    }


# --------------------------------------------------------------------------- proxy


def proc_cpu_s(pid):
    """utime + stime of a process (all its threads, exited ones included), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def find_init(helper_pid):
    """The sandbox's PID 1 (our init: it hands the proxy port over, then only waits) below the helper."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    todo = [helper_pid]
    while todo:
        pid = todo.pop()
        for c in children.get(pid, []):
            try:
                with open(f"/proc/{c}/cmdline", "rb") as f:
                    # Our init, not bwrap (whose own argv mentions its path too).
                    if f.read().split(b"\0")[0] == INIT_PATH.encode():
                        return c
            except OSError:
                pass
            todo.append(c)
    return None


class Server:
    def __init__(self, ctx, certs):
        self.ctx, self.certs = ctx, certs
        self.p = None

    def start(self):
        port_file = os.path.join(self.ctx.work, "server.port")
        if os.path.exists(port_file):
            os.remove(port_file)
        self.p = subprocess.Popen(
            [self.ctx.loadgen, "serve", f"{self.certs}/server.pem", f"{self.certs}/server.key", port_file, "443"],
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.ctx.work, "server.log"), "a"),
        )
        for _ in range(200):
            if os.path.exists(port_file):
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("the upstream server did not start (see server.log)")

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            self.p.wait(timeout=10)
        self.p = None


def proxy_port(helper_pid):
    """The TCP port the helper's proxy listens on (host side), from /proc."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{helper_pid}/fd"):
            try:
                link = os.readlink(f"/proc/{helper_pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        with open(f"/proc/{helper_pid}/net/tcp") as f:
            for line in f.readlines()[1:]:
                x = line.split()
                if x[3] == "0A" and x[9] in inodes:
                    return int(x[1].split(":")[1], 16)
    except OSError:
        pass
    return None


def session(ctx, name, argv, server, sampled, timeout, on_first_ready=None):
    """Run a loadgen client (--interactive) and drive its phases, sampling CPU and memory of
    the helper (`sampled` = "self": this process is the helper; a PID: that helper; None).
    For sandboxed sessions the upstream starts only after the sandbox is up (see README);
    `on_first_ready(helper_pid)` runs while the client waits at its first phase."""
    errf = open(os.path.join(ctx.work, f"{name}.stderr"), "w")
    p = subprocess.Popen(
        argv, cwd=ctx.launch, env=ctx.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=errf, text=True, bufsize=1, start_new_session=True,
    )
    timer = threading.Timer(timeout, lambda: os.killpg(p.pid, signal.SIGKILL))
    timer.start()
    results = {}
    samples = {}
    helper = p.pid if sampled == "self" else sampled
    init_pid = None
    started = server.p is not None

    def who():
        pids = {"server": server.p.pid if server.p else None}
        if helper:
            pids["helper"] = helper
            pids["init"] = init_pid
        return pids

    def cpu():
        return {k: proc_cpu_s(v) if v else None for k, v in who().items()}

    def status():
        return {"helper": proc_status(helper), "init": proc_status(init_pid) if init_pid else {}}

    idle = None
    first = True
    try:
        for line in p.stdout:
            line = line.rstrip("\n")
            if line.startswith("READY "):
                if not started:
                    server.start()
                    started = True
                if first:
                    first = False
                    if sampled == "self":
                        init_pid = find_init(p.pid)
                    if helper:
                        idle = status()
                    if on_first_ready:
                        results["_bypass"] = on_first_ready(p.pid)
                samples[line[6:]] = cpu()
                p.stdin.write("go\n")
                p.stdin.flush()
            elif line.startswith("HOLDING "):
                held = {"conns": int(line.split()[1])}
                if helper:
                    held.update(status())
                results["_hold"] = held
                p.stdin.write("go\n")
                p.stdin.flush()
            elif line.startswith("RESULT "):
                r = json.loads(line[7:])
                before = samples.get(r["phase"], {})
                after = cpu()
                r["cpu_s"] = {
                    k: (after[k] - before[k]) if after.get(k) is not None and before.get(k) is not None else None
                    for k in after
                }
                results[r["phase"]] = r
                if not r.get("ok"):
                    fail(f"{name}:{r['phase']}", r.get("error") or r.get("first_error") or "errors")
            elif line == "DONE":
                break
        p.stdin.close()
        code = p.wait(timeout=60)
    finally:
        timer.cancel()
        errf.close()
    if code != 0:
        with open(os.path.join(ctx.work, f"{name}.stderr")) as f:
            err = f.read()
        fail(name, f"exit {code}: {err[-800:]}")
    if idle:
        results["_idle"] = idle
    return results


def proxy_part(ctx):
    """Runs inside `unshare -Urn`: only loopback exists here."""
    ip = shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip") if os.path.exists(p)), None)
    if not ip or run([ip, "link", "set", "lo", "up"]).returncode != 0:
        raise RuntimeError("cannot bring up loopback in the private network namespace (needs `ip`)")
    certs = os.path.join(ctx.work, "certs")
    r = run([ctx.loadgen, "certs", certs])
    if r.returncode != 0:
        raise RuntimeError(f"loadgen certs failed: {r.stderr}")
    q = ctx.quick
    secs = 0.25 if q else 2
    dl_bytes = (16 << 20) if q else (1 << 30)
    phases = [f"dl:{dl_bytes}:{1 if q else 3}"]
    for proto in ("h1", "h2"):
        for n in (1, 16, 256):
            phases.append(f"lat:{proto}:{n}:{secs}")
    hold = [f"hold:{64 if q else 500}"]
    target = ["--target", "127.0.0.1:443"]
    client = [ctx.loadgen, "client", "--interactive", *target]
    server = Server(ctx, certs)
    timeout = 120 if q else 600

    def bypass(mode, trust):
        """While the sandboxed client waits: the same phases from the host to the proxy's
        host-side TCP port, in the same session (the sandbox's own port is a listening socket
        the proxy accepts on directly, so the two should match)."""

        def go(helper_pid):
            port = proxy_port(helper_pid)
            if port is None:
                fail(f"{mode}-bypass", "cannot find the proxy's port")
                return {}
            t = trust
            if t == ["--ca-file-of-session"]:
                # The session CA the sandbox trusts, as written to the session directory.
                found = [os.path.join(dp, f) for dp, _, fs in os.walk(ctx.state) for f in fs if f == "proxy-ca.pem"]
                if not found:
                    fail(f"{mode}-bypass", "cannot find the session's proxy-ca.pem")
                    return {}
                t = ["--ca", max(found, key=os.path.getmtime)]
            argv = client + ["--proxy", f"127.0.0.1:{port}", *t, *phases, *hold]
            log(f"proxy: {mode}, from the host")
            return session(ctx, f"{mode}-bypass", argv, server, helper_pid, timeout)

        return go

    out = {}
    try:
        log("proxy: direct")
        server.start()
        out["direct"] = session(ctx, "direct", client + ["--ca", f"{certs}/ca.pem"] + phases, server, None, timeout)
        # The floor for any userspace tunnel on this machine: a relay that checks nothing.
        log("proxy: minimal CONNECT relay")
        port_file = os.path.join(ctx.work, "relay.port")
        relay = subprocess.Popen([ctx.loadgen, "relay", port_file, str(RELAY_BUF)], stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if os.path.exists(port_file) or relay.poll() is not None:
                    break
                time.sleep(0.02)
            with open(port_file) as f:
                port = int(f.read())
            argv = client + ["--proxy", f"127.0.0.1:{port}", "--ca", f"{certs}/ca.pem"] + phases
            out["relay"] = session(ctx, "relay", argv, server, relay.pid, timeout)
        except (OSError, ValueError) as e:
            fail("relay", str(e))
        finally:
            relay.terminate()
            relay.wait(timeout=10)
        server.stop()
        # The proxy may dial host loopback only on an allowed local port: 443, the upstream's.
        # It is not bridged into the sandbox (no port below 1024 is; a warning says so), which
        # leaves the proxy path the one measured.
        common = ["--allow-local-port", "443", "--ro", ctx.loadgen, "--ro", f"{certs}/ca.pem"]
        via = ["--proxy", "127.0.0.1:3128"]
        log("proxy: tunnelled (\"*\" rule)")
        argv = ctx.sb("--allow-domain", "127.0.0.1", *common, "--", *client, *via, "--ca", f"{certs}/ca.pem", *phases, *hold)
        out["tunnel"] = session(ctx, "tunnel", argv, server, "self", timeout, bypass("tunnel", ["--ca", f"{certs}/ca.pem"]))
        server.stop()
        log("proxy: intercepted (method rules)")
        argv = ctx.sb(
            "--allow-domain", "127.0.0.1=GET,HEAD", "--upstream-ca", f"{certs}/ca.pem", *common,
            "--", *client, *via, "--ca-env", "SSL_CERT_FILE", *phases, *hold,
        )
        out["intercept"] = session(ctx, "intercept", argv, server, "self", timeout, bypass("intercept", ["--ca-file-of-session"]))
    finally:
        server.stop()
    return out


# --------------------------------------------------------------------------- report


def fmt_ms(x):
    if x is None or x != x:
        return "–"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def mark(ok):
    return "✓" if ok else "**✗**"


def report(m, st, px, quick):
    L = []
    w = L.append
    w(f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory']} RAM, Linux {m['kernel']}, run as {m['user']}; "
      f"{m['bwrap']}, {m['pasta']}, {m['hyperfine']}; build: {m['build']}; load average {m['load']:.2f} at start, {m.get('load_end', float('nan')):.2f} at the end.")
    w("")
    s = st["stats"] if st else {}

    def cell(name):
        x = s.get(name)
        if not x:
            known = dict(KNOWN)
            return ("fails: " + known[name]) if name in known else "failed", "", ""
        rss = f"{x['rss_kib'] / 1024:.1f} MiB" if x.get("rss_kib") else "–"
        return fmt_ms(x["median_ms"]), f"{fmt_ms(x['min_ms'])}–{fmt_ms(x['max_ms'])}", rss

    def ratio(a, b):
        if a in s and b in s:
            return s[a]["median_ms"] / s[b]["median_ms"]
        return None

    if st:
        fl = st.get("rss_floor_kib")
        w("**Start-up** (`… -- true`, wall time; median of N runs, min–max; peak RSS = largest process of the tree, "
          f"by wait4; `true` alone reads {fl / 1024:.1f} MiB there)" if fl else "")
        w("")
        w("| # | configuration | median ms | min–max ms | ratio | peak RSS | target |")
        w("|---|---|---:|---:|---:|---:|---|")
        rows = [
            ("1", "bare bwrap, host-system mounts (floor)", "bare:fs", None, ""),
            ("2", "filesystem only, host-system (`--no-network`)", "fs", ("fs", "bare:fs"), 1.3),
            ("1b", "bare bwrap, 1,000-path closure mounts (floor)", "bare:closure-1000", None, ""),
            ("2b", "filesystem only, 1,000-path closure", "closure-1000", ("closure-1000", "bare:closure-1000"), 1.3),
            ("3", "filtered (`--allow-domain example.com`: proxy, CA, proxy port handover)", "filtered", ("filtered", "bare:fs"), 2.0),
            ("4f", "pasta alone: userns + netns, attach, `true`, stop (floor)", "pasta-floor", None, ""),
            ("4", "open (pasta)", "open", ("open", "bare:fs"), None),
        ]
        for num, label, name, rat, target in rows:
            med, rng, rss = cell(name)
            r = ratio(*rat) if rat else None
            rtxt = f"{r:.2f}×" if r else ("1.00×" if name.startswith("bare:") and name in s else "–")
            t = ""
            if isinstance(target, float) and r:
                t = f"≤ {target}× {mark(r <= target)}"
            if name == "open" and "open" in s and "pasta-floor" in s:
                extra = s["open"]["median_ms"] - s["pasta-floor"]["median_ms"]
                t = f"≤ pasta + 10 ms: +{extra:.1f} ms {mark(extra <= 10)}"
            w(f"| {num} | {label} | {med} | {rng} | {rtxt} | {rss} | {t} |")
        w("")
        if st.get("wrapped"):
            w("Bare bwrap rows marked through `loadgen exec` (argv too long for one command-line string): "
              + ", ".join(f"`{n}`" for n in st["wrapped"]) + " — one extra exec, about 1 ms.")
            w("")
        runs = sorted({x["runs"] for x in s.values()})
        w(f"Runs per row: {', '.join(map(str, runs))} (hyperfine calls of all rows in alternating order: "
          f"{'1' if quick else '6'} for rows under 0.4 s, each after {'no' if quick else '3'} warm-up runs, "
          f"{'1' if quick else '3'} for slower ones; pooled).")
        w("")
        w("**Scaling** (filesystem only; each next to bare bwrap with the same mounts)")
        w("")
        w("| closure paths | agent-sandbox ms | bare bwrap ms | ratio | added by agent-sandbox | growth per path (segment) |")
        w("|---:|---:|---:|---:|---:|---:|")
        prev = None
        for n in st["closure_sizes"]:
            a, b = s.get(f"closure-{n}"), s.get(f"bare:closure-{n}")
            if not a:
                med, _, _ = cell(f"closure-{n}")
                w(f"| {n:,} | {med} | {fmt_ms(b['median_ms']) if b else cell('bare:closure-' + str(n))[0]} | – | – | – |")
                continue
            seg = "–"
            if prev:
                seg = f"{(a['median_ms'] - prev[1]) * 1000 / (n - prev[0]):.0f} µs"
            add = f"{a['median_ms'] - b['median_ms']:+.1f} ms" if b else "–"
            rt = f"{a['median_ms'] / b['median_ms']:.2f}×" if b else "–"
            w(f"| {n:,} | {fmt_ms(a['median_ms'])} | {fmt_ms(b['median_ms']) if b else '–'} | {rt} | {add} | {seg} |")
            prev = (n, a["median_ms"])
        w("")
        w("| declared dir (`--ro`) | symlinks | agent-sandbox ms | bare bwrap ms | added by agent-sandbox | per file |")
        w("|---:|---:|---:|---:|---:|---:|")
        for n, info in st["trees"].items():
            a, b = s.get(f"tree-{n}"), s.get(f"bare:tree-{n}")
            if not (a and b):
                w(f"| {int(n):,} files | {info['links']} | failed | | | |")
                continue
            add = a["median_ms"] - b["median_ms"]
            w(f"| {int(n):,} files | {info['links']:,} | {fmt_ms(a['median_ms'])} | {fmt_ms(b['median_ms'])} | "
              f"{add:+.1f} ms | {add * 1000 / int(n):.1f} µs |")
        w("")

    if px:
        d, t, i = px.get("direct", {}), px.get("tunnel", {}), px.get("intercept", {})
        paths = [
            ("direct", d),
            (f"minimal CONNECT relay, {RELAY_BUF // 1024} KiB buffers (tunnel floor)", px.get("relay", {})),
            ("tunnelled (`\"*\"`)", t),
            ("tunnelled, proxy only", t.get("_bypass", {})),
            ("intercepted (`=GET,HEAD`)", i),
            ("intercepted, proxy only", i.get("_bypass", {})),
        ]
        w("**Proxy** (HTTPS to a loopback upstream on 127.0.0.1:443 in a private network namespace. Tunnelled/intercepted = "
          "the client runs inside `agent-sandbox run` and connects to 127.0.0.1:3128 inside, a listening socket "
          "the sandbox's init created and handed to the proxy, which accepts on it directly (no bridge); *proxy only* = "
          "the same client on the host connecting to the proxy's host-side port, during the same session)")
        w("")
        dd = d.get("dl")
        base = median(dd["mib_per_s"]) if dd and dd.get("ok") else None
        size = dd["bytes"] if dd else 0
        shown = f"{size / (1 << 30):g} GiB" if size >= (1 << 30) else f"{size / (1 << 20):g} MiB"
        w(f"Download of {shown} (HTTP/1.1 over TLS, one connection), MiB/s, median (min–max) of "
          f"{len(dd['mib_per_s']) if dd and dd.get('ok') else 0}:")
        w("")
        w("| path | MiB/s | of direct | CPU s (helper + init) | target |")
        w("|---|---:|---:|---:|---|")
        targets = {2: 0.95, 4: 0.60}
        for k, (label, x) in enumerate(paths):
            r = x.get("dl")
            if not r or not r.get("ok"):
                w(f"| {label} | failed | | | |")
                continue
            v = r["mib_per_s"]
            frac = median(v) / base if base else None
            c = r.get("cpu_s", {})
            cpu = f"{(c.get('helper') or 0) + (c.get('init') or 0):.1f}" if c.get("helper") is not None else "–"
            tt = f"≥ {targets[k]:.0%} {mark(frac >= targets[k])}" if k in targets and frac else ""
            fr = f"{frac:.0%}" if frac else ""
            w(f"| {label} | {median(v):.0f} ({min(v):.0f}–{max(v):.0f}) | {fr} | {cpu} | {tt} |")
        w("")
        cols = [(proto, n) for proto in ("h1", "h2") for n in (1, 16, 256)]
        w("Small requests (GET, 64-byte body, keep-alive, one connection per client): p50 / p99 ms, requests/s")
        w("")
        w("| path | " + " | ".join(f"{p} × {n}" for p, n in cols) + " |")
        w("|---|" + "---:|" * len(cols))
        for label, x in paths:
            cells = []
            for proto, n in cols:
                r = x.get(f"lat-{proto}-{n}")
                cells.append(f"{r['p50_us'] / 1000:.2f} / {r['p99_us'] / 1000:.2f}<br>{r['rps']:,.0f}/s" if r and r.get("ok") else "failed")
            w(f"| {label} | " + " | ".join(cells) + " |")
        w("")
        w("Added p50 latency (ms, vs direct) and CPU per request (µs: helper process = proxy, "
          "plus the sandbox's init, idle on this path; for the relay, the relay process). Target: ≤ 0.5 ms added per keep-alive request, checked at "
          "1 client (with more clients the proxy shares 2 CPUs with the load generator and the upstream).")
        w("")
        w("| path | " + " | ".join(f"{p} × {n}" for p, n in cols) + " |")
        w("|---|" + "---:|" * len(cols))
        for label, x in paths[1:]:
            cells = []
            for proto, n in cols:
                r, dp = x.get(f"lat-{proto}-{n}"), d.get(f"lat-{proto}-{n}")
                if x is px.get("relay") and r:
                    r = dict(r, cpu_s={"helper": r.get("cpu_s", {}).get("helper")})
                if not (r and r.get("ok") and dp and dp.get("ok")):
                    cells.append("–")
                    continue
                added = (r["p50_us"] - dp["p50_us"]) / 1000
                c = r.get("cpu_s", {})
                cpu = (c.get("helper") or 0) + (c.get("init") or 0)
                per = f"{cpu * 1e6 / r['requests']:.0f} µs" if r["requests"] and c.get("helper") is not None else "–"
                full_path = x is px.get("tunnel") or x is px.get("intercept")
                m = f" {mark(added <= 0.5)}" if n == 1 and full_path else ""
                cells.append(f"{added:+.2f}{m}<br>{per}")
            w(f"| {label} | " + " | ".join(cells) + " |")
        w("")
        ref = d.get("lat-h1-16", {})
        if ref.get("cpu_s", {}).get("server") is not None and ref.get("requests"):
            w(f"For scale: the upstream server spends {ref['cpu_s']['server'] * 1e6 / ref['requests']:.0f} µs CPU per "
              "request (h1 × 16, direct).")
            w("")
        w("| memory (VmRSS) | idle | with N held connections | threads | target |")
        w("|---|---:|---:|---:|---|")
        for label, x in paths[2:]:
            h, idle = x.get("_hold"), x.get("_idle")
            if not h or not h.get("helper"):
                w(f"| {label} | failed | | | |")
                continue
            hv = h["helper"].get("VmRSS", 0) / 1024
            idle_h = f"{idle['helper'].get('VmRSS', 0) / 1024:.1f} MiB" if idle else "–"
            who = "helper (proxy)"
            w(f"| {label}: {who}, N = {h['conns']} | {idle_h} | {hv:.1f} MiB | "
              f"{h['helper'].get('Threads', '?')} | ≤ 64 MiB {mark(hv <= 64)} |")
            if h.get("init"):
                w(f"| {label}: sandbox init (idle on this path) | {idle['init'].get('VmRSS', 0) / 1024:.1f} MiB | "
                  f"{h['init'].get('VmRSS', 0) / 1024:.1f} MiB | {h['init'].get('Threads', '?')} | |")
        w("")
    if KNOWN:
        w("Known limits hit: " + "; ".join(f"`{n}`: {msg}" for n, msg in KNOWN) + ".")
        w("")
    if FAILURES:
        w("**Failed:** " + "; ".join(f"`{n}`" for n, _ in FAILURES))
        w("")
    return "\n".join(L)


# --------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke test: tiny sizes, few runs")
    ap.add_argument("--sandbox", required=True, help="the agent-sandbox binary")
    ap.add_argument("--loadgen", required=True, help="the bench/loadgen binary")
    ap.add_argument("--build", default="?", help="build description for the report")
    ap.add_argument("--only", choices=["startup", "proxy"], help="run one part")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--json", help="also write raw results here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--strict", action="store_true", help="known limits count as failures too")
    ap.add_argument("--proxy-part", metavar="WORK", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.proxy_part:
        ctx = Ctx(args, args.proxy_part)
        try:
            res = proxy_part(ctx)
        except Exception as e:  # reported by the parent
            fail("proxy", str(e))
            res = {}
        with open(os.path.join(ctx.work, "proxy.json"), "w") as f:
            json.dump({"results": res, "failures": FAILURES, "known": KNOWN}, f)
        return 0

    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="agent-sandbox-bench.", dir="/var/tmp")
    ctx = Ctx(args, work)
    m = machine()
    m["build"] = args.build
    if m["load"] > 0.5:
        log(f"warning: load average {m['load']:.2f}: something else is running, timings will be noisy")
    st = px = None
    try:
        if args.only in (None, "startup"):
            st = startup(ctx)
        if args.only in (None, "proxy"):
            log("proxy benchmarks (private network namespace, loopback only)")
            r = subprocess.run(
                ["unshare", "--user", "--map-root-user", "--net", "--", sys.executable, os.path.abspath(__file__),
                 "--proxy-part", work, "--sandbox", ctx.sandbox, "--loadgen", ctx.loadgen]
                + (["--quick"] if args.quick else []),
                timeout=1800,
            )
            try:
                with open(os.path.join(work, "proxy.json")) as f:
                    data = json.load(f)
                px = data["results"]
                FAILURES.extend(tuple(x) for x in data["failures"])
                KNOWN.extend(tuple(x) for x in data["known"])
            except (OSError, ValueError, KeyError):
                fail("proxy", f"the proxy part produced no results (exit {r.returncode}); unprivileged user namespaces needed")
        try:
            m["load_end"] = os.getloadavg()[0]
        except OSError:
            m["load_end"] = float("nan")
        text = report(m, st, px, args.quick)
        print(text)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(text + "\n")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": m, "startup": st, "proxy": px, "failures": FAILURES, "known": KNOWN}, f, indent=1)
    finally:
        if args.keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.0f} s")
    bad = FAILURES + (KNOWN if args.strict else [])
    if bad:
        log("failed: " + ", ".join(n for n, _ in bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
