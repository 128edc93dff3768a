# The helper's unit tests (`cargo test --lib`), run in the package's check phase. The
# integration suite needs user namespaces and runs in the VM checks and in scripts/test.
{ agent-sandbox, ... }:
agent-sandbox.overrideAttrs { doCheck = true; }
