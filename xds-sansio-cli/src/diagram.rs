//! The scenario files of `replay` and `conform`, and their diagrams
//! ([`script::diagram`]) on stdout.

use std::path::{Path, PathBuf};

use xds_sansio_conformance::script::{self, Report};

use crate::output::say;

/// The scenario files under `path` (itself, or every `*.xds` below it, sorted).
pub fn collect(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for entry in entries {
            if entry.is_dir() || entry.extension().is_some_and(|e| e == "xds") {
                collect(&entry, out)?;
            }
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

/// Prints a scenario's report as a diagram, ending in `=> PASS` or `=> FAIL`.
pub fn print_diagram(name: &str, report: &Report) {
    // The diagram ends in a newline; `say!` adds one.
    say!("{}", script::diagram(name, report).trim_end_matches('\n'));
}
