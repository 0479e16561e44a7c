//! Where runs keep their files while they run.
//!
//! A run's nodes keep their on-disk stores and snapshot transfers in a scratch directory that
//! lives as long as the run. A run that ends removes its own; one killed (a sweep's budget, the
//! OOM killer, a signal) cannot, so a sweep gives each run process a scratch folder of its own
//! and removes it whatever the process's end ([`RunScratch`]): a nightly sweep of thousands of
//! runs never fills `/dev/shm`, which is memory.

/// Where runs keep their scratch directories: `QSIM_SCRATCH_DIR` if set, else `/dev/shm` where
/// it is a writable directory, else the system's temporary directory.
///
/// In memory by default because nothing in the simulation needs the host's disk: durability is
/// the simulated disk's to model (its latencies, power loss, SIGBUS), and a killed node's
/// process is the simulator's own, so whatever LMDB and RocksDB wrote stays in the host's page
/// cache either way. On a real disk every one of their commits waited for a host `fsync` that
/// buys nothing here — most of an LMDB or RocksDB run's wall time.
pub fn scratch_root() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("QSIM_SCRATCH_DIR").filter(|d| !d.is_empty()) {
        return dir.into();
    }
    let shm = std::path::Path::new("/dev/shm");
    let writable = shm.is_dir() && tempfile::Builder::new().prefix("qsim-probe-").tempfile_in(shm).is_ok();
    if writable { shm.to_path_buf() } else { std::env::temp_dir() }
}

/// The scratch folder of one run process, under [`scratch_root`], handed to it through
/// `QSIM_SCRATCH_DIR` and removed with everything in it when this is dropped.
#[derive(Debug)]
pub struct RunScratch(tempfile::TempDir);

impl RunScratch {
    /// Makes the folder; `None` if it cannot be made (the run then uses the shared root).
    pub fn new() -> Option<RunScratch> {
        tempfile::Builder::new().prefix("qsim-sweep-run-").tempdir_in(scratch_root()).ok().map(RunScratch)
    }

    pub fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}
