//! Verdicts: a response's way into one type, held while a verdict is pending, checked by
//! its variant, judged (synchronously or by a deferred verdict), then applied; the verdict
//! waited for and the responses held behind it ([`Verdicts`], changed only here).

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use hashbrown::HashMap;

use super::defect::ResponseDefect;
use super::event::{ClientEvent, PendingResource, VerdictTicket};
use super::type_state::{Ctx, TypeState};
use super::update::Update;
use super::variant;
use crate::message::Response;
use crate::text::SharedStr;

/// A response held back while a verdict is pending.
#[derive(Clone, Debug)]
pub(crate) enum Held {
    Response(Response),
    /// Over [`Limits::max_held_responses`](super::Limits): NACKed when its turn comes.
    Overflow {
        nonce: SharedStr,
        version: SharedStr,
    },
}

/// The verdict a type waits for, and the responses held behind it (answered in order).
#[derive(Clone, Debug, Default)]
pub(crate) struct Verdicts {
    pending: Option<(VerdictTicket, Update)>,
    held: VecDeque<Held>,
}

impl Verdicts {
    /// Whether a verdict is awaited.
    pub(crate) fn is_waiting(&self) -> bool {
        self.pending.is_some()
    }

    /// Whether the verdict awaited is `ticket`'s.
    pub(crate) fn waits_on(&self, ticket: VerdictTicket) -> bool {
        self.pending.as_ref().is_some_and(|(t, _)| *t == ticket)
    }
}

impl TypeState {
    /// A response of this type arrived on the stream: handled now, or held behind a pending
    /// verdict (up to [`Limits::max_held_responses`](super::Limits); one more is NACKed when
    /// its turn comes).
    pub(crate) fn receive(&mut self, response: Response, cx: &mut Ctx<'_>) {
        self.turn.received(SharedStr::from(response.nonce()));
        self.control_plane = response
            .control_plane()
            .map(|cp| SharedStr::from(cp.identifier.as_str()));
        if !self.verdicts.is_waiting() {
            self.handle_response(response, cx);
            return;
        }
        if self.verdicts.held.len() >= cx.config.limits.max_held_responses {
            let version = match &response {
                Response::Sotw(r) => SharedStr::from(r.version_info.as_str()),
                Response::Delta(r) => SharedStr::from(r.system_version_info.as_str()),
            };
            self.verdicts.held.push_back(Held::Overflow {
                nonce: self.turn.nonce().clone(),
                version,
            });
        } else {
            self.verdicts.held.push_back(Held::Response(response));
        }
    }

    /// Checks, judges and applies one response.
    fn handle_response(&mut self, response: Response, cx: &mut Ctx<'_>) {
        let update = match variant::parse(response, self, cx) {
            Ok(update) => update,
            Err(reject) => {
                self.reject(reject.nonce, reject.version, *reject.defect, cx);
                return;
            }
        };
        let url = self.url.clone();
        if cx.judges.deferred.contains(url.as_str())
            && update.resources.iter().any(|r| r.body.is_some())
        {
            let ticket = VerdictTicket(cx.judges.next_ticket);
            cx.judges.next_ticket = cx.judges.next_ticket.wrapping_add(1);
            cx.events.push_back(ClientEvent::ValidationNeeded {
                ticket,
                type_url: url,
                version: update.version.clone(),
                resources: pending_resources(&update),
            });
            self.verdicts.pending = Some((ticket, update));
            return;
        }
        let rejections: Vec<(SharedStr, String)> = match cx.judges.validators.get(url.as_str()) {
            Some(v) => update
                .resources
                .iter()
                .filter_map(|r| {
                    let body = r.body.as_ref()?;
                    let version = r.version.as_ref().unwrap_or(&update.version);
                    v.validate(&r.name, version, body)
                        .err()
                        .map(|e| (r.name.clone(), e))
                })
                .collect(),
            None => Vec::new(),
        };
        self.apply(update, rejections, cx);
    }

    /// The application's verdict on the pending response: `rejections` lists `(name,
    /// reason)`. Applies the response to what is still wanted, then handles the responses
    /// held behind it, in order, until one waits for a verdict again.
    pub(crate) fn verdict(&mut self, rejections: &[(&str, &str)], cx: &mut Ctx<'_>) {
        let Some((_, mut update)) = self.verdicts.pending.take() else {
            return;
        };
        // Interest may have changed while the verdict was pending.
        update.resources.retain(|r| self.wants(&r.name, &r.aliases));
        let by_name: HashMap<&str, &str> = rejections.iter().copied().collect();
        let rejected: Vec<(SharedStr, String)> = update
            .resources
            .iter()
            .filter(|r| r.body.is_some())
            .filter_map(|r| {
                by_name
                    .get(r.name.as_str())
                    .map(|e| (r.name.clone(), String::from(*e)))
            })
            .collect();
        self.apply(update, rejected, cx);
        while !self.verdicts.is_waiting() {
            match self.verdicts.held.pop_front() {
                None => break,
                Some(Held::Response(r)) => self.handle_response(r, cx),
                Some(Held::Overflow { nonce, version }) => {
                    self.reject(nonce, version, ResponseDefect::TooManyHeldResponses, cx)
                }
            }
        }
    }
}

/// What a deferred verdict is asked about: every resource of the update with a body.
fn pending_resources(update: &Update) -> Vec<PendingResource> {
    update
        .resources
        .iter()
        .filter_map(|r| {
            r.body.as_ref().map(|b| PendingResource {
                name: r.name.clone(),
                version: r.version.clone().unwrap_or_else(|| update.version.clone()),
                body: b.clone(),
            })
        })
        .collect()
}
