//! Deterministic workloads for tests, crash tests and benchmarks.
//!
//! Everything about entry `i` — its operations, its batch — is a pure function of the workload
//! options and `i`, so a test can regenerate exactly what a killed child process was applying,
//! and every engine in a comparison sees byte-identical input.

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::entry::{ChainHash, DatabaseId, EntryError, LogEntry, Op};

/// The shape of a synthetic write workload.
#[derive(Clone, Debug)]
pub struct Workload {
    pub seed: u64,
    pub db_id: DatabaseId,
    /// Keys are `<prefix>:<n>` with `n < key_space`; prefixes cycle through `prefixes`.
    pub key_space: u64,
    pub prefixes: Vec<String>,
    pub value_bytes_min: usize,
    pub value_bytes_max: usize,
    pub ops_per_entry_min: usize,
    pub ops_per_entry_max: usize,
    /// Fraction of operations that are deletes, in percent.
    pub delete_percent: u8,
    /// Entries per commit when a caller batches: `1..=batch_entries_max`.
    pub batch_entries_max: u64,
    pub values: ValueKind,
}

/// What values look like, which decides how well they compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// Uniformly random bytes: incompressible, the worst case for space.
    Random,
    /// JSON-like configuration text from a small vocabulary, as DNS records, WAF rules and
    /// routing tables are: compresses several-fold.
    ConfigText,
}

const CONFIG_WORDS: &[&str] = &[
    "\"zone\":",
    "\"ttl\":300,",
    "\"proxied\":true,",
    "\"type\":\"A\",",
    "\"type\":\"AAAA\",",
    "\"content\":\"192.0.2.",
    "\"action\":\"block\",",
    "\"action\":\"challenge\",",
    "\"expression\":",
    "\"http.request.uri.path contains \\\"/admin\\\"\",",
    "\"enabled\":false,",
    "\"priority\":",
    "{",
    "},",
    "\"origin\":\"origin-",
    ".example.com\",",
    "\"route\":\"/*\",",
    "\"script\":\"worker-",
    "\"id\":",
];

impl Workload {
    /// A small mixed workload suited to tests.
    pub fn small(seed: u64) -> Workload {
        Workload {
            seed,
            db_id: DatabaseId(0x5157_5349_4d00_0000_0000_0000_0000_0001),
            key_space: 64,
            prefixes: vec!["dns".into(), "waf".into(), "workers".into()],
            value_bytes_min: 0,
            value_bytes_max: 300,
            ops_per_entry_min: 1,
            ops_per_entry_max: 6,
            delete_percent: 15,
            batch_entries_max: 4,
            values: ValueKind::Random,
        }
    }

    fn rng(&self, stream: u64, index: u64) -> ChaCha8Rng {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        rng.set_stream(stream);
        rng
    }

    /// The root timestamp of entry `index`: 10 ms apart.
    pub fn timestamp_ms(&self, index: u64) -> u64 {
        1_700_000_000_000 + index * 10
    }

    /// The operations of entry `index`.
    pub fn ops(&self, index: u64) -> Vec<Op> {
        let mut rng = self.rng(1, index);
        let count = rng.random_range(self.ops_per_entry_min..=self.ops_per_entry_max);
        (0..count)
            .map(|_| {
                let n = rng.random_range(0..self.key_space);
                let prefix = &self.prefixes[(n % self.prefixes.len() as u64) as usize];
                let key = format!("{prefix}:{n}").into_bytes();
                if rng.random_range(0..100u8) < self.delete_percent {
                    Op::Delete { key }
                } else {
                    let len = rng.random_range(self.value_bytes_min..=self.value_bytes_max);
                    Op::Set { key, value: self.value(&mut rng, len) }
                }
            })
            .collect()
    }

    fn value(&self, rng: &mut ChaCha8Rng, len: usize) -> Vec<u8> {
        match self.values {
            ValueKind::Random => {
                let mut value = vec![0; len];
                rng.fill_bytes(&mut value);
                value
            }
            ValueKind::ConfigText => {
                let mut value = Vec::with_capacity(len + 64);
                while value.len() < len {
                    value.extend_from_slice(CONFIG_WORDS[rng.random_range(0..CONFIG_WORDS.len())].as_bytes());
                    if rng.random_range(0..3) == 0 {
                        value.extend_from_slice(rng.random_range(0..100_000u32).to_string().as_bytes());
                    }
                }
                value.truncate(len);
                value
            }
        }
    }

    /// How many entries the batch starting at `first_index` holds.
    pub fn batch_len(&self, first_index: u64) -> u64 {
        self.rng(2, first_index).random_range(1..=self.batch_entries_max)
    }

    /// Entries `first..first + count`, chained onto `prev_hash`.
    pub fn entries(&self, first: u64, count: u64, mut prev_hash: ChainHash) -> Result<Vec<LogEntry>, EntryError> {
        let mut out = Vec::with_capacity(count as usize);
        for index in first..first + count {
            let entry = LogEntry::seal(index, self.db_id, self.timestamp_ms(index), prev_hash, self.ops(index))?;
            prev_hash = entry.hash;
            out.push(entry);
        }
        Ok(out)
    }
}
