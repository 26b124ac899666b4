#![warn(missing_docs)]
// Input from another language must never crash it: no unwrap/expect/indexing/panic.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]
//! The one small API every language binding of xds-sansio wraps (Python, Go, JavaScript,
//! Java): nothing here judges or speaks the protocol; it calls the conformance toolkit
//! (`xds-sansio-conformance`), the core and the adapter (`xds-sansio-tonic`) and shapes
//! their answers as plain values that serialize to JSON.
//!
//! - [`check()`]: the checker over a recorded conversation (the record format).
//! - [`replay()`]: a scenario replayed on the model, with its diagram.
//! - [`ControlPlane`]: the adapter's management server on a loopback port, serving given
//!   resources, recording every stream; its findings are the checker's on that recording.
//! - [`Stepper`]: the model's client or server fed encoded messages one at a time.
//! - [`wire`]: all of the above as JSON text in and out, the form the C ABI, Python and
//!   JavaScript packages share, so each binding is a thin layer.

mod check;
mod control_plane;
mod error;
mod replay;
mod resources;
mod sigpipe;
mod stepper;
pub mod wire;

pub use check::{check, CheckOptions, Finding};
pub use control_plane::{ControlPlane, ControlPlaneOptions};
pub use error::{Error, ErrorKind};
pub use replay::{replay, Line, Report};
pub use resources::Resources;
pub use stepper::{Event, Message, Role, Step, Stepper, StepperOptions};
