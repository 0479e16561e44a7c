//! The run report's tables: nodes, faults, write amplification, fetched work, sizing, key usage,
//! violations.
//!
//! Guarantees: HTML is built with maud, which escapes every interpolated value, so node names,
//! fault details and violation messages show as text; a section with nothing to show is left out
//! or says so in words.

use maud::{Markup, Render, html};

use crate::facts::{NodeFacts, RunFacts};
use crate::html::{bytes, duration, secs, table};
use crate::schema::{Event, RunSummary, SourceChange};

use super::{MAX_NODE_ROWS, MAX_SOURCE_ROWS};
use super::{MAX_VIOLATION_ROWS, header::or_unknown};

/// The cell of a figure that is not known.
fn dash() -> Markup {
    "—".render()
}

/// Whether something happened to a node: a fault, a failover, a bootstrap, a bogus request.
fn eventful(n: &NodeFacts) -> bool {
    n.faults > 0
        || n.bootstraps_seen > 0
        || n.summary.as_ref().is_some_and(|c| c.failovers > 0 || c.bootstraps > 0 || c.bogus_requests > 0)
        || n.sources.iter().any(|c| c.reason != SourceChange::Start)
}

fn node_row(facts: &RunFacts, n: &NodeFacts) -> Vec<Markup> {
    let history = if n.sources.is_empty() {
        dash()
    } else {
        html! {
            @for c in n.sources.iter().take(MAX_SOURCE_ROWS) {
                (secs(c.at_ms)) " " (c.reason.as_str()) " → " (c.source) br;
            }
            @if n.sources.len() > MAX_SOURCE_ROWS {
                "… " (n.sources.len() - MAX_SOURCE_ROWS) " more"
            }
        }
    };
    let (failovers, bootstraps, bogus, applied) = match &n.summary {
        Some(c) => (c.failovers.render(), c.bootstraps.render(), c.bogus_requests.render(), c.applied.render()),
        None => (
            if facts.any_source_changes {
                n.sources.iter().filter(|c| c.reason != SourceChange::Start).count().render()
            } else {
                dash()
            },
            n.bootstraps_seen.render(),
            dash(),
            n.last_applied.map_or_else(dash, |a| a.render()),
        ),
    };
    vec![
        n.name.render(),
        html! {
            (n.tier)
            @if let Some(dc) = n.datacenter { " · dc " (dc) }
        },
        history,
        n.max_lag_ms.map_or_else(dash, |lag| duration(lag).render()),
        failovers,
        bootstraps,
        bogus,
        applied,
        n.faults.render(),
    ]
}

/// One row per tier: its nodes, the greatest lag any showed, failovers, bootstraps and faults
/// summed, and the spread of applied indices at the end.
fn tier_rows(facts: &RunFacts) -> Vec<Vec<Markup>> {
    facts
        .tiers()
        .into_iter()
        .map(|(tier, members)| {
            let nodes: Vec<&NodeFacts> = members.iter().map(|&i| &facts.nodes[i]).collect();
            let lag = nodes.iter().filter_map(|n| n.max_lag_ms).chain(facts.tier_lag_max_ms.get(&tier).copied()).max();
            let counted = |f: fn(&crate::facts::NodeCounters) -> u64| -> u64 {
                nodes.iter().filter_map(|n| n.summary.as_ref()).map(f).sum()
            };
            let applied: Vec<u64> =
                nodes.iter().filter_map(|n| n.summary.as_ref().map(|c| c.applied).or(n.last_applied)).collect();
            let spread = match (applied.iter().min(), applied.iter().max()) {
                (Some(lo), Some(hi)) if lo == hi => lo.render(),
                (Some(lo), Some(hi)) => html! { (lo) "–" (hi) },
                _ => dash(),
            };
            vec![
                tier.render(),
                nodes.len().render(),
                lag.map_or_else(dash, |lag| duration(lag).render()),
                counted(|c| c.failovers).render(),
                counted(|c| c.bootstraps).render(),
                spread,
                nodes.iter().map(|n| n.faults).sum::<u64>().render(),
            ]
        })
        .collect()
}

