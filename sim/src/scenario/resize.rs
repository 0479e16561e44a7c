//! The `scale` scenario's story on a tree of another size: the same four tiers below the root
//! in the same proportions (9 top mains, 90 mains and 900 points of presence per 10 000 nodes,
//! at least 2 of each; the rest edges), the same workload, and its faults moved to the nodes
//! that play the same parts in the smaller tree. The scale benchmark measures how cost grows
//! with it, and the tests run the story at a size a test can afford.

/// The tiers (top, main, pop, edge) of a tree of `nodes` nodes, the root included.
pub fn tiers_for(nodes: usize) -> [usize; 4] {
    let per_10k = |n: usize| (nodes.saturating_sub(1) * n).div_ceil(9_999).max(2);
    let (top, main, pop) = (per_10k(9), per_10k(90), per_10k(900));
    [top, main, pop, nodes.saturating_sub(1 + top + main + pop)]
}

/// The smallest tree [`resized`] makes: the four tiers at their least, and edges below them.
pub const NODES_MIN: usize = 20;

/// `scale.toml`'s text with its tree cut (or grown) to `nodes` nodes: each tier's count from
/// [`tiers_for`], and each fault on a point of presence moved to the ones that follow main-2 in
/// the new tree (its primaries: round robin over the mains), in order. Refuses a file that is
/// not the scale scenario's shape (four tiers; its pop faults) or a size it cannot cut to.
pub fn resized(text: &str, nodes: usize) -> Result<String, String> {
    if !(NODES_MIN..=super::NODES_MAX).contains(&nodes) {
        return Err(format!("{nodes} nodes: the scale story runs on {NODES_MIN} to {}", super::NODES_MAX));
    }
    let mut scenario: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let counts = tiers_for(nodes);
    let topology = scenario.get_mut("topology").and_then(toml::Value::as_table_mut).ok_or("no [topology]")?;
    let tiers = topology.get_mut("tiers").and_then(toml::Value::as_array_mut).ok_or("no topology.tiers")?;
    if tiers.len() != counts.len() {
        return Err(format!("{} tiers: the scale story has {}", tiers.len(), counts.len()));
    }
    for (tier, count) in tiers.iter_mut().zip(counts) {
        tier.as_table_mut()
            .ok_or("a tier that is not a table")?
            .insert("count".into(), toml::Value::Integer(count as i64));
    }
    // The points of presence whose primary is main-2, in pop order.
    let [_, mains, pops, _] = counts;
    let mut following = (1..pops).step_by(mains).map(|n| format!("pop-{}", n + 1));
    let faults = scenario.get_mut("fault").and_then(toml::Value::as_array_mut).ok_or("no [[fault]]")?;
    let mut moved = 0;
    let mut kept = Vec::new();
    for fault in std::mem::take(faults) {
        let on_pop = fault.get("target").and_then(toml::Value::as_str).is_some_and(|t| t.starts_with("pop-"));
        if !on_pop {
            kept.push(fault);
            continue;
        }
        // A smaller tree has fewer pops following main-2: their faults go with them.
        if let Some(pop) = following.next() {
            let mut fault = fault;
            fault
                .as_table_mut()
                .ok_or("a fault that is not a table")?
                .insert("target".into(), toml::Value::String(pop));
            kept.push(fault);
            moved += 1;
        }
    }
    if moved == 0 {
        return Err("no fault on a point of presence: not the scale story".into());
    }
    *faults = kept;
    Ok(toml::to_string(&scenario).expect("a TOML table serializes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCALE: &str = include_str!("../../../scenarios/scale.toml");

    /// At 10 000 nodes the story is the shipped scenario's; smaller trees keep its proportions,
    /// load, and fault the nodes that follow main-2.
    #[test]
    fn the_scale_story_resizes_and_loads_at_every_size() {
        assert_eq!(tiers_for(10_000), [9, 90, 900, 9_000]);
        let shipped = super::super::Scenario::parse(SCALE, std::path::Path::new("scale.toml")).expect("ships loadable");
        let full =
            super::super::Scenario::parse(&resized(SCALE, 10_000).unwrap(), std::path::Path::new("s.toml")).unwrap();
        assert_eq!(full.node_names(), shipped.node_names());
        let targets = |s: &super::super::Scenario| -> Vec<String> {
            s.fault.iter().map(|f| f.get_ref().target.get_ref().clone()).collect()
        };
        assert_eq!(targets(&full), targets(&shipped));
        for nodes in [NODES_MIN, 500, 2_000, 5_000] {
            let text = resized(SCALE, nodes).unwrap();
            let scenario = super::super::Scenario::parse(&text, std::path::Path::new("s.toml"))
                .unwrap_or_else(|e| panic!("{nodes} nodes: {e}"));
            assert_eq!(scenario.node_names().len(), nodes);
            let [_, mains, _, _] = tiers_for(nodes);
            assert!(targets(&scenario).iter().any(|t| t == "pop-2"), "{nodes}: {:?}", targets(&scenario));
            assert!(targets(&scenario).contains(&format!("pop-{}", mains + 2)) || tiers_for(nodes)[2] <= mains + 1);
        }
        assert!(resized(SCALE, NODES_MIN - 1).unwrap_err().contains("20 to"));
        assert!(resized(&SCALE.replace("pop-", "edge-"), 500).unwrap_err().contains("not the scale story"));
    }
}
