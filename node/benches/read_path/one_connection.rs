//! The one-connection table: the `memcache` crate's client, one request at a time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::{key, popularity, value};

pub struct Figures {
    pub per_s: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
}

/// The value at quantile `q` of sorted latencies, nearest rank: the rule of the simulator's
/// reports (`qs_reports::series::quantile`, which the node may not depend on).
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[(((sorted.len() - 1) as f64 * q).round() as usize).min(sorted.len() - 1)]
}

/// `requests` gets through the `memcache` crate on one connection, the same key sequence for
/// every server; checks every answer.
pub fn drive(addr: SocketAddr, requests: usize, keys_per_get: usize) -> Figures {
    let client = memcache::Client::connect(format!("memcache://{addr}?protocol=ascii")).expect("connect");
    let mut pick = popularity(42);
    let mut latencies = Vec::with_capacity(requests);
    let start = Instant::now();
    for _ in 0..requests {
        let ids: Vec<usize> = (0..keys_per_get).map(|_| pick()).collect();
        let begun = Instant::now();
        if keys_per_get == 1 {
            let got: Option<String> = client.get(&key(ids[0])).expect("get");
            assert_eq!(got.as_deref(), Some(value(ids[0]).as_str()), "wrong value from {addr}");
        } else {
            let names: Vec<String> = ids.iter().map(|&i| key(i)).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let got: std::collections::HashMap<String, String> = client.gets(&refs).expect("gets");
            assert_eq!(
                got.len(),
                ids.iter().collect::<std::collections::BTreeSet<_>>().len(),
                "missing keys from {addr}"
            );
        }
        latencies.push(begun.elapsed());
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    Figures {
        per_s: requests as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        p999: percentile(&latencies, 0.999),
    }
}
