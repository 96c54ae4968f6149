//! `--help` through the real binary: examples in every subcommand's help, `sweep --name`
//! shown as required, `wattson help --help`, and negative numbers reaching the value checks
//! (not clap's "unexpected argument '-5'").

use wattson_tests::wattson;

/// Run `wattson ARGS`: (exit code, stdout, stderr).
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = wattson().args(args).output().expect("running wattson");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SUBCOMMANDS: &[&[&str]] = &[
    &["run"],
    &["demo"],
    &["status"],
    &["sweep"],
    &["report"],
    &["meter"],
    &["meter", "probe"],
    &["meter", "simulate"],
    &["config"],
    &["config", "check"],
    &["collect"],
    &["help"],
];

#[test]
fn every_subcommand_help_ends_with_examples_of_itself() {
    for sub in SUBCOMMANDS {
        let mut args = sub.to_vec();
        args.push("--help");
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, Some(0), "{sub:?}: {stderr}");
        let examples = stdout
            .split_once("Examples:")
            .unwrap_or_else(|| panic!("{sub:?} --help has no examples:\n{stdout}"))
            .1;
        let invocation = format!("wattson {}", sub.join(" "));
        assert!(
            examples.contains(&invocation) || *sub == ["config"] || *sub == ["meter"],
            "{sub:?}: no example of {invocation:?} in:\n{examples}"
        );
        // `wattson help <sub>` prints the same long help, the global options included.
        let mut help = vec!["help"];
        help.extend_from_slice(sub);
        let (code, via_help, stderr) = run(&help);
        assert_eq!(code, Some(0), "help {sub:?}: {stderr}");
        for global in ["-c, --config <PATH>", "-v, --verbose", "-V, --version"] {
            assert!(
                via_help.contains(global) && stdout.contains(global),
                "help {sub:?} lacks {global}:\n{via_help}"
            );
        }
    }
    let (code, stdout, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("Examples:\n  wattson demo"), "{stdout}");
}

#[test]
fn help_help_works_and_an_unknown_subcommand_is_named() {
    let (code, stdout, stderr) = run(&["help", "--help"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("Usage: wattson help"), "{stdout}");
    let (code, _, stderr) = run(&["help", "sweeep"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("\"sweeep\"") && stderr.contains("sweep"),
        "{stderr}"
    );
}

#[test]
fn sweep_usage_marks_the_name_required() {
    let (_, stdout, _) = run(&["sweep", "--help"]);
    assert!(
        stdout.contains("Usage: wattson sweep --name <NAME> [OPTIONS]"),
        "{stdout}"
    );
    let (code, _, stderr) = run(&["sweep"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--name <NAME>"), "{stderr}");
}

#[test]
fn negative_numbers_reach_the_value_checks() {
    for (args, option) in [
        (
            &[
                "meter",
                "simulate",
                "--protocol",
                "pzem004t",
                "--watts",
                "-5",
            ][..],
            "--watts <W>",
        ),
        (&["sweep", "--name", "x", "--levels", "-1,2"], "--levels"),
        (
            &["sweep", "--name", "x", "--ci-watts", "-0.5"],
            "--ci-watts",
        ),
        (
            &["sweep", "--name", "x", "--min-samples", "-5"],
            "--min-samples",
        ),
        (&["report", "--upgrade-cost", "-300"], "--upgrade-cost"),
        (&["report", "--co2", "-5"], "--co2"),
        (&["run", "--duration", "-5s"], "--duration"),
    ] {
        let (code, _, stderr) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("unexpected argument"),
            "{args:?} was taken for an option: {stderr}"
        );
        assert!(
            stderr.contains(option) && stderr.contains("negative"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn placeholders_are_consistent() {
    // One name per kind of value across every command.
    for sub in SUBCOMMANDS {
        let mut args = sub.to_vec();
        args.push("--help");
        let (_, stdout, _) = run(&args);
        for bad in [
            "<FILE>",
            "<MAX_LEVEL_TIME>",
            "<IDLE_WAIT>",
            "<CI_WATTS>",
            "<TIMEOUT>",
        ] {
            assert!(!stdout.contains(bad), "{sub:?} shows {bad}:\n{stdout}");
        }
        let options = stdout.split("Examples:").next().unwrap_or_default();
        for line in options.lines().filter(|l| l.contains("--db ")) {
            assert!(line.contains("--db <PATH>"), "{sub:?}: {line}");
        }
        for line in options.lines().filter(|l| l.contains("--duration ")) {
            assert!(line.contains("--duration <DURATION>"), "{sub:?}: {line}");
        }
    }
}
