//! The census's root session: the HTTP API's requests at their edges, one at a time, from the
//! producer's host with the producer's token.
//!
//! What a correct root may answer, per [`RootOp`] — what any producer-facing store must honour:
//!
//! - a valid write (`PUT` of a census key with an edge value, `DELETE`, a `POST /v1/batch` of
//!   a few): 200 with the index it committed at, 307 to the leader (followed), 429 over quota,
//!   503 or 408 (not applied), 500 or no answer (unknown). A 400, 403, 404 or 413 refuses a
//!   write every correct root takes;
//! - a write a correct root must refuse (a 251-byte key, a value one byte past
//!   `VALUE_BYTES_MAX`, a batch one operation past `BATCH_OPS_MAX`): 400, 413 or 414, or 307,
//!   408, 429, 503 from a root that looks at leadership or quota first. A 2xx took it;
//! - `GET /v1/keys/{key}`: 200 with a value the census sent to that very key — exactly the
//!   last one when it was acknowledged and nothing was sent since (read-your-write; 404 when
//!   that was a delete) — or 404, 307, 503, 500;
//! - `GET /v1/status`: 200 with the node's `Status` (every field it has, typed) of a root of
//!   the run's database, or 500/503; `GET /metrics`: 200 whose every
//!   sample line is `<name>[{labels}] <number>`, or 500/503.
//!
//! Every valid write's fate goes to `convergence` (so a write that landed on another key — two
//! binary keys decoded alike — is a lost acknowledged write at the end) and every request to
//! the producer's quota judge.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use percent_encoding::{NON_ALPHANUMERIC, percent_encode};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::wire::shown;
use super::{ANSWER_TIMEOUT, CensusJudges, census_keys, census_value, draw, violation};
use crate::checkers::contract::{
    WriteCounters, WriteCountersRead, WriteLedgers, is_write_request, judge_write_counters, judge_write_page,
    write_request_ops,
};
use crate::checkers::quota::Answered;
use crate::sync::Locked;
use crate::trace::SharedRecorder;
use crate::workload::writer::{IdleConnections, as_producer, connection, leader_at};

/// The census's writer number in the quota judge's request ids, past every writer's.
const CENSUS_WRITER: u64 = u64::MAX;
/// Redirects a request follows before it counts as unanswered.
const REDIRECTS_MAX: usize = 3;

/// Every request the root's HTTP API answers, as the census sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum RootOp {
    /// `PUT /v1/keys/{census key}` with an edge value.
    PutValue,
    /// `DELETE /v1/keys/{census key}`.
    Delete,
    /// `POST /v1/batch` of 2–4 census keys (UTF-8 ones: a batch is JSON).
    Batch,
    /// `PUT` of a 251-byte key.
    PutKeyTooLong,
    /// `PUT` of a value one byte past `VALUE_BYTES_MAX`.
    PutValueTooLarge,
    /// `POST /v1/batch` of one operation past `BATCH_OPS_MAX`.
    BatchTooLarge,
    /// `GET /v1/keys/{census key}`.
    Get,
    /// `GET` of every census key in turn: each settled one must read exactly its last write,
    /// so a write that landed on another key shows there.
    ReadBackAll,
    Status,
    Metrics,
}

/// How often the census draws each [`RootOp`]; a field per operation (see
/// [`RootOpWeights::weight`]).
#[derive(Clone, Copy, Debug)]
pub struct RootOpWeights {
    pub put_value: u32,
    pub delete: u32,
    pub batch: u32,
    pub put_key_too_long: u32,
    pub put_value_too_large: u32,
    pub batch_too_large: u32,
    pub get: u32,
    pub read_back_all: u32,
    pub status: u32,
    pub metrics: u32,
}

impl RootOpWeights {
    /// Mostly edge-valued writes; the refusals and the views often enough that a minute's run
    /// sends each.
    pub const DEFAULT: RootOpWeights = RootOpWeights {
        put_value: 10,
        delete: 2,
        batch: 3,
        put_key_too_long: 1,
        put_value_too_large: 1,
        batch_too_large: 1,
        get: 4,
        read_back_all: 2,
        status: 1,
        metrics: 1,
    };

    /// `op`'s weight, at least one (asserted: every seed can reach every operation).
    pub fn weight(&self, op: RootOp) -> u32 {
        let mut weights = *self;
        let weight = *weights.weight_mut(op);
        assert!(weight >= 1, "every census operation has a weight of at least one: {op:?}");
        weight
    }

