//! What a candidate seed draws beyond its scenario file, as explore's selection sees it: its
//! [`Feature`]s, read from the seed's [`Draws`](crate::plan::Draws) without running it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::scenario::{FaultKind, RelatedGroup, Scenario};

/// What a candidate seed draws, as the selection sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// A drawn fault of this kind (independent or in a related group).
    Fault(FaultKind),
    /// A related group of this shape.
    Related(RelatedGroup),
    /// A drawn kill, pause or partition waiting for a snapshot transfer (`during`).
    Interrupt,
    /// The node's fault points on (drawn, not the file's).
    Buggify,
    /// A writer's drawn mode.
    Writer(WriterMode),
}

/// A writer mode swarm draws (`WriterModes`), as a feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum WriterMode {
    Batches,
    RepeatedKeys,
    Deletes,
    Rewrites,
    OutsidePrefix,
}

impl WriterMode {
    pub const ALL: &'static [WriterMode] = <WriterMode as strum::VariantArray>::VARIANTS;

    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Feature::Fault(kind) => write!(f, "fault:{kind}"),
            Feature::Related(group) => write!(f, "related:{group}"),
            Feature::Interrupt => f.write_str("interrupt"),
            Feature::Buggify => f.write_str("buggify"),
            Feature::Writer(mode) => write!(f, "writer:{}", mode.name()),
        }
    }
}

impl std::str::FromStr for Feature {
    type Err = String;
    fn from_str(s: &str) -> Result<Feature, String> {
        let bad = || format!("{s:?} is not a feature");
        match s.split_once(':') {
            None if s == "interrupt" => Ok(Feature::Interrupt),
            None if s == "buggify" => Ok(Feature::Buggify),
            Some(("fault", kind)) => {
                serde_json::from_value(serde_json::Value::String(kind.into())).map(Feature::Fault).map_err(|_| bad())
            }
            Some(("related", group)) => {
                RelatedGroup::ALL.iter().copied().find(|g| g.name() == group).map(Feature::Related).ok_or_else(bad)
            }
            Some(("writer", mode)) => {
                WriterMode::ALL.iter().copied().find(|m| m.name() == mode).map(Feature::Writer).ok_or_else(bad)
            }
            _ => Err(bad()),
        }
    }
}

impl Serialize for Feature {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Feature {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Feature, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// The features of a run of `scenario` under `seed`: what it draws beyond the file.
pub fn features(scenario: &Scenario, seed: u64) -> BTreeSet<Feature> {
    let mut features = BTreeSet::new();
    let draws = crate::plan::Draws::of(scenario, seed);
    for fault in &draws.faults[scenario.fault.len()..] {
        features.insert(if fault.during.is_some() { Feature::Interrupt } else { Feature::Fault(fault.kind) });
    }
    features.extend(draws.related.iter().map(|g| Feature::Related(g.group)));
    if !scenario.scenario.buggify && draws.fault_points {
        features.insert(Feature::Buggify);
    }
    for modes in draws.writer_modes {
        let on = [
            (WriterMode::Batches, modes.batch_ops > 1),
            (WriterMode::RepeatedKeys, modes.repeat_share > 0.0),
            (WriterMode::Deletes, modes.delete_share > 0.0),
            (WriterMode::Rewrites, modes.rewrite_share > 0.0),
            (WriterMode::OutsidePrefix, modes.outside_prefix_share > 0.0),
        ];
        features.extend(on.into_iter().filter(|(_, on)| *on).map(|(mode, _)| Feature::Writer(mode)));
    }
    features
}
