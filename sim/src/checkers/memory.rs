//! The memory budget, checked: a node's modelled memory stays under its limit. Past it the node
//! is OOM-killed (and restarted by its supervisor, as fdbmonitor restarts fdbserver); each such
//! sample is a violation naming every component, so the report shows what grew. A scenario that
//! expects OOM kills says `expect = "violation"`.

use crate::trace::{Checker, Event, Observer};

#[derive(Debug, Default)]
pub struct Memory;

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

impl Observer for Memory {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        let Event::MemorySample {
            at_ms,
            node,
            rss,
            limit,
            base,
            cache,
            byte_sample,
            engine,
            memtables,
            buffers,
            allocator_overhead,
        } = event
        else {
            return Vec::new();
        };
        if *limit == 0 || rss <= limit {
            return Vec::new();
        }
        let message = format!(
            "modelled memory {} over the limit {} (OOM kill): base {}, cache {}, byte sample {}, engine {}, \
             memtables {}, buffers {}, allocator overhead {}",
            gib(*rss),
            gib(*limit),
            gib(*base),
            gib(*cache),
            gib(*byte_sample),
            gib(*engine),
            gib(*memtables),
            gib(*buffers),
            gib(*allocator_overhead)
        );
        vec![Event::Violation { at_ms: *at_ms, checker: Checker::Memory, node: node.clone(), index: 0, message }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rss: u64, limit: u64) -> Event {
        Event::MemorySample {
            at_ms: 1000,
            node: "e".into(),
            rss,
            limit,
            base: 1 << 30,
            cache: 0,
            byte_sample: rss.saturating_sub(1 << 30),
            engine: 0,
            memtables: 0,
            buffers: 0,
            allocator_overhead: 0,
        }
    }

    #[test]
    fn over_the_limit_is_a_violation_naming_the_components() {
        let mut check = Memory;
        let found = check.observe(&sample(9 << 30, 8 << 30));
        assert_eq!(found.len(), 1);
        let Event::Violation { checker, message, .. } = &found[0] else { panic!("{found:?}") };
        assert_eq!(*checker, Checker::Memory);
        assert!(
            message.contains("9.00 GiB over the limit 8.00 GiB") && message.contains("byte sample 8.00 GiB"),
            "{message}"
        );
        assert!(check.observe(&sample(8 << 30, 8 << 30)).is_empty(), "at the limit is fine");
        assert!(check.observe(&sample(9 << 30, 0)).is_empty(), "no limit");
    }
}
