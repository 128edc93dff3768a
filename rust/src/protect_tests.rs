use super::*;

/// A fake filesystem: `d:PATH` directories, `f:PATH` files, `l:PATH=TARGET` symlinks.
fn fs(entries: &[&str]) -> impl Fn(&Path) -> Node {
    let mut map: BTreeMap<PathBuf, Node> = BTreeMap::new();
    map.insert("/".into(), Node::Dir);
    for e in entries {
        let (kind, rest) = e.split_once(':').unwrap();
        let (path, node) = match kind {
            "d" => (rest, Node::Dir),
            "f" => (rest, Node::File),
            "l" => {
                let (p, t) = rest.split_once('=').unwrap();
                (p, Node::Link(t.into()))
            }
            _ => unreachable!(),
        };
        // Parents of listed paths exist as directories.
        for a in Path::new(path).ancestors().skip(1) {
            map.entry(a.into()).or_insert(Node::Dir);
        }
        map.insert(path.into(), node);
    }
    move |p: &Path| map.get(p).cloned().unwrap_or(Node::Missing)
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

fn request(rw: &[&str], ro: &[&str], config_roots: &[&str]) -> Request {
    Request {
        binds: Binds {
            rw: paths(rw),
            ro: paths(ro),
        },
        home: "/h".into(),
        config_roots: paths(config_roots),
        ..Default::default()
    }
}

#[test]
fn pins_are_the_dirs_between_the_deepest_root_and_the_path() {
    let roots = paths(&["/w", "/w/a"]);
    let r = roots.iter().map(PathBuf::as_path);
    assert_eq!(
        pins(r.clone(), Path::new("/w/a/b/c/x")),
        paths(&["/w/a/b/c", "/w/a/b"])
    );
    assert_eq!(pins(r.clone(), Path::new("/w/t")), Vec::<PathBuf>::new());
    assert_eq!(pins(r.clone(), Path::new("/w")), Vec::<PathBuf>::new());
    assert_eq!(pins(r, Path::new("/elsewhere/x/y")), Vec::<PathBuf>::new());
}

/// Issue 9 item 7: `--ro .vscode/tasks.json` two levels inside the launch directory, and a
/// declared ro path two levels inside a declared rw one.
#[test]
fn declared_read_only_paths_are_pinned() {
    let mut req = request(
        &["/w", "/h/.claude"],
        &["/w/.vscode/tasks.json", "/h/.claude/sub/x"],
        &[],
    );
    req.pin_only = paths(&[
        "/w/.vscode/tasks.json",
        "/h/.claude/sub/x",
        "/w/top",
        "/h/.ro/y",
    ]);
    let got = plan(&req, &fs(&[])).unwrap();
    assert_eq!(
        got,
        Protected {
            settled: Settled {
                ro: vec![],
                placeholders: vec![],
                pins: paths(&["/h/.claude/sub", "/w/.vscode"]),
            },
            made: vec![],
            kept: vec![],
        }
    );
    // Inside a read-only region nothing needs pinning: `--ro ~/a --rw ~/a/b --ro ~/a/b/c/d`
    // pins only below the rw root.
    let mut req = request(&["/h/a/b"], &["/h/a", "/h/a/b/c/d", "/h/a/x/y"], &[]);
    req.pin_only = paths(&["/h/a/b/c/d", "/h/a/x/y"]);
    assert_eq!(
        plan(&req, &fs(&[])).unwrap().settled.pins,
        paths(&["/h/a/b/c"])
    );
}

/// Issue 9 item 10: `--rw ~/.config`.
#[test]
fn a_read_write_config_dir_keeps_host_programs_paths_read_only() {
    let req = request(&["/w", "/h/.config"], &[], &["/w", "/h/.config"]);
    let files = fs(&[
        "f:/h/.config/git/config",
        "d:/h/.config/systemd/user",
        "d:/h/.config/other",
        "f:/h/.bashrc",
    ]);
    let got = plan(&req, &files).unwrap();
    assert_eq!(
        got.settled,
        Settled {
            ro: paths(&["/h/.config/git", "/h/.config/systemd"]),
            placeholders: vec![
                ("/h/.config/autostart".into(), PlaceholderKind::Dir),
                ("/h/.config/environment.d".into(), PlaceholderKind::Dir),
                ("/h/.config/fish".into(), PlaceholderKind::Dir),
            ],
            pins: vec![],
        }
    );
    assert_eq!(
        warning(&got.kept).unwrap(),
        "kept read-only inside the sandbox, because programs on your host run or obey them: \
         /h/.config/git (git's global config, attributes and ignore rules), \
         /h/.config/fish (fish runs config.fish, conf.d and functions from it; created empty to hold its place), \
         /h/.config/systemd (systemd runs the user units in it), \
         /h/.config/autostart (the desktop session starts the entries in it; created empty to hold its place), \
         /h/.config/environment.d (systemd sets the session's environment from it; created empty to hold its place). \
         Fix: to let the agent write one anyway, pass --rw-host-config PATH (spec: rwHostConfig)"
    );
    // `--rw-host-config ~/.config/git` (also declared rw) leaves it writable.
    let mut req = req;
    req.exempt = paths(&["/h/.config/git"]);
    let got = plan(&req, &files).unwrap();
    assert_eq!(got.settled.ro, paths(&["/h/.config/systemd"]));
}

#[test]
fn deeper_paths_get_pins_and_the_first_missing_dir_is_held() {
    // `--rw ~/.local`: ~/.local/share/systemd is two levels down; ~/.local/bin is missing.
    let req = request(&["/h/.local"], &[], &["/h/.local"]);
    let got = plan(&req, &fs(&["d:/h/.local/share/systemd/user"])).unwrap();
    assert_eq!(
        got.settled,
        Settled {
            ro: paths(&["/h/.local/share/systemd"]),
            placeholders: vec![("/h/.local/bin".into(), PlaceholderKind::Dir)],
            pins: paths(&["/h/.local/share"]),
        }
    );
    // ~/.local/share missing: created as a plain directory, and pinned.
    let got = plan(&req, &fs(&["d:/h/.local"])).unwrap();
    assert_eq!(
        got.settled.placeholders,
        vec![
            ("/h/.local/bin".into(), PlaceholderKind::Dir),
            ("/h/.local/share/systemd".into(), PlaceholderKind::Dir),
        ]
    );
    assert_eq!(got.made, paths(&["/h/.local/share"]));
    assert_eq!(got.settled.pins, Vec::<PathBuf>::new());
}

#[test]
fn a_declared_file_or_a_root_inside_a_protected_dir_becomes_read_only() {
    // `--rw ~/.bashrc`
    let req = request(&["/w", "/h/.bashrc"], &[], &["/w", "/h/.bashrc"]);
    let got = plan(&req, &fs(&["f:/h/.bashrc", "f:/h/.profile"])).unwrap();
    assert_eq!(got.settled.ro, paths(&["/h/.bashrc"]));
    assert_eq!(got.settled.pins, Vec::<PathBuf>::new());
    assert_eq!(
        warning(&got.kept).unwrap(),
        "kept read-only inside the sandbox, because programs on your host run or obey it: /h/.bashrc (bash runs it in every interactive shell). Fix: to let the agent write one anyway, pass --rw-host-config PATH (spec: rwHostConfig)"
    );
    // `--rw ~/.config/systemd/user`: the declared dir lies in a protected one.
    let req = request(
        &["/h/.config/systemd/user"],
        &[],
        &["/h/.config/systemd/user"],
    );
    let got = plan(&req, &fs(&["d:/h/.config/systemd/user"])).unwrap();
    assert_eq!(got.settled.ro, paths(&["/h/.config/systemd/user"]));
    // Declared read-only already: nothing to add.
    let req = request(&["/h/.config"], &["/h/.config/git"], &["/h/.config"]);
    let got = plan(&req, &fs(&["d:/h/.config/git", "d:/h/.config/systemd"])).unwrap();
    assert_eq!(got.settled.ro, paths(&["/h/.config/systemd"]));
}

#[test]
fn home_as_launch_dir_and_bash_login_files() {
    // Launched from $HOME with ~/.bash_profile present: .bash_login is never read, so an
    // empty one is harmless; .profile exists.
    let req = request(&["/h"], &[], &["/h"]);
    let files = fs(&[
        "f:/h/.bash_profile",
        "f:/h/.profile",
        "d:/h/.config",
        "d:/h/.local",
    ]);
    let got = plan(&req, &files).unwrap();
    assert!(got.settled.ro.contains(&"/h/.bash_profile".into()));
    assert!(
        got.settled
            .placeholders
            .contains(&("/h/.bash_login".into(), PlaceholderKind::File))
    );
    assert!(
        got.settled
            .placeholders
            .contains(&("/h/.gitconfig".into(), PlaceholderKind::File))
    );
    // Without it, an empty ~/.bash_profile would stop bash running ~/.profile: refused.
    let e = plan(&req, &fs(&["f:/h/.profile"])).unwrap_err();
    assert!(
        e.starts_with("/h/.bash_profile does not exist, and the sandbox could keep the agent from creating it only by creating it empty, but bash would then run the empty file at login instead of /h/.profile (it runs the first of ~/.bash_profile, ~/.bash_login, ~/.profile that exists). Fix: create it yourself, e.g. `printf '. /h/.profile\\n' > /h/.bash_profile`"),
        "{e}"
    );
    assert!(e.contains("/h/.bash_login does not exist"), "{e}");
    // None of them: an empty one changes nothing.
    let got = plan(&req, &fs(&["d:/h"])).unwrap();
    for f in BASH_LOGIN {
        let p = Path::new("/h").join(f);
        assert!(
            got.settled
                .placeholders
                .contains(&(p, PlaceholderKind::File))
        );
    }
}

#[test]
fn path_dirs_in_declared_roots_only() {
    let mut req = request(&["/w", "/h/.cargo"], &[], &["/w", "/h/.cargo"]);
    req.path_roots = paths(&["/h/.cargo"]);
    req.path_dirs = paths(&[
        "/usr/bin",
        "/h/.cargo/bin",
        "/w/.venv/bin",
        "/h/.cargo/new/bin",
    ]);
    let got = plan(&req, &fs(&["d:/h/.cargo/bin", "d:/w/.venv/bin"])).unwrap();
    assert_eq!(got.settled.ro, paths(&["/h/.cargo/bin"]));
    assert_eq!(
        got.settled.placeholders,
        vec![("/h/.cargo/new/bin".into(), PlaceholderKind::Dir)]
    );
    assert_eq!(got.made, paths(&["/h/.cargo/new"]));
    assert_eq!(got.kept[0].why, ON_PATH);
}

#[test]
fn a_symlink_in_a_writable_dir_on_the_way_is_refused() {
    let req = request(&["/h/.config"], &[], &["/h/.config"]);
    let e = plan(&req, &fs(&["l:/h/.config/git=/dots/git", "d:/dots/git"])).unwrap_err();
    assert_eq!(
        e,
        "/h/.config/git is a symlink in a directory the sandbox can write, on the way to /h/.config/git (git's global config, attributes and ignore rules): the agent could replace the link with a directory of its own. Fix: replace the link with what it points to, or declare narrower read-write paths"
    );
    // A link the agent cannot touch is followed: ~/.config -> dots/config, declared by its
    // target.
    let req = request(&["/h/dots/config"], &[], &["/h/dots/config"]);
    let got = plan(
        &req,
        &fs(&[
            "l:/h/.config=dots/config",
            "d:/h/dots/config/git",
            "d:/h/dots/config/fish",
        ]),
    )
    .unwrap();
    assert_eq!(
        got.settled.ro,
        paths(&["/h/dots/config/fish", "/h/dots/config/git"])
    );
}
