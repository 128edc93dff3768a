# Fixture sandboxes for tests/nix/build.sh. Plain `import <nixpkgs> { }` code: built here with
# NIX_PATH=nixpkgs=tests/nix/host-pkgs (the stand-in), and it would build with nixpkgs too.
{
  pkgs ? import <nixpkgs> { },
  # A host loopback port the offline sandbox may reach (picked free by build.sh).
  port ? 47123,
}:
let
  sandbox = import ../.. { inherit pkgs; };
  envOnly = pkgs.findutils;

  # A library split like nixpkgs splits them: the .pc file in `dev`, the library in `out`.
  fakeLib = pkgs.runCommand "agent-sandbox-fakelib" { outputs = [ "out" "dev" ]; } ''
    mkdir -p "$out/lib" "$dev/lib/pkgconfig" "$dev/include"
    echo 'fake library' > "$out/lib/libfake.so"
    echo 'int fake(void);' > "$dev/include/fake.h"
    printf 'Name: fakelib\nDescription: test\nVersion: 1.2.3\nLibs: -L%s/lib -lfake\nCflags: -I%s/include\n' \
      "$out" "$dev" > "$dev/lib/pkgconfig/fakelib.pc"
  '';

  # The same declarations as an agent's: state in $HOME, a read-only config, secrets from the
  # launching environment and from a command, all expanded at launch.
  common = {
    pkg = pkgs.bash;
    binName = "bash";
    allowedPackages = [
      pkgs.coreutils
      pkgs.git
      pkgs.curl
      pkgs.python3
      pkgs.iproute2
      fakeLib
    ];
    rwDirs = [ "$HOME/.agent-state" ];
    rwFiles = [ "$HOME/.agent-history" ];
    roDirs = [ "~/.agent-docs" ];
    roFiles = [
      "$HOME/.agent-config.json"
      "$HOME/.bashrc"
    ];
    env = {
      STATIC_VAR = "plain value";
      SECRET = "$AGENT_SANDBOX_TEST_SECRET";
      FROM_CMD = "$(cat \"$HOME/.secret-file\")";
      MAYBE = "$AGENT_SANDBOX_TEST_UNSET";
      # A store path named only here (findutils is not in allowedPackages) stays invisible:
      # what can run inside is allowedPackages, as in agent-sandbox.nix.
      EXTRA_TOOL = "${envOnly}/bin/find";
      # One that allowedPackages names too stays visible (discarding the context drops nothing).
      ALLOWED_TOOL = "${pkgs.python3}/bin/python3";
    };
  };
in
{
  open = sandbox.mkSandbox (common // { outName = "sb-open"; });

  offline = sandbox.mkSandbox (
    common
    // {
      outName = "sb-offline";
      allowedDomains = [ ];
      allowedLocalPorts = [ port ];
    }
  );

  # v5's workspaceDir: the workspace, not the launch directory, is exposed.
  workspace = sandbox.mkSandbox (common // { outName = "sb-ws"; workspaceDir = "$HOME/ws"; });

  # Everything an agent template puts on PATH (needs gawk, ripgrep and fd-find on the host).
  common-tools = sandbox.mkSandbox {
    pkg = pkgs.bash;
    binName = "bash";
    outName = "sb-tools";
    allowedPackages = sandbox.commonTools;
  };

  # A closure large enough to be staged by the namespace holder (24 or more paths in
  # /nix/store): coreutils, bash and thirty small packages.
  many = sandbox.mkSandbox {
    pkg = pkgs.bash;
    binName = "bash";
    outName = "sb-many";
    allowedPackages = [
      pkgs.coreutils
    ]
    ++ builtins.genList (
      i:
      pkgs.writeTextFile {
        name = "agent-sandbox-dummy-${toString i}";
        text = "dummy ${toString i}\n";
        destination = "/share/dummy";
      }
    ) 30;
  };

  # Named in the fixtures' env only; built so that it exists on the host.
  env-only = envOnly;

  # A store path in no sandbox's closure.
  outside = pkgs.writeText "agent-sandbox-outside-closure" "must stay invisible";

  # Fails to build: coreutils has no bin/claude.
  wrong-bin-name = sandbox.mkSandbox {
    pkg = pkgs.coreutils;
    binName = "claude";
    outName = "wrong";
    allowedPackages = [ ];
  };

  # Fails to evaluate: v0 argument names.
  v0 = sandbox.mkSandbox {
    pkg = pkgs.bash;
    binName = "bash";
    outName = "v0";
    allowedPackages = [ ];
    stateDirs = [ "$HOME/.claude" ];
    extraEnv.EDITOR = "vi";
  };
}
