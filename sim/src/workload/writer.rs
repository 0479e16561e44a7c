//! The open-loop writer: requests to the root's HTTP API at the scenario's rate.
//!
//! Each request holds one operation (a `PUT`, or a `DELETE`) or, with `modes.batch_ops` above
//! one, several (`POST /v1/batch`, all or nothing, the last operation on a key winning). Per
//! operation, drawn from the run's seed: a key outside the producer's prefixes
//! (`outside_prefix_share`: the whole request is refused, 403), a key already in this batch
//! (`repeat_share`), a delete (`delete_share`), or the key's settled value again, byte for byte
//! (`rewrite_share`: the root drops it as identical). A writer never has two requests touching
//! one key in flight. What each request did reaches the checkers exactly:
//!
//! - acknowledged (200): every key's last operation in it committed — a `write_acked` event each,
//!   and `KeyFate::acknowledged`;
//! - refused (400, 403, 429, 503): nothing in it was applied — `KeyFate::refused`, and the
//!   reads checker forgets its deletes;
//! - anything else (a timeout, a broken connection, another status): unknown, so each operation
//!   stays a possible ending of its key.
//!
//! Requests travel over kept-alive connections, as a producer's do: an idle one is reused, a new
//! one opened when none is open. A connection the root closed, or lost with its process, is
//! found closed before use or fails its request (unknown, as any broken connection).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use qs_node::connections::FlushWhenWritten;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Acked, PRODUCER_TOKEN, WRITE_TIMEOUT};
use crate::checkers::contract::WriteLedgers;
use crate::checkers::convergence::Written;
use crate::checkers::reads::{Reads, version_of, versioned_value};
use crate::scenario::nodes::KEY_PREFIX;
use crate::scenario::{Burst, ValueBytes, WriterModes};
use crate::sync::Locked;
use crate::trace::{Event, SharedRecorder};

/// What one writer does.
#[derive(Clone, Debug)]
pub struct WriterSpec {
    pub writer_id: usize,
    /// The root's HTTP address; a root group's members' in member order.
    pub roots: Vec<SocketAddr>,
    pub rate_per_s: f64,
    pub keys: u64,
    pub value_bytes: ValueBytes,
    pub burst: Option<Burst>,
    /// Write every key once first, in order, at this rate (a bulk load), then go on at random.
    pub preload_rate_per_s: Option<f64>,
    pub modes: WriterModes,
    pub seed: u64,
}

/// The key a writer uses for its `n`th key.
pub fn key_name(writer_id: usize, n: u64) -> String {
    format!("{KEY_PREFIX}{writer_id}:{n}")
}

/// A key outside every producer prefix (the root refuses writes to it).
fn outside_key(writer_id: usize, n: u64) -> String {
    format!("zz{writer_id}:{n}")
}

/// One operation of a request.
#[derive(Clone, Debug)]
struct Operation {
    key: String,
    written: Written,
    version: u64,
}

/// Keep-alive connections to the root (in a group, to each member) with no request on them,
/// the most recently used last: a producer keeps its connections open, and a fresh TCP
/// connection and HTTP handshake per write were a tenth of a simulated run.
pub(in crate::workload) type IdleConnections = Arc<Mutex<Vec<(SocketAddr, SendRequest<Full<Bytes>>)>>>;

/// Where a writer sends its next request: the root, or the root group member it last heard
/// leads.
type Target = Arc<Mutex<SocketAddr>>;

/// Redirects a request follows (a member that does not lead answers 307 with the leader) before
/// it counts as unanswered: one is the rule; more only while leadership moves.
const REDIRECTS_MAX: usize = 3;

/// The checkers a writer feeds as it goes: every write's possible endings, the reads' history,
/// the producer's quota, and each root's write requests (which its metrics page must agree
/// with).
#[derive(Clone, Debug)]
pub struct Judges {
    pub acked: Acked,
    pub reads: Reads,
    pub quota: crate::checkers::quota::Quota,
    pub writes: crate::checkers::contract::WriteLedgers,
    /// Judges a request that gives up waiting (simulated runs; None on real processes, where a
    /// busy machine may delay any answer).
    pub answers: Option<crate::checkers::write_answers::WriteAnswers>,
}

