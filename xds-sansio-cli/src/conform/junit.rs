//! JUnit XML for other projects' CI: one test case per scenario, a failure with the line
//! that failed and why, skipped scenarios as skipped.

use super::Outcome;

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows no other control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// The report of a run: `(file, title, outcome)` per scenario.
pub fn xml(suite: &str, outcomes: &[(String, String, Outcome)]) -> String {
    let mut cases = String::new();
    let (mut failures, mut skipped, mut time) = (0usize, 0usize, 0f64);
    for (file, title, outcome) in outcomes {
        let head = |seconds: f64| {
            format!(
                "  <testcase classname=\"{}\" name=\"{}\" time=\"{seconds:.3}\"",
                escape(file),
                escape(title)
            )
        };
        match outcome {
            Outcome::Ran(report, elapsed) => {
                let seconds = elapsed.as_secs_f64();
                time += seconds;
                if report.passed() {
                    cases.push_str(&head(seconds));
                    cases.push_str("/>\n");
                    continue;
                }
                failures += 1;
                let (message, detail) = match report.lines.iter().find(|l| l.result.is_err()) {
                    Some(line) => (
                        format!(
                            "line {}: {}",
                            line.line,
                            line.result.as_ref().err().cloned().unwrap_or_default()
                        ),
                        format!(
                            "expected: {}\ngot:      {}",
                            line.source,
                            line.actual.as_deref().unwrap_or("(nothing)")
                        ),
                    ),
                    None => (report.trailing.clone().unwrap_or_default(), String::new()),
                };
                cases.push_str(&format!(
                    "{}>\n    <failure message=\"{}\">{}</failure>\n  </testcase>\n",
                    head(seconds),
                    escape(&message),
                    escape(&detail)
                ));
            }
            Outcome::Skipped(why) => {
                skipped += 1;
                cases.push_str(&format!(
                    "{}>\n    <skipped message=\"{}\"/>\n  </testcase>\n",
                    head(0.0),
                    escape(why)
                ));
            }
            Outcome::Broken(error) => {
                failures += 1;
                cases.push_str(&format!(
                    "{}>\n    <error message=\"{}\"/>\n  </testcase>\n",
                    head(0.0),
                    escape(error)
                ));
            }
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\" time=\"{time:.3}\">\n{cases}</testsuite>\n</testsuites>\n",
        escape(suite),
        outcomes.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;?");
        let xml = xml(
            "s",
            &[("f<".into(), "t".into(), Outcome::Skipped("why".into()))],
        );
        assert!(xml.contains("classname=\"f&lt;\""), "{xml}");
        assert!(xml.contains("skipped=\"1\""), "{xml}");
    }
}
