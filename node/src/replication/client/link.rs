//! One connection to a source, from the hello to whatever ends it: a [`Link`] in one of two
//! [`LinkPhase`]s.
//!
//! Guarantees:
//! - The source speaks in the protocol's order or is left as a violation: a welcome (or a
//!   refusal) first, then entries, keepalives and at most one "out of retention" — never a second
//!   welcome, never an entry before the welcome. Nothing from a source out of order is applied.
//! - A link goes from greeting to following once ([`Link::enter`] asserts it): the
//!   [`NodeEvent::SourceChanged`] that says which source this node follows, and every
//!   `set_ready`, happen only once the source has welcomed it.
//! - Every wait has a deadline: the welcome within `staleness_failover` (at most
//!   [`WELCOME_WITHIN`]), any frame within `staleness_failover` (unless the planted
//!   `never_leave_stale_source` lifts it), and a stalled stream — keepalives saying the source
//!   holds entries we lack, none arriving — is left after `staleness_failover`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::mpsc::Receiver;
use tokio::time::{Instant, timeout};

use super::apply::{ApplyFailed, apply_frame, decode_frame};
use super::write_legacy_cursor_at;
use crate::entry::DatabaseId;
use crate::metrics::Metrics;
use crate::observe::{NodeEvent, SourceChange};
use crate::replication::protocol::{KEEPALIVE_INTERVAL, SOURCE_QUIET, WELCOME_WITHIN};
use crate::replication::protocol::{Message, ProtocolError, UpstreamStatus, Want, read_message, write_message};
use crate::replication::staleness::{Heard, Staleness, Verdict};
use crate::state::{DiskOp, NodeState};

/// Why following one source ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// Could not connect, or the connection broke.
    Disconnected(String),
    /// The source refused us (reason logged and counted).
    Refused(String),
    /// Nothing newer arrived within the staleness threshold; `better` is a source a probe found
    /// healthy and ahead of us, to follow next.
    Stale { better: Option<SocketAddr> },
    /// The source sent something that breaks the chain or the protocol.
    Violation(String),
    /// The source no longer has the entry we need next.
    OutOfRetention { first_retained: u64 },
    /// Our own store holds a damaged value: we re-bootstrap.
    Damaged,
    /// Our own store failed a commit (a disk error): no fault of the source's. The store is
    /// settled (reopened) before the next apply.
    StoreFailed(String),
}

impl Ended {
    /// Why the source was left, for the next source's [`NodeEvent::SourceChanged`].
    pub(super) fn reason(&self) -> SourceChange {
        match self {
            Ended::Disconnected(_) => SourceChange::Disconnected,
            Ended::Refused(_) => SourceChange::Refused,
            Ended::Stale { .. } => SourceChange::Stale,
            Ended::Violation(_) => SourceChange::Violation,
            Ended::OutOfRetention { .. } => SourceChange::OutOfRetention,
            Ended::Damaged => SourceChange::Damaged,
            Ended::StoreFailed(_) => SourceChange::StoreFailed,
        }
    }
}

/// How long the planted `never_leave_stale_source` bug waits for a silent source: for ever, in
/// practice (a year).
const STALE_SOURCE_FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// Where a link stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LinkPhase {
    /// The hello is sent; the source has not welcomed us. Only a welcome or a refusal may come.
    Greeting,
    /// Welcomed: entries, keepalives, and "out of retention" may come.
    Following,
}

/// Connects to `source` and applies what it streams until something ends it; asks for entries
/// after `resume_from` instead of the applied index when given (the legacy cursor).
/// `left_because` says why the previous source was left (for the trace).
pub(super) async fn follow(
    state: &NodeState,
    source: SocketAddr,
    resume_from: Option<u64>,
    left_because: SourceChange,
) -> Ended {
    let mut link = Link::new(state, source, left_because);
    let mut stream = match crate::replication::dial::dial(state, source, link.welcome_within).await {
        Ok(stream) => stream,
        Err(e) => return Ended::Disconnected(e.to_string()),
    };
    let hello = Message::Hello(state.hello(Want::Log, resume_from));
    match timeout(link.staleness, write_message(&mut stream, &hello)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Ended::Disconnected(format!("hello: {e}")),
        Err(_) => return Ended::Disconnected("sending the hello timed out".into()),
    }
    // Frames arrive through a reader task, so that waiting for one can be cut short to judge
    // staleness without tearing a frame in half (`read_message` is not cancel-safe).
    let (frames, mut arriving) = tokio::sync::mpsc::channel(1);
    let _reader = AbortOnDrop(tokio::spawn(async move {
        loop {
            let frame = read_message(&mut stream).await;
            let last = !matches!(frame, Ok(Some(_)));
            if frames.send(frame).await.is_err() || last {
                return;
            }
        }
    }));
    loop {
        if state.is_damaged() {
            return Ended::Damaged;
        }
        let ended = match timeout(KEEPALIVE_INTERVAL, arriving.recv()).await {
            Err(_) => link.quiet(&arriving).await,
            Ok(Some(Ok(Some(message)))) => link.heard(message, &arriving).await,
            Ok(frame) => Some(Link::broken(frame)),
        };
        if let Some(ended) = ended {
            return ended;
        }
    }
}

