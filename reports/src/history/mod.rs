//! `qsim history`: a folder of nights' merged nightly summaries read as one story — which failure
//! groups are new, gone or back, which scenario × engine pairs pass less or got slower, which
//! probes stopped being reached.
//!
//! A night is a folder holding the `summary.json` that `qsim merge` wrote, stamped with its date
//! and build ([`Night`]), or that file gzipped (`summary.json.gz`, as ci/nightly-history.sh
//! keeps it). Guarantees:
//! - **Ordered by the stamp, never by the file system.** Nights are sorted by date, then by when
//!   they were merged, then by folder name, whatever order the directory lists.
//! - **Nothing guessed.** A summary without a stamp (a shard's, a plain sweep's, a merge by an
//!   older qsim) is refused, naming the file and how to stamp it; an unreadable or malformed
//!   summary is an error naming the file and line. A subfolder without `summary.json` is skipped
//!   and reported, so a page folder or a half-copied night beside the nights stops nothing.
//! - **General.** Every figure is computed from the summaries alone — the same rules for any
//!   failure, scenario, engine or probe; nothing here knows qsim's scenarios.
//!
//! [`page`] draws the [`History`] as a static page; [`History`] itself serializes as
//! `history.json` for scripts.

pub mod page;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::ReportError;
use crate::schema::{Night, Outcome, Probe, SweepSummary};

/// A pair is flagged slower when its latest mean wall time is at least this many times the
/// median of its earlier nights' means. Wall time is the machine's, so a small ratio is noise.
pub const SLOWER_RATIO: f64 = 1.5;

/// The summary file in each night's folder: as the merge wrote it, or gzipped (what
/// ci/nightly-history.sh keeps).
const SUMMARY_FILE: &str = "summary.json";
const SUMMARY_GZ_FILE: &str = "summary.json.gz";

/// Why a folder of nights could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("{}: cannot list the nights: {source}", dir.display())]
    List { dir: PathBuf, source: std::io::Error },
    #[error(
        "{}: no nights: no subfolder holds a summary.json or summary.json.gz (each night is the folder `qsim merge` or ci/nightly-merge.sh wrote)",
        dir.display()
    )]
    NoNights { dir: PathBuf },
    #[error(
        "{}: not stamped with a night (a shard's or a sweep's summary, or merged by a qsim from before nights were stamped); merge its shards with `qsim merge --date YYYY-MM-DD`",
        path.display()
    )]
    NotStamped { path: PathBuf },
}

/// One night as read: its folder's name and its merged summary.
#[derive(Clone, Debug)]
pub struct NightInput {
    pub folder: String,
    pub night: Night,
    pub summary: SweepSummary,
}

/// The nights under `dir` (each a subfolder holding a stamped `summary.json`), in night order,
/// and the subfolders skipped because they hold no `summary.json`.
pub fn load_nights(dir: &Path) -> Result<(Vec<NightInput>, Vec<String>), HistoryError> {
    let list = |source| HistoryError::List { dir: dir.to_path_buf(), source };
    let mut folders: Vec<(String, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list)? {
        let entry = entry.map_err(list)?;
        if entry.file_type().map_err(list)?.is_dir() {
            folders.push((entry.file_name().to_string_lossy().into_owned(), entry.path()));
        }
    }
    // The file system's order is no order: sort by name first, then by the stamp.
    folders.sort();
    let (mut nights, mut skipped) = (Vec::new(), Vec::new());
    for (folder, path) in folders {
        let (file, summary) = if path.join(SUMMARY_FILE).is_file() {
            (path.join(SUMMARY_FILE), crate::load::sweep_summary(&path)?)
        } else if path.join(SUMMARY_GZ_FILE).is_file() {
            (path.join(SUMMARY_GZ_FILE), crate::load::sweep_summary_gz(&path.join(SUMMARY_GZ_FILE))?)
        } else {
            skipped.push(folder);
            continue;
        };
        let night = summary.night.clone().ok_or(HistoryError::NotStamped { path: file })?;
        nights.push(NightInput { folder, night, summary });
    }
    if nights.is_empty() {
        return Err(HistoryError::NoNights { dir: dir.to_path_buf() });
    }
    nights.sort_by(|a, b| {
        (&a.night.date, &a.night.merged_at, &a.folder).cmp(&(&b.night.date, &b.night.merged_at, &b.folder))
    });
    Ok((nights, skipped))
}