    /// `op`'s field: one match over every operation, so a new one does not compile without
    /// its weight.
    fn weight_mut(&mut self, op: RootOp) -> &mut u32 {
        match op {
            RootOp::PutValue => &mut self.put_value,
            RootOp::Delete => &mut self.delete,
            RootOp::Batch => &mut self.batch,
            RootOp::PutKeyTooLong => &mut self.put_key_too_long,
            RootOp::PutValueTooLarge => &mut self.put_value_too_large,
            RootOp::BatchTooLarge => &mut self.batch_too_large,
            RootOp::Get => &mut self.get,
            RootOp::ReadBackAll => &mut self.read_back_all,
            RootOp::Status => &mut self.status,
            RootOp::Metrics => &mut self.metrics,
        }
    }

    /// The swarm's weights: each operation's default drawn by `census::swarmed_weight`.
    pub fn swarmed(rng: &mut ChaCha8Rng) -> RootOpWeights {
        let mut weights = RootOpWeights::DEFAULT;
        for op in <RootOp as strum::IntoEnumIterator>::iter() {
            let weight = weights.weight_mut(op);
            *weight = super::swarmed_weight(rng, *weight);
        }
        weights
    }
}

/// The root session.
#[derive(Clone, Debug)]
pub struct RootSpec {
    /// The root's HTTP address; a root group's members' in member order.
    pub roots: Vec<SocketAddr>,
    /// Their names, in the same order.
    pub names: Vec<String>,
    /// Largest value it writes (`[census] value_bytes_max`).
    pub value_bytes_max: usize,
    pub rate_per_s: f64,
    /// How often it draws each operation.
    pub weights: RootOpWeights,
    pub seed: u64,
}

impl RootSpec {
    /// The root member at `address`, by name (the address itself if none is).
    fn member_name(&self, address: SocketAddr) -> String {
        let member = self.roots.iter().position(|r| *r == address).map(|n| self.names[n].clone());
        member.unwrap_or_else(|| address.to_string())
    }
}

/// The answer to one request, after redirects.
struct Answer {
    /// None: no answer (timed out, connection lost, redirected too often).
    status: Option<u16>,
    body: Vec<u8>,
    /// The member that answered.
    at: SocketAddr,
}

/// Which answers a request may get, by status.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A write every correct root takes.
    Taken,
    /// A write every correct root refuses.
    Refused,
    /// A read of a census key.
    Read,
    /// Status or metrics.
    View,
}

