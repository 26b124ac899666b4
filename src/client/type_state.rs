//! The state of one type URL, split by what the state is, each part changed only by its
//! owner: what is wanted ([`Subscription`]), what is held ([`TypeCache`]), this stream's
//! turn ([`StreamTurn`]), the verdict waited for ([`Verdicts`]) and readiness
//! ([`Readiness`]). [`TypeState`] routes an input through them: a response is received,
//! checked by its variant, judged, applied to the cache, and answered.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use hashbrown::HashMap;

use super::cache::{Around, Fired, TypeCache};
use super::context::Ctx;
use super::defect::ResponseDefect;
use super::event::{ClientEvent, PendingResource, VerdictTicket};
use super::incoming::{is_collection, Update};
use super::readiness::Readiness;
use super::status::ResourceState;
use super::subscription::Subscription;
use super::timers::TimerKind;
use super::turn::{Reply, StreamTurn};
use super::type_view::{TypeParts, TypeView};
use super::validation::{nack_status, rejection_message};
use super::variant;
use super::verdicts::{Held, Verdicts};
use crate::message::{Request, Response, Variant};
use crate::pb::discovery::DiscoveryResponse;
use crate::pb::envoy::config::core::v3::Node;
use crate::text::SharedStr;
use crate::time::Instant;
use crate::types::TypeInfo;

#[derive(Clone, Debug)]
pub(crate) struct TypeState {
    pub(crate) url: SharedStr,
    pub(crate) info: TypeInfo,
    pub(crate) sub: Subscription,
    pub(crate) cache: TypeCache,
    pub(crate) turn: StreamTurn,
    verdicts: Verdicts,
    readiness: Readiness,
}

impl TypeState {
    pub(crate) fn new(url: SharedStr) -> TypeState {
        let info = TypeInfo::of(&url);
        // Catalog types get a static URL: cloning it into every event costs nothing.
        let url = match info.known {
            Some((t, v)) => SharedStr::from_static(t.type_url_for(v)),
            None => url,
        };
        TypeState {
            url,
            info,
            sub: Subscription::default(),
            cache: TypeCache::default(),
            turn: StreamTurn::default(),
            verdicts: Verdicts::default(),
            readiness: Readiness::default(),
        }
    }

