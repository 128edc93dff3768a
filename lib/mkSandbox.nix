/**
  Wrap a program in agent-sandbox: returns a package whose `bin/<outName>` runs `pkg`'s
  `bin/<binName>` in a sandbox that sees the launch directory (read-write), an empty `$HOME`
  holding only the declared paths, exactly the store paths the policy names (`pkg`,
  `allowedPackages`, `bash`, `cacert`) with their dependencies, and the declared network. A
  store path named only in an `env` value is not exposed: what can run inside is
  `allowedPackages`, one list to audit. (A store path written into a declared path, such as
  `roDirs` or `upstreamCaFiles`, does join the closure, with its dependencies.)

  The arguments are validated when the expression is evaluated; the policy is written to the
  store as one JSON spec (`share/agent-sandbox/<outName>.json`, format: `agent-sandbox
  schema`), and `bin/<outName>` is a few lines of bash that exec the helper with it.

  # Inputs

  `pkg`
  : the package to run, e.g. `pkgs.claude-code`

  `binName`
  : the program in `pkg`'s `bin/`, e.g. `"claude"`; when it is `"bash"`, bash gets
    `--norc --noprofile`

  `outName`
  : the name of the command to create, e.g. `"claude"`

  `allowedPackages`
  : packages on `PATH` inside, in order, e.g. `sandbox.commonTools ++ [ pkgs.nodejs ]`;
    `bash` is always added last and `cacert` is always present

  `rwDirs`, `rwFiles`, `roDirs`, `roFiles` (default `[ ]`)
  : paths exposed at their real location, read-write or read-only; they must exist at launch.
    `"$HOME/.claude"` or `"$XDG_CONFIG_HOME/x"` is expanded by the wrapper at each launch;
    `"~/.claude"` by the helper; relative paths are relative to the launch directory

  `allowedSockets` (default `[ ]`)
  : Unix sockets inside the declared paths the agent may connect to, e.g.
    `[ "$XDG_RUNTIME_DIR/bus" ]`, or directories whose sockets it may all reach. Every other
    socket found in a declared directory at launch is masked (connect() fails), and a declared
    path that is itself a socket is refused: the service behind a socket acts outside the sandbox

  `rwHostConfig` (default `[ ]`)
  : paths host programs run or obey (`~/.bashrc`, `~/.config/git`, a `PATH` directory, …)
    that the agent may write anyway. Without this they stay read-only even inside a read-write
    path, with a warning naming each; listing one here declares it read-write as well

  `env` (default `{ }`)
  : variables set inside. A value with `$` or a backquote is expanded by the wrapper at
    launch (`"$CLAUDE_CODE_OAUTH_TOKEN"`, `"$(cat /run/secrets/token)"`) and never stored;
    when it expands to the empty string the variable is left unset

  `allowNix` (default `false`)
  : let the agent run `nix build/run/develop` through the host's daemon: adds `nix` to
    `PATH` and `NIX_CONFIG = "experimental-features = nix-command flakes"` (override it in
    `env`); the helper exposes the store read-only and the daemon socket, and asks you to
    confirm on the terminal when you are a trusted user of the daemon

  `allowedDomains` (default `null`)
  : `null`: open network (without the host's own addresses); `[ ]`: no network; a list of
    domains (with their subdomains), or `{ "api.github.com" = [ "GET" "HEAD" ]; "x.com" = "*"; }`:
    filtered through the helper's proxy

  `allowedLocalPorts` (default `[ ]`; `allowedHostPorts` is agent-sandbox.nix v5's name for it)
  : host loopback ports reachable from inside, e.g. `[ 5432 ]`; `null`: those listening on the host's loopback at launch (below 1024 not bridged on Linux)

  `upstreamCaFiles` (default `[ ]`)
  : extra CA certificates (PEM files) to trust, e.g. a corporate TLS-inspection CA: the proxy
    trusts them upstream, and they are added to the CA bundle inside (domains allowed with
    `"*"` are tunnelled end to end, so the client inside sees that CA's certificates)

  `workspaceDir` (default `null`)
  : the directory exposed read-write instead of the launch directory (which is then not
    exposed); the command starts in it. It must exist. `"$HOME/src/x"` is expanded at launch

  `allowUnixSockets` (v5; only `true`, today's behaviour, is accepted), `publishedPorts`, `allowHeadlessBrowsers`
  : agent-sandbox.nix v5 arguments not supported yet: refused at evaluation with what to do

  `PKG_CONFIG_PATH` is set to the `lib/pkgconfig` and `share/pkgconfig` directories of
  `allowedPackages` (their `dev` outputs when they have one, which then join the closure), so
  builds inside find their libraries; set it in `env` to replace it.

  # Type

  ```
  mkSandbox :: AttrSet -> Derivation
  ```

  # Examples

  ```nix
  sandbox.mkSandbox {
    pkg = pkgs.claude-code;
    binName = "claude";
    outName = "claude";
    allowedPackages = sandbox.commonTools ++ [ pkgs.nodejs ];
    rwDirs = [ "$HOME/.claude" ];
    rwFiles = [ "$HOME/.claude.json" ];
    env.CLAUDE_CODE_OAUTH_TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN";
  }
  => «derivation /nix/store/…-claude.drv» with bin/claude

  sandbox.mkSandbox { pkg = pkgs.hello; binName = "hello"; outName = "hello"; allowedPackages = [ ]; stateDirs = [ "$HOME/.x" ]; }
  => error: mkSandbox: removed v0 argument(s) stateDirs (now rwDirs); rename them as in the migration table: …

  sandbox.mkSandbox { pkg = pkgs.hello; binName = "hello"; outName = "hello"; allowedPackages = [ ]; allowedLocalPorts = [ 70000 ]; }
  => error: mkSandbox: allowedLocalPorts has 70000, which is not a port number 1..65535; expected a list of integers such as [ 5432 ], or null for all ports
  ```
*/
{ pkgs, agent-sandbox }:
let
  validate = import ./internal/validate.nix;
  specLib = import ./internal/spec.nix;
  renderWrapper = import ./internal/wrapper.nix;
