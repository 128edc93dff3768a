//! The helper's small entry points on their own: the sandbox's PID 1 (what `agent-sandbox
//! __init` does) and the namespace holder's `__hold` and `__enter` (open network mode, large
//! closures), in a binary that
//! links nothing else (no CLI parser, proxy or planner), so the processes of every start are
//! cheap to exec.
fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(agent_sandbox::cli::small_main(&args));
}
