//! `wattson report`: annual cost per configuration and mode, comparisons, savings and
//! payback, in `--format table|markdown|csv|json|html`, to stdout or `--out FILE`.
//!
//! With `--prometheus URL` the host's series are read from that engine first
//! ([`crate::publish::remote_write::engine`]).
//!
//! Flow: load the config -> the options as a [`ReportRequest`](crate::report::ReportRequest) ->
//! [`crate::report::produce`] (which the HTTP report runs too) -> stdout or the file.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::Utc;

use crate::cli::ReportArgs;

pub fn run(args: &ReportArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let text = match &args.prometheus {
        Some(url) => {
            let options = crate::sources::wiring::store_options(&config);
            let (text, read) = crate::publish::remote_write::engine::produce(
                &config,
                &args.request(),
                url,
                &options,
                Utc::now(),
            )?;
            for r in &read {
                eprintln!("{}", r.summary());
            }
            text
        }
        None => crate::report::produce(&config, &args.request(), Utc::now())?,
    };
    match &args.out {
        Some(path) => std::fs::write(path, text.as_bytes())
            .with_context(|| format!("writing the report to {}", path.display()))?,
        None => crate::output::print(&text),
    }
    Ok(ExitCode::SUCCESS)
}