in
args:
let
  a = validate args;
  parts = specLib.build (
    a
    // {
      inherit (pkgs) bash cacert;
      nix = pkgs.nix;
    }
  );
  inherit (parts.spec) program;

  # The sandbox sees what its policy names (the program, the PATH entries, store paths in
  # declared paths; not those only in env values, whose context spec.nix drops) with their
  # dependencies, and the helper, which runs inside as PID 1.
  staticSpec = pkgs.writeText "${a.outName}-sandbox-static.json" (builtins.toJSON parts.spec);
  closure = pkgs.writeClosure [
    staticSpec
    agent-sandbox
  ];

  # The closure is known only once built: splice it into the static spec as its first field.
  # Store paths need no JSON escaping.
  specFile =
    pkgs.runCommand "${a.outName}-sandbox.json"
      {
        inherit staticSpec closure;
      }
      ''
        static=$(< "$staticSpec")
        {
          printf '{"closure":['
          sep=
          while IFS= read -r p; do
            if [ "$p" != "$staticSpec" ]; then
              printf '%s"%s"' "$sep" "$p"
              sep=,
            fi
          done < "$closure"
          printf '],%s\n' "''${static:1}"
        } > "$out"
      '';

  tools =
    if pkgs.stdenv.hostPlatform.isLinux then
      {
        AGENT_SANDBOX_BWRAP = "${pkgs.bubblewrap}/bin/bwrap";
        AGENT_SANDBOX_PASTA = "${pkgs.passt}/bin/pasta";
      }
    else
      { };
in
# Validation fires as soon as the result is looked at (`builtins.seq`, `nix eval .#x.name`),
# not only when its drvPath is forced.
builtins.seq a (
pkgs.runCommand a.outName
  {
    wrapper = renderWrapper {
      shell = pkgs.runtimeShell;
      helper = "${agent-sandbox}/bin/agent-sandbox";
      inherit specFile tools program;
      inherit (a) outName;
      inherit (parts) launch;
    };
    passAsFile = [ "wrapper" ];
    passthru = {
      inherit specFile staticSpec closure;
      inherit (parts) spec launch;
    };
    meta = {
      description = "${a.outName} in agent-sandbox";
      mainProgram = a.outName;
    };
  }
  ''
    if [ ! -x "${program}" ]; then
      echo "mkSandbox: ${program} is not an executable; binName must name a program in pkg's bin/, which holds: $(ls "${dirOf program}" 2>/dev/null | tr '\n' ' ')" >&2
      exit 1
    fi
    ${pkgs.stdenv.shellDryRun} "$wrapperPath"
    install -D -m 0555 "$wrapperPath" "$out/bin/${a.outName}"
    mkdir -p "$out/share/agent-sandbox"
    ln -s "${specFile}" "$out/share/agent-sandbox/${a.outName}.json"
  ''
)
