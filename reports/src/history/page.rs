//! The history page: the nights, failure groups, scenario × engine pairs and probes of a
//! [`History`], one column per night (the latest [`NIGHTS_SHOWN`]), with two charts across the
//! nights. Static and escaped like every page of this crate ([`crate::html`]).

use maud::{Markup, html};

use super::{GroupStatus, History, PairNight, ProbeStatus};
use crate::chart::{self, XyLine};
use crate::html::{badge, duration, page, table};

/// Night columns a table shows (the latest ones); `history.json` holds every night.
pub const NIGHTS_SHOWN: usize = 30;

/// The page for `history`.
pub fn render_history(history: &History) -> String {
    let n = history.nights.len();
    let shown = n.saturating_sub(NIGHTS_SHOWN)..n;
    let latest = &history.nights[n - 1];
    let body = html! {
        h1 { "Nightly history" }
        p.desc {
            (n) " nights, " (history.nights[0].date) " to " (latest.date) ". A failure group is one signature \
             (how a run failed, names and numbers taken out); its status is where it stands on the latest night: "
            b { "new" } " (first seen there), " b { "returned" } " (back after a night without it), "
            b { "ongoing" } ", or " b { "gone" } ". A pair is flagged slower when its latest mean wall time per run \
             is at least " (super::SLOWER_RATIO) "× the median of its earlier nights'; wall time is the machine's, \
             so read it beside the machine's state."
            @if shown.start > 0 { " The tables show the latest " (NIGHTS_SHOWN) " nights; history.json holds all " (n) "." }
        }
        ul #headlines {
            @for line in history.headlines() { li { code { (line) } } }
        }
        (nights(history, &shown))
        (groups(history, &shown))
        (pairs(history, &shown))
        (probes(history, &shown))
    };
    page("qsim nightly history", body)
}

/// A night's column header: its date and commit.
fn night_head(history: &History, i: usize) -> String {
    format!("{} {}", history.nights[i].date, history.nights[i].commit)
}

fn nights(history: &History, shown: &std::ops::Range<usize>) -> Markup {
    let points = |f: &dyn Fn(usize) -> f64| -> Vec<(f64, f64)> {
        (0..history.nights.len()).map(|i| ((i + 1) as f64, f(i))).collect()
    };
    let failed = [XyLine {
        label: "runs not as expected".into(),
        color: chart::palette(1),
        points: points(&|i| history.nights[i].failed as f64),
    }];
    let wall = [XyLine {
        label: "wall time of every run, summed (min)".into(),
        color: chart::palette(0),
        points: points(&|i| history.nights[i].wall_ms as f64 / 60_000.0),
    }];
    let rows: Vec<Vec<Markup>> = shown
        .clone()
        .rev()
        .map(|i| {
            let night = &history.nights[i];
            vec![
                html! { (i + 1) },
                html! { (night.date) },
                html! { code title=[night.build.as_deref()] { (night.commit) } },
                html! { (night.folder) },
                html! { span.num { (night.runs) } },
                html! { span.num data-night=(i) data-failed=(night.failed) { (night.failed) } },
                html! { span.num { (night.groups) } },
                html! { span.num { (night.first_seen_groups) } },
                html! { (duration(night.wall_ms)) },
            ]
        })
        .collect();
    html! {
        section #nights {
            h2 { "Nights" }
            @for (id, lines, y) in [("chart-failed", &failed[..], "runs"), ("chart-wall", &wall[..], "minutes")] {
                @match chart::xy_svg(lines, "night", y, None) {
                    Ok(svg) => { figure.chart id=(id) { (svg) figcaption { (lines[0].label) " per night" } } }
                    Err(e) => { p.note.no-data { "No chart of " (lines[0].label) ": " (e) "." } }
                }
            }
            (table("nights", &["night", "date", "commit", "folder", "runs", "not as expected", "groups", "first seen", "wall time"], &rows))
        }
    }
}

fn groups(history: &History, shown: &std::ops::Range<usize>) -> Markup {
    html! {
        section #groups {
            h2 { "Failure groups" }
            @if history.groups.is_empty() {
                p.note { "No run on any night ended other than as its scenario expects." }
            } @else {
                table.groups {
                    thead { tr {
                        th { "status" } th { "signature" } th { "outcome" } th { "first seen" } th { "last seen" }
                        @for i in shown.clone() { th title=(night_head(history, i)) { (i + 1) } }
                        th { "reproduce (last seen)" }
                    } }
                    tbody {
                        @for g in &history.groups {
                            tr data-signature=(g.signature) data-status=(g.status.as_str()) {
                                td { (badge(g.status == GroupStatus::Gone, g.status.as_str(), None)) @if g.known { " known" } }
                                td { code { (g.signature) } br; small { (g.scenarios.join(", ")) } }
                                td { (g.outcome) }
                                td { (night_head(history, g.first_seen)) }
                                td { (night_head(history, g.last_seen)) }
                                @for i in shown.clone() {
                                    td.num.(if g.runs[i] > 0 { "hit" } else { "none" }) data-night=(i) { (g.runs[i]) }
                                }
                                td { code { (g.reproduce) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn pair_cell(cell: Option<PairNight>) -> Markup {
    match cell {
        None => html! { "–" },
        Some(c) => html! {
            (c.passed) "/" (c.runs) br; small { (duration(c.mean_wall_ms)) }
        },
    }
}

fn pairs(history: &History, shown: &std::ops::Range<usize>) -> Markup {
    html! {
        section #pairs {
            h2 { "Scenario × engine: runs as expected, and mean wall time per run" }
            table.pairs {
                thead { tr {
                    th { "scenario" } th { "engine" }
                    @for i in shown.clone() { th title=(night_head(history, i)) { (i + 1) } }
                    th { "latest against its median" }
                } }
                tbody {
                    @for p in &history.pairs {
                        tr data-scenario=(p.scenario) data-engine=(p.engine) data-slower=(p.slower()) {
                            td title=(p.path) { (p.scenario) }
                            td { (p.engine) }
                            @for i in shown.clone() {
                                @let failing = p.nights[i].is_some_and(|c| c.passed < c.runs);
                                td.num.(if failing { "fail" } else { "pass" }) data-night=(i) { (pair_cell(p.nights[i])) }
                            }
                            td.num {
                                @match p.wall_ratio {
                                    Some(r) => { @if p.slower() { (badge(false, &format!("{r:.1}× slower"), None)) } @else { (format!("{r:.2}×")) } }
                                    None => { "–" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn probes(history: &History, shown: &std::ops::Range<usize>) -> Markup {
    html! {
        section #probes {
            h2 { "Probes: runs that reached each, per night" }
            table.probes {
                thead { tr {
                    th { "probe" } th { "status" }
                    @for i in shown.clone() { th title=(night_head(history, i)) { (i + 1) } }
                } }
                tbody {
                    @for p in &history.probes {
                        @let status = p.status();
                        tr data-probe=(p.probe.name()) data-status=(status.as_str()) {
                            td { code { (p.probe.name()) } }
                            td {
                                @if status == ProbeStatus::Reached { (status.as_str()) }
                                @else { (badge(false, status.as_str(), None)) }
                            }
                            @for i in shown.clone() { td.num data-night=(i) { (p.runs[i]) } }
                        }
                    }
                }
            }
        }
    }
}
