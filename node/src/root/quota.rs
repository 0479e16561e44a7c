//! Producers' write quotas: one token bucket per producer (`burst` writes, refilled at
//! `writes_per_s`), taken by the HTTP API before a write joins a batch.
//!
//! Guarantees:
//! - A request takes one token per operation, or is told how long until there are enough.
//! - **A restart or a failover hands no producer a second burst.** What the buckets hold travels
//!   with the writes they let through: a root of one commits a [`Ledger`] of its buckets with
//!   every batch; a group's leader puts one in every proposal, and every member adopts it as it
//!   applies the proposal and commits it with the entries. A member that skips proposals —
//!   catching its store up to a Raft snapshot from a peer's log, or taking a peer's store copy —
//!   adopts the ledger the snapshot carries, or the copy's. A root that starts, or a member that
//!   comes to lead, holds at most the last committed ledger refilled since — the tokens one
//!   bucket would have had, but for what writes took that never committed (and so were never
//!   acknowledged).
//! - [`Quotas::adopt`] only ever lowers a bucket (to the lesser of what it holds and what the
//!   ledger says, refilled to now): a ledger never gives back tokens this member spent since.
//!
//! Time: a bucket refills by the monotonic clock; a ledger carries the root's wall-clock time it
//! was taken at, so a member adopting it counts the refill since by the root's clock as it
//! reckons it (`crate::clock::RootClock`: a lower bound on the leader's, learnt from the
//! entries it applies and its peers' Raft frames) — never by its own wall clock, which may run ahead of the leader's. A
//! root starting before it has heard its group has only its own clock: one stepped forward
//! while the node was down grants at most the step times the rate, never past the burst.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::ProducerConfig;
use crate::wire::{LeReader, Truncated};

/// Every producer's bucket.
#[derive(Debug)]
pub struct Quotas {
    producers: Vec<Producer>,
}

/// One producer: who it is, what it may write, and its bucket.
#[derive(Debug)]
pub struct Producer {
    pub config: ProducerConfig,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

impl Producer {
    fn rate(&self) -> f64 {
        f64::from(self.config.writes_per_s)
    }

    fn burst(&self) -> f64 {
        f64::from(self.config.burst)
    }

    /// The bucket, refilled to now.
    fn refilled(&self) -> std::sync::MutexGuard<'_, Bucket> {
        let mut bucket = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(bucket.refilled_at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate()).min(self.burst());
        bucket.refilled_at = now;
        bucket
    }

    /// Takes `writes` tokens, or says how long until they would be there.
    pub fn take(&self, writes: usize) -> Result<(), Duration> {
        let mut bucket = self.refilled();
        let wanted = writes as f64;
        if bucket.tokens >= wanted {
            bucket.tokens -= wanted;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((wanted - bucket.tokens) / self.rate()))
        }
    }
}

impl Quotas {
    /// Full buckets for `producers`.
    pub fn new(producers: &[ProducerConfig]) -> Quotas {
        let producers = producers
            .iter()
            .map(|config| Producer {
                config: config.clone(),
                bucket: Mutex::new(Bucket { tokens: f64::from(config.burst), refilled_at: Instant::now() }),
            })
            .collect();
        Quotas { producers }
    }

    pub fn producers(&self) -> &[Producer] {
        &self.producers
    }

    /// What every bucket holds now, taken at wall-clock `now_ms`.
    pub fn ledger(&self, now_ms: u64) -> Ledger {
        let tokens = self.producers.iter().map(|p| (p.config.name.clone(), p.refilled().tokens)).collect();
        Ledger { as_of_ms: now_ms, tokens }
    }

    /// Lowers each bucket to what `ledger` says it held, refilled from the ledger's time to
    /// wall-clock `now_ms`, where that is less than it holds. Producers the ledger does not
    /// name (added since) keep their buckets; names this node does not know are ignored.
    pub fn adopt(&self, ledger: &Ledger, now_ms: u64) {
        let elapsed_s = now_ms.saturating_sub(ledger.as_of_ms) as f64 / 1000.0;
        for (name, tokens) in &ledger.tokens {
            let Some(producer) = self.producers.iter().find(|p| &p.config.name == name) else { continue };
            let then = (tokens + elapsed_s * producer.rate()).min(producer.burst());
            let mut bucket = producer.refilled();
            bucket.tokens = bucket.tokens.min(then);
        }
    }
}

