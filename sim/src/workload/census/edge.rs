//! The census's edge sessions: every memcached request, judged byte for byte.
//!
//! What a correct node may answer, per [`EdgeOp`] — written from the protocol, so any correct
//! memcached-speaking edge passes:
//!
//! - a get of keys the writers use, of the census's keys, or of keys nobody writes: items for
//!   keys asked for, in request order, each at most once, with a cas unique exactly for `gets`,
//!   each data block as long as its header says; or one `SERVER_ERROR` line alone. A writer
//!   key's value goes to the `reads` checker; a census key's must be one the census sent to
//!   that very key; a key nobody writes has no value;
//! - a get with a 251-byte key, with a control byte in a key, or with one key more than the
//!   node's per-request limit: one error line, or (where the node takes it) an answer with no
//!   item;
//! - `version`: `VERSION <text>`; `stats`: `STAT <name> <value>` lines, no name twice, with
//!   `get_hits` and `get_misses`, then `END` — and the counters move between two of them on one
//!   connection as the clients' ledger allows ([`crate::checkers::contract::judge_counters`]);
//! - a write command (with its data block, `cas` too), another command, an unknown one or an
//!   empty line: one error line — an edge is read-only;
//! - `quit`: the connection closes, nothing answered.
//!
//! After every request but `quit` the session sends `version`, and its answer must come next.

use std::net::SocketAddr;
use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::wire::{Breach, Judged, Line, Wire, breach, shown};
use super::{ANSWER_TIMEOUT, CensusJudges, absent_key, census_keys, census_value, draw, violation};
use crate::checkers::contract::{Counters, CountersRead, LedgerBook, judge_counters};
use crate::checkers::reads::Observed;
use crate::sync::Locked;
use crate::trace::SharedRecorder;

/// Every request an edge's memcached port answers, as the census sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum EdgeOp {
    /// `get`/`gets` of 1–4 writer keys.
    GetWritten,
    /// `get`/`gets` of 1–3 census keys.
    GetCensusKeys,
    /// `get`/`gets` of keys nobody writes (1 and 250 bytes among them).
    GetAbsent,
    /// A get naming a 251-byte key.
    GetKeyTooLong,
    /// A get of one key more than `KEYS_PER_GET_MAX`.
    GetTooManyKeys,
    /// A get of a key with a control byte in it.
    GetForbiddenByte,
    Version,
    Stats,
    /// `set`, `add`, `replace`, `append` or `prepend`, with a data block.
    RefusedStorage,
    /// `cas`, with a data block.
    RefusedCas,
    /// `delete`, `incr`, `decr`, `touch`, `flush_all` or `verbosity`.
    RefusedCommand,
    UnknownCommand,
    EmptyLine,
    Quit,
}

/// How often the census draws each [`EdgeOp`]: a field per operation, so an operation without
/// a weight does not compile (see [`EdgeOpWeights::weight`]).
#[derive(Clone, Copy, Debug)]
pub struct EdgeOpWeights {
    pub get_written: u32,
    pub get_census_keys: u32,
    pub get_absent: u32,
    pub get_key_too_long: u32,
    pub get_too_many_keys: u32,
    pub get_forbidden_byte: u32,
    pub version: u32,
    pub stats: u32,
    pub refused_storage: u32,
    pub refused_cas: u32,
    pub refused_command: u32,
    pub unknown_command: u32,
    pub empty_line: u32,
    pub quit: u32,
}

impl EdgeOpWeights {
    /// Reads, hits and misses most; every refusal and the counters often enough that a run of
    /// a minute sends each several times.
    pub const DEFAULT: EdgeOpWeights = EdgeOpWeights {
        get_written: 8,
        get_census_keys: 6,
        get_absent: 6,
        get_key_too_long: 1,
        get_too_many_keys: 1,
        get_forbidden_byte: 1,
        version: 1,
        stats: 4,
        refused_storage: 2,
        refused_cas: 2,
        refused_command: 2,
        unknown_command: 1,
        empty_line: 1,
        quit: 1,
    };

