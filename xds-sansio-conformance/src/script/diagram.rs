//! The two-column diagram of a replayed scenario: the client on the left, the server on
//! the right, a mark per line (`✓`, `✗`, `–` for a line a real implementation does not
//! show), and what differed under a failing line. `xds-sansio replay` and `conform` print
//! it; the language bindings hand it to their tests.

use alloc::format;
use alloc::string::String;

use super::{LineKind, LineReport, Report};

const WIDTH: usize = 78;

fn arrow(text: &str, rightwards: bool) -> String {
    let body = format!(" {text} ");
    let len = body.chars().count();
    let dashes = WIDTH.saturating_sub(len + 4).max(2);
    let (left, right) = (dashes / 2, dashes - dashes / 2);
    if rightwards {
        format!("{}{}{}▶", "─".repeat(left), body, "─".repeat(right + 1))
    } else {
        format!("◀{}{}{}", "─".repeat(left + 1), body, "─".repeat(right))
    }
}

fn draw(line: &LineReport) -> String {
    let text = match line.kind {
        LineKind::Request => arrow(line.actual.as_deref().unwrap_or(&line.source), true),
        LineKind::Response => arrow(line.actual.as_deref().unwrap_or(&line.source), false),
        LineKind::Client => line.source.clone(),
        LineKind::Server => format!("{:>width$}", line.source, width = WIDTH - 1),
        LineKind::Both => format!(
            "{:^width$}",
            format!("·· {} ··", line.source),
            width = WIDTH - 1
        ),
    };
    let mark = match (&line.result, &line.note) {
        (Err(_), _) => "✗",
        (Ok(()), Some(_)) => "–",
        (Ok(()), None) => "✓",
    };
    let mut out = format!("{:>4} {mark} {text}", line.line);
    if let Some(note) = &line.note {
        out.push_str(&format!("\n       {note}"));
    }
    if let Err(why) = &line.result {
        out.push_str(&format!("\n       expected: {}", line.source));
        if let Some(actual) = &line.actual {
            out.push_str(&format!("\n       got:      {actual}"));
        }
        out.push_str(&format!("\n       {why}"));
    }
    out
}

/// A scenario's report as a diagram under its title and `name` (a file name, say),
/// ending in `=> PASS` or `=> FAIL`; every line ends in a newline.
pub fn diagram(name: &str, report: &Report) -> String {
    let mut out = format!("\n{}  ({name})\n", report.title);
    out.push_str(&format!(
        "     client{:>width$}\n",
        "server",
        width = WIDTH - 3
    ));
    for line in &report.lines {
        out.push_str(&draw(line));
        out.push('\n');
    }
    if let Some(trailing) = &report.trailing {
        out.push_str(&format!("   ✗ {trailing}\n"));
    }
    let verdict = if report.passed() { "PASS" } else { "FAIL" };
    out.push_str(&format!("  => {verdict}\n"));
    out
}
