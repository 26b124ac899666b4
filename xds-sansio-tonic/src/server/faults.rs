//! Between a stream's core and its wire: a pass-through, or (feature `faults`) the
//! conformance toolkit's fault machine ([`xds_sansio_conformance::faults`]), which
//! decides what leaves, when, and whether the stream ends. The rules live there; this
//! only moves responses through it.

use xds_sansio::message::Request;
use xds_sansio::server::EncodedResponse;
use xds_sansio::time::Instant;

use super::ending::Ending;

/// What leaves next.
pub(crate) enum Out {
    /// Write this response.
    Send(EncodedResponse),
    /// End the stream (only a fault plan does).
    #[cfg_attr(not(feature = "faults"), allow(dead_code))]
    End(Ending),
}

/// One stream's faults.
#[derive(Default)]
pub(crate) struct StreamFaults {
    #[cfg(feature = "faults")]
    machine: Option<xds_sansio_conformance::faults::StreamFaults>,
    /// Without a plan: the response the core built, to be written.
    ready: Option<EncodedResponse>,
}

impl StreamFaults {
    /// The faults of stream `id` under the server's plan.
    #[cfg(feature = "faults")]
    pub(crate) fn of(plan: Option<&xds_sansio_conformance::faults::FaultPlan>, id: u64) -> Self {
        StreamFaults {
            machine: plan.map(|p| p.stream(u32::try_from(id).unwrap_or(u32::MAX))),
            ready: None,
        }
    }

    /// The stream opens: `Some` when the plan refuses it.
    pub(crate) fn open(&mut self) -> Option<Ending> {
        #[cfg(feature = "faults")]
        if let Some(machine) = &mut self.machine {
            let refused = machine.open().map(Ending::Injected);
            trace_events(machine);
            return refused;
        }
        None
    }

    /// A request from the client.
    pub(crate) fn request(&mut self, _now: Instant, _request: &Request) {
        #[cfg(feature = "faults")]
        if let Some(machine) = &mut self.machine {
            machine.handle_request(_now, _request);
            trace_events(machine);
        }
    }

    /// A response the core built.
    pub(crate) fn response(&mut self, _now: Instant, response: EncodedResponse) {
        #[cfg(feature = "faults")]
        if let Some(machine) = &mut self.machine {
            machine.handle_response(_now, response);
            trace_events(machine);
            return;
        }
        self.ready = Some(response);
    }

    /// What is due at `now`.
    pub(crate) fn poll(&mut self, _now: Instant) -> Option<Out> {
        #[cfg(feature = "faults")]
        if let Some(machine) = &mut self.machine {
            use xds_sansio_conformance::faults::FaultTransmit;
            return machine.poll_transmit(_now).map(|t| match t {
                FaultTransmit::Send(response) => Out::Send(response),
                FaultTransmit::Close(status) => Out::End(Ending::Injected(status)),
            });
        }
        self.ready.take().map(Out::Send)
    }

    /// Whether something is due now; the clock is read only when a plan is in force (the
    /// stream loop asks on every turn).
    pub(crate) fn is_due(&self, _now: impl FnOnce() -> Instant) -> bool {
        #[cfg(feature = "faults")]
        if let Some(machine) = &self.machine {
            return machine.is_due(_now());
        }
        self.ready.is_some()
    }

    /// When something held becomes due.
    pub(crate) fn timeout(&self) -> Option<Instant> {
        #[cfg(feature = "faults")]
        if let Some(machine) = &self.machine {
            return machine.poll_timeout();
        }
        None
    }
}

/// Each fault that fired, as a tracing event and a metric.
#[cfg(feature = "faults")]
fn trace_events(machine: &mut xds_sansio_conformance::faults::StreamFaults) {
    while let Some(event) = machine.poll_event() {
        tracing::info!(
            fault = event.fault,
            rule = event.rule,
            type_url = %event.type_url,
            nonce = %event.nonce,
            "fault injected"
        );
        super::metrics::fault(event.fault);
    }
}
