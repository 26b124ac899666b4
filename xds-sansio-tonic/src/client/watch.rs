//! What a watcher receives: [`Watch`], a stream of events fed by the driver from the
//! core's session: [`WatchEvent`]s of one resource as it is, or, as a [`ConfigWatch`],
//! [`ConfigEvent`]s, each a complete configuration of a listener (gRPC A74's `XdsConfig`).
//! One type, generic over its event: the queue, the waiting and the unwatching are the
//! same for both.
//!
//! What a watcher is told, and why (values and errors apart, the newest state wins, a new
//! watch starts with what is known), is the core's
//! ([`xds_sansio::client::session::watch`], [`WatchQueue`]). Dropping a [`Watch`]
//! unwatches (the name is unsubscribed once no watch is left).

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use xds_sansio::client::session::{Coalesce, WatchQueue};

pub use xds_sansio::client::session::{ConfigEvent, WatchError, WatchEvent};

/// Where a dropped watch says that it ended: the driver's command queue, which this file
/// does not know.
pub(crate) trait Unwatch: Send + Sync {
    /// Ends watch `id` (nothing when the driver has stopped).
    fn unwatch(&self, id: u64);
}

struct Pending<E> {
    queue: WatchQueue<E>,
    closed: bool,
    /// The reader waiting for the next event.
    waker: Option<Waker>,
}

/// The driver's end of a watch: the core's queue, in which the newest state wins
/// ([`WatchQueue`]), behind a lock, with the reader's waker.
pub(crate) struct Sink<E> {
    pending: Mutex<Pending<E>>,
}

impl<E> Default for Sink<E> {
    fn default() -> Self {
        Sink {
            pending: Mutex::new(Pending {
                queue: WatchQueue::default(),
                closed: false,
                waker: None,
            }),
        }
    }
}

impl<E: Coalesce> Sink<E> {
    pub(crate) fn push(&self, event: E) {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        p.queue.push(event);
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
        match p.queue.pop() {
            Some(event) => Ok(Some(event)),
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
        p.queue.len()
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
/// What it delivers, and why, is the core's ([`ConfigEvent`]).
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

    #[test]
    fn a_closed_sink_still_hands_out_what_it_holds() {
        // Which event replaces which is the core's queue, tested there.
        let sink = Sink::default();
        sink.push(WatchEvent::DoesNotExist { name: "a".into() });
        sink.close();
        assert_eq!(
            sink.pop(None),
            Ok(Some(WatchEvent::DoesNotExist { name: "a".into() }))
        );
        assert_eq!(sink.pop(None), Err(()));
    }
}