    /// `op`'s weight, at least one (asserted: every seed can reach every operation).
    pub fn weight(&self, op: EdgeOp) -> u32 {
        let mut weights = *self;
        let weight = *weights.weight_mut(op);
        assert!(weight >= 1, "every census operation has a weight of at least one: {op:?}");
        weight
    }

    /// `op`'s field: one match over every operation, so a new one does not compile without
    /// its weight.
    fn weight_mut(&mut self, op: EdgeOp) -> &mut u32 {
        match op {
            EdgeOp::GetWritten => &mut self.get_written,
            EdgeOp::GetCensusKeys => &mut self.get_census_keys,
            EdgeOp::GetAbsent => &mut self.get_absent,
            EdgeOp::GetKeyTooLong => &mut self.get_key_too_long,
            EdgeOp::GetTooManyKeys => &mut self.get_too_many_keys,
            EdgeOp::GetForbiddenByte => &mut self.get_forbidden_byte,
            EdgeOp::Version => &mut self.version,
            EdgeOp::Stats => &mut self.stats,
            EdgeOp::RefusedStorage => &mut self.refused_storage,
            EdgeOp::RefusedCas => &mut self.refused_cas,
            EdgeOp::RefusedCommand => &mut self.refused_command,
            EdgeOp::UnknownCommand => &mut self.unknown_command,
            EdgeOp::EmptyLine => &mut self.empty_line,
            EdgeOp::Quit => &mut self.quit,
        }
    }

    /// The swarm's weights: each operation's default drawn by `census::swarmed_weight`.
    pub fn swarmed(rng: &mut ChaCha8Rng) -> EdgeOpWeights {
        let mut weights = EdgeOpWeights::DEFAULT;
        for op in <EdgeOp as strum::IntoEnumIterator>::iter() {
            let weight = weights.weight_mut(op);
            *weight = super::swarmed_weight(rng, *weight);
        }
        weights
    }
}

/// One edge session.
#[derive(Clone, Debug)]
pub struct EdgeSpec {
    pub name: String,
    pub edge: String,
    pub addr: SocketAddr,
    pub rate_per_s: f64,
    /// Every key the writers use.
    pub writer_keys: Arc<[String]>,
    /// How often it draws each operation.
    pub weights: EdgeOpWeights,
    pub seed: u64,
}

/// A session's connection: its reader, and the last `stats` read on it.
struct Session {
    conn: BufReader<TcpStream>,
    last_counters: Option<CountersRead>,
}

/// Runs one edge session for ever: an operation per interval, on one connection kept open
/// until the node closes it, a reply breaks the contract (the stream can no longer be
/// trusted) or `quit`.
pub async fn edge_census(spec: EdgeSpec, recorder: SharedRecorder, judges: CensusJudges) {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let ops: Vec<EdgeOp> = <EdgeOp as strum::IntoEnumIterator>::iter().collect();
    let weights = spec.weights;
    let interval = std::time::Duration::from_secs_f64(1.0 / spec.rate_per_s);
    let mut session: Option<Session> = None;
    loop {
        tokio::time::sleep(interval).await;
        let op = draw(&mut rng, &ops, |op| weights.weight(op));
        if session.is_none()
            && let Ok(Ok(stream)) = tokio::time::timeout(ANSWER_TIMEOUT, TcpStream::connect(spec.addr)).await
        {
            session = Some(Session { conn: BufReader::new(stream), last_counters: None });
        }
        let Some(open) = session.as_mut() else { continue };
        let request = Request::draw(op, &mut rng, &spec);
        let judged = tokio::time::timeout(ANSWER_TIMEOUT, request.send(open, &spec, &recorder, &judges))
            .await
            .unwrap_or(Err(Breach::Lost));
        match judged {
            Ok(Goes::On) => {}
            Ok(Goes::Closed) | Err(Breach::Lost) => session = None,
            Err(Breach::Contract(message)) => {
                violation(&recorder, &spec.edge, format!("{} ({}): {message}", request.shown, request.what));
                session = None;
            }
        }
    }
}

