//! Opens a run report and a sweep report from disk in headless Chromium (Debian's `chromium`
//! package): the page must render — no console messages (the pages carry no script, so any
//! console line is an error: a blocked resource, a parse failure), a screenshot that is not
//! blank, and, in the DOM Chromium built, every chart with drawn SVG content and nothing loaded
//! from elsewhere.
//!
//! Chromium missing is a failure, not a skip: install it with `ci/system-deps.sh` (as root) or
//! `apt-get install chromium`, or point `CHROMIUM` at a Chrome/Chromium binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use qs_reports::testkit::{Options, generate};
use scraper::Html;

/// A cold Chromium start on a loaded two-core machine takes a few seconds; a minute means hung.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(path);
    }
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
        if let Some(dir) =
            std::env::var_os("PATH").iter().flat_map(std::env::split_paths).find(|dir| dir.join(name).is_file())
        {
            return dir.join(name);
        }
    }
    panic!(
        "headless Chromium is needed for this test and was not found on PATH (chromium, chromium-browser, \
         google-chrome). Install it: run ci/system-deps.sh as root, or `apt-get update && apt-get install -y \
         chromium` on Debian/Ubuntu; or set CHROMIUM=/path/to/chrome."
    );
}

struct Opened {
    dom: String,
    console: Vec<String>,
    screenshot: PathBuf,
}

/// Runs Chromium once with `args` on `page`, returning stdout and stderr; kills it past the timeout.
fn run_chromium(work: &Path, page: &Path, args: &[&str]) -> (String, String) {
    let profile = work.join("profile");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-extensions",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium().display()));
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let (out, err) = (out.join().unwrap(), err.join().unwrap());
            assert!(status.success(), "chromium {args:?} exited {status}: {err}");
            return (out, err);
        }
        if started.elapsed() > CHROMIUM_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {args:?} on {} did not finish in {CHROMIUM_TIMEOUT:?}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn open(page: &Path, height: u32) -> Opened {
    let work = tempfile::tempdir().unwrap();
    let screenshot = page.with_extension("png");
    // One launch does both: the screenshot to a file, the DOM it built to stdout.
    let (dom, log) = run_chromium(
        work.path(),
        page,
        &[&format!("--screenshot={}", screenshot.display()), &format!("--window-size=1280,{height}"), "--dump-dom"],
    );
    // Console output is logged as `...:INFO:CONSOLE:...] "message", source: ...`.
    let console = log.lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect();
    Opened { dom, console, screenshot }
}

/// Distinct colours and the share of pixels that are not white.
fn screenshot_stats(path: &Path) -> (usize, f64, (u32, u32)) {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(file).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    assert!(channels >= 3, "{:?}", info.color_type);
    let mut colours = std::collections::BTreeSet::new();
    let mut non_white = 0usize;
    let pixels = (info.width * info.height) as usize;
    for px in buf[..info.buffer_size()].chunks_exact(channels) {
        colours.insert((px[0], px[1], px[2]));
        if px[..3] != [255, 255, 255] {
            non_white += 1;
        }
    }
    (colours.len(), non_white as f64 / pixels as f64, (info.width, info.height))
}

fn check_rendered(name: &str, opened: &Opened, charts_expected: &[&str]) {
    assert!(opened.console.is_empty(), "{name}: console messages: {:#?}", opened.console);
    let (colours, inked, size) = screenshot_stats(&opened.screenshot);
    assert!(size.0 >= 1000, "{name}: screenshot {size:?}");
    assert!(colours >= 40, "{name}: only {colours} colours in the screenshot: blank or unstyled");
    assert!(inked > 0.03, "{name}: {:.1} % of the screenshot is not white", inked * 100.0);

    let doc = Html::parse_document(&opened.dom);
    for id in charts_expected {
        for fig in all(&doc, &format!("figure[data-chart=\"{id}\"]")) {
            drawn(fig);
        }
        assert!(!all(&doc, &format!("figure[data-chart=\"{id}\"]")).is_empty(), "{name}: chart {id} in the DOM");
    }
    // Nothing from elsewhere: no scripts, images, frames, style sheets or @imports.
    assert!(all(&doc, "script, img, iframe, link, object, embed").is_empty(), "{name} loads nothing");
    assert!(!opened.dom.contains("@import") && !opened.dom.contains("url("), "{name}: no external CSS");
    eprintln!("{name}: {colours} colours, {:.1} % inked, {} charts", inked * 100.0, all(&doc, "figure.chart").len());
}

#[test]
fn console_errors_are_caught() {
    // The check below is only worth something if it sees errors: a page that logs one must fail it.
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("canary.html");
    std::fs::write(&page, "<!DOCTYPE html><p>x</p><script>console.error('canary'); no_such_function();</script>")
        .unwrap();
    let opened = open(&page, 600);
    assert!(opened.console.iter().any(|l| l.contains("canary")), "{:#?}", opened.console);
    assert!(opened.console.iter().any(|l| l.contains("no_such_function")), "{:#?}", opened.console);
}

#[test]
fn run_and_sweep_reports_render_in_chromium() {
    let started = Instant::now();
    // A real failing run, from disk.
    let (_tmp, run_dir) = copy_fixture("bug-gc-skip-seed-1");
    let page = qs_reports::write_run_report(&run_dir).unwrap();
    let opened = open(&page, 2400);
    check_rendered("bug-gc-skip run report", &opened, &["faults", "applied", "lag", "write_rate"]);

    // The synthetic slow-SSD failover: every chart kind.
    let (summary, events) = generate(&Options::slow_disk_failover());
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    std::fs::write(&page, qs_reports::render_run(&summary, &events)).unwrap();
    let opened = open(&page, 4000);
    check_rendered(
        "slow-disk-failover run report",
        &opened,
        &["faults", "applied", "lag", "sources", "write_rate", "read_p99", "read_p50", "disk_p99", "cursor"],
    );

    let (_tmp2, sweep_dir) = copy_fixture("sweep");
    let page = qs_reports::write_sweep_report(&sweep_dir).unwrap();
    let opened = open(&page, 2200);
    check_rendered("sweep report", &opened, &["max-lag", "convergence"]);
    let doc = Html::parse_document(&opened.dom);
    assert_eq!(all(&doc, "a.cell").len(), 9, "the grid survived the browser");
    eprintln!("chromium checks took {:?}", started.elapsed());
}
