//! Snapshots: bootstrapping a node from a copy of another's store, in resumable chunks.
//!
//! Guarantees:
//! - An export is the engine's own consistent copy (LMDB environment copy, RocksDB checkpoint,
//!   the memory engine's dump) plus a manifest naming the engine, database id, applied index,
//!   chain hash, and every file's length and CRC32C.
//! - A transfer is a sequence of numbered chunks, each checksummed. The importer makes every
//!   chunk durable, then records its progress atomically, so an import interrupted at any moment
//!   resumes from the first chunk it had not made durable — never from scratch, never with a gap.
//! - [`SnapshotImport::finish`] installs nothing until every file matches the manifest, and the
//!   opened store has the manifest's database id, index and chain hash, and every value and log
//!   entry in it verifies.
//!
//! Layout of an export directory: `manifest.json` and `data/` (the engine's files).
//! Layout of a staging directory: `manifest.json`, `progress.json` and `data/` (the files
//! received so far).

use std::fs::{self, File, OpenOptions as FileOptions};
use std::io::{Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::engine::EngineKind;
use super::{LogRead, LogReadLimits, OpenOptions, Store, StoreError, StoreLocation};
use crate::entry::{ChainHash, DatabaseId};

/// Version of the manifest and chunk layout.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 1;
/// Chunk size used by exports.
pub const CHUNK_BYTES_DEFAULT: u64 = 1 << 20;
/// Largest chunk an importer accepts: bounds the memory one chunk can make it allocate.
pub const CHUNK_BYTES_MAX: u64 = 16 << 20;
/// Most files a manifest may list (our engines produce a handful).
pub const FILES_MAX: usize = 10_000;

const MANIFEST_FILE: &str = "manifest.json";
const PROGRESS_FILE: &str = "progress.json";
const DATA_DIR: &str = "data";

/// What a snapshot holds, and how to check that it arrived whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotManifest {
    pub format: u32,
    pub engine: EngineKind,
    pub db_id: DatabaseId,
    pub applied_index: u64,
    pub chain_hash: ChainHash,
    pub chunk_bytes: u64,
    pub files: Vec<SnapshotFile>,
}

/// One file of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFile {
    /// A plain file name inside `data/` (no directories).
    pub name: String,
    pub len: u64,
    pub crc32c: u32,
}

/// One piece of a snapshot in transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotChunk {
    pub number: u64,
    pub file: u32,
    pub offset: u64,
    pub bytes: Vec<u8>,
    pub crc32c: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("snapshot manifest is invalid: {0}")]
    BadManifest(String),
    #[error("chunk {found} arrived, but chunk {expected} is next")]
    ChunkOutOfOrder { expected: u64, found: u64 },
    #[error("chunk {number} does not match the manifest: {reason}")]
    BadChunk { number: u64, reason: String },
    #[error("file {name} does not match the manifest: {reason}")]
    BadFile { name: String, reason: String },
    #[error("snapshot is of a {snapshot} store and cannot be imported into a {target} store")]
    EngineMismatch { snapshot: EngineKind, target: EngineKind },
    #[error("import is incomplete: chunk {next} of {total} is next")]
    Incomplete { next: u64, total: u64 },
    #[error("imported store's {what} is {found}, the manifest says {expected}")]
    Mismatch { what: &'static str, expected: String, found: String },
    #[error("target {0} already holds data; a snapshot is only imported into an empty location")]
    TargetNotEmpty(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError + '_ {
    move |source| SnapshotError::Io { path: path.to_path_buf(), source }
}

impl SnapshotManifest {
    /// Checks what an importer must be able to rely on before it writes anything.
    pub fn validate(&self) -> Result<(), SnapshotError> {
        let bad = |m: String| Err(SnapshotError::BadManifest(m));
        if self.format != SNAPSHOT_FORMAT_VERSION {
            return bad(format!("format {} (this build reads {SNAPSHOT_FORMAT_VERSION})", self.format));
        }
        if self.chunk_bytes == 0 || self.chunk_bytes > CHUNK_BYTES_MAX {
            return bad(format!("chunk_bytes {} is outside 1..={CHUNK_BYTES_MAX}", self.chunk_bytes));
        }
        if self.files.is_empty() || self.files.len() > FILES_MAX {
            return bad(format!("lists {} files (1..={FILES_MAX} allowed)", self.files.len()));
        }
        for file in &self.files {
            let plain = !file.name.is_empty()
                && file.name != "."
                && file.name != ".."
                && !file.name.contains(['/', '\\', '\0'])
                && file.name != PROGRESS_FILE;
            if !plain {
                return bad(format!("file name {:?} is not a plain file name", file.name));
            }
        }
        let mut names: Vec<&str> = self.files.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return bad("lists a file twice".into());
        }
        Ok(())
    }

    /// Chunks of each file: a file of length 0 has none.
    fn chunks_in(&self, file: &SnapshotFile) -> u64 {
        file.len.div_ceil(self.chunk_bytes)
    }

    pub fn chunk_count(&self) -> u64 {
        self.files.iter().map(|f| self.chunks_in(f)).sum()
    }

    /// Which file, offset and length chunk `number` covers.
    fn locate(&self, number: u64) -> Option<(u32, u64, u64)> {
        let mut first = 0;
        for (i, file) in self.files.iter().enumerate() {
            let n = self.chunks_in(file);
            if number < first + n {
                let offset = (number - first) * self.chunk_bytes;
                return Some((i as u32, offset, self.chunk_bytes.min(file.len - offset)));
            }
            first += n;
        }
        None
    }

    /// A short fingerprint of the manifest, to recognise a staged import of the same snapshot.
    pub fn fingerprint(&self) -> String {
        let json = serde_json::to_vec(self).expect("a manifest always serializes");
        blake3::hash(&json).to_hex().to_string()
    }
}