/// What each producer's bucket held at `as_of_ms` (wall clock): the record of quotas that
/// travels with committed writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ledger {
    pub as_of_ms: u64,
    pub tokens: Vec<(String, f64)>,
}

/// A ledger that did not decode.
#[derive(Debug, thiserror::Error)]
#[error("a quota ledger: {0}")]
pub struct LedgerError(String);

impl Ledger {
    /// The time (u64 LE), the count (u32 LE), then per producer its name (u32 LE length and
    /// bytes) and its tokens (f64 bits, u64 LE).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.as_of_ms.to_le_bytes());
        out.extend_from_slice(&u32::try_from(self.tokens.len()).expect("producers fit a u32").to_le_bytes());
        for (name, tokens) in &self.tokens {
            out.extend_from_slice(&u32::try_from(name.len()).expect("a name fits a u32").to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&tokens.to_bits().to_le_bytes());
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// A ledger from the front of `bytes`; returns it and the bytes after it.
    pub fn decode(bytes: &[u8]) -> Result<(Ledger, &[u8]), LedgerError> {
        let short = |short: Truncated| LedgerError(short.to_string());
        let mut r = LeReader::new(bytes);
        let as_of_ms = r.u64("its time").map_err(short)?;
        let count = r.u32("its count").map_err(short)? as usize;
        let mut tokens = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let name = String::from_utf8(r.u32_prefixed("a name").map_err(short)?.to_vec())
                .map_err(|_| LedgerError("a producer's name is not UTF-8".into()))?;
            let value = r.f64("tokens").map_err(short)?;
            if !value.is_finite() || value < 0.0 {
                return Err(LedgerError(format!("producer {name} holds {value} tokens")));
            }
            tokens.push((name, value));
        }
        Ok((Ledger { as_of_ms, tokens }, r.rest()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer(name: &str, writes_per_s: u32, burst: u32) -> ProducerConfig {
        ProducerConfig { name: name.into(), token: "t".into(), prefixes: vec![], writes_per_s, burst }
    }

    #[test]
    fn a_ledger_round_trips_and_damage_is_refused() {
        let ledger = Ledger { as_of_ms: 42, tokens: vec![("a".into(), 1.5), ("b".into(), 0.0)] };
        let mut bytes = ledger.to_bytes();
        bytes.push(7);
        let (back, rest) = Ledger::decode(&bytes).unwrap();
        assert_eq!((back, rest), (ledger.clone(), &[7u8][..]));
        let bytes = ledger.to_bytes();
        for cut in 0..bytes.len() {
            assert!(Ledger::decode(&bytes[..cut]).is_err(), "a ledger cut at {cut} decoded");
        }
        let negative = Ledger { as_of_ms: 0, tokens: vec![("a".into(), -1.0)] };
        assert!(Ledger::decode(&negative.to_bytes()).is_err());
    }

    // On tokio's paused clock: the refill is exact, whatever this machine's speed.
    #[tokio::test(start_paused = true)]
    async fn adopting_a_ledger_lowers_a_bucket_never_raises_it_and_counts_the_refill_since() {
        let quotas = Quotas::new(&[producer("p", 10, 100)]);
        let p = &quotas.producers()[0];
        // Another member's leader spent 95 of 100 at wall-clock 1 000 ms; adopted at 1 500 ms,
        // the bucket holds 5 + 0.5 s × 10 = 10.
        quotas.adopt(&Ledger { as_of_ms: 1_000, tokens: vec![("p".into(), 5.0)] }, 1_500);
        assert!(p.take(10).is_ok());
        assert!(p.take(1).is_err(), "no second burst");
        // A ledger that says more than the bucket holds gives nothing back.
        quotas.adopt(&Ledger { as_of_ms: 1_500, tokens: vec![("p".into(), 100.0)] }, 1_500);
        assert!(p.take(1).is_err());
        tokio::time::sleep(Duration::from_secs(1)).await; // the paused clock jumps ahead
        assert!(p.take(10).is_ok(), "refilled at its rate");
        // Unknown producers in a ledger are ignored.
        quotas.adopt(&Ledger { as_of_ms: 0, tokens: vec![("other".into(), 0.0)] }, 0);
    }
}