/// One request as the census drafts it, before it is sent.
struct Draft {
    method: hyper::Method,
    path: String,
    body: Vec<u8>,
    expect: Expect,
    /// The operations the producer's quota counts.
    ops: u64,
    /// What a valid write writes, per key (None: a delete).
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Draft {
    fn new(method: hyper::Method, path: String, body: Vec<u8>, expect: Expect, ops: u64) -> Draft {
        Draft { method, path, body, expect, ops, writes: BTreeMap::new() }
    }

    /// The request `op` sends, its choices drawn from `rng` (every op but `ReadBackAll`, which
    /// is a request per key).
    fn of(op: RootOp, rng: &mut ChaCha8Rng, keys: &[Vec<u8>], value_bytes_max: usize) -> Draft {
        let path_of = |key: &[u8]| format!("/v1/keys/{}", percent_encode(key, NON_ALPHANUMERIC));
        match op {
            RootOp::PutValue => {
                let key = keys[rng.random_range(0..keys.len())].clone();
                let value = census_value(rng, false, value_bytes_max);
                let mut draft = Draft::new(hyper::Method::PUT, path_of(&key), value.clone(), Expect::Taken, 1);
                draft.writes.insert(key, Some(value));
                draft
            }
            RootOp::Delete => {
                let key = keys[rng.random_range(0..keys.len())].clone();
                let mut draft = Draft::new(hyper::Method::DELETE, path_of(&key), Vec::new(), Expect::Taken, 1);
                draft.writes.insert(key, None);
                draft
            }
            RootOp::Get => {
                let key = &keys[rng.random_range(0..keys.len())];
                Draft::new(hyper::Method::GET, path_of(key), Vec::new(), Expect::Read, 0)
            }
            RootOp::Batch => {
                let utf8_keys: Vec<&Vec<u8>> = keys.iter().filter(|k| std::str::from_utf8(k).is_ok()).collect();
                let mut writes = BTreeMap::new();
                for _ in 0..rng.random_range(2..=4) {
                    let key = utf8_keys[rng.random_range(0..utf8_keys.len())].clone();
                    writes.insert(key, Some(census_value(rng, true, value_bytes_max)));
                }
                let ops: Vec<serde_json::Value> = writes
                    .iter()
                    .map(|(key, value): (&Vec<u8>, &Option<Vec<u8>>)| {
                        let (key, value) = (utf8(key), utf8(value.as_deref().unwrap_or_default()));
                        serde_json::json!({ "op": "set", "key": key, "value": value })
                    })
                    .collect();
                let body = serde_json::json!({ "ops": ops }).to_string().into_bytes();
                let count = writes.len() as u64;
                Draft { writes, ..Draft::new(hyper::Method::POST, "/v1/batch".into(), body, Expect::Taken, count) }
            }
            RootOp::PutKeyTooLong => {
                let mut key = super::CENSUS_PREFIX.as_bytes().to_vec();
                key.resize(qs_node::limits::KEY_BYTES_MAX + 1, b'k');
                Draft::new(hyper::Method::PUT, path_of(&key), b"x".to_vec(), Expect::Refused, 1)
            }
            RootOp::PutValueTooLarge => {
                let key = &keys[rng.random_range(0..keys.len())];
                let value = vec![b'v'; qs_node::limits::VALUE_BYTES_MAX + 1];
                Draft::new(hyper::Method::PUT, path_of(key), value, Expect::Refused, 1)
            }
            RootOp::BatchTooLarge => {
                let n = qs_node::http_api::BATCH_OPS_MAX + 1;
                let ops: Vec<serde_json::Value> =
                    (0..n).map(|_| serde_json::json!({ "op": "set", "key": "~", "value": "" })).collect();
                let body = serde_json::json!({ "ops": ops }).to_string().into_bytes();
                Draft::new(hyper::Method::POST, "/v1/batch".into(), body, Expect::Refused, n as u64)
            }
            RootOp::Status => Draft::new(hyper::Method::GET, "/v1/status".into(), Vec::new(), Expect::View, 0),
            RootOp::Metrics => unreachable!("read on its own connection by `Session::metrics`"),
            RootOp::ReadBackAll => unreachable!("a request per key, sent by `read_back_all`"),
        }
    }
}

/// The root session's connections and where its next request goes.
struct Session<'a> {
    spec: &'a RootSpec,
    recorder: &'a SharedRecorder,
    judges: &'a CensusJudges,
    idle: IdleConnections,
    target: SocketAddr,
    requests: u64,
    /// Per member, the connection metrics pages are read on, and the last page read on it.
    metrics: BTreeMap<SocketAddr, MetricsConnection>,
}

/// A connection kept for metrics pages alone: two pages read on it come from one process (a
/// restart ends it), so the write counters between them are judged against the clients'
/// ledger ([`judge_write_counters`]).
struct MetricsConnection {
    sender: SendRequest<Full<Bytes>>,
    last: Option<WriteCountersRead>,
}

/// Runs the root session for ever: a request per interval, each answered (or given up) before
/// the next, so no two writes of one key are ever in flight.
pub async fn root_census(spec: RootSpec, recorder: SharedRecorder, judges: CensusJudges) {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let ops: Vec<RootOp> = <RootOp as strum::IntoEnumIterator>::iter().collect();
    let weights = spec.weights;
    let interval = std::time::Duration::from_secs_f64(1.0 / spec.rate_per_s);
    let keys = census_keys();
    let target = spec.roots[0];
    let mut session = Session {
        spec: &spec,
        recorder: &recorder,
        judges: &judges,
        idle: IdleConnections::default(),
        target,
        requests: 0,
        metrics: BTreeMap::new(),
    };
    loop {
        tokio::time::sleep(interval).await;
        match draw(&mut rng, &ops, |op| weights.weight(op)) {
            RootOp::ReadBackAll => session.read_back_all(&keys).await,
            RootOp::Metrics => session.metrics().await,
            op => session.send(op, Draft::of(op, &mut rng, &keys, spec.value_bytes_max)).await,
        }
    }
}

