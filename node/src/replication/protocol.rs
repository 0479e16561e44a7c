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
//!   normalised). `tests/replication_frames.rs` checks this on arbitrary bytes.
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
//! [`Message::SnapshotChunk`]s from `resume_chunk` on, then [`Message::SnapshotDone`].
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
//!                         1   want: 1 = log, 2 = snapshot; snapshot only:
//!                               8   resume chunk (u64)
//!                               1+  manifest fingerprint (option of string, FINGERPRINT_BYTES_MAX)
//! 2     Welcome           16  server id (u128)
//!                         16  database id (u128)
//!                         8   applied index (u64)
//!                         8   first retained index (u64)
//! 3     Refused           1   reason: 1 = self-replication, 2 = wrong database,
//!                               3 = unsupported version, 4 = bad handshake,
//!                               5 = too many bootstraps, 6 = shutting down
//!                         4+  detail (string, DETAIL_BYTES_MAX)
//! 4     Entries           4   entry count (u32, ENTRIES_PER_FRAME_MAX)
//!                         ... entries, each bytes (ENTRY_COMPRESSED_BYTES_MAX; together
//!                             ENTRIES_BYTES_MAX): one Snappy-compressed entry, as
//!                             LogEntry::compress produces it
//! 5     OutOfRetention    8   requested index (u64)
//!                         8   first retained index (u64)
//! 6     Keepalive         8   applied index (u64)
//!                         1   upstream: 0 = healthy, n >= 1 = recovering, the trouble n hops up
//! 7     SnapshotManifest  4+  manifest JSON (bytes, MANIFEST_BYTES_MAX)
//! 8     SnapshotChunk     8   chunk number (u64)
//!                         4   file (u32; index into the manifest's files)
//!                         8   offset in the file (u64)
//!                         4   CRC32C of the chunk's bytes (u32)
//!                         4+  chunk bytes (bytes, CHUNK_BYTES_MAX)
//! 9     SnapshotDone      (empty)
//! ```

use std::fmt;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::entry::{DatabaseId, escape};
use crate::limits::ENTRY_BYTES_MAX;
use crate::store::snapshot::{CHUNK_BYTES_MAX, SnapshotChunk};

/// The protocol version this build speaks. A server answers a hello of any other version with
/// [`RefusalReason::UnsupportedVersion`].
pub const PROTOCOL_VERSION: u16 = 2;

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

/// Fixed fields of a [`Message::SnapshotChunk`] payload: number, file, offset, CRC32C, length.
const CHUNK_HEADER_BYTES: usize = 8 + 4 + 8 + 4 + 4;

/// Largest frame length (frame type + payload, the value of the length field). The largest
/// message is a snapshot chunk of `CHUNK_BYTES_MAX` (16 MiB), larger than a maximal
/// entries batch (8 MiB of entries plus 4 bytes of length each) and a maximal manifest (4 MiB),
/// so this is exactly one maximal chunk frame; the const assertions below keep it so if a limit
/// changes. A length over it is refused before anything is allocated.
pub const FRAME_BYTES_MAX: usize = 1 + max3(
    CHUNK_HEADER_BYTES + CHUNK_BYTES_MAX as usize,
    4 + 4 * ENTRIES_PER_FRAME_MAX + ENTRIES_BYTES_MAX,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
}

impl FrameType {
    /// Every frame type, in type-byte order.
    pub const ALL: [FrameType; 9] = [
        FrameType::Hello,
        FrameType::Welcome,
        FrameType::Refused,
        FrameType::Entries,
        FrameType::OutOfRetention,
        FrameType::Keepalive,
        FrameType::SnapshotManifest,
        FrameType::SnapshotChunk,
        FrameType::SnapshotDone,
    ];

    /// The frame type with this type byte, if any.
    pub fn from_u8(byte: u8) -> Option<FrameType> {
        FrameType::ALL.into_iter().find(|t| *t as u8 == byte)
    }

    /// Its name, as in the layout table and in errors.
    pub fn name(self) -> &'static str {
        match self {
            FrameType::Hello => "Hello",
            FrameType::Welcome => "Welcome",
            FrameType::Refused => "Refused",
            FrameType::Entries => "Entries",
            FrameType::OutOfRetention => "OutOfRetention",
            FrameType::Keepalive => "Keepalive",
            FrameType::SnapshotManifest => "SnapshotManifest",
            FrameType::SnapshotChunk => "SnapshotChunk",
            FrameType::SnapshotDone => "SnapshotDone",
        }
    }
}

impl fmt::Display for FrameType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a client asks for after the handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// The log, from `last_index + 1`.
    Log,
    /// A snapshot to bootstrap from. `resume_chunk` is the first chunk still needed (0 for a
    /// new bootstrap); `manifest_fingerprint` names the manifest of the snapshot being resumed,
    /// so the server can tell whether it still serves the same one.
    Snapshot { resume_chunk: u64, manifest_fingerprint: Option<String> },
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
    /// entries rather than all history after `last_index`. The server decides how to honour it.
    pub newest_only: bool,
    pub want: Want,
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
        }
    }
}

