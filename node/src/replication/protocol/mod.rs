//! Replication wire protocol: the framed, versioned binary messages a replica exchanges with the
//! source it follows, over one TCP connection (a real tokio socket, or the simulator's).
//!
//! Guarantees:
//! - Decoding never trusts a length read from the input. A frame's length is checked against
//!   [`FRAME_BYTES_MAX`] before anything is allocated for it, and [`read_message`] then grows its
//!   buffer only as the bytes arrive, so a peer that claims a large frame and sends nothing costs
//!   nothing. Every count and length inside a frame is checked against its named limit before
//!   the bytes it claims are reserved or copied.
//! - Decoding never panics, whatever the bytes. An unknown frame type, a truncated field, an
//!   out-of-range tag or boolean, invalid UTF-8, or bytes left after the last field is a
//!   [`ProtocolError`] that names the frame and the field (and, for truncation, the byte).
//! - The encoding is canonical: each message has exactly one encoding, and every payload that
//!   decodes re-encodes to the same bytes (tags outside their range are refused, not
//!   normalised). `tests/integration/replication_frames.rs` checks this on arbitrary bytes.
//! - A peer that is not speaking this protocol is told apart at once. Text protocols (HTTP,
//!   memcached) start with printable bytes, which as a little-endian length are at least
//!   `0x2020_2020` (about 539 MB), so their first four bytes are refused as
//!   [`ProtocolError::FrameTooLarge`], whose message says that they read as text. A binary
//!   client that gets past the length is stopped by the hello's magic ([`MAGIC`]).
//! - The protocol carries log entries and snapshot chunks as opaque bytes. It neither
//!   decompresses nor verifies them: the receiver does (`LogEntry::decompress`,
//!   `SnapshotImport::write_chunk`), and `Store::apply` checks the chain.
//!
//! # Conversation
//!
//! The client sends [`Message::Hello`]. The server answers [`Message::Welcome`], or
//! [`Message::Refused`] and closes. The hello's layout is frozen across protocol versions (only
//! frames after it may change), so every server can read every client's hello and answer a
//! client of another version with [`RefusalReason::UnsupportedVersion`] instead of a decode error.
//! After the welcome, a client that wants the log ([`Want::Log`]) receives [`Message::Entries`]
//! from `last_index + 1` on, [`Message::Keepalive`] while the source is idle, and
//! [`Message::OutOfRetention`] if the source has collected the entries it asked for. A client
//! that wants a snapshot ([`Want::Snapshot`]) receives [`Message::SnapshotManifest`], then
//! [`Message::SnapshotChunk`]s from `resume_chunk` on, then [`Message::SnapshotDone`]. A root
//! member that wants to send Raft messages ([`Want::Raft`]) sends [`Message::Raft`] frames and
//! receives nothing more: each member dials each other one, so the answers travel on the
//! answerer's own connection.
//!
//! # Encoding, protocol version 1
//!
//! All integers little-endian. A frame is a length, a frame type and the type's payload:
//!
//! ```text
//! offset  size  field
//! 0       4     length (u32) of everything after it: frame type + payload, 1..=FRAME_BYTES_MAX
//! 4       1     frame type (table below)
//! 5       ...   payload
//! ```
//!
//! Byte strings are a `u32` length followed by the bytes (`bytes` below); strings are UTF-8
//! `bytes`. An option is a tag byte, 0 = none or 1 = some, followed by the value if some. A
//! boolean is one byte, 0 or 1. Payloads, by frame type:
//!
//! ```text
//! type  frame             payload
//! 1     Hello             4   magic b"QSRP"
//!       (client→server)   2   protocol version (u16)
//!                         16  client id (u128; random per process, refuses self-replication)
//!                         16  database id (u128)
//!                         8   last index (u64; the first entry wanted is last index + 1)
//!                         1+8 stop index (option of u64)
//!                         1   newest only (boolean)
//!                         1   want: 1 = log, 2 = snapshot, 3 = raft; snapshot only:
//!                               8   resume chunk (u64)
//!                               1+  manifest fingerprint (option of string, FINGERPRINT_BYTES_MAX)
//!                             raft only:
//!                               8   member (u64; the client's id in the root group)
//!                         8   root time (u64, as in Welcome: the client's reckoning, 0 if none;
//!                             only in a hello of this version — one of an earlier version
//!                             decodes without it and is refused by its version)
//! 2     Welcome           16  server id (u128)
//!                         16  database id (u128)
//!                         8   applied index (u64)
//!                         8   first retained index (u64)
//!                         8   root time: the root's clock as the server reckons it (u64, ms
//!                             since the Unix epoch; see `crate::clock`)
//! 3     Refused           1   reason: 1 = self-replication, 2 = wrong database,
//!                               3 = unsupported version, 4 = bad handshake,
//!                               5 = too many bootstraps, 6 = shutting down,
//!                               7 = not a member
//!                         4+  detail (string, DETAIL_BYTES_MAX)
//! 4     Entries           4   entry count (u32, ENTRIES_PER_FRAME_MAX)
//!                         ... entries, each bytes (ENTRY_COMPRESSED_BYTES_MAX; together
//!                             ENTRIES_BYTES_MAX): one Snappy-compressed entry, as
//!                             LogEntry::compress produces it
//!                         8   root time (u64, as in Welcome)
//! 5     OutOfRetention    8   requested index (u64)
//!                         8   first retained index (u64)
//! 6     Keepalive         8   applied index (u64)
//!                         1   upstream: 0 = healthy, n >= 1 = recovering, the trouble n hops up
//!                         8   root time (u64, as in Welcome)
//! 7     SnapshotManifest  4+  manifest JSON (bytes, MANIFEST_BYTES_MAX)
//! 8     SnapshotChunk     8   chunk number (u64)
//!                         4   file (u32; index into the manifest's files)
//!                         8   offset in the file (u64)
//!                         4   CRC32C of the chunk's bytes (u32)
//!                         4+  chunk bytes (bytes, CHUNK_BYTES_MAX)
//! 9     SnapshotDone      (empty)
//! 10    Raft              4+  one Raft message (bytes, RAFT_MESSAGE_BYTES_MAX; raft-rs's eraftpb in protobuf)
//!                         8   root time (u64, as in Welcome: the sending member's)
//!       (client→server)
//! ```

