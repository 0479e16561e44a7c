//! The run report's tables: nodes, faults, write amplification, fetched work, sizing, key usage,
//! violations.

use std::fmt::Write;

use crate::facts::RunFacts;
use crate::html::{bytes, duration, esc, secs, table};
use crate::schema::{Event, RunSummary, SourceReason};

use super::MAX_SOURCE_ROWS;
use super::{MAX_VIOLATION_ROWS, header::or_unknown};

fn num(v: impl std::fmt::Display) -> String {
    v.to_string()
}

pub(super) fn node_table(out: &mut String, facts: &RunFacts) {
    out.push_str("<section id=\"nodes-section\"><h2>Nodes</h2>");
    if facts.nodes.is_empty() {
        out.push_str("<p class=\"note\">No nodes in the summary or the trace.</p></section>\n");
        return;
    }
    let derived = facts.nodes.iter().any(|n| n.summary.is_none());
    let rows: Vec<Vec<String>> = facts
        .nodes
        .iter()
        .map(|n| {
            let mut history = String::new();
            for c in n.sources.iter().take(MAX_SOURCE_ROWS) {
                let _ = write!(history, "{} {} → {}<br>", esc(&secs(c.at_ms)), esc(c.reason.as_str()), esc(&c.source));
            }
            if n.sources.len() > MAX_SOURCE_ROWS {
                let _ = write!(history, "… {} more", n.sources.len() - MAX_SOURCE_ROWS);
            }
            let dash = || "—".to_string();
            let (failovers, bootstraps, bogus, applied) = match &n.summary {
                Some(c) => (num(c.failovers), num(c.bootstraps), num(c.bogus_requests), num(c.applied)),
                None => (
                    if facts.any_source_changes {
                        num(n.sources.iter().filter(|c| c.reason != SourceReason::Start).count())
                    } else {
                        dash()
                    },
                    num(n.bootstraps_seen),
                    dash(),
                    n.last_applied.map(num).unwrap_or_else(dash),
                ),
            };
            vec![
                esc(&n.name),
                match n.datacenter {
                    Some(dc) => format!("{} · dc {dc}", esc(&n.tier)),
                    None => esc(&n.tier),
                },
                if history.is_empty() { dash() } else { history },
                n.max_lag_ms.map(duration).unwrap_or_else(dash),
                failovers,
                bootstraps,
                bogus,
                applied,
                num(n.faults),
            ]
        })
        .collect();
    out.push_str(&table(
        "nodes",
        &[
            "node",
            "tier",
            "source history",
            "max lag",
            "failovers",
            "bootstraps",
            "bogus requests",
            "applied",
            "faults",
        ],
        &rows,
    ));
    if derived {
        out.push_str(
            "<p class=\"note\">Nodes without a node summary in the trace: failovers are counted from source \
             changes (— when the trace has none), bootstraps from bootstrap events, applied is the last index seen; \
             bogus requests are only in node summaries.</p>",
        );
    }
    out.push_str("</section>\n");
}

pub(super) fn fault_table(out: &mut String, facts: &RunFacts) {
    out.push_str("<section id=\"faults-section\"><h2>Faults</h2>");
    if facts.faults.is_empty() {
        out.push_str("<p class=\"note\">No faults were injected.</p></section>\n");
        return;
    }
    let rows: Vec<Vec<String>> = facts
        .faults
        .iter()
        .map(|f| {
            vec![
                esc(&f.node),
                esc(f.kind.as_str()),
                esc(&f.detail),
                esc(&secs(f.start_ms)),
                if f.open_ended { "no end event (liveness phase)".into() } else { esc(&secs(f.end_ms)) },
                esc(&duration(f.end_ms - f.start_ms)),
            ]
        })
        .collect();
    out.push_str(&table("faults", &["node", "kind", "detail", "start", "end", "lasted"], &rows));
    out.push_str("</section>\n");
}

