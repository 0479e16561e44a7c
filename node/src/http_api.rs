//! The HTTP port: the producers' write API on the root; status and metrics on every node.
//!
//! Served with hyper's connection-level HTTP/1.1 server over any tokio `AsyncRead + AsyncWrite`
//! stream, so it runs on real sockets and on the simulator's.
//!
//! | request | who | answer |
//! |---|---|---|
//! | `PUT /v1/keys/{key}` (body: the value) | producer | `200 {"index":N,"identical_dropped":0}` once durable |
//! | `DELETE /v1/keys/{key}` | producer | same |
//! | `POST /v1/batch` `{"ops":[{"op":"set","key":K,"value":V},{"op":"delete","key":K}]}` | producer | same, for all ops |
//! | `GET /v1/keys/{key}` | producer | `200` with the value (read-your-write: a root group member that does not lead redirects it to the leader, `307`, as a write; the leader answers once a majority confirmed it still leads, else `503`), or `404` |
//! | `GET /v1/status` | anyone | JSON ([`Status`]): name, role, applied index, chain hash, state digest, lag, a root group member's Raft view |
//! | `GET /metrics` | anyone | Prometheus text format |
//!
//! Producers authenticate with `Authorization: Bearer <token>`. Refusals: `401` unknown token,
//! `403` a key outside the producer's prefixes (ACL), `400` a bad key or body, `408` a body that
//! did not arrive within `connections.http.body_read_timeout`, `413` a body over
//! [`REQUEST_BODY_BYTES_MAX`], `429` over quota with `Retry-After` (seconds) and `retry_after_ms` in the
//! body — a producer over quota is slowed down, never silently dropped — and `503` when the root
//! is shutting down or cannot write now (the write was not applied). A `500` is a commit that
//! failed with its outcome unknown (a disk error: it may have landed); retry it. Keys in paths
//! are percent-decoded.
//!
//! Connections (see [`crate::connections`]): at most `connections.http.max`; headers must
//! arrive within `header_read_timeout` (hyper's, on [`NodeTimer`] — simulated time under the
//! simulator), which also closes idle keep-alive connections; a response write blocked longer
//! than `write_timeout` closes the connection. When the node drains, each connection finishes
//! the request in flight and closes (hyper's graceful shutdown).

// Handlers return `Result<_, Reply>`: the error *is* the HTTP response to send, built once per
// refused request, so boxing it would buy nothing.
#![allow(clippy::result_large_err)]

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::net::TcpListener;

use crate::connections::{FlushWhenWritten, Lifecycle, ListenerKind, NodeTimer, WriteDeadline, reached};
use crate::entry::{Op, validate_key};
use crate::limits::REQUEST_BODY_BYTES_MAX;
use crate::observe::Probe;
use crate::root::WriteQueue;
use crate::root::quota::Producer;
use crate::state::NodeState;
use crate::status::{MemberRole, RaftStatus, Status};
use crate::tls::Secured;

/// Most operations in one batch request (one log entry's worth).
pub const BATCH_OPS_MAX: usize = crate::limits::OPS_PER_ENTRY_MAX;

#[derive(Debug)]
struct Api {
    state: Arc<NodeState>,
    writes: Option<WriteQueue>,
}

