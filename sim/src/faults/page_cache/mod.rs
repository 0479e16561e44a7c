//! The simulated page cache: what a power loss takes from the real files of LMDB, RocksDB and
//! the node itself.
//!
//! A process that writes a file hands the bytes to the kernel's page cache; they reach the
//! device when the process syncs the file (`fsync`, `fdatasync`, or a write on a descriptor
//! opened `O_SYNC`/`O_DSYNC`). A power loss keeps what was synced and loses the rest. The engines
//! write their files with libc's own calls, so inside the simulator build this module stands in
//! front of those calls — `write`, `pwrite`, `writev`, `pwritev`, `ftruncate`, `fsync`,
//! `fdatasync`, `close`, `unlink`, `rename` and their variants — the way madsim stands in front of
//! the clock and the random source: the executable defines the symbols, so LMDB's and RocksDB's
//! C code and the standard library call these, and these call libc's (found with
//! `dlsym(RTLD_NEXT)`). Nothing here changes what a call does: it only remembers, for the files
//! under a [`watch`]ed directory, what has not been synced yet.
//!
//! Guarantees, for every regular file under a watched directory:
//! - bytes a write puts over the file's last synced contents are kept aside (a copy of each
//!   4 KiB page before its first unsynced write), and bytes past the last synced length are
//!   unsynced until the next sync of that file;
//! - [`cut_power`] makes the file what a disk would hold after the power went out: every
//!   overwritten page back to its synced contents, and of the bytes appended since the last sync
//!   a prefix of whole 512-byte sectors drawn by the caller (none, some, or all: the last write
//!   torn at a sector, as the ALICE study models it);
//! - from [`cut_power`] until [`restore_power`], nothing the dying process still does under that
//!   directory lands: writes, truncations, syncs, unlinks and renames report success and change
//!   nothing (a killed madsim process drops its tasks lazily, and RocksDB syncs its log when it
//!   closes: neither may make anything durable after the cut).
//!
//! Directory entries are pending until their directory is synced, and a power loss may undo
//! them (`entries`: a file created, renamed or unlinked since its directory's last sync may be
//! gone, back where it was, or back at all); the cut puts the directories right first, then
//! the files' bytes.
//!
//! What is not modelled, and why: writes through a writable memory map (LMDB's
//! `MDB_WRITEMAP`: the simulator refuses the planted no-sync bug on such an environment, since a
//! synced map loses nothing anyway);
//! the kernel writing dirty pages back on its own (the planted no-sync bug's node syncs every
//! 5 s, standing in for it); `copy_file_range` and `sendfile` into a watched file (refused with
//! `EXDEV`/`EINVAL`, after which callers copy with `write`).
//!
//! Determinism: which pages and lengths exist follows from the calls the nodes make, which the
//! seed fixes (RocksDB settles its background work at once on a disk whose power can fail, see
//! `IoFaults::power_can_fail`); [`cut_power`] visits files in path order and draws torn lengths
//! from the caller's generator.
//!
//! The hooks cost nothing while no directory is watched (one atomic load), and one `fstat` per
//! call while one is.

use crate::sync::Locked;
use std::collections::BTreeMap;
use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The page the cache keeps aside: the kernel's.
const PAGE: u64 = 4096;
/// The unit a torn append keeps: a sector.
const SECTOR: u64 = 512;

/// What a power loss took from one watched directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Files that lost anything.
    pub files: u64,
    /// Overwritten pages put back to their synced contents.
    pub pages: u64,
    /// Appended bytes that never reached the disk.
    pub appended_bytes: u64,
    /// Directory entries undone: made, removed or renamed since their directory's last sync
    /// (see `entries`).
    pub entries: u64,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == Lost::default() {
            return write!(f, "every write was synced");
        }
        write!(
            f,
            "lost unsynced writes in {} files: {} overwritten pages, {} appended bytes; {} directory entries undone",
            self.files, self.pages, self.appended_bytes, self.entries
        )
    }
}

/// A file, as the kernel names it: (device, inode). Hard links (RocksDB's checkpoints) and
/// renames keep it.
type FileId = (u64, u64);

