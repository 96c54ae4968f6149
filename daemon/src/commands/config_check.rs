//! `wattson config check`: validate the configuration and print the effective config.

use std::path::Path;
use std::process::ExitCode;

/// Print the effective configuration; warn about a world-readable password file.
pub fn run(path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(path)?;
    // The config file itself never holds a password (URLs with passwords are refused), so
    // only the password file's mode matters.
    check_secret_file_opt(
        config
            .mqtt
            .as_ref()
            .and_then(|m| m.password_file.as_deref()),
    );
    crate::output::print(&config.to_effective_toml());
    Ok(ExitCode::SUCCESS)
}

/// Warn when a file holding a secret can be read by every user on the machine.
pub fn check_secret_file(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(m) if m.permissions().mode() & 0o004 != 0 => tracing::warn!(
            "{} holds the MQTT password and is readable by every user: chmod o-r {}",
            path.display(),
            path.display()
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(
            "mqtt.password_file {}: {}",
            path.display(),
            wattson_collectors::ErrorChain(&e)
        ),
    }
}

/// [`check_secret_file`] when a file is configured.
pub fn check_secret_file_opt(path: Option<&Path>) {
    if let Some(p) = path {
        check_secret_file(p);
    }
}
