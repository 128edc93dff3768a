# A stand-in for nixpkgs, made of the host's Debian packages, so the Nix layer can be built and
# run where nixpkgs cannot be fetched (CI): `NIX_PATH=nixpkgs=checks/host-pkgs`, then
# `import <nixpkgs> { }` works for fixtures using only the attributes below. Builds copy host
# files, so they need `--option sandbox false`; programs are relocated (their libraries and
# loader copied next to them, patched with patchelf) so they run inside a sandbox that sees
# only store paths. The helper is the binary cargo built (AGENT_SANDBOX_HELPER_BIN, default
# rust/target/debug/agent-sandbox, readable by the nixbld users): `rustPlatform.buildRustPackage`
# returns it, whatever its arguments, because the stand-in cannot compile Rust. A host package
# that is missing is an evaluation error naming the apt package.
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
      default = toString ../../rust/target/debug/agent-sandbox;
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
    name: _: throw "host-pkgs: ${name} is not part of the stand-in package set (checks/host-pkgs)";

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

    # Enough for `(import debug/bash.shell.nix { }).sandbox` and friends: the shell itself is
    # a placeholder (nix-shell needs the real stdenv), its passthru is real.
    mkShell =
      {
        passthru ? { },
        ...
      }:
      runCommand "shell-placeholder" { inherit passthru; } ''
        echo "host-pkgs: mkShell is a placeholder; nix-shell needs nixpkgs" > "$out"
      '';
  };
in
pkgs
