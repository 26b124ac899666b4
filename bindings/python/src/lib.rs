#![warn(missing_docs)]
//! `xds_sansio._native`: the bindings' JSON API (`xds_sansio_bindings::wire`) for Python.
//! The typed Python API is `python/xds_sansio/__init__.py`; this module only moves text
//! across and lets other Python threads run while the native side works.

use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use xds_sansio_bindings::{wire, ControlPlane as Plane, Stepper as Machine};

/// The checker over a recording: `{"ok": [finding, ...]}` or `{"error": ...}`.
#[pyfunction]
fn check(py: Python<'_>, records: &str, options: &str) -> String {
    py.detach(|| wire::check(records, options))
}

/// A scenario replayed on the model: `{"ok": report}` or `{"error": ...}`.
#[pyfunction]
fn replay(py: Python<'_>, scenario: &str, name: &str) -> String {
    py.detach(|| wire::replay(scenario, name))
}

/// A control plane serving on a loopback port. Calls from several Python threads (a test
/// polling the recording while another publishes) take turns.
#[pyclass(module = "xds_sansio._native")]
struct ControlPlane(Mutex<Plane>);

#[pymethods]
impl ControlPlane {
    /// Calls a method by name (`wire`'s table) with JSON arguments.
    fn call(&self, py: Python<'_>, method: &str, args: &str) -> String {
        py.detach(|| {
            let mut plane = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            wire::control_plane_call(&mut plane, method, args)
        })
    }
}

/// Starts a control plane: `(plane, "")`, or `(None, error answer)`.
#[pyfunction]
fn start_control_plane(py: Python<'_>, options: &str) -> (Option<ControlPlane>, String) {
    match py.detach(|| wire::control_plane(options)) {
        Ok(plane) => (Some(ControlPlane(Mutex::new(plane))), String::new()),
        Err(e) => (None, wire::answer::<()>(Err(e))),
    }
}

/// The model's client or server, stepped by hand.
#[pyclass(module = "xds_sansio._native", unsendable)]
struct Stepper(Machine);

#[pymethods]
impl Stepper {
    /// Calls a method by name (`wire`'s table) with JSON arguments.
    fn call(&mut self, method: &str, args: &str) -> String {
        wire::stepper_call(&mut self.0, method, args)
    }
}

/// Makes a stepper: `(stepper, "")`, or `(None, error answer)`.
#[pyfunction]
fn new_stepper(options: &str) -> (Option<Stepper>, String) {
    match wire::stepper(options) {
        Ok(stepper) => (Some(Stepper(stepper)), String::new()),
        Err(e) => (None, wire::answer::<()>(Err(e))),
    }
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(start_control_plane, m)?)?;
    m.add_function(wrap_pyfunction!(new_stepper, m)?)?;
    m.add_class::<ControlPlane>()?;
    m.add_class::<Stepper>()?;
    Ok(())
}
