//! The snapshot half of the fetch judge: a replica fetches each snapshot chunk once.
//!
//! A replica stores a transfer chunk by chunk in its staging directory, each chunk durable
//! before the next is asked for (`SnapshotImport::write_chunk`), so a broken transfer resumes
//! where it stopped. The judge follows what the replica holds ([`Staged`]) from what it reads:
//! the manifest it is sent (a different one starts a new transfer; one behind the replica's
//! store is discarded), each chunk in order that passes its CRC, and the `SnapshotDone` that
//! ends the transfer. Two rules, true of any correct node:
//! - **the client resumes from what it stored**: a hello for a snapshot names the manifest and
//!   the first chunk the replica does not hold (judged, like the log's hello, against what it
//!   held both when the source read the hello and when the replica read the answer);
//! - **the source sends from the chunk asked for**: on a connection whose hello named the
//!   manifest the source then sends, no chunk below the hello's resume chunk.
//!
//! A replica stores a chunk — data and progress synced — as soon as it has read the chunk's
//! frame, before it next waits on anything, so a kill, a graceful stop or a power loss cannot come
//! between the two: a chunk read is a chunk held. Only a disk answering errors can refuse to store
//! it; a chunk read while one does may be missing (the transfer then breaks off, so only the last
//! one). A new (empty) disk holds nothing.

use qs_node::store::snapshot::{SnapshotChunk, SnapshotManifest};

/// What a replica holds of a snapshot transfer, as the judge follows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) enum Staged {
    /// Nothing to resume: no transfer begun, or it ended (installed, discarded, a new disk).
    #[default]
    Nothing,
    /// Chunks `0..next` of the snapshot whose manifest has `fingerprint` are stored.
    Chunks { fingerprint: String, next: u64 },
    /// As `Chunks`, but the last chunk was read while the disk answered errors: it may be
    /// missing. The next hello for a snapshot says which.
    Faulted { fingerprint: String, next: u64 },
}

impl Staged {
    /// What is certainly held: a faulted transfer may lack its last chunk.
    fn certain(&self) -> Option<(&str, u64)> {
        match self {
            Staged::Nothing => None,
            Staged::Chunks { fingerprint, next } => Some((fingerprint, *next)),
            Staged::Faulted { fingerprint, next } => Some((fingerprint, next.saturating_sub(1))),
        }
    }

    /// What a faulted transfer holds, by the hello (`resume`) that tells it: the hello's chunk
    /// when it names the transfer and a chunk the fault can explain, else what is certain.
    pub fn told(&mut self, resume: &Resume) {
        if let Staged::Faulted { fingerprint, next } = self {
            let named = resume.fingerprint.as_ref() == Some(fingerprint);
            let explained = resume.chunk + 1 >= *next && resume.chunk <= *next;
            let next = if named && explained { resume.chunk } else { next.saturating_sub(1) };
            *self = Staged::Chunks { fingerprint: std::mem::take(fingerprint), next };
        }
    }
}

/// A hello for a snapshot: the first chunk it asks for and the manifest it names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Resume {
    pub chunk: u64,
    pub fingerprint: Option<String>,
}

impl Resume {
    /// What this hello asks for again of what `staged` holds, described; `None` when it asks
    /// for nothing held.
    pub fn asks_again(&self, staged: &Staged) -> Option<String> {
        let (fingerprint, next) = staged.certain()?;
        let asked = match &self.fingerprint {
            None => "a new transfer".to_string(),
            Some(named) if named != fingerprint => format!("a new transfer of manifest {}", short(named)),
            Some(_) if self.chunk < next => format!("chunk {} on", self.chunk),
            Some(_) => return None,
        };
        (next > 0).then(|| {
            format!("{asked} while it held chunks 0..{next} of the transfer of manifest {}", short(fingerprint))
        })
    }
}

/// A snapshot connection's state.
#[derive(Debug, Default)]
pub(super) struct Transfer {
    pub resume: Resume,
    /// What the replica held when the source read the hello; taken when the replica reads the
    /// first answer, which is when the hello is judged.
    pub held_when_read: Option<Staged>,
    /// The fingerprint of the manifest the source sent on this connection, if one was sent and
    /// the replica kept it (not behind its store).
    pub manifest: Option<String>,
    /// A chunk failed its check: the replica stops storing on this connection.
    pub broken: bool,
}

/// What happened to a chunk the replica read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ChunkRead {
    /// Stored: the next the replica held.
    Stored,
    /// Already held: fetched again.
    Again,
    /// Not stored (out of order, damaged, or no transfer the judge follows).
    Dropped,
}

impl Transfer {
    /// The replica read `manifest`, holding `staged`, at applied index `applied`: what it holds
    /// after (`SnapshotImport::begin`'s rules, and the client's refusal of a snapshot behind it).
    pub fn manifest(&mut self, manifest: &SnapshotManifest, staged: &mut Staged, applied: u64) {
        if manifest.applied_index < applied {
            *staged = Staged::Nothing;
            self.manifest = None;
            return;
        }
        let fingerprint = manifest.fingerprint();
        let kept = staged.certain().is_some_and(|(held, _)| held == fingerprint);
        if !kept {
            // The hello says what is held when the judge does not know; else a new transfer.
            let next = if self.resume.fingerprint.as_ref() == Some(&fingerprint) { self.resume.chunk } else { 0 };
            *staged = Staged::Chunks { fingerprint: fingerprint.clone(), next };
        }
        self.manifest = Some(fingerprint);
    }

    /// The replica read `chunk`, holding `staged`, its disk answering errors or not.
    pub fn chunk(&mut self, chunk: &SnapshotChunk, staged: &mut Staged, disk_failing: bool) -> ChunkRead {
        let Some(manifest) = &self.manifest else { return ChunkRead::Dropped };
        let (Staged::Chunks { fingerprint, next } | Staged::Faulted { fingerprint, next }) = staged else {
            return ChunkRead::Dropped;
        };
        if self.broken || fingerprint != manifest {
            return ChunkRead::Dropped;
        }
        if chunk.number < *next {
            return ChunkRead::Again;
        }
        if chunk.number > *next || crc32c::crc32c(&chunk.bytes) != chunk.crc32c {
            self.broken = true;
            return ChunkRead::Dropped;
        }
        // A chunk that follows on the same connection proves the one before it was stored.
        let (fingerprint, next) = (std::mem::take(fingerprint), *next + 1);
        *staged =
            if disk_failing { Staged::Faulted { fingerprint, next } } else { Staged::Chunks { fingerprint, next } };
        ChunkRead::Stored
    }

    /// A chunk the source should not have sent: below the resume chunk of the manifest the
    /// hello named, when that is the manifest sent.
    pub fn unasked(&self, chunk: &SnapshotChunk) -> bool {
        self.manifest.is_some() && self.manifest == self.resume.fingerprint && chunk.number < self.resume.chunk
    }
}

/// A fingerprint, shortened for a message.
pub(super) fn short(fingerprint: &str) -> &str {
    fingerprint.get(..12).unwrap_or(fingerprint)
}