/// The nights, and what changed across them.
#[derive(Clone, Debug, Serialize)]
pub struct History {
    pub nights: Vec<NightRow>,
    /// Every failure group seen on any night: the latest night's first (new, back, still
    /// failing), then those gone; within each, most runs on the latest night it was seen first.
    pub groups: Vec<GroupTrend>,
    /// Every scenario × engine pair run on any night, by scenario then engine.
    pub pairs: Vec<PairTrend>,
    /// Every probe, in [`Probe::ALL`] order.
    pub probes: Vec<ProbeTrend>,
}

/// One night's totals.
#[derive(Clone, Debug, Serialize)]
pub struct NightRow {
    pub folder: String,
    pub date: String,
    pub commit: String,
    pub build: Option<String>,
    pub runs: u64,
    /// Runs not as their scenario expects.
    pub failed: u64,
    pub groups: u64,
    /// Groups seen this night and on no night before it.
    pub first_seen_groups: u64,
    /// Wall time of every run of the night, summed (what the night cost, across its shards).
    pub wall_ms: u64,
}

/// Where a failure group stands on the latest night.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum GroupStatus {
    /// First seen on the latest night.
    New,
    /// On the latest night, after a night without it since it was first seen.
    Returned,
    /// On the latest night and on every night since it was first seen.
    Ongoing,
    /// Not on the latest night.
    Gone,
}

impl GroupStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One failure group (one signature) across the nights.
#[derive(Clone, Debug, Serialize)]
pub struct GroupTrend {
    pub signature: String,
    pub outcome: Outcome,
    /// Its runs on each night, in night order (0 where it was not seen).
    pub runs: Vec<u64>,
    /// Night indexes (into [`History::nights`]).
    pub first_seen: usize,
    pub last_seen: usize,
    pub status: GroupStatus,
    /// Every run name it failed in, on any night.
    pub scenarios: Vec<String>,
    /// How to reproduce it, from the last night it was seen.
    pub reproduce: String,
    /// Whether the last night it was seen listed it as known.
    pub known: bool,
}

/// One scenario × engine pair on one night.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PairNight {
    pub runs: u64,
    /// Runs that ended as the scenario expects.
    pub passed: u64,
    pub mean_wall_ms: u64,
}

/// One scenario × engine pair across the nights.
#[derive(Clone, Debug, Serialize)]
pub struct PairTrend {
    /// The scenario file's name without `.toml`.
    pub scenario: String,
    pub path: String,
    /// `unknown` for runs that recorded none (they wrote no summary).
    pub engine: String,
    /// Per night; none on a night that did not run the pair.
    pub nights: Vec<Option<PairNight>>,
    /// Latest mean wall time over the median of the earlier nights' means, when the pair ran
    /// on the latest night and on an earlier one.
    pub wall_ratio: Option<f64>,
}

impl PairTrend {
    /// Whether the latest night took at least [`SLOWER_RATIO`] times its usual wall time.
    pub fn slower(&self) -> bool {
        self.wall_ratio.is_some_and(|r| r >= SLOWER_RATIO)
    }
}

/// One probe across the nights.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeTrend {
    pub probe: Probe,
    /// Runs that reached it, per night.
    pub runs: Vec<u64>,
}

/// Whether the latest night still reaches a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ProbeStatus {
    /// Some run of the latest night reached it.
    Reached,
    /// Reached on an earlier night, by no run of the latest.
    Stopped,
    /// Reached on no night.
    Never,
}

impl ProbeStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl ProbeTrend {
    pub fn status(&self) -> ProbeStatus {
        match self.runs.split_last() {
            Some((&latest, _)) if latest > 0 => ProbeStatus::Reached,
            Some((_, earlier)) if earlier.iter().any(|&n| n > 0) => ProbeStatus::Stopped,
            _ => ProbeStatus::Never,
        }
    }
}

