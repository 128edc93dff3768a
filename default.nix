# The library without flakes: `import ./. { inherit pkgs; }` gives { mkSandbox; commonTools; }.
{
  pkgs ? import <nixpkgs> { },
}:
import ./lib { inherit pkgs; }
