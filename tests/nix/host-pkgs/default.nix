# A stand-in for nixpkgs, made of the host's Debian packages, so the Nix layer can be built and
# run where nixpkgs cannot be fetched (CI): `NIX_PATH=nixpkgs=tests/nix/host-pkgs`, then
# `import <nixpkgs> { }` works for fixtures using only the attributes below. Builds copy host
# files, so they need `--option sandbox false`; programs are relocated (their libraries and
# loader copied next to them, patched with patchelf) so they run inside a sandbox that sees
# only store paths. The helper is the binary cargo built (AGENT_SANDBOX_HELPER_BIN, default
# rust/target/debug/agent-sandbox, readable by the nixbld users): `rustPlatform.buildRustPackage`
# returns it, whatever its arguments, because the stand-in cannot compile Rust. A host package
# that is missing is an evaluation error naming the apt package.
#
# As a flake (flake.nix: lib and legacyPackages) it stands in for a flake's nixpkgs input:
# `--override-input nixpkgs path:./tests/nix/host-pkgs --impure` (it reads the host's package
# database, which pure evaluation forbids). The agents are small stand-in scripts (agentStandIn).
#
# Needs: a Debian/Ubuntu host with the packages named below installed, and patchelf.
# Builds run as root with a local store: nix-build --option sandbox false --option substituters ''.
{
  system ? builtins.currentSystem,
  ...
}:
let
  lib = import ./lib.nix;

  hostShell = "/bin/bash";
  hostPath = "/usr/bin:/bin:/usr/sbin:/sbin";

  # A derivation run by the host's bash with the host's tools, like nixpkgs' runCommand.
  # `passthru` and `meta` stay out of the derivation, as with stdenv.mkDerivation.
  runCommand =
    name: env: script:
    let
      inputs = (env.nativeBuildInputs or [ ]) ++ (env.buildInputs or [ ]);
      drv = derivation (
        removeAttrs env [
          "passthru"
          "meta"
          "nativeBuildInputs"
          "buildInputs"
        ]
        // {
          inherit name system;
          builder = hostShell;
          # The trailing `:` keeps bash from exec'ing the script's last command: coreutils
          # close stdout before they exit, and Nix kills the builder's process group as soon as
          # its log pipe reaches end of file, which on a loaded machine lands before the exit.
          args = [
            "-eo"
            "pipefail"
            "-c"
            "${script}\n:"
          ];
          PATH = lib.concatStringsSep ":" (map (p: "${lib.getBin p}/bin") inputs ++ [ hostPath ]);
        }
      );
    in
    drv
    // (env.passthru or { })
    // {
      meta = env.meta or { };
      passthru = env.passthru or { };
    };

  # A Debian package's dpkg records, hashed so that upgrading it on the host rebuilds.
  debState =
    deb:
    let
      info = "/var/lib/dpkg/info";
      arch = {
        x86_64-linux = "amd64";
        aarch64-linux = "arm64";
      };
      candidates = [
        "${info}/${deb}.md5sums"
        "${info}/${deb}:${arch.${system} or "none"}.md5sums"
        "${info}/${deb}.list"
        "${info}/${deb}:${arch.${system} or "none"}.list"
      ];
      found = builtins.filter builtins.pathExists candidates;
    in
    if found == [ ] then
      throw "host-pkgs: the Debian package ${deb} is not installed on this host. Fix: apt-get install ${deb}"
    else
      builtins.hashFile "sha256" (builtins.head found);

  # A package made of host programs, relocated. `install` is a bash snippet that fills $out
  # (the helpers of relocate.sh are available); by default, the debs' bin/ and sbin/ programs.
  hostPackage =
    {
      pname,
      debs ? [ pname ],
      install ? ''for deb in $debs; do copy_deb_bins "$deb"; done'',
      shell ? bash,
      passthru ? { },
    }:
    runCommand "${pname}-host"
      {
        inherit debs passthru;
        hostState = map debState debs;
        relocate = ./relocate.sh;
        shell = if shell == null then "" else shell;
        meta.mainProgram = pname;
      }
      ''
        source "$relocate"
        ${install}
        relocate_all
      '';

  bash = hostPackage {
    pname = "bash";
    shell = null;
    install = ''
      copy_bin /bin/bash
      ln -s bash "$out/bin/sh"
    '';
  };

  git = hostPackage {
    pname = "git";
    # bin/git sets the exec path and templates that Debian's git expects under /usr.
    install = ''
      core=$out/libexec/git-core
      mkdir -p "$core" "$out/share/git-core" "$out/bin"
      cp -L /usr/bin/git "$core/git"
      cp -L /usr/lib/git-core/git-remote-http "$core/git-remote-http"
      ln -s git-remote-http "$core/git-remote-https"
      for c in upload-pack receive-pack upload-archive; do ln -s git "$core/git-$c"; done
      # `git submodule` is a shell script, with the shell libraries it sources.
      for c in git-submodule git-sh-setup git-sh-i18n git-sh-i18n--envsubst; do
        cp -L "/usr/lib/git-core/$c" "$core/$c"
      done
      sed -i "1s|^#!/bin/sh|#!$shell/bin/sh|" "$core/git-submodule"
      chmod -R u+w "$core"
      cp -RL /usr/share/git-core/templates "$out/share/git-core/templates"
      printf '%s\n' "#!$shell/bin/bash" \
        "export GIT_EXEC_PATH=$core GIT_TEMPLATE_DIR=$out/share/git-core/templates" \
        "exec -a \"\$0\" $core/git \"\$@\"" > "$out/bin/git"
      chmod 555 "$out/bin/git"
    '';
  };

  python3 = hostPackage {
    pname = "python3";
    debs = [ "python3-minimal" ];
    # The interpreter finds its standard library next to itself ($out/lib/python3.X); the
    # tests, GUI and build-tool parts of it are left out.
    install = ''
      real=$(readlink -f /usr/bin/python3)
      v=$(basename "$real")
      copy_bin "$real" "$v"
      ln -s "$v" "$out/bin/python3"
      ln -s "$v" "$out/bin/python"
      mkdir -p "$out/lib"
      cp -RL "/usr/lib/$v" "$out/lib/$v"
      chmod -R u+w "$out/lib/$v"
      for d in test idlelib tkinter turtledemo ensurepip lib2to3 pydoc_data site-packages dist-packages; do
        rm -rf "$out/lib/$v/$d"
      done
      rm -rf "$out/lib/$v"/config-* 
      find "$out/lib/$v" -name __pycache__ -prune -exec rm -rf {} +
    '';
  };

  cacert = runCommand "cacert-host" {
    hostState = debState "ca-certificates";
  } ''
    mkdir -p "$out/etc/ssl/certs"
    cp -L /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/ca-bundle.crt"
    ln -s ca-bundle.crt "$out/etc/ssl/certs/ca-certificates.crt"
  '';

  # The helper cargo built, copied (stripped: debug builds are large) and relocated like the
  # other programs; its hash makes every new build of it a new store path.
  helperBin =
    let
      fromEnv = builtins.getEnv "AGENT_SANDBOX_HELPER_BIN";
      default = toString ../../../rust/target/debug/agent-sandbox;
    in
    if fromEnv != "" then
      fromEnv
    else if builtins.pathExists default then
      default
    else
      throw "host-pkgs: no agent-sandbox binary. Fix: build it (cd rust && cargo build) or set AGENT_SANDBOX_HELPER_BIN to its absolute path";

  # The small in-sandbox init cargo builds beside it (the helper falls back to itself without).
  initBin =
    let
      p = dirOf helperBin + "/agent-sandbox-init";
    in
    if builtins.pathExists p then p else null;

  agent-sandbox =
    runCommand "agent-sandbox-host"
      {
        src = helperBin;
        init = if initBin == null then "" else initBin;
        hostState = builtins.hashFile "sha256" helperBin
          + (if initBin == null then "" else builtins.hashFile "sha256" initBin);
        relocate = ./relocate.sh;
        meta.mainProgram = "agent-sandbox";
        # checks/helper-unit-tests.nix asks for the package's check phase.
        passthru.overrideAttrs =
          f:
          let
            attrs = if builtins.isFunction f then f { } else f;
          in
          if attrs.doCheck or false then
            helperUnitTests (attrs.checkFlags or [ ])
          else
            unsupported "overrideAttrs of the helper (other than doCheck = true)" null;
      }
      ''
        source "$relocate"
        copy_bin "$src" agent-sandbox
        strip "$out/bin/agent-sandbox" 2>/dev/null || true
        if [ -n "$init" ]; then
          copy_bin "$init" agent-sandbox-init
          strip "$out/bin/agent-sandbox-init" 2>/dev/null || true
        fi
        relocate_all
      '';

  # The helper's unit tests, as nixpkgs' check phase runs them (`cargo test --lib`): the test
  # executable cargo built (`cargo test --lib --no-run` names it), run in the build.
  helperUnitTests =
    checkFlags:
    let
      bin = builtins.getEnv "AGENT_SANDBOX_UNIT_TESTS_BIN";
    in
    if bin == "" then
      throw "host-pkgs: the helper's unit tests are cargo's test executable. Fix: run `cd rust && cargo test --lib --no-run` and set AGENT_SANDBOX_UNIT_TESTS_BIN to the absolute path of the executable it names (scripts/test-nix does)"
    else
      runCommand "agent-sandbox-unit-tests"
        {
          tests = bin;
          inherit checkFlags;
          hostState = builtins.hashFile "sha256" bin;
          nativeBuildInputs = [ pkgs.git ];
        }
        ''
          export HOME=$TMPDIR/home
          mkdir -p "$HOME"
          cd "$TMPDIR"
          "$tests" --test-threads=2 $checkFlags | tee "$out"
        '';

  # Stand-ins for the agents, which are not Debian packages: each is a small script named like
  # the agent's program, so that the templates and shells build and run. Without arguments it
  # says where it runs and what its home holds; `--version` names it; `-c COMMAND [ARG…]` runs
  # COMMAND with bash, where the agent would run its shell commands.
  agentStandIn =
    pname: program:
    writeTextFile {
      name = "${pname}-stand-in";
      executable = true;
      destination = "/bin/${program}";
      meta.mainProgram = program;
      text = ''
        #!${runtimeShell}
        # A stand-in for ${pname} (tests/nix/host-pkgs), not the agent.
        case "''${1-}" in
        --version) echo "${program} stand-in for ${pname} (tests/nix/host-pkgs)" ;;
        -c)
          shift
          exec ${runtimeShell} -c "$@"
          ;;
        "")
          shopt -s dotglob nullglob
          home=(~/*)
          echo "${program} stand-in for ${pname} (tests/nix/host-pkgs), in $PWD; home holds:" "''${home[@]##*/}"
          ;;
        *)
          echo "${program} stand-in for ${pname} (tests/nix/host-pkgs): run it without arguments, with --version, or with -c COMMAND" >&2
          exit 2
          ;;
        esac
      '';
      checkPhase = ''${stdenv.shellDryRun} "$target"'';
    };

  writeTextFile =
    {
      name,
      text,
      executable ? false,
      destination ? "",
      checkPhase ? "",
      meta ? { },
      passthru ? { },
      derivationArgs ? { },
      ...
    }:
    runCommand name
      (
        derivationArgs
        // {
          inherit text meta passthru;
          passAsFile = [ "text" ];
        }
      )
      ''
        target=$out${destination}
        mkdir -p "$(dirname "$target")"
        cp "$textPath" "$target"
        ${lib.optionalString executable ''chmod +x "$target"''}
        ${checkPhase}
      '';

  stdenv = rec {
    hostPlatform = {
      inherit system;
      isLinux = true;
      isDarwin = false;
      isx86_64 = system == "x86_64-linux";
      isAarch64 = system == "aarch64-linux";
    };
    buildPlatform = hostPlatform;
    targetPlatform = hostPlatform;
    inherit (hostPlatform) isLinux isDarwin;
    shell = hostShell;
    shellDryRun = "${hostShell} -n -O extglob";
    mkDerivation = unsupported "stdenv.mkDerivation";
  };

  unsupported =
    name: _: throw "host-pkgs: ${name} is not part of the stand-in package set (tests/nix/host-pkgs)";

  # nixpkgs' writeClosure: the store paths of the closure of `paths`, sorted, one per line.
  writeClosure =
    paths:
    let
      roots = writeText "closure-roots" (lib.concatStringsSep "\n" (map toString paths));
    in
    runCommand "runtime-deps"
      {
        exportReferencesGraph = [
          "graph"
          roots
        ];
        inherit roots;
      }
      ''
        # graph: path, deriver, reference count, references, … for every path of the closure.
        while IFS= read -r p; do
          IFS= read -r _
          IFS= read -r n
          for ((i = 0; i < n; i++)); do IFS= read -r _; done
          [ "$p" = "$roots" ] || echo "$p"
        done < graph | sort -u > "$out"
      '';

  writeText = name: text: writeTextFile { inherit name text; };
  writeScript =
    name: text:
    writeTextFile {
      inherit name text;
      executable = true;
    };
  writeShellScript =
    name: text:
    writeTextFile {
      inherit name;
      executable = true;
      text = "#!${runtimeShell}\n${text}";
      checkPhase = ''${stdenv.shellDryRun} "$target"'';
    };
  runtimeShell = "${bash}/bin/bash";

  pkgs = {
    inherit
      lib
      system
      stdenv
      runCommand
      writeTextFile
      writeText
      writeScript
      writeShellScript
      writeClosure
      runtimeShell
      bash
      git
      python3
      cacert
      agent-sandbox
      ;
    pkgs = pkgs;
    buildPackages = pkgs;
    hostPlatform = stdenv.hostPlatform;
    buildPlatform = stdenv.buildPlatform;
    bashInteractive = bash;
    python3Minimal = python3;
    runCommandLocal = runCommand;
    runCommandNoCC = runCommand;
    writeReferencesToFile = path: writeClosure [ path ];
    writeScriptBin =
      name: text:
      writeTextFile {
        inherit name text;
        executable = true;
        destination = "/bin/${name}";
        meta.mainProgram = name;
      };
    writeShellScriptBin =
      name: text:
      writeTextFile {
        inherit name;
        executable = true;
        destination = "/bin/${name}";
        text = "#!${runtimeShell}\n${text}";
        checkPhase = ''${stdenv.shellDryRun} "$target"'';
        meta.mainProgram = name;
      };
    closureInfo =
      { rootPaths }:
      runCommand "closure-info" { closure = writeClosure rootPaths; } ''
        mkdir -p "$out"
        cp "$closure" "$out/store-paths"
      '';
    symlinkJoin =
      {
        name,
        paths,
        postBuild ? "",
        passthru ? { },
        meta ? { },
        ...
      }:
      runCommand name
        {
          inherit paths passthru meta;
        }
        ''
          mkdir -p "$out"
          for p in $paths; do cp -rs --no-preserve=mode "$p/." "$out/"; done
          ${postBuild}
        '';
    callPackage =
      fn: args:
      let
        f = if builtins.isFunction fn then fn else import fn;
      in
      f (builtins.intersectAttrs (builtins.functionArgs f) pkgs // args);

    # The helper cannot be compiled here: whatever the arguments, this is cargo's build.
    rustPlatform.buildRustPackage = _: agent-sandbox;
    # Only the helper's build takes it, and the stand-in above ignores that build's arguments.
    installShellFiles = unsupported "installShellFiles" null;

    coreutils = hostPackage { pname = "coreutils"; };
    curl = hostPackage { pname = "curl"; };
    bubblewrap = hostPackage { pname = "bubblewrap"; };
    passt = hostPackage { pname = "passt"; };
    iproute2 = hostPackage { pname = "iproute2"; };
    findutils = hostPackage { pname = "findutils"; };
    diffutils = hostPackage { pname = "diffutils"; };
    gnused = hostPackage {
      pname = "gnused";
      debs = [ "sed" ];
    };
    gnugrep = hostPackage {
      pname = "gnugrep";
      debs = [ "grep" ];
    };
    less = hostPackage { pname = "less"; };
    jq = hostPackage { pname = "jq"; };
    gawk = hostPackage {
      pname = "gawk";
      install = ''
        copy_deb_bins gawk
        ln -s gawk "$out/bin/awk"
      '';
    };
    ripgrep = hostPackage { pname = "ripgrep"; };
    which = hostPackage {
      pname = "which";
      debs = [ "debianutils" ];
      install = ''
        copy_bin /usr/bin/which.debianutils which
      '';
    };
    fd = hostPackage {
      pname = "fd";
      debs = [ "fd-find" ];
      install = ''
        copy_bin /usr/bin/fdfind fd
      '';
    };

    nix = hostPackage {
      pname = "nix";
      debs = [ "nix-bin" ];
    };

    nodejs = hostPackage {
      pname = "nodejs";
      install = ''copy_bin "$(readlink -f /usr/bin/node)" node'';
    };

    claude-code = agentStandIn "claude-code" "claude";
    codex = agentStandIn "codex" "codex";
    github-copilot-cli = agentStandIn "github-copilot-cli" "copilot";
    gemini-cli = agentStandIn "gemini-cli" "gemini";

    # An environment for nix-shell and nix develop, without stdenv: the packages' bin/ on the
    # derivation's PATH, which both take from it (nix develop through `outputs`). Building it
    # writes a note, as there is nothing to build.
    mkShell =
      {
        packages ? [ ],
        nativeBuildInputs ? [ ],
        buildInputs ? [ ],
        shellHook ? "",
        passthru ? { },
        ...
      }:
      runCommand "nix-shell"
        {
          nativeBuildInputs = packages ++ nativeBuildInputs;
          inherit buildInputs shellHook passthru;
          outputs = [ "out" ];
        }
        ''
          echo "host-pkgs: a shell environment for nix-shell and nix develop; nothing to build" > "$out"
        '';

    # The NixOS VM tests cannot run here: this evaluates one (its fixtures built, the test
    # script rendered with each node's address) and checks that its Python script compiles.
    # It names itself so that nobody takes it for the VM test.
    testers.runNixOSTest =
      {
        name,
        nodes,
        testScript,
        ...
      }:
      let
        addresses = lib.listToAttrs (
          lib.genList (i: {
            name = builtins.elemAt (builtins.attrNames nodes) i;
            value.networking.primaryIPAddress = "192.0.2.${toString (i + 1)}";
          }) (builtins.length (builtins.attrNames nodes))
        );
        script =
          if builtins.isFunction testScript then testScript { nodes = addresses; } else testScript;
      in
      runCommand "${name}-evaluated-vm-not-run"
        {
          inherit script;
          passAsFile = [ "script" ];
          nativeBuildInputs = [ python3 ];
        }
        ''
          python3 -c 'import sys; compile(open(sys.argv[1]).read(), "testScript", "exec")' "$scriptPath"
          echo "host-pkgs: NixOS VM test ${name} evaluated, its script compiles; the VM runs only with nixpkgs" | tee "$out"
        '';
  };
in
pkgs
