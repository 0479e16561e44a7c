//! Helpers shared by the report tests: fixture paths and HTML queries.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use scraper::{ElementRef, Html, Selector};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Copies a fixture folder (recursively) into a fresh temporary directory, so writing
/// `report.html` never touches the repository.
pub fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join(name);
    copy_dir(&fixture(name), &to);
    (tmp, to)
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

pub fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap_or_else(|e| panic!("bad selector {s}: {e:?}"))
}

pub fn all<'a>(doc: &'a Html, s: &str) -> Vec<ElementRef<'a>> {
    doc.select(&sel(s)).collect()
}

pub fn one<'a>(doc: &'a Html, s: &str) -> ElementRef<'a> {
    let found = all(doc, s);
    assert_eq!(found.len(), 1, "expected exactly one `{s}`, found {}", found.len());
    found[0]
}

pub fn text(e: ElementRef<'_>) -> String {
    e.text().collect::<String>().split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn within<'a>(e: ElementRef<'a>, s: &str) -> Vec<ElementRef<'a>> {
    e.select(&sel(s)).collect()
}

/// The number of points of a `points="x,y x,y ..."` attribute.
pub fn point_count(e: ElementRef<'_>) -> usize {
    e.value().attr("points").map(|p| p.split_whitespace().count()).unwrap_or(0)
}

/// A chart figure by its `data-chart`: asserts it holds an SVG with drawn data (a polyline of at
/// least two points, a filled polygon, or data marks) and returns it.
pub fn chart<'a>(doc: &'a Html, id: &str) -> ElementRef<'a> {
    drawn(one(doc, &format!("figure[data-chart=\"{id}\"]")))
}

/// Asserts a chart figure holds an SVG with drawn data, and returns it.
pub fn drawn(fig: ElementRef<'_>) -> ElementRef<'_> {
    let id = fig.value().attr("data-chart").unwrap_or("?");
    let svg = within(fig, "svg");
    assert_eq!(svg.len(), 1, "chart {id} has one svg");
    let lines = within(fig, "polyline").into_iter().filter(|p| point_count(*p) >= 2).count();
    let polygons = within(fig, "polygon").into_iter().filter(|p| point_count(*p) >= 3).count();
    let circles = within(fig, "circle").len();
    let rects = within(fig, "rect").len();
    // Every SVG has a background rect and the plotting area's; data adds more.
    assert!(lines + polygons + circles > 0 || rects > 3, "chart {id} draws no data");
    fig
}

pub fn has_liveness_shading(fig: ElementRef<'_>) -> bool {
    let fill = qs_reports::chart::hex(qs_reports::chart::LIVENESS_FILL);
    within(fig, "rect").iter().any(|r| r.value().attr("fill") == Some(fill.as_str()))
}

pub fn charts(doc: &Html) -> Vec<String> {
    all(doc, "figure.chart").iter().map(|f| f.value().attr("data-chart").unwrap().to_string()).collect()
}

/// Rows of a table's body as cell texts.
pub fn rows(doc: &Html, table: &str) -> Vec<Vec<String>> {
    all(doc, &format!("{table} tbody tr"))
        .into_iter()
        .map(|tr| within(tr, "td").into_iter().map(text).collect())
        .collect()
}