/// How the root answered a request.
enum Answer {
    /// Committed at this root index.
    Acknowledged(u64),
    /// Refused: nothing in the request was applied.
    Refused,
    /// Refused as over the producer's quota (429): nothing applied, no tokens taken.
    OverQuota,
    /// A root group member that does not lead sent the request to the leader here (307):
    /// nothing applied.
    Redirected(SocketAddr),
    /// No answer that says.
    Unknown,
}

#[expect(
    clippy::too_many_lines,
    reason = "182 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub async fn writer(spec: WriterSpec, recorder: SharedRecorder, judges: Judges) {
    let Judges { acked, reads, quota, writes, answers } = judges;
    let mut requests = 0u64;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x7772_6974_6572);
    // The read-backs' own stream: turning them on leaves every other draw as it was.
    let mut read_back_rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x7265_6164_6261_636b);
    let steady = Duration::from_secs_f64(1.0 / spec.rate_per_s);
    let bursting = spec.burst.map(|b| (b, Duration::from_secs_f64(1.0 / b.rate_per_s)));
    let in_flight: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let idle: IdleConnections = Arc::default();
    let target: Target = Arc::new(Mutex::new(spec.roots[0]));
    let roots: Arc<[SocketAddr]> = spec.roots.clone().into();
    let mut versions: BTreeMap<String, u64> = BTreeMap::new();
    let start = tokio::time::Instant::now();
    let mut preloaded = if spec.preload_rate_per_s.is_some() { 0 } else { spec.keys };
    let preload = spec.preload_rate_per_s.map(|rate| Duration::from_secs_f64(1.0 / rate));
    let modes = spec.modes;
    loop {
        let interval = match (bursting, preload) {
            (_, Some(preload)) if preloaded < spec.keys => preload,
            (Some((burst, interval)), _) if burst.on_at(start.elapsed()) => interval,
            // A burst starts on time, also inside a steady interval longer than the gap to it.
            (Some((burst, _)), _) => steady.min(burst.until_next(start.elapsed())),
            _ => steady,
        };
        tokio::time::sleep(interval).await;
        let mut ops: Vec<Operation> = Vec::new();
        for _ in 0..modes.ops_per_request() {
            let repeat = !ops.is_empty() && chance(&mut rng, modes.repeat_share);
            let key = if repeat {
                ops[rng.random_range(0..ops.len())].key.clone()
            } else {
                let n = if preloaded < spec.keys {
                    preloaded += 1;
                    preloaded - 1
                } else {
                    rng.random_range(0..spec.keys)
                };
                if chance(&mut rng, modes.outside_prefix_share) {
                    outside_key(spec.writer_id, n)
                } else {
                    key_name(spec.writer_id, n)
                }
            };
            if in_flight.locked().contains(&key) {
                continue; // that key's previous request is still unanswered
            }
            // A settled value (not a delete) may be written again, byte for byte.
            let settled = acked
                .locked()
                .get(key.as_bytes())
                .and_then(|f| f.settled().cloned().flatten())
                .filter(|_| !repeat && !ops.iter().any(|op| op.key == key));
            let rewrite = settled.filter(|_| chance(&mut rng, modes.rewrite_share));
            let op = match rewrite {
                // The settled value again: same bytes, so the version they carry.
                Some(value) => {
                    let version = version_of(&value).expect("a writer's value carries its version");
                    Operation { key, written: Some(value), version }
                }
                None => {
                    let version = versions.entry(key.clone()).and_modify(|v| *v += 1).or_insert(1);
                    let version = *version;
                    let written = if chance(&mut rng, modes.delete_share) {
                        None
                    } else {
                        let len = spec.value_bytes.draw(&mut rng);
                        let payload: Vec<u8> = (0..len).map(|_| rng.random_range(b'a'..=b'z')).collect();
                        Some(versioned_value(version, &payload))
                    };
                    Operation { key, written, version }
                }
            };
            ops.push(op);
        }
        if ops.is_empty() {
            continue;
        }
        // Per key, its last operation: what the request leaves it holding.
        let mut last: BTreeMap<String, Operation> = BTreeMap::new();
        for op in &ops {
            last.insert(op.key.clone(), op.clone());
        }
        {
            let mut flight = in_flight.locked();
            let mut fates = acked.locked();
            let mut reads = reads.lock();
            for op in last.values() {
                flight.insert(op.key.clone());
                // Until it is answered, this is one the key may end with.
                fates.entry(op.key.clone().into_bytes()).or_default().sent(op.written.clone());
            }
            for op in &ops {
                match op.written {
                    Some(_) => reads.sent(&op.key, op.version),
                    None => reads.delete_sent(&op.key, op.version),
                }
            }
        }
        // A single PUT acknowledged is read back from a member drawn now (see `read_back`).
        let read_back = match ops.as_slice() {
            [op] if op.written.is_some() && chance(&mut read_back_rng, modes.read_back_share) => {
                Some(spec.roots[read_back_rng.random_range(0..spec.roots.len())])
            }
            _ => None,
        };
        requests += 1;
        let request = (spec.writer_id as u64, requests);
        let sent_ms = recorder.locked().now_ms();
        quota.lock().sent(request, sent_ms, ops.len() as u64);
        let (recorder, acked, in_flight, reads) = (recorder.clone(), acked.clone(), in_flight.clone(), reads.clone());
        let (target, roots, idle, quota) = (target.clone(), roots.clone(), idle.clone(), quota.clone());
        let (writes, answers) = (writes.clone(), answers.clone());
        tokio::spawn(async move {
            let asked = *target.locked();
            let sent = send_to_leader(&target, &roots, &ops, &idle, &writes);
            let answer = match tokio::time::timeout(WRITE_TIMEOUT, sent).await {
                Ok(answer) => answer,
                Err(_) => {
                    if let Some(answers) = &answers {
                        let mut recorder = recorder.locked();
                        let at_ms = recorder.now_ms();
                        let node = asked.to_string();
                        if let Some(message) = answers.unanswered(&node, sent_ms, at_ms) {
                            let checker = crate::trace::Checker::Contract;
                            recorder.record(Event::Violation { at_ms, checker, node, index: 0, message });
                        }
                    }
                    // No answer in time (the member paused, cut off, its disk stalled): as a
                    // client would, the next request tries the next member, unless another
                    // answer has moved the target on meanwhile.
                    let mut target = target.locked();
                    if *target == asked && roots.len() > 1 {
                        *target = member_after(&roots, asked);
                    }
                    Answer::Unknown
                }
            };
            {
                let how = match answer {
                    Answer::OverQuota => crate::checkers::quota::Answered::OverQuota,
                    Answer::Acknowledged(_) => crate::checkers::quota::Answered::Acknowledged,
                    Answer::Refused => crate::checkers::quota::Answered::Other,
                    Answer::Unknown | Answer::Redirected(_) => crate::checkers::quota::Answered::Unknown,
                };
                let mut recorder = recorder.locked();
                let at_ms = recorder.now_ms();
                if let Some(violation) = quota.lock().answered(request, at_ms, how) {
                    recorder.record(violation);
                }
            }
            match answer {
                Answer::Acknowledged(index) => {
                    {
                        let mut recorder = recorder.locked();
                        let at_ms = recorder.now_ms();
                        for op in last.values() {
                            recorder.record(Event::WriteAcked {
                                at_ms,
                                key: op.key.clone(),
                                index,
                                version: op.version,
                                deleted: op.written.is_none(),
                            });
                        }
                    }
                    // Acknowledged: nothing sent before it may be the final value any more.
                    {
                        let mut fates = acked.locked();
                        for op in last.values() {
                            fates.entry(op.key.clone().into_bytes()).or_default().acknowledged(&op.written);
                        }
                    }
                    // Before the key leaves `in_flight`: no newer write of it is sent meanwhile.
                    if let (Some(member), [op]) = (read_back, ops.as_slice()) {
                        let found = read_back_judged(member, op, index, &idle).await;
                        if let Some(message) = found {
                            let mut recorder = recorder.locked();
                            let at_ms = recorder.now_ms();
                            let node = member.to_string();
                            let checker = crate::trace::Checker::Reads;
                            recorder.record(Event::Violation { at_ms, checker, node, index, message });
                        }
                    }
                }
                Answer::Refused | Answer::OverQuota => {
                    let mut fates = acked.locked();
                    let mut reads = reads.lock();
                    for op in last.values() {
                        fates.entry(op.key.clone().into_bytes()).or_default().refused(&op.written);
                    }
                    for op in &ops {
                        reads.refused(&op.key, op.version);
                    }
                }
                Answer::Unknown | Answer::Redirected(_) => {}
            }
            let mut flight = in_flight.locked();
            for key in last.keys() {
                flight.remove(key);
            }
        });
    }
}

