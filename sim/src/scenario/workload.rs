//! The workloads a scenario runs: writers through the root's HTTP API (their rates, bursts,
//! value sizes and request modes) and readers on the edges.

use std::time::Duration;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "lowercase")]
pub enum Workload {
    /// Writes through the root's HTTP API at a steady rate, and at `burst.rate_per_s` during
    /// each burst.
    Writer {
        rate_per_s: f64,
        keys: u64,
        value_bytes: ValueBytes,
        #[serde(default)]
        burst: Option<Burst>,
        /// Write every key once first, in key order, at this rate: a bulk load, so a run's
        /// data set is whole from the start (the resource models need all of it).
        #[serde(default)]
        preload_rate_per_s: Option<f64>,
        /// What the writer's requests look like beyond one `PUT` per key: batches, deletes,
        /// rewrites, refusals (see [`WriterModes`]).
        #[serde(default)]
        modes: WriterModes,
    },
    /// Reads every node of the last tier over its memcached port: `rate_per_s` `gets` per edge,
    /// keys drawn from the writers' key spaces with Zipf popularity of exponent `skew`
    /// (0 = uniform; ~1 = a few hot keys, as configuration reads are).
    Reader {
        rate_per_s: f64,
        #[serde(default = "default_skew")]
        skew: f64,
        /// Read only the first `hot_keys` keys of each writer (the rest are written and never
        /// read, as Quora's MCInspector found of much of its memcached data); default: all.
        #[serde(default)]
        hot_keys: Option<u64>,
    },
}

fn default_skew() -> f64 {
    1.0
}

/// The most operations a writer's request carries when swarm draws its modes.
pub const DRAWN_BATCH_OPS_MAX: u32 = 8;

/// How a writer's requests reach what the node promises. The default is one `PUT` of a new
/// value per request. Each share is a probability per operation.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriterModes {
    /// Operations per request: above 1, each request is a `POST /v1/batch` (all or nothing).
    pub batch_ops: u32,
    /// In a batch, the share of operations on a key already in it (the last wins).
    pub repeat_share: f64,
    /// The share of operations that delete their key.
    pub delete_share: f64,
    /// The share of operations that write a settled key's value again, byte for byte: the
    /// root drops them as identical.
    pub rewrite_share: f64,
    /// The share of operations on keys outside the producer's prefixes: the root refuses the
    /// request (403), all of it.
    pub outside_prefix_share: f64,
    /// The share of acknowledged single `PUT`s the producer reads back at once (`GET
    /// /v1/keys/{key}`), from a root member drawn at random, following its redirect: it must
    /// read what it wrote (read-your-write), or a `reads` violation names the member. Drawn
    /// from a stream of its own, so the other draws stay as they were.
    pub read_back_share: f64,
    /// The producer's quota at the root, writes per second (burst: one second's worth): a
    /// writer faster than it is refused with 429 now and then. Default: no quota to speak of.
    pub quota_per_s: Option<f64>,
    /// The producer's burst, writes (default: one second of `quota_per_s`). A burst many
    /// seconds deep makes a bucket that was refilled when it should not have been (a failover
    /// or restart that forgot it) show: a second burst is let through.
    pub quota_burst: Option<f64>,
}

impl WriterModes {
    /// Most operations in one batch request.
    pub const BATCH_OPS_MAX: u32 = 100;

    /// Operations per request (at least one).
    pub fn ops_per_request(&self) -> u32 {
        self.batch_ops.max(1)
    }