/// What the cache holds for one file.
#[derive(Debug)]
struct FileState {
    /// The file's length on the device.
    synced_len: u64,
    /// Page index → the page's synced bytes (up to `synced_len`), for pages written since.
    saved: BTreeMap<u64, Vec<u8>>,
}

/// What a descriptor refers to, as last looked up.
#[derive(Clone, Copy, Debug)]
struct FdInfo {
    file: FileId,
    /// A watched file: its watched directory, and whether every write through this descriptor
    /// is synced (`O_SYNC`/`O_DSYNC`) and whether it appends (`O_APPEND`).
    watched: Option<Watched>,
}

#[derive(Clone, Copy, Debug)]
struct Watched {
    dead: bool,
    sync_writes: bool,
    append: bool,
}

#[derive(Debug, Default)]
struct Cache {
    /// Watched directories (canonical), with whether their power is out.
    roots: BTreeMap<PathBuf, bool>,
    fds: BTreeMap<i32, FdInfo>,
    files: BTreeMap<FileId, FileState>,
    /// Every watched directory's durable entries.
    entries: entries::Entries,
}

static WATCHING: AtomicBool = AtomicBool::new(false);
static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();

thread_local! {
    /// Set while this thread is inside a hook: anything the hook calls goes straight to libc.
    static IN_HOOK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn cache() -> MutexGuard<'static, Cache> {
    CACHE.get_or_init(Default::default).locked()
}

/// A watched directory: unsynced writes under it are kept until it is dropped.
#[derive(Debug)]
pub struct Watch {
    /// Canonical, as the descriptors' paths are read back.
    dir: PathBuf,
}

/// Starts keeping unsynced writes for every file under `dir` (made if missing), until the
/// returned [`Watch`] is dropped.
pub fn watch(dir: &Path) -> std::io::Result<Watch> {
    std::fs::create_dir_all(dir)?;
    let dir = std::fs::canonicalize(dir)?;
    let _guard = HookGuard::enter();
    let mut cache = cache();
    if cache.roots.insert(dir.clone(), false).is_some() {
        return Err(std::io::Error::other(format!("{} is watched already", dir.display())));
    }
    if let Err(e) = cache.entries.take_durable(&dir) {
        cache.roots.remove(&dir);
        return Err(e);
    }
    cache.fds.clear();
    WATCHING.store(true, Ordering::Release);
    Ok(Watch { dir })
}

impl Drop for Watch {
    /// Stops watching and forgets what was kept for the directory (the run that watched it ends).
    fn drop(&mut self) {
        let _guard = HookGuard::enter();
        let mut cache = cache();
        cache.roots.remove(&self.dir);
        cache.entries.forget(&self.dir);
        cache.fds.clear();
        if cache.roots.is_empty() {
            cache.files.clear();
            WATCHING.store(false, Ordering::Release);
        }
    }
}

impl Watch {
    /// The power goes out for the watched directory: every file under it becomes what its disk
    /// holds (see the module doc), and nothing written under it lands until
    /// [`restore_power`](Self::restore_power). `draw(n)` returns a number in `0..n` (how many of
    /// an append's sectors reached the disk).
    pub fn cut_power(&self, draw: &mut dyn FnMut(u64) -> u64) -> std::io::Result<Lost> {
        let _guard = HookGuard::enter();
        let mut cache = cache();
        cache.roots.insert(self.dir.clone(), true);
        cache.fds.clear();
        // The directories first: which files are there at all.
        let cut = cache.entries.cut(&self.dir, draw)?;
        for id in &cut.freed {
            cache.files.remove(id);
        }
        let mut files = Vec::new();
        regular_files(&self.dir, &mut files)?;
        let mut lost = Lost { entries: cut.undone, ..Lost::default() };
        for path in files {
            let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
            use std::os::unix::fs::MetadataExt;
            let Some(state) = cache.files.get_mut(&(meta.dev(), meta.ino())) else { continue };
            let len = meta.len();
            let appended = len.saturating_sub(state.synced_len);
            if appended == 0 && state.saved.is_empty() && len == state.synced_len {
                continue;
            }
            let kept = if appended == 0 { 0 } else { (draw(appended.div_ceil(SECTOR) + 1) * SECTOR).min(appended) };
            let file = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
            // The sectors of the append that reached the disk, then: back to the synced length
            // (undoing a truncation since the sync too), the synced pages over it, and the torn
            // append after them.
            let torn = real::read_at(fd, state.synced_len, kept as usize);
            real::ftruncate(fd, state.synced_len)?;
            for (page, bytes) in &state.saved {
                real::pwrite_all(fd, bytes, page * PAGE)?;
            }
            real::pwrite_all(fd, &torn, state.synced_len)?;
            lost.files += 1;
            lost.pages += state.saved.len() as u64;
            lost.appended_bytes += appended - kept;
            state.saved.clear();
            state.synced_len += kept;
        }
        Ok(lost)
    }

