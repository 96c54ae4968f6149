//! The MQTT password as a systemd credential: read from `$CREDENTIALS_DIRECTORY`, refused
//! naming the key when it cannot be, and agreed on by the unit, the package, the install
//! steps and the example config; the fleet collector without a broker.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use super::wattson_with;
use wattson_tests::{TestEnv, q, wattson};

/// `[mqtt] password_credential` is read from `$CREDENTIALS_DIRECTORY` as systemd passes it
/// (a temp dir stands in for /run/credentials/wattson.service); without it, or with a
/// credential that is missing or cannot be read, `config check` and `run` exit 78 naming
/// the key. A password file the service user cannot read is refused the same way, checked
/// as that user (uid 65534) when the test runs as root.
#[test]
fn the_mqtt_password_as_a_systemd_credential() {
    let env = TestEnv::new();
    let creds = env.path("credentials");
    std::fs::create_dir(&creds).unwrap();
    let mqtt = "\n[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nusername = \"wattson\"\npassword_credential = \"mqtt-password\"\n";
    let config = env.config(mqtt);
    let with_creds = |dir: &Path| {
        let mut cmd = wattson();
        cmd.env("CREDENTIALS_DIRECTORY", dir);
        cmd
    };

    // Not started by systemd: no $CREDENTIALS_DIRECTORY. The fleet collector checks the
    // same before it connects.
    for args in [
        &["config", "check"][..],
        &["run", "--duration", "1s"],
        &["collect"],
    ] {
        let (code, stderr) = wattson_with(wattson(), &config, args);
        assert_eq!(code, Some(78), "{args:?}: {stderr}");
        assert!(
            stderr.contains("mqtt.password_credential: $CREDENTIALS_DIRECTORY is not set"),
            "{args:?}: {stderr}"
        );
    }
    // systemd passed a directory without it.
    let (code, stderr) = wattson_with(with_creds(&creds), &config, &["config", "check"]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("mqtt.password_credential: ")
            && stderr.contains(&creds.join("mqtt-password").display().to_string())
            && stderr.contains("No such file or directory"),
        "{stderr}"
    );
    // Unreadable: a directory where the file should be.
    std::fs::create_dir(creds.join("mqtt-password")).unwrap();
    let (code, stderr) = wattson_with(with_creds(&creds), &config, &["config", "check"]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("Is a directory"), "{stderr}");
    std::fs::remove_dir(creds.join("mqtt-password")).unwrap();
    // As systemd lays it out: a file readable by the service only.
    let secret = "cr3d-do-not-print";
    std::fs::write(creds.join("mqtt-password"), format!("{secret}\n")).unwrap();
    std::fs::set_permissions(
        creds.join("mqtt-password"),
        std::fs::Permissions::from_mode(0o400),
    )
    .unwrap();
    let (code, stderr) = wattson_with(with_creds(&creds), &config, &["config", "check"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");
    let (code, stderr) = wattson_with(with_creds(&creds), &config, &["run", "--duration", "1s"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");

    if !nix::unistd::geteuid().is_root() {
        println!("not root: the unreadable-as-the-service-user case was not run");
        return;
    }
    // The README's old layout: password_file = a root-only file, checked as the service's
    // (dynamic) user. The temp dir and config must be readable by that user.
    let password = env.path("mqtt-password");
    std::fs::write(&password, "x\n").unwrap();
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = env.config(&format!(
        "\n[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nusername = \"wattson\"\npassword_file = {}\n",
        q(&password)
    ));
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let as_nobody = || {
        use std::os::unix::process::CommandExt as _;
        let mut cmd = wattson();
        cmd.uid(65534).gid(65534);
        cmd
    };
    let (code, stderr) = wattson_with(as_nobody(), &config, &["config", "check"]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "mqtt.password_file: {}: Permission denied",
            password.display()
        )) && stderr.contains("password_credential"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("Permission denied").count(),
        1,
        "printed twice: {stderr}"
    );
}

/// What a key names is read when used (a password file, a credential, a TLS file), and an
/// error about it names the file, the line and the key as a bad value's does, in `config
/// check` and `run` alike; a password without a username points at the password's line.
#[test]
fn a_file_a_key_names_that_cannot_be_used_is_refused_at_its_line() {
    let env = TestEnv::new();
    let missing = env.path("missing");
    let line_of = |config: &Path, key: &str| {
        let text = std::fs::read_to_string(config).unwrap();
        1 + text
            .lines()
            .position(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
    };
    let cases = [
        (
            format!(
                "\n[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nusername = \"u\"\n\npassword_file = {}\n",
                q(&missing)
            ),
            "password_file",
            "mqtt.password_file",
            "No such file or directory",
        ),
        (
            "\n[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nusername = \"u\"\npassword_credential = \"mqtt-password\"\n"
                .to_owned(),
            "password_credential",
            "mqtt.password_credential",
            "$CREDENTIALS_DIRECTORY is not set",
        ),
        (
            format!(
                "\n[mqtt]\nurl = \"mqtts://127.0.0.1:1\"\n# the broker's own CA\nca_file = {}\n",
                q(&missing)
            ),
            "ca_file",
            "mqtt.ca_file",
            "No such file or directory",
        ),
        (
            format!(
                "\n[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\n\npassword_file = {}\n",
                q(&missing)
            ),
            "password_file",
            "mqtt.username",
            "a password is set but no username",
        ),
    ];
    for (section, key, named, reason) in cases {
        let config = env.config(&section);
        let at = format!("{}:{}: {named}: ", config.display(), line_of(&config, key));
        for args in [&["config", "check"][..], &["run", "--duration", "1s"]] {
            let (code, stderr) = wattson_with(wattson(), &config, args);
            assert_eq!(code, Some(78), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&at) && stderr.contains(reason),
                "{args:?}: wanted {at:?} and {reason:?}: {stderr}"
            );
        }
    }
}

/// The fleet collector without a broker to collect from is a configuration problem too.
#[test]
fn collect_without_an_mqtt_section_exits_78() {
    let env = TestEnv::new();
    let config = env.config("");
    let (code, stderr) = wattson_with(wattson(), &config, &["collect"]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("mqtt: wattson collect needs an [mqtt] section"),
        "{stderr}"
    );
}

/// As installed, the pieces agree: the unit's `LoadCredential=NAME:FILE`, the package's root-only
/// empty FILE (a conffile), the manual install step in docs/operations.md that creates FILE, and
/// the example config, whose `[mqtt]` (uncommented) names NAME and passes `config check` with the
/// credential laid out as systemd does.
#[test]
fn the_unit_the_package_the_readme_and_the_example_agree_on_the_mqtt_credential() {
    let root = wattson_tests::workspace_root();
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let unit = read("systemd/wattson.service");
    let load = unit
        .lines()
        .find_map(|l| l.strip_prefix("LoadCredential="))
        .expect("no LoadCredential= in wattson.service");
    let (name, file) = load.split_once(':').expect("LoadCredential=NAME:FILE");

    let cargo: toml::Table = toml::from_str(&read("daemon/Cargo.toml")).unwrap();
    let deb = &cargo["package"]["metadata"]["deb"];
    let asset = deb["assets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_array())
        .find(|a| a[1].as_str() == file.strip_prefix('/'))
        .unwrap_or_else(|| panic!("the .deb does not install {file}"));
    assert_eq!(asset[2].as_str(), Some("600"), "{file} must be root-only");
    let source = root.join("daemon").join(asset[0].as_str().unwrap());
    assert_eq!(
        std::fs::metadata(&source).unwrap().len(),
        0,
        "{file} ships non-empty"
    );
    assert!(
        deb["conf-files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str() == Some(file)),
        "{file} is not a conffile: an upgrade would overwrite the password"
    );

    let steps = read("docs/operations.md");
    assert!(
        steps.contains(&format!("sudo install -m 600 /dev/null {file}")),
        "the service steps in docs/operations.md do not create {file}"
    );

    let example = read("systemd/wattson.toml.example");
    let mut mqtt_on = false;
    let enabled: String = example
        .lines()
        .map(|l| {
            if l.starts_with("#[") {
                mqtt_on = l == "#[mqtt]";
            }
            match l.strip_prefix('#') {
                Some(rest) if mqtt_on && !rest.starts_with(' ') => format!("{rest}\n"),
                _ => format!("{l}\n"),
            }
        })
        .collect();
    assert!(
        enabled.contains(&format!("\npassword_credential = {}\n", q(name))),
        "the example config does not name credential {name}:\n{enabled}"
    );
    let env = TestEnv::new();
    let config = env.path("wattson.toml");
    std::fs::write(&config, &enabled).unwrap();
    let creds = env.path("credentials");
    std::fs::create_dir(&creds).unwrap();
    std::fs::write(creds.join(name), "").unwrap();
    let mut cmd = wattson();
    cmd.env("CREDENTIALS_DIRECTORY", &creds);
    let (code, stderr) = wattson_with(cmd, &config, &["config", "check"]);
    assert_eq!(code, Some(0), "{stderr}\n--- config:\n{enabled}");
}
