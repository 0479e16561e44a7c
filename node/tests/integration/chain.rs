//! Property tests of the chain check: any dropped, repeated, reordered or altered entry in an
//! otherwise valid stream is refused at exactly the point where it departs from the valid
//! chain, and the store then holds exactly the valid prefix before it.

use proptest::prelude::*;
use qs_node::testkit::Workload;
use qs_node::{
    ApplyRefusal, ChainHash, DatabaseId, LogEntry, MemDisk, Op, OpenOptions, Store, StoreError, StoreLocation,
};

#[derive(Clone, Debug)]
enum Damage {
    Drop(usize),
    Repeat(usize),
    SwapWithNext(usize),
    /// Flip one bit of one value byte without resealing.
    FlipValueBit {
        entry: usize,
        bit: usize,
    },
    /// Change the timestamp without resealing.
    Retime(usize),
    /// Reseal a changed entry on the right previous hash: it chains, but every later entry
    /// then points at the original, so the next one is refused.
    ResealAltered(usize),
    WrongDatabase(usize),
}

fn damage(len: usize) -> impl Strategy<Value = Damage> {
    let i = 0..len;
    let before_last = 0..len - 1;
    prop_oneof![
        i.clone().prop_map(Damage::Drop),
        i.clone().prop_map(Damage::Repeat),
        before_last.clone().prop_map(Damage::SwapWithNext),
        (i.clone(), any::<usize>()).prop_map(|(entry, bit)| Damage::FlipValueBit { entry, bit }),
        i.clone().prop_map(Damage::Retime),
        before_last.prop_map(Damage::ResealAltered),
        i.prop_map(Damage::WrongDatabase),
    ]
}

fn open() -> Store {
    Store::open(&StoreLocation::Memory(MemDisk::default()), &OpenOptions::new(Workload::small(0).db_id)).unwrap()
}

/// Applies `stream` one entry at a time; returns how many were accepted before the first refusal.
fn feed(store: &mut Store, stream: &[LogEntry]) -> (usize, Option<ApplyRefusal>) {
    for (i, entry) in stream.iter().enumerate() {
        match store.apply(std::slice::from_ref(entry)) {
            Ok(()) => {}
            Err(StoreError::Refused(refusal)) => return (i, Some(refusal)),
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    (stream.len(), None)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn damaged_streams_are_refused_where_they_depart(seed in any::<u64>(), len in 3usize..12, dmg in (3usize..12).prop_flat_map(damage)) {
        let workload = Workload::small(seed);
        let valid = workload.entries(1, len as u64, ChainHash::GENESIS).unwrap();
        let mut stream = valid.clone();
        // Index into `stream` of the first entry that must be refused.
        let refused_at = match dmg {
            // Dropping the last entry leaves a valid prefix: nothing after it can notice.
            Damage::Drop(i) if i + 1 < len => { stream.remove(i); i }
            Damage::Repeat(i) if i < len => { stream.insert(i + 1, valid[i].clone()); i + 1 }
            Damage::SwapWithNext(i) if i + 1 < len => { stream.swap(i, i + 1); i }
            Damage::FlipValueBit { entry, bit } if entry < len => {
                let target = stream[entry].ops.iter_mut().find_map(|op| match op {
                    Op::Set { value, .. } if !value.is_empty() => Some(value),
                    _ => None,
                });
                match target {
                    Some(value) => { let n = bit % (value.len() * 8); value[n / 8] ^= 1 << (n % 8); entry }
                    None => { stream[entry].timestamp_ms ^= 1; entry }
                }
            }
            Damage::Retime(i) if i < len => { stream[i].timestamp_ms += 1; i }
            Damage::ResealAltered(i) if i + 1 < len => {
                let e = &valid[i];
                stream[i] = LogEntry::seal(e.index, e.db_id, e.timestamp_ms + 1, e.prev_hash, e.ops.clone()).unwrap();
                i + 1
            }
            Damage::WrongDatabase(i) if i < len => {
                let e = &valid[i];
                stream[i] = LogEntry::seal(e.index, DatabaseId(e.db_id.0 ^ 1), e.timestamp_ms, e.prev_hash, e.ops.clone()).unwrap();
                i
            }
            _ => return Ok(()), // the damage does not fit this length
        };
        let mut store = open();
        let (accepted, refusal) = feed(&mut store, &stream);
        prop_assert_eq!(accepted, refused_at, "refused at the wrong place: {:?}", refusal);
        prop_assert!(refusal.is_some());

        // The store holds exactly the accepted prefix (which may end in a validly resealed entry).
        let mut reference = open();
        reference.apply(&stream[..refused_at]).unwrap();
        prop_assert_eq!(store.applied_index(), refused_at as u64);
        prop_assert_eq!(store.chain_hash(), reference.chain_hash());
        prop_assert_eq!(store.state_digest().unwrap(), reference.state_digest().unwrap());
    }

    #[test]
    fn a_batch_with_a_damaged_entry_is_refused_whole(seed in any::<u64>(), len in 2usize..8, victim in 0usize..8) {
        let workload = Workload::small(seed);
        let mut stream = workload.entries(1, len as u64, ChainHash::GENESIS).unwrap();
        let victim = victim % len;
        stream[victim].timestamp_ms += 1;
        let mut store = open();
        let before = store.state_digest().unwrap();
        let refused = matches!(store.apply(&stream), Err(StoreError::Refused(ApplyRefusal::BadEntry { .. })));
        prop_assert!(refused);
        prop_assert_eq!(store.applied_index(), 0);
        prop_assert_eq!(store.state_digest().unwrap(), before);
    }

    #[test]
    fn altered_encoded_bytes_never_decode(seed in any::<u64>(), byte in any::<usize>(), bit in 0u8..8) {
        let entry = Workload::small(seed).entries(1, 1, ChainHash::GENESIS).unwrap().remove(0);
        let mut bytes = entry.encode();
        let n = byte % bytes.len();
        bytes[n] ^= 1 << bit;
        prop_assert!(LogEntry::decode(&bytes).is_err(), "flipping bit {} of byte {} went unnoticed", bit, n);
    }
}

#[test]
fn refusals_name_what_was_wrong() {
    let workload = Workload::small(1);
    let entries = workload.entries(1, 3, ChainHash::GENESIS).unwrap();
    let mut store = open();
    let err = store.apply(&entries[1..2]).unwrap_err();
    assert_eq!(err.to_string(), "refused: entry 2 is out of order: expected index 1 (gap, repeat or reorder)");
    store.apply(&entries[..1]).unwrap();
    let err = store.apply(&entries[..1]).unwrap_err();
    assert!(err.to_string().contains("entry 1 is out of order: expected index 2"), "{err}");
}

#[test]
fn a_store_of_another_database_is_refused_at_open() {
    let disk = MemDisk::default();
    Store::open(&StoreLocation::Memory(disk.clone()), &OpenOptions::new(DatabaseId(1))).unwrap();
    let err = Store::open(&StoreLocation::Memory(disk), &OpenOptions::new(DatabaseId(2))).unwrap_err();
    assert!(matches!(err, StoreError::WrongDatabase { expected: DatabaseId(2), found: DatabaseId(1), .. }), "{err}");
}
