//! HTML building blocks shared by the run, sweep and sizing pages: the page shell with its inline
//! style sheet, tables, badges, URL path segments and number formatting.
//!
//! Guarantees:
//! - HTML is built with maud, which escapes every interpolated value — text and attribute values
//!   alike — so a string from a trace or a summary can never become markup. Nothing goes in
//!   unescaped but markup this crate made itself: plotters' SVG ([`chart::Svg`](crate::chart::Svg))
//!   and this module's style sheet, each `PreEscaped` with the reason beside it.
//! - Link targets are percent-encoded by [`url_segment`] before maud escapes them for the
//!   attribute: maud escapes HTML, not URLs.
//! - The page loads nothing from anywhere — no scripts, no external style sheets, no fonts, no
//!   images — so it opens from disk with no network.

use maud::{DOCTYPE, Markup, PreEscaped, html};

/// Everything but RFC 3986's unreserved characters is encoded in a path segment.
const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// Percent-encodes one path segment of a relative link (scenario names come from file names).
pub fn url_segment(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string()
}

/// Simulated milliseconds as seconds with millisecond precision: `60.019 s`.
pub fn secs(ms: u64) -> String {
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}

/// A duration in the unit that reads best: `850 ms`, `12.5 s`, `3.2 min`, `5.1 h`, `52.7 years`.
pub fn duration(ms: u64) -> String {
    let s = ms as f64 / 1000.0;
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..120_000 => format!("{s:.1} s"),
        120_000..7_200_000 => format!("{:.1} min", s / 60.0),
        7_200_000..172_800_000 => format!("{:.1} h", s / 3600.0),
        172_800_000..63_072_000_000 => format!("{:.1} days", s / 86_400.0),
        _ => format!("{:.1} years", s / 31_557_600.0),
    }
}

/// Bytes in binary units: `512 B`, `3.4 KiB`, `12.0 MiB`.
pub fn bytes(n: u64) -> String {
    bytesize::ByteSize(n).display().iec().to_string()
}

/// A pass/fail badge: colour and a word, so it reads without colour too; `id` names it for tests
/// and links.
pub fn badge(ok: bool, text: &str, id: Option<&str>) -> Markup {
    html! { span.badge.(if ok { "ok" } else { "bad" }) id=[id] { (text) } }
}

/// A table of class `class`: one header row of `head` labels, then `rows`, one cell each.
pub fn table(class: &str, head: &[&str], rows: &[Vec<Markup>]) -> Markup {
    html! {
        table.(class) {
            thead { tr { @for label in head { th { (label) } } } }
            tbody {
                @for row in rows {
                    tr { @for cell in row { td { (cell) } } }
                }
            }
        }
    }
}

/// The whole page: a document titled `title` around `body`, with the style sheet inline.
pub fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE) "\n"
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                // PreEscaped: STYLE is this file's own constant CSS, not data; a style element's
                // text is raw (entities are not decoded), so escaping would corrupt it. It holds no
                // `<` (a unit test checks), so it cannot close the element early.
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
        "\n"
    }
    .into_string()
}

// System font stacks only: a report must render offline, so no web fonts.
const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:0 auto;\
max-width:1180px;padding:16px 24px 48px;color:#1d1d1f;background:#fff;line-height:1.4}\
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin:1.6em 0 .4em;border-bottom:1px solid #ddd}\
h3{font-size:1.05em;margin:1em 0 .3em}\
.desc{color:#444;max-width:60em}\
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:.6em 0}\
dl.facts dt{color:#666}dl.facts dd{margin:0}\
pre.reproduce{background:#f4f4f6;border:1px solid #ccc;border-radius:4px;padding:8px 12px;\
overflow-x:auto;user-select:all;-webkit-user-select:all}\
code{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:.92em}\
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:.9em}\
.badge.ok{background:#d8f3dc;color:#1b5e20}.badge.bad{background:#fde2e1;color:#a4161a}\
.first-violation{background:#fff4f4;border-left:4px solid #c62828;padding:6px 12px;margin:.6em 0}\
table{border-collapse:collapse;margin:.4em 0;font-size:.92em}\
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f4f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}\
tr.fail td{background:#fff4f4}\
figure.chart{margin:.8em 0 1.2em}figure.chart figcaption{font-weight:600;margin-bottom:2px}\
figure.chart svg{max-width:100%;height:auto;display:block}\
ul.legend{list-style:none;padding:0;margin:2px 0 0 80px;display:flex;flex-wrap:wrap;gap:2px 14px;font-size:.85em}\
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:4px;vertical-align:-1px}\
.note{color:#666;font-size:.88em;margin:2px 0}\
.grid{display:flex;flex-wrap:wrap;gap:3px}\
.grid a.cell{display:inline-block;min-width:3.2em;padding:2px 4px;border-radius:3px;text-align:center;\
font-size:.85em;text-decoration:none;color:#111}\
.grid a.cell.ok{background:#b7e4c7}.grid a.cell.bad{background:#f4a3a3;font-weight:600}\
.grid a.cell.missing{outline:2px dashed #c62828}\
.small-charts{display:flex;flex-wrap:wrap;gap:12px}\
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_percent_encoded_and_markup_is_escaped() {
        assert_eq!(url_segment("bug gc/skip?"), "bug%20gc%2Fskip%3F");
        let hostile = "<b a=\"x\">&</b>";
        assert_eq!(
            badge(false, hostile, Some("o\"k")).into_string(),
            "<span class=\"badge bad\" id=\"o&quot;k\">&lt;b a=&quot;x&quot;&gt;&amp;&lt;/b&gt;</span>"
        );
        let t = table("t", &[hostile], &[vec![html! { (hostile) }, html! { b { "bold" } }]]).into_string();
        assert_eq!(
            t,
            "<table class=\"t\"><thead><tr><th>&lt;b a=&quot;x&quot;&gt;&amp;&lt;/b&gt;</th></tr></thead><tbody>\
             <tr><td>&lt;b a=&quot;x&quot;&gt;&amp;&lt;/b&gt;</td><td><b>bold</b></td></tr></tbody></table>"
        );
        let p = page(hostile, html! { p { "body" } });
        assert!(p.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"), "{p}");
        assert!(p.contains("<title>&lt;b a=&quot;x&quot;&gt;&amp;&lt;/b&gt;</title>"), "{p}");
        assert!(p.ends_with("<body><p>body</p></body></html>\n"), "{p}");
    }

    #[test]
    fn the_style_sheet_cannot_close_its_element() {
        // It goes in unescaped (see `page`): no `<` means no `</style>` and no other tag.
        assert!(!STYLE.contains('<'));
        assert!(page("t", html! {}).contains(&format!("<style>{STYLE}</style>")));
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(secs(60_019), "60.019 s");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(20_494), "20.5 s");
        assert_eq!(duration(1_665_467_002_000), "52.8 years");
        assert_eq!(bytes(1000), "1000 B");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MiB");
    }
}
