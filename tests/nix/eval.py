#!/usr/bin/env python3
"""Evaluation tests of the Nix library (no nixpkgs, no store: `--store dummy://`).

Runs the cases of tests/nix/cases.nix through lib/mkSandbox.nix with the fake package set and
compares specs, wrapper texts and error messages exactly. Prints one PASS/FAIL line per test.
Exit status: 0 when every test passed.

Used by scripts/test-nix and by the flake check checks/eval-arguments-and-errors.nix.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NIX = ["nix-instantiate", "--store", "dummy://", "--eval", "--strict"]

failures = 0


def report(name, ok, detail=""):
    global failures
    print(("PASS " if ok else "FAIL ") + "eval/" + name, flush=True)
    if not ok:
        failures += 1
        for line in detail.rstrip("\n").split("\n"):
            print("    " + line)


def nix(expr, json_out=True):
    """Evaluate `{ dir }: expr` (dir = this directory); returns (status, stdout, stderr)."""
    args = NIX + (["--json"] if json_out else []) + ["--argstr", "dir", HERE, "-E", "{ dir }: " + expr]
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


CASES = 'import (/. + dir + "/cases.nix")'


def compare_all():
    """Every equality test in one evaluation: name -> { ok, got, want }."""
    expr = f"""
      let
        c = {CASES};
        run = t: c.mkSandbox t.args;
        specs = builtins.mapAttrs (name: t: let r = run t; in {{
          got = {{ inherit (r) spec launch; }};
          want = {{ inherit (t) spec launch; }};
        }}) c.specs;
        wrappers = builtins.mapAttrs (name: t:
          let r = (if t.darwin or false then c.mkSandboxWith c.fDarwin else c.mkSandbox) t.args;
          in {{ got = r.env.wrapper; want = t.text; }}) c.wrappers;
        lib = import (/. + dir + "/../../lib") {{ pkgs = c.f; agent-sandbox = c.f.agent-sandbox; }};
        root = import (/. + dir + "/../..") {{ pkgs = c.f; }};
      in
        (builtins.listToAttrs (map (n: {{ name = "spec/" + n; value = specs.${{n}}; }}) (builtins.attrNames specs)))
        // (builtins.listToAttrs (map (n: {{ name = "wrapper/" + n; value = wrappers.${{n}}; }}) (builtins.attrNames wrappers)))
        // {{
          "spec/static-json-text" = {{
            got = (run c.staticJson).staticSpec.text;
            want = c.staticJson.json;
          }};
          "spec/closure-roots" = {{
            got = map toString (run c.closureRoots).closure.paths;
            want = c.closureRoots.roots;
          }};
          "lib/commonTools" = {{
            got = map (p: p.name) lib.commonTools;
            want = [ "coreutils-9.1" "which-2.21" "git-2.45" "ripgrep-14.1" "fd-10.1" "gnused-4.9"
                     "gnugrep-3.11" "findutils-4.10" "diffutils-3.10" "less-661" "gawk-5.3" "jq-1.7" ];
          }};
          "validate/domain-cases" = c.domainCases;
          "lib/default-nix-exports" = {{
            got = builtins.attrNames root;
            want = [ "commonTools" "mkSandbox" ];
          }};
        }}
    """
    status, out, err = nix(expr)
    if status != 0:
        report("compare-all", False, "evaluation failed:\n" + err)
        return
    for name, r in sorted(json.loads(out).items()):
        if r["got"] == r["want"]:
            report(name, True)
        elif isinstance(r["want"], str):
            report(name, False, "want:\n" + r["want"] + "\ngot:\n" + r["got"])
        else:
            report(
                name,
                False,
                "want: " + json.dumps(r["want"], sort_keys=True) + "\ngot:  " + json.dumps(r["got"], sort_keys=True),
            )


def errors():
    status, out, err = nix(f"builtins.mapAttrs (n: t: t.message) ({CASES}).errors")
    if status != 0:
        report("errors", False, "cannot list the error cases:\n" + err)
        return
    for name, want in sorted(json.loads(out).items()):
        status, out, err = nix(
            # `seq`, not `deepSeq`: every error fires as soon as the result is looked at.
            f'let c = {CASES}; in builtins.seq (c.mkSandbox c.errors."{name}".args) "no error"', json_out=False
        )
        got = message_of(err)
        if status != 0 and got == want:
            report("error/" + name, True)
        else:
            report("error/" + name, False, f"status {status}\nwant:\n{want}\ngot:\n{got}\nstderr:\n{err}{out}")


def message_of(stderr):
    """The thrown message, as Nix prints it: after the last "error: ", continuation lines indented
    by 7 spaces. Nix 2.8 starts with it; newer versions print trace frames first."""
    lines = [l for l in stderr.rstrip("\n").split("\n") if not l.startswith("(use '--show-trace'")]
    starts = [i for i, l in enumerate(lines) if l.lstrip().startswith("error: ")]
    if not starts:
        return stderr
    first, *rest = lines[starts[-1] :]
    rest = [l[7:] if l.startswith("       ") else l for l in rest]
    return "\n".join([first.lstrip()[len("error: ") :]] + rest).rstrip("\n")


def main():
    compare_all()
    errors()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
