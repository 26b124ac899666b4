//! What a watcher receives: [`Watch`], a stream of events fed by the driver from the
//! core's session: [`WatchEvent`]s of one resource as it is, or, as a [`ConfigWatch`],
//! [`ConfigEvent`]s, each a complete configuration of a listener (gRPC A74's `XdsConfig`).
//! One type, generic over its event: the queue, the waiting and the unwatching are the
//! same for both.
//!
//! # Decisions
//!
//! - **The newest state wins.** A watcher that reads slowly never makes the client hold a
//!   queue of stale updates: an unread event is replaced by a newer one of the same slot
//!   ([`Coalesce`]: per name, state and errors apart), so what a watch holds is bounded
//!   by the names it covers.
//! - **Values and errors are separate** (gRPC A88's `OnResourceChanged` and
//!   `OnAmbientError`): an error never hides the value still in use; a rejected update
//!   ([`WatchError::Rejected`]) leaves the previous value in place.
//! - **A new watch starts with what is known**: the value held (or does-not-exist) is its
//!   first event, so a second watcher of a name does not wait for the server.
//! - **Dropping a [`Watch`] unwatches** (the name is unsubscribed once no watch is left).

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use xds_sansio::client::SharedStr;

pub use xds_sansio::client::session::{ConfigEvent, WatchError, WatchEvent};

/// Where a dropped watch says that it ended: the driver's command queue, which this file
/// does not know.
pub(crate) trait Unwatch: Send + Sync {
    /// Ends watch `id` (nothing when the driver has stopped).
    fn unwatch(&self, id: u64);
}

/// The slot of an event in a watch's queue: the newest event replaces an unread one of
/// the same slot.
pub(crate) trait Coalesce {
    /// A name, and whether the event is state (0: a value or its absence) or an error
    /// (1), so one unread of each per name.
    fn slot(&self) -> (SharedStr, u8);
}

impl Coalesce for WatchEvent {
    fn slot(&self) -> (SharedStr, u8) {
        let class = match self {
            WatchEvent::Changed { .. } | WatchEvent::DoesNotExist { .. } => 0,
            WatchEvent::Error { .. } => 1,
            // An event of a newer core: its own slot, so it never hides another.
            _ => 2,
        };
        (self.name().cloned().unwrap_or_default(), class)
    }
}

impl Coalesce for ConfigEvent {
    fn slot(&self) -> (SharedStr, u8) {
        match self {
            ConfigEvent::Changed(config) => (SharedStr::from(config.name.as_str()), 0),
            ConfigEvent::Error { resource, .. } => {
                let key = resource
                    .as_ref()
                    .map(|k| format!("{} {}", k.type_url, k.name))
                    .unwrap_or_default();
                (SharedStr::from(key), 1)
            }
            _ => (SharedStr::default(), 2),
        }
    }
}

struct Pending<E> {
    next_seq: u64,
    by_key: HashMap<(SharedStr, u8), u64>,
    order: BTreeMap<u64, ((SharedStr, u8), E)>,
    closed: bool,
    /// The reader waiting for the next event.
    waker: Option<Waker>,
}

/// The driver's end of a watch: pushes coalesce per slot ([`Coalesce`]).
pub(crate) struct Sink<E> {
    pending: Mutex<Pending<E>>,
}

impl<E> Default for Sink<E> {
    fn default() -> Self {
        Sink {
            pending: Mutex::new(Pending {
                next_seq: 0,
                by_key: HashMap::new(),
                order: BTreeMap::new(),
                closed: false,
                waker: None,
            }),
        }
    }
}

