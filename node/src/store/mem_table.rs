//! One table of the memory engine: ordered, as every engine's tables are, with point reads and
//! writes at a hash map's cost.
//!
//! Under the simulator every entry is applied on every replica, and each apply looks up the
//! value each key replaces before it writes the new one. In a `BTreeMap<Vec<u8>, _>` every
//! comparison on the way down follows a pointer to another key's bytes, mostly out of cache
//! with forty stores in one process: that lookup was a tenth of a reference run's time. Here a
//! hash map holds the values and answers every point operation. The ordered set of keys is
//! brought up to date only when something reads it (a scan, an export, a range delete): a key
//! that comes waits in a list, and the keys that came since are sorted and put in order in one
//! pass. With ten thousand stores in one process, inserting each new key into its store's
//! ordered set as it came was a tenth of a run, for an order most stores never read.
//!
//! Deterministic: nothing visits the hash map in its own order. Scans, exports and key lists go
//! through the ordered keys; the one walk over the map is a sum. FxHash has no per-process seed.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use rustc_hash::FxBuildHasher;
use smallvec::SmallVec;

/// A key as the table holds it: inline up to 22 bytes (every key the simulator writes, and
/// every log index), so the ordered set's search compares bytes inside its own nodes and the
/// hash map's probe finds the key in its slot, instead of following a pointer per comparison:
/// with ten thousand stores in one process, each such pointer was a cache miss, and the
/// ordered set's search alone a sixth of a run. Longer keys spill to the heap as before.
type OrderedKey = SmallVec<[u8; 22]>;

/// A stored value: bytes shared with other stores of the process (log entries and value
/// records, see `super::shared`), or the table's own (the meta table's, rewritten by every
/// commit and equal to no other store's). Shared bytes are never changed in place: a change
/// makes them the table's own first.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Own(Vec<u8>),
    Shared(Arc<[u8]>),
}

impl std::ops::Deref for Value {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Value::Own(bytes) => bytes,
            Value::Shared(bytes) => bytes,
        }
    }
}

/// Equal when the bytes are, shared or not.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        **self == **other
    }
}

/// For the tests' model: the stores build values with [`Value::Own`] or a shared registry entry.
#[cfg(test)]
impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Value {
        Value::Own(bytes)
    }
}

#[cfg(any(test, madsim, qsim_harness))]
impl Value {
    /// The bytes to change in place, made this value's own first if they were shared.
    fn make_mut(&mut self) -> &mut [u8] {
        if let Value::Shared(shared) = self {
            *self = Value::Own(shared.to_vec());
        }
        match self {
            Value::Own(bytes) => bytes,
            Value::Shared(_) => unreachable!("made own above"),
        }
    }
}

#[derive(Clone, Default)]
pub(crate) struct MemTable {
    values: HashMap<OrderedKey, Value, FxBuildHasher>,
    /// The keys of `values` in bytewise order, all but those waiting in `came`.
    order: BTreeSet<OrderedKey>,
    /// Keys that came (were inserted where no value was) since the order was last brought up to
    /// date, as they came: some may have gone again, or come twice. None is in `order`.
    came: Vec<OrderedKey>,
}

/// `came` is put in order once it is this long and longer than the table, even if nothing reads
/// the order: keys that come and go again without a scan cannot grow it without bound.
const CAME_ORDERED_FLOOR: usize = 1024;