pub(super) fn write_amp_table(out: &mut String, summary: &RunSummary, facts: &RunFacts) {
    let with: Vec<_> = facts.nodes.iter().filter_map(|n| n.summary.as_ref().map(|c| (n, c))).collect();
    if with.is_empty() {
        return;
    }
    // A run uses one engine today; rows are keyed by engine so mixed runs read the same way.
    let engine = or_unknown(&summary.engine).to_string();
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
        rows.push(amp_row(&engine, &tier, n, logical, written));
    }
    rows.push(amp_row(&engine, "all", total.2, total.0, total.1));
    out.push_str("<section id=\"write-amp-section\"><h2>Write amplification</h2>");
    out.push_str(&table(
        "write-amp",
        &["engine", "tier", "nodes", "logical bytes", "engine bytes written", "amplification"],
        &rows,
    ));
    let unmeasured = if total.1.is_none() {
        " Not measured: a node's end-of-run summary lacks the figure (its store could not be read, or \
         the trace is from a qsim before LMDB counted its writes through its map)."
    } else {
        ""
    };
    out.push_str(&format!(
        "<p class=\"note\">Logical: key and value bytes applied. Written: what the engine wrote to its disk.{unmeasured}</p></section>\n"
    ));
}

fn amp_row(engine: &str, tier: &str, n: usize, logical: u64, written: Option<u64>) -> Vec<String> {
    let amp = match written {
        Some(written) if logical > 0 => format!("{:.2}×", written as f64 / logical as f64),
        _ => "—".to_string(),
    };
    let written = written.map_or("not measured".to_string(), bytes);
    vec![esc(engine), esc(tier), num(n), esc(&bytes(logical)), esc(&written), amp]
}

pub(super) fn key_usage_table(out: &mut String, facts: &RunFacts) {
    if facts.key_usage.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = facts
        .key_usage
        .iter()
        .map(|k| {
            let share = if k.keys == 0 { 0.0 } else { 100.0 * k.never_read as f64 / k.keys as f64 };
            vec![
                esc(&k.prefix),
                num(k.keys),
                esc(&bytes(k.bytes)),
                num(k.reads),
                format!("{} ({share:.0} %)", k.never_read),
            ]
        })
        .collect();
    out.push_str("<section id=\"key-usage-section\"><h2>Key usage by prefix</h2>");
    out.push_str(&table("key-usage", &["prefix", "keys", "bytes", "reads", "keys never read"], &rows));
    out.push_str("</section>\n");
}

pub(super) fn violation_table(out: &mut String, summary: &RunSummary, facts: &RunFacts) {
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
        return;
    }
    let html_rows: Vec<Vec<String>> = rows
        .iter()
        .take(MAX_VIOLATION_ROWS)
        .map(|(at, checker, node, index, message)| {
            vec![esc(&secs(*at)), esc(checker), esc(node), num(index), esc(message)]
        })
        .collect();
    let _ = write!(
        out,
        "<section id=\"violations-section\"><h2>Violations</h2><p id=\"violation-total\">{} violations in total{}.</p>",
        rows.len(),
        if rows.len() > MAX_VIOLATION_ROWS {
            format!("; the first {MAX_VIOLATION_ROWS} are listed")
        } else {
            String::new()
        }
    );
    out.push_str(&table(
        "violations",
        &["time", "checker", "node", "index", "what was expected, what was found"],
        &html_rows,
    ));
    out.push_str("</section>\n");
}

/// Per tier: the cache and memory formulas against the configuration (runs with `[resources]`).
/// Per replica, what it read from its sources: the work the `fetch` checker bounds.
pub(super) fn fetched_table(out: &mut String, summary: &RunSummary) {
    if summary.fetched.is_empty() {
        return;
    }
    let again = |n: u64| if n == 0 { "0".to_string() } else { format!("<strong>{n}</strong>") };
    let rows: Vec<Vec<String>> = summary
        .fetched
        .iter()
        .map(|r| {
            let f = r.fetched;
            let per_entry = f.bytes.checked_div(f.entries).map_or_else(|| "–".to_string(), |b| esc(&bytes(b)));
            vec![
                esc(&r.node),
                esc(&bytes(f.bytes)),
                num(f.entries),
                again(f.entries_again),
                per_entry,
                num(f.chunks),
                again(f.chunks_again),
            ]
        })
        .collect();
    out.push_str("<section id=\"fetched-section\"><h2>Fetched from sources</h2>");
    out.push_str(
        "<p class=\"note\">Measured on the simulated wire. The bound the fetch checker holds: each entry and \
         each snapshot chunk once per cause — again only after the replica lost it (a store that never applied \
         it, a new disk, a transfer that ended).</p>",
    );
    out.push_str(&table(
        "fetched",
        &["replica", "bytes read", "entries", "held already", "bytes an entry", "snapshot chunks", "held already"],
        &rows,
    ));
    out.push_str("</section>\n");
}

