//! Filtered network mode: what tools print when the proxy refuses them, and the launcher's
//! one-line notice the first time each host is denied (issue 11).
//!
//! Nothing here leaves the machine: every request is refused by the proxy before it would dial
//! (an unlisted host at CONNECT, a method on an intercepted host before any upstream is
//! opened), so neither DNS nor the fake internet is needed.

use crate::common::*;

/// The allowlist of every test here: one intercepted host, GET only.
const RULES: &[&str] = &["--allow-domain", "example.invalid=GET"];

/// What the proxy says for an unlisted host reached through CONNECT.
fn blocked(host: &str) -> String {
    format!(
        "Blocked by agent-sandbox: {host} is not an allowed domain (allow it with --allow-domain {host} or allowedDomains = {{ \"{host}\" = \"*\"; }})"
    )
}

/// `agent-sandbox: blocked …` lines on the launcher's stderr.
fn notices(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("agent-sandbox: blocked "))
        .collect()
}

/// `tool` inside the sandbox, or a loud skip.
fn has_tool(f: &Fixture, check: &str, test: &str) -> bool {
    let o = run(f.sh(RULES, &format!("{check} >/dev/null 2>&1 && echo yes")));
    if o.stdout.trim() == "yes" {
        return true;
    }
    eprintln!("SKIPPED {test}: `{check}` fails inside the sandbox");
    false
}