impl<E: Coalesce> Sink<E> {
    pub(crate) fn push(&self, event: E) {
        let key = event.slot();
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = p.next_seq;
        p.next_seq += 1;
        if let Some(old) = p.by_key.insert(key.clone(), seq) {
            p.order.remove(&old);
        }
        p.order.insert(seq, (key, event));
        let waker = p.waker.take();
        drop(p);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<E> Sink<E> {
    pub(crate) fn close(&self) {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        p.closed = true;
        let waker = p.waker.take();
        drop(p);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The oldest unread event; `Err(())` once closed and drained. With a waker, it is
    /// woken by the next push or close when nothing is waiting.
    pub(crate) fn pop(&self, waker: Option<&Waker>) -> Result<Option<E>, ()> {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match p.order.pop_first() {
            Some((_, (key, event))) => {
                p.by_key.remove(&key);
                Ok(Some(event))
            }
            None if p.closed => Err(()),
            None => {
                if let Some(w) = waker {
                    p.waker = Some(w.clone());
                }
                Ok(None)
            }
        }
    }

    pub(crate) fn unread(&self) -> usize {
        let p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        p.order.len()
    }
}

/// A stream of events: [`WatchEvent`]s for one name, or every name, of one type (from
/// [`XdsClient::watch`](super::XdsClient::watch)), or [`ConfigEvent`]s as a
/// [`ConfigWatch`]. Dropping it unwatches. The newest state wins: an unread event is
/// replaced by a newer one of the same name (values and errors apart, gRPC A88). See the
/// [client docs](super).
pub struct Watch<E = WatchEvent> {
    pub(crate) id: u64,
    pub(crate) sink: Arc<Sink<E>>,
    pub(crate) unwatch: Box<dyn Unwatch>,
}

/// A stream of [`ConfigEvent`]s for one listener (from
/// [`XdsClient::watch_listener`](super::XdsClient::watch_listener)) or, from
/// [`XdsClient::watch_all_config`](super::XdsClient::watch_all_config), every listener.
/// How the driver runs the dependency managers: the [client docs](super), "Following
/// references".
///
/// # Decisions
///
/// - **Only complete configurations** (A74: "will not deliver a config until all resources
///   are obtained"): every resource the listener reaches is held or known not to be usable;
///   the client's does-not-exist timer bounds the wait. A configuration is delivered again
///   only when it differs from the one delivered before.
/// - **One listener's wait is its own**: each listener watched by name has its own
///   dependency manager (as gRPC has one per channel), so a listener waiting for a
///   resource never holds back another listener's configuration.
/// - **Failures are part of the configuration** (A74, A88): a listener that cannot serve
///   (it, its route configuration or a scope does not exist, expired, or was rejected with
///   nothing held) has [`ListenerConfig::status`](xds_sansio::client::deps::ListenerConfig::status) `Err`; a cluster that cannot be used
///   (missing, or its endpoints or secrets are) has its
///   [`ClusterConfig::leaves`](xds_sansio::client::deps::ClusterConfig::leaves) `Err` and
///   the others still serve.
/// - **Errors that change nothing are apart** ([`ConfigEvent::Error`], A88's ambient
///   errors): a rejected update or a server error of a resource held keeps it in use, and
///   an unreachable management server keeps the whole configuration.
/// - **The newest state wins**, as for every [`Watch`]: an unread configuration of a
///   listener is replaced by a newer one, an unread error of a resource by a newer one.
/// - **Dropping it unwatches**; what only it reached is unsubscribed after the manager's
///   grace
///   ([`DepsConfig::unsubscribe_grace`](xds_sansio::client::deps::DepsConfig::unsubscribe_grace)).
pub type ConfigWatch = Watch<ConfigEvent>;

impl<E> std::fmt::Debug for Watch<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("id", &self.id)
            .field("unread", &self.sink.unread())
            .finish()
    }
}

impl<E> Watch<E> {
    /// The next event; `None` once the client has shut down.
    pub async fn next(&mut self) -> Option<E> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    /// The next event if one is waiting (never waits).
    pub fn try_next(&mut self) -> Option<E> {
        self.sink.pop(None).ok().flatten()
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<E>> {
        match self.sink.pop(Some(cx.waker())) {
            Ok(Some(event)) => Poll::Ready(Some(event)),
            Err(()) => Poll::Ready(None),
            Ok(None) => Poll::Pending,
        }
    }
}

impl<E> tokio_stream::Stream for Watch<E> {
    type Item = E;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        self.get_mut().poll_event(cx)
    }
}

impl<E> Drop for Watch<E> {
    fn drop(&mut self) {
        self.unwatch.unwatch(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn changed(name: &str, v: &str) -> WatchEvent {
        WatchEvent::Changed {
            name: name.into(),
            version: v.into(),
            body: Bytes::new(),
        }
    }

    #[test]
    fn newest_state_wins_per_name_and_class() {
        let sink = Sink::default();
        sink.push(changed("a", "1"));
        sink.push(changed("b", "1"));
        sink.push(WatchEvent::Error {
            name: Some("a".into()),
            error: WatchError::Server {
                code: 14,
                message: "x".into(),
            },
        });
        sink.push(changed("a", "2"));
        assert_eq!(sink.unread(), 3);
        assert_eq!(sink.pop(None), Ok(Some(changed("b", "1"))));
        assert!(matches!(sink.pop(None), Ok(Some(WatchEvent::Error { .. }))));
        assert_eq!(sink.pop(None), Ok(Some(changed("a", "2"))));
        assert_eq!(sink.pop(None), Ok(None));
        sink.close();
        assert_eq!(sink.pop(None), Err(()));
    }
}
