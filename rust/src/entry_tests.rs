use super::*;
use std::os::unix::ffi::OsStringExt;

/// `bytes` as an argument (any bytes, UTF-8 or not).
fn raw(bytes: &[u8]) -> OsString {
    OsString::from_vec(bytes.to_vec())
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn strs(a: &[OsString]) -> Vec<&str> {
    a.iter().map(|x| x.to_str().unwrap()).collect()
}

/// A socket path with a space, an `=` and bytes that are not UTF-8.
fn awkward_path(name: &str) -> PathBuf {
    let mut p = b"/run/a b=c/\xff\xfe".to_vec();
    p.extend_from_slice(name.as_bytes());
    PathBuf::from(raw(&p))
}

#[test]
fn spec_round_trip_and_rejects() {
    let s = BridgeSpec::parse("5432=/run/a b/port.sock".as_ref()).unwrap();
    assert_eq!(s.port, 5432);
    assert_eq!(s.to_arg(), "5432=/run/a b/port.sock");
    assert!(BridgeSpec::parse("0=/x".as_ref()).is_err());
    assert!(BridgeSpec::parse("70000=/x".as_ref()).is_err());
    assert!(BridgeSpec::parse("80=rel".as_ref()).is_err());
    assert!(BridgeSpec::parse("80".as_ref()).is_err());
}

#[test]
fn bridge_spec_keeps_the_socket_bytes_and_refuses_signed_or_empty_ports() {
    let s = BridgeSpec {
        port: 65535,
        socket: awkward_path("p.sock"),
    };
    assert_eq!(BridgeSpec::parse(&s.to_arg()).unwrap(), s);
    for bad in ["+80=/x", " 80=/x", "=/x", "80=", "", "-1=/x", "８０=/x"] {
        let e = BridgeSpec::parse(bad.as_ref()).unwrap_err().to_string();
        assert!(e.contains("is not PORT=SOCKET"), "{bad}: {e}");
    }
}

#[test]
fn init_args_exact_and_round_trip() {
    let full = InitArgs {
        own_pgrp: true,
        pass: vec![BridgeSpec {
            port: 3128,
            socket: "/run/agent-sandbox/session/proxy.sock".into(),
        }],
        bridges: vec![
            BridgeSpec {
                port: 5432,
                socket: "/run/agent-sandbox/session/port-5432.sock".into(),
            },
            BridgeSpec {
                port: 8080,
                socket: "/s/port-8080.sock".into(),
            },
        ],
        command: os(&["claude", "--yolo"]),
    };
    let args = full.to_args();
    assert_eq!(
        strs(&args),
        [
            "--own-pgrp",
            "--pass",
            "3128=/run/agent-sandbox/session/proxy.sock",
            "--bridge",
            "5432=/run/agent-sandbox/session/port-5432.sock",
            "--bridge",
            "8080=/s/port-8080.sock",
            "--",
            "claude",
            "--yolo",
        ]
    );
    assert_eq!(InitArgs::parse(&args).unwrap(), full);

    let bare = InitArgs {
        command: os(&["true"]),
        ..InitArgs::default()
    };
    assert_eq!(strs(&bare.to_args()), ["--", "true"]);
    assert_eq!(InitArgs::parse(&bare.to_args()).unwrap(), bare);
}

/// Whatever follows `--` is the command's, even when it looks like the init's own options.
#[test]
fn init_args_carry_any_command_and_socket() {
    let odd = InitArgs {
        own_pgrp: false,
        pass: vec![],
        bridges: vec![BridgeSpec {
            port: 1,
            socket: awkward_path("b.sock"),
        }],
        command: vec![
            "--own-pgrp".into(),
            "--".into(),
            "--bridge".into(),
            "".into(),
            "-".into(),
            "a b\n'c'".into(),
            raw(b"\xff=\x01"),
        ],
    };
    assert_eq!(InitArgs::parse(&odd.to_args()).unwrap(), odd);
}

#[test]
fn init_args_refuse_garbage() {
    for (args, want) in [
        (os(&[]), "no -- before the command"),
        (os(&["true"]), "unknown option \"true\" before --"),
        (os(&["--own-pgrp", "true"]), "unknown option \"true\""),
        (os(&["--"]), "no command after --"),
        (os(&["--bridge"]), "\"--bridge\" needs PORT=SOCKET"),
        (
            os(&["--pass", "3128", "--", "true"]),
            "\"3128\" is not PORT=SOCKET",
        ),
        (
            os(&["--bridge", "80=x", "--", "true"]),
            "\"80=x\" is not PORT=SOCKET",
        ),
        (
            os(&["--verbose", "--", "true"]),
            "unknown option \"--verbose\"",
        ),
    ] {
        let e = InitArgs::parse(&args).unwrap_err().to_string();
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(e.starts_with("__init: "), "{e}");
    }
}

/// The message says what was wrong, what the line should look like, and the likely cause.
#[test]
fn a_bad_line_is_named_with_its_usage_and_the_fix() {
    let e = InitArgs::parse(&os(&["--bridge", "x", "--", "true"])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "__init: \"x\" is not PORT=SOCKET (PORT 1-65535, SOCKET an absolute path); usage: __init [--own-pgrp] [--pass PORT=SOCKET]… [--bridge PORT=SOCKET]… -- COMMAND [ARG…] (a command line agent-sandbox writes for itself: agent-sandbox and agent-sandbox-init must come from the same build)"
    );
}

#[test]
fn sweep_args_round_trip_and_refuse_garbage() {
    let s = SweepArgs {
        session_dir: awkward_path("session"),
    };
    assert_eq!(s.to_args(), [OsString::from(s.session_dir.clone())]);
    assert_eq!(SweepArgs::parse(&s.to_args()).unwrap(), s);
    for (args, want) in [
        (os(&[]), "0 arguments, expected 1"),
        (os(&["/a", "/b"]), "2 arguments, expected 1"),
        (
            os(&["rel/dir"]),
            "SESSION_DIR \"rel/dir\" is not an absolute path",
        ),
        (os(&[""]), "SESSION_DIR \"\" is not an absolute path"),
    ] {
        let e = SweepArgs::parse(&args).unwrap_err().to_string();
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(e.contains("usage: __sweep SESSION_DIR"), "{e}");
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;

    fn open() -> HoldArgs {
        HoldArgs {
            uid: 1000,
            gid: 100,
            net: Some(PastaSpec {
                pasta: "/usr/bin/pasta".into(),
                log: "/s/pasta.log".into(),
                dns_forward: Some("169.254.1.53".into()),
            }),
            stage: None,
            block: vec![
                "192.0.2.0/24".parse().unwrap(),
                "2001:db8::5".parse().unwrap(),
            ],
        }
    }

    #[test]
    fn hold_args_round_trip() {
        let open = open();
        let args = open.to_args();
        assert_eq!(
            strs(&args),
            [
                "1000",
                "100",
                "/usr/bin/pasta",
                "/s/pasta.log",
                "169.254.1.53",
                "-",
                "-",
                "-",
                "192.0.2.0/24",
                "2001:db8::5/128"
            ]
        );
        assert_eq!(HoldArgs::parse(&args).unwrap(), open);
        let staged = HoldArgs {
            uid: 0,
            gid: 0,
            net: None,
            stage: Some(StageSpec {
                dir: "/nix/store".into(),
                list: "/s/list".into(),
                view: "/s/view".into(),
            }),
            block: vec![],
        };
        assert_eq!(HoldArgs::parse(&staged.to_args()).unwrap(), staged);
        let no_dns = HoldArgs {
            net: Some(PastaSpec {
                dns_forward: None,
                ..open.net.clone().unwrap()
            }),
            ..open.clone()
        };
        assert_eq!(HoldArgs::parse(&no_dns.to_args()).unwrap(), no_dns);
    }

    /// Every field unset is a line of `-`; paths with spaces, `=` and non-UTF-8 bytes (a
    /// session directory under such a $HOME) come back as they went.
    #[test]
    fn hold_args_placeholders_and_awkward_paths() {
        let nothing = HoldArgs {
            uid: 4294967295,
            gid: 0,
            net: None,
            stage: None,
            block: vec![],
        };
        assert_eq!(
            strs(&nothing.to_args()),
            ["4294967295", "0", "-", "-", "-", "-", "-", "-"]
        );
        assert_eq!(HoldArgs::parse(&nothing.to_args()).unwrap(), nothing);
        let both = HoldArgs {
            net: Some(PastaSpec {
                pasta: awkward_path("pasta"),
                log: awkward_path("pasta.log"),
                dns_forward: None,
            }),
            stage: Some(StageSpec {
                dir: awkward_path("store"),
                list: awkward_path("list"),
                view: awkward_path("store-view"),
            }),
            ..open()
        };
        assert_eq!(HoldArgs::parse(&both.to_args()).unwrap(), both);
    }

    #[test]
    fn hold_args_refuse_what_they_cannot_read() {
        assert!(
            HoldArgs::parse(&os(&["1", "2"]))
                .unwrap_err()
                .to_string()
                .contains("usage: __hold")
        );
        let bad_id = HoldArgs::parse(&os(&["x", "2", "-", "-", "-", "-", "-", "-"]));
        assert!(
            bad_id
                .unwrap_err()
                .to_string()
                .contains("\"x\" is not a numeric id")
        );
        let bad_prefix =
            HoldArgs::parse(&os(&["1", "2", "/p", "/l", "-", "-", "-", "-", "1.2.3/8"]));
        assert!(
            bad_prefix
                .unwrap_err()
                .to_string()
                .contains("\"1.2.3/8\" is not an address prefix")
        );
    }

    /// Half-set groups, relative paths and prefixes without pasta are refused, not guessed at.
    #[test]
    fn hold_args_refuse_inconsistent_lines() {
        let dns = raw(b"\xff");
        for (args, want) in [
            (
                os(&["1", "2", "/p", "-", "-", "-", "-", "-"]),
                "PASTA, LOG and DNS are set together",
            ),
            (
                os(&["1", "2", "-", "-", "1.1.1.1", "-", "-", "-"]),
                "PASTA, LOG and DNS are set together",
            ),
            (
                os(&["1", "2", "-", "-", "-", "/d", "/l", "-"]),
                "STAGE-DIR, STAGE-LIST and VIEW are set together",
            ),
            (
                os(&["1", "2", "pasta", "/l", "-", "-", "-", "-"]),
                "PASTA \"pasta\" is not an absolute path",
            ),
            (
                os(&["1", "2", "-", "-", "-", "/d", "l", "/v"]),
                "STAGE-LIST \"l\" is not an absolute path",
            ),
            (
                os(&["1", "2", "-", "-", "-", "-", "-", "-", "192.0.2.0/24"]),
                "PREFIXes are cut off only with PASTA",
            ),
            (
                vec![
                    "1".into(),
                    "2".into(),
                    "/p".into(),
                    "/l".into(),
                    dns,
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ],
                "DNS \"\\xFF\" is not an address",
            ),
        ] {
            let e = HoldArgs::parse(&args).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
            assert!(e.starts_with("__hold: "), "{e}");
        }
    }

    #[test]
    fn enter_args_exact_and_round_trip() {
        let e = EnterArgs {
            holder_pid: 42,
            namespaces: vec![Namespace::User, Namespace::Mnt, Namespace::Net],
            command: vec!["/usr/bin/bwrap".into(), "--".into(), raw(b"a b\xff")],
        };
        let args = e.to_args();
        assert_eq!(
            &args[..4],
            os(&["42", "user,mnt,net", "--", "/usr/bin/bwrap"])
        );
        assert_eq!(EnterArgs::parse(&args).unwrap(), e);
        // Without a command: the prefix the launcher puts before bwrap's own argv.
        let prefix = EnterArgs {
            command: vec![],
            namespaces: vec![Namespace::User],
            ..e
        };
        assert_eq!(strs(&prefix.to_args()), ["42", "user", "--"]);
        assert!(EnterArgs::parse(&prefix.to_args()).is_err());
    }

    #[test]
    fn enter_args_refuse_garbage() {
        for (args, want) in [
            (os(&["42", "user"]), "2 arguments, expected at least 4"),
            (os(&["42", "user", "--"]), "expected -- and a program"),
            (
                os(&["42", "user", "true", "x"]),
                "expected -- and a program",
            ),
            (
                os(&["self", "user", "--", "true"]),
                "\"self\" is not a process id",
            ),
            (
                os(&["0", "user", "--", "true"]),
                "\"0\" is not a process id",
            ),
            (
                os(&["42", "user,bogus", "--", "true"]),
                "unknown namespace \"bogus\"",
            ),
            (os(&["42", "", "--", "true"]), "unknown namespace \"\""),
        ] {
            let e = EnterArgs::parse(&args).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
            assert!(e.contains("usage: __enter PID user[,mnt][,net] --"), "{e}");
        }
    }
}
