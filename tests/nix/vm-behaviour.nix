# A NixOS VM test that runs tests/nix/behaviour.sh (the checks scripts/test-nix runs with the
# stand-in package set) against the fixtures of tests/nix/fixtures.nix built from real nixpkgs,
# as root and as the normal user alice. Used by checks/vm-isolation.nix ("isolation" group)
# and checks/vm-network-modes.nix ("network" group, with a fake internet host).
{
  pkgs,
  name,
  group,
  withInternet ? false,
}:
let
  port = 47123;
  otherPort = 47124;
  hostServicePort = 18081;
  fixtures = import ./fixtures.nix { inherit pkgs port; };
  inherit (fixtures) open offline outside;
  python = "${pkgs.python3}/bin/python3";
  serve = ./serve.py;
  behaviour = ./behaviour.sh;
in
pkgs.testers.runNixOSTest {
  inherit name;

  nodes =
    {
      machine = {
        users.users.alice.isNormalUser = true;
        environment.systemPackages = [ pkgs.curl ];
      };
    }
    // pkgs.lib.optionalAttrs withInternet {
      internet = {
        networking.firewall.allowedTCPPorts = [ 80 ];
        systemd.services.fake-internet = {
          wantedBy = [ "multi-user.target" ];
          serviceConfig.ExecStart = "${python} ${serve} 0.0.0.0 80 'fake internet'";
        };
      };
    };

  testScript =
    { nodes, ... }:
    ''
      import json, re, shlex

      start_all()
      machine.wait_for_unit("multi-user.target")
      for p in (${toString port}, ${toString otherPort}):
          machine.succeed(f"systemd-run --unit=loopback-{p} ${python} ${serve} 127.0.0.1 {p} host-secret")
          machine.wait_for_open_port(p)

      env = {}
      if ${if withInternet then "True" else "False"}:
          internet.wait_for_open_port(80)
          inet = "${nodes.internet.networking.primaryIPAddress or ""}:80"
          machine.succeed(f"curl -sf http://{inet}/ | grep -qx 'fake internet'")
          own = "${nodes.machine.networking.primaryIPAddress}:${toString hostServicePort}"
          machine.succeed("systemd-run --unit=host-service ${python} ${serve} 0.0.0.0 ${toString hostServicePort} 'host service'")
          machine.wait_for_open_port(${toString hostServicePort})
          # Reachable from the host itself: the sandbox must be what stops it.
          machine.succeed(f"curl -sf http://{own}/ | grep -qx 'host service'")
          env["AGENT_SANDBOX_TEST_INET"] = inet
          env["AGENT_SANDBOX_TEST_HOST_SERVICE"] = own

      spec = json.loads(machine.succeed("cat ${open}/share/agent-sandbox/sb-open.json"))
      wrapper = machine.succeed("cat ${open}/bin/sb-open")
      env.update({
          "SB_GROUP": "${group}",
          "SB_OPEN": "${open}/bin/sb-open",
          "SB_OFFLINE": "${offline}/bin/sb-offline",
          "SB_HELPER": re.search(r"^exec '([^']*)' run ", wrapper, re.M).group(1),
          "SB_SPEC_OPEN": "${open}/share/agent-sandbox/sb-open.json",
          "SB_PROGRAM_OPEN": spec["program"],
          "SB_PATH_OPEN": ":".join(spec["path"]),
          "SB_STORE_OPEN": "\n".join(sorted(p.split("/")[-1] for p in spec["closure"])),
          "SB_OUTSIDE": "${outside}",
          "SB_SECRET": "vm-secret-value",
          "SB_PORT": "${toString port}",
          "SB_OTHER_PORT": "${toString otherPort}",
      })
      assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
      for label, prefix in (("vm-root", ""), ("vm-user", "runuser -u alice -- ")):
          status, out = machine.execute(
              f"cd / && {prefix}env -i PATH=/run/current-system/sw/bin {assignments} bash ${behaviour} {label}"
          )
          print(out)
          assert status == 0 and "FAIL" not in out, f"{label}: behaviour checks failed"
          assert "PASS" in out, f"{label}: no check ran"

      # The launch-time secret never reaches the store: not in the wrappers, nor the closure.
      paths = " ".join(spec["closure"] + ["${open}", "${offline}"])
      status, out = machine.execute(f"grep -rlF vm-secret-value {paths}")
      assert status == 1, f"secret found in the store (grep status {status}): {out}"
    '';
}
