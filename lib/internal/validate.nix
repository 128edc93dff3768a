/**
  Argument validation for `mkSandbox`, the boundary where user input is checked.

  Pure and builtins-only, so `tests/nix/eval.sh` exercises it without nixpkgs. Every problem
  found is reported in one error, one line each (the v0 migration table adds its own lines);
  every line starts with `mkSandbox:` and says what was given and what is expected.

  # Type

  ```
  validate :: AttrSet -> AttrSet
  ```

  Returns the arguments with the defaults filled in, or throws.

  # Examples

  ```nix
  validate { pkg = pkgs.hello; binName = "hello"; outName = "hello"; allowedPackages = [ ]; }
  => { pkg = «derivation»; binName = "hello"; …; rwDirs = [ ]; allowNix = false; allowedDomains = null; allowedLocalPorts = [ ]; }

  validate { pkg = pkgs.hello; binName = "hello"; outName = "hello"; allowedPackages = [ ]; allowedLocalPorts = [ 0 80 ]; }
  => error: mkSandbox: allowedLocalPorts has 0, which is not a port number 1..65535; expected a list of integers such as [ 5432 ], or null for all ports
  ```
*/
let
  inherit (builtins)
    attrNames
    concatStringsSep
    elem
    filter
    genList
    isAttrs
    isBool
    isFloat
    isFunction
    isInt
    isList
    isPath
    isString
    length
    map
    match
    removeAttrs
    replaceStrings
    stringLength
    substring
    toJSON
    ;

  # v0 names, their replacements and how values carry over, in the migration table's order.
  removed = [
    {
      old = "extraEnv";
      new = "env";
    }
    {
      old = "stateDirs";
      new = "rwDirs";
    }
    {
      old = "stateFiles";
      new = "rwFiles";
    }
    {
      old = "restrictNetwork";
      new = "allowedDomains";
    }
  ];

  migrationTable = concatStringsSep "\n" [
    "    v0                 v1"
    "    extraEnv        -> env             same attribute set; values may use $VAR and $(...)"
    "    stateDirs       -> rwDirs          same list of directories (read-write)"
    "    stateFiles      -> rwFiles         same list of files (read-write)"
    "    restrictNetwork -> allowedDomains  false -> null (open network); true -> a list of domains, [ ] for no network"
  ];

  # v5 arguments not implemented yet: refused by name (never as "unknown"), with what to do.
  notYet = {
    allowUnixSockets = "= false is not supported yet (planned: v5 parity, issue 13): blocking AF_UNIX sockets cannot be enforced, and the sandbox does not start without what you asked for. Remove it (sockets the agent creates inside then work; sockets found in declared paths stay masked unless listed in allowedSockets), or set it to true";
    publishedPorts = "is not supported yet (planned: v5 parity, issue 13): nothing inside the sandbox can be reached from the host. Remove it, or run the server outside the sandbox";
    allowHeadlessBrowsers = "is not supported yet (planned: v5 parity, issue 13). Remove it; a browser inside needs its own sandbox disabled and the proxy's CA trusted, which the helper does not set up yet";
  };
  # The helper reads the same file (rust/src/spec.rs, HTTP_METHODS).
  httpMethods = builtins.fromJSON (builtins.readFile ../../rust/shared/http-methods.json);

  hasPrefix = pre: s: substring 0 (stringLength pre) s == pre;
  removeTrailingDot =
    s: if s != "" && substring (stringLength s - 1) 1 s == "." then substring 0 (stringLength s - 1) s else s;
  chars = s: genList (i: substring i 1 s) (stringLength s);
  toLower = replaceStrings (chars "ABCDEFGHIJKLMNOPQRSTUVWXYZ") (chars "abcdefghijklmnopqrstuvwxyz");
  join = concatStringsSep ", ";

  isDerivation = v: isAttrs v && (v.type or null) == "derivation";

  # What a value is, in words, for "got …".
  describe =
    v:
    if v == null then
      "null"
    else if isBool v then
      (if v then "true" else "false")
    else if isInt v then
      "the integer ${toString v}"
    else if isFloat v then
      "the number ${toString v}"
    else if isString v then
      "the string ${toJSON v}"
    else if isPath v then
      "the path ${toString v}"
    else if isList v then
      "a list"
    else if isFunction v then
      "a function"
    else if isDerivation v then
      "the package ${v.name or "(unnamed)"}"
    else
      "an attribute set";

  # A value as it would be written, for lists of offending entries.
  show =
    v:
    if isString v then
      toJSON v
    else if isInt v then
      toString v
    else
      describe v;

  isPackage =
    p: (isAttrs p && p ? outPath) || isPath p || (isString p && hasPrefix "${builtins.storeDir}/" p);

  # The rule of `normalize_domain` in rust/src/spec.rs: DNS labels (letters, digits, '-', '_'; no
  # leading or trailing '-'), an optional trailing dot, at most 253 characters; or an IP literal.
  # Both sides are tested against rust/shared/domain-cases.json (here by tests/nix/cases.nix).
  label = "[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?";
  isDomain =
    d:
    isString d
    && (
      (match "${label}(\\.${label})*\\.?" d != null && stringLength (removeTrailingDot d) <= 253)
      || match "\\[?[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*]?" d != null
    );
  # The helper reads the same list (rust/src/spec.rs, PUBLIC_SUFFIXES).
  publicSuffixes = builtins.fromJSON (builtins.readFile ../../rust/shared/public-suffixes.json);
  isIpLiteral = d: match "\\[?[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*]?" d != null;
  # The problem with one entry, or null: worded as `domain_problem` in rust/src/spec.rs.
  domainProblem =
    d:
    let
      where = "mkSandbox: allowedDomains entry ${show d}";
      name = toLower (removeTrailingDot d);
    in
    # Any byte outside ASCII (controls included in the class) makes this fail.
    if isString d && match "[[:cntrl:] -~]*" d == null then
      "${where} is an internationalised name; write it in its ASCII (punycode) form, which starts with xn-- (e.g. \"bücher.example\" is \"xn--bcher-kva.example\"; python3 -c 'print(${show d}.encode(\"idna\").decode())' prints yours)"
    else if !isDomain d then
      "${where} is not a domain name (expected e.g. \"api.anthropic.com\"; no scheme, port, path or wildcard)"
    else if isIpLiteral name || name == "localhost" then
      null
    # Fail closed: a rule covers every name under it, so a suffix would open whole registries.
    else if match "[^.]*" name != null then
      "${where} is a single label (a top-level domain): it would allow every name under it; expected a registrable domain such as \"example.com\", or a host name in it"
    else if elem name publicSuffixes then
      "${where} is a public suffix: it would allow every site registered under it; expected a registrable domain such as \"example.${name}\", or a host name in it"
    else
      null;
  domainProblems = d: let p = domainProblem d; in if p == null then [ ] else [ p ];

  # --- one checker per argument: value -> list of problems -------------------------------

  checkPkg = v: if isPackage v then [ ] else [ "mkSandbox: pkg must be a package (e.g. pkgs.claude-code), got ${describe v}" ];

  checkBinName =
    v:
    if isString v && match "[^/]+" v != null then
      [ ]
    else
      [
        "mkSandbox: binName must be the name of a program in pkg's bin/ (a non-empty string without '/', e.g. \"claude\"), got ${describe v}"
      ];

  checkOutName =
    v:
    if isString v && match "[A-Za-z0-9_+][A-Za-z0-9._+-]*" v != null then
      [ ]
    else
      [
        "mkSandbox: outName must be a command name of letters, digits and . _ + - not starting with '.' or '-' (e.g. \"claude\"), got ${describe v}"
      ];

  checkPackages =
    v:
    if !isList v then
      [
        "mkSandbox: allowedPackages must be a list of packages (e.g. sandbox.commonTools ++ [ pkgs.nodejs ]), got ${describe v}"
      ]
    else
      let
        bad = filter (p: !isPackage p) v;
      in
      if bad == [ ] then
        [ ]
      else
        [
          "mkSandbox: allowedPackages has entries that are not packages: ${join (map describe bad)}; expected derivations such as pkgs.git"
        ];

  checkPaths =
    name: v:
    if !isList v then
      [ "mkSandbox: ${name} must be a list of paths as strings (e.g. [ \"$HOME/.claude\" ]), got ${describe v}" ]
    else
      let
        bad = filter (p: !(isString p && p != "")) v;
      in
      if bad == [ ] then
        [ ]
      else
        [
          "mkSandbox: ${name} has entries that are not non-empty strings: ${join (map describe bad)}; write paths as strings, e.g. \"$HOME/.claude\" (a Nix path such as ./x would be copied into the store)"
        ];

  checkEnv =
    v:
    if !isAttrs v || isDerivation v then
      [ "mkSandbox: env must be an attribute set of strings (e.g. { EDITOR = \"vi\"; }), got ${describe v}" ]
    else
      let
        names = attrNames v;
        badNames = filter (n: match "[A-Za-z_][A-Za-z0-9_]*" n == null) names;
        badValues = filter (n: !isString v.${n}) names;
      in
      (
        if badNames == [ ] then
          [ ]
        else
          [
            "mkSandbox: env has invalid variable name(s) ${join (map toJSON badNames)}; expected letters, digits and _, not starting with a digit"
          ]
      )
      ++ (
        if badValues == [ ] then
          [ ]
        else
          [
            "mkSandbox: env values must be strings, got ${join (map (n: "${n} = ${describe v.${n}}") badValues)}"
          ]
      );

  checkAllowNix = v: if isBool v then [ ] else [ "mkSandbox: allowNix must be true or false, got ${describe v}" ];

  checkRule =
    d: rule:
    let
      where = "mkSandbox: allowedDomains.${toJSON d}";
    in
    if rule == "*" then
      [ ]
    else if isList rule && rule == [ ] then
      [
        "${where} is an empty list; expected \"*\" or at least one HTTP method (remove the domain to block it)"
      ]
    else if isList rule then
      map (m: "${where} has unknown method ${show m}; expected one of ${join httpMethods}") (
        filter (m: !(isString m && elem m httpMethods)) rule
      )
    else
      [ "${where} is ${show rule}; expected \"*\" or a list of HTTP methods" ];

  checkDomains =
    v:
    if v == null then
      [ ]
    else if isList v then
      builtins.concatMap domainProblems v
    else if isAttrs v && !isDerivation v then
      builtins.concatLists (map (d: domainProblems d ++ checkRule d v.${d}) (attrNames v))
    else
      [
        "mkSandbox: allowedDomains must be null (open network), a list of domains (e.g. [ \"api.anthropic.com\" ], [ ] for no network) or an attribute set of domain -> \"*\" or a list of HTTP methods, got ${describe v}"
      ];

  checkPorts =
    name: v:
    if v == null then
      [ ]
    else if !isList v then
      [
        "mkSandbox: ${name} must be null (all ports) or a list of port numbers 1..65535 (e.g. [ 5432 ]), got ${describe v}"
      ]
    else
      let
        bad = filter (p: !(isInt p && p >= 1 && p <= 65535)) v;
      in
      if bad == [ ] then
        [ ]
      else
        [
          "mkSandbox: ${name} has ${join (map show bad)}, ${
            if length bad == 1 then "which is not a port number" else "which are not port numbers"
          } 1..65535; expected a list of integers such as [ 5432 ], or null for all ports"
        ];

  checkWorkspace =
    v:
    if v == null || (isString v && v != "") then
      [ ]
    else
      [
        "mkSandbox: workspaceDir must be null (the launch directory) or a directory path as a string (e.g. \"$HOME/src/project\"), got ${describe v}"
      ];

  # Every argument, once: required ones say what to give, optional ones their default. The
  # order is the one error messages list them in.
  arguments = [
    {
      name = "pkg";
      what = "the package to run, e.g. pkg = pkgs.claude-code;";
      check = checkPkg;
    }
    {
      name = "binName";
      what = "the program in pkg's bin/ to run, e.g. binName = \"claude\";";
      check = checkBinName;
    }
    {
      name = "outName";
      what = "the command to create, e.g. outName = \"claude\";";
      check = checkOutName;
    }
    {
      name = "allowedPackages";
      what = "the packages on PATH inside, e.g. allowedPackages = sandbox.commonTools;";
      check = checkPackages;
    }
    {
      name = "rwDirs";
      default = [ ];
      check = checkPaths "rwDirs";
    }
    {
      name = "rwFiles";
      default = [ ];
      check = checkPaths "rwFiles";
    }
    {
      name = "roDirs";
      default = [ ];
      check = checkPaths "roDirs";
    }
    {
      name = "roFiles";
      default = [ ];
      check = checkPaths "roFiles";
    }
    {
      name = "allowedSockets";
      default = [ ];
      check = checkPaths "allowedSockets";
    }
    {
      name = "rwHostConfig";
      default = [ ];
      check = checkPaths "rwHostConfig";
    }
    {
      name = "env";
      default = { };
      check = checkEnv;
    }
    {
      name = "allowNix";
      default = false;
      check = checkAllowNix;
    }
    {
      name = "allowedDomains";
      default = null;
      check = checkDomains;
    }
    {
      name = "allowedLocalPorts";
      default = [ ];
      check = checkPorts "allowedLocalPorts";
    }
    {
      # agent-sandbox.nix v5's name for allowedLocalPorts.
      name = "allowedHostPorts";
      alias = "allowedLocalPorts";
      check = checkPorts "allowedHostPorts";
    }
    {
      name = "upstreamCaFiles";
      default = [ ];
      check = checkPaths "upstreamCaFiles";
    }
    {
      name = "workspaceDir";
      default = null;
      check = checkWorkspace;
    }
  ];

  requiredNames = map (r: r.name) (filter isRequired arguments);
  optionalNames = map (r: r.name) (filter (r: !isRequired r) arguments);
  knownNames = map (r: r.name) arguments;
  isRequired = r: r ? what;
  defaults = builtins.listToAttrs (
    map (r: {
      inherit (r) name;
      value = r.default;
    }) (filter (r: r ? default) arguments)
  );
