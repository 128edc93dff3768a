/**
  The helper, `agent-sandbox`, built from `rust/` (call with `pkgs.callPackage`).

  `cargo test` here runs the unit tests only: the integration suite needs user namespaces,
  which the Nix build sandbox does not provide (the NixOS VM checks cover that ground).
*/
{
  lib,
  rustPlatform,
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
