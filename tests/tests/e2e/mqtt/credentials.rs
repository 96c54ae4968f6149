//! Credentials and TLS: a wrong password gives one error per backoff step, the broker is
//! verified against the CA file.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{cfg, extras};
use tokio_util::sync::CancellationToken;
use wattson::config::MqttConfig;
use wattson::live::LiveState;
use wattson::publish::mqtt::Publisher;
use wattson_tests::broker::{Kind, Options, TestBroker, kinds, wait_for};

async fn wrong_password(kind: Kind) {
    let broker = TestBroker::start(
        kind,
        &Options {
            users: vec![("wattson".into(), "right-horse".into())],
            tls: None,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "battery-staple\n").unwrap();
    let mut c = cfg(&broker.url(false), "wattson-basket");
    c.username = Some("wattson".into());
    c.password_file = Some(pw.clone());
    let live = Arc::new(LiveState::default());
    let cancel = CancellationToken::new();
    let h = Publisher::spawn(
        c.clone(),
        "basket".into(),
        live.clone(),
        extras(),
        cancel.clone(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await; // the observation window
    let errors = h.stats.connection.connection_errors.load(Ordering::Relaxed);
    // Backoff 0.5, 1, 2, 4 s (each 50-100 %): at most 5 attempts fit in 4 s.
    assert!(
        (2..=6).contains(&errors),
        "{kind:?}: {errors} error lines in 4 s"
    );
    assert_eq!(h.stats.connection.connects.load(Ordering::Relaxed), 0);
    cancel.cancel();
    h.join.await.unwrap();

    // The right password connects.
    std::fs::write(&pw, "right-horse\n").unwrap();
    let cancel = CancellationToken::new();
    let h = Publisher::spawn(c, "basket".into(), live, extras(), cancel.clone()).unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || h
            .stats
            .connection
            .connects
            .load(Ordering::Relaxed)
            > 0)
        .await,
        "{kind:?}: right password did not connect"
    );
    cancel.cancel();
    h.join.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_give_one_error_per_backoff_step() {
    for kind in kinds() {
        wrong_password(kind).await;
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "openssl {args:?}");
}

/// A CA and a server certificate for `localhost`, signed by it, in `dir`.
fn make_ca(dir: &Path, name: &str) {
    let ca_key = format!("{name}-ca.key");
    let ca = format!("{name}-ca.pem");
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &ca_key,
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            &ca_key,
            "-days",
            "2",
            "-subj",
            "/CN=wattson test CA",
            "-out",
            &ca,
        ],
    );
    let key = format!("{name}-server.key");
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &key,
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            &key,
            "-subj",
            "/CN=localhost",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            &format!("{name}-server.pem"),
        ],
    );
    // mosquitto started as root reads its certificates after dropping to its own user.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.join(&key), std::fs::Permissions::from_mode(0o644)).unwrap();
}

async fn connects(c: MqttConfig) -> (u64, u64) {
    let cancel = CancellationToken::new();
    let h = Publisher::spawn(
        c,
        "basket".into(),
        Arc::new(LiveState::default()),
        extras(),
        cancel.clone(),
    )
    .unwrap();
    wait_for(Duration::from_secs(3), || {
        h.stats.connection.connects.load(Ordering::Relaxed) > 0
    })
    .await;
    cancel.cancel();
    let stats = h.stats.clone();
    h.join.await.unwrap();
    (
        stats.connection.connects.load(Ordering::Relaxed),
        stats.connection.connection_errors.load(Ordering::Relaxed),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verifies_the_broker_against_the_ca_file() {
    let have_openssl = std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !wattson_tests::broker::have_mosquitto("tls_verifies_the_broker_against_the_ca_file") {
        return;
    }
    if !have_openssl {
        assert!(
            !wattson_tests::broker::in_ci(),
            "openssl is not installed (CI=true)"
        );
        eprintln!("skipped: needs openssl");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    make_ca(dir.path(), "good");
    make_ca(dir.path(), "other");
    let d = dir.path();
    let broker = TestBroker::start(
        Kind::Mosquitto,
        &Options {
            users: vec![],
            tls: Some((
                d.join("good-ca.pem"),
                d.join("good-server.pem"),
                d.join("good-server.key"),
            )),
        },
    );
    let mut c = cfg(&broker.url(true), "wattson-basket");
    c.ca_file = Some(d.join("good-ca.pem"));
    let (ok, _) = connects(c.clone()).await;
    assert!(ok >= 1, "TLS with the right CA did not connect");

    c.ca_file = Some(d.join("other-ca.pem"));
    let (ok, errors) = connects(c.clone()).await;
    assert_eq!(ok, 0, "connected to a broker the CA did not sign");
    assert!(errors >= 1);

    c.insecure_skip_verify = true;
    let (ok, _) = connects(c).await;
    assert!(ok >= 1, "insecure_skip_verify did not connect");
}