fn file_crc(path: &Path) -> Result<(u64, u32), SnapshotError> {
    let mut file = File::open(path).map_err(io(path))?;
    let mut buf = vec![0; 1 << 20];
    let (mut len, mut crc) = (0u64, 0u32);
    loop {
        let n = file.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            return Ok((len, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        len += n as u64;
    }
}

fn sync_dir(dir: &Path) -> Result<(), SnapshotError> {
    sync_dir_io(dir).map_err(io(dir))
}

/// `fsync`s a directory, so the renames and creations in it are durable.
pub(crate) fn sync_dir_io(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

/// The directory holding `path` (`.` for a bare name).
fn parent_dir(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Makes `path` and every missing directory above it, syncing each one's parent after making
/// it, so the whole chain of names is durable when this returns.
pub(crate) fn create_dir_all_synced(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    let parent = parent_dir(path);
    create_dir_all_synced(parent)?;
    match fs::create_dir(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
        Err(e) => return Err(e),
    }
    sync_dir_io(parent)
}

/// Writes `bytes` to a new file `path`, its folders made as [`create_dir_all_synced`] makes
/// them: when this returns the bytes and the name are durable (a marker that must survive a
/// power loss).
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = parent_dir(path);
    create_dir_all_synced(parent)?;
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    sync_dir_io(parent)
}

/// Writes `bytes` to `path` so that a crash leaves either the old or the new content.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), SnapshotError> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(io(&tmp))?;
    fs::rename(&tmp, path).map_err(io(path))?;
    sync_dir(parent_dir(path))
}

impl Store {
    /// Exports a consistent snapshot into `dir` (which must not exist yet) and returns its
    /// manifest. Writes take `&mut self`, so no commit can land during the export.
    pub fn export_snapshot(&self, dir: &Path) -> Result<SnapshotManifest, StoreError> {
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        fs::create_dir(dir).map_err(io(dir))?;
        let data = dir.join(DATA_DIR);
        self.engine.export_native(&data)?;
        let mut names: Vec<String> = Vec::new();
        for entry in fs::read_dir(&data).map_err(io(&data))? {
            let entry = entry.map_err(io(&data))?;
            if entry.file_type().map_err(io(&data))?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort(); // the file system's order is not deterministic
        let mut files = Vec::with_capacity(names.len());
        for name in names {
            let (len, crc32c) = file_crc(&data.join(&name))?;
            files.push(SnapshotFile { name, len, crc32c });
        }
        let manifest = SnapshotManifest {
            format: SNAPSHOT_FORMAT_VERSION,
            engine: self.engine_kind(),
            db_id: self.db_id(),
            applied_index: self.applied_index(),
            chain_hash: self.chain_hash(),
            chunk_bytes: CHUNK_BYTES_DEFAULT,
            files,
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest always serializes");
        write_atomically(&dir.join(MANIFEST_FILE), &json)?;
        Ok(manifest)
    }
}

/// The serving side of a transfer: an export directory, read chunk by chunk.
#[derive(Debug)]
pub struct SnapshotSource {
    dir: PathBuf,
    manifest: SnapshotManifest,
}

impl SnapshotSource {
    pub fn open(dir: &Path) -> Result<SnapshotSource, SnapshotError> {
        let path = dir.join(MANIFEST_FILE);
        let json = fs::read(&path).map_err(io(&path))?;
        let manifest: SnapshotManifest = serde_json::from_slice(&json)
            .map_err(|e| SnapshotError::BadManifest(format!("{}: {e}", path.display())))?;
        manifest.validate()?;
        Ok(SnapshotSource { dir: dir.to_path_buf(), manifest })
    }

    /// Serves the snapshot in chunks of `chunk_bytes` instead of the size it was exported with.
    pub fn with_chunk_bytes(mut self, chunk_bytes: u64) -> Result<SnapshotSource, SnapshotError> {
        self.manifest.chunk_bytes = chunk_bytes;
        self.manifest.validate()?;
        Ok(self)
    }

    pub fn manifest(&self) -> &SnapshotManifest {
        &self.manifest
    }

    pub fn read_chunk(&self, number: u64) -> Result<SnapshotChunk, SnapshotError> {
        let (file, offset, len) = self.manifest.locate(number).ok_or_else(|| SnapshotError::BadChunk {
            number,
            reason: format!("the snapshot has {} chunks", self.manifest.chunk_count()),
        })?;
        let path = self.dir.join(DATA_DIR).join(&self.manifest.files[file as usize].name);
        let mut handle = File::open(&path).map_err(io(&path))?;
        handle.seek(SeekFrom::Start(offset)).map_err(io(&path))?;
        let mut bytes = vec![0; len as usize];
        handle.read_exact(&mut bytes).map_err(io(&path))?;
        let crc32c = crc32c::crc32c(&bytes);
        Ok(SnapshotChunk { number, file, offset, bytes, crc32c })
    }
}

#[derive(Serialize, Deserialize)]
struct Progress {
    manifest: String,
    next_chunk: u64,
}

/// The receiving side of a transfer: a staging directory that survives interruption.
#[derive(Debug)]
pub struct SnapshotImport {
    staging: PathBuf,
    manifest: SnapshotManifest,
    next_chunk: u64,
}

impl SnapshotImport {
    /// Starts an import into `staging`, or resumes one: if `staging` holds an unfinished import
    /// of the same manifest, everything up to its last recorded chunk is kept, and anything
    /// written after that point is cut off. A staged import of a different snapshot is discarded.
    pub fn begin(staging: &Path, manifest: SnapshotManifest) -> Result<SnapshotImport, SnapshotError> {
        manifest.validate()?;
        let data = staging.join(DATA_DIR);
        let progress_path = staging.join(PROGRESS_FILE);
        let resumed = fs::read(&progress_path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Progress>(&bytes).ok())
            .filter(|p| p.manifest == manifest.fingerprint() && p.next_chunk <= manifest.chunk_count());
        let next_chunk = match resumed {
            Some(progress) => {
                // Cut each file back to what the recorded progress covers.
                for (i, file) in manifest.files.iter().enumerate() {
                    let durable = durable_len(&manifest, i, progress.next_chunk);
                    let path = data.join(&file.name);
                    let handle =
                        FileOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io(&path))?;
                    handle.set_len(durable).and_then(|()| handle.sync_all()).map_err(io(&path))?;
                }
                tracing::info!(staging = %staging.display(), next_chunk = progress.next_chunk, "resuming snapshot import");
                progress.next_chunk
            }
            None => {
                if staging.exists() {
                    fs::remove_dir_all(staging).map_err(io(staging))?;
                }
                fs::create_dir_all(&data).map_err(io(&data))?;
                for file in &manifest.files {
                    let path = data.join(&file.name);
                    File::create(&path).map_err(io(&path))?;
                }
                sync_dir(&data)?;
                let json = serde_json::to_vec_pretty(&manifest).expect("a manifest always serializes");
                write_atomically(&staging.join(MANIFEST_FILE), &json)?;
                0
            }
        };
        let import = SnapshotImport { staging: staging.to_path_buf(), manifest, next_chunk };
        import.record_progress()?;
        Ok(import)
    }

    /// The manifest and next chunk of an import staged in `staging` by an earlier, interrupted
    /// attempt, read without changing anything; `None` if there is none (or it is unreadable).
    pub fn staged(staging: &Path) -> Option<(SnapshotManifest, u64)> {
        let manifest: SnapshotManifest = serde_json::from_slice(&fs::read(staging.join(MANIFEST_FILE)).ok()?).ok()?;
        let progress: Progress = serde_json::from_slice(&fs::read(staging.join(PROGRESS_FILE)).ok()?).ok()?;
        (progress.manifest == manifest.fingerprint() && progress.next_chunk <= manifest.chunk_count())
            .then_some((manifest, progress.next_chunk))
    }

    pub fn manifest(&self) -> &SnapshotManifest {
        &self.manifest
    }

    /// The chunk to ask the source for next.
    pub fn next_chunk(&self) -> u64 {
        self.next_chunk
    }

    pub fn is_complete(&self) -> bool {
        self.next_chunk == self.manifest.chunk_count()
    }

    fn record_progress(&self) -> Result<(), SnapshotError> {
        let progress = Progress { manifest: self.manifest.fingerprint(), next_chunk: self.next_chunk };
        write_atomically(&self.staging.join(PROGRESS_FILE), &serde_json::to_vec(&progress).expect("serializes"))
    }

    /// Verifies `chunk` and makes it durable. It must be exactly [`next_chunk`](Self::next_chunk).
    pub fn write_chunk(&mut self, chunk: &SnapshotChunk) -> Result<(), SnapshotError> {
        if chunk.number != self.next_chunk {
            return Err(SnapshotError::ChunkOutOfOrder { expected: self.next_chunk, found: chunk.number });
        }
        let bad = |reason: String| SnapshotError::BadChunk { number: chunk.number, reason };
        let (file, offset, len) = self.manifest.locate(chunk.number).ok_or_else(|| bad("past the end".into()))?;
        if (chunk.file, chunk.offset, chunk.bytes.len() as u64) != (file, offset, len) {
            return Err(bad(format!(
                "covers file {} offset {} length {}, expected file {file} offset {offset} length {len}",
                chunk.file,
                chunk.offset,
                chunk.bytes.len()
            )));
        }
        if crc32c::crc32c(&chunk.bytes) != chunk.crc32c {
            return Err(bad("checksum mismatch".into()));
        }
        let path = self.staging.join(DATA_DIR).join(&self.manifest.files[file as usize].name);
        let mut handle = FileOptions::new().write(true).open(&path).map_err(io(&path))?;
        handle.seek(SeekFrom::Start(offset)).map_err(io(&path))?;
        handle.write_all(&chunk.bytes).and_then(|()| handle.sync_data()).map_err(io(&path))?;
        self.next_chunk += 1;
        self.record_progress()
    }

    /// Verifies the staged files and the store they hold, then installs it at `target` (an
    /// empty or missing directory, on the same file system as the staging directory, or an
    /// empty memory disk) and opens it.
    pub fn finish(self, target: &StoreLocation, options: &OpenOptions) -> Result<Store, StoreError> {
        let total = self.manifest.chunk_count();
        if self.next_chunk != total {
            return Err(SnapshotError::Incomplete { next: self.next_chunk, total }.into());
        }
        if target.kind() != self.manifest.engine {
            return Err(SnapshotError::EngineMismatch { snapshot: self.manifest.engine, target: target.kind() }.into());
        }
        let data = self.staging.join(DATA_DIR);
        for file in &self.manifest.files {
            let (len, crc) = file_crc(&data.join(&file.name))?;
            if (len, crc) != (file.len, file.crc32c) {
                return Err(SnapshotError::BadFile {
                    name: file.name.clone(),
                    reason: format!(
                        "length {len} crc {crc:08x}, manifest says length {} crc {:08x}",
                        file.len, file.crc32c
                    ),
                }
                .into());
            }
        }
        let options = OpenOptions { db_id: self.manifest.db_id, ..options.clone() };
        match target {
            StoreLocation::Memory(disk) => {
                if !disk.is_empty() {
                    return Err(SnapshotError::TargetNotEmpty("memory disk".into()).into());
                }
                disk.load_dump(&data)?;
                let store = Store::open(target, &options)?;
                verify_imported(&store, &self.manifest)?;
                fs::remove_dir_all(&self.staging).map_err(io(&self.staging))?;
                Ok(store)
            }
            StoreLocation::Lmdb(path) | StoreLocation::Rocksdb(path) => {
                let empty = fs::read_dir(path).map(|mut d| d.next().is_none()).unwrap_or(true);
                if !empty {
                    return Err(SnapshotError::TargetNotEmpty(path.display().to_string()).into());
                }
                {
                    // Verify in place first, so nothing unverified is ever installed.
                    let staged = Store::open(&StoreLocation::new(target.kind(), &data), &options)?;
                    verify_imported(&staged, &self.manifest)?;
                }
                if path.exists() {
                    fs::remove_dir(path).map_err(io(path))?;
                }
                super::faults::check_io(options.io_faults.as_ref(), super::faults::IoOp::Rename)
                    .and_then(|()| fs::rename(&data, path))
                    .map_err(io(path))?;
                sync_dir(parent_dir(path))?;
                fs::remove_dir_all(&self.staging).map_err(io(&self.staging))?;
                Store::open(target, &options)
            }
        }
    }
}

/// Bytes of file `i` covered by chunks before `next_chunk`.
fn durable_len(manifest: &SnapshotManifest, i: usize, next_chunk: u64) -> u64 {
    let first: u64 = manifest.files[..i].iter().map(|f| manifest.chunks_in(f)).sum();
    let done = next_chunk.saturating_sub(first).min(manifest.chunks_in(&manifest.files[i]));
    (done * manifest.chunk_bytes).min(manifest.files[i].len)
}

/// The imported store is the manifest's, and every value and retained log entry verifies.
fn verify_imported(store: &Store, manifest: &SnapshotManifest) -> Result<(), StoreError> {
    let mismatch = |what, expected: String, found: String| -> Result<(), StoreError> {
        Err(SnapshotError::Mismatch { what, expected, found }.into())
    };
    if store.applied_index() != manifest.applied_index {
        return mismatch("applied index", manifest.applied_index.to_string(), store.applied_index().to_string());
    }
    if store.chain_hash() != manifest.chain_hash {
        return mismatch("chain hash", manifest.chain_hash.to_hex(), store.chain_hash().to_hex());
    }
    store.state_digest()?;
    // The retained log must chain, entry to entry, up to the store's chain hash.
    let mut last = store.first_retained_index() - 1;
    let mut prev_hash = None;
    let limits = LogReadLimits { entries_max: 1024, bytes_max: 8 << 20 };
    while last < store.applied_index() {
        let entries = match store.read_log_after(last, limits)? {
            LogRead::Entries(entries) if !entries.is_empty() => entries,
            other => {
                return mismatch(
                    "log",
                    format!("entries up to {}", store.applied_index()),
                    format!("{other:?} after {last}"),
                );
            }
        };
        for entry in entries {
            if prev_hash.is_some_and(|prev| prev != entry.prev_hash) {
                return mismatch(
                    "log chain",
                    format!("entry {} chained to entry {}", entry.index, last),
                    "a break".into(),
                );
            }
            prev_hash = Some(entry.hash);
            last = entry.index;
        }
    }
    if let Some(hash) = prev_hash.filter(|h| *h != store.chain_hash()) {
        return mismatch("newest log entry's hash", store.chain_hash().to_hex(), hash.to_hex());
    }
    Ok(())
}
