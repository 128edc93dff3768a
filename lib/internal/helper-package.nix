/**
  The helper, `agent-sandbox`, built from `rust/` (call with `pkgs.callPackage`).

  `cargo test` here runs the unit tests only: the integration suite needs user namespaces,
  which the Nix build sandbox does not provide (the NixOS VM checks cover that ground).

  Installs the shell completions (bash, zsh, fish) and the man pages, which the binary
  generates from its command-line definitions (`agent-sandbox completions SHELL`,
  `agent-sandbox man --dir DIR`); skipped when cross-compiling, where it cannot run.
*/
{
  lib,
  stdenv,
  rustPlatform,
  installShellFiles,
  git,
}:
rustPlatform.buildRustPackage {
  pname = "agent-sandbox";
  version = (builtins.fromTOML (builtins.readFile ../../rust/Cargo.toml)).package.version;

  # Without rust/target, which holds gigabytes of local build output.
  src = builtins.path {
    name = "agent-sandbox-source";
    path = ../../rust;
    filter = path: type: !(type == "directory" && baseNameOf path == "target");
  };
  cargoLock.lockFile = ../../rust/Cargo.lock;

  nativeBuildInputs = [ installShellFiles ];
  postInstall = lib.optionalString (stdenv.buildPlatform.canExecute stdenv.hostPlatform) ''
    installShellCompletion --cmd agent-sandbox \
      --bash <("$out/bin/agent-sandbox" completions bash) \
      --zsh <("$out/bin/agent-sandbox" completions zsh) \
      --fish <("$out/bin/agent-sandbox" completions fish)
    mkdir man
    "$out/bin/agent-sandbox" man --dir man
    installManPage man/*.1
  '';

  cargoTestFlags = [ "--lib" ];
  # The git layout tests build real repositories.
  nativeCheckInputs = [ git ];

  meta = {
    description = "Declarative sandbox for AI coding agents: bubblewrap on Linux, sandbox-exec on macOS";
    license = lib.licenses.mit;
    mainProgram = "agent-sandbox";
    platforms = lib.platforms.linux ++ lib.platforms.darwin;
  };
}