/// Whether the connection is still usable after a request.
enum Goes {
    On,
    Closed,
}

/// One request as the census sends it.
struct Request {
    op: EdgeOp,
    /// The bytes before the `version` that follows.
    bytes: Vec<u8>,
    /// The keys of a get.
    keys: Vec<Vec<u8>>,
    cas: bool,
    /// The request as a message shows it.
    shown: String,
    /// What it is, in words.
    what: &'static str,
}

impl Request {
    fn draw(op: EdgeOp, rng: &mut ChaCha8Rng, spec: &EdgeSpec) -> Request {
        let cas = rng.random_bool(0.5);
        let plain =
            |bytes: Vec<u8>, what| Request { op, shown: shown(&bytes), bytes, keys: Vec::new(), cas: false, what };
        match op {
            EdgeOp::GetWritten
            | EdgeOp::GetCensusKeys
            | EdgeOp::GetAbsent
            | EdgeOp::GetKeyTooLong
            | EdgeOp::GetTooManyKeys
            | EdgeOp::GetForbiddenByte => {
                let (keys, what) = get_keys(op, rng, spec);
                let mut bytes = if cas { b"gets".to_vec() } else { b"get".to_vec() };
                for key in &keys {
                    bytes.push(b' ');
                    bytes.extend_from_slice(key);
                }
                bytes.extend_from_slice(b"\r\n");
                Request { op, shown: shown(&bytes), bytes, keys, cas, what }
            }
            EdgeOp::Version => plain(b"version\r\n".to_vec(), "version"),
            EdgeOp::Stats => plain(b"stats\r\n".to_vec(), "stats"),
            EdgeOp::RefusedStorage | EdgeOp::RefusedCas => plain(
                storage_command(op == EdgeOp::RefusedCas, rng),
                "a write command with its data block, which a read-only edge refuses",
            ),
            EdgeOp::RefusedCommand => {
                let line = ["delete ~", "incr ~ 1", "decr ~ 1", "touch ~ 10", "flush_all", "verbosity 1"]
                    [rng.random_range(0..6)];
                plain(format!("{line}\r\n").into_bytes(), "a write command, which a read-only edge refuses")
            }
            EdgeOp::UnknownCommand => plain(b"frobnicate ~\r\n".to_vec(), "an unknown command"),
            EdgeOp::EmptyLine => plain(b"\r\n".to_vec(), "an empty line"),
            EdgeOp::Quit => plain(b"quit\r\n".to_vec(), "quit"),
        }
    }

    /// Sends the request (and the `version` that follows it) and judges what comes back.
    async fn send(
        &self,
        session: &mut Session,
        spec: &EdgeSpec,
        recorder: &SharedRecorder,
        judges: &CensusJudges,
    ) -> Judged<Goes> {
        let ledgers = &judges.ledgers;
        let edge = spec.edge.as_str();
        let before = ledgers.at(edge);
        let refused = !matches!(
            self.op,
            EdgeOp::GetWritten
                | EdgeOp::GetCensusKeys
                | EdgeOp::GetAbsent
                | EdgeOp::Version
                | EdgeOp::Stats
                | EdgeOp::Quit
        );
        let get = !self.keys.is_empty();
        if refused {
            ledgers.refusal_sent(edge);
        }
        if get {
            ledgers.get_sent(edge, self.keys.len() as u64);
        }
        let mut bytes = self.bytes.clone();
        if self.op != EdgeOp::Quit {
            bytes.extend_from_slice(b"version\r\n");
        }
        let stream = session.conn.get_mut();
        stream.write_all(&bytes).await.map_err(|_| Breach::Lost)?;
        stream.flush().await.map_err(|_| Breach::Lost)?;
        let mut wire = Wire { conn: &mut session.conn };
        match self.op {
            EdgeOp::Quit => return closed(&mut session.conn).await,
            // Its own answer; the `version` that follows it has one more.
            EdgeOp::Version => wire.in_step("the census's previous request").await?,
            EdgeOp::Stats => {
                let counters = stats(&mut wire).await?;
                let read = CountersRead { sent: before, received: ledgers.at(edge), counters };
                if let Some(earlier) = &session.last_counters
                    && let Some(wrong) = judge_counters(earlier, &read)
                {
                    return breach(wrong);
                }
                session.last_counters = Some(read);
            }
            _ if get => {
                let answer = wire.get_reply(&self.keys, self.cas).await?;
                self.judge_get(answer, spec, recorder, judges)?;
            }
            _ => match wire.classified().await? {
                Line::Error(error) => ledgers.refusal_answered(edge, !error.starts_with("SERVER_ERROR")),
                Line::End => return breach("answered END, as if it were a get"),
                Line::Other(line) => return breach(format!("answered {}, not an error", shown(&line))),
            },
        }
        wire.in_step(&self.shown).await?;
        Ok(Goes::On)
    }

