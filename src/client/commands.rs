//! What the application asks of the client: subscriptions, validators, verdicts.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use hashbrown::HashMap;

use super::cache::Record;
use super::subscription::WILDCARD;
use super::timers::TimerKind;
use super::type_state::Held;
use super::{Client, ClientError, RemovalReason, SharedStr, Validator, VerdictTicket};
use crate::resource::NameExtractor;
use crate::types::TypeInfo;

impl Client {
    // ------------------------------------------------------------------ commands

    /// Subscribes to `names` of `type_url`, adding to what is already subscribed. `"*"` is
    /// the explicit wildcard; no names at all is the legacy wildcard of LDS/CDS (an error
    /// for other types). The change is sent with the next request of the type. To make a
    /// list the whole subscription, see [`Client::set_subscription`].
    ///
    /// ```
    /// # use xds_sansio::{Client, ClientConfig, ClientError, Transport, Variant};
    /// # use xds_sansio::client::WILDCARD;
    /// # use xds_sansio::pb::envoy::config::core::v3::Node;
    /// # use xds_sansio::types::{CLUSTER, ENDPOINT};
    /// let mut client = Client::new(ClientConfig::new(Variant::Sotw, Transport::Aggregated, Node::default()));
    /// client.subscribe(CLUSTER.type_url, &[])?;            // every Cluster (legacy wildcard)
    /// client.subscribe(ENDPOINT.type_url, &[WILDCARD])?;   // every endpoint set: say "*"
    /// assert_eq!(client.subscribe(ENDPOINT.type_url, &[]), Err(ClientError::EmptyName));
    /// client.subscribe(ENDPOINT.type_url, &["c1", "c2"])?; // and these by name, too
    /// # Ok::<(), ClientError>(())
    /// ```
    pub fn subscribe(&mut self, type_url: &str, names: &[&str]) -> Result<(), ClientError> {
        self.check_type(type_url)?;
        if names.is_empty() && !TypeInfo::of(type_url).legacy_wildcard() {
            return Err(ClientError::EmptyName);
        }
        let limits = self.config.limits;
        for n in names {
            if n.is_empty() {
                return Err(ClientError::EmptyName);
            }
            if n.len() > limits.max_name_len {
                return Err(ClientError::LimitExceeded);
            }
        }
        let held = self.index.get(type_url).and_then(|&i| self.types.get(i));
        let current = held.map_or(0, |ts| ts.sub.desired.len());
        let new = names
            .iter()
            .filter(|n| held.is_none_or(|ts| !ts.sub.desired.contains(**n)))
            .count();
        if current.saturating_add(new) > limits.max_names_per_type {
            return Err(ClientError::LimitExceeded);
        }
        let idx = self.type_index(type_url);
        let legacy = names.is_empty();
        let list: Vec<SharedStr> = if legacy {
            alloc::vec![SharedStr::from_static(WILDCARD)]
        } else {
            names.iter().map(|n| SharedStr::from(*n)).collect()
        };
        if let Some(ts) = self.types.get_mut(idx) {
            for name in list {
                if ts.sub.add(name.clone(), legacy) {
                    if name != WILDCARD {
                        ts.records
                            .entry(name.clone())
                            .or_insert_with(Record::requested);
                    }
                    ts.arm_ready(&name);
                }
            }
        }
        self.enqueue(idx);
        Ok(())
    }

