//! What a configuration watcher receives: [`ConfigWatch`], a stream of [`ConfigEvent`]s,
//! each a complete configuration one listener resolves to (gRPC A74's `XdsConfig`: the
//! listener, its route configuration, its clusters and their endpoints), from the core's
//! dependency manager ([`xds_sansio::client::deps`]) that the driver runs.
//!
//! The contract is on [`ConfigWatch`].

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use xds_sansio::client::SharedStr;

use super::watch::{Coalesce, Sink};

pub use xds_sansio::client::session::ConfigEvent;

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
        }
    }
}

/// A stream of [`ConfigEvent`]s for one listener (or, from
/// [`XdsClient::watch_all_config`](super::XdsClient::watch_all_config), every listener);
/// from [`XdsClient::watch_listener`](super::XdsClient::watch_listener). Dropping it
/// unwatches. How the driver runs the dependency managers: the [client docs](super),
/// "Following references".
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
/// - **The newest state wins**, as for [`Watch`](super::Watch): an unread configuration of
///   a listener is replaced by a newer one, an unread error of a resource by a newer one.
/// - **Dropping a [`ConfigWatch`] unwatches**; what only it reached is unsubscribed after
///   the manager's grace
///   ([`DepsConfig::unsubscribe_grace`](xds_sansio::client::deps::DepsConfig::unsubscribe_grace)).
pub struct ConfigWatch {
    pub(crate) id: u64,
    pub(crate) sink: Arc<Sink<ConfigEvent>>,
    pub(crate) unwatch: mpsc::UnboundedSender<super::driver::Op>,
}

impl std::fmt::Debug for ConfigWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatch")
            .field("id", &self.id)
            .field("unread", &self.sink.unread())
            .finish()
    }
}

impl ConfigWatch {
    /// The next event; `None` once the client has shut down.
    pub async fn next(&mut self) -> Option<ConfigEvent> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    /// The next event if one is waiting (never waits).
    pub fn try_next(&mut self) -> Option<ConfigEvent> {
        self.sink.pop(None).ok().flatten()
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<ConfigEvent>> {
        match self.sink.pop(Some(cx.waker())) {
            Ok(Some(event)) => Poll::Ready(Some(event)),
            Err(()) => Poll::Ready(None),
            Ok(None) => Poll::Pending,
        }
    }
}

impl tokio_stream::Stream for ConfigWatch {
    type Item = ConfigEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ConfigEvent>> {
        self.get_mut().poll_event(cx)
    }
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        let _ = self
            .unwatch
            .send(super::driver::Op::Unwatch { id: self.id });
    }
}