/// Why a server refused a client's hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RefusalReason {
    /// The hello carried the server's own id.
    SelfReplication = 1,
    /// The client holds another database.
    WrongDatabase = 2,
    /// The client speaks another protocol version.
    UnsupportedVersion = 3,
    /// The first frame was not a well-formed hello.
    BadHandshake = 4,
    /// The server is already serving as many snapshot bootstraps as it allows.
    TooManyBootstraps = 5,
    /// The server is stopping.
    ShuttingDown = 6,
}

impl RefusalReason {
    /// Every reason, in code order.
    pub const ALL: [RefusalReason; 6] = [
        RefusalReason::SelfReplication,
        RefusalReason::WrongDatabase,
        RefusalReason::UnsupportedVersion,
        RefusalReason::BadHandshake,
        RefusalReason::TooManyBootstraps,
        RefusalReason::ShuttingDown,
    ];

    /// The reason with this code byte, if any.
    pub fn from_u8(byte: u8) -> Option<RefusalReason> {
        RefusalReason::ALL.into_iter().find(|r| *r as u8 == byte)
    }

    pub fn name(self) -> &'static str {
        match self {
            RefusalReason::SelfReplication => "self-replication",
            RefusalReason::WrongDatabase => "wrong database",
            RefusalReason::UnsupportedVersion => "unsupported version",
            RefusalReason::BadHandshake => "bad handshake",
            RefusalReason::TooManyBootstraps => "too many bootstraps",
            RefusalReason::ShuttingDown => "shutting down",
        }
    }
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One protocol message: one frame on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Client → server, first frame.
    Hello(ClientHello),
    /// Server → client: the hello is accepted. `first_retained_index` is the oldest entry the
    /// server still has (entries before it were garbage-collected).
    Welcome { server_id: u128, db_id: DatabaseId, applied_index: u64, first_retained_index: u64 },
    /// Server → client: the hello is refused; the server closes the connection.
    Refused { reason: RefusalReason, detail: String },
    /// Server → client: consecutive log entries, each Snappy-compressed exactly as
    /// `LogEntry::compress` produces it. The receiver decompresses and verifies each with
    /// `LogEntry::decompress`.
    Entries { entries: Vec<Vec<u8>> },
    /// Server → client: entry `requested` was collected; the oldest the server has is
    /// `first_retained`. The client must go elsewhere (another source, then a snapshot).
    OutOfRetention { requested: u64, first_retained: u64 },
    /// Server → client, while idle: the source is alive and at `applied_index`, and whether
    /// its own path to the root is healthy or it is recovering one.
    Keepalive { applied_index: u64, upstream: UpstreamStatus },
    /// Server → client: the JSON of a `store::snapshot::SnapshotManifest`.
    SnapshotManifest { manifest_json: Vec<u8> },
    /// Server → client: one snapshot chunk.
    SnapshotChunk(SnapshotChunk),
    /// Server → client: every chunk was sent.
    SnapshotDone,
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
    #[error("frame type {found} is unknown (this build knows 1..=9)")]
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

impl Message {
    pub fn frame_type(&self) -> FrameType {
        match self {
            Message::Hello(_) => FrameType::Hello,
            Message::Welcome { .. } => FrameType::Welcome,
            Message::Refused { .. } => FrameType::Refused,
            Message::Entries { .. } => FrameType::Entries,
            Message::OutOfRetention { .. } => FrameType::OutOfRetention,
            Message::Keepalive { .. } => FrameType::Keepalive,
            Message::SnapshotManifest { .. } => FrameType::SnapshotManifest,
            Message::SnapshotChunk(_) => FrameType::SnapshotChunk,
            Message::SnapshotDone => FrameType::SnapshotDone,
        }
    }