/// What the reader task hands over: a frame, the end of the stream, or why reading failed.
type Frame = Result<Option<Message>, ProtocolError>;

/// One connection's state, judged frame by frame and at each quiet keepalive interval.
struct Link<'a> {
    state: &'a NodeState,
    source: SocketAddr,
    /// Why the previous source was left, said when this one welcomes us.
    left_because: SourceChange,
    phase: LinkPhase,
    /// The other configured sources: where a probe looks for a healthy one ahead of us.
    others: Vec<SocketAddr>,
    judgement: Staleness,
    /// The source's applied index when it welcomed us: caught up with it, we are ready.
    source_head: u64,
    heard_at: Instant,
    /// What the source's last keepalive said about its own path (healthy until it says).
    last_said: UpstreamStatus,
    /// Whether a verdict to leave waited once for the frames that arrived while we judged.
    deferred: bool,
    /// Since when the source's keepalives have said it holds entries we lack (none arriving).
    behind_since: Option<Instant>,
    staleness: Duration,
    welcome_within: Duration,
    /// How long the source may send nothing at all.
    silence_allowed: Duration,
}

impl<'a> Link<'a> {
    fn new(state: &'a NodeState, source: SocketAddr, left_because: SourceChange) -> Link<'a> {
        let staleness = state.config.replication.staleness_failover;
        Link {
            state,
            source,
            left_because,
            phase: LinkPhase::Greeting,
            others: state.config.sources().into_iter().filter(|s| *s != source).collect(),
            judgement: Staleness::default(),
            source_head: u64::MAX,
            heard_at: Instant::now(),
            last_said: UpstreamStatus::Healthy,
            deferred: false,
            behind_since: None,
            staleness,
            welcome_within: staleness.min(WELCOME_WITHIN),
            // PLANTED BUG (legacy): without a staleness timeout a source that stops sending is
            // followed for as long as its connection stays open.
            silence_allowed: if state.config.planted().never_leave_stale_source {
                STALE_SOURCE_FOREVER
            } else {
                staleness
            },
        }
    }

    /// The one transition: greeting to following, once.
    fn enter(&mut self, next: LinkPhase) {
        assert!(
            self.phase == LinkPhase::Greeting && next == LinkPhase::Following,
            "a replication link goes from greeting to following once, not {:?} to {next:?}",
            self.phase
        );
        self.phase = next;
    }

    /// The reader task ended or failed: why the link is broken.
    fn broken(frame: Option<Frame>) -> Ended {
        match frame {
            None => Ended::Disconnected("the connection's reader ended".into()),
            Some(Ok(None)) => Ended::Disconnected("source closed the connection".into()),
            Some(Err(e)) => Ended::Disconnected(e.to_string()),
            Some(Ok(Some(message))) => unreachable!("a frame is heard, not broken: {}", message.frame_type()),
        }
    }

    /// Nothing for a keepalive interval: judges a quiet source.
    async fn quiet(&mut self, arriving: &Receiver<Frame>) -> Option<Ended> {
        let silent = self.heard_at.elapsed();
        if self.phase == LinkPhase::Greeting && silent >= self.welcome_within {
            return Some(Ended::Disconnected(format!("no welcome within {:?}", self.welcome_within)));
        }
        if silent >= self.silence_allowed {
            return Some(Ended::Stale { better: None });
        }
        if silent > SOURCE_QUIET {
            return self.judge(Heard::Quiet, arriving).await;
        }
        None
    }

    /// Acts on one frame from the source, in the protocol's order.
    async fn heard(&mut self, message: Message, arriving: &Receiver<Frame>) -> Option<Ended> {
        self.heard_at = Instant::now();
        match (self.phase, message) {
            (_, Message::Refused { reason, detail }) => {
                let metrics = &self.state.metrics;
                metrics.refusals_received.get_or_create(&Metrics::label("reason", &format!("{reason:?}"))).inc();
                tracing::warn!(source = %self.source, ?reason, %detail, "source refused us");
                Some(Ended::Refused(format!("{reason:?}: {detail}")))
            }
            (LinkPhase::Greeting, Message::Welcome { db_id, applied_index, root_ms, .. }) => {
                self.welcomed(db_id, applied_index, root_ms)
            }
            (LinkPhase::Greeting, other) => {
                Some(violation(&self.state.metrics, format!("{} before the source's welcome", other.frame_type())))
            }
            (LinkPhase::Following, Message::Entries { entries, root_ms }) => {
                self.entries(entries, root_ms, arriving).await
            }
            (LinkPhase::Following, Message::Keepalive { upstream, applied_index, root_ms }) => {
                self.keepalive(upstream, applied_index, root_ms, arriving).await
            }
            (LinkPhase::Following, Message::OutOfRetention { requested, first_retained }) => {
                self.state.metrics.out_of_retention.inc();
                tracing::warn!(source = %self.source, requested, first_retained, "source no longer holds the entries we need");
                Some(Ended::OutOfRetention { first_retained })
            }
            (LinkPhase::Following, other) => Some(violation(
                &self.state.metrics,
                format!("unexpected {} while following the log", other.frame_type()),
            )),
        }
    }

    fn welcomed(&mut self, db_id: DatabaseId, applied_index: u64, root_ms: u64) -> Option<Ended> {
        let state = self.state;
        if db_id != state.config.database_id {
            return Some(violation(&state.metrics, format!("source holds database {db_id}")));
        }
        self.enter(LinkPhase::Following);
        state.root_clock.heard(root_ms);
        state.set_upstream_ok(true);
        state.set_followed_a_source();
        state.heard_from_source(Some(0));
        self.source_head = applied_index;
        tracing::info!(node = %state.config.name, source = %self.source, reason = self.left_because.as_str(), "following a source");
        state.report(NodeEvent::SourceChanged { source: self.source, reason: self.left_because });
        None
    }

    async fn entries(&mut self, frames: Vec<Vec<u8>>, root_ms: u64, arriving: &Receiver<Frame>) -> Option<Ended> {
        let state = self.state;
        state.root_clock.heard(root_ms);
        state.heard_from_source(None);
        self.behind_since = None;
        let entries = match decode_frame(frames) {
            Ok(entries) => entries,
            Err(reason) => return Some(violation(&state.metrics, reason)),
        };
        if state.config.planted().cursor_written_before_apply
            && let Some(last) = entries.last()
        {
            // PLANTED BUG (legacy): the position is saved on receipt, before the entries are
            // applied; a crash in between resumes past entries never applied.
            write_legacy_cursor_at(state, last.index);
        }
        let bytes: u64 = entries.iter().map(|e| e.logical_bytes()).sum();
        state.disk_io(DiskOp::Commit { bytes }).await;
        state.pages_io(entries.iter().flat_map(|e| e.ops.iter())).await;
        match apply_frame(state, &entries) {
            Ok(()) => {}
            Err(ApplyFailed::Refused(refusal)) => return Some(violation(&state.metrics, refusal.to_string())),
            Err(ApplyFailed::Store(_)) if state.is_damaged() => return Some(Ended::Damaged),
            Err(ApplyFailed::Store(e)) => {
                let reason = format!("applying: {e}");
                tracing::error!(node = %state.config.name, %reason, "applying entries failed in this node's own store");
                return Some(Ended::StoreFailed(reason));
            }
        }
        if state.read_store(|s| s.applied_index()) >= self.source_head {
            state.set_ready(); // caught up with the source's head at connect time
        }
        // A source streaming only old entries (its disk too slow to keep up) sends no keepalive
        // to judge it by: judge it here, by what it said last.
        self.judge(Heard::Said(self.last_said), arriving).await
    }

    async fn keepalive(
        &mut self,
        upstream: UpstreamStatus,
        applied_index: u64,
        root_ms: u64,
        arriving: &Receiver<Frame>,
    ) -> Option<Ended> {
        let state = self.state;
        state.root_clock.heard(root_ms);
        self.last_said = upstream;
        state.heard_from_source(Some(upstream.wire()));
        let ours = state.read_store(|s| s.applied_index());
        if applied_index > ours {
            // The source holds entries we lack, yet sends keepalives instead of them: a stalled
            // stream. A moment of it is a race (it applied one as the keepalive left);
            // `staleness_failover` of it is a source to leave, not wait on.
            let since = *self.behind_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= self.staleness {
                state.metrics.failovers.inc();
                tracing::warn!(node = %state.config.name, source = %self.source, source_index = applied_index, ours, waited = ?since.elapsed(), "the source holds entries we lack but has sent none: leaving it");
                return Some(Ended::Stale { better: None });
            }
        } else {
            self.behind_since = None;
            state.set_ready(); // the source has nothing newer
        }
        self.judge(Heard::Said(upstream), arriving).await
    }

    /// Asks the staleness judgement; leaves when it says so, unless frames that arrived while
    /// it judged (or probed) are still to be read — once: they may be the entries that make us
    /// fresh, and a source that keeps streaming old entries is left at the next verdict.
    async fn judge(&mut self, heard: Heard, arriving: &Receiver<Frame>) -> Option<Ended> {
        let Verdict::Leave { better } = self.judgement.judge(self.state, heard, &self.others).await else {
            return None;
        };
        if arriving.is_empty() || self.deferred {
            return Some(Ended::Stale { better });
        }
        self.deferred = true;
        None
    }
}

/// Aborts the task when dropped: a connection's reader never outlives its `follow`.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn violation(metrics: &Metrics, reason: String) -> Ended {
    metrics.chain_violations.inc();
    tracing::error!(%reason, "replication source violated the chain or the protocol; disconnecting");
    Ended::Violation(reason)
}
