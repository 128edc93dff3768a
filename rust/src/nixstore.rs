//! `allowNix`: let the agent use Nix through the host's daemon.
//!
//! The whole store is exposed read-only and the daemon socket is reachable; the daemon does the
//! building. A user the daemon trusts can make it run arbitrary code as root (e.g. by setting
//! `sandbox = false` or a `build-hook`), so granting that to an agent needs an explicit yes.

use std::path::Path;

/// Where the daemon listens unless `NIX_DAEMON_SOCKET_PATH` says otherwise.
pub const DEFAULT_SOCKET: &str = "/nix/var/nix/daemon-socket/socket";

/// Where the daemon listens: `NIX_DAEMON_SOCKET_PATH`, else [`DEFAULT_SOCKET`].
pub fn socket_path() -> String {
    std::env::var("NIX_DAEMON_SOCKET_PATH").unwrap_or_else(|_| DEFAULT_SOCKET.into())
}

/// Whether the caller is a trusted user of the daemon, as the daemon's configuration says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    pub user: String,
    /// The effective `trusted-users` list.
    pub list: Vec<String>,
    pub trusted: bool,
}

/// [`Trust`] for the calling process: its user name, its groups (the primary one included),
/// and this machine's nix.conf. The one place the rule is applied (allowNix's question and
/// `agent-sandbox doctor`).
pub fn caller_trust() -> Trust {
    let uid = nix::unistd::getuid();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string());
    let groups: Vec<String> = nix::unistd::getgroups()
        .unwrap_or_default()
        .into_iter()
        .chain([nix::unistd::getgid()])
        .filter_map(|g| nix::unistd::Group::from_gid(g).ok().flatten())
        .map(|g| g.name)
        .collect();
    let list = trusted_users(&read_config());
    let trusted = is_trusted(&list, &user, &groups);
    Trust {
        user,
        list,
        trusted,
    }
}

/// The daemon's configuration files, in the order Nix reads them.
pub fn config_files() -> Vec<std::path::PathBuf> {
    let dir = std::env::var_os("NIX_CONF_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/etc/nix".into());
    vec![dir.join("nix.conf")]
}

/// The effective `trusted-users` list from nix.conf text (later settings override earlier
/// ones, `extra-trusted-users` appends; `include`/`!include` are followed by the caller).
/// Nix's default is `root`.
pub fn trusted_users(conf: &str) -> Vec<String> {
    let mut users = vec!["root".to_string()];
    for line in conf.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let values = value.split_whitespace().map(str::to_string);
        match key.trim() {
            "trusted-users" => users = values.collect(),
            "extra-trusted-users" => users.extend(values),
            _ => {}
        }
    }
    users
}

/// Whether `user` (with its groups) matches a `trusted-users` list: a name, `@group` or `*`.
pub fn is_trusted(list: &[String], user: &str, groups: &[String]) -> bool {
    list.iter().any(|entry| {
        entry == "*"
            || entry == user
            || entry
                .strip_prefix('@')
                .is_some_and(|g| groups.iter().any(|mine| mine == g))
    })
}

/// Read the daemon's configuration as this machine has it (missing files count as empty).
pub fn read_config() -> String {
    let mut text = String::new();
    for f in config_files() {
        if let Ok(t) = std::fs::read_to_string(&f) {
            for line in t.lines() {
                let trimmed = line.trim();
                let include = trimmed
                    .strip_prefix("!include ")
                    .or_else(|| trimmed.strip_prefix("include "));
                match include {
                    Some(inc) => {
                        let p = f.parent().unwrap_or(Path::new("/")).join(inc.trim());
                        text.push_str(&std::fs::read_to_string(p).unwrap_or_default());
                    }
                    None => text.push_str(line),
                }
                text.push('\n');
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn default_trusts_root_only() {
        assert_eq!(trusted_users(""), s(&["root"]));
        assert!(is_trusted(&trusted_users(""), "root", &[]));
        assert!(!is_trusted(&trusted_users(""), "alice", &s(&["users"])));
    }

    #[test]
    fn settings_override_and_extend() {
        let conf = "# comment\ntrusted-users = root @wheel\nextra-trusted-users = bob # inline\nsandbox = true\n";
        let list = trusted_users(conf);
        assert_eq!(list, s(&["root", "@wheel", "bob"]));
        assert!(is_trusted(&list, "alice", &s(&["wheel"])));
        assert!(is_trusted(&list, "bob", &[]));
        assert!(!is_trusted(&list, "carol", &s(&["users"])));
        assert!(is_trusted(
            &trusted_users("trusted-users = *"),
            "anyone",
            &[]
        ));
        // A later trusted-users replaces the default, root included.
        assert!(!is_trusted(
            &trusted_users("trusted-users = alice"),
            "root",
            &[]
        ));
    }
}