use crate::entry::{DatabaseId, escape};
use crate::limits::ENTRY_BYTES_MAX;
use crate::store::snapshot::{CHUNK_BYTES_MAX, SnapshotChunk};

mod codec;
mod stream;
#[cfg(test)]
mod tests;

pub use stream::{read_message, write_message};

/// The protocol version this build speaks. A server answers a hello of any other version with
/// [`RefusalReason::UnsupportedVersion`].
pub const PROTOCOL_VERSION: u16 = 3;

/// What a keepalive says about its sender's own path to the root, so that a replica below a
/// failing node waits for that node to fail over rather than moving too (a fault moves only the
/// nodes directly below it; see `client`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamStatus {
    /// The root, or a replica that is not stale, hearing from a source that is itself healthy.
    Healthy,
    /// A replica that knows it is cut off or behind and is working on it: `hops` is 1 when the
    /// trouble is its own (reconnecting, its source went quiet, or stale behind a healthy
    /// source), and n + 1 when its source reports n (at most 255).
    Recovering { hops: u8 },
}

impl UpstreamStatus {
    /// The keepalive's byte: 0 healthy, otherwise the hops.
    pub fn wire(self) -> u8 {
        match self {
            UpstreamStatus::Healthy => 0,
            UpstreamStatus::Recovering { hops } => hops.max(1),
        }
    }

    pub fn from_wire(byte: u8) -> UpstreamStatus {
        if byte == 0 { UpstreamStatus::Healthy } else { UpstreamStatus::Recovering { hops: byte } }
    }
}

/// First bytes of every hello: "qsim replication protocol". A client that sends anything else
/// is not one of ours.
pub const MAGIC: [u8; 4] = *b"QSRP";

/// Largest Snappy-compressed log entry: Snappy's worst case (`32 + n + n / 6`, its
/// `max_compress_len`) for an entry of [`ENTRY_BYTES_MAX`], so any entry that `LogEntry::seal`
/// accepts can be sent, however badly it compresses.
pub const ENTRY_COMPRESSED_BYTES_MAX: usize = 32 + ENTRY_BYTES_MAX + ENTRY_BYTES_MAX / 6;

/// Most compressed entry bytes in one [`Message::Entries`]. Bounds what one frame makes a
/// replica buffer and apply as a batch. It holds at least one maximal compressed entry
/// (about 4.7 MiB), so a source capping its `LogReadLimits::bytes_max` at this value can always
/// send the next entry, however large.
pub const ENTRIES_BYTES_MAX: usize = 8 << 20;

/// Most entries in one [`Message::Entries`]. Bounds the list the decoder reserves from a count
/// read off the wire (10 000 × 24 bytes), and the work of one batch; small entries (about 100
/// bytes compressed) still travel about 1 MB per frame.
pub const ENTRIES_PER_FRAME_MAX: usize = 10_000;

