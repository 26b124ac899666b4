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

use bytes::Bytes;
use std::task::Waker;

use tokio::sync::mpsc;
use xds_sansio::client::SharedStr;

/// What a watcher is told.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent {
    /// The resource arrived or changed (gRPC A88 `OnResourceChanged` with a value).
    Changed {
        /// Its name.
        name: SharedStr,
        /// Its version.
        version: SharedStr,
        /// Its body (the encoded resource), a slice of the response it came in.
        body: Bytes,
    },
    /// The resource does not exist: the server said so (deletion, incremental removal,
    /// `resource_errors` NOT_FOUND), the does-not-exist timer ran out, or its TTL expired.
    DoesNotExist {
        /// Its name.
        name: SharedStr,
    },
    /// Something went wrong that does not change the value held (gRPC A88
    /// `OnAmbientError`), or that explains why none arrives.
    Error {
        /// The name it concerns; `None` for the whole watch (a wildcard, or every server
        /// unreachable).
        name: Option<SharedStr>,
        /// What.
        error: WatchError,
    },
}

impl WatchEvent {
    /// The name the event concerns, if one.
    pub fn name(&self) -> Option<&SharedStr> {
        match self {
            WatchEvent::Changed { name, .. } | WatchEvent::DoesNotExist { name } => Some(name),
            WatchEvent::Error { name, .. } => name.as_ref(),
        }
    }
}

/// Why a watcher is told of an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchError {
    /// An update was rejected by the validator (or broke a protocol rule) and NACKed; the
    /// value held before, if any, is still the one in use.
    Rejected {
        /// The rejected version.
        version: SharedStr,
        /// The NACK's message.
        error: String,
    },
    /// The server reported an error for the resource (`resource_errors`, xRFC TP3).
    Server {
        /// The `google.rpc.Code`.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// Every server that could be tried failed to connect or dropped the stream before
    /// answering (gRPC A57, A71); the client keeps trying, with backoff.
    Unreachable {
        /// The last server tried (`server_uri`).
        server: String,
        /// Why it failed.
        error: String,
    },
}

impl std::fmt::Display for WatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchError::Rejected { version, error } => {
                write!(f, "update {version} rejected: {error}")
            }
            WatchError::Server { code, message } => write!(f, "server error {code}: {message}"),
            WatchError::Unreachable { server, error } => {
                write!(f, "management server {server} unreachable: {error}")
            }
        }
    }
}

/// Whether an event is state (value or absence) or an error: one unread of each per name.
fn class_of(event: &WatchEvent) -> u8 {
    match event {
        WatchEvent::Changed { .. } | WatchEvent::DoesNotExist { .. } => 0,
        WatchEvent::Error { .. } => 1,
    }
}

#[derive(Default)]
struct Pending {
    next_seq: u64,
    by_key: HashMap<(SharedStr, u8), u64>,
    order: BTreeMap<u64, ((SharedStr, u8), WatchEvent)>,
    closed: bool,
    /// The reader waiting for the next event.
    waker: Option<Waker>,
}

/// The driver's end of a watch: pushes coalesce per name.
#[derive(Default)]
pub(crate) struct Sink {
    pending: Mutex<Pending>,
}

impl Sink {
    pub(crate) fn push(&self, event: WatchEvent) {
        let key = (event.name().cloned().unwrap_or_default(), class_of(&event));
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
    fn pop(&self, waker: Option<&Waker>) -> Result<Option<WatchEvent>, ()> {
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
