//! The run's trace: every event the checkers and reports see, in simulated-time order.
//!
//! Guarantees: events are recorded in the order the simulator produced them, each with its
//! simulated time, and serialized canonically (one JSON object per line, fields in a fixed
//! order), so the same binary, scenario and seed give a byte-identical trace and digest. The
//! digest is BLAKE3 over those lines.
//!
//! Nodes report through `tracing` events with targets `qs::apply`, `qs::bootstrap`,
//! `qs::source` and `qs::cursor` (see `qs_node::node::NodeState`); [`TraceLayer`] turns them
//! into [`Event`]s.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

pub use qs_reports::schema::Event;

/// Receives each event as it happens (the checkers).
pub trait Observer: Send {
    /// Returns violations this event reveals.
    fn observe(&mut self, event: &Event) -> Vec<Event>;
}

/// The trace being recorded, shared by the layer, the world and the checkers.
#[derive(Default)]
pub struct Recorder {
    events: Vec<Event>,
    observers: Vec<Box<dyn Observer>>,
    clock_ms: Option<Box<dyn Fn() -> u64 + Send>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("events", &self.events.len()).finish_non_exhaustive()
    }
}

pub type SharedRecorder = Arc<Mutex<Recorder>>;

impl Recorder {
    pub fn new(clock_ms: impl Fn() -> u64 + Send + 'static, observers: Vec<Box<dyn Observer>>) -> SharedRecorder {
        Arc::new(Mutex::new(Recorder { events: Vec::new(), observers, clock_ms: Some(Box::new(clock_ms)) }))
    }

    pub fn now_ms(&self) -> u64 {
        self.clock_ms.as_ref().map_or(0, |clock| clock())
    }

    /// Records `event` and feeds it to every observer, recording what they find.
    pub fn record(&mut self, event: Event) {
        let mut found = Vec::new();
        for observer in &mut self.observers {
            found.extend(observer.observe(&event));
        }
        self.events.push(event);
        self.events.extend(found);
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn violations(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(|e| matches!(e, Event::Violation { .. }))
    }
}

/// BLAKE3 over the canonical lines of `events`.
pub fn digest(events: &[Event]) -> String {
    let mut hasher = blake3::Hasher::new();
    for event in events {
        hasher.update(event.line().as_bytes());
        hasher.update(b"\n");
    }
    hasher.finalize().to_hex().to_string()
}

/// Turns the node's `qs::apply` and `qs::bootstrap` tracing events into trace events.
#[derive(Debug)]
pub struct TraceLayer(pub SharedRecorder);

#[derive(Default)]
struct Fields {
    node: String,
    hash: String,
    source: String,
    reason: String,
    first: u64,
    last: u64,
    index: u64,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "first" => self.first = value,
            "last" => self.last = value,
            "index" => self.index = value,
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}").trim_matches('"').to_string();
        match field.name() {
            "node" => self.node = text,
            "hash" => self.hash = text,
            "source" => self.source = text,
            "reason" => self.reason = text,
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for TraceLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let target = event.metadata().target();
        if !matches!(target, "qs::apply" | "qs::bootstrap" | "qs::source" | "qs::cursor") {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut recorder = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at_ms = recorder.now_ms();
        let Fields { node, hash, source, reason, first, last, index } = fields;
        let event = match target {
            "qs::apply" => Event::Applied { at_ms, node, first, last, hash },
            "qs::bootstrap" => Event::Bootstrapped { at_ms, node, index, hash },
            "qs::source" => Event::SourceChanged { at_ms, node, source, reason },
            _ => Event::Cursor { at_ms, node, index },
        };
        recorder.record(event);
    }
}
