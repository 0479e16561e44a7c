//! Mutual TLS on real processes and sockets: certificates issued with `qs-node certs` (the
//! operator's way) or, where a test needs what the command will not make (an expired one), with
//! the same library; a root and replicas that replicate over TLS; peers without a valid
//! certificate — none, another CA's, an expired one, plaintext — refused with a log line and a
//! count; certificates rotated under a running node; HTTPS on the write API.
#![cfg(not(madsim))]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use qs_node::tls::issue::{Issued, KeySource, Validity, node_certificate};

use crate::common::process::{NodeProcess, Ports, Role, TOKEN, sample, write_config};

const PATIENCE: Duration = Duration::from_secs(20);
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// `qs-node certs <args>`, which must succeed.
fn certs(args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_qs-node")).arg("certs").args(args).output().unwrap();
    assert!(output.status.success(), "qs-node certs {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}

/// A new CA in `dir`, issued by `qs-node certs ca`.
fn new_ca(dir: &Path) -> PathBuf {
    certs(&["ca", "--out", dir.to_str().unwrap()]);
    dir.to_path_buf()
}

/// A loopback node certificate `<name>.pem`/`.key` in `ca`, issued by `qs-node certs node`.
fn node_cert(ca: &Path, name: &str) {
    certs(&["node", "--ca", ca.to_str().unwrap(), "--name", name, "--ip", "127.0.0.1"]);
}

/// A `[tls]` section: the certificate and key `<name>` in `certs`, trusting `ca_file`.
fn tls_section(certs: &Path, name: &str, ca_file: &Path, extra: &str) -> String {
    format!(
        "[tls]\ncertificate = \"{}\"\nkey = \"{}\"\nca = \"{}\"\n{extra}\n",
        certs.join(format!("{name}.pem")).display(),
        certs.join(format!("{name}.key")).display(),
        ca_file.display()
    )
}

fn applied(node: &NodeProcess) -> u64 {
    node.status().map_or(0, |s| s.applied_index)
}

fn metric(node: &NodeProcess, series: &str) -> f64 {
    node.metrics().and_then(|m| sample(&m, series)).unwrap_or(0.0)
}

fn refusals(node: &NodeProcess, reason: &str) -> f64 {
    metric(
        node,
        &format!("qs_tls_handshake_failures_total{{listener=\"replication\",side=\"server\",reason=\"{reason}\"}}"),
    )
}

fn put(root: SocketAddr, key: &str, value: &str) {
    let url = format!("http://{root}/v1/keys/{key}");
    let response = ureq::put(&url).header("authorization", &format!("Bearer {TOKEN}")).send(value).unwrap();
    assert_eq!(response.status(), 200);
}

/// A root with `[tls]` (certificate `root` from `ca`, trusting `trusted`) and `extra`, serving.
fn start_root(dir: &Path, ca: &Path, trusted: &Path, extra: &str) -> NodeProcess {
    node_cert(ca, "root");
    let ports = Ports::new();
    let config =
        write_config(dir, "root", ports, Role::Root { batch_window: "20ms" }, &tls_section(ca, "root", trusted, extra));
    let mut root = NodeProcess::start(&config, ports, &[], &[]);
    root.wait_serving(PATIENCE);
    root
}

/// A replica of `root` named `name` with `tls` as its `[tls]` section (empty: plaintext).
fn start_replica(dir: &Path, name: &str, root: &NodeProcess, tls: &str) -> NodeProcess {
    let ports = Ports::new();
    let primaries = [root.ports.replication];
    let config = write_config(dir, name, ports, Role::Replica { primaries: &primaries }, tls);
    let replica = NodeProcess::start(&config, ports, &[], &[]);
    replica.wait_until(&format!("{name} to serve /metrics"), PATIENCE, || replica.metrics().is_some());
    replica
}

#[test]
fn replicas_follow_over_mutual_tls_and_peers_without_a_valid_certificate_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = new_ca(&dir.path().join("ca"));
    let ca_file = ca.join("ca.pem");
    let root = start_root(dir.path(), &ca, &ca_file, "");

    // A replica with a certificate from the same CA follows.
    node_cert(&ca, "edge");
    let edge = start_replica(dir.path(), "edge", &root, &tls_section(&ca, "edge", &ca_file, ""));
    for i in 0..20 {
        put(root.ports.http, &format!("dns:zone-{i}"), &format!("10.0.0.{i}"));
    }
    let head = applied(&root);
    assert!(head >= 20, "20 writes acknowledged, yet the root's applied index is {head}");
    edge.wait_until("the replica to apply every entry over TLS", PATIENCE, || applied(&edge) >= head);
    let server = "qs_tls_handshakes_total{listener=\"replication\",side=\"server\"}";
    assert!(metric(&root, server) >= 1.0, "the root counts no TLS handshake: {:?}", root.metrics());
    assert!(metric(&edge, "qs_tls_handshakes_total{listener=\"replication\",side=\"client\"}") >= 1.0);

    // Another CA's certificate (the replica trusts the root's CA, so only the root refuses).
    let other = new_ca(&dir.path().join("other-ca"));
    node_cert(&other, "stranger");
    let stranger = start_replica(dir.path(), "stranger", &root, &tls_section(&other, "stranger", &ca_file, ""));
    root.wait_until("the root to refuse another CA's certificate", PATIENCE, || {
        refusals(&root, "unknown_issuer") >= 1.0
    });

    // An expired certificate from the right CA.
    let authority = Issued::read(&ca, "ca").unwrap();
    let year = Duration::from_secs(365 * 86_400);
    let past = Validity { not_before: SystemTime::now() - 2 * year, not_after: SystemTime::now() - year };
    node_certificate(&authority, "expired", &[LOOPBACK], &[], past, KeySource::Generated)
        .unwrap()
        .write(&ca, "expired")
        .unwrap();
    let expired = start_replica(dir.path(), "expired", &root, &tls_section(&ca, "expired", &ca_file, ""));
    root.wait_until("the root to refuse an expired certificate", PATIENCE, || refusals(&root, "expired") >= 1.0);

    // No certificate at all: a TLS client that presents none.
    let verifier = rustls_client(&ca_file);
    let mut bare = std::net::TcpStream::connect(root.ports.replication).unwrap();
    let mut connection =
        rustls::ClientConnection::new(verifier, rustls::pki_types::ServerName::IpAddress(LOOPBACK.into())).unwrap();
    let mut tls = rustls::Stream::new(&mut connection, &mut bare);
    // TLS 1.3: the client's side completes, the server's refusal arrives as an alert.
    let _ = tls.write_all(b"hello");
    let _ = tls.read(&mut [0u8; 64]);
    root.wait_until("the root to refuse a client without a certificate", PATIENCE, || {
        refusals(&root, "no_certificate") >= 1.0
    });

    // A plaintext replica.
    let plain = start_replica(dir.path(), "plain", &root, "");
    root.wait_until("the root to refuse a plaintext replica", PATIENCE, || refusals(&root, "not_tls") >= 1.0);

    // None of them got an entry; each refusal is a log line with the reason.
    for refused in [&stranger, &expired, &plain] {
        assert_eq!(applied(refused), 0, "{} was refused, yet applied entries", refused.name());
    }
    let log = root.log_text();
    for reason in ["unknown_issuer", "expired", "no_certificate", "not_tls"] {
        assert!(
            log.lines().any(|l| l.contains("TLS: refused a peer") && l.contains(reason)),
            "no refusal logged for {reason}; the root's log:\n{log}"
        );
    }
    // The replica that belongs kept following throughout.
    put(root.ports.http, "dns:after", "1");
    let head = applied(&root);
    edge.wait_until("the replica to keep following", PATIENCE, || applied(&edge) >= head);
}

#[test]
fn rotated_certificates_and_cas_are_picked_up_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let old = new_ca(&dir.path().join("old-ca"));
    let new = new_ca(&dir.path().join("new-ca"));
    // The root trusts a CA file of its own, which the rotation rewrites.
    let trusted = dir.path().join("trusted.pem");
    std::fs::copy(old.join("ca.pem"), &trusted).unwrap();
    let root = start_root(dir.path(), &old, &trusted, "reload_interval = \"1s\"");

    // A replica certified by the new CA (trusting both) is refused while the root trusts the old one alone.
    let both = dir.path().join("both.pem");
    let bundle = [std::fs::read(old.join("ca.pem")).unwrap(), std::fs::read(new.join("ca.pem")).unwrap()].concat();
    std::fs::write(&both, &bundle).unwrap();
    node_cert(&new, "edge");
    let edge = start_replica(dir.path(), "edge", &root, &tls_section(&new, "edge", &both, ""));
    put(root.ports.http, "dns:a", "1");
    root.wait_until("the root to refuse the new CA's replica", PATIENCE, || refusals(&root, "unknown_issuer") >= 1.0);

    // A CA file caught half-written is refused, counted once, and the old one kept.
    let old_len = std::fs::metadata(old.join("ca.pem")).unwrap().len() as usize;
    std::fs::write(&trusted, &bundle[..old_len + 100]).unwrap();
    let refused = "qs_tls_reloads_total{outcome=\"refused\"}";
    root.wait_until("the root to refuse a half-written CA file", PATIENCE, || metric(&root, refused) >= 1.0);
    assert_eq!(applied(&edge), 0, "the new CA's replica was let in on a half-written CA file");

    // The whole bundle: the root loads it and the replica gets in at its next attempt.
    std::fs::write(&trusted, &bundle).unwrap();
    let loaded = "qs_tls_reloads_total{outcome=\"loaded\"}";
    root.wait_until("the root to load the new CA bundle", PATIENCE, || metric(&root, loaded) >= 1.0);
    let head = applied(&root);
    edge.wait_until("the new CA's replica to follow once trusted", PATIENCE, || applied(&edge) >= head);
    assert_eq!(metric(&root, refused), 1.0, "the one half-written file should be refused once, not at every read");

    // The root's own certificate re-issued in place (`qs-node certs node` renames over it).
    node_cert(&old, "root");
    root.wait_until("the root to load its re-issued certificate", PATIENCE, || metric(&root, loaded) >= 2.0);
    assert!(root.log_text().contains("TLS: new certificates loaded"));
}