    /// The first problem, as (field, problem).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if self.batch_ops > Self::BATCH_OPS_MAX {
            return Some(("workload.modes.batch_ops", format!("at most {}", Self::BATCH_OPS_MAX)));
        }
        for (field, share) in [
            ("workload.modes.repeat_share", self.repeat_share),
            ("workload.modes.delete_share", self.delete_share),
            ("workload.modes.rewrite_share", self.rewrite_share),
            ("workload.modes.outside_prefix_share", self.outside_prefix_share),
            ("workload.modes.read_back_share", self.read_back_share),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Some((field, format!("{share} is not a share between 0 and 1")));
            }
        }
        if self.repeat_share > 0.0 && self.batch_ops < 2 {
            return Some(("workload.modes.repeat_share", "needs batch_ops of 2 or more".into()));
        }
        if self.quota_per_s.is_some_and(|q| !(1.0..=1e6).contains(&q)) {
            return Some(("workload.modes.quota_per_s", "must be between 1 and 1000000".into()));
        }
        match (self.quota_per_s, self.quota_burst) {
            (None, Some(_)) => return Some(("workload.modes.quota_burst", "needs quota_per_s".into())),
            (Some(_), Some(b)) if !(1.0..=1e7).contains(&b) => {
                return Some(("workload.modes.quota_burst", "must be between 1 and 10000000".into()));
            }
            _ => {}
        }
        None
    }
}

/// A writer's bursts: `length` at `rate_per_s` every `every`, the first one `every` after the
/// start (a deploy pushing a batch of changes, a producer catching up after an outage).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Burst {
    #[serde(with = "humantime_serde")]
    pub every: Duration,
    #[serde(with = "humantime_serde")]
    pub length: Duration,
    pub rate_per_s: f64,
}

impl Burst {
    /// Whether a burst is on `elapsed` after the writer started.
    pub fn on_at(&self, elapsed: Duration) -> bool {
        let every = self.every.as_millis();
        let into = elapsed.as_millis();
        into >= every && into % every < self.length.as_millis()
    }

    /// How long from `elapsed` after the writer started until the next burst starts (never
    /// zero: at a start, the one after).
    pub fn until_next(&self, elapsed: Duration) -> Duration {
        let every = self.every.as_millis();
        let next = (elapsed.as_millis() / every + 1) * every;
        Duration::from_millis((next - elapsed.as_millis()) as u64)
    }
}

/// Value sizes of a writer: `min..=max` bytes, drawn from `distribution`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueBytes {
    pub min: usize,
    pub max: usize,
    #[serde(default)]
    pub distribution: SizeDistribution,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SizeDistribution {
    /// Every size in the range equally likely.
    #[default]
    Uniform,
    /// Every order of magnitude in the range equally likely: mostly small values and a long
    /// tail of large ones, the shape of configuration data (a flag, a route, now and then a
    /// certificate bundle).
    LogUniform,
}

impl ValueBytes {
    /// The mean size [`draw`](Self::draw) gives.
    pub fn mean(&self) -> f64 {
        let (min, max) = (self.min as f64, self.max as f64);
        match self.distribution {
            SizeDistribution::Uniform => (min + max) / 2.0,
            // exp(U(ln a, ln b)) has mean (b − a) / (ln b − ln a), here with b = max + 1.
            SizeDistribution::LogUniform => {
                let (a, b) = (min.max(1.0), max + 1.0);
                ((b - a) / (b.ln() - a.ln())).clamp(min, max)
            }
        }
    }

    /// One value size drawn from `rng`.
    pub fn draw(&self, rng: &mut impl rand::Rng) -> usize {
        use rand::RngExt;
        match self.distribution {
            SizeDistribution::Uniform => rng.random_range(self.min..=self.max),
            SizeDistribution::LogUniform => {
                let (low, high) = (((self.min.max(1)) as f64).ln(), ((self.max + 1) as f64).ln());
                let size = rng.random_range(low..high).exp() as usize;
                size.clamp(self.min, self.max)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_burst_starts_on_the_period_never_now() {
        let burst = Burst { every: Duration::from_secs(25), length: Duration::from_secs(8), rate_per_s: 20.0 };
        assert_eq!(burst.until_next(Duration::ZERO), Duration::from_secs(25));
        assert_eq!(burst.until_next(Duration::from_millis(33_500)), Duration::from_millis(16_500));
        assert_eq!(burst.until_next(Duration::from_secs(50)), Duration::from_secs(25), "at a start: the one after");
        assert!(burst.on_at(Duration::from_secs(50)) && !burst.on_at(Duration::from_secs(58)));
    }
}
