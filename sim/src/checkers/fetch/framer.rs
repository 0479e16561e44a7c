//! Framing one direction of a replication connection as TCP hands it over, keeping only what
//! the judge reads: every frame's type, and the payload of the few frames it decodes.
//!
//! Every replica read in a run passes through here, so the framer copies as little as it can:
//! the bytes are appended once, each complete frame is cut out in place, and of an `Entries`
//! frame only the count and the first entry are kept (the judge needs the range, not the
//! entries; their hashes are the `chain` checker's business).

use qs_node::replication::protocol::FrameType;

/// Frames longer than this are not the replication protocol's (its own limit is far lower).
const FRAME_BYTES_SANE: usize = 256 << 20;

/// A complete frame: its type byte, and the part of its payload the judge reads (empty for the
/// frames it only counts).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Frame {
    pub kind: u8,
    pub kept: Kept,
}

/// What was kept of a frame's payload.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Kept {
    /// The whole payload (a hello, a manifest, a snapshot chunk: small, or rare).
    Whole(Vec<u8>),
    /// An `Entries` frame: its entry count and its first entry, still compressed.
    Entries { count: u64, first: Option<Vec<u8>> },
    /// Nothing: the judge only needs to know the frame arrived.
    Nothing,
}

/// Bytes of one direction of a connection, framed as they arrive.
#[derive(Debug, Default)]
pub(super) struct Framer {
    /// Bytes of frames not yet complete.
    pending: Vec<u8>,
    /// The direction carried something that is not the replication protocol: not judged.
    foreign: bool,
}

impl Framer {
    /// Appends `bytes` and returns the frames they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Frame> {
        if self.foreign {
            return Vec::new();
        }
        self.pending.extend_from_slice(bytes);
        let mut frames = Vec::new();
        let mut at = 0;
        while let Some(head) = self.pending.get(at..at + 4) {
            let length = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
            if length == 0 || length > FRAME_BYTES_SANE {
                self.foreign = true;
                self.pending = Vec::new();
                return frames;
            }
            let Some(frame) = self.pending.get(at + 4..at + 4 + length) else { break };
            frames.push(Frame { kind: frame[0], kept: keep(frame[0], &frame[1..]) });
            at += 4 + length;
        }
        self.pending.drain(..at);
        frames
    }
}

/// What the judge reads of a frame of type `kind`.
fn keep(kind: u8, payload: &[u8]) -> Kept {
    let decoded =
        [FrameType::Hello, FrameType::SnapshotManifest, FrameType::SnapshotChunk].map(|t| t as u8).contains(&kind);
    if decoded {
        Kept::Whole(payload.to_vec())
    } else if kind == FrameType::Entries as u8 {
        // The layout the protocol documents: a u32 count, then each entry as a u32 length and
        // its bytes. A frame too short for what it claims keeps no first entry (the node
        // refuses such a frame itself).
        let u32_at = |at: usize| payload.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let count = u32_at(0).unwrap_or(0) as u64;
        let first = u32_at(4).and_then(|len| payload.get(8..8 + len)).filter(|_| count > 0).map(<[u8]>::to_vec);
        Kept::Entries { count, first }
    } else {
        Kept::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qs_node::replication::protocol::Message;

    #[test]
    fn frames_split_anywhere_come_out_whole_and_entries_keep_their_first() {
        let done = Message::SnapshotDone.encode();
        let entries = Message::Entries { entries: vec![vec![1, 2, 3], vec![4, 5]], root_ms: 0 }.encode();
        let stream: Vec<u8> = [done.clone(), entries.clone(), done].concat();
        for split in 0..stream.len() {
            let mut framer = Framer::default();
            let mut frames = framer.push(&stream[..split]);
            frames.extend(framer.push(&stream[split..]));
            let kinds: Vec<u8> = frames.iter().map(|f| f.kind).collect();
            let (k, e) = (FrameType::SnapshotDone as u8, FrameType::Entries as u8);
            assert_eq!(kinds, [k, e, k], "split at {split}");
            assert_eq!(frames[1].kept, Kept::Entries { count: 2, first: Some(vec![1, 2, 3]) });
            assert!(framer.pending.is_empty());
        }
    }

    #[test]
    fn bytes_that_are_not_the_protocol_stop_the_framing() {
        let mut framer = Framer::default();
        assert!(framer.push(&[0xff; 64]).is_empty());
        assert!(framer.push(&Message::SnapshotDone.encode()).is_empty());
    }
}