/// True with probability `share`; draws nothing when the share is 0, so a writer without modes
/// draws exactly what it always did.
fn chance(rng: &mut ChaCha8Rng, share: f64) -> bool {
    share > 0.0 && rng.random_bool(share)
}

/// [`send`] to the member `target` names, following a member's redirect to the leader (and
/// remembering it); a member that cannot be reached or knows no leader moves `target` to the
/// next member for the writer's next request.
async fn send_to_leader(
    target: &Target,
    roots: &[SocketAddr],
    ops: &[Operation],
    idle: &IdleConnections,
    writes: &WriteLedgers,
) -> Answer {
    let mut to = *target.locked();
    for _ in 0..=REDIRECTS_MAX {
        match send(to, ops, idle, writes).await {
            Answer::Redirected(leader) => {
                *target.locked() = leader;
                to = leader;
            }
            answer => {
                if roots.len() > 1 && matches!(answer, Answer::Refused | Answer::Unknown) {
                    *target.locked() = member_after(roots, to);
                }
                return answer;
            }
        }
    }
    Answer::Unknown
}

/// The member a producer tries after `member` failed it: the next in `roots`, in turn.
fn member_after(roots: &[SocketAddr], member: SocketAddr) -> SocketAddr {
    let next = roots.iter().position(|r| *r == member).map_or(0, |n| (n + 1) % roots.len());
    roots[next]
}

