//! The sizing sweep's page: page-cache miss ratio of reads against cache size as a share of the
//! store's pages, one line per key popularity, the 1–2 % rule shaded, and where each line's knee
//! falls against the rule.
//!
//! Guarantees: every point is a real run's (its folder is linked); the knee is read off the
//! measured points, never interpolated past them. HTML is built with maud, which escapes every
//! interpolated value; only the chart's SVG goes in unescaped ([`chart::Svg`] says why).

use std::path::{Path, PathBuf};

use maud::{Markup, Render, html};
use serde::{Deserialize, Serialize};

use crate::ReportError;
use crate::chart::{self, XyLine};
use crate::html::{bytes, page, table};

/// The miss ratio under which a share counts as past the knee: the seed's fixed Redwood pager
/// missed 0.8 % (432 in 52 400).
pub const KNEE_MISS_RATIO: f64 = 0.01;

/// One run of the sizing sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizingPoint {
    /// The readers' Zipf exponent.
    pub skew: f64,
    /// The cache as a percentage of the store's used bytes (its pages).
    pub share_percent: f64,
    pub cache_bytes: u64,
    /// Read page misses over read page touches on the edges, warm windows only.
    pub miss_ratio: f64,
    pub read_touches: u64,
    /// The run's folder, relative to the sweep's.
    pub run: String,
}

/// A whole sizing sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizingSweep {
    pub scenario: String,
    pub seed: u64,
    /// The store's used bytes (pages) at the stated scale, from the pilot run.
    pub used_bytes: u64,
    pub points: Vec<SizingPoint>,
}

impl SizingSweep {
    /// The skews tried, ascending.
    pub fn skews(&self) -> Vec<f64> {
        let mut skews: Vec<f64> = self.points.iter().map(|p| p.skew).collect();
        skews.sort_by(f64::total_cmp);
        skews.dedup();
        skews
    }

    /// Per skew, the smallest share whose miss ratio is at most [`KNEE_MISS_RATIO`].
    pub fn knees(&self) -> Vec<(f64, Option<f64>)> {
        self.skews()
            .into_iter()
            .map(|skew| {
                let knee = self
                    .points
                    .iter()
                    .filter(|p| p.skew == skew && p.miss_ratio <= KNEE_MISS_RATIO)
                    .map(|p| p.share_percent)
                    .min_by(f64::total_cmp);
                (skew, knee)
            })
            .collect()
    }
}

/// The page.
#[expect(
    clippy::too_many_lines,
    reason = "74 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn render_sizing(sweep: &SizingSweep) -> String {
    let lines: Vec<XyLine> = sweep
        .skews()
        .iter()
        .enumerate()
        .map(|(i, skew)| {
            let mut points: Vec<(f64, f64)> = sweep
                .points
                .iter()
                .filter(|p| p.skew == *skew)
                .map(|p| (p.share_percent, p.miss_ratio * 100.0))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            XyLine { label: format!("Zipf skew {skew}"), color: chart::palette(i), points }
        })
        .collect();
    let knees: Vec<Vec<Markup>> = sweep
        .knees()
        .into_iter()
        .map(|(skew, knee)| {
            let (at, verdict) = match knee {
                Some(k) if k <= 2.0 => (format!("{k} %"), "within the rule"),
                Some(k) => (format!("{k} %"), "past the rule: this popularity needs a larger cache"),
                None => ("not reached".into(), "no share tried gets under 1 % misses"),
            };
            vec![skew.render(), at.render(), verdict.render()]
        })
        .collect();
    let runs: Vec<Vec<Markup>> = sweep
        .points
        .iter()
        .map(|p| {
            vec![
                p.skew.render(),
                html! { (p.share_percent) " %" },
                bytes(p.cache_bytes).render(),
                html! { (format!("{:.2}", p.miss_ratio * 100.0)) " %" },
                p.read_touches.render(),
                html! { a href={ (p.run) "/report.html" } { (p.run) } },
            ]
        })
        .collect();
    let body = html! {
        h1 { "Sizing sweep · " (sweep.scenario) " · seed " (sweep.seed) }
        p.note {
            "Each point is one run of the scenario with the cache set to a share of the store's used bytes ("
            (bytes(sweep.used_bytes)) " of pages at the stated scale); the y axis is the share of the edges' page \
             reads that missed, over warm 5 s windows. The green band is the 1–2 % rule."
        }
        section #sizing-chart {
            h2 { "Miss ratio against cache share" }
            @match chart::xy_svg(&lines, "cache (% of the store's pages)", "read page misses (%)", Some((1.0, 2.0))) {
                Ok(svg) => {
                    figure.chart #chart-sizing {
                        (svg)
                        figcaption {
                            @for line in &lines {
                                span.legend style={ "color:" (chart::hex(line.color)) } { "■" } " " (line.label) " "
                            }
                        }
                    }
                }
                Err(e) => { p.note.no-data { "No chart: " (e) "." } }
            }
        }
        section #knees {
            h2 { "The knee against the 1–2 % rule" }
            (table("knees", &["Zipf skew", "smallest share under 1 % misses", "against 1–2 %"], &knees))
        }
        section #points {
            h2 { "Runs" }
            (table("points", &["skew", "cache share", "cache", "read misses", "page reads", "run"], &runs))
        }
    };
    page(&format!("qsim sizing {}", sweep.scenario), body)
}

/// Writes `sizing.json` and `report.html` into `dir`; returns the page's path.
pub fn write_sizing(dir: &Path, sweep: &SizingSweep) -> Result<PathBuf, ReportError> {
    let json = dir.join("sizing.json");
    std::fs::write(&json, serde_json::to_vec_pretty(sweep).expect("the sweep serializes"))
        .map_err(|source| ReportError::Write { path: json.clone(), source })?;
    crate::load::write_report(dir, &render_sizing(sweep))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(skew: f64, share: f64, miss: f64) -> SizingPoint {
        SizingPoint {
            skew,
            share_percent: share,
            cache_bytes: 1 << 30,
            miss_ratio: miss,
            read_touches: 1000,
            run: format!("skew-{skew}/share-{share}"),
        }
    }

    #[test]
    fn knees_are_the_smallest_measured_share_under_one_percent_and_the_page_shows_them() {
        let sweep = SizingSweep {
            scenario: "s".into(),
            seed: 1,
            used_bytes: 1 << 40,
            points: vec![
                point(1.0, 0.5, 0.4),
                point(1.0, 1.0, 0.1),
                point(1.0, 2.0, 0.008),
                point(1.0, 4.0, 0.001),
                point(0.8, 2.0, 0.2),
                point(0.8, 4.0, 0.05),
            ],
        };
        assert_eq!(sweep.knees(), vec![(0.8, None), (1.0, Some(2.0))]);
        let html = render_sizing(&sweep);
        assert!(html.contains("id=\"chart-sizing\"") && html.contains("<svg"), "a drawn chart");
        assert!(html.contains("within the rule") && html.contains("not reached"));
        assert!(html.contains("href=\"skew-1/share-2/report.html\""));
    }
}
