# Evaluation test cases for mkSandbox, run by tests/nix/eval.py (and the flake check
# checks/eval-arguments-and-errors.nix) with the fake package set: no nixpkgs, no store.
#   specs:    arguments -> the static spec and the launch-time part, exactly
#   wrappers: arguments -> the text of bin/<outName>, exactly
#   errors:   arguments -> the evaluation error, exactly (as Nix prints it after "error: ")
#   domainCases: rust/shared/domain-cases.json (the helper's unit tests read it too), each
#             entry alone in allowedDomains -> accepted or refused
let
  f = import ./fake-pkgs.nix { };
  fDarwin = import ./fake-pkgs.nix { isLinux = false; };
  mkSandboxWith = pkgs: import ../../lib/mkSandbox.nix {
    inherit pkgs;
    inherit (pkgs) agent-sandbox;
  };
  mkSandbox = mkSandboxWith f;

  base = {
    pkg = f.claude-code;
    binName = "claude";
    outName = "claude";
    allowedPackages = [ f.git ];
  };

  ca = "${f.cacert}/etc/ssl/certs/ca-bundle.crt";
  caEnv = {
    SSL_CERT_FILE = ca;
    NIX_SSL_CERT_FILE = ca;
    REQUESTS_CA_BUNDLE = ca;
    CURL_CA_BUNDLE = ca;
    GIT_SSL_CAINFO = ca;
    PIP_CERT = ca;
    CARGO_HTTP_CAINFO = ca;
  };
  baseSpec = {
    version = 1;
    outName = "claude";
    program = "${f.claude-code}/bin/claude";
    path = [
      "${f.claude-code}/bin"
      "${f.git}/bin"
      "${f.bash}/bin"
    ];
    rwDirs = [ ];
    rwFiles = [ ];
    roDirs = [ ];
    roFiles = [ ];
    allowedSockets = [ ];
    rwHostConfig = [ ];
    upstreamCaFiles = [ ];
    env = caEnv;
    allowNix = false;
    allowedDomains = null;
    allowedLocalPorts = [ ];
  };
  noLaunch = {
    rwDirs = [ ];
    rwFiles = [ ];
    roDirs = [ ];
    roFiles = [ ];
    allowedSockets = [ ];
    rwHostConfig = [ ];
    upstreamCaFiles = [ ];
    workspaceDir = null;
    env = { };
    args = [ ];
  };

  # The made-up store path of a fake runCommand output.
  fakePath = name: (f.runCommand name { } "").outPath;
  helper = "${f.agent-sandbox}/bin/agent-sandbox";
  tools = ''
    export AGENT_SANDBOX_BWRAP='${f.bubblewrap}/bin/bwrap'
    export AGENT_SANDBOX_PASTA='${f.passt}/bin/pasta'
  '';

  long = n: builtins.concatStringsSep "" (builtins.genList (_: "a") n);
