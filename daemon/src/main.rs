//! The `wattson` command.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = wattson::cli::Cli::parse();
    wattson::logging::init(cli.verbosity());
    match wattson::commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let code = wattson::commands::exit_code_for(&e);
            tracing::error!("{e:#}");
            ExitCode::from(code)
        }
    }
}
