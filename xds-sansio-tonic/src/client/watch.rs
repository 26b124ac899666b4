//! What a watcher receives: [`Watch`], a stream of [`WatchEvent`]s for one name (or every
//! name) of one type, fed by the driver from the core's events.
//!
//! # Decisions
//!
//! - **The newest state wins.** A watcher that reads slowly never makes the client hold a
//!   queue of stale updates: an unread update (or does-not-exist) of a name is replaced by
//!   a newer one, and an unread error of a name by a newer error, so what a watch holds is
//!   bounded by the names it covers.
//! - **Values and errors are separate** (gRPC A88's `OnResourceChanged` and
//!   `OnAmbientError`): an error never hides the value still in use; a rejected update
//!   ([`WatchError::Rejected`]) leaves the previous value in place.
//! - **A new watch starts with what is known**: the value held (or does-not-exist) is its
//!   first event, so a second watcher of a name does not wait for the server.
//! - **Dropping a [`Watch`] unwatches** (the name is unsubscribed once no watch is left).

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use std::task::Waker;

use tokio::sync::mpsc;
use xds_sansio::client::SharedStr;

pub use xds_sansio::client::session::{WatchError, WatchEvent};

/// An event a sink holds one unread of per slot: the newest replaces an unread one of the
/// same slot.
pub(crate) trait Coalesce {
    /// The slot: a name, and whether the event is state (0: a value or its absence) or an
    /// error (1), so one unread of each per name.
    fn slot(&self) -> (SharedStr, u8);
}

impl Coalesce for WatchEvent {
    fn slot(&self) -> (SharedStr, u8) {
        let class = match self {
            WatchEvent::Changed { .. } | WatchEvent::DoesNotExist { .. } => 0,
            WatchEvent::Error { .. } => 1,
        };
        (self.name().cloned().unwrap_or_default(), class)
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
pub(crate) struct Sink<E = WatchEvent> {
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
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .order
            .len()
    }
}

/// A stream of [`WatchEvent`]s for one name, or every name, of one type; from
/// [`XdsClient::watch`](super::XdsClient::watch). Dropping it unwatches.
pub struct Watch {
    pub(crate) id: u64,
    pub(crate) sink: Arc<Sink>,
    pub(crate) unwatch: mpsc::UnboundedSender<super::driver::Op>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("id", &self.id)
            .field("unread", &self.sink.unread())
            .finish()
    }
}

impl Watch {
    /// The next event; `None` once the client has shut down.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    /// The next event if one is waiting (never waits).
    pub fn try_next(&mut self) -> Option<WatchEvent> {
        self.sink.pop(None).ok().flatten()
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<WatchEvent>> {
        match self.sink.pop(Some(cx.waker())) {
            Ok(Some(event)) => Poll::Ready(Some(event)),
            Err(()) => Poll::Ready(None),
            Ok(None) => Poll::Pending,
        }
    }
}

impl tokio_stream::Stream for Watch {
    type Item = WatchEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchEvent>> {
        self.get_mut().poll_event(cx)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self
            .unwatch
            .send(super::driver::Op::Unwatch { id: self.id });
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
