//! The commands: what the application asks of the client (subscriptions, validators,
//! verdicts). Each returns a typed error on misuse and then changes nothing.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use super::subscription::WILDCARD;
use super::{Client, ClientError, SharedStr, Validator, VerdictTicket};
use crate::name::{comparable, XdstpName, XDSTP_SCHEME};
use crate::resource::NameExtractor;
use crate::types::TypeInfo;
use alloc::borrow::Cow;

/// `name` as the client keeps and sends it: an `xdstp://` name in canonical form (xDS TP1),
/// any other name as given.
fn canonical_name(name: &str) -> Result<SharedStr, ClientError> {
    if !name.starts_with(XDSTP_SCHEME) {
        return Ok(SharedStr::from(name));
    }
    XdstpName::parse(name)
        .map(|urn| SharedStr::from(urn.canonical()))
        .map_err(ClientError::MalformedXdstpName)
}

impl Client {
    /// Subscribes to `names` of `type_url`, adding to what is already subscribed. `"*"` is
    /// the explicit wildcard; no names at all is the legacy wildcard of LDS/CDS (an error
    /// for other types). An `xdstp://` name is sent, cached and reported in canonical form
    /// (context parameters sorted); a glob collection (`xdstp://authority/TYPE/path/*`)
    /// subscribes to every member the server sends under it. The change is sent with the
    /// next request of the type. To make a list the whole subscription, see
    /// [`Client::set_subscription`].
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
        let mut list: Vec<SharedStr> = Vec::with_capacity(names.len().max(1));
        for n in names {
            if n.is_empty() {
                return Err(ClientError::EmptyName);
            }
            if n.len() > limits.max_name_len {
                return Err(ClientError::LimitExceeded);
            }
            list.push(canonical_name(n)?);
        }
        let held = self.index.get(type_url).and_then(|&i| self.types.get(i));
        let current = held.map_or(0, |ts| ts.sub.desired().len());
        let new = list
            .iter()
            .filter(|n| held.is_none_or(|ts| !ts.sub.desired().contains(*n)))
            .count();
        if current.saturating_add(new) > limits.max_names_per_type {
            return Err(ClientError::LimitExceeded);
        }
        let idx = self.type_index(type_url);
        let legacy = names.is_empty();
        if legacy {
            list.push(SharedStr::from_static(WILDCARD));
        }
        if let Some(ts) = self.types.get_mut(idx) {
            ts.subscribe(list, legacy);
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
        let wanted = names
            .iter()
            .map(|n| canonical_name(n))
            .collect::<Result<Vec<SharedStr>, ClientError>>()?;
        let current = self.subscribed_names(type_url);
        let added: Vec<&str> = wanted
            .iter()
            .filter(|n| !current.contains(n))
            .map(|n| &**n)
            .collect();
        if !added.is_empty() {
            self.subscribe(type_url, &added)?;
        }
        let removed: Vec<&str> = current
            .iter()
            .filter(|c| !wanted.contains(c))
            .map(|c| &**c)
            .collect();
        self.unsubscribe(type_url, &removed)
    }

    /// Unsubscribes from `names` of `type_url` (`"*"` leaves the wildcard). Resources no
    /// longer wanted leave the cache ([`RemovalReason::Unsubscribed`](super::RemovalReason));
    /// the change is sent with the next request of the type. Names not subscribed are
    /// ignored.
    pub fn unsubscribe(&mut self, type_url: &str, names: &[&str]) -> Result<(), ClientError> {
        self.check_type(type_url)?;
        let Some(&idx) = self.index.get(type_url) else {
            return Ok(());
        };
        let names: Vec<Cow<'_, str>> = names.iter().map(|n| comparable(n)).collect();
        if let Some((ts, mut cx)) = self.split(idx) {
            ts.unsubscribe(&names, &mut cx);
        }
        self.enqueue(idx);
        Ok(())
    }

    /// Sets the synchronous content validator of `type_url`: called for every resource with
    /// a body that the client would apply.
    pub fn set_validator(&mut self, type_url: &str, validator: Box<dyn Validator>) {
        self.judges
            .validators
            .insert(SharedStr::from(type_url), Arc::from(validator));
    }

    /// Removes the validator of `type_url`.
    pub fn clear_validator(&mut self, type_url: &str) {
        self.judges.validators.remove(type_url);
    }

    /// Sets how SotW names of `type_url` are read from bodies (default: field 1, which fits
    /// every type of the catalog).
    pub fn set_name_extractor(&mut self, type_url: &str, extractor: NameExtractor) {
        self.judges
            .extractors
            .insert(SharedStr::from(type_url), extractor);
    }

    /// Turns deferred validation of `type_url` on or off: when on, each response with
    /// bodies yields [`ClientEvent::ValidationNeeded`](crate::client::ClientEvent::ValidationNeeded)
    /// and waits for [`Client::verdict`]. A synchronous validator of the type is then not
    /// consulted.
    pub fn set_deferred_validation(&mut self, type_url: &str, on: bool) {
        if on {
            self.judges.deferred.insert(SharedStr::from(type_url));
        } else {
            self.judges.deferred.remove(type_url);
        }
    }

    /// Answers a [`ClientEvent::ValidationNeeded`](crate::client::ClientEvent::ValidationNeeded):
    /// `rejections` lists `(name, reason)` of the rejected resources; every other resource
    /// is accepted. Then the response is applied and answered, and responses held behind it
    /// are handled.
    pub fn verdict(
        &mut self,
        ticket: VerdictTicket,
        rejections: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        let idx = self
            .types
            .iter()
            .position(|t| t.waits_on(ticket))
            .ok_or(ClientError::UnknownTicket)?;
        if let Some((ts, mut cx)) = self.split(idx) {
            ts.verdict(rejections, &mut cx);
        }
        self.enqueue(idx);
        Ok(())
    }
}