    /// Judges a get's answer and tells the ledger and the `reads` checker.
    fn judge_get(
        &self,
        answer: Result<Vec<super::wire::Item>, String>,
        spec: &EdgeSpec,
        recorder: &SharedRecorder,
        judges: &CensusJudges,
    ) -> Judged<()> {
        let (ledgers, edge) = (&judges.ledgers, spec.edge.as_str());
        let refusal_expected = !matches!(self.op, EdgeOp::GetWritten | EdgeOp::GetCensusKeys | EdgeOp::GetAbsent);
        let items = match answer {
            Err(error) if refusal_expected => {
                ledgers.get_failed(edge, self.keys.len() as u64);
                ledgers.refusal_answered(edge, !error.starts_with("SERVER_ERROR"));
                return Ok(());
            }
            Err(error) if error.starts_with("SERVER_ERROR") => {
                ledgers.get_failed(edge, self.keys.len() as u64);
                return Ok(());
            }
            Err(error) => return breach(format!("answered {error:?} to a well-formed get")),
            Ok(items) => items,
        };
        ledgers.get_answered(edge, self.keys.len() as u64, items.len() as u64);
        match self.op {
            EdgeOp::GetCensusKeys => {
                if let Some(item) = items.iter().find(|item| !judges.sent.was_sent(&item.key, &item.data)) {
                    return breach(format!(
                        "{} holds {}, which was never written to it",
                        shown(&item.key),
                        shown(&item.data)
                    ));
                }
            }
            EdgeOp::GetWritten if !spec.writer_keys.is_empty() => {
                let at_ms = recorder.locked().now_ms();
                for key in &self.keys {
                    let item = items.iter().find(|item| &item.key == key);
                    let key = std::str::from_utf8(key).expect("writer keys are UTF-8");
                    let observed = Observed {
                        at_ms,
                        reader: &spec.name,
                        node: &spec.edge,
                        key,
                        value: item.map(|item| item.data.as_slice()),
                        token: item.and_then(|item| item.cas).unwrap_or(0),
                    };
                    if let Some(found) = judges.reads.lock().read(observed) {
                        recorder.locked().record(found);
                    }
                }
            }
            _ => {
                if let Some(item) = items.first() {
                    return breach(format!("a value for {}, a key nobody writes", shown(&item.key)));
                }
            }
        }
        Ok(())
    }
}

