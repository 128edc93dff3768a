//! The floor for open network mode: what pasta itself costs, done the way that works for root
//! and non-root alike (and the way agent-sandbox does it): a holder process creates a user +
//! network namespace, pasta attaches to it by PID (`--config-net`, no port forwarding), the
//! command runs inside the namespace, then pasta is killed (not waited for) and the holder ends.
//! No bubblewrap, no routes, no proxy: only the namespace and pasta.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::Result;

pub fn main(args: &[String]) -> Result<u8> {
    let mut pasta = "pasta".to_string();
    let mut rest = args;
    if let [flag, path, tail @ ..] = rest {
        if flag == "--pasta" {
            pasta = path.clone();
            rest = tail;
        }
    }
    let cmd = match rest {
        [sep, cmd @ ..] if sep == "--" && !cmd.is_empty() => cmd,
        _ => return Err("usage: pasta-floor [--pasta PATH] -- CMD [ARG…]".into()),
    };
    let exe = std::env::current_exe()?;
    let uid = unsafe { libc::getuid() };
    let gid = unsafe { libc::getgid() };
    let mut holder = Command::new(&exe);
    holder
        .arg("__hold")
        .env("FLOOR_UID", uid.to_string())
        .env("FLOOR_GID", gid.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    unsafe {
        holder.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut holder = holder.spawn()?;
    let mut line = String::new();
    BufReader::new(holder.stdout.take().expect("piped")).read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = holder.kill();
        return Err(format!("namespace holder failed: {}", line.trim()).into());
    }
    let hpid = holder.id();
    let pid_file = std::env::temp_dir().join(format!("loadgen-pasta-{}.pid", std::process::id()));
    let mut p = Command::new(&pasta);
    p.args([
        "--config-net",
        "--quiet",
        "-t",
        "none",
        "-u",
        "none",
        "-T",
        "none",
        "-U",
        "none",
        "--no-map-gw",
        "--pid",
    ])
    .arg(&pid_file);
    if uid == 0 {
        // As root pasta would switch to nobody before opening the namespaces.
        p.args(["--runas", "0:0"]);
    }
    p.arg("--userns")
        .arg(format!("/proc/{hpid}/ns/user"))
        .arg("--netns")
        .arg(format!("/proc/{hpid}/ns/net"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = p.output()?;
    let stop = |holder: &mut std::process::Child| {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = std::fs::remove_file(&pid_file);
        drop(holder.stdin.take());
        let _ = holder.kill();
        let _ = holder.wait();
    };
    if !out.status.success() {
        stop(&mut holder);
        let msg: Vec<String> = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| !l.contains("syslog"))
            .map(str::to_string)
            .collect();
        return Err(format!("pasta failed: {}", msg.join("; ")).into());
    }
    let status = Command::new(&exe)
        .arg("__enter")
        .arg(hpid.to_string())
        .arg("--")
        .args(cmd)
        .status();
    stop(&mut holder);
    let status = status?;
    Ok(status.code().unwrap_or(1).clamp(0, 255) as u8)
}

fn write(path: &str, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|e| format!("{path}: {e}").into())
}

/// The holder: own user + network namespace, mapped to the caller; lives until stdin closes.
pub fn hold_main() -> Result<u8> {
    let uid = std::env::var("FLOOR_UID")?;
    let gid = std::env::var("FLOOR_GID")?;
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        println!("unshare: {}", std::io::Error::last_os_error());
        return Ok(1);
    }
    if let Err(e) = write("/proc/self/setgroups", "deny")
        .and_then(|_| write("/proc/self/uid_map", &format!("0 {uid} 1")))
        .and_then(|_| write("/proc/self/gid_map", &format!("0 {gid} 1")))
    {
        println!("{e}");
        return Ok(1);
    }
    println!("ready");
    std::io::stdout().flush()?;
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    Ok(0)
}

/// `__enter PID -- CMD…`: join PID's user and network namespaces and exec CMD.
pub fn enter_main(args: &[String]) -> Result<u8> {
    let [pid, sep, cmd @ ..] = args else {
        return Err("usage: __enter PID -- CMD".into());
    };
    if sep != "--" || cmd.is_empty() {
        return Err("usage: __enter PID -- CMD".into());
    }
    for (ns, flag) in [("user", libc::CLONE_NEWUSER), ("net", libc::CLONE_NEWNET)] {
        let f = std::fs::File::open(format!("/proc/{pid}/ns/{ns}"))?;
        use std::os::fd::AsRawFd;
        if unsafe { libc::setns(f.as_raw_fd(), flag) } != 0 {
            return Err(format!("setns {ns}: {}", std::io::Error::last_os_error()).into());
        }
    }
    let err = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    Err(format!("cannot run {}: {err}", cmd[0]).into())
}
