//! `qs-node members`: an operator's view and change of a root group's membership, through a
//! member's HTTP API (`GET`/`POST /v1/root/members`). A member that does not lead answers a
//! change with a redirect to the leader, which is followed (a few times: leadership may move
//! while the change is asked); every other answer is given back as the member wrote it.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};

use crate::consensus::MembershipChange;

/// Redirects followed to reach the leader.
const REDIRECTS_MAX: usize = 3;
/// How long one request may take: a change waits up to `root::MEMBERSHIP_CHANGE_TIMEOUT`.
const REQUEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// What a member answered: its status and body (JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: serde_json::Value,
}

/// Asks the member at `url` (`http://host:port` or `https://…`, verified against `ca` then)
/// for the group's configuration, or for `change` with the operator `token`.
pub async fn members(
    url: &str,
    ca: Option<&Path>,
    token: Option<&str>,
    change: Option<&MembershipChange>,
) -> Result<Answer, String> {
    let mut url = url.trim_end_matches('/').trim_end_matches("/v1/root/members").to_string() + "/v1/root/members";
    for _ in 0..=REDIRECTS_MAX {
        let (status, location, body) = tokio::time::timeout(REQUEST_DEADLINE, request(&url, ca, token, change))
            .await
            .map_err(|_| format!("{url}: no answer within {REQUEST_DEADLINE:?}"))??;
        let body: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| format!("{url} answered {status} with a body that is not JSON: {e}"))?;
        match location {
            Some(next) if status == StatusCode::TEMPORARY_REDIRECT => url = next,
            _ => return Ok(Answer { status, body }),
        }
    }
    Err(format!("still redirected after {REDIRECTS_MAX} redirects (leadership keeps moving); try again"))
}

/// One request; returns the status, a redirect's location and the body.
async fn request(
    url: &str,
    ca: Option<&Path>,
    token: Option<&str>,
    change: Option<&MembershipChange>,
) -> Result<(StatusCode, Option<String>, Bytes), String> {
    let (https, authority) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => return Err(format!("{url}: not an http:// or https:// address")),
    };
    let authority = authority.split('/').next().unwrap_or_default().to_string();
    let tcp = tokio::net::TcpStream::connect(&authority).await.map_err(|e| format!("{authority}: {e}"))?;
    let mut builder = Request::builder().uri(url).header(hyper::header::HOST, &authority);
    let body = match change {
        Some(change) => {
            builder = builder.method(Method::POST).header("content-type", "application/json");
            if let Some(token) = token {
                builder = builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
            }
            serde_json::json!({ "add": change.add, "remove": change.remove }).to_string()
        }
        None => {
            builder = builder.method(Method::GET);
            String::new()
        }
    };
    let request = builder.body(Full::new(Bytes::from(body))).map_err(|e| format!("{url}: {e}"))?;
    if https {
        let ca = ca.ok_or_else(|| format!("{url}: https needs --ca, the deployment's CA certificate"))?;
        let tls = tls_connector(ca)?;
        let host = authority.rsplit_once(':').map_or(authority.as_str(), |(host, _)| host);
        let name = rustls_pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
            .map_err(|e| format!("{host}: {e}"))?;
        let stream = tls.connect(name, tcp).await.map_err(|e| format!("{authority}: TLS: {e}"))?;
        send(stream, request).await
    } else {
        send(tcp, request).await
    }
}

async fn send<S>(stream: S, request: Request<Full<Bytes>>) -> Result<(StatusCode, Option<String>, Bytes), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status();
    let location = response.headers().get(hyper::header::LOCATION).and_then(|v| v.to_str().ok()).map(String::from);
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, location, body))
}

/// A TLS client that trusts the CA certificate(s) in `ca` (PEM).
fn tls_connector(ca: &Path) -> Result<tokio_rustls::TlsConnector, String> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in
        rustls_pki_types::CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))?
    {
        let certificate = certificate.map_err(|e| format!("{}: {e}", ca.display()))?;
        roots.add(certificate).map_err(|e| format!("{}: {e}", ca.display()))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(crate::tls::provider::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}
