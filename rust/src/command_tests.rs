use std::collections::BTreeMap;

use super::*;

/// A fake filesystem: `d:PATH` directories, `x:PATH` executables, `x:PATH=SHEBANG` scripts,
/// `f:PATH` plain files, `l:PATH=TARGET` symlinks. Parents exist as directories.
fn fs(entries: &[&str]) -> impl Fn(&Path) -> Node + use<> {
    let mut map: BTreeMap<PathBuf, Node> = BTreeMap::new();
    map.insert("/".into(), Node::Dir);
    for e in entries {
        let (kind, rest) = e.split_once(':').unwrap();
        let (path, extra) = match rest.split_once('=') {
            Some((p, x)) => (p, Some(x)),
            None => (rest, None),
        };
        let node = match kind {
            "d" => Node::Dir,
            "f" => Node::File {
                exec: false,
                shebang: None,
            },
            "x" => Node::File {
                exec: true,
                shebang: extra.map(String::from),
            },
            "l" => Node::Link(extra.unwrap().into()),
            _ => unreachable!(),
        };
        for a in Path::new(path).ancestors().skip(1) {
            map.entry(a.into()).or_insert(Node::Dir);
        }
        map.insert(path.into(), node);
    }
    move |p: &Path| map.get(p).cloned().unwrap_or(Node::Missing)
}

/// The host-system sandbox: `/usr`, `/bin`, `/etc` shown, `$HOME` (`/h`) empty, plus `extra`.
fn shown_with(extra: &'static [&'static str]) -> impl Fn(&Path) -> bool + use<> {
    move |p: &Path| {
        ["/usr", "/bin", "/etc"]
            .iter()
            .chain(extra)
            .any(|s| p.starts_with(s))
    }
}

const INSIDE: &str = "/usr/bin:/bin";

fn resolve_in(
    caller: &str,
    writable: &[&str],
    shown_extra: &'static [&'static str],
    name: &str,
    node: &dyn Fn(&Path) -> Node,
) -> Outcome {
    let shown = shown_with(shown_extra);
    let writable: Vec<PathBuf> = writable.iter().map(PathBuf::from).collect();
    let ctx = Context {
        caller_path: OsStr::new(caller),
        inside_path: INSIDE,
        home: Path::new("/h"),
        shown: &shown,
        writable: &writable,
    };
    resolve(&ctx, name, node)
}