impl Session<'_> {
    /// One request, after redirects, within [`ANSWER_TIMEOUT`].
    async fn answer(&mut self, method: &hyper::Method, path: &str, body: &[u8]) -> Answer {
        let at = self.target;
        let (idle, writes) = (&self.idle, &self.judges.writes);
        let sent = send_following(&mut self.target, &self.spec.roots, method, path, body, idle, writes);
        tokio::time::timeout(ANSWER_TIMEOUT, sent).await.unwrap_or(Answer { status: None, body: Vec::new(), at })
    }

    /// Records a `contract` violation against the member that answered.
    fn breached(&self, at: SocketAddr, message: String) {
        violation(self.recorder, &self.spec.member_name(at), message);
    }

    /// `GET /metrics` from the member the session targets, on its metrics connection: the page
    /// judged as a view, its write counters against the last page read on that connection.
    async fn metrics(&mut self) {
        let at = self.target;
        let writes = &self.judges.writes;
        let sent = writes.at(at);
        let read = tokio::time::timeout(ANSWER_TIMEOUT, metrics_page(at, &mut self.metrics)).await;
        let Ok(Some((status, page))) = read else {
            // No answer: the next page comes over a new connection, perhaps from a new process.
            self.metrics.remove(&at);
            return;
        };
        let received = writes.at(at);
        let answer = Answer { status: Some(status), body: page, at };
        if let Some(wrong) = judge(Expect::View, &answer, "/metrics", self.judges) {
            self.breached(at, format!("GET /metrics (Metrics): {wrong}"));
            return;
        }
        if status != 200 {
            return;
        }
        let counters = match WriteCounters::of_page(&String::from_utf8_lossy(&answer.body)) {
            Ok(counters) => counters,
            Err(wrong) => return self.breached(at, format!("GET /metrics (Metrics): {wrong}")),
        };
        let read = WriteCountersRead { sent, received, counters };
        if let Some(wrong) = judge_write_page(&read) {
            return self.breached(at, format!("GET /metrics (Metrics): {wrong}"));
        }
        let connection = self.metrics.get_mut(&at).expect("the page came over this connection");
        let earlier = connection.last.replace(read);
        if let Some(wrong) = earlier.and_then(|earlier| judge_write_counters(&earlier, &read)) {
            self.breached(at, format!("GET /metrics (Metrics): {wrong}"));
        }
    }

    /// A `GET` of every census key, each judged as a read.
    async fn read_back_all(&mut self, keys: &[Vec<u8>]) {
        for key in keys {
            let path = format!("/v1/keys/{}", percent_encode(key, NON_ALPHANUMERIC));
            let answer = self.answer(&hyper::Method::GET, &path, &[]).await;
            if let Some(wrong) = judge(Expect::Read, &answer, &path, self.judges) {
                self.breached(answer.at, format!("GET {} (ReadBackAll): {wrong}", shown(path.as_bytes())));
            }
        }
    }

    /// Sends `draft`, tells the judges what it wrote and how it was answered, and judges the
    /// answer.
    async fn send(&mut self, op: RootOp, draft: Draft) {
        let judges = self.judges;
        // Before it is sent: what each key may end with, and what a read of it may show.
        {
            let mut fates = judges.acked.locked();
            for (key, value) in &draft.writes {
                fates.entry(key.clone()).or_default().sent(value.clone());
                if let Some(value) = value {
                    judges.sent.sent(key, value);
                }
            }
        }
        self.requests += 1;
        let request_id = (CENSUS_WRITER, self.requests);
        if draft.ops > 0 {
            let sent_ms = self.recorder.locked().now_ms();
            judges.quota.lock().sent(request_id, sent_ms, draft.ops);
        }
        let answer = self.answer(&draft.method, &draft.path, &draft.body).await;
        if draft.ops > 0 {
            let how = match answer.status {
                Some(200) => Answered::Acknowledged,
                Some(429) => Answered::OverQuota,
                Some(_) => Answered::Other,
                None => Answered::Unknown,
            };
            let mut recorder = self.recorder.locked();
            let at_ms = recorder.now_ms();
            if let Some(found) = judges.quota.lock().answered(request_id, at_ms, how) {
                recorder.record(found);
            }
        }
        settle_fates(judges, &draft.writes, answer.status);
        if let Some(wrong) = judge(draft.expect, &answer, &draft.path, judges) {
            let request = format!("{} {}", draft.method, shown(draft.path.as_bytes()));
            self.breached(answer.at, format!("{request} ({op:?}): {wrong}"));
        }
    }
}