/// Longest [`Message::Refused`] detail, in bytes: a sentence for the client's log, not a
/// channel a hostile source can use to fill it.
pub const DETAIL_BYTES_MAX: usize = 4096;

/// Longest manifest fingerprint in a hello, in bytes. Fingerprints are BLAKE3 hex (64 bytes);
/// twice that leaves room for another scheme while keeping a hello small.
pub const FINGERPRINT_BYTES_MAX: usize = 128;

/// Largest snapshot manifest JSON, in bytes. A manifest lists at most
/// `store::snapshot::FILES_MAX` (10 000) files at about 100 bytes each plus the name; 4 MiB
/// leaves room for names of over 300 bytes. Our engines list a handful of files.
pub const MANIFEST_BYTES_MAX: usize = 4 << 20;

/// Largest Raft message in a [`Message::Raft`]: a member's appends carry at most
/// `consensus::APPEND_BYTES_MAX` of entries beyond the first, and one entry is a proposal of at
/// most `consensus::PROPOSAL_BYTES_MAX`; the rest is headroom for the message's own fields.
pub const RAFT_MESSAGE_BYTES_MAX: usize = 8 << 20;

/// Fixed fields of a [`Message::SnapshotChunk`] payload: number, file, offset, CRC32C, length.
const CHUNK_HEADER_BYTES: usize = 8 + 4 + 8 + 4 + 4;

/// Largest frame length (frame type + payload, the value of the length field). The largest
/// message is a snapshot chunk of `CHUNK_BYTES_MAX` (16 MiB), larger than a maximal
/// entries batch (8 MiB of entries plus 4 bytes of length each) and a maximal manifest (4 MiB),
/// so this is exactly one maximal chunk frame; the const assertions below keep it so if a limit
/// changes. A length over it is refused before anything is allocated.
pub const FRAME_BYTES_MAX: usize = 1 + max3(
    CHUNK_HEADER_BYTES + CHUNK_BYTES_MAX as usize,
    4 + 4 * ENTRIES_PER_FRAME_MAX + ENTRIES_BYTES_MAX + 8,
    4 + MANIFEST_BYTES_MAX,
);

/// How much [`read_message`]'s buffer grows at first; it then doubles, up to the frame's length,
/// as bytes arrive. A claimed length costs memory only once the bytes behind it arrive.
const READ_STEP_BYTES: usize = 64 << 10;

const fn max3(a: usize, b: usize, c: usize) -> usize {
    let ab = if a > b { a } else { b };
    if ab > c { ab } else { c }
}

const _: () = assert!(ENTRY_COMPRESSED_BYTES_MAX <= ENTRIES_BYTES_MAX, "a maximal entry must fit one frame");
const _: () = assert!(FRAME_BYTES_MAX < u32::MAX as usize, "the length field is a u32");

/// The type byte of a frame.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::VariantArray, strum::FromRepr, strum::Display,
)]
#[repr(u8)]
pub enum FrameType {
    Hello = 1,
    Welcome = 2,
    Refused = 3,
    Entries = 4,
    OutOfRetention = 5,
    Keepalive = 6,
    SnapshotManifest = 7,
    SnapshotChunk = 8,
    SnapshotDone = 9,
    Raft = 10,
}

impl FrameType {
    /// Every frame type, in type-byte order.
    pub const ALL: &'static [FrameType] = <FrameType as strum::VariantArray>::VARIANTS;

    /// The frame type with this type byte, if any.
    pub fn from_u8(byte: u8) -> Option<FrameType> {
        FrameType::from_repr(byte)
    }

    /// Its name, as in the layout table and in errors.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// How often an idle (caught-up) client hears from its source.
pub const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// A source that sends nothing for this long (two keepalives missed) is quiet: stuck, paused
/// or cut off. Its downstream says it is recovering from then on.
pub const SOURCE_QUIET: std::time::Duration = std::time::Duration::from_secs(2 * KEEPALIVE_INTERVAL.as_secs());

/// How long a replica gives a source to welcome it — connect, TLS handshake, hello answered —
/// before it tries the next (at most `staleness_failover`). A healthy source answers in round
/// trips; one that takes the connection and then says nothing (partitioned one way, a host that
/// holds the port but not the process) would otherwise cost every round of the source list
/// `staleness_failover` (30 s by default) per such source, before the replica reaches a healthy
/// one.
pub const WELCOME_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// What a client asks for after the handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// The log, from `last_index + 1`.
    Log,
    /// A snapshot to bootstrap from. `resume_chunk` is the first chunk still needed (0 for a
    /// new bootstrap); `manifest_fingerprint` names the manifest of the snapshot being resumed,
    /// so the server can tell whether it still serves the same one.
    Snapshot { resume_chunk: u64, manifest_fingerprint: Option<String> },
    /// To send Raft messages: the client is root member `member` of the server's root group,
    /// and every frame after the welcome is a [`Message::Raft`] from it. A server that is not
    /// in a root group with that member refuses ([`RefusalReason::NotAMember`]); one whose peer
    /// did not prove it is that member, [`RefusalReason::NotThatMember`].
    Raft { member: u64 },
}

