//! A metrics recorder for tests: counts by metric name (labels summed) and by labelled
//! series, installed once per test process.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A metrics recorder that counts, by metric name (labels summed).
#[derive(Default)]
pub struct Counts(Mutex<HashMap<String, Arc<AtomicU64>>>);

struct Observations(Arc<AtomicU64>);

impl metrics::HistogramFn for Observations {
    fn record(&self, _: f64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Counts {
    fn cell(&self, key: &metrics::Key) -> Arc<AtomicU64> {
        let mut cells = self.0.lock().unwrap();
        cells.entry(key.name().to_string()).or_default().clone()
    }
    /// The cell of one labelled series: `name{label=value,...}`, labels as given.
    fn labelled(&self, key: &metrics::Key) -> Arc<AtomicU64> {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let series = format!("{}{{{}}}", key.name(), labels.join(","));
        self.0.lock().unwrap().entry(series).or_default().clone()
    }
    /// A metric's total (`name`) or one labelled series (`name{label=value,...}`).
    pub fn get(&self, name: &str) -> u64 {
        let cells = self.0.lock().unwrap();
        cells.get(name).map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

/// A counter counted under its name (labels summed) and under its labelled series.
struct Both(Arc<AtomicU64>, Arc<AtomicU64>);

impl metrics::CounterFn for Both {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
        self.1.fetch_add(value, Ordering::Relaxed);
    }
    fn absolute(&self, value: u64) {
        self.0.fetch_max(value, Ordering::Relaxed);
        self.1.fetch_max(value, Ordering::Relaxed);
    }
}

impl metrics::Recorder for &'static Counts {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(Arc::new(Both(self.cell(key), self.labelled(key))))
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(self.cell(key))
    }
    fn register_histogram(
        &self,
        key: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::from_arc(Arc::new(Observations(self.cell(key))))
    }
}

/// The process's recorder (installed on first use).
pub fn counts() -> &'static Counts {
    static COUNTS: OnceLock<&'static Counts> = OnceLock::new();
    COUNTS.get_or_init(|| {
        let counts: &'static Counts = Box::leak(Box::default());
        let _ = metrics::set_global_recorder(counts);
        counts
    })
}