#[test]
fn curl_shows_the_reason_and_the_fix() {
    let f = Fixture::new();
    let script = "curl -sS -m 5 https://files.pythonhosted.org/ 2>&1; \
        curl -sS -v -m 5 https://files.pythonhosted.org/ 2>&1 | tr -d '\\r' | grep '^< HTTP/'; \
        curl -sS -m 5 http://files.pythonhosted.org/simple/; \
        curl -sS -m 5 -X POST -d x https://example.invalid/upload; \
        curl -sS -m 5 --http1.1 -i -X PUT https://example.invalid/upload | tr -d '\\r' | grep -e '^HTTP/1.1 403' -e '^x-agent-sandbox-denied'";
    let o = run(f.sh(RULES, script));
    assert_eq!(o.code, 0, "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    // curl 7.88 prints only the status of a refused CONNECT; its -v shows the reason phrase
    // (and the launcher's notice covers the rest, see below).
    assert!(lines[0].contains("response 403"), "{o:?}");
    assert_eq!(
        &lines[1..],
        [
            format!("< HTTP/1.1 403 {}", blocked("files.pythonhosted.org")).as_str(),
            // Plain HTTP and intercepted requests: the body is what curl prints.
            "Blocked by agent-sandbox: files.pythonhosted.org is not an allowed domain (allow it with --allow-domain files.pythonhosted.org=GET or allowedDomains = { \"files.pythonhosted.org\" = [ \"GET\" ]; })",
            "Blocked by agent-sandbox: POST example.invalid: allowedDomains entry \"example.invalid\" allows only GET (allow it with --allow-domain example.invalid=GET,POST or allowedDomains = { \"example.invalid\" = [ \"GET\" \"POST\" ]; })",
            "HTTP/1.1 403 Blocked by agent-sandbox: PUT example.invalid: allowedDomains entry \"example.invalid\" allows only GET (allow it with --allow-domain example.invalid=GET,PUT or allowedDomains = { \"example.invalid\" = [ \"GET\" \"PUT\" ]; })",
            "x-agent-sandbox-denied: method-not-allowed",
        ],
        "{o:?}"
    );
}

#[test]
fn python_urllib_shows_the_reason_and_the_fix() {
    let f = Fixture::new();
    let script = "for u in https://files.pythonhosted.org/simple/ http://files.pythonhosted.org/simple/; do \
        python3 -c 'import sys, urllib.request as r
try: r.urlopen(sys.argv[1], timeout=5)
except Exception as e: print(e)' $u; done";
    let out = ok(f.sh(RULES, script));
    assert_eq!(
        out,
        format!(
            "<urlopen error Tunnel connection failed: 403 {}>\n\
             HTTP Error 403: Blocked by agent-sandbox: files.pythonhosted.org is not an allowed domain (allow it with --allow-domain files.pythonhosted.org=GET or allowedDomains = {{ \"files.pythonhosted.org\" = [ \"GET\" ]; }})\n",
            blocked("files.pythonhosted.org")
        )
    );
}

#[test]
fn git_shows_the_reason_in_its_trace_and_over_http() {
    let f = Fixture::new();
    if !has_tool(
        &f,
        "git --version",
        "git_shows_the_reason_in_its_trace_and_over_http",
    ) {
        return;
    }
    let script = "git ls-remote https://github.com/x/y 2>&1; \
        GIT_TRACE_CURL=1 git ls-remote https://github.com/x/y 2>&1 | grep -o 'Recv header: HTTP/1.1 403 .*'; \
        git ls-remote http://github.com/x/y 2>&1 | grep '^remote:'";
    let o = run(f.sh(RULES, script));
    let lines: Vec<&str> = o.stdout.lines().collect();
    // Like curl, git prints only the status of a refused CONNECT; the launcher's notice
    // names the fix (one per host, so exactly one here).
    assert_eq!(
        lines,
        [
            "fatal: unable to access 'https://github.com/x/y/': CONNECT tunnel failed, response 403".to_string(),
            format!("Recv header: HTTP/1.1 403 {}", blocked("github.com")),
            "remote: Blocked by agent-sandbox: github.com is not an allowed domain (allow it with --allow-domain github.com=GET or allowedDomains = { \"github.com\" = [ \"GET\" ]; })".to_string(),
        ],
        "{o:?}"
    );
    assert_eq!(
        notices(&o.stderr),
        [
            "agent-sandbox: blocked github.com (blocked-by-allowlist); allow it with --allow-domain github.com or allowedDomains = { \"github.com\" = \"*\"; }"
        ],
        "{o:?}"
    );
}

#[test]
fn pip_shows_the_reason_and_the_fix() {
    let f = Fixture::new();
    if !has_tool(
        &f,
        "python3 -m pip --version",
        "pip_shows_the_reason_and_the_fix",
    ) {
        return;
    }
    // pip names the proxy's refusal in its retry warning (one retry: no long back-off).
    let script = "python3 -m pip download --no-deps --retries 1 --timeout 5 \
        --index-url https://pypi.org/simple -d \"$HOME/dl\" left-pad 2>&1";
    let o = run(f.sh(RULES, script));
    assert_ne!(o.code, 0, "{o:?}");
    let want = format!("Tunnel connection failed: 403 {}", blocked("pypi.org"));
    assert!(o.stdout.contains(&want), "{o:?}");
}

#[test]
fn npm_shows_the_reason_and_the_fix() {
    let f = Fixture::new();
    if !has_tool(&f, "npm --version", "npm_shows_the_reason_and_the_fix") {
        return;
    }
    let o = run(f.sh(
        RULES,
        "npm view left-pad --fetch-retries=0 --registry https://registry.npmjs.org/ 2>&1",
    ));
    assert_ne!(o.code, 0, "{o:?}");
    let want = format!("npm error 403 403 {}", blocked("registry.npmjs.org"));
    assert!(o.stdout.contains(&want), "{o:?}");
}

#[test]
fn first_denial_of_a_host_is_announced_once_unless_quiet() {
    let script = "for i in 1 2; do curl -s -m 5 -o /dev/null https://files.pythonhosted.org/; done; \
        curl -s -m 5 -o /dev/null -X POST -d x https://example.invalid/; true";
    let f = Fixture::new();
    let o = run(f.sh(RULES, script));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(
        notices(&o.stderr),
        [
            "agent-sandbox: blocked files.pythonhosted.org (blocked-by-allowlist); allow it with --allow-domain files.pythonhosted.org or allowedDomains = { \"files.pythonhosted.org\" = \"*\"; }",
            "agent-sandbox: blocked POST example.invalid (method-not-allowed); allow it with --allow-domain example.invalid=GET,POST or allowedDomains = { \"example.invalid\" = [ \"GET\" \"POST\" ]; }",
        ],
        "{o:?}"
    );
    // One plain line each: nothing a terminal would interpret.
    assert!(
        !o.stderr.chars().any(|c| c.is_control() && c != '\n'),
        "{o:?}"
    );
    assert!(
        o.stderr.contains("the network proxy blocked 3 requests"),
        "{o:?}"
    );

    let mut quiet = vec!["--quiet-denials"];
    quiet.extend(RULES);
    let o = run(f.sh(&quiet, script));
    assert_eq!(o.code, 0, "{o:?}");
    assert_eq!(notices(&o.stderr), Vec::<&str>::new(), "{o:?}");
    // The summary at exit stays.
    assert!(
        o.stderr.contains("the network proxy blocked 3 requests"),
        "{o:?}"
    );
}

#[test]
fn a_made_up_method_gets_no_advice_and_cannot_flood_the_terminal() {
    // The agent picks the method: a 60,000-byte one must not be quoted back whole in the
    // notice and the summary (no setting could name it anyway).
    let f = Fixture::new();
    let script = "M=$(head -c 60000 /dev/zero | tr '\\0' X); \
        curl -s -m 5 -o /dev/null -X \"$M\" http://files.pythonhosted.org/; \
        curl -s -m 5 -o /dev/null -X \"$M\" http://example.invalid/; true";
    let o = run(f.sh(RULES, script));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stderr.len() < 4_000, "{} bytes of stderr", o.stderr.len());
    let n = notices(&o.stderr);
    assert_eq!(n.len(), 2, "{}", o.stderr);
    assert!(
        n.iter().all(|l| !l.contains("allow it with")),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("the network proxy blocked 2 requests"),
        "{}",
        o.stderr
    );
}
