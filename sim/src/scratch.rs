//! Where runs keep their files while they run.
//!
//! A run's nodes keep their on-disk stores and snapshot transfers in a scratch directory that
//! lives as long as the run. A run that ends removes its own; one killed (a sweep's budget, the
//! OOM killer, a signal) cannot, so a sweep gives each run process a scratch folder of its own
//! and removes it whatever the process's end ([`RunScratch`]): a nightly sweep of thousands of
//! runs never fills `/dev/shm`, which is memory. A `qsim` process interrupted (Ctrl-C, SIGTERM,
//! SIGHUP) removes the scratch folders it made before it dies ([`remove_on_interrupt`]).

use crate::sync::Locked;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How many times an interrupt removes the scratch folders a still-running simulation may
/// recreate, 10 ms apart, before it gives up and dies anyway.
const INTERRUPT_REMOVALS_MAX: usize = 50;

/// The scratch folders this process made and has not removed yet: what an interrupt removes.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Makes the process remove its live scratch folders on SIGINT, SIGTERM or SIGHUP, then die of
/// that signal as it would have without this. Without it an interrupted run's stores stayed in
/// `/dev/shm`, holding memory until the next reboot.
///
/// The signals are taken on a thread of their own, outside any simulation, so this changes
/// nothing a run draws or records. The simulation may still be writing while the folders go;
/// it is about to end with the process either way.
pub fn remove_on_interrupt() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let watch = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]).and_then(|mut signals| {
        std::thread::Builder::new().name("qsim-interrupts".into()).spawn(move || {
            let Some(signal) = signals.forever().next() else { return };
            let dirs: Vec<PathBuf> = LIVE.locked().clone();
            // The simulation goes on until the process dies: a store it writes can add a file
            // between the walk and the last rmdir, and a node it starts meanwhile recreates its
            // folders (`create_dir_all`). Remove until they have stayed gone for a moment.
            for _ in 0..INTERRUPT_REMOVALS_MAX {
                for dir in &dirs {
                    let _ = std::fs::remove_dir_all(dir);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
                if dirs.iter().all(|dir| !dir.exists()) {
                    break;
                }
            }
            if !dirs.is_empty() {
                eprintln!("qsim: interrupted; removed {} scratch folder(s)", dirs.len());
            }
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            std::process::exit(128 + signal);
        })
    });
    if let Err(e) = watch {
        eprintln!("qsim: warning: cannot watch for interrupts ({e}); an interrupted run leaves its scratch folder");
    }
}

/// A scratch folder under [`scratch_root`], removed with everything in it when dropped or when
/// the process is interrupted ([`remove_on_interrupt`]).
#[derive(Debug)]
pub struct ScratchDir(tempfile::TempDir);

impl ScratchDir {
    /// Makes `<scratch root>/<prefix>XXXXXX`.
    pub fn new(prefix: &str) -> std::io::Result<ScratchDir> {
        ScratchDir::new_in(prefix, &scratch_root())
    }

    /// Makes `<root>/<prefix>XXXXXX`.
    pub fn new_in(prefix: &str, root: &Path) -> std::io::Result<ScratchDir> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(root)?;
        LIVE.locked().push(dir.path().to_path_buf());
        Ok(ScratchDir(dir))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        LIVE.locked().retain(|live| live != self.0.path());
    }
}

/// Where runs keep their scratch directories: `QSIM_SCRATCH_DIR` if set, else `/dev/shm` where
/// it is a writable directory, else the system's temporary directory.
///
/// In memory by default because nothing in the simulation needs the host's disk: durability is
/// the simulated disk's to model (its latencies, power loss, SIGBUS), and a killed node's
/// process is the simulator's own, so whatever LMDB and RocksDB wrote stays in the host's page
/// cache either way. On a real disk every one of their commits waited for a host `fsync` that
/// buys nothing here — most of an LMDB or RocksDB run's wall time.
pub fn scratch_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("QSIM_SCRATCH_DIR").filter(|d| !d.is_empty()) {
        return dir.into();
    }
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir() && tempfile::Builder::new().prefix("qsim-probe-").tempfile_in(shm).is_ok();
    if writable { shm.to_path_buf() } else { std::env::temp_dir() }
}

/// Where a real run (`qsim real`) keeps its nodes' folders: `QSIM_SCRATCH_DIR` if set, else the
/// system's temporary directory — on a disk, not in memory: a real node's `fsync` is part of
/// what a real run exercises.
pub fn disk_root() -> PathBuf {
    std::env::var_os("QSIM_SCRATCH_DIR").filter(|d| !d.is_empty()).map_or_else(std::env::temp_dir, PathBuf::from)
}

/// The scratch folder of one run process, under [`scratch_root`], handed to it through
/// `QSIM_SCRATCH_DIR` and removed with everything in it when this is dropped.
#[derive(Debug)]
pub struct RunScratch(ScratchDir);

impl RunScratch {
    /// Makes the folder; `None` if it cannot be made (the run then uses the shared root).
    pub fn new() -> Option<RunScratch> {
        ScratchDir::new("qsim-sweep-run-").ok().map(RunScratch)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}
