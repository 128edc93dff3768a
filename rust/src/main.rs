fn main() {
    std::process::exit(agent_sandbox::cli::main());
}
