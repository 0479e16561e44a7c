//! The `impostor` fault: a peer that is not a root group member asks a member to take a Raft
//! link from it.
//!
//! Fault model: from a host of its own (`IMPOSTOR_IP`, outside every tier), once a second for
//! the fault's `duration`, the impostor dials the target member's replication port with its
//! `credentials` — a replica's stolen certificate and key, a certificate from a CA the nodes
//! do not trust, one the run's CA signed that expired in 2001, or plaintext — and sends a
//! hello asking to speak Raft as another member (`Want::Raft`). Welcomed, it sends what an
//! attacker would: a heartbeat from that member in a far later term, which makes any member
//! that takes it a follower of the impostor's claim (a leader is deposed).
//!
//! Each attempt is one `admission` event: whether the member welcomed it, what it answered,
//! and whether the refusal showed in the member's own counters (`refused_handshakes` for a
//! refused hello, `tls_handshake_failures` on the server side for a refused handshake) — an
//! operator must see that someone tried. The `admission` checker judges them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use qs_node::metrics::Metrics;
use qs_node::replication::protocol::{ClientHello, Message, RefusalReason, Want, read_message, write_message};
use qs_node::state::NodeState;
use qs_node::tls::{HandshakeFailure, Tls, TlsConfig};
use strum::IntoEnumIterator;

use crate::scenario::Credentials;
use crate::sync::Locked;
use crate::trace::{Event, SharedRecorder};

/// The impostor's host: outside every tier's and the clients' addresses.
pub const IMPOSTOR_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 255, 2));

/// How often the impostor tries again while its fault is on.
const ATTEMPT_EVERY: Duration = Duration::from_secs(1);
/// How long it waits for a handshake or an answer to its hello.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// The term of its forged heartbeat: far past any a run reaches.
const FORGED_TERM: u64 = 1 << 40;

/// One impostor, as its fault started.
pub struct Impostor {
    /// The member it dials, by name, and that member's id and replication address.
    pub target: String,
    pub target_id: u64,
    pub address: SocketAddr,
    /// The member it claims to be.
    pub claimed: u64,
    pub credentials: Credentials,
    /// The TLS files it presents (None: plaintext).
    pub tls: Option<TlsConfig>,
    pub database_id: qs_node::DatabaseId,
    pub recorder: SharedRecorder,
    /// The target's running process, when it runs: where its counters are read.
    pub state: Box<dyn Fn() -> Option<Arc<NodeState>> + Send + Sync>,
}

impl std::fmt::Debug for Impostor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Impostor")
            .field("target", &self.target)
            .field("claimed", &self.claimed)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

/// What one attempt came to.
struct Attempt {
    admitted: bool,
    detail: String,
}

impl Impostor {
    /// Tries every [`ATTEMPT_EVERY`] for `duration`.
    pub async fn run(self, duration: Duration) {
        let until = madsim::time::Instant::now() + duration;
        while madsim::time::Instant::now() < until {
            let before = self.refusals_counted();
            let attempt = self.attempt().await;
            // The member counts a refusal as it answers it: read the counters a moment later.
            madsim::time::sleep(Duration::from_millis(100)).await;
            let counted = !attempt.admitted && self.refusals_counted() > before;
            {
                let mut recorder = self.recorder.locked();
                let at_ms = recorder.now_ms();
                recorder.record(Event::Admission {
                    at_ms,
                    node: self.target.clone(),
                    claimed: self.claimed,
                    credentials: self.credentials.describe().to_string(),
                    admitted: attempt.admitted,
                    counted,
                    detail: attempt.detail,
                });
            }
            madsim::time::sleep(ATTEMPT_EVERY).await;
        }
    }

    /// The refusals the target's counters show now: refused hellos, and handshakes it failed
    /// as a replication server. None counted while it is down.
    fn refusals_counted(&self) -> u64 {
        let Some(state) = (self.state)() else { return 0 };
        let metrics = &state.metrics;
        let hellos: u64 = RefusalReason::ALL
            .iter()
            .map(|reason| {
                metrics.refused_handshakes.get_or_create(&Metrics::label("reason", &format!("{reason:?}"))).get()
            })
            .sum();
        let handshakes: u64 = HandshakeFailure::iter()
            .map(|reason| {
                let labels = vec![
                    ("listener".to_string(), "replication".to_string()),
                    ("side".to_string(), "server".to_string()),
                    ("reason".to_string(), reason.name().to_string()),
                ];
                metrics.tls_handshake_failures.get_or_create(&labels).get()
            })
            .sum();
        hellos + handshakes
    }

    async fn attempt(&self) -> Attempt {
        let refused = |detail: String| Attempt { admitted: false, detail };
        let stream = match tokio::net::TcpStream::connect(self.address).await {
            Ok(stream) => stream,
            Err(e) => return refused(format!("could not connect: {e}")),
        };
        match &self.tls {
            None => self.ask(stream).await,
            Some(config) => {
                let tls = match Tls::load(config) {
                    Ok(tls) => tls,
                    Err(e) => panic!("the impostor's certificates do not load: {e}"),
                };
                match tls.connect(&Metrics::default(), self.address, stream, ANSWER_WITHIN).await {
                    Ok(stream) => self.ask(stream).await,
                    Err(e) => refused(format!("handshake refused: {e}")),
                }
            }
        }
    }

    /// Sends the hello claiming member `claimed`; welcomed, the forged heartbeat.
    async fn ask<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(&self, mut stream: S) -> Attempt {
        let refused = |detail: String| Attempt { admitted: false, detail };
        let client_id = madsim::rand::random::<u128>();
        let hello = ClientHello::new(client_id, self.database_id, 0, Want::Raft { member: self.claimed });
        if let Err(e) = write_message(&mut stream, &Message::Hello(hello)).await {
            return refused(format!("the hello could not be sent: {e}"));
        }
        let answer = match tokio::time::timeout(ANSWER_WITHIN, read_message(&mut stream)).await {
            Err(_) => return refused(format!("no answer within {ANSWER_WITHIN:?}")),
            Ok(Err(e)) => return refused(format!("the connection broke: {e}")),
            Ok(Ok(None)) => return refused("the member closed the connection".into()),
            Ok(Ok(Some(answer))) => answer,
        };
        match answer {
            Message::Refused { reason, detail } => refused(format!("refused ({reason}): {detail}")),
            Message::Welcome { .. } => {
                let mut heartbeat = raft::prelude::Message::default();
                heartbeat.set_msg_type(raft::prelude::MessageType::MsgHeartbeat);
                heartbeat.from = self.claimed;
                heartbeat.to = self.target_id;
                heartbeat.term = FORGED_TERM;
                let forged = Message::Raft { message: qs_node::consensus::encode(&heartbeat), root_ms: 0 };
                let sent = write_message(&mut stream, &forged).await;
                let sent = if sent.is_ok() { "sent" } else { "could not send" };
                Attempt {
                    admitted: true,
                    detail: format!("welcomed as member {}; {sent} a heartbeat of term {FORGED_TERM}", self.claimed),
                }
            }
            other => refused(format!("answered with a {} frame", other.frame_type())),
        }
    }
}
