//! The `agentwire-load` binary: `agentwire-load --help`; the code is [`agentwire_load::cli`].

fn main() -> std::process::ExitCode {
    agentwire_load::cli::main()
}
