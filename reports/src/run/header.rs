//! The run report's header: scenario, description, seed, engine, build, the reproduce command,
//! every checker's verdict and, for a failure, the first violation in words.
//!
//! Guarantees: HTML is built with maud, which escapes every interpolated value, so every string
//! from the summary or the trace shows as text; a missing field is shown as `unknown` or said in
//! words, never left blank.

use maud::{Markup, Render, html};

use crate::facts::RunFacts;
use crate::html::{badge, duration, secs};
use crate::schema::{RunSummary, VerdictStatus};

#[expect(
    clippy::too_many_lines,
    reason = "78 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub(super) fn header(s: &RunSummary, facts: &RunFacts) -> Markup {
    let pass = s.outcome == "pass";
    let outcome = if s.outcome.is_empty() { "unknown".to_string() } else { s.outcome.to_uppercase() };
    let lag = match s.max_lag_ms {
        Some(lag) if s.lag_max_ms > 0 => format!("{} (bound {})", duration(lag), duration(s.lag_max_ms)),
        Some(lag) => duration(lag),
        None => "no samples".into(),
    };
    let converged = match s.converged_after_ms {
        Some(ms) => {
            format!("{} after the liveness phase began (limit {})", duration(ms), duration(s.converge_within_ms))
        }
        None => format!("did not converge within {}", duration(s.converge_within_ms)),
    };
    let clocks = if s.clocks.is_empty() { "every host in step".to_string() } else { s.clocks.join("; ") };
    let knobs = if s.knobs.is_empty() { "none drawn: the scenario's settings".to_string() } else { s.knobs.join(", ") };
    let facts_rows: [(&str, &str, Markup); 12] = [
        ("scenario file", "path", s.path.display().to_string().render()),
        ("seed", "seed-value", s.seed.render()),
        ("engine", "engine", or_unknown(&s.engine).render()),
        ("build", "build", or_unknown(&s.build).render()),
        ("knobs (drawn from the seed)", "knobs", knobs.render()),
        ("clocks (off the simulated time)", "clocks", clocks.render()),
        ("nodes", "node-count", facts.nodes.len().render()),
        if s.real {
            ("real processes, wall clock", "simulated", secs(s.simulated_ms).render())
        } else {
            ("simulated", "simulated", secs(s.simulated_ms).render())
        },
        ("writes acknowledged", "writes", s.writes_acked.render()),
        ("max lag", "max-lag", lag.render()),
        ("convergence", "convergence", converged.render()),
        if s.real {
            ("trace", "digest", html! { (s.events) " events (a real run is not deterministic: no digest)" })
        } else {
            ("trace", "digest", html! { (s.events) " events, digest " code { (s.digest) } })
        },
    ];
    html! {
        header {
            h1 {
                span #scenario { (s.scenario) } " · seed " span #seed { (s.seed) } " "
                (badge(pass, &outcome, Some("outcome")))
            }
            @if !s.description.is_empty() {
                p.desc #description { (s.description) }
            }
            dl.facts {
                @for (label, id, value) in facts_rows {
                    dt { (label) }
                    dd id=(id) { (value) }
                }
            }
            h2 { "Reproduce" }
            pre.reproduce #reproduce { code { (s.reproduce) } }
            h2 { "Verdicts" }
            @if s.verdicts.is_empty() {
                p.note { "The summary records no checker verdicts." }
            } @else {
                table #verdicts {
                    thead { tr { th { "checker" } th { "verdict" } th { "violations" } th { "first" } } }
                    tbody {
                        @for v in &s.verdicts {
                            @let ok = v.status == VerdictStatus::Pass;
                            tr.verdict.(if ok { "pass" } else { "fail" }) data-checker=(v.checker.as_str()) {
                                td { (v.checker.as_str()) }
                                td { (badge(ok, v.status.as_str(), None)) }
                                td.num { (v.violations) }
                                td { (v.first.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }
            @if !pass {
                (first_violation(s, facts))
            }
        }
    }
}

/// The first violation in words, and what had not converged at the end.
fn first_violation(s: &RunSummary, facts: &RunFacts) -> Markup {
    html! {
        div.first-violation #first-violation {
            strong { "First violation." } " "
            @if let Some(v) = facts.violations.first() {
                "Checker " b { (v.checker.as_str()) } " at node " b { (v.node) } ", " (secs(v.at_ms))
                " into the run, index " (v.index) ": " (v.message) "."
            } @else if let Some(v) = s.verdicts.iter().find(|v| v.status != VerdictStatus::Pass) {
                "Checker " b { (v.checker.as_str()) } ": " (v.first.as_deref().unwrap_or("no detail recorded")) "."
            } @else {
                "The run ended as " b { (s.outcome) } " with no failing verdict recorded."
            }
            @if !s.pending.is_empty() {
                br;
                "Not converged at the end:"
                ul { @for p in &s.pending { li { (p) } } }
            }
        }
    }
}

pub(super) fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}
