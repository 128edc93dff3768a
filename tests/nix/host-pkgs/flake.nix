{
  description = "Stand-in for nixpkgs made of the host's Debian packages (tests only)";

  outputs =
    { self }:
    let
      lib = import ./lib.nix;
    in
    {
      inherit lib;
      legacyPackages = lib.genAttrs [
        "x86_64-linux"
        "aarch64-linux"
        "x86_64-darwin"
        "aarch64-darwin"
      ] (system: import ./. { inherit system; });
    };
}