/// What a producer's read-back found.
enum ReadBack {
    Value(Vec<u8>),
    Missing,
    Redirected(SocketAddr),
    /// Another answer (a 503 while leadership moves, a broken connection): says nothing.
    Other,
}

/// Reads `op`'s key back from `member` right after its write was acknowledged at `index`,
/// following redirects to the leader: the producer must read what it wrote or a newer version
/// (read-your-write, as the HTTP API promises). The violation in words, if any.
async fn read_back_judged(member: SocketAddr, op: &Operation, index: u64, idle: &IdleConnections) -> Option<String> {
    let mut to = member;
    for _ in 0..=REDIRECTS_MAX {
        let found = tokio::time::timeout(WRITE_TIMEOUT, read_back(to, &op.key, idle)).await;
        let verdict = match found.unwrap_or(ReadBack::Other) {
            ReadBack::Redirected(leader) => {
                to = leader;
                continue;
            }
            ReadBack::Other => None,
            ReadBack::Missing => Some("no such key".to_string()),
            ReadBack::Value(value) => match version_of(&value) {
                Some(version) if version >= op.version => None,
                Some(version) => Some(format!("version {version}")),
                None => Some(format!("{:?}", String::from_utf8_lossy(&value))),
            },
        };
        return verdict.map(|found| {
            format!(
                "the producer's GET of {} from {to} (asked of {member}) answered {found} right after version {} was \
                 acknowledged at index {index}: not read-your-write",
                op.key, op.version
            )
        });
    }
    None
}

/// The `Host` and the producer's token of a request to `root`.
pub(in crate::workload) fn as_producer(request: &mut hyper::Request<Full<Bytes>>, root: SocketAddr) {
    let headers = request.headers_mut();
    headers.insert("host", root.to_string().parse().expect("an address is a valid header"));
    headers.insert("authorization", format!("Bearer {PRODUCER_TOKEN}").parse().expect("a valid header"));
}

/// The member a 307's `Location` (`http://<address>/...`) sends the request to.
pub(in crate::workload) fn leader_at(location: Option<String>) -> Option<SocketAddr> {
    location?.strip_prefix("http://")?.split('/').next()?.parse().ok()
}