    /// The power is back: writes under the directory land again.
    pub fn restore_power(&self) {
        let _guard = HookGuard::enter();
        let mut cache = cache();
        cache.roots.insert(self.dir.clone(), false);
        cache.fds.clear();
    }
}

/// Every regular file under `dir`, in path order.
fn regular_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => regular_files(&path, out)?,
            Ok(meta) if meta.is_file() => out.push(path),
            _ => {}
        }
    }
    Ok(())
}

/// Marks this thread as inside a hook for its lifetime.
struct HookGuard {
    outer: bool,
}

impl HookGuard {
    fn enter() -> HookGuard {
        HookGuard { outer: IN_HOOK.with(|h| h.replace(true)) }
    }
}

impl Drop for HookGuard {
    fn drop(&mut self) {
        IN_HOOK.with(|h| h.set(self.outer));
    }
}

/// The hook's view of one call on `fd`: `None` when nothing here concerns it.
fn lookup(cache: &mut Cache, fd: i32) -> Option<FdInfo> {
    if fd < 0 {
        return None;
    }
    let stat = real::fstat(fd)?;
    let file = (stat.st_dev, stat.st_ino);
    if let Some(info) = cache.fds.get(&fd)
        && info.file == file
    {
        return Some(*info);
    }
    let watched = if stat.st_mode & libc::S_IFMT == libc::S_IFREG {
        let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok();
        path.and_then(|path| cache.roots.iter().find(|(root, _)| path.starts_with(root)).map(|(_, dead)| *dead)).map(
            |dead| {
                let flags = real::fcntl_getfl(fd);
                Watched { dead, sync_writes: flags & libc::O_DSYNC != 0, append: flags & libc::O_APPEND != 0 }
            },
        )
    } else {
        None
    };
    if watched.is_some() {
        cache
            .files
            .entry(file)
            .or_insert_with(|| FileState { synced_len: stat.st_size as u64, saved: BTreeMap::new() });
    }
    let info = FdInfo { file, watched };
    cache.fds.insert(fd, info);
    Some(info)
}

/// What a hook does with a call on a watched file.
enum Verdict {
    /// Not watched, or nothing to keep: call libc.
    Pass,
    /// Call libc; the write is synced when it returns (`O_DSYNC`): tell [`after_synced_write`].
    Synced,
    /// The power is out: report success, change nothing.
    Drop,
}

/// Runs `act` on a call on `fd` when `fd` writes a file under a watched directory whose power
/// is on: `Pass` for any other descriptor (or a call from inside a hook), `Drop` while the
/// power is out. The prologue every hook on a descriptor shares.
fn on_watched(fd: i32, act: impl FnOnce(&mut FileState, Watched) -> Verdict) -> Verdict {
    if !WATCHING.load(Ordering::Acquire) || IN_HOOK.with(|h| h.get()) {
        return Verdict::Pass;
    }
    let _guard = HookGuard::enter();
    let mut cache = cache();
    let Some(FdInfo { file, watched: Some(watched) }) = lookup(&mut cache, fd) else { return Verdict::Pass };
    if watched.dead {
        return Verdict::Drop;
    }
    let state = cache.files.get_mut(&file).expect("looked up with its file");
    act(state, watched)
}

/// Before a write of `len` bytes at `offset` (None: the descriptor's position) through `fd`.
fn before_write(fd: i32, offset: Option<i64>, len: usize) -> Verdict {
    if len == 0 {
        return Verdict::Pass;
    }
    on_watched(fd, |state, watched| {
        if watched.sync_writes {
            // Durable when it returns: the pages kept aside take the new bytes as synced ones.
            return Verdict::Synced;
        }
        let at = match offset {
            Some(at) => at as u64,
            None if watched.append => real::fstat(fd).map_or(0, |s| s.st_size as u64),
            None => real::position(fd),
        };
        keep_synced_pages(state, fd, at, at + len as u64);
        Verdict::Pass
    })
}

