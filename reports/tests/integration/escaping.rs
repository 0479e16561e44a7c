//! A hostile string — a `<script>` element, double quotes, an ampersand, a quote — put into every
//! free-text field a run report, a sweep report and a sizing page show: it must come out escaped
//! in the HTML text (maud's escaping, exactly), never as markup, and read back as the same string
//! in the parsed page, in text and in attribute values alike.

use crate::common::*;
use qs_reports::schema::{Event, FaultPhase, KnownFailures, Outcome, SweepSummary};
use qs_reports::sizing::{SizingPoint, SizingSweep, render_sizing};
use qs_reports::testkit::{Options, generate};
use scraper::Html;

const HOSTILE: &str = "<script>alert(\"x&y\")</script>\" & '";
/// [`HOSTILE`] as maud escapes it, in text and in attribute values: `&`, `<`, `>` and `"`.
const ESCAPED: &str = "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;&quot; &amp; '";

/// No element, attribute or event handler came from the input.
fn assert_inert(html: &str, doc: &Html) {
    assert!(!html.to_lowercase().contains("<script"), "a raw script tag");
    assert!(!html.contains("alert(\"x"), "raw quotes from the input");
    assert!(all(doc, "script").is_empty(), "a script element");
}

#[test]
fn hostile_strings_are_escaped_in_a_run_report() {
    let (mut s, mut events) = generate(&Options::slow_disk_failover());
    s.scenario = format!("scenario {HOSTILE}");
    s.description = format!("description {HOSTILE}");
    s.engine = format!("engine {HOSTILE}");
    s.build = format!("build {HOSTILE}");
    s.reproduce = format!("./qsim run '{HOSTILE}'");
    s.digest = format!("digest {HOSTILE}");
    s.pending = vec![format!("pending {HOSTILE}")];
    for v in &mut s.verdicts {
        v.first = Some(format!("first {HOSTILE}"));
    }
    let mut details = 0;
    for e in &mut events {
        match e {
            Event::Fault { phase: FaultPhase::Start, detail, .. } => {
                *detail = format!("detail {HOSTILE}");
                details += 1;
            }
            Event::Violation { message, .. } => *message = format!("message {HOSTILE}"),
            _ => {}
        }
    }
    assert!(details > 0, "the synthetic run injects faults");

    let html = qs_reports::render_run(&s, &events);
    let doc = Html::parse_document(&html);
    assert_inert(&html, &doc);
    for field in ["scenario", "description", "engine", "build", "digest", "pending", "first", "detail", "message"] {
        assert!(html.contains(&format!("{field} {ESCAPED}")), "{field} escaped in the HTML text");
    }
    assert!(html.contains(&format!("<title>qsim scenario {ESCAPED} seed 7</title>")), "the title, escaped");

    // Read back, every one is the string that went in.
    assert_eq!(text(one(&doc, "title")), format!("qsim {} seed 7", s.scenario));
    assert_eq!(text(one(&doc, "#scenario")), s.scenario);
    assert_eq!(text(one(&doc, "#description")), s.description);
    assert_eq!(text(one(&doc, "#engine")), s.engine);
    assert_eq!(text(one(&doc, "#build")), s.build);
    assert_eq!(text(one(&doc, "#reproduce code")), s.reproduce);
    assert_eq!(text(one(&doc, "#digest code")), s.digest);
    assert_eq!(text(one(&doc, "#first-violation li")), s.pending[0]);
    assert!(text(one(&doc, "#first-violation")).contains(&format!("message {HOSTILE}")));
    for tr in all(&doc, "#verdicts tbody tr") {
        assert_eq!(text(within(tr, "td")[3]), format!("first {HOSTILE}"));
    }
    let faults = rows(&doc, "table.faults");
    assert_eq!(faults.len(), details);
    assert!(faults.iter().all(|r| r[2] == format!("detail {HOSTILE}")), "{faults:?}");
    assert!(rows(&doc, "table.violations").iter().all(|r| r[4] == format!("message {HOSTILE}")));
}