/// Each written key's fate once its request is answered: acknowledged with a 200, refused
/// with an answer that says nothing was applied, unknown otherwise.
fn settle_fates(judges: &CensusJudges, writes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>, status: Option<u16>) {
    let mut fates = judges.acked.locked();
    for (key, value) in writes {
        let fate = fates.entry(key.clone()).or_default();
        match status {
            Some(200) => fate.acknowledged(value),
            Some(400 | 403 | 404 | 408 | 413 | 429 | 503) => fate.refused(value),
            _ => {}
        }
    }
}

/// What was wrong with `answer` to a request expecting `expect`, if anything.
fn judge(expect: Expect, answer: &Answer, path: &str, judges: &CensusJudges) -> Option<String> {
    let status = answer.status?;
    let body = || shown(&answer.body);
    match expect {
        Expect::Taken => match status {
            200 => serde_json::from_slice::<serde_json::Value>(&answer.body)
                .ok()
                .and_then(|v| v["index"].as_u64())
                .is_none()
                .then(|| format!("acknowledged without the index it committed at: {}", body())),
            307 | 408 | 429 | 500 | 503 => None,
            other => Some(format!("answered {other} {} to a write every correct root takes", body())),
        },
        Expect::Refused => match status {
            307 | 400 | 408 | 413 | 414 | 429 | 503 => None,
            200..=299 => Some(format!("accepted it ({status} {})", body())),
            other => Some(format!("answered {other} {}, not a refusal of a bad request", body())),
        },
        Expect::Read => {
            let key = key_of(path);
            // Read-your-write, as the API promises: with the key's last write acknowledged and
            // nothing sent since, the read shows exactly it.
            let settled = judges.acked.locked().get(&key).and_then(|fate| fate.settled().cloned());
            match (status, settled) {
                (200, Some(Some(value))) if answer.body != value => Some(format!(
                    "read {}, not {}, the key's last write (acknowledged, nothing sent since)",
                    body(),
                    shown(&value)
                )),
                (200, Some(None)) => Some(format!("read {} though the key's delete was acknowledged", body())),
                (200, _) => (!judges.sent.was_sent(&key, &answer.body))
                    .then(|| format!("read {}, which was never written to that key", body())),
                (404, Some(Some(value))) => Some(format!(
                    "404 though the key's last write, {}, was acknowledged and nothing sent since",
                    shown(&value)
                )),
                (307 | 404 | 500 | 503, _) => None,
                (other, _) => Some(format!("answered {other} {} to a read of a key the producer may read", body())),
            }
        }
        Expect::View => match status {
            200 if path == "/metrics" => metrics_problem(&answer.body),
            200 => status_problem(&answer.body).map(|problem| format!("{problem}: {}", body())),
            500 | 503 => None,
            other => Some(format!("answered {other} {}", body())),
        },
    }
}

/// What is wrong with a root's `/v1/status` body: not the node's [`Status`](qs_node::status::Status)
/// (a field missing or mistyped), or not a root of this run's database.
fn status_problem(body: &[u8]) -> Option<String> {
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(_) => return Some("a status that is not UTF-8".to_string()),
    };
    let status = match qs_node::status::Status::parse(text) {
        Ok(status) => status,
        Err(e) => return Some(format!("a status the node's own type does not read ({e})")),
    };
    let database = crate::scenario::nodes::database_id();
    if status.role != qs_node::config::Role::Root {
        Some(format!("a root's status says role {:?}", status.role))
    } else if status.database_id != database {
        Some(format!("a status of database {}, not the run's {database}", status.database_id))
    } else {
        None
    }
}

/// The key a `/v1/keys/{key}` path names, decoded.
fn key_of(path: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(path.trim_start_matches("/v1/keys/")).collect()
}

/// The first line of a metrics page that is not empty, a comment or `<name>[{labels}] <number>`
/// (the node's page reader, `qs_node::metrics::page`, strict).
fn metrics_problem(page: &[u8]) -> Option<String> {
    qs_node::metrics::page::Page::parse_bytes(page).err().map(|e| e.to_string())
}

/// A census value as a JSON string: census batch values are UTF-8 by construction.
fn utf8(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("a batch's keys and values are drawn UTF-8")
}