pub(super) fn node_table(facts: &RunFacts) -> Markup {
    let derived = facts.nodes.iter().any(|n| n.summary.is_none());
    let head =
        ["node", "tier", "source history", "max lag", "failovers", "bootstraps", "bogus requests", "applied", "faults"];
    let large = facts.nodes.len() > MAX_NODE_ROWS;
    let listed: Vec<&NodeFacts> =
        if large { facts.nodes.iter().filter(|n| eventful(n)).collect() } else { facts.nodes.iter().collect() };
    let rows: Vec<Vec<Markup>> = listed.iter().take(MAX_NODE_ROWS).map(|n| node_row(facts, n)).collect();
    let tier_head = ["tier", "nodes", "max lag", "failovers", "bootstraps", "applied at the end", "faults"];
    html! {
        section #nodes-section {
            h2 { "Nodes" }
            @if facts.nodes.is_empty() {
                p.note { "No nodes in the summary or the trace." }
            } @else {
                @if large {
                    p.note {
                        (facts.nodes.len()) " nodes: one row per tier, then the nodes with a fault, a failover, a \
                         bootstrap or a bogus request (" (listed.len()) ")"
                        @if listed.len() > MAX_NODE_ROWS { ", the first " (MAX_NODE_ROWS) " of them" }
                        ". summary.json and trace.jsonl name every node."
                    }
                    (table("tiers", &tier_head, &tier_rows(facts)))
                }
                @if !rows.is_empty() {
                    (table("nodes", &head, &rows))
                }
                @if derived {
                    p.note {
                        "Nodes without a node summary in the trace: failovers are counted from source changes (— \
                         when the trace has none), bootstraps from bootstrap events, applied is the last index \
                         seen; bogus requests are only in node summaries."
                    }
                }
            }
        }
    }
}

pub(super) fn fault_table(facts: &RunFacts) -> Markup {
    let rows: Vec<Vec<Markup>> = facts
        .faults
        .iter()
        .map(|f| {
            vec![
                f.node.render(),
                f.kind.as_str().render(),
                f.detail.render(),
                secs(f.start_ms).render(),
                if f.open_ended { "no end event (liveness phase)".render() } else { secs(f.end_ms).render() },
                duration(f.end_ms - f.start_ms).render(),
            ]
        })
        .collect();
    html! {
        section #faults-section {
            h2 { "Faults" }
            @if rows.is_empty() {
                p.note { "No faults were injected." }
            } @else {
                (table("faults", &["node", "kind", "detail", "start", "end", "lasted"], &rows))
            }
        }
    }
}

pub(super) fn write_amp_table(summary: &RunSummary, facts: &RunFacts) -> Markup {
    let with: Vec<_> = facts.nodes.iter().filter_map(|n| n.summary.as_ref().map(|c| (n, c))).collect();
    if with.is_empty() {
        return html! {};
    }
    // A run uses one engine today; rows are keyed by engine so mixed runs read the same way.
    let engine = or_unknown(&summary.engine);
    let mut rows = Vec::new();
    // Bytes written sum only while every node measured them: one unmeasured node makes its
    // tier's and the run's total unknown, never an undercount.
    let add = |sum: Option<u64>, written: Option<u64>| Some(sum? + written?);
    let mut total = (0u64, Some(0u64), 0usize);
    for (tier, members) in facts.tiers() {
        let (mut logical, mut written, mut n) = (0u64, Some(0u64), 0usize);
        for (node, c) in &with {
            if members.iter().any(|&i| facts.nodes[i].name == node.name) {
                logical += c.logical_bytes;
                written = add(written, c.engine_bytes_written);
                n += 1;
            }
        }
        if n == 0 {
            continue;
        }
        total = (total.0 + logical, add(total.1, written), total.2 + n);
        rows.push(amp_row(engine, &tier, n, logical, written));
    }
    rows.push(amp_row(engine, "all", total.2, total.0, total.1));
    let head = ["engine", "tier", "nodes", "logical bytes", "engine bytes written", "amplification"];
    html! {
        section #write-amp-section {
            h2 { "Write amplification" }
            (table("write-amp", &head, &rows))
            p.note {
                "Logical: key and value bytes applied. Written: what the engine wrote to its disk."
                @if total.1.is_none() {
                    " Not measured: a node's end-of-run summary lacks the figure (its store could not be read, \
                     or the trace is from a qsim before LMDB counted its writes through its map)."
                }
            }
        }
    }
}

fn amp_row(engine: &str, tier: &str, n: usize, logical: u64, written: Option<u64>) -> Vec<Markup> {
    let amp = match written {
        Some(written) if logical > 0 => format!("{:.2}×", written as f64 / logical as f64),
        _ => "—".to_string(),
    };
    let written = written.map_or("not measured".to_string(), bytes);
    vec![engine.render(), tier.render(), n.render(), bytes(logical).render(), written.render(), amp.render()]
}

