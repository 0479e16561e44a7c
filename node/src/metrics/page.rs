//! Reading a `/metrics` page back: the text exposition format (OpenMetrics, as
//! `prometheus_client` writes it, and Prometheus's older text format, which it extends) parsed
//! into samples.
//!
//! Guarantees:
//! - Strict: a line that is neither empty, a comment (`# …`), nor `<name>[{labels}] <value>
//!   [<timestamp>]` fails the whole page, naming the line and what is wrong with it — a framing
//!   slip in the node's page cannot hide behind a reader that skips what it does not understand.
//! - A sample is found by its series exactly as the page writes it,
//!   `qs_connections_open{listener="http"}`: a label's spelling is part of what a reader checks.
//! - Labels are read as the format quotes them: a `}` or `,` inside a quoted value is part of the
//!   value, and `\"`, `\\` and `\n` are its escapes.

/// One sample: its series and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric's name and labels, as the page writes them.
    pub series: String,
    /// Where the name ends in `series` (its labels follow).
    name_len: usize,
    pub value: f64,
}

impl Sample {
    /// The metric's name, without its labels.
    pub fn name(&self) -> &str {
        &self.series[..self.name_len]
    }
}

/// A metrics page's samples, in the page's order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    samples: Vec<Sample>,
}

/// Why a page could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("the metrics page is not UTF-8")]
    NotUtf8,
    #[error("metrics line {number}: {problem}: {line:?}")]
    Line { number: usize, line: String, problem: LineProblem },
}

/// What is wrong with a line of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    #[error("the name is not [a-zA-Z_:][a-zA-Z0-9_:]*")]
    Name,
    #[error("the labels are not {{name=\"value\",…}}")]
    Labels,
    #[error("no value after the series")]
    NoValue,
    #[error("the value is not a number")]
    Value,
    #[error("the timestamp is not a number")]
    Timestamp,
    #[error("more follows the timestamp")]
    Trailing,
}

/// Why a sample is not the count a reader asked for.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CountError {
    #[error("the metrics page has no {0}")]
    Missing(String),
    #[error("{series} is {value}, not a count")]
    NotACount { series: String, value: f64 },
}

impl Page {
    /// Parses a page; any line that is not a sample, a comment or empty fails it.
    pub fn parse(text: &str) -> Result<Page, PageError> {
        let mut samples = Vec::new();
        for (at, line) in text.lines().enumerate() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let sample =
                sample(line).map_err(|problem| PageError::Line { number: at + 1, line: line.into(), problem })?;
            samples.push(sample);
        }
        Ok(Page { samples })
    }

    /// [`parse`](Self::parse) of a page as it came off the wire.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Page, PageError> {
        Page::parse(std::str::from_utf8(bytes).map_err(|_| PageError::NotUtf8)?)
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// The value of the series written exactly `series` (name and labels), the first if the
    /// page repeats it.
    pub fn value(&self, series: &str) -> Option<f64> {
        self.samples.iter().find(|sample| sample.series == series).map(|sample| sample.value)
    }

    /// The value of `series` as a count: a whole, non-negative number a `u64` holds exactly.
    pub fn count(&self, series: &str) -> Result<u64, CountError> {
        let value = self.value(series).ok_or_else(|| CountError::Missing(series.into()))?;
        // 2^53: the largest range in which every whole f64 is exact.
        let exact = value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= (1u64 << 53) as f64;
        if !exact {
            return Err(CountError::NotACount { series: series.into(), value });
        }
        Ok(value as u64)
    }
}

/// One sample line: `<name>[{labels}] <value>[ <timestamp>]`.
fn sample(line: &str) -> Result<Sample, LineProblem> {
    let name_len = line.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(line.len());
    let name = &line[..name_len];
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == ':') {
        return Err(LineProblem::Name);
    }
    let series_len = match line[name_len..].strip_prefix('{') {
        Some(labels) => name_len + 1 + labels_len(labels)?,
        None => name_len,
    };
    let rest = match line[series_len..].strip_prefix(' ') {
        Some(rest) => rest,
        None if series_len == line.len() => return Err(LineProblem::NoValue),
        // Something other than a space right after the series: part of a name it cannot be.
        None => return Err(if series_len == name_len { LineProblem::Name } else { LineProblem::Labels }),
    };
    let mut fields = rest.split(' ');
    let value = fields.next().filter(|v| !v.is_empty()).ok_or(LineProblem::NoValue)?;
    let value: f64 = value.parse().map_err(|_| LineProblem::Value)?;
    if let Some(timestamp) = fields.next() {
        timestamp.parse::<f64>().map_err(|_| LineProblem::Timestamp)?;
    }
    if fields.next().is_some() {
        return Err(LineProblem::Trailing);
    }
    Ok(Sample { series: line[..series_len].to_string(), name_len, value })
}

