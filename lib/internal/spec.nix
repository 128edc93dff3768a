/**
  Spec building for `mkSandbox`: validated arguments → the static spec (written to the store
  with `builtins.toJSON`) and the launch-time part (expanded by the wrapper's shell).

  Pure and builtins-only, so `tests/nix/eval.sh` checks its output exactly without nixpkgs.

  A path or `env` value that contains `$` or a backquote is *dynamic*: it is left out of the
  spec and handed to the wrapper, which expands it once at launch (`"$HOME/.claude"`,
  `"$CLAUDE_CODE_OAUTH_TOKEN"`, `"$(cat /run/secrets/token)"`), so its expansion never enters
  the Nix store. Everything else is *static* and goes into the spec as written (`~/` is
  expanded by the helper).

  The spec's `closure` is only known after the build; `mkSandbox` adds it then.

  # Inputs

  The attribute set returned by `validate`, plus `bash`, `cacert` and `nix` (packages or store
  paths; `nix` is used only with `allowNix`).

  # Type

  ```
  build :: AttrSet -> { spec :: AttrSet; launch :: AttrSet; }
  ```

  # Examples

  ```nix
  build (validate {
    pkg = pkgs.claude-code; binName = "claude"; outName = "claude";
    allowedPackages = [ pkgs.git ];
    rwDirs = [ "$HOME/.claude" "/srv/shared" ];
    env = { EDITOR = "vi"; TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN"; };
  } // { inherit (pkgs) bash cacert; })
  => {
    spec = {
      version = 1; outName = "claude"; program = "/nix/store/…-claude-code/bin/claude";
      path = [ "/nix/store/…-claude-code/bin" "/nix/store/…-git/bin" "/nix/store/…-bash/bin" ];
      rwDirs = [ "/srv/shared" ]; rwFiles = [ ]; roDirs = [ ]; roFiles = [ ]; allowedSockets = [ ]; rwHostConfig = [ ]; upstreamCaFiles = [ ];
      env = { EDITOR = "vi"; SSL_CERT_FILE = "/nix/store/…-cacert/etc/ssl/certs/ca-bundle.crt"; … };
      allowNix = false; allowedDomains = null; allowedLocalPorts = [ ];
    };
    launch = {
      rwDirs = [ "$HOME/.claude" ]; rwFiles = [ ]; roDirs = [ ]; roFiles = [ ]; allowedSockets = [ ]; rwHostConfig = [ ]; upstreamCaFiles = [ ]; workspaceDir = null;
      env = { TOKEN = "$CLAUDE_CODE_OAUTH_TOKEN"; };
      args = [ ];
    };
  }
  ```
*/
let
  inherit (builtins)
    attrNames
    concatLists
    concatStringsSep
    elem
    filter
    foldl'
    isAttrs
    listToAttrs
    map
    mapAttrs
    match
    removeAttrs
    unsafeDiscardStringContext
    ;

  isDynamic = s: match ".*[$`].*" s != null;

  # The output holding bin/ (what nixpkgs' lib.getBin picks).
  binOf = p: if isAttrs p && p ? bin then p.bin else p;

  unique = foldl' (acc: x: if elem x acc then acc else acc ++ [ x ]) [ ];

  # Programs in a closure-mode sandbox find the TLS roots through these (the helper sets them
  # itself only in host-system mode). The helper reads the same file (rust/src/plan.rs).
  caVariables = builtins.fromJSON (builtins.readFile ../../rust/shared/ca-variables.json);
in
{
  inherit isDynamic binOf;

  build =
    a:
    let
      staticOf = filter (s: !isDynamic s);
      dynamicOf = filter isDynamic;
      envDynamicNames = filter (n: isDynamic a.env.${n}) (attrNames a.env);
      caBundle = "${a.cacert}/etc/ssl/certs/ca-bundle.crt";
      # allowNix: `nix` on PATH, and a client that speaks the commands agents use (the host's
      # nix.conf is not visible unless declared, e.g. roFiles = [ "/etc/nix/nix.conf" ]).
      nix = if a.allowNix then [ a.nix ] else [ ];
      nixEnv =
        if a.allowNix then { NIX_CONFIG = "experimental-features = nix-command flakes"; } else { };
      caEnv = listToAttrs (
        map (name: {
          inherit name;
          value = caBundle;
        }) caVariables
      );
      # pkg-config finds the libraries of allowedPackages (a `-sys` crate's build script, pip
      # building a native package): their dev outputs join the closure through this value.
      # Only packages with a dev output: that is where nixpkgs puts .pc files and headers.
      withDev = filter (p: isAttrs p && p ? dev) a.allowedPackages;
      pkgConfigDirs = concatLists (
        map (d: [
          "${d}/lib/pkgconfig"
          "${d}/share/pkgconfig"
        ]) (unique (map (p: p.dev) withDev))
      );
      pkgConfigEnv =
        if pkgConfigDirs == [ ] then { } else { PKG_CONFIG_PATH = concatStringsSep ":" pkgConfigDirs; };
      # What the sandbox can run is allowedPackages (one list to audit): a store path named only
      # in an env value stays out of the closure, so it is invisible inside.
      userEnv = mapAttrs (_: unsafeDiscardStringContext) a.env;
      workspace = if a.workspaceDir != null && !isDynamic a.workspaceDir then { workspaceDir = a.workspaceDir; } else { };
    in
    {
      spec = {
        version = 1;
        inherit (a)
          outName
          allowNix
          allowedDomains
          allowedLocalPorts
          ;
        program = "${binOf a.pkg}/bin/${a.binName}";
        path = unique (map (p: "${binOf p}/bin") ([ a.pkg ] ++ a.allowedPackages ++ [ a.bash ] ++ nix));
        rwDirs = staticOf a.rwDirs;
        rwFiles = staticOf a.rwFiles;
        roDirs = staticOf a.roDirs;
        roFiles = staticOf a.roFiles;
        allowedSockets = staticOf a.allowedSockets;
        rwHostConfig = staticOf a.rwHostConfig;
        upstreamCaFiles = staticOf a.upstreamCaFiles;
        env = removeAttrs (caEnv // nixEnv // pkgConfigEnv // userEnv) envDynamicNames;
      }
      // workspace;
      launch = {
        rwDirs = dynamicOf a.rwDirs;
        rwFiles = dynamicOf a.rwFiles;
        roDirs = dynamicOf a.roDirs;
        roFiles = dynamicOf a.roFiles;
        allowedSockets = dynamicOf a.allowedSockets;
        rwHostConfig = dynamicOf a.rwHostConfig;
        upstreamCaFiles = dynamicOf a.upstreamCaFiles;
        workspaceDir = if a.workspaceDir != null && isDynamic a.workspaceDir then a.workspaceDir else null;
        env = removeAttrs a.env (filter (n: !elem n envDynamicNames) (attrNames a.env));
        # bash as the program reads no rc files: the environment inside is the declared one,
        # not what a declared home path (writable by an earlier session) happens to hold.
        args =
          if a.binName == "bash" then
            [
              "--norc"
              "--noprofile"
            ]
          else
            [ ];
      };
    };
}