/// The keys of a get `op` asks for, and what the get is, in words.
fn get_keys(op: EdgeOp, rng: &mut ChaCha8Rng, spec: &EdgeSpec) -> (Vec<Vec<u8>>, &'static str) {
    let distinct = |rng: &mut ChaCha8Rng, n: usize, pick: &mut dyn FnMut(&mut ChaCha8Rng) -> Vec<u8>| {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for _ in 0..n {
            let key = pick(rng);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    };
    match op {
        EdgeOp::GetWritten if !spec.writer_keys.is_empty() => {
            let n = rng.random_range(1..=4);
            let written = &spec.writer_keys;
            let keys = distinct(rng, n, &mut |rng| written[rng.random_range(0..written.len())].as_bytes().to_vec());
            (keys, "a get of keys the writers use")
        }
        EdgeOp::GetCensusKeys => {
            let all = census_keys();
            let n = rng.random_range(1..=3);
            (distinct(rng, n, &mut |rng| all[rng.random_range(0..all.len())].clone()), "a get of the census's own keys")
        }
        EdgeOp::GetKeyTooLong => {
            let mut keys = vec![absent_key(rng)];
            keys.insert(rng.random_range(0..=1), vec![b'!'; qs_node::limits::KEY_BYTES_MAX + 1]);
            (keys, "a get naming a 251-byte key, over the protocol's limit")
        }
        EdgeOp::GetTooManyKeys => {
            let keys = (0..=qs_node::memcached::KEYS_PER_GET_MAX).map(|n| format!("!{n}").into_bytes()).collect();
            (keys, "a get of one key more than KEYS_PER_GET_MAX")
        }
        EdgeOp::GetForbiddenByte => {
            let control = [0x01, 0x07, 0x0b, 0x7f][rng.random_range(0..4)];
            (vec![vec![b'!', control, b'x']], "a get of a key with a control byte")
        }
        // Keys nobody writes; a get of writer keys in a run without writers too.
        _ => {
            let n = rng.random_range(1..=4);
            (distinct(rng, n, &mut absent_key), "a get of keys nobody writes")
        }
    }
}

/// A storage command (`cas` when `cas`, else `set`, `add`, `replace`, `append` or `prepend`)
/// of a census key, with its data block.
fn storage_command(cas: bool, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let command = if cas { "cas" } else { ["set", "add", "replace", "append", "prepend"][rng.random_range(0..5)] };
    let keys = census_keys();
    let key = &keys[rng.random_range(0..keys.len())];
    // A refused write's data block is skipped, never stored: a few KiB say as much.
    let data = census_value(rng, false, 4096);
    let mut bytes = format!("{command} ").into_bytes();
    bytes.extend_from_slice(key);
    bytes.extend_from_slice(format!(" 0 0 {}", data.len()).as_bytes());
    if cas {
        bytes.extend_from_slice(format!(" {}", rng.random_range(1..1_000_000u64)).as_bytes());
    }
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(&data);
    bytes.extend_from_slice(b"\r\n");
    bytes
}

/// A `stats` reply: its lines up to `END`, no name twice, `get_hits` and `get_misses` present.
async fn stats<R: tokio::io::AsyncBufRead + Unpin>(wire: &mut Wire<'_, R>) -> Judged<Counters> {
    let mut names = std::collections::BTreeMap::<Vec<u8>, Vec<u8>>::new();
    loop {
        let line = wire.line().await?;
        if line == b"END" {
            break;
        }
        let Some(rest) = line.strip_prefix(b"STAT ") else {
            return breach(format!("a stats line {}, not `STAT <name> <value>`", shown(&line)));
        };
        let Some(space) = rest.iter().position(|&b| b == b' ').filter(|&at| at > 0) else {
            return breach(format!("a stats line {} without a name and a value", shown(&line)));
        };
        if names.insert(rest[..space].to_vec(), rest[space + 1..].to_vec()).is_some() {
            return breach(format!("stats named {} twice", shown(&rest[..space])));
        }
    }
    let counter = |name: &str| -> Judged<Option<u64>> {
        match names.get(name.as_bytes()) {
            None => Ok(None),
            Some(value) => match super::wire::decimal(value) {
                Some(n) => Ok(Some(n)),
                None => breach(format!("stat {name} is {}, not a count", shown(value))),
            },
        }
    };
    let (Some(hits), Some(misses)) = (counter("get_hits")?, counter("get_misses")?) else {
        return breach("stats without get_hits and get_misses");
    };
    Ok(Counters { hits, misses, refusals: counter("bogus_requests")? })
}

/// After `quit`: the connection must close with nothing answered.
async fn closed(conn: &mut BufReader<TcpStream>) -> Judged<Goes> {
    let mut rest = Vec::new();
    match conn.read_to_end(&mut rest).await {
        Ok(_) if rest.is_empty() => Ok(Goes::Closed),
        Ok(_) => breach(format!("answered quit with {}", shown(&rest))),
        Err(_) => Err(Breach::Lost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> EdgeSpec {
        EdgeSpec {
            name: "census@edge-1".into(),
            edge: "edge-1".into(),
            addr: "10.0.2.1:11211".parse().expect("an address"),
            rate_per_s: 2.0,
            writer_keys: vec!["cfg0:1".to_string(), "cfg0:2".to_string()].into(),
            weights: EdgeOpWeights::DEFAULT,
            seed: 1,
        }
    }

    #[test]
    fn the_swarm_leans_on_some_operations_and_never_drops_one() {
        let ops: Vec<EdgeOp> = <EdgeOp as strum::IntoEnumIterator>::iter().collect();
        let drawn: Vec<EdgeOpWeights> =
            (0..20).map(|seed| EdgeOpWeights::swarmed(&mut ChaCha8Rng::seed_from_u64(seed))).collect();
        for weights in &drawn {
            for &op in &ops {
                let default = EdgeOpWeights::DEFAULT.weight(op);
                assert!([1, default, default * 4].contains(&weights.weight(op)), "{op:?}: {weights:?}");
            }
        }
        let leaned = |op: EdgeOp| drawn.iter().filter(|w| w.weight(op) > EdgeOpWeights::DEFAULT.weight(op)).count();
        assert!(ops.iter().all(|&op| leaned(op) > 0), "each operation quadrupled on some of 20 seeds");
        let starved = drawn.iter().filter(|w| w.weight(EdgeOp::GetWritten) == 1).count();
        assert!(starved > 0, "the commonest operation cut to one on some of 20 seeds");
    }

    #[test]
    fn every_operation_is_drawn_and_every_request_is_whole_lines() {
        let ops: Vec<EdgeOp> = <EdgeOp as strum::IntoEnumIterator>::iter().collect();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..2_000 {
            let op = draw(&mut rng, &ops, |op| EdgeOpWeights::DEFAULT.weight(op));
            seen.insert(op);
            let request = Request::draw(op, &mut rng, &spec());
            assert!(request.bytes.ends_with(b"\r\n"), "{op:?}: {}", request.shown);
            assert_eq!(request.keys.is_empty(), !request.bytes.starts_with(b"get"), "{op:?}");
        }
        assert_eq!(seen.len(), ops.len(), "every operation within 2 000 draws: {seen:?}");
    }

    #[test]
    fn a_stats_reply_gives_its_counters_and_refuses_what_is_not_one() {
        let stats_of = |reply: &[u8]| {
            let mut conn = reply;
            let mut wire = Wire { conn: &mut conn };
            let mut future = std::pin::pin!(stats(&mut wire));
            match future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
                std::task::Poll::Ready(out) => out,
                std::task::Poll::Pending => panic!("a read from a byte slice waited"),
            }
        };
        let counters = stats_of(b"STAT version 1\r\nSTAT get_hits 5\r\nSTAT get_misses 7\r\nEND\r\n").expect("stats");
        assert_eq!(counters, Counters { hits: 5, misses: 7, refusals: None });
        assert!(stats_of(b"STAT get_hits 5\r\nEND\r\n").is_err(), "no get_misses");
        assert!(stats_of(b"STAT get_hits 5\r\nSTAT get_hits 6\r\nSTAT get_misses 1\r\nEND\r\n").is_err(), "twice");
        assert!(stats_of(b"STAT get_hits five\r\nSTAT get_misses 1\r\nEND\r\n").is_err(), "not a count");
    }
}