/// Accepts HTTP connections until the node drains.
pub async fn run(state: Arc<NodeState>, listener: TcpListener, writes: Option<WriteQueue>) {
    let api = Arc::new(Api { state: state.clone(), writes });
    let gate = state.connections.gate(ListenerKind::Http);
    let reach = |probe| state.probe(probe);
    crate::connections::accept_until_draining(listener, gate, state.lifecycle(), reach, |stream, peer, lifecycle| {
        let api = api.clone();
        async move {
            let limits = api.state.config.connections.http.clone();
            let gate = api.state.connections.gate(ListenerKind::Http);
            let stream = WriteDeadline::new(stream, limits.write_timeout, gate.timed_out_counter());
            let stream = match api.state.tls.as_ref().filter(|tls| tls.config().https) {
                None => Secured::Plain(stream),
                // The handshake within the headers' deadline: it is what comes before them.
                Some(tls) => {
                    let deadline = limits.header_read_timeout;
                    match tls.accept(&api.state.metrics, ListenerKind::Http, peer, stream, deadline).await {
                        Some(tls) => Secured::Tls(Box::new(tls)),
                        None => return,
                    }
                }
            };
            let stream = FlushWhenWritten::new(stream);
            let service_api = api.clone();
            let service = hyper::service::service_fn(move |request| {
                let api = service_api.clone();
                async move { Ok::<_, Infallible>(api.handle(request).await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(NodeTimer).header_read_timeout(limits.header_read_timeout);
            let mut lifecycle = lifecycle;
            let mut connection = std::pin::pin!(builder.serve_connection(TokioIo::new(stream), service));
            let result = tokio::select! {
                // Fixed poll order: select!'s default random order draws from a process-wide
                // seed, which would make runs differ under one simulator seed.
                biased;
                // Draining: finish the request in flight, then close (an idle connection closes
                // at once).
                () = reached(&mut lifecycle, Lifecycle::Draining) => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
                result = connection.as_mut() => result,
            };
            match result {
                // The write deadline counted its own timeout; hyper's header deadline is counted here.
                Err(e) if e.is_timeout() => {
                    gate.timed_out();
                    tracing::debug!(%peer, error = %e, "http connection timed out waiting for headers");
                }
                Err(e) => tracing::debug!(%peer, error = %e, "http connection ended with an error"),
                Ok(()) => {}
            }
        }
    })
    .await
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, body: impl serde::Serialize) -> Reply {
    // Every body is a JSON value or a struct of plain fields: nothing a serializer can refuse.
    let text = serde_json::to_string(&body).expect("a reply body serializes");
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", "application/json".parse().expect("static header"));
    response
}

fn error(status: StatusCode, message: impl Into<String>) -> Reply {
    reply(status, serde_json::json!({ "error": message.into() }))
}

/// The status a failed write is answered with: 400 for a request no root would accept, 500
/// when the write may have been applied (the producer must read before retrying) or the root
/// failed itself, 503 when nothing was applied and a retry may succeed.
fn write_error_status(e: &crate::root::WriteError) -> StatusCode {
    use crate::root::WriteError;
    match e {
        WriteError::Invalid(_) => StatusCode::BAD_REQUEST,
        WriteError::Unknown(_) | WriteError::Sealing(_) => StatusCode::INTERNAL_SERVER_ERROR,
        WriteError::ShuttingDown
        | WriteError::StoreNotReady(_)
        | WriteError::Refused(_)
        | WriteError::Overwritten { .. }
        | WriteError::LeaderNotReady
        | WriteError::MemberPaused(_)
        | WriteError::ReadUnconfirmed
        | WriteError::NotLeader { leader: None } => StatusCode::SERVICE_UNAVAILABLE,
        // Nothing applied; the same request, sent to the leader, may be.
        WriteError::NotLeader { leader: Some(_) } => StatusCode::TEMPORARY_REDIRECT,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch {
    ops: Vec<BatchOp>,
}

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
enum BatchOp {
    Set { key: String, value: String },
    Delete { key: String },
}

impl Api {
    async fn handle(&self, request: Request<Incoming>) -> Reply {
        let path = request.uri().path().to_string();
        let method = request.method().clone();
        match (method, path.as_str()) {
            (Method::GET, "/metrics") => self.metrics(),
            (Method::GET, "/v1/status") => self.status(),
            (Method::GET, "/v1/root/members") => self.members(),
            (Method::POST, "/v1/root/members") => self.change_members(request).await,
            (method, path) if path.starts_with("/v1/keys/") || path == "/v1/batch" => {
                // The write counters count write requests: a read of a key nobody wrote (404)
                // refuses no write.
                let write = method != Method::GET && method != Method::HEAD;
                // PLANTED BUG (legacy `http_reads_count_as_refused_writes`): reads counted too.
                let write = write || self.state.config.planted().http_reads_count_as_refused_writes;
                let response = self.producer_request(method, path, request).await;
                if !write {
                    return response;
                }
                if response.status() == StatusCode::TOO_MANY_REQUESTS {
                    self.state.metrics.writes_throttled.inc();
                    self.state.probe(Probe::QuotaRefused);
                } else if response.status() == StatusCode::FORBIDDEN {
                    self.state.metrics.writes_refused.inc();
                    self.state.probe(Probe::PrefixRefused);
                } else if response.status().is_client_error() {
                    self.state.metrics.writes_refused.inc();
                }
                response
            }
            _ => error(StatusCode::NOT_FOUND, format!("no such endpoint: {path}")),
        }
    }

    fn metrics(&self) -> Reply {
        let counters = self.state.read_counters.snapshot();
        let m = &self.state.metrics;
        m.read_hits.set(counters.get_hits as i64);
        m.read_misses.set(counters.get_misses as i64);
        m.bogus_requests.set(counters.bogus_requests as i64);
        m.lag_seconds.set(self.state.lag_ms() as f64 / 1000.0);
        let mut response = Response::new(Full::new(Bytes::from(m.render())));
        response.headers_mut().insert(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8".parse().expect("static header"),
        );
        response
    }

    fn status(&self) -> Reply {
        let state = &self.state;
        let raft = state.config.root.as_ref().and_then(|root| root.member_id).map(|member| {
            let view = state.raft_view();
            RaftStatus {
                member,
                term: view.map_or(0, |v| v.term),
                role: view.map_or(MemberRole::Starting, |v| v.role.into()),
                paused: view.and_then(|v| v.paused),
                leader: view.map_or(0, |v| v.leader),
                // Prometheus gauges are i64; a Raft index is set into them from a u64 below 2^63.
                commit_index: u64::try_from(state.metrics.raft_commit_index.get()).unwrap_or(0),
                applied_index: u64::try_from(state.metrics.raft_applied_index.get()).unwrap_or(0),
                configuration: state.raft_configuration(),
            }
        });
        let result = state.with_store(|store| {
            Ok::<_, crate::store::StoreError>(Status {
                name: state.config.name.clone(),
                role: state.config.role,
                database_id: store.db_id(),
                applied_index: store.applied_index(),
                first_retained_index: store.first_retained_index(),
                chain_hash: store.chain_hash(),
                state_digest: store.state_digest()?,
                key_count: store.stats()?.key_count,
                lag_ms: state.lag_ms(),
                raft,
            })
        });
        match result {
            Ok(status) => reply(StatusCode::OK, status),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }

    /// The root group's configuration as this member applied it, and its roster.
    fn members(&self) -> Reply {
        let Some(root) = self.state.config.root.as_ref().filter(|root| root.is_group()) else {
            return error(StatusCode::NOT_FOUND, "this node is not a root group member");
        };
        let Some(configuration) = self.state.raft_configuration() else {
            return error(StatusCode::SERVICE_UNAVAILABLE, "the member's consensus has not started");
        };
        let roster: Vec<serde_json::Value> = root
            .members
            .iter()
            .map(|m| serde_json::json!({ "id": m.id, "replication": m.replication, "http": m.http, "standby": m.standby }))
            .collect();
        reply(
            StatusCode::OK,
            serde_json::json!({
                "member": root.member_id,
                "index": configuration.index,
                "voters": configuration.voters,
                "outgoing": configuration.outgoing,
                "roster": roster,
            }),
        )
    }

    /// An operator's membership change (`{"add": [ids], "remove": [ids]}`), with
    /// `root.operator_token`: answered once this member applied the configuration it made.
    async fn change_members(&self, request: Request<Incoming>) -> Reply {
        use crate::consensus::MembershipChange;
        let (Some(writes), Some(root)) = (&self.writes, self.state.config.root.as_ref().filter(|r| r.is_group()))
        else {
            return error(StatusCode::NOT_FOUND, "this node is not a root group member");
        };
        let Some(expected) = &root.operator_token else {
            return error(
                StatusCode::FORBIDDEN,
                "membership changes are off on this member: root.operator_token is unset",
            );
        };
        let token = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let Some(token) = token else {
            return error(StatusCode::UNAUTHORIZED, "missing `Authorization: Bearer <operator token>`");
        };
        if !constant_time_eq::constant_time_eq(expected.as_bytes(), token.as_bytes()) {
            return error(StatusCode::UNAUTHORIZED, "not the operator token (root.operator_token)");
        }
        let change: MembershipChange = match self.read_body(request).await.and_then(|body| {
            serde_json::from_slice(&body).map_err(|e| {
                error(
                    StatusCode::BAD_REQUEST,
                    format!("a membership change is {{\"add\": [ids], \"remove\": [ids]}}: {e}"),
                )
            })
        }) {
            Ok(change) => change,
            Err(reply) => return reply,
        };
        match writes.change_membership(change).await {
            Ok(configuration) => reply(
                StatusCode::OK,
                serde_json::json!({
                    "index": configuration.index,
                    "voters": configuration.voters,
                    "outgoing": configuration.outgoing,
                }),
            ),
            Err(refused) => self.membership_refused(&refused, root),
        }
    }

    /// The answer to a membership change that was not made (or may not have been): its status,
    /// and a redirect to the leader or a `Retry-After` where asking again may succeed.
    fn membership_refused(&self, refused: &crate::root::MembershipRefused, root: &crate::config::RootConfig) -> Reply {
        use crate::consensus::MembershipError;
        use crate::root::MembershipRefused;
        let status = match refused {
            MembershipRefused::Refused(MembershipError::NotLeader { leader: Some(_) }) => {
                StatusCode::TEMPORARY_REDIRECT
            }
            MembershipRefused::Refused(
                MembershipError::NotLeader { leader: None }
                | MembershipError::Pending(_)
                | MembershipError::Joint
                | MembershipError::RemovesLeader(_),
            ) => StatusCode::SERVICE_UNAVAILABLE,
            MembershipRefused::Refused(MembershipError::AlreadyVoter(_) | MembershipError::NotVoter(_)) => {
                StatusCode::CONFLICT
            }
            MembershipRefused::Refused(_) | MembershipRefused::NotInRoster(_) => StatusCode::BAD_REQUEST,
            // It may have been made: the operator reads the configuration before asking again.
            MembershipRefused::Unknown(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut response = error(status, refused.to_string());
        let leader = match refused {
            MembershipRefused::Refused(MembershipError::NotLeader { leader: Some(id) }) => root.member(*id),
            _ => None,
        };
        if let Some(leader) = leader {
            if let Ok(value) = format!("{}://{}/v1/root/members", self.scheme(), leader.http).parse() {
                response.headers_mut().insert(hyper::header::LOCATION, value);
            }
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert("retry-after", hyper::header::HeaderValue::from_static("1"));
        }
        response
    }

    fn authenticate(&self, request: &Request<Incoming>) -> Result<&Producer, Reply> {
        let token = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| error(StatusCode::UNAUTHORIZED, "missing `Authorization: Bearer <token>`"))?;
        self.state
            .quotas
            .producers()
            .iter()
            // In constant time: how much of a guess matched must not show in the answer's timing.
            .find(|p| constant_time_eq::constant_time_eq(p.config.token.as_bytes(), token.as_bytes()))
            .ok_or_else(|| error(StatusCode::UNAUTHORIZED, "unknown producer token"))
    }

    #[expect(
        clippy::too_many_lines,
        reason = "99 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    async fn producer_request(&self, method: Method, path: &str, request: Request<Incoming>) -> Reply {
        let Some(writes) = &self.writes else {
            return error(StatusCode::MISDIRECTED_REQUEST, "this node is a replica; write to the root");
        };
        let producer = match self.authenticate(&request) {
            Ok(producer) => producer,
            Err(reply) => return reply,
        };
        let key_in_path = || -> Result<Vec<u8>, Reply> {
            let raw = path.strip_prefix("/v1/keys/").unwrap_or_default();
            let key: Vec<u8> = if self.state.config.planted().http_key_decoded_lossily {
                // PLANTED BUG (legacy `http_key_decoded_lossily`): bytes that are not UTF-8 become
                // U+FFFD, so binary keys collide.
                percent_encoding::percent_decode_str(raw).decode_utf8_lossy().into_owned().into_bytes()
            } else {
                percent_encoding::percent_decode_str(raw).collect()
            };
            validate_key(&key).map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))?;
            Ok(key)
        };
        let ops = match (&method, path) {
            (&Method::GET, _) => {
                let key = match key_in_path() {
                    Ok(key) => key,
                    Err(reply) => return reply,
                };
                if let Err(reply) = self.check_acl(producer, &key) {
                    return reply;
                }
                // Read-your-write: a root group member that does not lead may not have applied
                // what the leader acknowledged, so the read goes where the write went (307 to
                // the leader, or 503 while none is known or the new one catches up).
                if let Some(redirect) = crate::root::not_leading(&self.state) {
                    return self.write_refused(redirect, path);
                }
                // And a leader answers only once a majority confirmed it still leads: one
                // deposed without hearing of it yet (paused, cut off) would answer stale.
                if let Some(writes) = &self.writes
                    && let Err(refused) = writes.confirm_read().await
                {
                    return self.write_refused(refused, path);
                }
                return match self.state.read_store(|store| store.get(&key)) {
                    Ok(Some(value)) => Response::new(Full::new(Bytes::from(value))),
                    Ok(None) => error(StatusCode::NOT_FOUND, "no such key"),
                    Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                };
            }
            (&Method::PUT, p) if p != "/v1/batch" => match (key_in_path(), self.read_body(request).await) {
                (Ok(key), Ok(value)) => vec![Op::Set { key, value }],
                (Err(reply), _) | (_, Err(reply)) => return reply,
            },
            (&Method::DELETE, p) if p != "/v1/batch" => match key_in_path() {
                Ok(key) => vec![Op::Delete { key }],
                Err(reply) => return reply,
            },
            (&Method::POST, "/v1/batch") => match self.read_body(request).await.and_then(|body| parse_batch(&body)) {
                Ok(ops) => ops,
                Err(reply) => return reply,
            },
            _ => return error(StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not allowed on {path}")),
        };
        for op in &ops {
            if let Err(e) = op.validate() {
                return error(StatusCode::BAD_REQUEST, e.to_string());
            }
            if let Err(reply) = self.check_acl(producer, op.key()) {
                return reply;
            }
        }
        if ops.len() > producer.config.burst as usize {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "{} writes in one request exceed producer {}'s burst of {}",
                    ops.len(),
                    producer.config.name,
                    producer.config.burst
                ),
            );
        }
        // A root group member that does not lead sends the write on before it costs quota.
        if let Some(redirect) = crate::root::not_leading(&self.state) {
            return self.write_refused(redirect, path);
        }
        if let Err(wait) = producer.take(ops.len()) {
            let ms = wait.as_millis().max(1) as u64;
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "producer {} is over its quota of {} writes/s",
                    producer.config.name, producer.config.writes_per_s
                ),
            );
            response.headers_mut().insert("retry-after", ms.div_ceil(1000).to_string().parse().expect("digits"));
            let body = serde_json::json!({ "error": "over quota", "retry_after_ms": ms });
            *response.body_mut() = Full::new(Bytes::from(body.to_string()));
            return response;
        }
        match writes.write(ops).await {
            Ok(receipt) => reply(
                StatusCode::OK,
                serde_json::json!({ "index": receipt.index, "identical_dropped": receipt.identical_dropped }),
            ),
            Err(e) => self.write_refused(e, path),
        }
    }

    /// The answer to a write that failed: its status, and a root group member's redirect to
    /// the leader (307, not 301/302: the client repeats the same method and body there) or,
    /// with no leader known, a `Retry-After`.
    fn write_refused(&self, e: crate::root::WriteError, path: &str) -> Reply {
        let mut response = error(write_error_status(&e), e.to_string());
        match e {
            crate::root::WriteError::NotLeader { leader: Some(leader) } => {
                let scheme = self.scheme();
                if let Ok(value) = format!("{scheme}://{leader}{path}").parse() {
                    response.headers_mut().insert(hyper::header::LOCATION, value);
                }
            }
            crate::root::WriteError::NotLeader { leader: None }
            | crate::root::WriteError::LeaderNotReady
            | crate::root::WriteError::MemberPaused(_)
            | crate::root::WriteError::ReadUnconfirmed => {
                response.headers_mut().insert("retry-after", hyper::header::HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response
    }

    /// The scheme this node's HTTP API answers on: what a redirect to another member names.
    fn scheme(&self) -> &'static str {
        if self.state.config.tls.as_ref().is_some_and(|tls| tls.https) { "https" } else { "http" }
    }

    fn check_acl(&self, producer: &Producer, key: &[u8]) -> Result<(), Reply> {
        if producer.config.prefixes.iter().any(|prefix| key.starts_with(prefix.as_bytes())) {
            return Ok(());
        }
        Err(error(
            StatusCode::FORBIDDEN,
            format!(
                "producer {} may not write key {}; its prefixes are {:?}",
                producer.config.name,
                crate::entry::escape(key),
                producer.config.prefixes
            ),
        ))
    }

    /// The request's body, whole, within `connections.http.body_read_timeout`.
    async fn read_body(&self, request: Request<Incoming>) -> Result<Vec<u8>, Reply> {
        let limit = self.state.config.connections.http.body_read_timeout;
        let body = Limited::new(request.into_body(), REQUEST_BODY_BYTES_MAX).collect();
        let Ok(body) = tokio::time::timeout(limit, body).await else {
            self.state.connections.gate(ListenerKind::Http).timed_out();
            let mut reply = error(
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within connections.http.body_read_timeout ({limit:?})"),
            );
            // The rest of the body may still come: the connection cannot be reused.
            reply.headers_mut().insert("connection", "close".parse().expect("static header"));
            return Err(reply);
        };
        match body {
            Ok(body) => Ok(body.to_bytes().to_vec()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                Err(error(StatusCode::PAYLOAD_TOO_LARGE, format!("request body over {REQUEST_BODY_BYTES_MAX} bytes")))
            }
            Err(e) => Err(error(StatusCode::BAD_REQUEST, format!("reading the body: {e}"))),
        }
    }
}

fn parse_batch(body: &[u8]) -> Result<Vec<Op>, Reply> {
    let batch: Batch =
        serde_json::from_slice(body).map_err(|e| error(StatusCode::BAD_REQUEST, format!("batch body: {e}")))?;
    if batch.ops.is_empty() || batch.ops.len() > BATCH_OPS_MAX {
        return Err(error(StatusCode::BAD_REQUEST, format!("a batch holds 1 to {BATCH_OPS_MAX} ops")));
    }
    Ok(batch
        .ops
        .into_iter()
        .map(|op| match op {
            BatchOp::Set { key, value } => Op::Set { key: key.into_bytes(), value: value.into_bytes() },
            BatchOp::Delete { key } => Op::Delete { key: key.into_bytes() },
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::root::WriteError;

    /// The producer's fault is a 4xx, a write that may have landed a 500, a write that surely
    /// did not a 503 — and the kinds agree with what they say of themselves.
    #[test]
    fn each_write_error_has_the_status_its_kind_implies() {
        let invalid = WriteError::Invalid(crate::entry::validate_key(b"").unwrap_err());
        let cases = [
            (invalid, StatusCode::BAD_REQUEST),
            (WriteError::ShuttingDown, StatusCode::SERVICE_UNAVAILABLE),
            (WriteError::StoreNotReady("reopen failed".into()), StatusCode::SERVICE_UNAVAILABLE),
            (WriteError::Refused("disk failing".into()), StatusCode::SERVICE_UNAVAILABLE),
            (WriteError::Unknown("EIO".into()), StatusCode::INTERNAL_SERVER_ERROR),
        ];
        for (e, status) in cases {
            assert_eq!(write_error_status(&e), status, "{e:?}");
            assert_eq!(e.client_at_fault(), status.is_client_error(), "{e:?}");
            if e.may_have_applied() {
                assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{e:?}");
            }
        }
    }
}
