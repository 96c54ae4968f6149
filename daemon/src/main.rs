//! The `wattson` command.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = wattson::cli::Cli::parse();
    // The demo on a terminal shows its own progress; the daemon's info lines are noise there.
    if matches!(cli.command, wattson::cli::Command::Demo(_))
        && !cli.verbose
        && std::io::IsTerminal::is_terminal(&std::io::stdout())
    {
        wattson::logging::init_with_default("warn");
    } else {
        wattson::logging::init(cli.verbose);
    }
    match wattson::commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let code = wattson::commands::exit_code_for(&e);
            tracing::error!("{e:#}");
            ExitCode::from(code)
        }
    }
}
