//! Declared paths that are symlinks into the Nix store (home-manager's dotfiles): shown at their
//! own place, read-only, with the store entries their chains need; links that only start in the
//! store, or lead out of it, stay refused. Needs `nix-store --add` (root, or a user of a running
//! Nix daemon); skips loudly otherwise.
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// `nix-store --add PATH`, or `None` (with a SKIPPED line) where this user cannot add to the store.
fn store_add(path: &Path, test: &str) -> Option<PathBuf> {
    let out = Command::new("nix-store").arg("--add").arg(path).output();
    match out {
        Ok(o) if o.status.success() => {
            let p = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim());
            assert!(p.starts_with("/nix/store/"), "{p:?}");
            Some(p)
        }
        Ok(o) => {
            eprintln!(
                "SKIPPED {test}: nix-store --add failed for this user (no Nix daemon?): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            None
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: no nix-store ({e})");
            None
        }
    }
}

/// home-manager's layout, in the real store: `hm_gitconfig` and `nvim-init` entries, and a
/// `home-manager-files` entry whose `.config/…` entries link to them.
struct HomeManager {
    gitconfig: PathBuf,
    nvim_init: PathBuf,
    files: PathBuf,
}

const GITCONFIG: &str = "[user]\n\tname = From Home Manager\n";

fn home_manager(f: &Fixture, test: &str) -> Option<HomeManager> {
    let src = f.root().join("store-src");
    std::fs::create_dir_all(src.join("nvim-init")).unwrap();
    std::fs::write(src.join("hm_gitconfig"), GITCONFIG).unwrap();
    std::fs::write(src.join("nvim-init/init.lua"), "-- init.lua\n").unwrap();
    let gitconfig = store_add(&src.join("hm_gitconfig"), test)?;
    let nvim_init = store_add(&src.join("nvim-init"), test)?;
    let files = src.join("home-manager-files");
    std::fs::create_dir_all(files.join(".config/git")).unwrap();
    std::fs::create_dir_all(files.join(".config/nvim")).unwrap();
    symlink(&gitconfig, files.join(".config/git/config")).unwrap();
    symlink(
        nvim_init.join("init.lua"),
        files.join(".config/nvim/init.lua"),
    )
    .unwrap();
    let files = store_add(&files, test)?;
    Some(HomeManager {
        gitconfig,
        nvim_init,
        files,
    })
}

/// Issue 10 item 5: home-manager's dotfiles were dropped ("is a symlink to /nix/store/…,
/// which is not exposed in the sandbox").
#[test]
fn home_manager_dotfiles_are_shown_read_only() {
    let test = "home_manager_dotfiles_are_shown_read_only";
    let f = Fixture::new();
    let Some(hm) = home_manager(&f, test) else {
        return;
    };
    let config = f.home.join(".config");
    std::fs::create_dir_all(config.join("git")).unwrap();
    std::fs::create_dir_all(config.join("nvim")).unwrap();
    // A declared file: a chain of two links through the store.
    symlink(
        hm.files.join(".config/git/config"),
        config.join("git/config"),
    )
    .unwrap();
    // A declared directory holding such links.
    symlink(
        hm.files.join(".config/nvim/init.lua"),
        config.join("nvim/init.lua"),
    )
    .unwrap();
    // A declared directory that is itself a link into the store.
    symlink(hm.files.join(".config/nvim"), config.join("nvim-whole")).unwrap();
    let script = "cat ~/.config/git/config ~/.config/nvim/init.lua ~/.config/nvim-whole/init.lua; \
                  git config user.name 2>/dev/null; \
                  (echo x >> ~/.config/git/config) 2>/dev/null && echo WROTE-FILE; \
                  (echo x >> ~/.config/nvim-whole/new) 2>/dev/null && echo WROTE-DIR; \
                  ls /nix/store";
    let o = run(f.sh(
        &[
            "--no-network",
            "--ro",
            "~/.config/git/config",
            "--ro",
            "~/.config/nvim",
            "--rw",
            "~/.config/nvim-whole",
        ],
        script,
    ));
    assert_eq!(o.code, 0, "{o:?}");
    let git_line = if Path::new("/usr/bin/git").exists() {
        "From Home Manager\n"
    } else {
        ""
    };
    let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_owned();
    let mut entries = [name(&hm.gitconfig), name(&hm.nvim_init), name(&hm.files)];
    entries.sort();
    assert_eq!(
        o.stdout,
        format!(
            "{GITCONFIG}-- init.lua\n-- init.lua\n{git_line}{}\n",
            entries.join("\n")
        ),
        "only the entries the links need are in the store inside: {o:?}"
    );
    assert!(
        o.stderr.contains(&format!(
            "{} is declared read-write but is a symlink into the Nix store",
            config.join("nvim-whole").display()
        )),
        "{o:?}"
    );
    assert!(!o.stderr.contains("not exposed"), "{o:?}");
    assert!(!o.stderr.contains("will not resolve"), "{o:?}");
}