pub(super) fn sizing_table(out: &mut String, summary: &RunSummary) {
    if summary.sizing.is_empty() {
        return;
    }
    let flag = |undersized: bool| if undersized { "<strong class=\"bad\">undersized</strong>" } else { "ok" };
    let rows: Vec<Vec<String>> = summary
        .sizing
        .iter()
        .map(|s| {
            let share = if s.used_bytes == 0 { 0.0 } else { 100.0 * s.cache_bytes as f64 / s.used_bytes as f64 };
            vec![
                esc(&s.tier),
                format!("{} in {} of pages", esc(&bytes(s.data_bytes)), esc(&bytes(s.used_bytes))),
                format!("{} ({share:.2} % of pages)", esc(&bytes(s.cache_bytes))),
                format!("{} – {}", esc(&bytes(s.cache_low)), esc(&bytes(s.cache_high))),
                flag(s.cache_undersized).to_string(),
                s.memory_limit.map_or_else(|| "none".to_string(), |l| esc(&bytes(l))),
                esc(&bytes(s.memory_needed)),
                esc(&bytes(s.rss_max)),
                flag(s.memory_undersized).to_string(),
            ]
        })
        .collect();
    out.push_str("<section id=\"sizing-section\"><h2>Sizing: the formulas against the configuration</h2>");
    out.push_str(
        "<p class=\"note\">Data at the scenario's stated scale (largest node of each tier). Cache formula: 1–2 % of \
         the store's used bytes (its pages, as FoundationDB's kvstore_used_bytes). Memory formula: base + cache + byte sample at 6 GB per TB (if kept) + engine structures + \
         memtables + buffers — live heap only, no allocator overhead; the modelled RSS includes it.</p>",
    );
    out.push_str(&table(
        "sizing",
        &["tier", "data", "cache", "formula: cache", "", "memory limit", "formula: memory", "modelled RSS max", ""],
        &rows,
    ));
    out.push_str("</section>\n");
    category_table(out, summary);
}

/// Per tier's largest node: keys, stored and cached bytes by key category.
fn category_table(out: &mut String, summary: &RunSummary) {
    let share = |part: u64, whole: u64| if whole == 0 { 0.0 } else { 100.0 * part as f64 / whole as f64 };
    let mut rows: Vec<Vec<String>> = Vec::new();
    for sizing in &summary.sizing {
        let stored: u64 = sizing.categories.iter().map(|c| c.stored_bytes).sum();
        let cached: u64 = sizing.categories.iter().map(|c| c.cached_bytes).sum();
        for c in &sizing.categories {
            let overhead = share(c.stored_bytes.saturating_sub(c.data_bytes), c.stored_bytes);
            rows.push(vec![
                esc(&sizing.tier),
                esc(&c.prefix),
                num(c.keys),
                esc(&bytes(c.data_bytes)),
                format!(
                    "{} ({:.0} % of leaves; {overhead:.0} % overhead)",
                    esc(&bytes(c.stored_bytes)),
                    share(c.stored_bytes, stored)
                ),
                format!("{} ({:.0} % of cached leaves)", esc(&bytes(c.cached_bytes)), share(c.cached_bytes, cached)),
            ]);
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("<section id=\"category-section\"><h2>Memory by key category</h2>");
    out.push_str(
        "<p class=\"note\">Largest node of each tier at the end of the run, at the stated scale; a key's category is \
         the key up to its first colon. Stored: the store's leaf pages the category's entries take, with their share of \
         the pages' free space (overhead: what is not key or value bytes). Cached: of those, what the node's cache held. \
         Inner pages and index blocks serve every category and are left out.</p>",
    );
    out.push_str(&table("categories", &["tier", "category", "keys", "key and value bytes", "stored", "cached"], &rows));
    out.push_str("</section>\n");
}