#[test]
fn hostile_strings_are_escaped_in_a_sweep_report() {
    let mut s: SweepSummary = qs_reports::load::sweep_summary(&fixture("sweep")).unwrap();
    s.seeds = format!("seeds {HOSTILE}");
    s.shard = format!("shard {HOSTILE}");
    let scenario = format!("scenario {HOSTILE}");
    for r in s.results.iter_mut().filter(|r| r.scenario == "quickstart") {
        r.scenario = scenario.clone();
        r.ok = false;
        r.outcome = Outcome::Violation;
        r.expected = format!("expected {HOSTILE}");
        r.first_problem = Some(format!("problem {HOSTILE}"));
        r.reproduce = format!("./qsim run '{HOSTILE}'");
        r.signature = Some(format!("signature {HOSTILE}"));
    }
    s.regroup(&KnownFailures::default());
    let html = qs_reports::render_sweep(&s, &[]);
    let doc = Html::parse_document(&html);
    assert_inert(&html, &doc);
    for field in ["seeds", "shard", "scenario", "expected", "problem", "signature"] {
        assert!(html.contains(&format!("{field} {ESCAPED}")), "{field} escaped in the HTML text");
    }
    // In attribute values too: the grid cells' and rows' data-scenario, the cells' title.
    assert!(html.contains(&format!("data-scenario=\"scenario {ESCAPED}\"")), "escaped in attributes");
    assert!(html.contains(&format!("(expects expected {ESCAPED})\"")), "escaped in the cell's title");

    assert_eq!(text(one(&doc, "#seeds")), s.seeds);
    assert_eq!(text(one(&doc, "#shard")), s.shard);
    let cells = all(&doc, "a.cell.bad");
    assert_eq!(cells.len(), 3);
    for cell in cells {
        let a = cell.value();
        assert_eq!(a.attr("data-scenario"), Some(scenario.as_str()), "the attribute reads back whole");
        assert!(a.attr("title").unwrap().ends_with(&format!("(expects expected {HOSTILE})")));
        // The link is percent-encoded (maud escapes HTML, not URLs): one path segment, no quote.
        let href = a.attr("href").unwrap();
        assert!(href.starts_with("scenario%20%3Cscript%3Ealert%28%22x%26y%22%29%3C%2Fscript%3E%22%20%26%20%27/seed-"));
    }
    let failing = all(&doc, "#failing-table tbody tr");
    assert_eq!(failing.len(), 3);
    for tr in failing {
        assert_eq!(tr.value().attr("data-scenario"), Some(scenario.as_str()));
        assert_eq!(text(within(tr, "td")[0]), scenario);
        assert_eq!(text(within(tr, "td.first-problem")[0]), format!("problem {HOSTILE}"));
        assert_eq!(text(within(tr, "pre.reproduce code")[0]), format!("./qsim run '{HOSTILE}'"));
    }
    assert_eq!(text(one(&doc, "#groups-table td.signature")), format!("signature {HOSTILE}"));
    assert_eq!(text(one(&doc, &format!("div.grid-row[data-scenario=\"{}\"] h3", css_string(&scenario)))), scenario);
}

#[test]
fn hostile_strings_are_escaped_on_the_sizing_page() {
    let point = |share: f64, miss: f64| SizingPoint {
        skew: 1.0,
        share_percent: share,
        cache_bytes: 1 << 30,
        miss_ratio: miss,
        read_touches: 1000,
        run: format!("run {HOSTILE}"),
    };
    let sweep = SizingSweep {
        scenario: format!("scenario {HOSTILE}"),
        seed: 1,
        used_bytes: 1 << 40,
        points: vec![point(1.0, 0.1), point(2.0, 0.005)],
    };
    let html = render_sizing(&sweep);
    let doc = Html::parse_document(&html);
    assert_inert(&html, &doc);
    assert!(html.contains(&format!("scenario {ESCAPED}")));
    assert!(html.contains(&format!("href=\"run {ESCAPED}/report.html\"")), "escaped in the link");
    assert_eq!(text(one(&doc, "h1")), format!("Sizing sweep · {} · seed 1", sweep.scenario));
    for a in all(&doc, "#points a") {
        assert_eq!(a.value().attr("href"), Some(format!("run {HOSTILE}/report.html").as_str()));
        assert_eq!(text(a), format!("run {HOSTILE}"));
    }
}

/// `s` as a CSS string's contents: backslash and double quote escaped.
fn css_string(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
