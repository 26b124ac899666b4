//! The two [`Remote`]s of `conform`: a real client that connects to us, a real server we
//! dial. Time is real here: a line that expects a message waits up to the patience, a
//! `quiet` expectation listens for the quiet period, `wait D` sleeps D.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use tonic::Status;
use xds_sansio::server::StoreOp;
use xds_sansio::{Transport, Variant};
use xds_sansio_conformance::script::{ClientCommand, Remote, ServerCommand, Side, Wire};

use super::hook::{self, Hook};
use super::net::{self, Incoming, Outgoing};

/// How long things may take.
#[derive(Clone, Copy)]
pub struct Timing {
    /// The longest wait for a message a line expects (and for a client to reconnect).
    pub patience: Duration,
    /// How long a side must stay silent for `quiet` and at the end of a scenario.
    pub quiet: Duration,
    /// The longest `wait` a scenario may ask for (real time).
    pub max_wait: Duration,
    /// How long messages sent to the real side get before a hook event follows them.
    pub settle: Duration,
}

/// Real bodies for `name:tag` of a type (`--bodies`).
pub type Bodies = BTreeMap<(String, String, String), Bytes>;

fn sleep(rt: &Runtime, duration: Duration) {
    rt.block_on(async move { tokio::time::sleep(duration).await });
}

fn check_wait(duration: Duration, timing: &Timing) -> Result<(), String> {
    if duration > timing.max_wait {
        Err(format!(
            "a wait of {duration:?} in real time is longer than --max-wait {:?}",
            timing.max_wait
        ))
    } else {
        Ok(())
    }
}

/// A real client: it connects to our server and we answer it.
pub struct RealClient<'a> {
    pub rt: &'a Runtime,
    pub streams: &'a mut mpsc::UnboundedReceiver<Incoming>,
    pub current: Option<Incoming>,
    pub hook: &'a mut Hook,
    pub bodies: &'a Bodies,
    pub timing: Timing,
    pub variant: Variant,
    pub transport: Transport,
    /// Why the current stream is gone, when the client ended it.
    pub ended: Option<String>,
}

impl RealClient<'_> {
    /// The stream the client has open, waiting up to `within` for it to open one.
    fn stream(&mut self, within: Duration) -> Result<Option<&mut Incoming>, String> {
        if self.current.is_none() {
            let Ok(Some(incoming)) = net::recv_within(self.rt, self.streams, within) else {
                return Ok(None);
            };
            if incoming.variant != self.variant || incoming.transport != self.transport {
                let _ = incoming.responses.send(Err(Status::unimplemented(
                    "conform: the scenario uses another variant or transport",
                )));
                return Err(format!(
                    "the client opened {} ({:?}, {:?}); the scenario is {:?} over {:?}",
                    incoming.method,
                    incoming.variant,
                    incoming.transport,
                    self.variant,
                    self.transport
                ));
            }
            self.ended = None;
            self.current = Some(incoming);
        }
        Ok(self.current.as_mut())
    }

    /// Ends the stream from our side, if one is open.
    pub fn end_stream(&mut self) {
        if let Some(current) = self.current.take() {
            let _ = current.responses.send(Err(Status::unavailable(
                "conform: the scenario ended the stream",
            )));
        }
    }
}

impl Remote for RealClient<'_> {
    fn side(&self) -> Side {
        Side::Client
    }

    fn send(&mut self, message: Wire) -> Result<(), String> {
        let Wire::Response(response) = message else {
            return Err("a request cannot be sent to a client".into());
        };
        let patience = self.timing.patience;
        let Some(stream) = self.stream(patience)? else {
            return Err("the client has no stream open to send this on".into());
        };
        if stream.responses.send(Ok(response)).is_err() {
            self.current = None;
            return Err("the client's stream is gone".into());
        }
        Ok(())
    }

    fn receive(&mut self, within: Option<Duration>) -> Result<Option<Wire>, String> {
        let within = within.unwrap_or(self.timing.patience);
        let rt = self.rt;
        let Some(stream) = self.stream(within)? else {
            return Ok(None);
        };
        match net::recv_within(rt, &mut stream.requests, within) {
            Ok(Some(request)) => Ok(Some(Wire::Request(request))),
            Ok(None) => Ok(None),
            Err(()) => {
                // The client ended its half: the stream is over for the scenario.
                self.current = None;
                self.ended = Some("the client closed its stream".into());
                Ok(None)
            }
        }
    }

    fn quiet(&mut self) -> Result<Option<Wire>, String> {
        let quiet = self.timing.quiet;
        match &mut self.current {
            Some(stream) => match net::recv_within(self.rt, &mut stream.requests, quiet) {
                Ok(Some(request)) => Ok(Some(Wire::Request(request))),
                _ => Ok(None),
            },
            None => {
                sleep(self.rt, quiet);
                Ok(None)
            }
        }
    }

    fn wait(&mut self, duration: Duration) -> Result<(), String> {
        check_wait(duration, &self.timing)?;
        sleep(self.rt, duration);
        Ok(())
    }

    fn disconnect(&mut self) -> Result<(), String> {
        self.end_stream();
        Ok(())
    }

    fn connect(&mut self) -> Result<(), String> {
        // The client reconnects on its own: its new stream is taken by the next line that
        // needs it, within the patience.
        Ok(())
    }

    fn client_commands(&mut self, commands: &[ClientCommand]) -> Result<(), String> {
        // What was sent before the command reaches the client first: the hook is another
        // path, which could overtake it.
        sleep(self.rt, self.timing.settle);
        commands
            .iter()
            .try_for_each(|c| self.hook.send(&hook::client_command(c)))
    }

    fn publish(&mut self, _: &[StoreOp]) -> Result<(), String> {
        Err("the server's store is the scenario's here".into())
    }

    fn body(&self, type_url: &str, name: &str, tag: &str) -> Option<Bytes> {
        self.bodies
            .get(&(type_url.to_string(), name.to_string(), tag.to_string()))
            .cloned()
    }
}