impl History {
    /// The history of `nights`, which must be in night order (as [`load_nights`] returns them).
    ///
    /// # Panics
    /// If `nights` is empty: a history is of at least one night.
    #[expect(
        clippy::too_many_lines,
        reason = "121 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    pub fn of(nights: &[NightInput]) -> History {
        assert!(!nights.is_empty(), "a history is of at least one night");
        let n = nights.len();
        let latest = n - 1;

        // Failure groups by signature.
        let mut groups: BTreeMap<&str, GroupTrend> = BTreeMap::new();
        for (i, night) in nights.iter().enumerate() {
            for g in &night.summary.groups {
                let trend = groups.entry(&g.signature).or_insert_with(|| GroupTrend {
                    signature: g.signature.clone(),
                    outcome: g.outcome,
                    runs: vec![0; n],
                    first_seen: i,
                    last_seen: i,
                    status: GroupStatus::Gone,
                    scenarios: Vec::new(),
                    reproduce: String::new(),
                    known: false,
                });
                trend.runs[i] += g.count;
                trend.last_seen = i;
                trend.outcome = g.outcome;
                trend.reproduce.clone_from(&g.reproduce);
                trend.known = g.known;
                for s in &g.scenarios {
                    if !trend.scenarios.contains(s) {
                        trend.scenarios.push(s.clone());
                    }
                }
            }
        }
        let mut groups: Vec<GroupTrend> = groups.into_values().collect();
        for g in &mut groups {
            g.scenarios.sort();
            g.status = if g.last_seen != latest {
                GroupStatus::Gone
            } else if g.first_seen == latest {
                GroupStatus::New
            } else if g.runs[g.first_seen..].contains(&0) {
                GroupStatus::Returned
            } else {
                GroupStatus::Ongoing
            };
        }
        groups.sort_by(|a, b| {
            (a.status, std::cmp::Reverse(a.runs[a.last_seen]), &a.signature).cmp(&(
                b.status,
                std::cmp::Reverse(b.runs[b.last_seen]),
                &b.signature,
            ))
        });

        // Nights' totals.
        let night_rows = nights
            .iter()
            .enumerate()
            .map(|(i, night)| NightRow {
                folder: night.folder.clone(),
                date: night.night.date.clone(),
                commit: night.night.commit().to_string(),
                build: night.night.build.clone(),
                runs: night.summary.runs,
                failed: night.summary.failed,
                groups: night.summary.groups.len() as u64,
                first_seen_groups: groups.iter().filter(|g| g.first_seen == i).count() as u64,
                wall_ms: night.summary.results.iter().map(|r| r.wall_ms).sum(),
            })
            .collect();

        // Scenario × engine pairs: (runs, passed, wall sum) per night, keyed (scenario, engine,
        // file).
        type Tally = (u64, u64, u64);
        let mut pairs: BTreeMap<(String, String, String), Vec<Tally>> = BTreeMap::new();
        for (i, night) in nights.iter().enumerate() {
            for r in &night.summary.results {
                let path = r.path.display().to_string();
                let scenario =
                    r.path.file_stem().map_or_else(|| r.scenario.clone(), |s| s.to_string_lossy().into_owned());
                let engine = r.engine.clone().unwrap_or_else(|| "unknown".to_string());
                let cell = &mut pairs.entry((scenario, engine, path)).or_insert_with(|| vec![(0, 0, 0); n])[i];
                cell.0 += 1;
                cell.1 += u64::from(r.ok);
                cell.2 += r.wall_ms;
            }
        }
        let pairs = pairs
            .into_iter()
            .map(|((scenario, engine, path), cells)| {
                let nights: Vec<Option<PairNight>> = cells
                    .iter()
                    .map(|&(runs, passed, wall)| {
                        (runs > 0).then(|| PairNight { runs, passed, mean_wall_ms: wall / runs })
                    })
                    .collect();
                let mut earlier: Vec<u64> = nights[..latest].iter().flatten().map(|p| p.mean_wall_ms).collect();
                earlier.sort_unstable();
                let wall_ratio = match (nights[latest], earlier.is_empty()) {
                    (Some(last), false) => {
                        let median = if earlier.len() % 2 == 1 {
                            earlier[earlier.len() / 2] as f64
                        } else {
                            (earlier[earlier.len() / 2 - 1] + earlier[earlier.len() / 2]) as f64 / 2.0
                        };
                        Some(last.mean_wall_ms as f64 / median.max(1.0))
                    }
                    _ => None,
                };
                PairTrend { scenario, path, engine, nights, wall_ratio }
            })
            .collect();

