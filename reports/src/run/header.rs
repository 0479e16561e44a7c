//! The run report's header: scenario, description, seed, engine, build, the reproduce command,
//! every checker's verdict and, for a failure, the first violation in words.
//!
//! Guarantee: every string from the summary or the trace is escaped; a missing field is shown as
//! `unknown` or said in words, never left blank.

use std::fmt::Write;

use crate::facts::RunFacts;
use crate::html::{badge, duration, esc, secs};
use crate::schema::{RunSummary, VerdictStatus};

pub(super) fn header(out: &mut String, s: &RunSummary, facts: &RunFacts) {
    let pass = s.outcome == "pass";
    let outcome = if s.outcome.is_empty() { "unknown".to_string() } else { s.outcome.to_uppercase() };
    let _ = write!(
        out,
        "<header><h1><span id=\"scenario\">{}</span> · seed <span id=\"seed\">{}</span> {}</h1>",
        esc(&s.scenario),
        s.seed,
        badge(pass, &outcome).replace("class=\"badge", "id=\"outcome\" class=\"badge")
    );
    if !s.description.is_empty() {
        let _ = write!(out, "<p class=\"desc\" id=\"description\">{}</p>", esc(&s.description));
    }
    let lag = match s.max_lag_ms {
        Some(lag) if s.lag_max_ms > 0 => format!("{} (bound {})", duration(lag), duration(s.lag_max_ms)),
        Some(lag) => duration(lag),
        None => "no samples".into(),
    };
    let converged = match (s.converged_after_ms, facts.liveness_from_ms) {
        (Some(ms), _) => {
            format!("{} after the liveness phase began (limit {})", duration(ms), duration(s.converge_within_ms))
        }
        (None, _) => format!("did not converge within {}", duration(s.converge_within_ms)),
    };
    let facts_rows: [(&str, &str, String); 10] = [
        ("scenario file", "path", esc(&s.path.display().to_string())),
        ("seed", "seed-value", s.seed.to_string()),
        ("engine", "engine", esc(or_unknown(&s.engine))),
        ("build", "build", esc(or_unknown(&s.build))),
        ("nodes", "node-count", facts.nodes.len().to_string()),
        ("simulated", "simulated", secs(s.simulated_ms)),
        ("writes acknowledged", "writes", s.writes_acked.to_string()),
        ("max lag", "max-lag", esc(&lag)),
        ("convergence", "convergence", esc(&converged)),
        ("trace", "digest", format!("{} events, digest <code>{}</code>", s.events, esc(&s.digest))),
    ];
    out.push_str("<dl class=\"facts\">");
    for (label, id, value) in facts_rows {
        let _ = write!(out, "<dt>{label}</dt><dd id=\"{id}\">{value}</dd>");
    }
    out.push_str("</dl>");
    let _ = write!(
        out,
        "<h2>Reproduce</h2><pre class=\"reproduce\" id=\"reproduce\"><code>{}</code></pre>",
        esc(&s.reproduce)
    );

    out.push_str("<h2>Verdicts</h2>");
    if s.verdicts.is_empty() {
        out.push_str("<p class=\"note\">The summary records no checker verdicts.</p>");
    } else {
        out.push_str(
            "<table id=\"verdicts\"><thead><tr><th>checker</th><th>verdict</th><th>violations</th>\
             <th>first</th></tr></thead><tbody>",
        );
        for v in &s.verdicts {
            let ok = v.status == VerdictStatus::Pass;
            let _ = write!(
                out,
                "<tr class=\"verdict {}\" data-checker=\"{}\"><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                if ok { "pass" } else { "fail" },
                esc(v.checker.as_str()),
                esc(v.checker.as_str()),
                badge(ok, v.status.as_str()),
                v.violations,
                esc(v.first.as_deref().unwrap_or(""))
            );
        }
        out.push_str("</tbody></table>");
    }
    if !pass {
        out.push_str("<div class=\"first-violation\" id=\"first-violation\"><strong>First violation.</strong> ");
        if let Some(v) = facts.violations.first() {
            let _ = write!(
                out,
                "Checker <b>{}</b> at node <b>{}</b>, {} into the run, index {}: {}.",
                esc(v.checker.as_str()),
                esc(&v.node),
                esc(&secs(v.at_ms)),
                v.index,
                esc(&v.message)
            );
        } else if let Some(v) = s.verdicts.iter().find(|v| v.status != VerdictStatus::Pass) {
            let _ = write!(
                out,
                "Checker <b>{}</b>: {}.",
                esc(v.checker.as_str()),
                esc(v.first.as_deref().unwrap_or("no detail recorded"))
            );
        } else {
            let _ = write!(out, "The run ended as <b>{}</b> with no failing verdict recorded.", esc(&s.outcome));
        }
        if !s.pending.is_empty() {
            out.push_str("<br>Not converged at the end:<ul>");
            for p in &s.pending {
                let _ = write!(out, "<li>{}</li>", esc(p));
            }
            out.push_str("</ul>");
        }
        out.push_str("</div>");
    }
    out.push_str("</header>\n");
}

pub(super) fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}