/// Keeps aside the synced bytes of every page that a write over `at..end` covers: an append
/// past the synced length leaves them as they are.
fn keep_synced_pages(state: &mut FileState, fd: i32, at: u64, end: u64) {
    for page in at / PAGE..=(end - 1) / PAGE {
        let start = page * PAGE;
        let covers_synced = at.max(start) < end.min(state.synced_len);
        if !covers_synced || state.saved.contains_key(&page) {
            continue;
        }
        let page_end = (start + PAGE).min(state.synced_len);
        state.saved.insert(page, real::read_at(fd, start, (page_end - start) as usize));
    }
}

/// After a synced write (`O_DSYNC`) of `bytes` at `offset` through `fd`: the device holds them.
fn after_synced_write(fd: i32, offset: Option<i64>, written: &[u8]) {
    if written.is_empty() {
        return;
    }
    on_watched(fd, |state, watched| {
        if !watched.sync_writes {
            return Verdict::Pass;
        }
        let end = match offset {
            Some(at) => at as u64 + written.len() as u64,
            None => real::position(fd),
        };
        let at = end - written.len() as u64;
        for (page, saved) in state.saved.range_mut(at / PAGE..=(end - 1) / PAGE) {
            let start = page * PAGE;
            for (i, byte) in saved.iter_mut().enumerate() {
                let pos = start + i as u64;
                if (at..end).contains(&pos) {
                    *byte = written[(pos - at) as usize];
                }
            }
        }
        state.synced_len = state.synced_len.max(end);
        Verdict::Pass
    });
}

/// A sync of `fd`: everything written to its file is on the device.
fn on_sync(fd: i32) -> Verdict {
    on_watched(fd, |state, _| {
        state.saved.clear();
        state.synced_len = real::fstat(fd).map_or(0, |s| s.st_size as u64);
        Verdict::Pass
    })
}

/// Before `ftruncate(fd, len)`. A growth is durable at once (metadata, as directory entries
/// are here): an unsynced append it covers reads as zeros after a power loss. A shrink keeps
/// the synced bytes it cuts.
fn before_truncate(fd: i32, len: i64) -> Verdict {
    let len = len.max(0) as u64;
    on_watched(fd, |state, _| {
        let current = real::fstat(fd).map_or(0, |s| s.st_size as u64);
        if len >= current {
            // The unsynced append below the new length: zeros on the device, past the synced
            // bytes.
            for page in state.synced_len / PAGE..current.div_ceil(PAGE) {
                if state.saved.contains_key(&page) {
                    continue;
                }
                let start = page * PAGE;
                let mut bytes = if start < state.synced_len {
                    real::read_at(fd, start, (state.synced_len - start) as usize)
                } else {
                    Vec::new()
                };
                bytes.resize(((start + PAGE).min(len) - start) as usize, 0);
                state.saved.insert(page, bytes);
            }
            state.synced_len = state.synced_len.max(len);
        } else {
            // A shrink: the synced bytes of the pages it cuts are kept aside.
            keep_synced_pages(state, fd, len, state.synced_len.max(len + 1));
        }
        Verdict::Pass
    })
}

/// `fd` is closed (or replaced by `dup2`): forget what it referred to.
fn forget_fd(fd: i32) {
    if !WATCHING.load(Ordering::Acquire) || IN_HOOK.with(|h| h.get()) {
        return;
    }
    let _guard = HookGuard::enter();
    cache().fds.remove(&fd);
}

/// `path` (relative to `dirfd`) as an absolute path.
fn resolve(dirfd: i32, path: &CStr) -> PathBuf {
    let path = Path::new(OsStr::from_bytes(path.to_bytes()));
    if path.is_absolute() {
        return path.to_path_buf();
    }
    let base = if dirfd == libc::AT_FDCWD {
        std::env::current_dir().unwrap_or_default()
    } else {
        std::fs::read_link(format!("/proc/self/fd/{dirfd}")).unwrap_or_default()
    };
    base.join(path)
}

