//! Each [`Message`]'s limits, its one encoding, and the decoder that reads a frame's payload
//! back without trusting any length or count in it (the layout is the table in the parent
//! module's doc).

use super::*;
use crate::wire::{LeReader, Truncated};

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
            Message::Raft { .. } => FrameType::Raft,
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
            Message::Entries { entries, .. } => {
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
            Message::Raft { message, .. } => {
                check_limit(frame, "message", "RAFT_MESSAGE_BYTES_MAX", RAFT_MESSAGE_BYTES_MAX, message.len())?;
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
            Message::Entries { entries, .. } => entries.iter().map(|e| 4 + e.len()).sum::<usize>() + 12,
            Message::SnapshotManifest { manifest_json } => 4 + manifest_json.len(),
            Message::SnapshotChunk(chunk) => CHUNK_HEADER_BYTES + chunk.bytes.len(),
            Message::Refused { detail, .. } => 5 + detail.len(),
            Message::Raft { message, .. } => 12 + message.len(),
            _ => 128,
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "78 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
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
                    Want::Raft { member } => {
                        out.push(WANT_RAFT);
                        out.extend_from_slice(&member.to_le_bytes());
                    }
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
                if hello.version == PROTOCOL_VERSION {
                    out.extend_from_slice(&hello.root_ms.to_le_bytes());
                }
            }
            Message::Welcome { server_id, db_id, applied_index, first_retained_index, root_ms } => {
                out.extend_from_slice(&server_id.to_le_bytes());
                out.extend_from_slice(&db_id.0.to_le_bytes());
                out.extend_from_slice(&applied_index.to_le_bytes());
                out.extend_from_slice(&first_retained_index.to_le_bytes());
                out.extend_from_slice(&root_ms.to_le_bytes());
            }
            Message::Refused { reason, detail } => {
                out.push(*reason as u8);
                put_bytes(out, detail.as_bytes());
            }
            Message::Entries { entries, root_ms } => {
                out.extend_from_slice(&len_u32(entries.len()));
                for entry in entries {
                    put_bytes(out, entry);
                }
                out.extend_from_slice(&root_ms.to_le_bytes());
            }
            Message::OutOfRetention { requested, first_retained } => {
                out.extend_from_slice(&requested.to_le_bytes());
                out.extend_from_slice(&first_retained.to_le_bytes());
            }
            Message::Keepalive { applied_index, upstream, root_ms } => {
                out.extend_from_slice(&applied_index.to_le_bytes());
                out.push(upstream.wire());
                out.extend_from_slice(&root_ms.to_le_bytes());
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
            Message::Raft { message, root_ms } => {
                put_bytes(out, message);
                out.extend_from_slice(&root_ms.to_le_bytes());
            }
        }
    }

    /// Decodes one frame's payload (everything after the frame type byte), checking every
    /// length against its limit before allocating and refusing trailing bytes.
    #[expect(
        clippy::too_many_lines,
        reason = "107 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
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
        let mut r = Reader { bytes: LeReader::new(payload), frame };
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
                    WANT_RAFT => Want::Raft { member: r.u64("member")? },
                    other => return Err(r.bad_value("want", other, "1 (log), 2 (snapshot) or 3 (raft)")),
                };
                // Only this version's hello carries it: another's decodes without, to be refused by
                // its version.
                let root_ms = if version == PROTOCOL_VERSION { r.u64("root time")? } else { 0 };
                Message::Hello(ClientHello {
                    version,
                    client_id,
                    db_id,
                    last_index,
                    stop_index,
                    newest_only,
                    want,
                    root_ms,
                })
            }
            FrameType::Welcome => Message::Welcome {
                server_id: r.u128("server id")?,
                db_id: DatabaseId(r.u128("database id")?),
                applied_index: r.u64("applied index")?,
                first_retained_index: r.u64("first retained index")?,
                root_ms: r.u64("root time")?,
            },
            FrameType::Refused => {
                let code = r.u8("reason")?;
                let reason = RefusalReason::from_u8(code)
                    .ok_or_else(|| r.bad_value("reason", code, "a refusal reason (1..=7)"))?;
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
                Message::Entries { entries, root_ms: r.u64("root time")? }
            }
            FrameType::OutOfRetention => Message::OutOfRetention {
                requested: r.u64("requested index")?,
                first_retained: r.u64("first retained index")?,
            },
            FrameType::Keepalive => Message::Keepalive {
                applied_index: r.u64("applied index")?,
                upstream: UpstreamStatus::from_wire(r.u8("upstream")?),
                root_ms: r.u64("root time")?,
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
            FrameType::Raft => {
                let message = r.bytes("message", "RAFT_MESSAGE_BYTES_MAX", RAFT_MESSAGE_BYTES_MAX)?;
                Message::Raft { message: message.to_vec(), root_ms: r.u64("root time")? }
            }
        };
        r.finish()?;
        Ok(message)
    }
}

const WANT_LOG: u8 = 1;
const WANT_SNAPSHOT: u8 = 2;
const WANT_RAFT: u8 = 3;

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
    bytes: LeReader<'a>,
    frame: FrameType,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.left()
    }

    /// Checks that `n` more bytes are there, without taking them.
    fn need(&self, n: usize, field: &str) -> Result<(), ProtocolError> {
        self.bytes.need(n, field).map_err(|short| self.truncated(short))
    }

    fn truncated(&self, short: Truncated) -> ProtocolError {
        let Truncated { field, at, needed, left } = short;
        ProtocolError::Truncated { frame: self.frame, field, offset: at, needed, left }
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], ProtocolError> {
        self.bytes.take(n, field).map_err(|short| self.truncated(short))
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], ProtocolError> {
        self.bytes.array(field).map_err(|short| self.truncated(short))
    }

    fn u8(&mut self, field: &str) -> Result<u8, ProtocolError> {
        self.bytes.u8(field).map_err(|short| self.truncated(short))
    }

    fn u16(&mut self, field: &str) -> Result<u16, ProtocolError> {
        self.bytes.u16(field).map_err(|short| self.truncated(short))
    }

    fn u32(&mut self, field: &str) -> Result<u32, ProtocolError> {
        self.bytes.u32(field).map_err(|short| self.truncated(short))
    }

    fn u64(&mut self, field: &str) -> Result<u64, ProtocolError> {
        self.bytes.u64(field).map_err(|short| self.truncated(short))
    }

    fn u128(&mut self, field: &str) -> Result<u128, ProtocolError> {
        self.bytes.u128(field).map_err(|short| self.truncated(short))
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