pub(super) fn key_usage_table(facts: &RunFacts) -> Markup {
    if facts.key_usage.is_empty() {
        return html! {};
    }
    let rows: Vec<Vec<Markup>> = facts
        .key_usage
        .iter()
        .map(|k| {
            let share = if k.keys == 0 { 0.0 } else { 100.0 * k.never_read as f64 / k.keys as f64 };
            vec![
                k.prefix.render(),
                k.keys.render(),
                bytes(k.bytes).render(),
                k.reads.render(),
                html! { (k.never_read) " (" (format!("{share:.0}")) " %)" },
            ]
        })
        .collect();
    html! {
        section #key-usage-section {
            h2 { "Key usage by prefix" }
            (table("key-usage", &["prefix", "keys", "bytes", "reads", "keys never read"], &rows))
        }
    }
}

pub(super) fn violation_table(summary: &RunSummary, facts: &RunFacts) -> Markup {
    // The trace holds every violation; the summary keeps the first few hundred as trace lines —
    // used when the trace has none (a trimmed trace).
    let from_summary: Vec<Event> = if facts.violations.is_empty() {
        summary.violations.iter().filter_map(|line| serde_json::from_str(line).ok()).collect()
    } else {
        Vec::new()
    };
    let rows: Vec<(u64, &str, &str, u64, &str)> = if facts.violations.is_empty() {
        from_summary
            .iter()
            .filter_map(|e| match e {
                Event::Violation { at_ms, checker, node, index, message } => {
                    Some((*at_ms, checker.as_str(), node.as_str(), *index, message.as_str()))
                }
                _ => None,
            })
            .collect()
    } else {
        facts
            .violations
            .iter()
            .map(|v| (v.at_ms, v.checker.as_str(), v.node.as_str(), v.index, v.message.as_str()))
            .collect()
    };
    if rows.is_empty() {
        return html! {};
    }
    let cells: Vec<Vec<Markup>> = rows
        .iter()
        .take(MAX_VIOLATION_ROWS)
        .map(|(at, checker, node, index, message)| {
            vec![secs(*at).render(), checker.render(), node.render(), index.render(), message.render()]
        })
        .collect();
    let head = ["time", "checker", "node", "index", "what was expected, what was found"];
    html! {
        section #violations-section {
            h2 { "Violations" }
            p #violation-total {
                (rows.len()) " violations in total"
                @if rows.len() > MAX_VIOLATION_ROWS { "; the first " (MAX_VIOLATION_ROWS) " are listed" }
                "."
            }
            (table("violations", &head, &cells))
        }
    }
}

/// Per tier, how long entries took from the root's commit to their apply there.
pub(super) fn propagation_table(summary: &RunSummary) -> Markup {
    if summary.propagation.is_empty() {
        return html! {};
    }
    let rows: Vec<Vec<Markup>> = summary
        .propagation
        .iter()
        .map(|r| {
            vec![
                r.tier.render(),
                r.entries.render(),
                secs(r.p50_ms).render(),
                secs(r.p99_ms).render(),
                secs(r.max_ms).render(),
            ]
        })
        .collect();
    let head = ["tier", "applies", "p50", "p99", "max"];
    html! {
        section #propagation-section {
            h2 { "Propagation" }
            p.note {
                "From the root's commit (its first apply by a root member) to each replica's first apply of the \
                 entry, on the simulator's clock; faults included. Quicksilver publishes p99 ≈ 2.29 s from the root \
                 to every machine."
            }
            (table("propagation", &head, &rows))
        }
    }
}

/// Per replica, what it read from its sources: the work the `fetch` checker bounds.
pub(super) fn fetched_table(summary: &RunSummary) -> Markup {
    if summary.fetched.is_empty() {
        return html! {};
    }
    let again = |n: u64| {
        if n == 0 {
            "0".render()
        } else {
            html! { strong { (n) } }
        }
    };
    // A large tree lists the replicas that read something twice first, then the rest, up to
    // the cap.
    let mut listed: Vec<&crate::schema::NodeFetched> = summary.fetched.iter().collect();
    if listed.len() > MAX_NODE_ROWS {
        listed.sort_by_key(|r| std::cmp::Reverse(r.fetched.entries_again + r.fetched.chunks_again));
    }
    let rows: Vec<Vec<Markup>> = listed
        .iter()
        .take(MAX_NODE_ROWS)
        .map(|r| {
            let f = r.fetched;
            vec![
                r.node.render(),
                bytes(f.bytes).render(),
                f.entries.render(),
                again(f.entries_again),
                f.bytes.checked_div(f.entries).map_or_else(|| "–".render(), |b| bytes(b).render()),
                f.chunks.render(),
                again(f.chunks_again),
            ]
        })
        .collect();
    let head =
        ["replica", "bytes read", "entries", "held already", "bytes an entry", "snapshot chunks", "held already"];
    html! {
        section #fetched-section {
            h2 { "Fetched from sources" }
            p.note {
                "Measured on the simulated wire. The bound the fetch checker holds: each entry and each snapshot \
                 chunk once per cause — again only after the replica lost it (a store that never applied it, a new \
                 disk, a transfer that ended)."
            }
            (table("fetched", &head, &rows))
            @if summary.fetched.len() > MAX_NODE_ROWS {
                p.note {
                    "The first " (MAX_NODE_ROWS) " of " (summary.fetched.len()) " replicas, those that read \
                     something they held already first; summary.json lists every one."
                }
            }
        }
    }
}

