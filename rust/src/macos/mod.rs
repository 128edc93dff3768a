//! macOS: the same policy as Linux, expressed as a Seatbelt profile run by
//! `/usr/bin/sandbox-exec`. [`seatbelt`] is the pure planner (plan → profile, `-D` parameters,
//! argv, environment, private directories); it is compiled and tested on every OS so that
//! `--dry-run --target-os macos` works anywhere.
//!
//! # How the command runs
//! `/usr/bin/sandbox-exec -p <profile> -DNAME=path… -- <command…>` with a cleared environment
//! (the plan's, adjusted below) in the launch directory. The command is exec'd directly: there
//! is no PID-1 init on macOS, so the launcher forwards signals to sandbox-exec's process (which
//! becomes the command) and takes its exit status. sandbox-exec itself fails (status 65 with
//! a message on stderr) when the profile does not compile; the launcher must report that as
//! "could not start" (125), never run the command unconfined.
//!
//! # Where macOS differs from Linux
//! Seatbelt filters operations by path; it cannot give the sandbox its own view of the file
//! system, its own network stack or its own process table. So:
//! - **Home**: no tmpfs over `$HOME`. `HOME` is a private per-session directory holding links
//!   (named as under the real `$HOME`) to the declared paths; the profile grants the real
//!   targets. The real home directory can be `stat`ed but not listed, and files not declared
//!   are denied (EPERM) rather than absent (ENOENT). Programs that use the real absolute path
//!   of a declared file still work.
//! - **/tmp**: the shared `/tmp` (`/private/tmp`) is denied; `TMPDIR` is a private directory.
//!   Programs that hard-code `/tmp` fail with EPERM. Unix socket paths are limited to 104
//!   bytes on macOS, and the private `TMPDIR` is long: tools that put sockets there may need a
//!   shorter path.
//! - **System files**: closure mode cannot hide the host's system libraries and frameworks
//!   (`/usr/lib`, `/System/Library`): every process needs them. They are readable, not
//!   executable; the host's `/usr/bin` is not exposed. Host-system mode also exposes the
//!   developer tools `/usr/bin`'s shims run (Command Line Tools, Xcode.app).
//! - **Identity**: no synthetic `/etc/passwd`, hostname or boot id. `getpwuid` (through
//!   opendirectoryd) returns the real user, and the hostname is the real one.
//! - **Processes**: other processes cannot be signalled or inspected (`ps` shows nothing:
//!   the process table sysctls are denied), but there is no PID namespace.
//! - **Files**: path rules cannot pin inodes, so writable roots and the directories above
//!   protected git paths are pinned against rename and unlink instead, and hard links are denied
//!   everywhere (cargo, git and pnpm fall back to copying). Executables in the exposed paths run,
//!   as on Linux.
//! - **Network**: the sandbox shares the host's network stack. Open mode reaches the internet
//!   but no address of this host (`localhost` in Seatbelt means all of them) except the
//!   allowed ports; names resolve through mDNSResponder. Filtered mode reaches only the proxy,
//!   which listens on the host's loopback (no bridge). Nothing inside may listen on an IP port,
//!   and the sandbox cannot reach its own listeners (they would be the host's): local servers in
//!   test suites fail. Unix sockets work only inside the launch directory and the private
//!   HOME/TMPDIR (Linux also reaches sockets inside declared paths).
//! - **Terminal**: the sandbox keeps the controlling terminal (no `setsid`, like Linux);
//!   `TIOCSTI` is denied by the profile rather than by seccomp.
//! - **allowNix**: the daemon's socket is reachable; the daemon builds outside this sandbox,
//!   and on macOS the Nix build sandbox is usually off, so builds run with the build users'
//!   full access to the machine and its network.
//!
//! # Known caveats
//! - **Go programs and the proxy CA.** Go on macOS verifies certificates with the system
//!   verifier (Security.framework through trustd) and, before Go 1.27, ignores
//!   `SSL_CERT_FILE`/`SSL_CERT_DIR`. In open mode that works (trustd is reachable). In filtered
//!   mode trustd is deliberately unreachable (it fetches certificate URLs itself, past the
//!   proxy), and the proxy's CA is in no keychain. Go 1.27 reads `SSL_CERT_FILE` on macOS when
//!   `GODEBUG=x509sslcertoverrideplatform=1` (golang/go#77865); filtered mode sets it, so Go
//!   1.27+ binaries trust the proxy whatever go version their module declares. Binaries built
//!   with older Go (gh, terraform, kubectl of today) fail TLS in filtered mode. Workarounds:
//!   rebuild them with Go ≥ 1.27; run them in open mode; use a tool's own CA option where it
//!   has one; or, outside this tool's scope and with care, trust the proxy CA in the login
//!   keychain (then every program of the user trusts it).
//! - **Other Security.framework / Network.framework clients** (Swift, `URLSession`, some
//!   Homebrew tools) behave like Go.
//! - **`sandbox-exec` is deprecated** by Apple but present and used by Apple, Chromium and the
//!   major agent sandboxes; if it disappears, the launcher must refuse to start.
//! - **TIOCSTI needs `(ioctl-command …)`**: a macOS whose Seatbelt lacks that filter rejects the
//!   profile, and the sandbox refuses to start (fail closed).
//! - Case-insensitive volumes: Seatbelt matches the path as the kernel resolves it, with the
//!   on-disk spelling, so `.GIT/HOOKS` is still `.git/hooks` to a `subpath` rule (regex rules
//!   would not be; none match user paths). The darwin self-test checks this.
//!
//! # What a darwin self-test must run (on a Mac, outside the Nix build sandbox)
//! Build a sandbox, then inside it assert failure of: reading `~/.ssh/id_ed25519` (also as
//! `/System/Volumes/Data/Users/…/.ssh/…` and `~/.SSH/…`); writing outside the launch dir;
//! writing `.git/hooks/pre-commit`, `.git/config`, `.GIT/HOOKS/x`; `mv .git g`, `ln
//! .git/hooks/pre-commit x`; listing `/private/var/folders/*/*/T`, `/tmp`; reading
//! `/Library/Preferences`; `ps -E`/`sysctl kern.procargs2`; a TIOCSTI on the terminal (python
//! `fcntl.ioctl(0, termios.TIOCSTI, b"x")`); `nc 127.0.0.1 <host port>` in open mode; any
//! connection but the proxy port in filtered mode; `open -a Calculator`, `osascript`,
//! `pbpaste`, `launchctl submit`. And success of: writing in the launch dir and the declared rw
//! paths, `git commit` (with an identity declared), `cargo build`/`cc` in host mode, a TUI in
//! raw mode (`stty -a`, `python3 -c 'import tty,sys; tty.setraw(0)'`), `curl https://…` in open
//! mode and through the proxy in filtered mode, a shebang script in the launch dir.

pub mod seatbelt;

pub use seatbelt::{
    SANDBOX_EXEC, SeatbeltError, SeatbeltOptions, SeatbeltPlan, command, plan_seatbelt, prepare,
    render_dry_run, render_with,
};