in
args:
let
  given = attrNames args;

  removedGiven = filter (r: args ? ${r.old}) removed;
  removedProblems =
    if removedGiven == [ ] then
      [ ]
    else
      [
        "mkSandbox: removed v0 argument(s) ${join (map (r: "${r.old} (now ${r.new})") removedGiven)}; rename them as in the migration table:\n${migrationTable}"
      ];

  # allowUnixSockets = true is what the sandbox does today (v5 flakes with allowNix set it):
  # accepted; only the restriction it cannot enforce yet is refused.
  notYetGiven = filter (
    n: args ? ${n} && !(n == "allowUnixSockets" && args.${n} == true)
  ) (attrNames notYet);
  notYetProblems = map (
    n:
    if n == "allowUnixSockets" && !isBool args.${n} then
      "mkSandbox: allowUnixSockets must be true or false, got ${describe args.${n}}"
    else
      "mkSandbox: ${n} (an agent-sandbox.nix v5 argument) ${notYet.${n}}"
  ) notYetGiven;

  unknown = filter (
    n: !(elem n knownNames) && !(elem n (map (r: r.old) removed)) && !(notYet ? ${n})
  ) given;
  suggest =
    n:
    let
      close = filter (k: toLower k == toLower n) knownNames;
    in
    if close == [ ] then n else "${n} (did you mean ${builtins.head close}?)";
  unknownProblems =
    if unknown == [ ] then
      [ ]
    else
      [
        "mkSandbox: unknown argument(s) ${join (map suggest unknown)}; expected ${join requiredNames} (required) and ${join optionalNames}"
      ];

  missingProblems = map (r: "mkSandbox: missing required argument ${r.name}: ${r.what}") (
    filter (r: isRequired r && !(args ? ${r.name})) arguments
  );

  aliasProblems = map (
    r:
    "mkSandbox: ${r.name} and ${r.alias} are the same setting (${r.name} is agent-sandbox.nix v5's name); give only one of them"
  ) (filter (r: r ? alias && args ? ${r.name} && args ? ${r.alias}) arguments);

  valueProblems = builtins.concatLists (
    map (r: if args ? ${r.name} then r.check args.${r.name} else [ ]) arguments
  );

  problems =
    removedProblems ++ notYetProblems ++ unknownProblems ++ missingProblems ++ aliasProblems ++ valueProblems;

  # Aliases are handed on under the name the rest of the library reads.
  canonical = builtins.foldl' (
    acc: r:
    if r ? alias && args ? ${r.name} then
      removeAttrs acc [ r.name ] // { ${r.alias} = args.${r.name}; }
    else
      acc
  ) args arguments;
in
if problems == [ ] then defaults // canonical else throw (concatStringsSep "\n" problems)