/// One `GET /v1/keys/{key}` to `root`.
async fn read_back(root: SocketAddr, key: &str, idle: &IdleConnections) -> ReadBack {
    let Some(mut sender) = connection(root, idle).await else { return ReadBack::Other };
    let mut request =
        hyper::Request::get(format!("http://{root}/v1/keys/{key}")).body(Full::new(Bytes::new())).expect("a request");
    as_producer(&mut request, root);
    let Ok(response) = sender.send_request(request).await else { return ReadBack::Other };
    let status = response.status();
    let location = response.headers().get(hyper::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    let Ok(body) = response.into_body().collect().await else { return ReadBack::Other };
    idle.locked().push((root, sender));
    match status {
        hyper::StatusCode::OK => ReadBack::Value(body.to_bytes().to_vec()),
        hyper::StatusCode::NOT_FOUND => ReadBack::Missing,
        hyper::StatusCode::TEMPORARY_REDIRECT => leader_at(location).map_or(ReadBack::Other, ReadBack::Redirected),
        _ => ReadBack::Other,
    }
}

/// An idle connection to `root` that is still open, or else a new one.
pub(in crate::workload) async fn connection(
    root: SocketAddr,
    idle: &IdleConnections,
) -> Option<SendRequest<Full<Bytes>>> {
    loop {
        let found = {
            let mut idle = idle.locked();
            let position = idle.iter().rposition(|(to, _)| *to == root);
            position.map(|n| idle.remove(n).1)
        };
        let Some(mut sender) = found else { break };
        // Closed by the root (or its death) while idle: dropped, and the next one tried.
        if !sender.is_closed() && sender.ready().await.is_ok() {
            return Some(sender);
        }
    }
    let Ok(Ok(stream)) = tokio::time::timeout(WRITE_TIMEOUT, tokio::net::TcpStream::connect(root)).await else {
        return None;
    };
    let Ok((sender, connection)) =
        // A flush with nothing written would send madsim an empty message (see FlushWhenWritten).
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(FlushWhenWritten::new(stream))).await
    else {
        return None;
    };
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Some(sender)
}

/// One request: a `PUT` or `DELETE` for a single operation, a `POST /v1/batch` for several, on
/// a kept-alive connection when one is idle. A connection goes back to `idle` only after an
/// answer read to its end; one whose request failed or timed out is dropped with its state.
/// Its answer goes to the root's write ledger as soon as its status is read.
async fn send(root: SocketAddr, ops: &[Operation], idle: &IdleConnections, writes: &WriteLedgers) -> Answer {
    let Some(mut sender) = connection(root, idle).await else { return Answer::Unknown };
    let request = match ops {
        [op] => {
            let uri = format!("http://{root}/v1/keys/{}", op.key);
            match &op.written {
                Some(value) => hyper::Request::put(uri).body(Full::new(Bytes::from(value.clone()))),
                None => hyper::Request::delete(uri).body(Full::new(Bytes::new())),
            }
        }
        ops => {
            let body: Vec<serde_json::Value> = ops
                .iter()
                .map(|op| match &op.written {
                    // Writers' values are ASCII: `<version>.<lowercase payload>`.
                    Some(value) => serde_json::json!({
                        "op": "set", "key": op.key, "value": String::from_utf8_lossy(value)
                    }),
                    None => serde_json::json!({ "op": "delete", "key": op.key }),
                })
                .collect();
            let body = serde_json::json!({ "ops": body }).to_string();
            hyper::Request::post(format!("http://{root}/v1/batch")).body(Full::new(Bytes::from(body)))
        }
    };
    let mut request = request.expect("a valid request");
    as_producer(&mut request, root);
    writes.sent(root, ops.len() as u64);
    let Ok(response) = sender.send_request(request).await else { return Answer::Unknown };
    let status = response.status();
    writes.answered(root, status.as_u16(), ops.len() as u64);
    let location = response.headers().get(hyper::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = response.into_body().collect().await;
    if body.is_ok() {
        // Answered to its end: the connection is free for the next request.
        idle.locked().push((root, sender));
    }
    if status.is_success() {
        let Ok(body) = body else { return Answer::Unknown };
        let index =
            serde_json::from_slice::<serde_json::Value>(&body.to_bytes()).ok().and_then(|v| v["index"].as_u64());
        return index.map_or(Answer::Unknown, Answer::Acknowledged);
    }
    // The root's refusals: nothing in the request was applied (see `http_api`'s module doc).
    use hyper::StatusCode;
    if status == StatusCode::TEMPORARY_REDIRECT {
        // A root group member that does not lead: nothing applied; the leader is there.
        let leader = body.ok().and_then(|_| leader_at(location));
        return leader.map_or(Answer::Unknown, Answer::Redirected);
    }
    match status {
        StatusCode::TOO_MANY_REQUESTS => Answer::OverQuota,
        StatusCode::BAD_REQUEST | StatusCode::FORBIDDEN | StatusCode::SERVICE_UNAVAILABLE => Answer::Refused,
        _ => Answer::Unknown,
    }
}
