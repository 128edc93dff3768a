//! The sandbox's PID 1 on its own: what `agent-sandbox __init` does, in a binary that links
//! nothing else (no CLI parser, proxy or planner), so starting it inside every sandbox is cheap.
fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(agent_sandbox::cli::init_main(&args));
}