    /// Checks the message against the limits the decoder enforces, so a sender finds out
    /// before sending a frame its peer would refuse. [`write_message`] calls it.
    pub fn check_limits(&self) -> Result<(), ProtocolError> {
        let frame = self.frame_type();
        match self {
            Message::Hello(hello) => {
                if let Want::Snapshot { manifest_fingerprint: Some(fingerprint), .. } = &hello.want {
                    check_limit(
                        frame,
                        "manifest fingerprint",
                        "FINGERPRINT_BYTES_MAX",
                        FINGERPRINT_BYTES_MAX,
                        fingerprint.len(),
                    )?;
                }
            }
            Message::Refused { detail, .. } => {
                check_limit(frame, "detail", "DETAIL_BYTES_MAX", DETAIL_BYTES_MAX, detail.len())?;
            }
            Message::Entries { entries } => {
                check_limit(frame, "entry count", "ENTRIES_PER_FRAME_MAX", ENTRIES_PER_FRAME_MAX, entries.len())?;
                let mut total = 0usize;
                for (i, entry) in entries.iter().enumerate() {
                    let field = || format!("entry {i}");
                    check_limit(
                        frame,
                        &field(),
                        "ENTRY_COMPRESSED_BYTES_MAX",
                        ENTRY_COMPRESSED_BYTES_MAX,
                        entry.len(),
                    )?;
                    total = total.saturating_add(entry.len());
                    check_limit(frame, "entries' total bytes", "ENTRIES_BYTES_MAX", ENTRIES_BYTES_MAX, total)?;
                }
            }
            Message::SnapshotManifest { manifest_json } => {
                check_limit(frame, "manifest", "MANIFEST_BYTES_MAX", MANIFEST_BYTES_MAX, manifest_json.len())?;
            }
            Message::SnapshotChunk(chunk) => {
                check_limit(frame, "chunk bytes", "CHUNK_BYTES_MAX", CHUNK_BYTES_MAX as usize, chunk.bytes.len())?;
            }
            Message::Welcome { .. }
            | Message::OutOfRetention { .. }
            | Message::Keepalive { .. }
            | Message::SnapshotDone => {}
        }
        Ok(())
    }