/// Sends the request to `target`, following redirects to the leader (and remembering it); a
/// member that does not answer, or answers 503, moves `target` on for the next request.
async fn send_following(
    target: &mut SocketAddr,
    roots: &[SocketAddr],
    method: &hyper::Method,
    path: &str,
    body: &[u8],
    idle: &IdleConnections,
    writes: &WriteLedgers,
) -> Answer {
    for _ in 0..=REDIRECTS_MAX {
        let to = *target;
        let Some((status, location, answered)) = send(to, method, path, body, idle, writes).await else {
            move_on(target, roots);
            return Answer { status: None, body: Vec::new(), at: to };
        };
        if status == 307
            && let Some(leader) = leader_at(location)
        {
            *target = leader;
            continue;
        }
        if status == 503 {
            move_on(target, roots);
        }
        return Answer { status: Some(status), body: answered, at: to };
    }
    Answer { status: None, body: Vec::new(), at: *target }
}

/// `GET /metrics` to `root` on its metrics connection (opened, or opened anew when the last
/// one closed): the status and the whole page, or None without an answer.
async fn metrics_page(
    root: SocketAddr,
    connections: &mut BTreeMap<SocketAddr, MetricsConnection>,
) -> Option<(u16, Vec<u8>)> {
    let open = match connections.get_mut(&root) {
        Some(connection) => !connection.sender.is_closed() && connection.sender.ready().await.is_ok(),
        None => false,
    };
    if !open {
        connections.remove(&root);
        let sender = connection(root, &IdleConnections::default()).await?;
        connections.insert(root, MetricsConnection { sender, last: None });
    }
    let sender = &mut connections.get_mut(&root).expect("opened above").sender;
    let mut request =
        hyper::Request::get(format!("http://{root}/metrics")).body(Full::new(Bytes::new())).expect("a valid request");
    as_producer(&mut request, root);
    let response = sender.send_request(request).await.ok()?;
    let status = response.status().as_u16();
    let page = response.into_body().collect().await.ok()?.to_bytes().to_vec();
    Some((status, page))
}

/// The next member after `target`, in a root group.
fn move_on(target: &mut SocketAddr, roots: &[SocketAddr]) {
    if roots.len() > 1 {
        let next = roots.iter().position(|r| r == target).map_or(0, |n| (n + 1) % roots.len());
        *target = roots[next];
    }
}

/// One request to `root`: its status, `Location` and whole body, or None without an answer.
/// A write request's answer goes to the root's write ledger as soon as its status is read.
async fn send(
    root: SocketAddr,
    method: &hyper::Method,
    path: &str,
    body: &[u8],
    idle: &IdleConnections,
    writes: &WriteLedgers,
) -> Option<(u16, Option<String>, Vec<u8>)> {
    let mut sender = connection(root, idle).await?;
    let mut request = hyper::Request::builder()
        .method(method.clone())
        .uri(format!("http://{root}{path}"))
        .body(Full::new(Bytes::copy_from_slice(body)))
        .expect("a valid request");
    as_producer(&mut request, root);
    let write = is_write_request(method, path).then(|| write_request_ops(path, body));
    if let Some(ops) = write {
        writes.sent(root, ops);
    }
    let response = sender.send_request(request).await.ok()?;
    let status = response.status().as_u16();
    if let Some(ops) = write {
        writes.answered(root, status, ops);
    }
    let location = response.headers().get(hyper::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = response.into_body().collect().await.ok()?.to_bytes().to_vec();
    idle.locked().push((root, sender));
    Some((status, location, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metrics_page_is_judged_line_by_line() {
        let page = b"# TYPE qs_x counter\nqs_x_total 3\nqs_y{node=\"a b\"} 1.5\nqs_z +Inf\n# EOF\n";
        assert_eq!(metrics_problem(page), None);
        assert!(metrics_problem(b"qs_x_total three\n").is_some());
        assert!(metrics_problem(b"9qs 1\n").is_some());
        assert!(metrics_problem(b"qs_x_total\n").is_some());
    }

    #[test]
    fn census_keys_survive_percent_encoding_apart() {
        let keys = census_keys();
        let decoded: std::collections::BTreeSet<Vec<u8>> =
            keys.iter().map(|key| key_of(&format!("/v1/keys/{}", percent_encode(key, NON_ALPHANUMERIC)))).collect();
        assert_eq!(decoded.len(), keys.len());
        assert!(decoded.iter().all(|key| keys.contains(key)));
    }
}
