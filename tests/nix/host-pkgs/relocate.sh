# Sourced by the stand-in's builders (tests/nix/host-pkgs/default.nix), which run host bash with
# the host's PATH and no build sandbox. Copies host programs into $out and makes them
# independent of the host's /lib and /usr: every ELF gets the copied loader as its interpreter
# and $out/lib as its RPATH, with the libraries `ldd` names copied there. The programs then run
# inside a sandbox that sees only store paths.

# copy_bin SRC [NAME]: a host file into $out/bin.
copy_bin() {
  local src=$1 name=${2:-$(basename "$1")}
  mkdir -p "$out/bin"
  cp -L "$src" "$out/bin/$name"
  chmod u+w "$out/bin/$name"
}

# copy_deb_bins DEB: every program the Debian package installs in a bin/ or sbin/ directory.
copy_deb_bins() {
  local f
  dpkg-query -L "$1" | grep -E '^(/usr)?/s?bin/[^/]+$' | while IFS= read -r f; do
    if [ -f "$f" ] && [ -x "$f" ]; then copy_bin "$f"; fi
  done
}

is_elf() { [ "$(head -c 4 "$1" | tail -c 3)" = ELF ]; }

# Scripts: #!/bin/sh and #!/bin/bash point at the stand-in's bash ($shell), as patchShebangs does.
patch_shebang() {
  local f=$1 first new
  [ -n "${shell:-}" ] || return 0
  IFS= read -r first <"$f" || return 0
  case "$first" in
  "#!/bin/sh"* | "#!/usr/bin/sh"*) new="#!$shell/bin/sh${first#\#!*/sh}" ;;
  "#!/bin/bash"* | "#!/usr/bin/bash"*) new="#!$shell/bin/bash${first#\#!*/bash}" ;;
  *) return 0 ;;
  esac
  { printf '%s\n' "$new"; tail -n +2 "$f"; } >"$f.tmp"
  cat "$f.tmp" >"$f"
  rm "$f.tmp"
}

copy_lib() {
  [ -e "$out/lib/$2" ] || cp -L "$1" "$out/lib/$2"
  chmod u+w "$out/lib/$2"
}

# relocate_all: make every ELF file under $out self-contained; patch the scripts in $out/bin.
relocate_all() {
  local f a b c interp elves=()
  mkdir -p "$out/lib"
  while IFS= read -r f; do
    # Files directly in $out/lib are the copied libraries, handled below.
    if [ "$(dirname "$f")" != "$out/lib" ] && is_elf "$f"; then elves+=("$f"); fi
  done < <(find "$out" -type f)
  # Libraries first, while the files still resolve against the host.
  for f in "${elves[@]}"; do
    while read -r a b c _; do
      if [ "$b" = "=>" ] && [ -f "$c" ]; then copy_lib "$c" "$a"; fi
      case "$a" in /*/ld-linux* | /*/ld64*) copy_lib "$a" "$(basename "$a")" ;; esac
    done < <(ldd "$f" 2>/dev/null || true)
  done
  for f in "${elves[@]}"; do
    if interp=$(patchelf --print-interpreter "$f" 2>/dev/null); then
      patchelf --set-interpreter "$out/lib/$(basename "$interp")" --set-rpath "$out/lib" "$f"
    elif [ -n "$(patchelf --print-needed "$f" 2>/dev/null)" ]; then
      patchelf --set-rpath "$out/lib" "$f"
    fi
  done
  for f in "$out"/lib/*; do
    case "$(basename "$f")" in ld-linux* | ld64* | libc.so*) continue ;; esac
    if [ -f "$f" ] && is_elf "$f" && [ -n "$(patchelf --print-needed "$f" 2>/dev/null)" ]; then
      patchelf --set-rpath "$out/lib" "$f"
    fi
  done
  if [ -d "$out/bin" ]; then
    for f in "$out"/bin/*; do
      if [ -f "$f" ] && ! is_elf "$f"; then patch_shebang "$f"; fi
    done
  fi
  rmdir "$out/lib" 2>/dev/null || true
}
