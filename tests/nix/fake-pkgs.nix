# A fake package set for the evaluation tests: packages are attribute sets with made-up store
# paths, and the builders record their arguments instead of building, so `mkSandbox`'s
# wiring can be compared exactly without nixpkgs and without a store.
{
  isLinux ? true,
}:
let
  inherit (builtins) hashString storeDir substring;
  path = name: "${storeDir}/${substring 0 32 (hashString "sha256" name)}-${name}";
  pkg = name: {
    type = "derivation";
    inherit name;
    outPath = path name;
  };
  pkgs = {
    bash = pkg "bash-5.2";
    bashInteractive = pkg "bash-interactive-5.2";
    cacert = pkg "cacert-3.1";
    bubblewrap = pkg "bubblewrap-0.9";
    passt = pkg "passt-2024";
    iproute2 = pkg "iproute2-6.1";
    coreutils = pkg "coreutils-9.1";
    git = pkg "git-2.45";
    nodejs = pkg "nodejs-22";
    claude-code = pkg "claude-code-1.0";
    agent-sandbox = pkg "agent-sandbox-0.1.0";
    which = pkg "which-2.21";
    ripgrep = pkg "ripgrep-14.1";
    fd = pkg "fd-10.1";
    gnused = pkg "gnused-4.9";
    gnugrep = pkg "gnugrep-3.11";
    findutils = pkg "findutils-4.10";
    diffutils = pkg "diffutils-3.10";
    less = pkg "less-661";
    gawk = pkg "gawk-5.3";
    jq = pkg "jq-1.7";
    nix = pkg "nix-2.24";
    # A library with its headers and .pc files in the `dev` output, as nixpkgs splits them.
    openssl = pkg "openssl-3.3" // {
      dev = pkg "openssl-3.3-dev";
    };
    # Two outputs, like curl: bin/ lives in the `bin` output.
    curl = pkg "curl-8.9" // {
      bin = pkg "curl-8.9-bin";
    };
    runtimeShell = "${pkgs.bash}/bin/bash";
    stdenv = {
      hostPlatform = {
        inherit isLinux;
      };
      shellDryRun = "${pkgs.bash}/bin/bash -n -O extglob";
    };
    writeClosure = paths: pkg "runtime-deps" // { inherit paths; };
    writeText = name: text: pkg name // { inherit text; };
    # Like stdenv, passthru attributes are reachable on the result.
    runCommand =
      name: env: script:
      pkg name // (env.passthru or { }) // { inherit env script; };
  };
in
pkgs