/// The client's opening message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientHello {
    /// The client's protocol version. Any value decodes (the hello's layout is frozen), so a
    /// server can refuse a version it does not speak with [`RefusalReason::UnsupportedVersion`].
    pub version: u16,
    /// Random per process. A server that receives its own id is being asked to replicate from
    /// itself (a source list that loops), and refuses with [`RefusalReason::SelfReplication`].
    pub client_id: u128,
    /// The database the client holds; a server of another refuses with
    /// [`RefusalReason::WrongDatabase`].
    pub db_id: DatabaseId,
    /// The client's applied index: the first entry it wants is `last_index + 1`.
    pub last_index: u64,
    /// The last entry the client wants, if it should stop there.
    pub stop_index: Option<u64>,
    /// The handshake's newest-only flag, as in the seed: the client asks only for the newest
    /// entries rather than all history after `last_index`. The server streams what it applies
    /// from its head on, and nothing at or below `last_index` (the client holds those).
    pub newest_only: bool,
    pub want: Want,
    /// The root's clock as the client reckons it (0: it has heard nothing), after the want in
    /// a hello of this version; a hello of an earlier version, which has none, decodes with 0,
    /// to be refused by its version. A root that restarted with its wall clock behind its last
    /// stamps learns from the first replica that dials it where the stamps were
    /// (`crate::clock`).
    pub root_ms: u64,
}

impl ClientHello {
    /// A hello of this build's [`PROTOCOL_VERSION`], with no stop index and `newest_only` off.
    pub fn new(client_id: u128, db_id: DatabaseId, last_index: u64, want: Want) -> ClientHello {
        ClientHello {
            version: PROTOCOL_VERSION,
            client_id,
            db_id,
            last_index,
            stop_index: None,
            newest_only: false,
            want,
            root_ms: 0,
        }
    }
}

/// Why a server refused a client's hello.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::VariantArray, strum::FromRepr, strum::Display,
)]
#[repr(u8)]
pub enum RefusalReason {
    /// The hello carried the server's own id.
    #[strum(serialize = "self-replication")]
    SelfReplication = 1,
    /// The client holds another database.
    #[strum(serialize = "wrong database")]
    WrongDatabase = 2,
    /// The client speaks another protocol version.
    #[strum(serialize = "unsupported version")]
    UnsupportedVersion = 3,
    /// The first frame was not a well-formed hello.
    #[strum(serialize = "bad handshake")]
    BadHandshake = 4,
    /// The server is already serving as many snapshot bootstraps as it allows.
    #[strum(serialize = "too many bootstraps")]
    TooManyBootstraps = 5,
    /// The server is stopping.
    #[strum(serialize = "shutting down")]
    ShuttingDown = 6,
    /// A Raft hello to a node that is not a root member, or from a member it does not know.
    #[strum(serialize = "not a member")]
    NotAMember = 7,
    /// A Raft hello claiming a member the peer did not prove it is: its certificate does not
    /// name that member's replication address.
    #[strum(serialize = "not that member")]
    NotThatMember = 8,
}

impl RefusalReason {
    /// Every reason, in code order.
    pub const ALL: &'static [RefusalReason] = <RefusalReason as strum::VariantArray>::VARIANTS;

