//! Log entries and values shared between the memory stores of one process.
//!
//! Under the simulator forty memory stores — or ten thousand — live in one process and each
//! holds every log entry and every value: the same bytes, received and stored once per store,
//! were 264 MB of a reference run's 305 MB at its peak (log entries), and 3.6 GB of a
//! ten-thousand-node run's 8.2 GB (values); fresh memory costs a run the time the kernel takes
//! to hand it over (first touch: about 0.8 ms per MB on the machines measured). [`share`] hands
//! back, for bytes some store in this process already holds under the same key of the same
//! table, that store's allocation, so each distinct entry and value is held once.
//!
//! Only the allocation is shared. Each store still counts the bytes as its own (held bytes,
//! bytes written), drops its reference when it collects the entry or replaces the value, and
//! copies a value before it changes one (`MemTable::get_mut`). Nothing simulated depends on
//! sharing: a value's bytes are the same either way, and bytes that differ under one key (replicas that diverged) are never
//! shared. The registry holds weak references, so what no store holds any longer is freed; its
//! dead entries are swept whenever it has doubled since the last sweep (what a sweep visits
//! first does not matter: it only forgets).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use rustc_hash::FxBuildHasher;

/// Below this many registered keys no sweep runs.
const SWEEP_FLOOR: usize = 1024;

#[derive(Default)]
struct Registry {
    held: HashMap<Vec<u8>, Weak<[u8]>, FxBuildHasher>,
    /// Registered keys after the last sweep.
    after_sweep: usize,
}

/// The tables whose values are shared: the log (entries) and the key-value table (value
/// records). The meta table's few values change on every commit and are each store's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SharedTable {
    Log,
    Kv,
}

/// One registry a table: a key means different things in each.
static REGISTRIES: [LazyLock<Mutex<Registry>>; 2] = [LazyLock::new(Mutex::default), LazyLock::new(Mutex::default)];

/// `value`, to store under `key` in `table`: the allocation of a store that holds the same bytes
/// under that key if one does, else `value` itself, registered for the stores after it.
pub(crate) fn share(table: SharedTable, key: &[u8], value: Vec<u8>) -> Arc<[u8]> {
    // A panic while the registry was held leaves at worst a stale weak reference.
    REGISTRIES[table as usize].lock().unwrap_or_else(|poisoned| poisoned.into_inner()).share(key, value)
}

impl Registry {
    fn share(&mut self, key: &[u8], value: Vec<u8>) -> Arc<[u8]> {
        if let Some(held) = self.held.get(key).and_then(Weak::upgrade)
            && *held == *value
        {
            return held;
        }
        let value = Arc::<[u8]>::from(value);
        self.held.insert(key.to_vec(), Arc::downgrade(&value));
        if self.held.len() >= 2 * self.after_sweep.max(SWEEP_FLOOR) {
            self.held.retain(|_, held| held.strong_count() > 0);
            self.after_sweep = self.held.len();
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_bytes_under_one_key_share_one_allocation() {
        let mut registry = Registry::default();
        let first = registry.share(b"7", b"entry bytes".to_vec());
        let second = registry.share(b"7", b"entry bytes".to_vec());
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(&*second, b"entry bytes");
        // The process-wide registry does the same while a store holds the first.
        let key = b"shared-log-test-equal";
        let held = share(SharedTable::Log, key, b"x".to_vec());
        assert!(Arc::ptr_eq(&held, &share(SharedTable::Log, key, b"x".to_vec())));
        // Tables do not share: the same key and bytes in another table are another allocation.
        assert!(!Arc::ptr_eq(&held, &share(SharedTable::Kv, key, b"x".to_vec())));
    }

    #[test]
    fn different_bytes_or_keys_are_never_shared() {
        let mut registry = Registry::default();
        let ours = registry.share(b"7", b"ours".to_vec());
        let theirs = registry.share(b"7", b"theirs".to_vec());
        assert!(!Arc::ptr_eq(&ours, &theirs));
        assert_eq!((&*ours, &*theirs), (&b"ours"[..], &b"theirs"[..]));
        let elsewhere = registry.share(b"8", b"ours".to_vec());
        assert!(!Arc::ptr_eq(&ours, &elsewhere));
    }

    #[test]
    fn bytes_no_store_holds_are_not_kept_alive() {
        let mut registry = Registry::default();
        let first = registry.share(b"7", b"entry".to_vec());
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none(), "the registry holds no strong reference");
        let again = registry.share(b"7", b"entry".to_vec());
        assert_eq!(Arc::strong_count(&again), 1, "a fresh allocation, held by its caller alone");
    }

    #[test]
    fn dead_registrations_are_swept_live_ones_kept() {
        let mut registry = Registry::default();
        let live: Vec<Arc<[u8]>> =
            (0..100).map(|n| registry.share(format!("live-{n}").as_bytes(), vec![n as u8])).collect();
        for n in 0..4 * SWEEP_FLOOR {
            drop(registry.share(format!("dead-{n}").as_bytes(), vec![1, 2, 3]));
        }
        assert!(registry.held.len() < 2 * SWEEP_FLOOR, "{} registrations kept", registry.held.len());
        for (n, value) in live.iter().enumerate() {
            let shared = registry.share(format!("live-{n}").as_bytes(), vec![n as u8]);
            assert!(Arc::ptr_eq(value, &shared), "live entry {n} was forgotten");
        }
    }
}