        // Probes: runs reaching each, per night.
        let probes = Probe::ALL
            .iter()
            .map(|&probe| ProbeTrend {
                probe,
                runs: nights
                    .iter()
                    .map(|night| {
                        night
                            .summary
                            .results
                            .iter()
                            .filter(|r| r.probes.iter().any(|h| h.probe == probe && h.hits > 0))
                            .count() as u64
                    })
                    .collect(),
            })
            .collect();

        History { nights: night_rows, groups, pairs, probes }
    }

    /// What a team reads first, one finding a line: the latest night, then new and returned
    /// groups, groups gone, slower pairs, pairs passing less, probes no longer reached.
    pub fn headlines(&self) -> Vec<String> {
        let latest = self.nights.len() - 1;
        let last = &self.nights[latest];
        let mut lines = vec![format!(
            "{} nights, {} to {}; the latest ({} at {}): {} runs, {} not as expected, {} failure groups",
            self.nights.len(),
            self.nights[0].date,
            last.date,
            last.folder,
            last.commit,
            last.runs,
            last.failed,
            last.groups
        )];
        for g in &self.groups {
            let first = &self.nights[g.first_seen];
            match g.status {
                GroupStatus::New => {
                    lines.push(format!("new        {} ({} runs): {}", g.outcome, g.runs[latest], g.signature));
                }
                GroupStatus::Returned => lines.push(format!(
                    "returned   {} ({} runs; first seen {} at {}): {}",
                    g.outcome, g.runs[latest], first.date, first.commit, g.signature
                )),
                GroupStatus::Gone => {
                    let last_seen = &self.nights[g.last_seen];
                    lines.push(format!(
                        "gone       since {} at {} (last seen {}): {}",
                        self.nights[g.last_seen + 1].date,
                        self.nights[g.last_seen + 1].commit,
                        last_seen.date,
                        g.signature
                    ));
                }
                GroupStatus::Ongoing => {}
            }
        }
        for p in self.pairs.iter().filter(|p| p.slower()) {
            lines.push(format!(
                "slower     {} on {}: {:.1}x its usual wall time per run",
                p.scenario,
                p.engine,
                p.wall_ratio.unwrap_or_default()
            ));
        }
        for p in &self.pairs {
            let rate = |c: &PairNight| c.passed as f64 / c.runs as f64;
            let before = p.nights[..latest].iter().flatten().last();
            if let (Some(now), Some(before)) = (p.nights[latest], before)
                && rate(&now) < rate(before)
            {
                lines.push(format!(
                    "passes less {} on {}: {}/{} runs as expected, {}/{} the night before it last ran",
                    p.scenario, p.engine, now.passed, now.runs, before.passed, before.runs
                ));
            }
        }
        for p in self.probes.iter().filter(|p| p.status() == ProbeStatus::Stopped) {
            lines.push(format!(
                "unreached  probe {}: reached on an earlier night, by no run of the latest",
                p.probe.name()
            ));
        }
        lines
    }
}

/// Writes `out/index.html` and `out/history.json` for `history`, returning the page's path.
pub fn write_history(history: &History, out: &Path) -> Result<PathBuf, ReportError> {
    let write = |path: PathBuf, text: String| {
        std::fs::write(&path, text).map_err(|source| ReportError::Write { path: path.clone(), source })
    };
    std::fs::create_dir_all(out).map_err(|source| ReportError::Write { path: out.to_path_buf(), source })?;
    write(out.join("history.json"), serde_json::to_string_pretty(history).expect("a history serializes"))?;
    let page = out.join("index.html");
    write(page.clone(), page::render_history(history))?;
    Ok(page)
}

#[cfg(test)]
mod tests;