    /// The whole frame: length, frame type, payload. A message over the limits still encodes,
    /// but its peer refuses the frame; check first with [`check_limits`](Self::check_limits).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + self.payload_bytes_hint());
        out.extend_from_slice(&[0; 4]);
        out.push(self.frame_type() as u8);
        self.encode_payload(&mut out);
        let length = u32::try_from(out.len() - 4).unwrap_or(u32::MAX);
        out[..4].copy_from_slice(&length.to_le_bytes());
        out
    }

    fn payload_bytes_hint(&self) -> usize {
        match self {
            Message::Entries { entries } => entries.iter().map(|e| 4 + e.len()).sum::<usize>() + 4,
            Message::SnapshotManifest { manifest_json } => 4 + manifest_json.len(),
            Message::SnapshotChunk(chunk) => CHUNK_HEADER_BYTES + chunk.bytes.len(),
            Message::Refused { detail, .. } => 5 + detail.len(),
            _ => 128,
        }
    }

    fn encode_payload(&self, out: &mut Vec<u8>) {
        match self {
            Message::Hello(hello) => {
                out.extend_from_slice(&MAGIC);
                out.extend_from_slice(&hello.version.to_le_bytes());
                out.extend_from_slice(&hello.client_id.to_le_bytes());
                out.extend_from_slice(&hello.db_id.0.to_le_bytes());
                out.extend_from_slice(&hello.last_index.to_le_bytes());
                match hello.stop_index {
                    None => out.push(0),
                    Some(stop) => {
                        out.push(1);
                        out.extend_from_slice(&stop.to_le_bytes());
                    }
                }
                out.push(u8::from(hello.newest_only));
                match &hello.want {
                    Want::Log => out.push(WANT_LOG),
                    Want::Snapshot { resume_chunk, manifest_fingerprint } => {
                        out.push(WANT_SNAPSHOT);
                        out.extend_from_slice(&resume_chunk.to_le_bytes());
                        match manifest_fingerprint {
                            None => out.push(0),
                            Some(fingerprint) => {
                                out.push(1);
                                put_bytes(out, fingerprint.as_bytes());
                            }
                        }
                    }
                }
            }
            Message::Welcome { server_id, db_id, applied_index, first_retained_index } => {
                out.extend_from_slice(&server_id.to_le_bytes());
                out.extend_from_slice(&db_id.0.to_le_bytes());
                out.extend_from_slice(&applied_index.to_le_bytes());
                out.extend_from_slice(&first_retained_index.to_le_bytes());
            }
            Message::Refused { reason, detail } => {
                out.push(*reason as u8);
                put_bytes(out, detail.as_bytes());
            }
            Message::Entries { entries } => {
                out.extend_from_slice(&len_u32(entries.len()));
                for entry in entries {
                    put_bytes(out, entry);
                }
            }
            Message::OutOfRetention { requested, first_retained } => {
                out.extend_from_slice(&requested.to_le_bytes());
                out.extend_from_slice(&first_retained.to_le_bytes());
            }
            Message::Keepalive { applied_index, upstream } => {
                out.extend_from_slice(&applied_index.to_le_bytes());
                out.push(upstream.wire());
            }
            Message::SnapshotManifest { manifest_json } => put_bytes(out, manifest_json),
            Message::SnapshotChunk(chunk) => {
                out.extend_from_slice(&chunk.number.to_le_bytes());
                out.extend_from_slice(&chunk.file.to_le_bytes());
                out.extend_from_slice(&chunk.offset.to_le_bytes());
                out.extend_from_slice(&chunk.crc32c.to_le_bytes());
                put_bytes(out, &chunk.bytes);
            }
            Message::SnapshotDone => {}
        }
    }

    /// Decodes one frame's payload (everything after the frame type byte), checking every
    /// length against its limit before allocating and refusing trailing bytes.
    pub fn decode_frame(frame_type: u8, payload: &[u8]) -> Result<Message, ProtocolError> {
        let frame = FrameType::from_u8(frame_type).ok_or(ProtocolError::UnknownFrameType { found: frame_type })?;
        if payload.len() >= FRAME_BYTES_MAX {
            return Err(ProtocolError::Limit {
                frame,
                field: "payload".into(),
                limit: "FRAME_BYTES_MAX",
                max: FRAME_BYTES_MAX - 1,
                actual: payload.len(),
            });
        }
        let mut r = Reader { bytes: payload, pos: 0, frame };
        let message = match frame {
            FrameType::Hello => {
                let magic = r.array::<4>("magic")?;
                if magic != MAGIC {
                    return Err(ProtocolError::BadMagic { found: magic });
                }
                let version = r.u16("protocol version")?;
                let client_id = r.u128("client id")?;
                let db_id = DatabaseId(r.u128("database id")?);
                let last_index = r.u64("last index")?;
                let stop_index = if r.option("stop index tag")? { Some(r.u64("stop index")?) } else { None };
                let newest_only = r.bool("newest only")?;
                let want = match r.u8("want")? {
                    WANT_LOG => Want::Log,
                    WANT_SNAPSHOT => {
                        let resume_chunk = r.u64("resume chunk")?;
                        let manifest_fingerprint = if r.option("manifest fingerprint tag")? {
                            Some(r.string("manifest fingerprint", "FINGERPRINT_BYTES_MAX", FINGERPRINT_BYTES_MAX)?)
                        } else {
                            None
                        };
                        Want::Snapshot { resume_chunk, manifest_fingerprint }
                    }
                    other => return Err(r.bad_value("want", other, "1 (log) or 2 (snapshot)")),
                };
                Message::Hello(ClientHello { version, client_id, db_id, last_index, stop_index, newest_only, want })
            }
            FrameType::Welcome => Message::Welcome {
                server_id: r.u128("server id")?,
                db_id: DatabaseId(r.u128("database id")?),
                applied_index: r.u64("applied index")?,
                first_retained_index: r.u64("first retained index")?,
            },
            FrameType::Refused => {
                let code = r.u8("reason")?;
                let reason = RefusalReason::from_u8(code)
                    .ok_or_else(|| r.bad_value("reason", code, "a refusal reason (1..=6)"))?;
                let detail = r.string("detail", "DETAIL_BYTES_MAX", DETAIL_BYTES_MAX)?;
                Message::Refused { reason, detail }
            }
            FrameType::Entries => {
                let count = r.u32("entry count")? as usize;
                check_limit(frame, "entry count", "ENTRIES_PER_FRAME_MAX", ENTRIES_PER_FRAME_MAX, count)?;
                // Every entry has at least its 4-byte length: a count the payload cannot hold is
                // refused before the list is reserved.
                r.need(count.saturating_mul(4), "entry lengths")?;
                let mut entries = Vec::with_capacity(count);
                let mut total = 0usize;
                for i in 0..count {
                    let field = format!("entry {i}");
                    let entry = r.bytes(&field, "ENTRY_COMPRESSED_BYTES_MAX", ENTRY_COMPRESSED_BYTES_MAX)?;
                    total += entry.len();
                    check_limit(frame, "entries' total bytes", "ENTRIES_BYTES_MAX", ENTRIES_BYTES_MAX, total)?;
                    entries.push(entry.to_vec());
                }
                Message::Entries { entries }
            }
            FrameType::OutOfRetention => Message::OutOfRetention {
                requested: r.u64("requested index")?,
                first_retained: r.u64("first retained index")?,
            },
            FrameType::Keepalive => Message::Keepalive {
                applied_index: r.u64("applied index")?,
                upstream: UpstreamStatus::from_wire(r.u8("upstream")?),
            },
            FrameType::SnapshotManifest => {
                let manifest = r.bytes("manifest", "MANIFEST_BYTES_MAX", MANIFEST_BYTES_MAX)?;
                Message::SnapshotManifest { manifest_json: manifest.to_vec() }
            }
            FrameType::SnapshotChunk => {
                let number = r.u64("chunk number")?;
                let file = r.u32("file")?;
                let offset = r.u64("offset")?;
                let crc32c = r.u32("crc32c")?;
                let bytes = r.bytes("chunk bytes", "CHUNK_BYTES_MAX", CHUNK_BYTES_MAX as usize)?.to_vec();
                Message::SnapshotChunk(SnapshotChunk { number, file, offset, bytes, crc32c })
            }
            FrameType::SnapshotDone => Message::SnapshotDone,
        };
        r.finish()?;
        Ok(message)
    }
}

