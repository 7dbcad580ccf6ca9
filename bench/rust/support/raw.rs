//! Machine-readable figures for the `bench/*` scripts: one `wqs-raw` line per figure.
//!
//! With `WQS_BENCH_MACHINE` set, [`record`] prints
//! `wqs-raw<TAB>metric<TAB>variant<TAB>value` on stdout, next to the
//! markdown table the bench prints for people. The script adds the program
//! and the run number and hands the lines to the report generator
//! (`bench/report`), so no figure in docs/benchmarks.md is copied by hand.

#![allow(dead_code)] // Each bench uses the part of this helper it needs.

/// Prints one figure for the scripts, if they asked for them.
pub fn record(metric: &str, variant: &str, value: f64) {
    if std::env::var_os("WQS_BENCH_MACHINE").is_some() {
        println!("wqs-raw\t{metric}\t{variant}\t{value}");
    }
}

/// A count as the report writes it: 1000000 as "1,000,000".
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Milliseconds as a float, the unit the report uses for latencies.
pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