/// The link inside the launch directory (issue 10 item 7) into the store: it stays a link,
/// and resolves.
#[test]
fn a_link_into_the_store_in_the_launch_dir_resolves() {
    let test = "a_link_into_the_store_in_the_launch_dir_resolves";
    let f = Fixture::new();
    let Some(hm) = home_manager(&f, test) else {
        return;
    };
    symlink(
        hm.files.join(".config/git/config"),
        f.proj.join("gitconfig"),
    )
    .unwrap();
    let o = run(f.sh(
        &["--no-network", "--ro", "gitconfig"],
        "test -L gitconfig && cat gitconfig",
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(o.stdout, GITCONFIG, "{o:?}");
}

/// A secret outside the store that planted links try to reach (the same path for every run,
/// so that the store entries linking to it are made once per user).
fn secret() -> PathBuf {
    let dir = PathBuf::from(format!(
        "/tmp/agent-sandbox-store-escape-{}",
        nix::unistd::getuid()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("secret");
    std::fs::write(&p, "STORE-ESCAPE-SECRET\n").unwrap();
    p
}

#[test]
fn links_that_only_start_in_the_store_stay_refused() {
    let test = "links_that_only_start_in_the_store_stay_refused";
    let f = Fixture::new();
    let secret = secret();
    // A store entry that is itself a link out of the store, and one holding such a link.
    let src = f.root().join("store-src");
    std::fs::create_dir_all(src.join("escape-dir")).unwrap();
    symlink(&secret, src.join("escape-link")).unwrap();
    symlink(&secret, src.join("escape-dir/x")).unwrap();
    let Some(entry_link) = store_add(&src.join("escape-link"), test) else {
        return;
    };
    let Some(dir) = store_add(&src.join("escape-dir"), test) else {
        return;
    };
    let dotdot = PathBuf::from(format!("/nix/store/../..{}", secret.display()));
    let config = f.home.join(".config");
    std::fs::create_dir_all(config.join("tool")).unwrap();
    let cases = [
        ("entry-link", entry_link.clone()),
        ("inner-link", dir.join("x")),
        ("dotdot", dotdot.clone()),
    ];
    for (name, target) in &cases {
        symlink(target, config.join(name)).unwrap();
        symlink(target, config.join("tool").join(name)).unwrap();
    }
    let script = "cat ~/.config/entry-link ~/.config/inner-link ~/.config/dotdot 2>/dev/null; \
                  cat ~/.config/tool/* 2>/dev/null; \
                  ls ~/.config/tool; echo done";
    let o = run(f.sh(
        &[
            "--no-network",
            "--ro",
            "~/.config/entry-link",
            "--ro",
            "~/.config/inner-link",
            "--ro",
            "~/.config/dotdot",
            "--ro",
            "~/.config/tool",
        ],
        script,
    ));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(!o.stdout.contains("STORE-ESCAPE-SECRET"), "leaked: {o:?}");
    assert_eq!(o.stdout, "dotdot\nentry-link\ninner-link\ndone\n", "{o:?}");
    for (name, _) in &cases {
        let declared = config.join(name);
        assert!(
            o.stderr.contains(&format!(
                "{} is a symlink to {}, which is not exposed",
                declared.display(),
                secret.display()
            )),
            "{name} not refused with a warning: {o:?}"
        );
        let nested = config.join("tool").join(name);
        assert!(
            o.stderr.contains(&format!("  {} -> ", nested.display())),
            "{name} not listed as dangling: {o:?}"
        );
    }
}
