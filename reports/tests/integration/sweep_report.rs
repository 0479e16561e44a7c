//! Sweep reports of a real sweep (3 scenarios × 3 seeds) and of edited copies: failing seeds,
//! missing and broken run folders, hostile scenario names — parsed back as HTML.

use crate::common::*;
use qs_reports::schema::SweepSummary;
use qs_reports::sweep::RunFolder;
use scraper::Html;

fn sample() -> SweepSummary {
    qs_reports::load::sweep_summary(&fixture("sweep")).unwrap()
}

#[test]
fn grid_totals_distributions_and_links() {
    let (_tmp, dir) = copy_fixture("sweep");
    let path = qs_reports::write_sweep_report(&dir).unwrap();
    assert_eq!(path, dir.join("report.html"));
    let doc = Html::parse_document(&std::fs::read_to_string(&path).unwrap());
    let s = sample();
    assert_eq!(s.results.len(), 9);

    for r in &s.results {
        let cell = one(&doc, &format!("a.cell[data-scenario=\"{}\"][data-seed=\"{}\"]", r.scenario, r.seed));
        assert_eq!(cell.value().attr("href").unwrap(), format!("{}/seed-{}/report.html", r.scenario, r.seed));
        assert!(cell.value().classes().any(|c| c == "ok"), "every sample run ended as expected");
        assert_eq!(text(cell), format!("{} ✓", r.seed));
        assert_eq!(cell.value().attr("data-outcome").unwrap(), r.outcome.as_str());
        assert!(!cell.value().classes().any(|c| c == "missing"), "every run folder is there");
    }
    assert_eq!(all(&doc, "a.cell").len(), 9);

    assert_eq!(text(one(&doc, "#runs")), "9");
    assert_eq!(text(one(&doc, "#failed")), "0");
    let totals = rows(&doc, "#totals-table");
    assert_eq!(totals.len(), 4, "three scenarios and all");
    assert_eq!(totals[3][..5], ["all", "", "9", "9", "0"]);
    assert!(totals.iter().any(|r| r[0] == "canary-liveness" && r[5] == "3 liveness"), "{totals:?}");

    for scenario in ["bug-replay", "canary-liveness", "quickstart"] {
        let fig = drawn(one(&doc, &format!("figure[data-chart=\"max-lag\"][data-scenario=\"{scenario}\"]")));
        assert!(within(fig, "rect").len() > 2, "{scenario} histogram has bars");
    }
    // The canary never converges: no convergence histogram, a line instead.
    assert!(all(&doc, "figure[data-chart=\"convergence\"][data-scenario=\"canary-liveness\"]").is_empty());
    assert_eq!(all(&doc, "figure[data-chart=\"convergence\"]").len(), 2);
    let dist = rows(&doc, "#distribution-table");
    assert_eq!(dist.iter().find(|r| r[0] == "canary-liveness").unwrap()[9], "3");

    // Planted bugs caught and the canary are listed as expected failures, with their first problem.
    let expected = rows(&doc, "#expected-table");
    assert_eq!(expected.len(), 6);
    assert!(expected[0][4].contains("expected the next batch to start at 50"), "{:?}", expected[0]);
    assert_eq!(text(one(&doc, "#failing p")), "Every run ended as its scenario expects.");
}

#[test]
fn failing_seeds_show_first_problem_reproduce_and_link() {
    let mut s = sample();
    for r in s.results.iter_mut().filter(|r| r.scenario == "quickstart" && r.seed != 2) {
        r.ok = false;
        r.outcome = qs_reports::schema::Outcome::Violation;
        r.first_problem = Some(format!("chain: edge-3 at 1000 ms, index 9: hash differs (seed {})", r.seed));
    }
    let doc = Html::parse_document(&qs_reports::render_sweep(&s, &[]));
    assert_eq!(text(one(&doc, "#failed")), "2");
    assert!(text(one(&doc, "h1")).contains("FAILURES"));
    let failing = all(&doc, "#failing-table tbody tr");
    assert_eq!(failing.len(), 2);
    for (tr, seed) in failing.iter().zip([1, 3]) {
        assert_eq!(tr.value().attr("data-seed"), Some(seed.to_string().as_str()));
        assert_eq!(
            text(within(*tr, "td.first-problem")[0]),
            format!("chain: edge-3 at 1000 ms, index 9: hash differs (seed {seed})")
        );
        assert_eq!(
            text(within(*tr, "pre.reproduce code")[0]),
            format!("./qsim run scenarios/quickstart.toml --seed {seed}")
        );
        let link = within(*tr, "a.run-report")[0];
        assert_eq!(link.value().attr("href"), Some(format!("quickstart/seed-{seed}/report.html").as_str()));
    }
    let bad = one(&doc, "a.cell[data-scenario=\"quickstart\"][data-seed=\"3\"]");
    assert!(bad.value().classes().any(|c| c == "bad"));
    assert_eq!(text(bad), "3 ✗");
}

#[test]
fn missing_and_broken_run_folders_are_shown_not_fatal() {
    let (_tmp, dir) = copy_fixture("sweep");
    std::fs::remove_dir_all(dir.join("quickstart/seed-3")).unwrap();
    std::fs::write(dir.join("bug-replay/seed-2/summary.json"), "{ not json").unwrap();
    let path = qs_reports::write_sweep_report(&dir).unwrap();
    let doc = Html::parse_document(&std::fs::read_to_string(path).unwrap());
    let broken = all(&doc, "#broken-runs li");
    assert_eq!(broken.len(), 2);
    assert!(text(broken[0]).contains("bug-replay/seed-2/summary.json: bad JSON at line 1"), "{}", text(broken[0]));
    assert!(text(broken[1]).contains("quickstart/seed-3: no such folder"), "{}", text(broken[1]));
    assert_eq!(all(&doc, "a.cell.missing").len(), 2);
    assert_eq!(all(&doc, "a.cell").len(), 9, "still one cell per run");

    let s = sample();
    let found: Vec<RunFolder> = s.results.iter().map(|r| qs_reports::sweep::inspect(&dir, r)).collect();
    assert_eq!(found.iter().filter(|f| **f == RunFolder::Ok).count(), 7);
}

#[test]
fn hostile_scenario_names_are_escaped_and_links_encoded() {
    let mut s = sample();
    s.results[0].scenario = "<img src=x onerror=alert(1)> a/b".into();
    s.results[0].first_problem = Some("<script>x</script>".into());
    s.results[0].ok = false;
    let html = qs_reports::render_sweep(&s, &[]);
    let doc = Html::parse_document(&html);
    assert!(all(&doc, "img").is_empty() && all(&doc, "script").is_empty());
    let link = one(&doc, "#failing-table a.run-report");
    assert_eq!(
        link.value().attr("href"),
        Some("%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%20a%2Fb/seed-1/report.html")
    );
    assert_eq!(text(one(&doc, "#failing-table td.first-problem")), "<script>x</script>");
}