/// How a directory entry goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Removal {
    /// `unlink`, or `unlinkat` without `AT_REMOVEDIR`.
    Unlink,
    /// `rmdir`, or `unlinkat` with `AT_REMOVEDIR`.
    Rmdir,
    /// The target of a rename, replaced.
    Replaced,
}

/// Before `path`'s directory entry goes. Under a directory whose power is out the call is
/// dropped. Otherwise what a durable directory listing names is kept for the cut (`entries`):
/// a file losing its last name is linked aside, a directory removed or replaced is moved aside
/// (and a removal so done is reported done: `Drop`); and a file whose last name goes is
/// forgotten (its inode may be reused).
fn before_removal(path: &Path, removal: Removal) -> Verdict {
    if !WATCHING.load(Ordering::Acquire) || IN_HOOK.with(|h| h.get()) {
        return Verdict::Pass;
    }
    let _guard = HookGuard::enter();
    let mut cache = cache();
    // The parent canonical, the name as given: the entry itself may be a symlink or missing.
    let canonical =
        path.parent().and_then(|p| std::fs::canonicalize(p).ok()).map(|p| p.join(path.file_name().unwrap_or_default()));
    let Some(canonical) = canonical else { return Verdict::Pass };
    let Some((root, dead)) = cache.roots.iter().find(|(root, _)| canonical.starts_with(root)) else {
        return Verdict::Pass;
    };
    if *dead {
        return Verdict::Drop;
    }
    let root = root.clone();
    let Ok(meta) = std::fs::symlink_metadata(&canonical) else { return Verdict::Pass };
    let kept = if meta.is_dir() {
        cache.entries.instead_of_rmdir(&root, &canonical)
    } else {
        cache.entries.before_unlink(&root, &canonical).map(|()| false)
    };
    let moved_aside = kept.unwrap_or_else(|e| {
        panic!("the simulated page cache could not keep {} for a power loss: {e}", canonical.display())
    });
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = std::fs::symlink_metadata(&canonical)
        && meta.is_file()
        && meta.nlink() <= 1
    {
        cache.files.remove(&(meta.dev(), meta.ino()));
    }
    if moved_aside && removal == Removal::Rmdir { Verdict::Drop } else { Verdict::Pass }
}

/// After a sync of the descriptor `fd`: a directory's under a watched root, with the power on,
/// makes its entries durable.
fn on_dir_sync(fd: i32) {
    if !WATCHING.load(Ordering::Acquire) || IN_HOOK.with(|h| h.get()) {
        return;
    }
    let _guard = HookGuard::enter();
    let mut cache = cache();
    let Some(stat) = real::fstat(fd) else { return };
    if stat.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return;
    }
    let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else { return };
    let Some((root, false)) = cache.roots.iter().find(|(root, _)| path.starts_with(root)).map(|(r, d)| (r.clone(), *d))
    else {
        return;
    };
    match cache.entries.synced_dir(&root, (stat.st_dev, stat.st_ino), &path) {
        Ok(freed) => {
            for id in freed {
                cache.files.remove(&id);
            }
        }
        Err(e) => panic!("the simulated page cache could not take {}'s entries as synced: {e}", path.display()),
    }
}

mod entries;
mod hooks;
mod real;

/// Whether `fd` writes a watched file.
fn is_watched_fd(fd: i32) -> bool {
    if !WATCHING.load(Ordering::Acquire) || IN_HOOK.with(|h| h.get()) {
        return false;
    }
    let _guard = HookGuard::enter();
    lookup(&mut cache(), fd).is_some_and(|info| info.watched.is_some())
}

/// `Drop` when `path` lies under a directory whose power is out.
fn dead_verdict(path: &Path) -> Verdict {
    if !WATCHING.load(Ordering::Acquire) || IN_HOOK.with(|h| h.get()) {
        return Verdict::Pass;
    }
    let _guard = HookGuard::enter();
    let cache = cache();
    let canonical = path.parent().and_then(|p| std::fs::canonicalize(p).ok()).unwrap_or_else(|| path.to_path_buf());
    match cache.roots.iter().find(|(root, _)| canonical.starts_with(root)) {
        Some((_, true)) => Verdict::Drop,
        _ => Verdict::Pass,
    }
}