    /// Makes `names` the whole subscription of `type_url`: subscribes to those not
    /// subscribed yet and unsubscribes from the others, as one change sent with the next
    /// request of the type. `"*"` among them is the explicit wildcard; an empty list
    /// unsubscribes from everything (never the legacy wildcard: [`Client::subscribe`] with
    /// no names asks for that). Checked as `subscribe` checks; on error nothing changes.
    ///
    /// ```
    /// # use xds_sansio::{Client, ClientConfig, ClientError, Transport, Variant};
    /// # use xds_sansio::pb::envoy::config::core::v3::Node;
    /// # use xds_sansio::types::ENDPOINT;
    /// let mut client = Client::new(ClientConfig::new(Variant::Sotw, Transport::Aggregated, Node::default()));
    /// client.subscribe(ENDPOINT.type_url, &["a", "b"])?;
    /// client.set_subscription(ENDPOINT.type_url, &["b", "c"])?;
    /// let names: Vec<String> = client.subscribed_names(ENDPOINT.type_url).iter().map(|n| n.to_string()).collect();
    /// assert_eq!(names, ["b", "c"]);
    /// # Ok::<(), ClientError>(())
    /// ```
    pub fn set_subscription(&mut self, type_url: &str, names: &[&str]) -> Result<(), ClientError> {
        let current = self.subscribed_names(type_url);
        let added: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !current.iter().any(|c| &**c == *n))
            .collect();
        if !added.is_empty() {
            self.subscribe(type_url, &added)?;
        }
        let removed: Vec<&str> = current
            .iter()
            .map(|c| &**c)
            .filter(|c| !names.contains(c))
            .collect();
        self.unsubscribe(type_url, &removed)
    }

    /// Unsubscribes from `names` of `type_url` (`"*"` leaves the wildcard). Resources no
    /// longer wanted leave the cache ([`RemovalReason::Unsubscribed`]); the change is sent
    /// with the next request of the type. Names not subscribed are ignored.
    pub fn unsubscribe(&mut self, type_url: &str, names: &[&str]) -> Result<(), ClientError> {
        self.check_type(type_url)?;
        let Some(&idx) = self.index.get(type_url) else {
            return Ok(());
        };
        self.with_type(idx, |ts, cx| {
            for name in names {
                if !ts.sub.remove(name) {
                    continue;
                }
                let name = SharedStr::from(*name);
                ts.awaiting.remove(name.as_str());
                if name == WILDCARD {
                    ts.awaiting_wildcard = false;
                    let mut unwanted: Vec<SharedStr> = ts
                        .records
                        .iter()
                        .filter(|(n, r)| {
                            r.cached.as_ref().is_some_and(|c| !ts.wants(n, &c.aliases))
                        })
                        .map(|(n, _)| n.clone())
                        .collect();
                    unwanted.sort_unstable();
                    for n in unwanted {
                        ts.remove_cached(&n, RemovalReason::Unsubscribed, cx);
                    }
                    // Statuses the wildcard alone kept (rejected, never held) go too.
                    let sub = &ts.sub;
                    ts.records
                        .retain(|n, r| r.cached.is_some() || sub.names(n) || r.dne_at.is_some());
                    continue;
                }
                let target = if ts.records.contains_key(name.as_str()) {
                    Some(name.clone())
                } else {
                    ts.aliases.get(name.as_str()).cloned()
                };
                let Some(target) = target else { continue };
                let (cached, aliases) = match ts.records.get(target.as_str()) {
                    Some(r) => (
                        r.cached.is_some(),
                        r.cached
                            .as_ref()
                            .map(|c| c.aliases.clone())
                            .unwrap_or_default(),
                    ),
                    None => continue,
                };
                if cached {
                    if !ts.wants(&target, &aliases) {
                        ts.remove_cached(&target, RemovalReason::Unsubscribed, cx);
                    }
                } else if !ts.sub.names(&target) {
                    if let Some(rec) = ts.records.remove(target.as_str()) {
                        if let Some(at) = rec.dne_at {
                            cx.timers.disarm(at, TimerKind::DoesNotExist, idx, &target);
                        }
                    }
                }
            }
            ts.check_ready(cx.events);
        });
        self.enqueue(idx);
        Ok(())
    }

    /// Sets the synchronous content validator of `type_url`: called for every resource with
    /// a body that the client would apply.
    pub fn set_validator(&mut self, type_url: &str, validator: Box<dyn Validator>) {
        self.validators
            .insert(SharedStr::from(type_url), Arc::from(validator));
    }

    /// Removes the validator of `type_url`.
    pub fn clear_validator(&mut self, type_url: &str) {
        self.validators.remove(type_url);
    }

    /// Sets how SotW names of `type_url` are read from bodies (default: field 1, which fits
    /// every type of the catalog).
    pub fn set_name_extractor(&mut self, type_url: &str, extractor: NameExtractor) {
        self.extractors.insert(SharedStr::from(type_url), extractor);
    }

    /// Turns deferred validation of `type_url` on or off: when on, each response with
    /// bodies yields [`ClientEvent::ValidationNeeded`](crate::client::ClientEvent::ValidationNeeded) and waits for [`Client::verdict`].
    /// A synchronous validator of the type is then not consulted.
    pub fn set_deferred_validation(&mut self, type_url: &str, on: bool) {
        if on {
            self.deferred.insert(SharedStr::from(type_url));
        } else {
            self.deferred.remove(type_url);
        }
    }

    /// Answers a [`ClientEvent::ValidationNeeded`](crate::client::ClientEvent::ValidationNeeded): `rejections` lists `(name, reason)` of
    /// the rejected resources; every other resource is accepted. Then the response is
    /// applied and answered, and responses held behind it are handled.
    pub fn verdict(
        &mut self,
        ticket: VerdictTicket,
        rejections: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        let idx = self
            .types
            .iter()
            .position(|t| t.pending.as_ref().is_some_and(|(t, _)| *t == ticket))
            .ok_or(ClientError::UnknownTicket)?;
        let ts = self.types.get_mut(idx).ok_or(ClientError::UnknownTicket)?;
        let (_, mut update) = ts.pending.take().ok_or(ClientError::UnknownTicket)?;
        // Interest may have changed while the verdict was pending.
        update.resources.retain(|r| ts.wants(&r.name, &r.aliases));
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
        self.with_type(idx, |ts, cx| ts.apply(update, rejected, cx));
        loop {
            let next = match self.types.get_mut(idx) {
                Some(ts) if ts.pending.is_none() => ts.held.pop_front(),
                _ => None,
            };
            match next {
                None => break,
                Some(Held::Response(r)) => self.process(idx, r),
                Some(Held::Overflow { nonce, version }) => {
                    self.with_type(idx, |ts, cx| {
                        ts.reject(
                            nonce,
                            version,
                            "too many responses held while a verdict was pending",
                            cx,
                        )
                    });
                }
            }
        }
        self.enqueue(idx);
        Ok(())
    }
}