const WANT_LOG: u8 = 1;
const WANT_SNAPSHOT: u8 = 2;

/// A length as the u32 the layout uses. Lengths within the limits always fit; one that does
/// not is written as `u32::MAX`, which every limit refuses.
fn len_u32(len: usize) -> [u8; 4] {
    u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes()
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&len_u32(bytes.len()));
    out.extend_from_slice(bytes);
}

/// Reads one payload's fields in order; every error names the frame and the field.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    frame: FrameType,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Checks that `n` more bytes are there, without taking them.
    fn need(&self, n: usize, field: &str) -> Result<(), ProtocolError> {
        if self.left() < n {
            return Err(ProtocolError::Truncated {
                frame: self.frame,
                field: field.to_string(),
                offset: self.pos,
                needed: n,
                left: self.left(),
            });
        }
        Ok(())
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], ProtocolError> {
        self.need(n, field)?;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], ProtocolError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    fn u8(&mut self, field: &str) -> Result<u8, ProtocolError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &str) -> Result<u16, ProtocolError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &str) -> Result<u32, ProtocolError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &str) -> Result<u64, ProtocolError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    fn u128(&mut self, field: &str) -> Result<u128, ProtocolError> {
        Ok(u128::from_le_bytes(self.array(field)?))
    }

    fn bad_value(&self, field: &str, found: u8, allowed: &'static str) -> ProtocolError {
        ProtocolError::BadValue { frame: self.frame, field: field.to_string(), found, allowed }
    }

    fn bool(&mut self, field: &str) -> Result<bool, ProtocolError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.bad_value(field, other, "a boolean (0 or 1)")),
        }
    }

    /// An option's tag: whether a value follows.
    fn option(&mut self, field: &str) -> Result<bool, ProtocolError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.bad_value(field, other, "an option tag (0 = none, 1 = some)")),
        }
    }

    /// A `u32` length, checked against `limit` before the bytes are taken.
    fn bytes(&mut self, field: &str, limit: &'static str, max: usize) -> Result<&'a [u8], ProtocolError> {
        let len = self.u32(&format!("{field} length"))? as usize;
        check_limit(self.frame, field, limit, max, len)?;
        self.take(len, field)
    }

    fn string(&mut self, field: &str, limit: &'static str, max: usize) -> Result<String, ProtocolError> {
        let bytes = self.bytes(field, limit, max)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_string()),
            Err(_) => Err(ProtocolError::BadUtf8 { frame: self.frame, field: field.to_string() }),
        }
    }

    fn finish(&self) -> Result<(), ProtocolError> {
        if self.left() == 0 {
            Ok(())
        } else {
            Err(ProtocolError::TrailingBytes { frame: self.frame, count: self.left() })
        }
    }
}