/// The length of `labels` (what follows a series' `{`) up to and including its closing `}`.
fn labels_len(labels: &str) -> Result<usize, LineProblem> {
    let bytes = labels.as_bytes();
    let mut at = 0;
    if bytes.first() == Some(&b'}') {
        return Ok(1);
    }
    loop {
        // A label name, `=`, then a quoted value.
        let name_len =
            labels[at..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(labels.len() - at);
        if name_len == 0 || bytes[at].is_ascii_digit() || bytes.get(at + name_len) != Some(&b'=') {
            return Err(LineProblem::Labels);
        }
        at += name_len + 1;
        if bytes.get(at) != Some(&b'"') {
            return Err(LineProblem::Labels);
        }
        at += 1;
        loop {
            match bytes.get(at) {
                None => return Err(LineProblem::Labels),
                Some(b'\\') => match bytes.get(at + 1) {
                    Some(b'"' | b'\\' | b'n') => at += 2,
                    _ => return Err(LineProblem::Labels),
                },
                Some(b'"') => break,
                Some(_) => at += 1,
            }
        }
        at += 1;
        match bytes.get(at) {
            Some(b',') if bytes.get(at + 1) == Some(&b'}') => return Ok(at + 2),
            Some(b',') => at += 1,
            Some(b'}') => return Ok(at + 1),
            _ => return Err(LineProblem::Labels),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodes_own_page_reads_back_whole() {
        let metrics = crate::metrics::Metrics::default();
        metrics.entries_applied.inc_by(7);
        metrics.refusals_received.get_or_create(&crate::metrics::Metrics::label("reason", "NotThatMember")).inc();
        let page = Page::parse(&metrics.render()).expect("the node's page parses");
        assert!(page.samples().len() > 20, "{page:?}");
        assert_eq!(page.count("qs_entries_applied_total"), Ok(7));
        assert_eq!(page.value("qs_refusals_received_total{reason=\"NotThatMember\"}"), Some(1.0));
        let labelled = page.samples().iter().find(|s| s.series.contains("NotThatMember")).expect("the labelled one");
        assert_eq!(labelled.name(), "qs_refusals_received_total");
    }

    #[test]
    fn a_series_is_found_as_written_and_a_count_must_be_one() {
        let page = Page::parse("# TYPE a counter\na_total 3\nb{x=\"1\",y=\"a}b,c\\\"\"} 2.5 1700000000\nc -1\n# EOF\n")
            .expect("parses");
        assert_eq!(page.count("a_total"), Ok(3));
        assert_eq!(page.value("b{x=\"1\",y=\"a}b,c\\\"\"}"), Some(2.5));
        assert_eq!(page.value("b"), None, "a series is its labels too");
        assert_eq!(page.count("missing"), Err(CountError::Missing("missing".into())));
        assert!(matches!(page.count("c"), Err(CountError::NotACount { .. })));
        assert!(matches!(page.count("b{x=\"1\",y=\"a}b,c\\\"\"}"), Err(CountError::NotACount { .. })));
        assert_eq!(Page::parse("n +Inf\nm NaN\nz{} 1\n").map(|p| p.samples().len()), Ok(3));
    }

    #[test]
    fn a_line_that_is_not_a_sample_fails_the_page_naming_it() {
        for (line, problem) in [
            ("9qs 1", LineProblem::Name),
            ("{a=\"b\"} 1", LineProblem::Name),
            ("qs_x_total three", LineProblem::Value),
            ("qs_x_total", LineProblem::NoValue),
            ("qs_x_total ", LineProblem::NoValue),
            ("qs_x{a=b} 1", LineProblem::Labels),
            ("qs_x{a=\"b\" 1", LineProblem::Labels),
            ("qs_x{a=\"b\\q\"} 1", LineProblem::Labels),
            ("qs_x{=\"b\"} 1", LineProblem::Labels),
            ("qs_x 1 soon", LineProblem::Timestamp),
            ("qs_x 1 2 3", LineProblem::Trailing),
            ("qs-x 1", LineProblem::Name),
            ("qs_x{a=\"b\"}1", LineProblem::Labels),
        ] {
            let text = format!("ok 1\n{line}\n");
            let error = Page::parse(&text).expect_err(line);
            assert_eq!(error, PageError::Line { number: 2, line: line.into(), problem }, "{line}");
            assert!(error.to_string().contains("line 2"), "{error}");
        }
        assert_eq!(Page::parse_bytes(b"a \xff\n"), Err(PageError::NotUtf8));
    }
}