    /// The parts the variant rules read.
    fn view(&self) -> TypeView<'_> {
        TypeView {
            url: &self.url,
            info: self.info,
            sub: &self.sub,
            cache: &self.cache,
            turn: &self.turn,
            waits_for_verdict: self.verdicts.is_waiting(),
        }
    }

    /// The parts building a request changes.
    fn parts(&mut self) -> TypeParts<'_> {
        TypeParts {
            url: &self.url,
            info: self.info,
            sub: &mut self.sub,
            cache: &self.cache,
            turn: &mut self.turn,
            waits_for_verdict: self.verdicts.is_waiting(),
        }
    }

    /// Whether the verdict awaited is `ticket`'s.
    pub(crate) fn waits_on(&self, ticket: VerdictTicket) -> bool {
        self.verdicts.waits_on(ticket)
    }

    /// Forgets the stream (the client keeps cache, versions and subscriptions).
    pub(crate) fn reset_stream(&mut self) {
        self.turn = StreamTurn::default();
        self.verdicts = Verdicts::default();
        self.sub.reset_stream();
        self.cache.reset_stream();
    }

    /// The parts a change of the cache reads or tells, beside the cache itself.
    fn split<'a, 'c>(&'a mut self, cx: &'a mut Ctx<'c>) -> (&'a mut TypeCache, Around<'a, 'c>) {
        let TypeState {
            url,
            sub,
            cache,
            readiness,
            ..
        } = self;
        let around = Around {
            url,
            sub,
            readiness,
            cx,
        };
        (cache, around)
    }

    // ---------------------------------------------------------------- readiness

    fn arm_ready(&mut self, name: &SharedStr) {
        let cache = &self.cache;
        self.readiness.arm(name, || {
            cache
                .get(name)
                .is_none_or(|r| !r.has_body() && r.state == ResourceState::Requested)
        });
    }

    fn check_ready(&mut self, events: &mut VecDeque<ClientEvent>) {
        self.readiness.check(&self.url, events);
    }

    // ---------------------------------------------------------------- interest

    /// Adds `names` to what is wanted (`*` for the wildcard; `legacy` when it came from an
    /// empty subscribe).
    pub(crate) fn subscribe(&mut self, names: Vec<SharedStr>, legacy: bool) {
        for name in names {
            if self.sub.add(name.clone(), legacy) {
                if !is_collection(&name) {
                    self.cache.note_requested(&name);
                }
                self.arm_ready(&name);
            }
        }
    }

    /// Removes `names` from what is wanted. Resources no longer wanted leave the cache
    /// ([`RemovalReason::Unsubscribed`](super::RemovalReason::Unsubscribed)); so do
    /// statuses only the wildcard kept.
    pub(crate) fn unsubscribe<N: AsRef<str>>(&mut self, names: &[N], cx: &mut Ctx<'_>) {
        for name in names {
            let name = name.as_ref();
            if !self.sub.remove(name) {
                continue;
            }
            let name = SharedStr::from(name);
            self.readiness.unwanted(&name);
            let (cache, mut around) = self.split(cx);
            if is_collection(&name) {
                cache.drop_unwanted(&mut around);
            } else {
                cache.drop_unsubscribed(&name, &mut around);
            }
        }
        self.check_ready(cx.events);
    }

    // ---------------------------------------------------------------- requests

    /// Whether this type owes a request.
    pub(crate) fn has_due(&self, cx: &Ctx<'_>) -> bool {
        self.owes_request(cx.variant())
    }

    /// Whether this type owes a request of `variant`.
    pub(crate) fn owes_request(&self, variant: Variant) -> bool {
        variant::due(variant, self.view()).is_some()
    }

    /// The next request of this type, if it owes one, counted as sent at `cx.now`: the
    /// does-not-exist timers of the names it asks for start. Also says whether it owes
    /// another one after it.
    pub(crate) fn poll_request(
        &mut self,
        node: Option<Node>,
        cx: &mut Ctx<'_>,
    ) -> Option<(Request, bool)> {
        let (request, names) = variant::build(cx.variant(), self.parts(), node)?;
        self.cache
            .start_dne_timers(&names, cx.config.does_not_exist_timeout, cx);
        Some((request, self.has_due(cx)))
    }

    // ---------------------------------------------------------------- responses

    /// A response of this type arrived on the stream: handled now, or held behind a pending
    /// verdict (up to [`Limits::max_held_responses`](super::Limits); one more is NACKed when
    /// its turn comes).
    pub(crate) fn receive(&mut self, response: Response, cx: &mut Ctx<'_>) {
        self.turn.received(SharedStr::from(response.nonce()));
        self.cache.note_control_plane(
            response
                .control_plane()
                .map(|cp| SharedStr::from(cp.identifier.as_str())),
        );
        if !self.verdicts.is_waiting() {
            self.handle_response(response, cx);
            return;
        }
        let nonce = self.turn.nonce().clone();
        self.verdicts
            .hold(response, nonce, cx.config.limits.max_held_responses);
    }

    /// Checks, judges and applies one response.
    fn handle_response(&mut self, response: Response, cx: &mut Ctx<'_>) {
        if let Response::Sotw(resp) = response {
            if self.is_unchanged_resend(&resp, cx) {
                self.answer_unchanged(resp, cx);
                return;
            }
            return self.handle_checked(Response::Sotw(resp), cx);
        }
        self.handle_checked(response, cx);
    }

    /// Checks, judges and applies one response, the full way.
    fn handle_checked(&mut self, response: Response, cx: &mut Ctx<'_>) {
        let update = match variant::parse(response, self.view(), cx) {
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
            self.verdicts.wait(ticket, update);
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
        let Some(mut update) = self.verdicts.take_pending() else {
            return;
        };
        // Interest may have changed while the verdict was pending.
        update
            .resources
            .retain(|r| self.sub.wants(&r.name, r.aliases()));
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
            match self.verdicts.next_held() {
                None => break,
                Some(Held::Response(r)) => self.handle_response(r, cx),
                Some(Held::Overflow { nonce, version }) => {
                    self.reject(nonce, version, ResponseDefect::TooManyHeldResponses, cx)
                }
            }
        }
    }

    /// Applies a checked response with the application's rejections (name, reason) to the
    /// cache, queues the reply (ACK, or NACK naming the rejections), and emits the events.
    fn apply(&mut self, update: Update, rejections: Vec<(SharedStr, String)>, cx: &mut Ctx<'_>) {
        let (cache, mut around) = self.split(cx);
        let (nonce, version) = cache.apply(update, &rejections, &mut around);
        self.answer(nonce, version, rejections, cx);
    }

    /// Whether a SotW response of a wildcard type brings again, in order, exactly the
    /// bodies held (see `cache/unchanged.rs`). Never for a type with a validator or
    /// deferred validation: the application judges every response.
    fn is_unchanged_resend(&self, resp: &DiscoveryResponse, cx: &Ctx<'_>) -> bool {
        let url = self.url.as_str();
        self.sub.is_wildcard()
            && resp.resource_errors.is_empty()
            && !cx.judges.validators.contains_key(url)
            && !cx.judges.deferred.contains(url)
            && self.cache.holds_in_order(&resp.resources, url)
    }

    /// Applies such a response without reading a name, and answers it as the full path
    /// would.
    fn answer_unchanged(&mut self, resp: DiscoveryResponse, cx: &mut Ctx<'_>) {
        let version = SharedStr::from(resp.version_info);
        let nonce = SharedStr::from(resp.nonce);
        let (cache, mut around) = self.split(cx);
        cache.apply_unchanged(&version, &mut around);
        self.answer(nonce, version, Vec::new(), cx);
    }

    /// Tells what an applied response came to (ACK or NACK) and answers it.
    fn answer(
        &mut self,
        nonce: SharedStr,
        version: SharedStr,
        rejections: Vec<(SharedStr, String)>,
        cx: &mut Ctx<'_>,
    ) {
        if rejections.is_empty() {
            self.cache.accept_version(cx.variant(), version.clone());
            cx.events.push_back(ClientEvent::Acked {
                type_url: self.url.clone(),
                version,
                nonce: nonce.clone(),
            });
            let reply = Reply {
                nonce,
                version: self.cache.sotw_version().clone(),
                error: None,
            };
            self.turn.push_reply(reply, cx.variant());
        } else {
            let message = rejection_message(&rejections);
            let status = nack_status(&message);
            cx.events.push_back(ClientEvent::Nacked {
                type_url: self.url.clone(),
                version,
                nonce: nonce.clone(),
                error: status.message.clone(),
                rejected: rejections.into_iter().map(|(n, _)| n).collect(),
                defect: None,
            });
            let reply = Reply {
                nonce,
                version: self.cache.sotw_version().clone(),
                error: Some(status),
            };
            self.turn.push_reply(reply, cx.variant());
        }
        self.readiness.response_answered();
        self.check_ready(cx.events);
    }

    /// A response rejected whole for a protocol reason: NACK, no state change.
    fn reject(
        &mut self,
        nonce: SharedStr,
        version: SharedStr,
        defect: ResponseDefect,
        cx: &mut Ctx<'_>,
    ) {
        let status = nack_status(&alloc::format!("{defect}"));
        cx.events.push_back(ClientEvent::Nacked {
            type_url: self.url.clone(),
            version,
            nonce: nonce.clone(),
            error: status.message.clone(),
            rejected: Vec::new(),
            defect: Some(defect),
        });
        let reply = Reply {
            nonce,
            version: self.cache.sotw_version().clone(),
            error: Some(status),
        };
        self.turn.push_reply(reply, cx.variant());
        self.readiness.response_answered();
        self.check_ready(cx.events);
    }

    // ---------------------------------------------------------------- timers

    /// A timer of this type fired.
    pub(crate) fn fire(
        &mut self,
        at: Instant,
        kind: TimerKind,
        name: &SharedStr,
        cx: &mut Ctx<'_>,
    ) {
        let (cache, mut around) = self.split(cx);
        if let Fired::Expired = cache.fire(at, kind, name, &mut around) {
            match cx.variant() {
                // By default nothing is sent: the version stays the last accepted one.
                Variant::Sotw if cx.config.sotw_refetch_on_ttl_expiry => {
                    self.cache.forget_sotw_version();
                    self.turn.resend_if_sent();
                }
                Variant::Sotw => {}
                Variant::Delta => {
                    if self.turn.sent_first() {
                        self.sub.resubscribe(name);
                    }
                }
            }
        }
        self.check_ready(cx.events);
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
