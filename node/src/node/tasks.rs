//! A node's long-running tasks besides replication: the memcached listener, the scrub, log
//! garbage collection, the TLS files' reload, and the legacy writeback a planted bug relies on. Each loops until the
//! node aborts it or (the listener) starts draining.

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::connections::ListenerKind;

use crate::state::{DiskOp, NodeState};

pub(super) async fn serve_memcached(state: Arc<NodeState>, listener: TcpListener) {
    let gate = state.connections.gate(ListenerKind::Memcached);
    let reach = |probe| state.probe(probe);
    crate::connections::accept_until_draining(listener, gate, state.lifecycle(), reach, |stream, peer, lifecycle| {
        let state = state.clone();
        async move {
            let limits = crate::memcached::ConnectionLimits {
                idle_timeout: Some(state.config.connections.memcached.idle_timeout),
                lifecycle: Some(lifecycle),
                planted: crate::memcached::PlantedReadBugs::of(state.config.planted()),
            };
            let result =
                crate::memcached::serve_connection_within(stream, state.as_ref(), &state.read_counters, limits).await;
            match result {
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    state.connections.gate(ListenerKind::Memcached).timed_out();
                    tracing::debug!(%peer, error = %e, "memcached connection timed out");
                }
                Err(e) => tracing::debug!(%peer, error = %e, "memcached connection ended with an error"),
                Ok(()) => {}
            }
        }
    })
    .await
}

/// Reads the `[tls]` files every `tls.reload_interval`, so that rotated certificates are used
/// from the next connection on (`Tls::reload` logs and counts what changed).
pub(super) async fn reload_tls(state: Arc<NodeState>) {
    let Some(tls) = &state.tls else { return };
    loop {
        tokio::time::sleep(tls.config().reload_interval).await;
        tls.reload(&state.metrics);
    }
}

/// Reads back every stored value against its checksum every `storage.scrub_interval`, so
/// damage nobody reads is found too.
pub(super) async fn scrub(state: Arc<NodeState>) {
    loop {
        tokio::time::sleep(state.config.storage.scrub_interval).await;
        state.disk_io(DiskOp::Read).await;
        match state.read_store(|store| store.state_digest()) {
            Ok(_) => {}
            Err(e) if e.is_damage() => {
                tracing::error!(error = %e, "scrub found damage");
                state.found_damage();
            }
            Err(e) => tracing::error!(error = %e, "scrub failed"),
        }
    }
}

/// PLANTED BUG support (legacy): how often unsynced commits reach the disk — the kernel's
/// dirty-page writeback (`dirty_writeback_centisecs`, 5 s by default).
pub const LEGACY_WRITEBACK: std::time::Duration = std::time::Duration::from_secs(5);

/// PLANTED BUG support (legacy): with `acknowledge_before_sync`, nothing but this writeback
/// makes commits durable.
pub(super) async fn legacy_writeback(state: Arc<NodeState>) {
    loop {
        tokio::time::sleep(LEGACY_WRITEBACK).await;
        if let Err(e) = state.with_store(|store| state.settle(store).and_then(|()| store.sync())) {
            tracing::error!(error = %e, "legacy writeback failed");
        }
    }
}

pub(super) async fn run_gc(state: Arc<NodeState>) {
    let policy = crate::store::RetentionPolicy {
        planted_either_rule: state.config.planted().retention_either_rule,
        ..state.config.retention.policy()
    };
    loop {
        tokio::time::sleep(state.config.retention.gc_interval).await;
        // Entries' ages by the root's clock (their stamps are the root's).
        let now = state.root_now_ms();
        state.disk_io(DiskOp::Read).await;
        let outcome = state.with_store(|store| {
            state.settle(store)?;
            store.collect_garbage(policy, now)
        });
        match outcome {
            Ok(outcome) if outcome.collected > 0 => {
                tracing::debug!(collected = outcome.collected, first_retained = outcome.first_retained, "log collected")
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "log garbage collection failed"),
        }
    }
}
