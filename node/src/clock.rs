//! The node's only wall-clock read: the root stamps entries with it, replicas measure lag
//! against it. Under `--cfg madsim` it is the simulator's clock, so a run is a function of
//! its seed.

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    #[cfg(madsim)]
    let now = madsim::time::TimeHandle::current().now_time();
    #[cfg(not(madsim))]
    let now = std::time::SystemTime::now();
    now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
