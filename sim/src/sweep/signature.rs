//! Failure signatures: how a run failed, in a form every run that failed the same way shares,
//! so a sweep of thousands of seeds reports a handful of bugs, not thousands of failures.
//!
//! A signature is the failing checker (or `crash`, `hang`, `nondeterministic`, `error`) and the
//! shape of its first problem: node names become `<node>`, hashes (runs of 8 or more hex
//! digits) `<hash>`, and every number `#` — times, indexes, counts, key numbers —, whitespace
//! collapsed, at most [`SIGNATURE_CHARS_MAX`] characters. Two runs whose first violations differ
//! only in which node, when, which index or which key share one signature.
//!
//! Guarantees: a pure function of its inputs (no clock, no randomness); stable across runs and
//! machines, so a signature written into a known-failures file keeps matching.

/// Longest signature kept: enough for a checker's message, short enough to read in a table.
pub const SIGNATURE_CHARS_MAX: usize = 200;

/// The signature of a checker's first violation (or first pending convergence reason).
pub fn of_violation(checker: &str, message: &str, node_names: &[String]) -> String {
    format!("{checker}: {}", normalize(message, node_names))
}

/// `text` with node names, hashes and numbers taken out (see the module doc).
pub fn normalize(text: &str, node_names: &[String]) -> String {
    let mut names: Vec<&String> = node_names.iter().filter(|n| !n.is_empty()).collect();
    // Longest first, so `edge-10` is not read as `edge-1` followed by `0`.
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let at_word_start = i == 0 || !is_word(chars[i - 1]);
        if at_word_start
            && let Some(name) = names.iter().find(|n| {
                let n: Vec<char> = n.chars().collect();
                chars[i..].starts_with(&n) && chars.get(i + n.len()).is_none_or(|&c| !is_word(c))
            })
        {
            out.push_str("<node>");
            i += name.chars().count();
            continue;
        }
        let c = chars[i];
        if c.is_ascii_hexdigit() && at_word_start {
            let run = chars[i..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
            let ends_word = chars.get(i + run).is_none_or(|&c| !is_word(c));
            if run >= 8 && ends_word && chars[i..i + run].iter().any(char::is_ascii_digit) {
                out.push_str("<hash>");
                i += run;
                continue;
            }
        }
        if c.is_ascii_digit() {
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            out.push('#');
            continue;
        }
        if c.is_whitespace() {
            if !out.ends_with(' ') && !out.is_empty() {
                out.push(' ');
            }
            i += 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    let trimmed = out.trim_end();
    match trimmed.char_indices().nth(SIGNATURE_CHARS_MAX) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_string(),
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '-' || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["root", "mid-1", "mid-2", "edge-1", "edge-10"].iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn runs_that_differ_only_in_node_time_index_and_key_share_a_signature() {
        let a = of_violation("sequence", "edge-1 applied index 41 after 39: a gap of 1 entries", &names());
        let b = of_violation("sequence", "edge-10 applied index 7 after 5: a gap of 1 entries", &names());
        assert_eq!(a, b);
        assert_eq!(a, "sequence: <node> applied index # after #: a gap of # entries");
        let c = of_violation(
            "convergence",
            "root holds a value of cfg0:1234 older than its newest acknowledged write",
            &names(),
        );
        assert_eq!(c, "convergence: <node> holds a value of cfg#:# older than its newest acknowledged write");
    }

    #[test]
    fn hashes_and_decimals_are_taken_out_and_words_are_kept() {
        let s = normalize("chain hash 9f3a61c0b2d4e5f6 at mid-2 differs; lag 12.5 s  over  edge-1x", &names());
        assert_eq!(s, "chain hash <hash> at <node> differs; lag # s over edge-#x");
        // A word that merely starts like a node name, and hex-looking words, stay.
        assert_eq!(normalize("midway deadbeef rooted", &names()), "midway deadbeef rooted");
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "x".repeat(500);
        let s = normalize(&long, &[]);
        assert_eq!(s.chars().count(), SIGNATURE_CHARS_MAX + 1);
        assert!(s.ends_with('…'));
    }
}