fn exposed(o: Outcome) -> Exposure {
    match o {
        Outcome::Exposed(x) => x,
        other => panic!("not exposed: {other:?}"),
    }
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

#[test]
fn a_link_into_a_version_directory_exposes_the_link_and_that_directory() {
    let node = fs(&[
        "l:/h/.local/bin/claude=/h/.local/share/claude/versions/1.2.3/claude",
        "x:/h/.local/share/claude/versions/1.2.3/claude=/bin/sh",
        "f:/h/.local/share/claude/versions/1.2.3/data",
        "x:/usr/bin/sh",
    ]);
    let x = exposed(resolve_in(
        "/h/.local/bin:/usr/bin",
        &["/h/proj"],
        &[],
        "claude",
        &node,
    ));
    assert_eq!(x.ro, paths(&["/h/.local/share/claude/versions/1.2.3"]));
    assert_eq!(
        x.links,
        vec![(
            PathBuf::from("/h/.local/bin/claude"),
            PathBuf::from("/h/.local/share/claude/versions/1.2.3/claude")
        )]
    );
    assert_eq!(x.path_dirs, paths(&["/h/.local/bin"]));
    assert_eq!(
        x.note,
        "claude is not on the sandbox's PATH but was found on yours at ~/.local/bin/claude -> ~/.local/share/claude/versions/1.2.3/claude; exposed read-only (the same as --ro ~/.local/bin/claude --ro ~/.local/share/claude/versions/1.2.3 --env PATH=/h/.local/bin:/usr/bin:/bin)"
    );
}

/// A chain of links exposes the file alone: a later link (in a directory an earlier session
/// may have written) must not choose a directory to expose, e.g. one holding a user's config.
#[test]
fn a_chain_of_links_exposes_the_file_alone() {
    let node = fs(&[
        "l:/h/.local/bin/claude=/h/.local/share/claude/current",
        "l:/h/.local/share/claude/current=/h/.config/app/hook.sh",
        "x:/h/.config/app/hook.sh=/bin/sh",
        "f:/h/.config/app/token",
        "x:/usr/bin/sh",
    ]);
    let x = exposed(resolve_in("/h/.local/bin", &[], &[], "claude", &node));
    assert_eq!(x.ro, paths(&["/h/.config/app/hook.sh"]));
    assert_eq!(x.links.len(), 2);
}

#[test]
fn a_link_to_a_versioned_file_exposes_the_versions_directory() {
    // The native installer: the version is the file itself.
    let node = fs(&[
        "l:/h/.local/bin/claude=../share/claude/versions/1.2.3",
        "x:/h/.local/share/claude/versions/1.2.3",
    ]);
    let x = exposed(resolve_in("/h/.local/bin", &[], &[], "claude", &node));
    assert_eq!(x.ro, paths(&["/h/.local/share/claude/versions"]));
    assert_eq!(x.links.len(), 1);
}

#[test]
fn nvm_exposes_the_package_the_node_next_to_it_and_puts_its_bin_first() {
    let v = "/h/.nvm/versions/node/v20.1.0";
    let node = fs(&[
        &format!("l:{v}/bin/claude=../lib/node_modules/@anthropic-ai/claude-code/cli.js"),
        &format!("x:{v}/lib/node_modules/@anthropic-ai/claude-code/cli.js=/usr/bin/env node"),
        &format!("f:{v}/lib/node_modules/@anthropic-ai/claude-code/node_modules/dep/index.js"),
        &format!("x:{v}/bin/node"),
        &format!("l:{v}/bin/npm=../lib/node_modules/npm/bin/npm-cli.js"),
        "x:/usr/bin/env",
    ]);
    let x = exposed(resolve_in(
        &format!("/usr/local/bin:{v}/bin:/usr/bin"),
        &[],
        &[],
        "claude",
        &node,
    ));
    assert_eq!(
        x.ro,
        paths(&[
            &format!("{v}/bin/node"),
            &format!("{v}/lib/node_modules/@anthropic-ai/claude-code"),
        ])
    );
    assert_eq!(x.links.len(), 1);
    assert_eq!(x.path_dirs, paths(&[&format!("{v}/bin")]));
    assert!(
        x.note
            .contains(", its interpreter node at ~/.nvm/versions/node/v20.1.0/bin/node;"),
        "{}",
        x.note
    );
}

#[test]
fn an_interpreter_the_sandbox_has_is_not_exposed() {
    let node = fs(&[
        "l:/h/.npm-global/bin/claude=../lib/node_modules/@anthropic-ai/claude-code/cli.js",
        "x:/h/.npm-global/lib/node_modules/@anthropic-ai/claude-code/cli.js=/usr/bin/env node",
        "x:/usr/bin/node",
        "x:/usr/bin/env",
    ]);
    let x = exposed(resolve_in(
        "/usr/bin:/h/.npm-global/bin",
        &[],
        &[],
        "claude",
        &node,
    ));
    assert_eq!(
        x.ro,
        paths(&["/h/.npm-global/lib/node_modules/@anthropic-ai/claude-code"])
    );
    assert_eq!(x.path_dirs, paths(&["/h/.npm-global/bin"]));
}

#[test]
fn a_plain_file_or_a_link_within_its_directory_is_exposed_alone() {
    let node = fs(&[
        "x:/h/.cargo/bin/rg",
        "x:/h/.cargo/bin/other",
        "l:/h/.cargo/bin/ripgrep=rg",
    ]);
    let x = exposed(resolve_in("/h/.cargo/bin", &[], &[], "rg", &node));
    assert_eq!(x.ro, paths(&["/h/.cargo/bin/rg"]));
    assert!(x.links.is_empty());
    let x = exposed(resolve_in("/h/.cargo/bin", &[], &[], "ripgrep", &node));
    assert_eq!(x.ro, paths(&["/h/.cargo/bin/rg"]));
    assert_eq!(x.links.len(), 1);
}

#[test]
fn a_directory_that_is_home_or_straight_in_it_is_not_exposed_whole() {
    let node = fs(&[
        "l:/h/bin/a=/h/a.sh",
        "x:/h/a.sh",
        "l:/h/bin/b=/h/scripts/b.sh",
        "x:/h/scripts/b.sh",
        "l:/h/bin/c=/c",
        "x:/c",
    ]);
    for (name, want) in [("a", "/h/a.sh"), ("b", "/h/scripts/b.sh"), ("c", "/c")] {
        let x = exposed(resolve_in("/h/bin", &[], &[], name, &node));
        assert_eq!(x.ro, paths(&[want]), "{name}");
    }
}

#[test]
fn shared_temporary_runtime_and_top_level_directories_are_not_exposed_whole() {
    // Their sockets (tmux, X11, ssh-agent, the session bus) stay connectable through a
    // read-only bind: a link to a program lying there exposes the program alone.
    let cases = [
        ("/tmp/tool", "/tmp/tool"),
        ("/tmp/tmux-1000/tool", "/tmp/tmux-1000/tool"),
        ("/var/tmp/tool", "/var/tmp/tool"),
        ("/run/user/1000/tool", "/run/user/1000/tool"),
        ("/run/user/1000/app/bin/tool", "/run/user/1000/app/bin/tool"),
        ("/dev/shm/tool", "/dev/shm/tool"),
        ("/opt/tool", "/opt/tool"),
        ("/home/other/tool", "/home/other/tool"),
        // Deeper in a temporary directory, or an installation in /opt: the directory.
        ("/tmp/build/out/tool", "/tmp/build/out"),
        ("/opt/app/tool", "/opt/app"),
    ];
    for (target, want) in cases {
        let node = fs(&[
            &format!("l:/h/.local/bin/tool={target}"),
            &format!("x:{target}"),
        ]);
        let x = exposed(resolve_in("/h/.local/bin", &[], &[], "tool", &node));
        assert_eq!(x.ro, paths(&[want]), "{target}");
    }
}

#[test]
fn links_in_directories_on_the_way_are_recreated_and_dotdot_follows_the_real_path() {
    // ~/bin -> dotfiles/bin; the tool's link climbs out of the real directory.
    let node = fs(&[
        "l:/h/bin=dotfiles/bin",
        "l:/h/dotfiles/bin/t=../../opt/tool/1.0/t",
        "x:/h/opt/tool/1.0/t",
    ]);
    let x = exposed(resolve_in("/h/bin", &[], &[], "t", &node));
    // Two links on the way: the file alone (see a_chain_of_links_exposes_the_file_alone).
    assert_eq!(x.ro, paths(&["/h/opt/tool/1.0/t"]));
    assert_eq!(
        x.links,
        vec![
            (PathBuf::from("/h/bin"), PathBuf::from("dotfiles/bin")),
            (
                PathBuf::from("/h/dotfiles/bin/t"),
                PathBuf::from("../../opt/tool/1.0/t")
            ),
        ]
    );
    assert_eq!(x.path_dirs, paths(&["/h/bin"]));
}

#[test]
fn found_inside_first_means_nothing_to_do() {
    let node = fs(&["x:/usr/bin/claude", "x:/h/.local/bin/claude"]);
    assert_eq!(
        resolve_in("/h/.local/bin:/usr/bin", &[], &[], "claude", &node),
        Outcome::Inside
    );
}

#[test]
fn not_found_anywhere_or_only_relative_or_not_executable() {
    let node = fs(&["f:/h/.local/bin/claude", "x:/h/proj/claude"]);
    for caller in ["/h/.local/bin:/usr/bin", "", ".:bin"] {
        assert_eq!(
            resolve_in(caller, &[], &[], "claude", &node),
            Outcome::Nowhere,
            "{caller:?}"
        );
    }
}

#[test]
fn a_link_loop_resolves_to_nothing() {
    let node = fs(&["l:/h/bin/a=b", "l:/h/bin/b=a"]);
    assert_eq!(resolve_in("/h/bin", &[], &[], "a", &node), Outcome::Nowhere);
}

#[test]
fn a_link_into_a_sensitive_directory_is_refused_with_the_flags() {
    let node = fs(&["l:/h/.local/bin/tool=/h/.ssh/tool", "x:/h/.ssh/tool"]);
    match resolve_in("/h/.local/bin", &[], &[], "tool", &node) {
        Outcome::Refused(w) => assert_eq!(
            w,
            "tool is not on the sandbox's PATH but was found on yours at ~/.local/bin/tool -> ~/.ssh/tool; not exposed automatically: ~/.ssh/tool is or holds a sensitive directory. If you mean it: --ro ~/.local/bin/tool --ro ~/.ssh/tool --env PATH=/h/.local/bin:/usr/bin:/bin"
        ),
        other => panic!("{other:?}"),
    }
    // Nor does widening to the directory reach a sensitive one: ~/.config/gcloud's parent.
    let node = fs(&[
        "l:/h/bin/g=/h/.config/gcloud/bin/g",
        "x:/h/.config/gcloud/bin/g",
    ]);
    assert!(matches!(
        resolve_in("/h/bin", &[], &[], "g", &node),
        Outcome::Refused(_)
    ));
}

#[test]
fn what_the_sandbox_can_write_is_refused() {
    let node = fs(&["x:/h/proj/node_modules/.bin/claude"]);
    match resolve_in(
        "/h/proj/node_modules/.bin",
        &["/h/proj"],
        &["/h/proj"],
        "claude",
        &node,
    ) {
        Outcome::Refused(w) => assert!(
            w.ends_with("not exposed automatically: ~/proj/node_modules/.bin/claude lies in ~/proj, which the sandbox can write. Fix: run it by its path (`-- /h/proj/node_modules/.bin/claude`)"),
            "{w}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn what_the_sandbox_shows_already_is_not_bound_again() {
    // ~/.local declared read-only: only PATH is missing.
    let node = fs(&[
        "l:/h/.local/bin/claude=../share/claude/1.0/claude",
        "x:/h/.local/share/claude/1.0/claude",
    ]);
    let x = exposed(resolve_in(
        "/h/.local/bin",
        &[],
        &["/h/.local"],
        "claude",
        &node,
    ));
    assert!(x.ro.is_empty() && x.links.is_empty(), "{x:?}");
    assert_eq!(x.path_dirs, paths(&["/h/.local/bin"]));
}

#[test]
fn shebang_interpreters() {
    assert_eq!(interpreter("/usr/bin/env node"), Some(Err("node".into())));
    assert_eq!(
        interpreter(" /usr/bin/env -S FOO=1 node --x"),
        Some(Err("node".into()))
    );
    assert_eq!(
        interpreter("/h/venv/bin/python -u"),
        Some(Ok("/h/venv/bin/python".into()))
    );
    assert_eq!(interpreter("python"), None);
    assert_eq!(interpreter(""), None);
}