in
{
  inherit mkSandbox mkSandboxWith f fDarwin;

  specs = {
    minimal = {
      args = base;
      spec = baseSpec;
      launch = noLaunch;
    };

    # $ and backquotes make a value dynamic (the wrapper expands it); ~/ and relative paths
    # stay in the spec (the helper resolves them).
    paths-static-and-dynamic = {
      args = base // {
        rwDirs = [
          "$HOME/.claude"
          "/srv/shared"
          "~/.cache/claude"
          "notes"
        ];
        rwFiles = [ "$HOME/.claude.json" ];
        roDirs = [ "`echo /opt/docs`" ];
        roFiles = [
          "/etc/agent.conf"
          "\${XDG_CONFIG_HOME:-$HOME/.config}/git/config"
        ];
        allowedSockets = [
          "$XDG_RUNTIME_DIR/bus"
          "~/.gnupg/S.gpg-agent"
        ];
        rwHostConfig = [
          "~/.bashrc"
          "$HOME/.config/git"
        ];
      };
      spec = baseSpec // {
        rwDirs = [
          "/srv/shared"
          "~/.cache/claude"
          "notes"
        ];
        roFiles = [ "/etc/agent.conf" ];
        allowedSockets = [ "~/.gnupg/S.gpg-agent" ];
        rwHostConfig = [ "~/.bashrc" ];
      };
      launch = noLaunch // {
        rwDirs = [ "$HOME/.claude" ];
        rwFiles = [ "$HOME/.claude.json" ];
        roDirs = [ "`echo /opt/docs`" ];
        roFiles = [ "\${XDG_CONFIG_HOME:-$HOME/.config}/git/config" ];
        allowedSockets = [ "$XDG_RUNTIME_DIR/bus" ];
        rwHostConfig = [ "$HOME/.config/git" ];
      };
    };

    # Static values go to the spec and may override the TLS defaults; a dynamic value removes
    # the default of the same name (the wrapper sets it, or leaves it unset when empty).
    env-static-and-dynamic = {
      args = base // {
        env = {
          EDITOR = "vi";
          GREETING = "a \"quoted\" value with spaces";
          SSL_CERT_FILE = "/etc/my-ca.pem";
          CURL_CA_BUNDLE = "$MY_CA";
          CLAUDE_CODE_OAUTH_TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN";
          API_KEY = "$(cat /run/secrets/api-key)";
        };
      };
      spec = baseSpec // {
        env = removeAttrs caEnv [ "CURL_CA_BUNDLE" ] // {
          EDITOR = "vi";
          GREETING = "a \"quoted\" value with spaces";
          SSL_CERT_FILE = "/etc/my-ca.pem";
        };
      };
      launch = noLaunch // {
        env = {
          CURL_CA_BUNDLE = "$MY_CA";
          CLAUDE_CODE_OAUTH_TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN";
          API_KEY = "$(cat /run/secrets/api-key)";
        };
      };
    };

    bash-gets-norc-noprofile = {
      args = base // {
        pkg = f.bashInteractive;
        binName = "bash";
        outName = "bash-sandboxed";
      };
      spec = baseSpec // {
        outName = "bash-sandboxed";
        program = "${f.bashInteractive}/bin/bash";
        path = [
          "${f.bashInteractive}/bin"
          "${f.git}/bin"
          "${f.bash}/bin"
        ];
      };
      launch = noLaunch // {
        args = [
          "--norc"
          "--noprofile"
        ];
      };
    };

    path-deduplicated-and-bin-outputs = {
      args = base // {
        pkg = f.curl;
        binName = "curl";
        allowedPackages = [
          f.git
          f.curl
          f.bash
          f.git
        ];
      };
      spec = baseSpec // {
        program = "${f.curl.bin}/bin/curl";
        path = [
          "${f.curl.bin}/bin"
          "${f.git}/bin"
          "${f.bash}/bin"
        ];
      };
      launch = noLaunch;
    };

    # pkg-config finds the libraries of allowedPackages that have a dev output (each once).
    pkg-config-path-from-dev-outputs = {
      args = base // {
        allowedPackages = [
          f.git
          f.openssl
          f.openssl
        ];
      };
      spec = baseSpec // {
        path = [
          "${f.claude-code}/bin"
          "${f.git}/bin"
          "${f.openssl}/bin"
          "${f.bash}/bin"
        ];
        env = caEnv // {
          PKG_CONFIG_PATH = "${f.openssl.dev}/lib/pkgconfig:${f.openssl.dev}/share/pkgconfig";
        };
      };
      launch = noLaunch;
    };

    # v5 flakes with allowNix set allowUnixSockets = true: what the sandbox does today.
    allow-unix-sockets-true-accepted = {
      args = base // {
        allowUnixSockets = true;
      };
      spec = baseSpec;
      launch = noLaunch;
    };

    # agent-sandbox.nix v5's name for allowedLocalPorts.
    allowed-host-ports = {
      args = base // {
        allowedHostPorts = [ 3000 ];
      };
      spec = baseSpec // {
        allowedLocalPorts = [ 3000 ];
      };
      launch = noLaunch;
    };

    upstream-ca-files-static-and-dynamic = {
      args = base // {
        upstreamCaFiles = [
          "/etc/corp/ca.pem"
          "$HOME/.config/corp-ca.pem"
        ];
      };
      spec = baseSpec // {
        upstreamCaFiles = [ "/etc/corp/ca.pem" ];
      };
      launch = noLaunch // {
        upstreamCaFiles = [ "$HOME/.config/corp-ca.pem" ];
      };
    };

    workspace-static = {
      args = base // {
        workspaceDir = "/srv/work";
      };
      spec = baseSpec // {
        workspaceDir = "/srv/work";
      };
      launch = noLaunch;
    };

    workspace-dynamic = {
      args = base // {
        workspaceDir = "$HOME/src/project";
      };
      spec = baseSpec;
      launch = noLaunch // {
        workspaceDir = "$HOME/src/project";
      };
    };

    pkg-as-store-path-string = {
      args = base // {
        pkg = "${f.claude-code}";
      };
      spec = baseSpec;
      launch = noLaunch;
    };

    # nix joins PATH (last) and the client gets the commands agents use; env may override.
    allow-nix = {
      args = base // {
        allowNix = true;
      };
      spec = baseSpec // {
        allowNix = true;
        path = baseSpec.path ++ [ "${f.nix}/bin" ];
        env = caEnv // {
          NIX_CONFIG = "experimental-features = nix-command flakes";
        };
      };
      launch = noLaunch;
    };

    allow-nix-own-config = {
      args = base // {
        allowNix = true;
        env.NIX_CONFIG = "$NIX_CONFIG";
      };
      spec = baseSpec // {
        allowNix = true;
        path = baseSpec.path ++ [ "${f.nix}/bin" ];
      };
      launch = noLaunch // {
        env.NIX_CONFIG = "$NIX_CONFIG";
      };
    };

    no-network = {
      args = base // {
        allowedDomains = [ ];
      };
      spec = baseSpec // {
        allowedDomains = [ ];
      };
      launch = noLaunch;
    };

    domains-list = {
      args = base // {
        allowedDomains = [
          "api.anthropic.com"
          "Statsig.Anthropic.COM."
          "127.0.0.1"
          "[::1]"
          "_acme.example.org"
          "${long 63}.com"
        ];
      };
      spec = baseSpec // {
        allowedDomains = [
          "api.anthropic.com"
          "Statsig.Anthropic.COM."
          "127.0.0.1"
          "[::1]"
          "_acme.example.org"
          "${long 63}.com"
        ];
      };
      launch = noLaunch;
    };

    domains-rules = {
      args = base // {
        allowedDomains = {
          "api.github.com" = [
            "GET"
            "HEAD"
          ];
          "uploads.github.com" = "*";
          "registry.npmjs.org" = [
            "GET"
            "HEAD"
            "POST"
            "PUT"
            "PATCH"
            "DELETE"
            "OPTIONS"
            "TRACE"
            "CONNECT"
          ];
        };
      };
      spec = baseSpec // {
        allowedDomains = {
          "api.github.com" = [
            "GET"
            "HEAD"
          ];
          "uploads.github.com" = "*";
          "registry.npmjs.org" = [
            "GET"
            "HEAD"
            "POST"
            "PUT"
            "PATCH"
            "DELETE"
            "OPTIONS"
            "TRACE"
            "CONNECT"
          ];
        };
      };
      launch = noLaunch;
    };

    domains-empty-rules-block = {
      args = base // {
        allowedDomains = { };
      };
      spec = baseSpec // {
        allowedDomains = { };
      };
      launch = noLaunch;
    };

    local-ports = {
      args = base // {
        allowedLocalPorts = [
          1
          5432
          65535
        ];
      };
      spec = baseSpec // {
        allowedLocalPorts = [
          1
          5432
          65535
        ];
      };
      launch = noLaunch;
    };

    all-local-ports = {
      args = base // {
        allowedLocalPorts = null;
      };
      spec = baseSpec // {
        allowedLocalPorts = null;
      };
      launch = noLaunch;
    };
  };

  # `got` lists the entries that behave as the file says, so a drift shows as the missing ones.
  domainCases =
    let
      cases = builtins.fromJSON (builtins.readFile ../../rust/shared/domain-cases.json);
      accepted =
        d:
        (builtins.tryEval (builtins.seq (mkSandbox (base // { allowedDomains = [ d ]; })) true)).success;
      nixAccepts = cases.nixAcceptsHelperRefuses.cases;
    in
    {
      want = {
        inherit (cases) valid invalid tooBroad;
        inherit nixAccepts;
      };
      got = {
        valid = builtins.filter accepted cases.valid;
        invalid = builtins.filter (d: !accepted d) cases.invalid;
        tooBroad = builtins.filter (d: !accepted d) cases.tooBroad;
        nixAccepts = builtins.filter accepted nixAccepts;
      };
    };

  # The exact JSON text mkSandbox hands to the build (before the closure is spliced in).
  staticJson = {
    args = base // {
      allowedDomains = [ ];
      env.EDITOR = "vi";
    };
    json = builtins.concatStringsSep "" [
      ''{"allowNix":false,"allowedDomains":[],"allowedLocalPorts":[],"allowedSockets":[],''
      ''"env":{"CARGO_HTTP_CAINFO":"${ca}","CURL_CA_BUNDLE":"${ca}","EDITOR":"vi","GIT_SSL_CAINFO":"${ca}",''
      ''"NIX_SSL_CERT_FILE":"${ca}","PIP_CERT":"${ca}","REQUESTS_CA_BUNDLE":"${ca}","SSL_CERT_FILE":"${ca}"},''
      ''"outName":"claude","path":["${f.claude-code}/bin","${f.git}/bin","${f.bash}/bin"],''
      ''"program":"${f.claude-code}/bin/claude","roDirs":[],"roFiles":[],"rwDirs":[],"rwFiles":[],"rwHostConfig":[],"upstreamCaFiles":[],"version":1}''
    ];
  };

  # The closure is that of the static spec (so everything the policy names: the program, the
  # PATH entries, store paths in env values) plus the helper, which runs inside as PID 1.
  closureRoots = {
    args = base;
    roots = [
      (fakePath "claude-sandbox-static.json")
      "${f.agent-sandbox}"
    ];
  };

  wrappers = {
    minimal = {
      args = base;
      text = ''
        #!${f.runtimeShell}
        # claude: ${f.claude-code}/bin/claude in agent-sandbox (generated by mkSandbox).
        # Policy: ${fakePath "claude-sandbox.json"}
        ${tools}exec '${helper}' run --spec '${fakePath "claude-sandbox.json"}' -- "$@"
      '';
    };

    dynamic-values = {
      args = base // {
        rwDirs = [
          "$HOME/.claude"
          "/srv/shared"
        ];
        rwFiles = [ "$HOME/.claude.json" ];
        roDirs = [ "$HOME/docs" ];
        roFiles = [ "$HOME/.gitconfig" ];
        allowedSockets = [ "$XDG_RUNTIME_DIR/bus" ];
        env = {
          EDITOR = "vi";
          CLAUDE_CODE_OAUTH_TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN";
          API_KEY = "$(cat \"$HOME/.secrets/api key\")";
        };
      };
      text = ''
        #!${f.runtimeShell}
        # claude: ${f.claude-code}/bin/claude in agent-sandbox (generated by mkSandbox).
        # Policy: ${fakePath "claude-sandbox.json"}
        # The values below are expanded by this shell at each launch, never stored.
        ${tools}args=()
        args+=(--rw-dir "$HOME/.claude")
        args+=(--rw-file "$HOME/.claude.json")
        args+=(--ro-dir "$HOME/docs")
        args+=(--ro-file "$HOME/.gitconfig")
        args+=(--allow-socket "$XDG_RUNTIME_DIR/bus")
        envs=()
        v="$(cat "$HOME/.secrets/api key")"; [ -z "$v" ] || envs+=("API_KEY=$v")
        v="$CLAUDE_CODE_OAUTH_TOKEN"; [ -z "$v" ] || envs+=("CLAUDE_CODE_OAUTH_TOKEN=$v")
        exec '${helper}' run --spec '${fakePath "claude-sandbox.json"}' "''${args[@]}" --env-file <(printf '%s\0' "''${envs[@]}") -- "$@"
      '';
    };

    upstream-ca-and-workspace-expanded-at-launch = {
      args = base // {
        upstreamCaFiles = [ "$HOME/.config/corp-ca.pem" ];
        workspaceDir = "$HOME/src/project";
      };
      text = ''
        #!${f.runtimeShell}
        # claude: ${f.claude-code}/bin/claude in agent-sandbox (generated by mkSandbox).
        # Policy: ${fakePath "claude-sandbox.json"}
        # The values below are expanded by this shell at each launch, never stored.
        ${tools}args=()
        args+=(--upstream-ca "$HOME/.config/corp-ca.pem")
        args+=(--workspace "$HOME/src/project")
        exec '${helper}' run --spec '${fakePath "claude-sandbox.json"}' "''${args[@]}" -- "$@"
      '';
    };

    bash = {
      args = base // {
        pkg = f.bashInteractive;
        binName = "bash";
        outName = "bash-sandboxed";
      };
      text = ''
        #!${f.runtimeShell}
        # bash-sandboxed: ${f.bashInteractive}/bin/bash in agent-sandbox (generated by mkSandbox).
        # Policy: ${fakePath "bash-sandboxed-sandbox.json"}
        ${tools}exec '${helper}' run --spec '${fakePath "bash-sandboxed-sandbox.json"}' -- '--norc' '--noprofile' "$@"
      '';
    };

    # macOS: no bubblewrap, pasta or ip to name.
    darwin = {
      darwin = true;
      args = base;
      text = ''
        #!${fDarwin.runtimeShell}
        # claude: ${f.claude-code}/bin/claude in agent-sandbox (generated by mkSandbox).
        # Policy: ${fakePath "claude-sandbox.json"}
        exec '${helper}' run --spec '${fakePath "claude-sandbox.json"}' -- "$@"
      '';
    };
  };

  errors = {
    removed-one = {
      args = base // {
        stateDirs = [ "$HOME/.claude" ];
      };
      message = ''
        mkSandbox: removed v0 argument(s) stateDirs (now rwDirs); rename them as in the migration table:
            v0                 v1
            extraEnv        -> env             same attribute set; values may use $VAR and $(...)
            stateDirs       -> rwDirs          same list of directories (read-write)
            stateFiles      -> rwFiles         same list of files (read-write)
            restrictNetwork -> allowedDomains  false -> null (open network); true -> a list of domains, [ ] for no network'';
    };

    removed-all-in-one-error = {
      args = base // {
        restrictNetwork = true;
        stateFiles = [ "$HOME/.claude.json" ];
        extraEnv = { };
        stateDirs = [ ];
      };
      message = ''
        mkSandbox: removed v0 argument(s) extraEnv (now env), stateDirs (now rwDirs), stateFiles (now rwFiles), restrictNetwork (now allowedDomains); rename them as in the migration table:
            v0                 v1
            extraEnv        -> env             same attribute set; values may use $VAR and $(...)
            stateDirs       -> rwDirs          same list of directories (read-write)
            stateFiles      -> rwFiles         same list of files (read-write)
            restrictNetwork -> allowedDomains  false -> null (open network); true -> a list of domains, [ ] for no network'';
    };

    unknown = {
      args = base // {
        networkPolicy = "open";
        rwdirs = [ ];
      };
      message = "mkSandbox: unknown argument(s) networkPolicy, rwdirs (did you mean rwDirs?); expected pkg, binName, outName, allowedPackages (required) and rwDirs, rwFiles, roDirs, roFiles, allowedSockets, rwHostConfig, env, allowNix, allowedDomains, allowedLocalPorts, allowedHostPorts, upstreamCaFiles, workspaceDir";
    };

    removed-unknown-and-bad-values-together = {
      args = base // {
        extraEnv = { };
        colour = true;
        allowNix = "yes";
      };
      message = ''
        mkSandbox: removed v0 argument(s) extraEnv (now env); rename them as in the migration table:
            v0                 v1
            extraEnv        -> env             same attribute set; values may use $VAR and $(...)
            stateDirs       -> rwDirs          same list of directories (read-write)
            stateFiles      -> rwFiles         same list of files (read-write)
            restrictNetwork -> allowedDomains  false -> null (open network); true -> a list of domains, [ ] for no network
        mkSandbox: unknown argument(s) colour; expected pkg, binName, outName, allowedPackages (required) and rwDirs, rwFiles, roDirs, roFiles, allowedSockets, rwHostConfig, env, allowNix, allowedDomains, allowedLocalPorts, allowedHostPorts, upstreamCaFiles, workspaceDir
        mkSandbox: allowNix must be true or false, got the string "yes"'';
    };

    missing-all = {
      args = { };
      message = ''
        mkSandbox: missing required argument pkg: the package to run, e.g. pkg = pkgs.claude-code;
        mkSandbox: missing required argument binName: the program in pkg's bin/ to run, e.g. binName = "claude";
        mkSandbox: missing required argument outName: the command to create, e.g. outName = "claude";
        mkSandbox: missing required argument allowedPackages: the packages on PATH inside, e.g. allowedPackages = sandbox.commonTools;'';
    };

    missing-one = {
      args = removeAttrs base [ "binName" ];
      message = ''mkSandbox: missing required argument binName: the program in pkg's bin/ to run, e.g. binName = "claude";'';
    };

    pkg-name-instead-of-package = {
      args = base // {
        pkg = "claude-code";
      };
      message = ''mkSandbox: pkg must be a package (e.g. pkgs.claude-code), got the string "claude-code"'';
    };

    pkg-null = {
      args = base // {
        pkg = null;
      };
      message = "mkSandbox: pkg must be a package (e.g. pkgs.claude-code), got null";
    };

    binName-with-slash = {
      args = base // {
        binName = "bin/claude";
      };
      message = ''mkSandbox: binName must be the name of a program in pkg's bin/ (a non-empty string without '/', e.g. "claude"), got the string "bin/claude"'';
    };

    binName-empty = {
      args = base // {
        binName = "";
      };
      message = ''mkSandbox: binName must be the name of a program in pkg's bin/ (a non-empty string without '/', e.g. "claude"), got the string ""'';
    };

    outName-with-space = {
      args = base // {
        outName = "claude code";
      };
      message = ''mkSandbox: outName must be a command name of letters, digits and . _ + - not starting with '.' or '-' (e.g. "claude"), got the string "claude code"'';
    };

    outName-hidden = {
      args = base // {
        outName = ".claude";
      };
      message = ''mkSandbox: outName must be a command name of letters, digits and . _ + - not starting with '.' or '-' (e.g. "claude"), got the string ".claude"'';
    };

    outName-integer = {
      args = base // {
        outName = 1;
      };
      message = ''mkSandbox: outName must be a command name of letters, digits and . _ + - not starting with '.' or '-' (e.g. "claude"), got the integer 1'';
    };

    allowedPackages-one-package = {
      args = base // {
        allowedPackages = f.git;
      };
      message = "mkSandbox: allowedPackages must be a list of packages (e.g. sandbox.commonTools ++ [ pkgs.nodejs ]), got the package git-2.45";
    };

    allowedPackages-names = {
      args = base // {
        allowedPackages = [
          f.git
          "ripgrep"
          null
          { name = "fd"; }
        ];
      };
      message = ''mkSandbox: allowedPackages has entries that are not packages: the string "ripgrep", null, an attribute set; expected derivations such as pkgs.git'';
    };

    rwDirs-one-string = {
      args = base // {
        rwDirs = "$HOME/.claude";
      };
      message = ''mkSandbox: rwDirs must be a list of paths as strings (e.g. [ "$HOME/.claude" ]), got the string "$HOME/.claude"'';
    };

    rwFiles-nix-path-and-empty = {
      args = base // {
        rwFiles = [
          /etc/hostname
          ""
          "ok"
        ];
      };
      message = ''mkSandbox: rwFiles has entries that are not non-empty strings: the path /etc/hostname, the string ""; write paths as strings, e.g. "$HOME/.claude" (a Nix path such as ./x would be copied into the store)'';
    };

    roDirs-set = {
      args = base // {
        roDirs = {
          docs = "/srv/docs";
        };
      };
      message = ''mkSandbox: roDirs must be a list of paths as strings (e.g. [ "$HOME/.claude" ]), got an attribute set'';
    };

    roFiles-nested-list = {
      args = base // {
        roFiles = [ [ "/etc/x" ] ];
      };
      message = ''mkSandbox: roFiles has entries that are not non-empty strings: a list; write paths as strings, e.g. "$HOME/.claude" (a Nix path such as ./x would be copied into the store)'';
    };

    allowedSockets-nix-path = {
      args = base // {
        allowedSockets = [ ./cases.nix ];
      };
      message = ''mkSandbox: allowedSockets has entries that are not non-empty strings: the path ${toString ./cases.nix}; write paths as strings, e.g. "$HOME/.claude" (a Nix path such as ./x would be copied into the store)'';
    };

    env-list = {
      args = base // {
        env = [ "EDITOR=vi" ];
      };
      message = ''mkSandbox: env must be an attribute set of strings (e.g. { EDITOR = "vi"; }), got a list'';
    };

    env-package = {
      args = base // {
        env = f.git;
      };
      message = ''mkSandbox: env must be an attribute set of strings (e.g. { EDITOR = "vi"; }), got the package git-2.45'';
    };

    env-bad-names-and-values = {
      args = base // {
        env = {
          "1ST" = "x";
          "MY-VAR" = "y";
          PORT = 8080;
          DEBUG = true;
          TOOLS = [ "a" ];
          GIT = f.git;
        };
      };
      message = ''
        mkSandbox: env has invalid variable name(s) "1ST", "MY-VAR"; expected letters, digits and _, not starting with a digit
        mkSandbox: env values must be strings, got DEBUG = true, GIT = the package git-2.45, PORT = the integer 8080, TOOLS = a list'';
    };

    allowNix-string = {
      args = base // {
        allowNix = "true";
      };
      message = ''mkSandbox: allowNix must be true or false, got the string "true"'';
    };

    allowedDomains-string = {
      args = base // {
        allowedDomains = "api.anthropic.com";
      };
      message = ''mkSandbox: allowedDomains must be null (open network), a list of domains (e.g. [ "api.anthropic.com" ], [ ] for no network) or an attribute set of domain -> "*" or a list of HTTP methods, got the string "api.anthropic.com"'';
    };

    allowedDomains-bool = {
      args = base // {
        allowedDomains = true;
      };
      message = ''mkSandbox: allowedDomains must be null (open network), a list of domains (e.g. [ "api.anthropic.com" ], [ ] for no network) or an attribute set of domain -> "*" or a list of HTTP methods, got true'';
    };

    allowedDomains-not-domains = {
      args = base // {
        allowedDomains = [
          "https://api.anthropic.com"
          "api.anthropic.com:443"
          "*.github.com"
          "example.com/path"
          "-bad.com"
          "a..b"
          ""
          "${long 64}.com"
          "${long 63}.${long 63}.${long 63}.${long 62}"
          443
        ];
      };
      message = ''
        mkSandbox: allowedDomains entry "https://api.anthropic.com" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry "api.anthropic.com:443" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry "*.github.com" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry "example.com/path" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry "-bad.com" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry "a..b" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry "" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry "${long 64}.com" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry "${long 63}.${long 63}.${long 63}.${long 62}" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)
        mkSandbox: allowedDomains entry 443 is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)'';
    };

    # Issue 11: a rule covers every name under it, so a suffix would open whole registries.
    allowedDomains-too-broad = {
      args = base // {
        allowedDomains = {
          "com" = "*";
          "Co.UK." = [ "GET" ];
          "github.io" = "*";
          "localhost" = "*";
          "example.co.uk" = "*";
        };
      };
      message = ''
        mkSandbox: allowedDomains entry "Co.UK." is a public suffix: it would allow every site registered under it; expected a registrable domain such as "example.co.uk", or a host name in it
        mkSandbox: allowedDomains entry "com" is a single label (a top-level domain): it would allow every name under it; expected a registrable domain such as "example.com", or a host name in it
        mkSandbox: allowedDomains entry "github.io" is a public suffix: it would allow every site registered under it; expected a registrable domain such as "example.github.io", or a host name in it'';
    };

    allowedDomains-internationalised = {
      args = base // {
        allowedDomains = [ "bücher.example" ];
      };
      message = ''mkSandbox: allowedDomains entry "bücher.example" is an internationalised name; write it in its ASCII (punycode) form, which starts with xn-- (e.g. "bücher.example" is "xn--bcher-kva.example"; python3 -c 'print("bücher.example".encode("idna").decode())' prints yours)'';
    };

    allowedDomains-bad-rules = {
      args = base // {
        allowedDomains = {
          "a.example" = [ ];
          "b.example" = [
            "GET"
            "FETCH"
            "post"
          ];
          "c.example" = "all";
          "d.example" = 1;
          "https://e.example" = "*";
        };
      };
      message = ''
        mkSandbox: allowedDomains."a.example" is an empty list; expected "*" or at least one HTTP method (remove the domain to block it)
        mkSandbox: allowedDomains."b.example" has unknown method "FETCH"; expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT
        mkSandbox: allowedDomains."b.example" has unknown method "post"; expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT
        mkSandbox: allowedDomains."c.example" is "all"; expected "*" or a list of HTTP methods
        mkSandbox: allowedDomains."d.example" is 1; expected "*" or a list of HTTP methods
        mkSandbox: allowedDomains entry "https://e.example" is not a domain name (expected e.g. "api.anthropic.com"; no scheme, port, path or wildcard)'';
    };

    allowedLocalPorts-one-number = {
      args = base // {
        allowedLocalPorts = 5432;
      };
      message = "mkSandbox: allowedLocalPorts must be null (all ports) or a list of port numbers 1..65535 (e.g. [ 5432 ]), got the integer 5432";
    };

    allowedLocalPorts-out-of-range = {
      args = base // {
        allowedLocalPorts = [
          0
          80
          70000
        ];
      };
      message = "mkSandbox: allowedLocalPorts has 0, 70000, which are not port numbers 1..65535; expected a list of integers such as [ 5432 ], or null for all ports";
    };

    allowedLocalPorts-not-integers = {
      args = base // {
        allowedLocalPorts = [
          "5432"
          null
          (-1)
        ];
      };
      message = ''mkSandbox: allowedLocalPorts has "5432", null, -1, which are not port numbers 1..65535; expected a list of integers such as [ 5432 ], or null for all ports'';
    };

    allowedHostPorts-and-allowedLocalPorts = {
      args = base // {
        allowedHostPorts = [ 3000 ];
        allowedLocalPorts = [ 3000 ];
      };
      message = "mkSandbox: allowedHostPorts and allowedLocalPorts are the same setting (allowedHostPorts is agent-sandbox.nix v5's name); give only one of them";
    };

    allowedHostPorts-bad-value-named-as-given = {
      args = base // {
        allowedHostPorts = [ 0 ];
      };
      message = "mkSandbox: allowedHostPorts has 0, which is not a port number 1..65535; expected a list of integers such as [ 5432 ], or null for all ports";
    };

    v5-not-yet-allowUnixSockets-false = {
      args = base // {
        allowUnixSockets = false;
      };
      message = "mkSandbox: allowUnixSockets (an agent-sandbox.nix v5 argument) = false is not supported yet (planned: v5 parity, issue 13): blocking AF_UNIX sockets cannot be enforced, and the sandbox does not start without what you asked for. Remove it (sockets the agent creates inside then work; sockets found in declared paths stay masked unless listed in allowedSockets), or set it to true";
    };

    allowUnixSockets-not-a-bool = {
      args = base // {
        allowUnixSockets = "yes";
      };
      message = ''mkSandbox: allowUnixSockets must be true or false, got the string "yes"'';
    };

    v5-not-yet-publishedPorts-and-allowHeadlessBrowsers = {
      args = base // {
        publishedPorts = [ 3000 ];
        allowHeadlessBrowsers = [ "chromium" ];
      };
      message = ''
        mkSandbox: allowHeadlessBrowsers (an agent-sandbox.nix v5 argument) is not supported yet (planned: v5 parity, issue 13). Remove it; a browser inside needs its own sandbox disabled and the proxy's CA trusted, which the helper does not set up yet
        mkSandbox: publishedPorts (an agent-sandbox.nix v5 argument) is not supported yet (planned: v5 parity, issue 13): nothing inside the sandbox can be reached from the host. Remove it, or run the server outside the sandbox'';
    };

    workspaceDir-not-a-string = {
      args = base // {
        workspaceDir = ./.;
      };
      message = "mkSandbox: workspaceDir must be null (the launch directory) or a directory path as a string (e.g. \"$HOME/src/project\"), got the path ${toString ./.}";
    };

    upstreamCaFiles-not-a-list = {
      args = base // {
        upstreamCaFiles = "/etc/corp/ca.pem";
      };
      message = ''mkSandbox: upstreamCaFiles must be a list of paths as strings (e.g. [ "$HOME/.claude" ]), got the string "/etc/corp/ca.pem"'';
    };

    allowedLocalPorts-one-bad = {
      args = base // {
        allowedLocalPorts = [ 65536 ];
      };
      message = "mkSandbox: allowedLocalPorts has 65536, which is not a port number 1..65535; expected a list of integers such as [ 5432 ], or null for all ports";
    };

    every-value-problem-at-once = {
      args = {
        pkg = 1;
        binName = null;
        outName = "";
        allowedPackages = { };
        rwDirs = null;
        rwFiles = 1;
        roDirs = [ 2 ];
        roFiles = "x";
        env = "A=b";
        allowNix = 0;
        allowedDomains = 1;
        allowedLocalPorts = "all";
      };
      message = ''
        mkSandbox: pkg must be a package (e.g. pkgs.claude-code), got the integer 1
        mkSandbox: binName must be the name of a program in pkg's bin/ (a non-empty string without '/', e.g. "claude"), got null
        mkSandbox: outName must be a command name of letters, digits and . _ + - not starting with '.' or '-' (e.g. "claude"), got the string ""
        mkSandbox: allowedPackages must be a list of packages (e.g. sandbox.commonTools ++ [ pkgs.nodejs ]), got an attribute set
        mkSandbox: rwDirs must be a list of paths as strings (e.g. [ "$HOME/.claude" ]), got null
        mkSandbox: rwFiles must be a list of paths as strings (e.g. [ "$HOME/.claude" ]), got the integer 1
        mkSandbox: roDirs has entries that are not non-empty strings: the integer 2; write paths as strings, e.g. "$HOME/.claude" (a Nix path such as ./x would be copied into the store)
        mkSandbox: roFiles must be a list of paths as strings (e.g. [ "$HOME/.claude" ]), got the string "x"
        mkSandbox: env must be an attribute set of strings (e.g. { EDITOR = "vi"; }), got the string "A=b"
        mkSandbox: allowNix must be true or false, got the integer 0
        mkSandbox: allowedDomains must be null (open network), a list of domains (e.g. [ "api.anthropic.com" ], [ ] for no network) or an attribute set of domain -> "*" or a list of HTTP methods, got the integer 1
        mkSandbox: allowedLocalPorts must be null (all ports) or a list of port numbers 1..65535 (e.g. [ 5432 ]), got the string "all"'';
    };
  };
}