    /// The reason with this code byte, if any.
    pub fn from_u8(byte: u8) -> Option<RefusalReason> {
        RefusalReason::from_repr(byte)
    }

    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One protocol message: one frame on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Client → server, first frame.
    Hello(ClientHello),
    /// Server → client: the hello is accepted. `first_retained_index` is the oldest entry the
    /// server still has (entries before it were garbage-collected); `root_ms` is the root's
    /// clock as the server reckons it (`crate::clock::RootClock`).
    Welcome { server_id: u128, db_id: DatabaseId, applied_index: u64, first_retained_index: u64, root_ms: u64 },
    /// Server → client: the hello is refused; the server closes the connection.
    Refused { reason: RefusalReason, detail: String },
    /// Server → client: consecutive log entries, each Snappy-compressed exactly as
    /// `LogEntry::compress` produces it. The receiver decompresses and verifies each with
    /// `LogEntry::decompress`. `root_ms` is the root's clock as the server reckons it, as in
    /// every welcome and keepalive: a steady stream brings it too, so a root's clock stepping
    /// back reaches the tree with the first entries stamped after it.
    Entries { entries: Vec<Vec<u8>>, root_ms: u64 },
    /// Server → client: entry `requested` was collected; the oldest the server has is
    /// `first_retained`. The client must go elsewhere (another source, then a snapshot).
    OutOfRetention { requested: u64, first_retained: u64 },
    /// Server → client, while idle: the source is alive and at `applied_index`, and whether
    /// its own path to the root is healthy or it is recovering one; `root_ms` is the root's
    /// clock as it reckons it.
    Keepalive { applied_index: u64, upstream: UpstreamStatus, root_ms: u64 },
    /// Server → client: the JSON of a `store::snapshot::SnapshotManifest`.
    SnapshotManifest { manifest_json: Vec<u8> },
    /// Server → client: one snapshot chunk.
    SnapshotChunk(SnapshotChunk),
    /// Server → client: every chunk was sent.
    SnapshotDone,
    /// Root member → root member, after a [`Want::Raft`] hello: one Raft message (raft-rs's
    /// `eraftpb::Message` in protobuf's wire format, encoded by prost: `consensus::encode`, decoded
    /// by `consensus::decode`). `root_ms` is the root's clock as the sender reckons it (its own
    /// when it leads): a member hears its leader's clock from every append and heartbeat,
    /// however far behind its disk has left its store (`crate::clock`).
    Raft { message: Vec<u8>, root_ms: u64 },
}

/// Why a frame could not be read or decoded.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("replication connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame length {length} is over FRAME_BYTES_MAX ({max}){}", text_hint(.header))]
    FrameTooLarge { length: u32, max: usize, header: [u8; 4] },
    #[error("frame length is 0: a frame holds at least its frame type byte")]
    EmptyFrame,
    #[error("connection closed mid-frame: {read} of the {expected} bytes of its {part} arrived")]
    UnexpectedEof { part: &'static str, read: usize, expected: usize },
    #[error("frame type {found} is unknown (this build knows 1..=10)")]
    UnknownFrameType { found: u8 },
    #[error(
        "not a qsim replication client: its hello starts with {} where {} was expected",
        escape(.found),
        escape(&MAGIC)
    )]
    BadMagic { found: [u8; 4] },
    #[error("{frame} frame truncated in {field} at payload byte {offset}: needs {needed} bytes, {left} left")]
    Truncated { frame: FrameType, field: String, offset: usize, needed: usize, left: usize },
    #[error("{frame} frame has {count} trailing bytes after its last field")]
    TrailingBytes { frame: FrameType, count: usize },
    #[error("{frame} frame: {field} is {found}, which is not {allowed}")]
    BadValue { frame: FrameType, field: String, found: u8, allowed: &'static str },
    #[error("{frame} frame: {field} is {actual} but the limit {limit} is {max}")]
    Limit { frame: FrameType, field: String, limit: &'static str, max: usize, actual: usize },
    #[error("{frame} frame: {field} is not valid UTF-8")]
    BadUtf8 { frame: FrameType, field: String },
}

/// For a refused length header that reads as text: say so, since the peer is then almost
/// certainly speaking a text protocol (an HTTP or memcached client, or a person with telnet).
fn text_hint(header: &[u8; 4]) -> String {
    if header.iter().all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()) {
        format!(
            "; its bytes read {} as text, so the peer is not speaking the qsim replication protocol \
             (an HTTP or memcached client?)",
            escape(header)
        )
    } else {
        String::new()
    }
}

/// Checks a frame's length header: the length of the frame type and payload that follow.
fn frame_length(header: [u8; 4]) -> Result<usize, ProtocolError> {
    let length = u32::from_le_bytes(header);
    match usize::try_from(length) {
        Ok(0) => Err(ProtocolError::EmptyFrame),
        Ok(n) if n <= FRAME_BYTES_MAX => Ok(n),
        _ => Err(ProtocolError::FrameTooLarge { length, max: FRAME_BYTES_MAX, header }),
    }
}

fn check_limit(
    frame: FrameType,
    field: &str,
    limit: &'static str,
    max: usize,
    actual: usize,
) -> Result<(), ProtocolError> {
    if actual > max {
        Err(ProtocolError::Limit { frame, field: field.to_string(), limit, max, actual })
    } else {
        Ok(())
    }
}
