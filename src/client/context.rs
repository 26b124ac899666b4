//! What a per-type step needs from the client besides the type ([`Ctx`]): time, the
//! configuration, the judges, the timers and the event queue, lent in one place
//! (`Client::split`).

use alloc::collections::VecDeque;

use super::changes::Change;
use super::changes::EventShape;
use super::config::{ClientConfig, DataErrors, NackPolicy};
use super::event::{push_batched, ClientEvent};
use super::timers::Timers;
use super::validation::Judges;
use crate::message::Variant;
use crate::text::SharedStr;
use crate::time::Instant;

/// What the per-type step needs from the client besides the type: built in one place,
/// `Client::split`.
pub(crate) struct Ctx<'a> {
    pub(crate) idx: usize,
    pub(crate) now: Instant,
    pub(crate) config: &'a ClientConfig,
    pub(crate) judges: &'a mut Judges,
    pub(crate) timers: &'a mut Timers,
    pub(crate) events: &'a mut VecDeque<ClientEvent>,
    /// How many changes the input at hand may make (room for a batch).
    pub(crate) batch_hint: usize,
}

impl Ctx<'_> {
    pub(crate) fn variant(&self) -> Variant {
        self.config.variant
    }

    pub(crate) fn policy(&self) -> NackPolicy {
        self.config.nack_policy
    }

    /// Whether a deletion of a held resource keeps it (gRPC A53 before A88; A88 without
    /// `fail_on_data_errors`, which ignores A53's option).
    pub(crate) fn keeps_deleted(&self) -> bool {
        match self.config.data_errors {
            DataErrors::Legacy => self.config.ignore_resource_deletion,
            DataErrors::KeepCached => true,
            DataErrors::FailOnDataErrors => false,
        }
    }

    /// Adds one change to the batch at the back of the queue (the configured shape is
    /// [`EventShape::Batched`](super::EventShape::Batched): a caller that made no owned
    /// event).
    pub(crate) fn batch_change(
        &mut self,
        type_url: &SharedStr,
        name: SharedStr,
        change: Change,
        at: Option<usize>,
    ) {
        debug_assert_eq!(self.config.event_shape, EventShape::Batched);
        push_batched(self.events, self.batch_hint, type_url, name, change, at);
    }

    /// Queues one cache change in the configured [`EventShape`](super::EventShape); `at`
    /// is the position of the record to read it from, if any.
    pub(crate) fn change(
        &mut self,
        type_url: &SharedStr,
        name: SharedStr,
        change: Change,
        at: Option<usize>,
        owned: impl FnOnce(SharedStr, SharedStr) -> ClientEvent,
    ) {
        match self.config.event_shape {
            EventShape::PerResource => self.events.push_back(owned(type_url.clone(), name)),
            EventShape::Batched => {
                push_batched(self.events, self.batch_hint, type_url, name, change, at)
            }
        }
    }
}