impl MemTable {
    pub(crate) fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.values.get(key).map(|value| &**value)
    }

    /// The value under `key` to change in place: this table's own copy, made now if the value
    /// was shared (fault injection only).
    #[cfg(any(test, madsim, qsim_harness))]
    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut [u8]> {
        self.values.get_mut(key).map(Value::make_mut)
    }

    /// Stores `value` under `key`; returns the value it replaced.
    pub(crate) fn insert(&mut self, key: Vec<u8>, value: Value) -> Option<Value> {
        if let Some(held) = self.values.get_mut(key.as_slice()) {
            return Some(std::mem::replace(held, value));
        }
        let key = OrderedKey::from_slice(&key);
        self.came.push(key.clone());
        self.values.insert(key, value);
        if self.came.len() >= CAME_ORDERED_FLOOR.max(self.values.len()) {
            self.bring_order_up_to_date();
        }
        None
    }

    /// Removes `key`; returns its value.
    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let value = self.values.remove(key)?;
        // Not in the order if it is still waiting in `came`: it is dropped from there when the
        // order is next brought up to date, as a key no longer held.
        self.order.remove(key);
        Some(value)
    }

    /// Puts the keys that came in order: sorted once, those still held, each once.
    fn bring_order_up_to_date(&mut self) -> &BTreeSet<OrderedKey> {
        if !self.came.is_empty() {
            let mut came = std::mem::take(&mut self.came);
            came.sort_unstable();
            came.dedup();
            came.retain(|key| self.values.contains_key(key.as_slice()));
            if self.order.is_empty() {
                // Built from sorted keys in one pass.
                self.order = came.into_iter().collect();
            } else {
                self.order.extend(came);
            }
        }
        assert_eq!(self.order.len(), self.values.len(), "every held key is in the order, once");
        &self.order
    }

    /// `(key, value)` pairs from `lower` on, in key order.
    pub(crate) fn range_from<'t>(
        &'t mut self,
        lower: Bound<&[u8]>,
    ) -> impl Iterator<Item = (&'t [u8], &'t Value)> + 't {
        self.bring_order_up_to_date();
        let values = &self.values;
        self.order.range::<[u8], _>((lower, Bound::Unbounded)).map(|key| (key.as_slice(), &values[key.as_slice()]))
    }

    /// The keys in `[start, end)`, in order.
    pub(crate) fn keys_between(&mut self, start: &[u8], end: &[u8]) -> Vec<Vec<u8>> {
        if start >= end {
            return Vec::new();
        }
        self.bring_order_up_to_date()
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|key| key.to_vec())
            .collect()
    }

    /// Every `(key, value)` pair, in key order.
    pub(crate) fn iter(&mut self) -> impl Iterator<Item = (&[u8], &Value)> {
        self.range_from(Bound::Unbounded)
    }

    /// Every key, in order (fault injection only: choosing values to damage).
    #[cfg(any(test, madsim, qsim_harness))]
    pub(crate) fn keys(&mut self) -> impl Iterator<Item = &[u8]> {
        self.bring_order_up_to_date().iter().map(|key| key.as_slice())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Key and value bytes held (a shared value counts in full in each table holding it: the
    /// bytes a store of its own would take).
    pub(crate) fn held_bytes(&self) -> u64 {
        self.values.iter().map(|(key, value)| (key.len() + value.len()) as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Step {
        Insert(Vec<u8>, Vec<u8>),
        Remove(Vec<u8>),
        RemoveBetween(Vec<u8>, Vec<u8>),
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(0u8..4, 0..4)
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (key(), prop::collection::vec(any::<u8>(), 0..4)).prop_map(|(k, v)| Step::Insert(k, v)),
            key().prop_map(Step::Remove),
            (key(), key()).prop_map(|(a, b)| Step::RemoveBetween(a, b)),
        ]
    }

    #[test]
    fn keys_that_come_and_go_without_a_scan_wait_in_a_bounded_list() {
        let mut table = MemTable::default();
        for round in 0..5 * CAME_ORDERED_FLOOR {
            assert!(table.insert(b"churn".to_vec(), vec![round as u8].into()).is_none());
            assert!(table.came.len() < CAME_ORDERED_FLOOR, "round {round}: {} keys waiting", table.came.len());
            assert!(table.remove(b"churn").is_some());
        }
        assert!(table.insert(b"kept".to_vec(), vec![1].into()).is_none());
        assert_eq!(table.keys().collect::<Vec<_>>(), [b"kept"]);
    }

    proptest! {
        /// The table answers every operation as a `BTreeMap` would, scans in its order included.
        #[test]
        fn behaves_as_an_ordered_map(steps in prop::collection::vec(step(), 0..64), from in key()) {
            let (mut table, mut model) = (MemTable::default(), BTreeMap::new());
            for step in steps {
                match step {
                    Step::Insert(k, v) => prop_assert_eq!(table.insert(k.clone(), v.clone().into()), model.insert(k, v).map(Value::from)),
                    Step::Remove(k) => prop_assert_eq!(table.remove(&k), model.remove(&k).map(Value::from)),
                    Step::RemoveBetween(start, end) => {
                        let expected: Vec<Vec<u8>> =
                            if start < end { model.range(start.clone()..end.clone()).map(|(k, _)| k.clone()).collect() } else { Vec::new() };
                        let doomed = table.keys_between(&start, &end);
                        prop_assert_eq!(&doomed, &expected);
                        for key in doomed {
                            prop_assert_eq!(table.remove(&key), model.remove(&key).map(Value::from));
                        }
                    }
                }
                let held: Vec<(&[u8], &[u8])> = table.iter().map(|(k, v)| (k, &**v)).collect();
                let expected: Vec<(&[u8], &[u8])> = model.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
                prop_assert_eq!(held, expected);
                prop_assert_eq!(table.is_empty(), model.is_empty());
            }
            let scanned: Vec<_> = table.range_from(Bound::Excluded(&from)).map(|(k, v)| (k, &**v)).collect();
            let expected: Vec<_> = model
                .range::<[u8], _>((Bound::Excluded(from.as_slice()), Bound::Unbounded))
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            prop_assert_eq!(scanned, expected);
            let held: u64 = model.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
            prop_assert_eq!(table.held_bytes(), held);
        }
    }
}
