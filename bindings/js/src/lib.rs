#![warn(missing_docs)]
//! The native addon of the node package: the bindings' JSON API
//! (`xds_sansio_bindings::wire`) for JavaScript. The typed API is `index.js` /
//! `index.d.ts`; this addon only moves text across. A failed constructor throws an `Error`
//! whose message is the error answer (JSON), which `index.js` turns into `XdsSansioError`.

use napi_derive::napi;
use xds_sansio_bindings::{wire, ControlPlane, Stepper};

/// The checker over a recording: `{"ok": [finding, ...]}` or `{"error": ...}`.
#[napi]
pub fn check(records: String, options: String) -> String {
    wire::check(&records, &options)
}

/// A scenario replayed on the model: `{"ok": report}` or `{"error": ...}`.
#[napi]
pub fn replay(scenario: String, name: String) -> String {
    wire::replay(&scenario, &name)
}

/// A control plane serving on a loopback port.
#[napi]
pub struct NativeControlPlane(ControlPlane);

#[napi]
impl NativeControlPlane {
    /// Calls a method by name (`wire`'s table) with JSON arguments.
    #[napi]
    pub fn call(&mut self, method: String, args: String) -> String {
        wire::control_plane_call(&mut self.0, &method, &args)
    }
}

/// Starts a control plane; throws with the error answer as its message.
#[napi]
pub fn start_control_plane(options: String) -> napi::Result<NativeControlPlane> {
    wire::control_plane(&options)
        .map(NativeControlPlane)
        .map_err(|e| napi::Error::from_reason(wire::answer::<()>(Err(e))))
}

/// The model's client or server, stepped by hand.
#[napi]
pub struct NativeStepper(Stepper);

#[napi]
impl NativeStepper {
    /// Calls a method by name (`wire`'s table) with JSON arguments.
    #[napi]
    pub fn call(&mut self, method: String, args: String) -> String {
        wire::stepper_call(&mut self.0, &method, &args)
    }
}

/// Makes a stepper; throws with the error answer as its message.
#[napi]
pub fn new_stepper(options: String) -> napi::Result<NativeStepper> {
    wire::stepper(&options)
        .map(NativeStepper)
        .map_err(|e| napi::Error::from_reason(wire::answer::<()>(Err(e))))
}