/// Writes one message as one frame and flushes, so a keepalive or a refusal is not left in a
/// buffer. A message over the limits is refused before anything is written.
pub async fn write_message<W: AsyncWrite + Unpin>(w: &mut W, msg: &Message) -> Result<(), ProtocolError> {
    msg.check_limits()?;
    w.write_all(&msg.encode()).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one frame and decodes it. `Ok(None)` is a clean end of stream, between frames; an end
/// of stream inside a frame (even inside its length) is [`ProtocolError::UnexpectedEof`].
///
/// The length is checked before anything is allocated, and the buffer then grows only as the
/// frame's bytes arrive. Cancel-safety: none; a read abandoned mid-frame loses the stream's
/// framing, so drop the connection.
pub async fn read_message<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<Message>, ProtocolError> {
    let mut header = [0u8; 4];
    let mut filled = 0;
    while filled < header.len() {
        let n = r.read(&mut header[filled..]).await?;
        if n == 0 {
            if filled == 0 {
                return Ok(None);
            }
            return Err(ProtocolError::UnexpectedEof { part: "length", read: filled, expected: header.len() });
        }
        filled += n;
    }
    let length = frame_length(header)?;
    let mut frame: Vec<u8> = Vec::new();
    while frame.len() < length {
        if frame.len() == frame.capacity() {
            let target = length.min(frame.capacity().saturating_mul(2).max(READ_STEP_BYTES));
            frame.reserve_exact(target - frame.len());
        }
        let remaining = (length - frame.len()) as u64;
        let n = (&mut *r).take(remaining).read_buf(&mut frame).await?;
        if n == 0 {
            return Err(ProtocolError::UnexpectedEof {
                part: "frame type and payload",
                read: frame.len(),
                expected: length,
            });
        }
    }
    Message::decode_frame(frame[0], &frame[1..]).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{ChainHash, LogEntry, Op};

    fn hello(want: Want) -> ClientHello {
        ClientHello {
            version: PROTOCOL_VERSION,
            client_id: 0x0123_4567_89ab_cdef_0011_2233_4455_6677,
            db_id: DatabaseId(42),
            last_index: 7,
            stop_index: Some(99),
            newest_only: true,
            want,
        }
    }

    fn samples() -> Vec<Message> {
        let entry = LogEntry::seal(
            1,
            DatabaseId(42),
            1_700_000_000_000,
            ChainHash::GENESIS,
            vec![Op::Set { key: b"hello".to_vec(), value: b"world".to_vec() }],
        )
        .unwrap();
        let mut out = vec![
            Message::Hello(hello(Want::Log)),
            Message::Hello(ClientHello::new(u128::MAX, DatabaseId(0), 0, Want::Log)),
            Message::Hello(hello(Want::Snapshot { resume_chunk: 0, manifest_fingerprint: None })),
            Message::Hello(hello(Want::Snapshot { resume_chunk: 17, manifest_fingerprint: Some("ab".repeat(32)) })),
            Message::Welcome { server_id: 5, db_id: DatabaseId(42), applied_index: 100, first_retained_index: 60 },
            Message::Entries { entries: vec![] },
            Message::Entries { entries: vec![entry.compress(), vec![], vec![1, 2, 3]] },
            Message::OutOfRetention { requested: 8, first_retained: 60 },
            Message::Keepalive { applied_index: u64::MAX, upstream: UpstreamStatus::Healthy },
            Message::Keepalive { applied_index: 3, upstream: UpstreamStatus::Recovering { hops: 2 } },
            Message::SnapshotManifest { manifest_json: br#"{"format":1}"#.to_vec() },
            Message::SnapshotManifest { manifest_json: vec![] },
            Message::SnapshotChunk(SnapshotChunk {
                number: 3,
                file: 1,
                offset: 3 << 20,
                bytes: vec![0xaa; 1000],
                crc32c: 0xdead_beef,
            }),
            Message::SnapshotDone,
        ];
        for reason in RefusalReason::ALL {
            out.push(Message::Refused { reason, detail: format!("{reason}: détail") });
        }
        out
    }

    fn decode(frame: &[u8]) -> Result<Message, ProtocolError> {
        let length = frame_length(frame[..4].try_into().unwrap())?;
        assert_eq!(length, frame.len() - 4, "length field counts the frame type and payload");
        Message::decode_frame(frame[4], &frame[5..])
    }

    #[test]
    fn every_variant_round_trips() {
        for message in samples() {
            message.check_limits().unwrap();
            let frame = message.encode();
            assert_eq!(frame[4], message.frame_type() as u8);
            assert_eq!(decode(&frame).unwrap(), message, "frame {frame:02x?}");
        }
    }

    #[test]
    fn every_frame_type_has_a_sample() {
        let samples = samples();
        for t in FrameType::ALL {
            assert!(samples.iter().any(|m| m.frame_type() == t), "no sample of {t}");
            assert_eq!(FrameType::from_u8(t as u8), Some(t));
        }
        assert_eq!(FrameType::from_u8(0), None);
        assert_eq!(FrameType::from_u8(10), None);
    }

    #[test]
    fn every_refusal_reason_round_trips_and_codes_are_distinct() {
        for (i, reason) in RefusalReason::ALL.into_iter().enumerate() {
            assert_eq!(reason as u8, i as u8 + 1);
            assert_eq!(RefusalReason::from_u8(reason as u8), Some(reason));
            let message = Message::Refused { reason, detail: String::new() };
            assert_eq!(decode(&message.encode()).unwrap(), message);
        }
        assert_eq!(RefusalReason::from_u8(0), None);
        assert_eq!(RefusalReason::from_u8(7), None);
        let mut frame = Message::Refused { reason: RefusalReason::ShuttingDown, detail: "x".into() }.encode();
        frame[5] = 7;
        let err = decode(&frame).unwrap_err();
        assert!(matches!(err, ProtocolError::BadValue { frame: FrameType::Refused, found: 7, .. }), "{err}");
        assert!(err.to_string().contains("Refused frame: reason is 7"), "{err}");
    }

    /// Pins the layout table in the module doc: a change here is a protocol change.
    #[test]
    fn layout_matches_the_documented_table() {
        let message = Message::Hello(ClientHello {
            version: 1,
            client_id: 2,
            db_id: DatabaseId(3),
            last_index: 4,
            stop_index: Some(5),
            newest_only: true,
            want: Want::Snapshot { resume_chunk: 6, manifest_fingerprint: Some("f".into()) },
        });
        let mut expected = vec![];
        expected.extend_from_slice(b"QSRP");
        expected.extend_from_slice(&1u16.to_le_bytes());
        expected.extend_from_slice(&2u128.to_le_bytes());
        expected.extend_from_slice(&3u128.to_le_bytes());
        expected.extend_from_slice(&4u64.to_le_bytes());
        expected.push(1);
        expected.extend_from_slice(&5u64.to_le_bytes());
        expected.push(1);
        expected.push(2);
        expected.extend_from_slice(&6u64.to_le_bytes());
        expected.push(1);
        expected.extend_from_slice(&1u32.to_le_bytes());
        expected.push(b'f');
        let frame = message.encode();
        assert_eq!(&frame[..4], &(expected.len() as u32 + 1).to_le_bytes());
        assert_eq!(frame[4], 1);
        assert_eq!(&frame[5..], &expected[..]);

        assert_eq!(
            Message::Keepalive { applied_index: 0x0102, upstream: UpstreamStatus::Recovering { hops: 2 } }.encode(),
            [10, 0, 0, 0, 6, 2, 1, 0, 0, 0, 0, 0, 0, 2]
        );
        assert_eq!(Message::SnapshotDone.encode(), [1, 0, 0, 0, 9]);
        let chunk = SnapshotChunk { number: 1, file: 2, offset: 3, bytes: vec![0xee], crc32c: 4 };
        let frame = Message::SnapshotChunk(chunk).encode();
        assert_eq!(frame.len(), 4 + 1 + CHUNK_HEADER_BYTES + 1);
        assert_eq!(
            &frame[5..],
            [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0xee]
        );
    }

    #[test]
    fn wrong_magic_is_refused_naming_what_arrived() {
        let mut frame = Message::Hello(hello(Want::Log)).encode();
        frame[5..9].copy_from_slice(b"GET ");
        let err = decode(&frame).unwrap_err();
        assert!(matches!(err, ProtocolError::BadMagic { found } if &found == b"GET "), "{err}");
        assert!(err.to_string().contains("\"GET \" where \"QSRP\" was expected"), "{err}");
    }

    #[test]
    fn text_where_a_length_should_be_says_the_peer_speaks_text() {
        for text in [b"GET ", b"get ", b"stat", b"POST"] {
            let err = frame_length(*text).unwrap_err();
            assert!(matches!(err, ProtocolError::FrameTooLarge { .. }), "{err}");
            assert!(err.to_string().contains("not speaking the qsim replication protocol"), "{err}");
        }
        let err = frame_length([0xff; 4]).unwrap_err();
        assert!(!err.to_string().contains("as text"), "{err}");
        assert!(matches!(frame_length([0; 4]), Err(ProtocolError::EmptyFrame)));
        let max = u32::try_from(FRAME_BYTES_MAX).unwrap();
        assert_eq!(frame_length(max.to_le_bytes()).unwrap(), FRAME_BYTES_MAX);
        assert!(frame_length((max + 1).to_le_bytes()).is_err());
    }

    #[test]
    fn hello_of_another_version_decodes_so_the_server_can_refuse_it() {
        for version in [0, 2, u16::MAX] {
            let message = Message::Hello(ClientHello { version, ..hello(Want::Log) });
            match decode(&message.encode()).unwrap() {
                Message::Hello(h) => assert_eq!(h.version, version),
                other => panic!("decoded {other:?}"),
            }
        }
    }

    #[test]
    fn every_truncation_and_any_trailing_byte_is_an_error() {
        for message in samples() {
            let frame = message.encode();
            let payload = &frame[5..];
            for cut in 0..payload.len() {
                let err = Message::decode_frame(frame[4], &payload[..cut]).unwrap_err();
                assert!(matches!(err, ProtocolError::Truncated { .. }), "{message:?} cut at {cut}: {err}");
            }
            let mut long = payload.to_vec();
            long.push(0);
            let err = Message::decode_frame(frame[4], &long).unwrap_err();
            assert!(matches!(err, ProtocolError::TrailingBytes { count: 1, .. }), "{err}");
        }
    }

    #[test]
    fn out_of_range_tags_name_their_field() {
        let frame = Message::Hello(hello(Want::Snapshot { resume_chunk: 1, manifest_fingerprint: None })).encode();
        // Payload offsets: stop index tag at 46, newest only at 55, want at 56, fingerprint tag at 65.
        for (offset, field) in
            [(46, "stop index tag"), (55, "newest only"), (56, "want"), (65, "manifest fingerprint tag")]
        {
            let mut payload = frame[5..].to_vec();
            payload[offset] = 9;
            let err = Message::decode_frame(1, &payload).unwrap_err();
            assert!(
                matches!(&err, ProtocolError::BadValue { field: f, found: 9, .. } if f == field),
                "offset {offset}: {err}"
            );
        }
        let err = Message::decode_frame(0, &[]).unwrap_err();
        assert!(matches!(err, ProtocolError::UnknownFrameType { found: 0 }), "{err}");
    }

    #[test]
    fn invalid_utf8_is_refused() {
        let mut frame = Message::Refused { reason: RefusalReason::BadHandshake, detail: "ab".into() }.encode();
        let end = frame.len();
        frame[end - 1] = 0xff;
        let err = decode(&frame).unwrap_err();
        assert!(matches!(err, ProtocolError::BadUtf8 { frame: FrameType::Refused, .. }), "{err}");
    }

    #[test]
    fn counts_and_lengths_over_their_limits_are_refused_before_allocating() {
        // An entry count over the limit, with nothing behind it.
        let payload = (ENTRIES_PER_FRAME_MAX as u32 + 1).to_le_bytes();
        let err = Message::decode_frame(4, &payload).unwrap_err();
        assert!(matches!(err, ProtocolError::Limit { limit: "ENTRIES_PER_FRAME_MAX", .. }), "{err}");
        // A count within the limit that the payload cannot hold.
        let err = Message::decode_frame(4, &1000u32.to_le_bytes()).unwrap_err();
        assert!(matches!(err, ProtocolError::Truncated { .. }), "{err}");
        // A manifest length of 4 GiB - 1.
        let err = Message::decode_frame(7, &u32::MAX.to_le_bytes()).unwrap_err();
        assert!(matches!(err, ProtocolError::Limit { limit: "MANIFEST_BYTES_MAX", .. }), "{err}");
        // A fingerprint over its limit is refused when sending, too.
        let long =
            Want::Snapshot { resume_chunk: 0, manifest_fingerprint: Some("x".repeat(FINGERPRINT_BYTES_MAX + 1)) };
        let message = Message::Hello(hello(long));
        assert!(matches!(message.check_limits(), Err(ProtocolError::Limit { limit: "FINGERPRINT_BYTES_MAX", .. })));
        assert!(matches!(decode(&message.encode()), Err(ProtocolError::Limit { limit: "FINGERPRINT_BYTES_MAX", .. })));
        let message =
            Message::Refused { reason: RefusalReason::ShuttingDown, detail: "x".repeat(DETAIL_BYTES_MAX + 1) };
        assert!(message.check_limits().is_err());
        assert!(decode(&message.encode()).is_err());
    }

    #[test]
    fn entries_total_is_bounded() {
        let big = vec![0u8; ENTRY_COMPRESSED_BYTES_MAX];
        let fits = Message::Entries { entries: vec![big.clone()] };
        fits.check_limits().unwrap();
        assert_eq!(decode(&fits.encode()).unwrap(), fits);
        let over = Message::Entries { entries: vec![big.clone(), big] };
        assert!(matches!(over.check_limits(), Err(ProtocolError::Limit { limit: "ENTRIES_BYTES_MAX", .. })));
        assert!(matches!(decode(&over.encode()), Err(ProtocolError::Limit { limit: "ENTRIES_BYTES_MAX", .. })));
    }

    #[test]
    fn a_maximal_chunk_is_exactly_the_largest_frame() {
        let max = CHUNK_BYTES_MAX as usize;
        let chunk = SnapshotChunk { number: 0, file: 0, offset: 0, bytes: vec![7; max], crc32c: 0 };
        let message = Message::SnapshotChunk(chunk);
        message.check_limits().unwrap();
        let frame = message.encode();
        assert_eq!(frame.len(), 4 + FRAME_BYTES_MAX);
        assert_eq!(decode(&frame).unwrap(), message);
        let Message::SnapshotChunk(mut chunk) = message else { unreachable!() };
        chunk.bytes.push(7);
        let over = Message::SnapshotChunk(chunk);
        assert!(matches!(over.check_limits(), Err(ProtocolError::Limit { limit: "CHUNK_BYTES_MAX", .. })));
        let frame = over.encode();
        assert!(matches!(frame_length(frame[..4].try_into().unwrap()), Err(ProtocolError::FrameTooLarge { .. })));
        assert!(Message::decode_frame(frame[4], &frame[5..]).is_err());
    }

    #[test]
    fn compressed_entries_survive_the_trip() {
        let mut prev = ChainHash::GENESIS;
        let mut entries = vec![];
        for index in 1..=3 {
            let entry = LogEntry::seal(
                index,
                DatabaseId(9),
                index * 1000,
                prev,
                vec![Op::Set { key: format!("k{index}").into_bytes(), value: vec![index as u8; 300] }],
            )
            .unwrap();
            prev = entry.hash;
            entries.push(entry);
        }
        let message = Message::Entries { entries: entries.iter().map(LogEntry::compress).collect() };
        let Message::Entries { entries: received } = decode(&message.encode()).unwrap() else { panic!() };
        let decoded: Vec<LogEntry> = received.iter().map(|c| LogEntry::decompress(c).unwrap()).collect();
        assert_eq!(decoded, entries);
    }

    #[test]
    fn compressed_entry_bound_is_snappys_worst_case() {
        assert_eq!(ENTRY_COMPRESSED_BYTES_MAX, snap::raw::max_compress_len(ENTRY_BYTES_MAX));
    }
}
