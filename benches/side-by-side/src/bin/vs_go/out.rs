//! The machine-readable lines go.sh reads (the same as the Go side's).

use crate::common::Timing;

pub fn results(figure: &str, results: &[Timing]) {
    for (label, median, q1, q3) in results {
        println!("RESULT\t{figure}\t{label}\t{median:.9}\t{q1:.9}\t{q3:.9}");
    }
}

pub fn memory(figure: &str, label: &str, bytes_per_unit: f64, note: &str) {
    println!("MEMORY\t{figure}\t{label}\t{bytes_per_unit:.1}\t{note}");
}
