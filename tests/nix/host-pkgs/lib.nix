# The part of nixpkgs' `lib` that the stand-in package set offers (same names, same meaning),
# for fixtures evaluated with NIX_PATH=nixpkgs=tests/nix/host-pkgs. Anything else is missing.
let
  b = builtins;
  lib = {
    inherit (b)
      all
      any
      attrNames
      attrValues
      concatLists
      concatMap
      concatStringsSep
      elem
      elemAt
      filter
      foldl'
      genList
      hasAttr
      head
      isAttrs
      isBool
      isFunction
      isInt
      isList
      isPath
      isString
      length
      listToAttrs
      mapAttrs
      match
      removeAttrs
      replaceStrings
      split
      stringLength
      substring
      tail
      toJSON
      trace
      ;

    id = x: x;
    const = x: _: x;
    flatten = x: if b.isList x then b.concatMap lib.flatten x else [ x ];
    last = l: b.elemAt l (b.length l - 1);
    unique = b.foldl' (acc: x: if b.elem x acc then acc else acc ++ [ x ]) [ ];
    optional = cond: x: if cond then [ x ] else [ ];
    optionals = cond: xs: if cond then xs else [ ];
    optionalString = cond: s: if cond then s else "";
    optionalAttrs = cond: as: if cond then as else { };
    concatMapStringsSep =
      sep: f: list:
      b.concatStringsSep sep (b.map f list);
    concatMapStrings = f: list: b.concatStringsSep "" (b.map f list);
    genAttrs =
      names: f:
      b.listToAttrs (
        b.map (name: {
          inherit name;
          value = f name;
        }) names
      );
    nameValuePair = name: value: { inherit name value; };
    mapAttrsToList = f: attrs: b.map (n: f n attrs.${n}) (b.attrNames attrs);
    filterAttrs =
      pred: attrs:
      b.listToAttrs (
        b.concatMap (
          n:
          if pred n attrs.${n} then
            [
              {
                name = n;
                value = attrs.${n};
              }
            ]
          else
            [ ]
        ) (b.attrNames attrs)
      );
    hasPrefix = pre: s: b.substring 0 (b.stringLength pre) s == pre;
    hasSuffix =
      suf: s:
      let
        ls = b.stringLength s;
        lf = b.stringLength suf;
      in
      lf <= ls && b.substring (ls - lf) lf s == suf;
    removePrefix =
      pre: s:
      if lib.hasPrefix pre s then
        b.substring (b.stringLength pre) (b.stringLength s - b.stringLength pre) s
      else
        s;
    removeSuffix =
      suf: s:
      if lib.hasSuffix suf s then b.substring 0 (b.stringLength s - b.stringLength suf) s else s;
    splitString = sep: s: b.filter b.isString (b.split (lib.escapeRegex sep) s);
    escapeRegex = b.replaceStrings (lib.stringToCharacters "\\[{()^$?*+|.") (
      b.map (c: "\\${c}") (lib.stringToCharacters "\\[{()^$?*+|.")
    );
    stringToCharacters = s: b.genList (i: b.substring i 1 s) (b.stringLength s);
    toLower = b.replaceStrings (lib.stringToCharacters "ABCDEFGHIJKLMNOPQRSTUVWXYZ") (
      lib.stringToCharacters "abcdefghijklmnopqrstuvwxyz"
    );
    toUpper = b.replaceStrings (lib.stringToCharacters "abcdefghijklmnopqrstuvwxyz") (
      lib.stringToCharacters "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    );
    escapeShellArg = s: "'" + b.replaceStrings [ "'" ] [ "'\\''" ] (toString s) + "'";
    escapeShellArgs = list: b.concatStringsSep " " (b.map lib.escapeShellArg list);
    getOutput = output: pkg: pkg.${output} or pkg.out or pkg;
    getBin = lib.getOutput "bin";
    getExe = pkg: "${lib.getBin pkg}/bin/${pkg.meta.mainProgram or (pkg.pname or pkg.name)}";
    getExe' = pkg: name: "${lib.getBin pkg}/bin/${name}";
    makeSearchPath =
      sub: pkgs: b.concatStringsSep ":" (b.map (p: "${lib.getBin p}/${sub}") pkgs);
    makeBinPath = lib.makeSearchPath "bin";
    licenses = {
      mit = {
        spdxId = "MIT";
        free = true;
      };
      asl20 = {
        spdxId = "Apache-2.0";
        free = true;
      };
      unfree = {
        free = false;
      };
    };
    platforms = {
      linux = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      darwin = [
        "x86_64-darwin"
        "aarch64-darwin"
      ];
      unix = lib.platforms.linux ++ lib.platforms.darwin;
    };
    maintainers = { };
  };
in
lib