/// A real server: we dial it and play the client.
pub struct RealServer<'a> {
    pub rt: &'a Runtime,
    pub target: &'a str,
    pub call: Option<Outgoing>,
    pub hook: &'a mut Hook,
    pub bodies: &'a Bodies,
    pub timing: Timing,
    pub variant: Variant,
    pub transport: Transport,
    /// How the server ended the last stream, when it did.
    pub ended: Option<String>,
}

impl RealServer<'_> {
    fn call(&mut self) -> Result<&mut Outgoing, String> {
        if self.call.is_none() {
            self.call = Some(net::dial(
                self.rt,
                self.target,
                self.variant,
                &self.transport,
                self.timing.patience,
            )?);
        }
        self.call
            .as_mut()
            .ok_or_else(|| "no call to the server".to_string())
    }

    fn take_response(&mut self, within: Duration) -> Result<Option<Wire>, String> {
        let rt = self.rt;
        let call = self.call()?;
        match net::recv_within(rt, &mut call.responses, within) {
            Ok(Some(Ok(response))) => Ok(Some(Wire::Response(response))),
            Ok(Some(Err(status))) => {
                // Ending a stream is the server's right (a protocol error, its shutdown):
                // nothing more comes, which the next line that expects something reports.
                self.call = None;
                self.ended = Some(format!("{:?} {}", status.code(), status.message()));
                Ok(None)
            }
            Ok(None) => Ok(None),
            Err(()) => {
                self.call = None;
                Ok(None)
            }
        }
    }
}

impl Remote for RealServer<'_> {
    fn side(&self) -> Side {
        Side::Server
    }

    fn send(&mut self, message: Wire) -> Result<(), String> {
        let Wire::Request(request) = message else {
            return Err("a response cannot be sent to a server".into());
        };
        let call = self.call()?;
        if call.requests.send(request).is_err() {
            self.call = None;
            return Err("the server's stream is gone".into());
        }
        Ok(())
    }

    fn receive(&mut self, within: Option<Duration>) -> Result<Option<Wire>, String> {
        let within = within.unwrap_or(self.timing.patience);
        self.take_response(within)
    }

    fn quiet(&mut self) -> Result<Option<Wire>, String> {
        if self.call.is_none() {
            sleep(self.rt, self.timing.quiet);
            return Ok(None);
        }
        self.take_response(self.timing.quiet)
    }

    fn wait(&mut self, duration: Duration) -> Result<(), String> {
        check_wait(duration, &self.timing)?;
        sleep(self.rt, duration);
        Ok(())
    }

    fn disconnect(&mut self) -> Result<(), String> {
        self.call = None;
        Ok(())
    }

    fn connect(&mut self) -> Result<(), String> {
        self.call = None;
        self.ended = None;
        self.call().map(|_| ())
    }

    fn client_commands(&mut self, _: &[ClientCommand]) -> Result<(), String> {
        Err("the client's commands are the scenario's here".into())
    }

    fn publish(&mut self, ops: &[StoreOp]) -> Result<(), String> {
        self.publish_with_errors(ops, &[])
    }

    fn publish_with_errors(
        &mut self,
        ops: &[StoreOp],
        errors: &[&ServerCommand],
    ) -> Result<(), String> {
        // What was sent before the publication reaches the server first (see the client's
        // commands).
        sleep(self.rt, self.timing.settle);
        self.hook.send(&hook::publish(ops, errors))
    }

    fn body(&self, type_url: &str, name: &str, tag: &str) -> Option<Bytes> {
        self.bodies
            .get(&(type_url.to_string(), name.to_string(), tag.to_string()))
            .cloned()
    }
}