#[test]
fn the_write_api_serves_https_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let ca = new_ca(&dir.path().join("ca"));
    let ca_file = ca.join("ca.pem");
    node_cert(&ca, "root");
    let ports = Ports::new();
    let config = write_config(
        dir.path(),
        "root",
        ports,
        Role::Root { batch_window: "20ms" },
        &tls_section(&ca, "root", &ca_file, "https = true"),
    );
    let root = NodeProcess::start(&config, ports, &[], &[]);
    let client = rustls_client(&ca_file);
    let request = |path: &str, method: &str, body: &str| -> std::io::Result<String> {
        let mut tcp = std::net::TcpStream::connect(ports.http)?;
        tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
        let name = rustls::pki_types::ServerName::IpAddress(LOOPBACK.into());
        let mut connection = rustls::ClientConnection::new(client.clone(), name).unwrap();
        let mut tls = rustls::Stream::new(&mut connection, &mut tcp);
        write!(
            tls,
            "{method} {path} HTTP/1.1\r\nhost: root\r\nauthorization: Bearer {TOKEN}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = Vec::new();
        let _ = tls.read_to_end(&mut answer);
        Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    root.wait_until("the root to answer over HTTPS", PATIENCE, || {
        request("/v1/status", "GET", "").is_ok_and(|a| a.starts_with("HTTP/1.1 200"))
    });
    let answer = request("/v1/keys/dns:secure", "PUT", "10.9.8.7").unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "a write over HTTPS was answered: {answer}");
    // Plaintext HTTP gets no answer, and is counted.
    assert!(root.status().is_none(), "the HTTPS port answered plaintext HTTP");
    let metrics = request("/metrics", "GET", "").unwrap();
    let series = "qs_tls_handshake_failures_total{listener=\"http\",side=\"server\",reason=\"not_tls\"}";
    assert!(
        sample(metrics.split("\r\n\r\n").nth(1).unwrap_or(""), series).is_some_and(|n| n >= 1.0),
        "plaintext HTTP was not counted: {metrics}"
    );
}

/// A rustls client trusting `ca_file`, presenting no certificate.
fn rustls_client(ca_file: &Path) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for ca in rustls::pki_types::CertificateDer::pem_file_iter(ca_file).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().unwrap();
    Arc::new(builder.with_root_certificates(roots).with_no_client_auth())
}

#[test]
fn qs_node_certs_never_replaces_a_ca_and_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let ca = new_ca(&dir.path().join("ca"));
    let key = std::fs::read(ca.join("ca.key")).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_qs-node"))
        .args(["certs", "ca", "--out", ca.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success() && said.contains("ca.key exists"), "a second CA over the first: {said}");
    assert_eq!(std::fs::read(ca.join("ca.key")).unwrap(), key, "the CA's key was replaced");
    let nowhere = dir.path().join("nowhere");
    let orphan = Command::new(env!("CARGO_BIN_EXE_qs-node"))
        .args(["certs", "node", "--ca", nowhere.to_str().unwrap(), "--name", "edge", "--ip", "127.0.0.1"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&orphan.stderr);
    assert!(!orphan.status.success() && said.contains("the CA") && said.contains("ca.pem"), "{said}");
    // Keys are readable by their owner only.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(ca.join("ca.key")).unwrap().permissions().mode() & 0o777, 0o600);
}
