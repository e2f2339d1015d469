//! The `agentwire` binary: `agentwire --help` lists its subcommands; the code is
//! [`agentwire_server::cli::agentwire`], which builds the runtime each subcommand runs on
//! (`serve`'s from its configuration's `[runtime]` section).

fn main() -> std::process::ExitCode {
    agentwire_server::cli::agentwire::main()
}