/// Per tier: the cache and memory formulas against the configuration (runs with `[resources]`).
pub(super) fn sizing_table(summary: &RunSummary) -> Markup {
    if summary.sizing.is_empty() {
        return html! {};
    }
    let flag = |undersized: bool| {
        if undersized {
            html! { strong.bad { "undersized" } }
        } else {
            "ok".render()
        }
    };
    let rows: Vec<Vec<Markup>> = summary
        .sizing
        .iter()
        .map(|s| {
            let share = if s.used_bytes == 0 { 0.0 } else { 100.0 * s.cache_bytes as f64 / s.used_bytes as f64 };
            vec![
                s.tier.render(),
                html! { (bytes(s.data_bytes)) " in " (bytes(s.used_bytes)) " of pages" },
                html! { (bytes(s.cache_bytes)) " (" (format!("{share:.2}")) " % of pages)" },
                html! { (bytes(s.cache_low)) " – " (bytes(s.cache_high)) },
                flag(s.cache_undersized),
                s.memory_limit.map_or_else(|| "none".render(), |l| bytes(l).render()),
                bytes(s.memory_needed).render(),
                bytes(s.rss_max).render(),
                flag(s.memory_undersized),
            ]
        })
        .collect();
    let head =
        ["tier", "data", "cache", "formula: cache", "", "memory limit", "formula: memory", "modelled RSS max", ""];
    html! {
        section #sizing-section {
            h2 { "Sizing: the formulas against the configuration" }
            p.note {
                "Data at the scenario's stated scale (largest node of each tier). Cache formula: 1–2 % of the \
                 store's used bytes (its pages, as FoundationDB's kvstore_used_bytes). Memory formula: base + cache \
                 + byte sample at 6 GB per TB (if kept) + engine structures + memtables + buffers — live heap only, \
                 no allocator overhead; the modelled RSS includes it."
            }
            (table("sizing", &head, &rows))
        }
        (category_table(summary))
    }
}

/// Per tier's largest node: keys, stored and cached bytes by key category.
fn category_table(summary: &RunSummary) -> Markup {
    let share = |part: u64, whole: u64| if whole == 0 { 0.0 } else { 100.0 * part as f64 / whole as f64 };
    let mut rows: Vec<Vec<Markup>> = Vec::new();
    for sizing in &summary.sizing {
        let stored: u64 = sizing.categories.iter().map(|c| c.stored_bytes).sum();
        let cached: u64 = sizing.categories.iter().map(|c| c.cached_bytes).sum();
        for c in &sizing.categories {
            let overhead = share(c.stored_bytes.saturating_sub(c.data_bytes), c.stored_bytes);
            let stored_share = share(c.stored_bytes, stored);
            let cached_share = share(c.cached_bytes, cached);
            rows.push(vec![
                sizing.tier.render(),
                c.prefix.render(),
                c.keys.render(),
                bytes(c.data_bytes).render(),
                html! {
                    (bytes(c.stored_bytes)) " (" (format!("{stored_share:.0}")) " % of leaves; "
                    (format!("{overhead:.0}")) " % overhead)"
                },
                html! { (bytes(c.cached_bytes)) " (" (format!("{cached_share:.0}")) " % of cached leaves)" },
            ]);
        }
    }
    if rows.is_empty() {
        return html! {};
    }
    let head = ["tier", "category", "keys", "key and value bytes", "stored", "cached"];
    html! {
        section #category-section {
            h2 { "Memory by key category" }
            p.note {
                "Largest node of each tier at the end of the run, at the stated scale; a key's category is the key \
                 up to its first colon. Stored: the store's leaf pages the category's entries take, with their share \
                 of the pages' free space (overhead: what is not key or value bytes). Cached: of those, what the \
                 node's cache held. Inner pages and index blocks serve every category and are left out."
            }
            (table("categories", &head, &rows))
        }
    }
}
