//! Many streams reading one store, with an index from `(type, name)` and from type
//! (wildcard) to streams, so a store update touches only the streams it concerns.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use hashbrown::HashMap;

use super::config::ServerConfig;
use super::event::ServerEvent;
use super::publication::Revision;
use super::store::ResourceStore;
use super::stream::ServerStream;
use super::subscribers::{Concern, SubscriptionIndex};
use super::wire::EncodedResponse;
use crate::message::{Request, Response};
use crate::time::Instant;

/// Names a stream inside a [`StreamSet`]: a slot and a generation, so an id is never
/// reused even when its slot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

impl StreamId {
    fn new(slot: usize, generation: u32) -> StreamId {
        StreamId(u64::from(generation) << 32 | (slot as u64 & 0xffff_ffff))
    }
    fn slot(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }
    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// The streams in slots: O(1) lookup by id, slots reused in a deterministic order.
#[derive(Clone, Debug, Default)]
struct Slab {
    slots: Vec<(u32, Option<ServerStream>)>,
    free: Vec<usize>,
    len: usize,
}

impl Slab {
    fn insert(&mut self, stream: ServerStream) -> StreamId {
        self.len += 1;
        if let Some(slot) = self.free.pop() {
            if let Some((generation, entry)) = self.slots.get_mut(slot) {
                *generation = generation.wrapping_add(1);
                *entry = Some(stream);
                return StreamId::new(slot, *generation);
            }
        }
        self.slots.push((1, Some(stream)));
        StreamId::new(self.slots.len() - 1, 1)
    }

    fn get(&self, id: StreamId) -> Option<&ServerStream> {
        match self.slots.get(id.slot()) {
            Some((generation, Some(stream))) if *generation == id.generation() => Some(stream),
            _ => None,
        }
    }

    fn get_mut(&mut self, id: StreamId) -> Option<&mut ServerStream> {
        match self.slots.get_mut(id.slot()) {
            Some((generation, Some(stream))) if *generation == id.generation() => Some(stream),
            _ => None,
        }
    }

    fn remove(&mut self, id: StreamId) -> Option<ServerStream> {
        let (generation, entry) = self.slots.get_mut(id.slot())?;
        if *generation != id.generation() {
            return None;
        }
        let stream = entry.take()?;
        self.free.push(id.slot());
        self.len -= 1;
        Some(stream)
    }

    /// Every stream, in slot order.
    fn iter(&self) -> impl Iterator<Item = &ServerStream> {
        self.slots.iter().filter_map(|(_, s)| s.as_ref())
    }

    /// Every stream with its id, in slot order.
    fn iter_mut(&mut self) -> impl Iterator<Item = (StreamId, &mut ServerStream)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(slot, (generation, s))| {
                Some((StreamId::new(slot, *generation), s.as_mut()?))
            })
    }
}

/// The id given to a [`StreamSet`] method names no stream (caller misuse).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownStream(pub StreamId);

impl core::fmt::Display for UnknownStream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "no stream {}", self.0 .0)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for UnknownStream {}

/// The streams that read one [`ResourceStore`] (one set per store; nodes that see
/// different stores go to different sets). A store update costs O(changes × streams that
/// subscribe to them), whatever the number of streams.
#[derive(Clone, Debug, Default)]
pub struct StreamSet {
    streams: Slab,
    index: SubscriptionIndex<StreamId>,
    synced: Revision,
    ready: BTreeSet<StreamId>,
    /// Every stream's next heartbeat deadline, earliest first.
    timers: BTreeSet<(Instant, StreamId)>,
    deadlines: HashMap<StreamId, Instant>,
}

impl StreamSet {
    /// An empty set.
    pub fn new() -> StreamSet {
        StreamSet::default()
    }

    /// Opens a stream.
    pub fn insert(&mut self, config: ServerConfig) -> StreamId {
        let mut stream = ServerStream::new(config);
        stream.set_indexed();
        self.streams.insert(stream)
    }

    /// Closes a stream (the gRPC call ended) and drops it from the index.
    pub fn remove(&mut self, id: StreamId) -> Option<ServerStream> {
        let stream = self.streams.remove(id)?;
        self.index.remove(id, &stream.subscriptions());
        self.ready.remove(&id);
        if let Some(due) = self.deadlines.remove(&id) {
            self.timers.remove(&(due, id));
        }
        Some(stream)
    }

    /// The stream `id`.
    pub fn stream(&self, id: StreamId) -> Option<&ServerStream> {
        self.streams.get(id)
    }

    /// How many streams are open.
    pub fn len(&self) -> usize {
        self.streams.len
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.streams.len == 0
    }

    /// [`ServerStream::handle_request`] on stream `id`, keeping the index current.
    pub fn handle_request(
        &mut self,
        id: StreamId,
        now: Instant,
        request: Request,
    ) -> Result<(), UnknownStream> {
        let stream = self.streams.get_mut(id).ok_or(UnknownStream(id))?;
        let before = stream.queued_events();
        stream.handle_request_sharing(now, request, &self.index);
        // The stream's own events are the one channel of its subscriptions.
        for event in stream.events_from(before) {
            self.index.follow(id, event);
        }
        if stream.is_closed() {
            let subscriptions = stream.subscriptions();
            self.index.remove(id, &subscriptions);
            self.refresh_timer(id);
        }
        self.ready.insert(id);
        Ok(())
    }

    /// Reads the store's changes since the last sync and marks them on exactly the streams
    /// that subscribe to them (by name, alias or wildcard); those become ready. A change log
    /// that no longer reaches back makes every stream resync. Returns how many streams
    /// became ready.
    pub fn sync(&mut self, store: &ResourceStore) -> usize {
        if self.synced == store.revision() {
            return 0;
        }
        let before = self.ready.len();
        match store.changes_since(self.synced) {
            Ok(changes) => {
                let StreamSet {
                    streams,
                    index,
                    ready,
                    ..
                } = self;
                index.visit(changes, |id, concern| {
                    if let Some(stream) = streams.get_mut(id) {
                        match concern {
                            Concern::Wildcard { type_url, changes } => {
                                stream.mark_dirty_all(type_url, changes)
                            }
                            Concern::Named(change) => stream.mark_dirty(change),
                        }
                        ready.insert(id);
                    }
                });
            }
            Err(_) => {
                let mut ended = Vec::new();
                for (id, stream) in self.streams.iter_mut() {
                    stream.resync_all(store);
                    if stream.is_closed() {
                        // `ChangeLogOutrun`: out of the index, as after a closing request.
                        ended.push((id, stream.subscriptions()));
                    }
                    self.ready.insert(id);
                }
                for (id, subscriptions) in ended {
                    self.index.remove(id, &subscriptions);
                }
            }
        }
        self.synced = store.revision();
        self.ready.len() - before.min(self.ready.len())
    }

    /// The next stream that may have something to send (after a request or a store
    /// change), lowest id first; drain it with [`StreamSet::poll_response`].
    pub fn poll_ready(&mut self) -> Option<StreamId> {
        self.ready.pop_first()
    }

    /// [`ServerStream::poll_response`] on stream `id` (syncing with the store first).
    pub fn poll_response(
        &mut self,
        id: StreamId,
        now: Instant,
        store: &ResourceStore,
    ) -> Option<Response> {
        self.poll_with(id, store, |stream| stream.poll_response(now, store))
    }

    /// [`ServerStream::poll_response_encoded`] on stream `id` (syncing with the store
    /// first).
    pub fn poll_response_encoded(
        &mut self,
        id: StreamId,
        now: Instant,
        store: &ResourceStore,
    ) -> Option<EncodedResponse> {
        self.poll_with(id, store, |stream| stream.poll_response_encoded(now, store))
    }

    /// Syncs with the store, polls stream `id` with `poll`, and keeps its deadline current.
    fn poll_with<R>(
        &mut self,
        id: StreamId,
        store: &ResourceStore,
        poll: impl FnOnce(&mut ServerStream) -> Option<R>,
    ) -> Option<R> {
        self.sync(store);
        let response = poll(self.streams.get_mut(id)?);
        self.refresh_timer(id);
        response
    }

    /// Keeps the deadline index in step with stream `id`'s timers.
    fn refresh_timer(&mut self, id: StreamId) {
        let next = self.streams.get(id).and_then(ServerStream::poll_timeout);
        let old = self.deadlines.get(&id).copied();
        if next == old {
            return;
        }
        if let Some(old) = old {
            self.timers.remove(&(old, id));
            self.deadlines.remove(&id);
        }
        if let Some(next) = next {
            self.timers.insert((next, id));
            self.deadlines.insert(id, next);
        }
    }

    /// Whether every stream is settled ([`ServerStream::is_settled`]) on `store`, as synced
    /// ([`StreamSet::sync`]) and drained: every client has ACKed what the store asks.
    pub fn is_settled(&self, store: &ResourceStore) -> bool {
        self.synced == store.revision()
            && self.ready.is_empty()
            && self.streams.iter().all(|s| s.is_settled(store))
    }

    /// When to call [`StreamSet::handle_timeout`]: the earliest deadline of any stream
    /// (O(1)); one stream's is [`ServerStream::poll_timeout`] through
    /// [`StreamSet::stream`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|(due, _)| *due)
    }

    /// Fires every stream's heartbeats due at `now` (O(streams due · log n)); those
    /// streams become ready ([`StreamSet::poll_ready`]). Extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(due, id)) = self.timers.first() {
            if due > now {
                break;
            }
            self.fire(id, now);
            if self.deadlines.get(&id) == Some(&due) {
                // Nothing fired (already handled): drop the entry so the loop ends.
                self.timers.remove(&(due, id));
                self.deadlines.remove(&id);
            }
        }
    }

    /// [`ServerStream::poll_event`] on stream `id`.
    pub fn poll_event(&mut self, id: StreamId) -> Option<ServerEvent> {
        self.streams.get_mut(id)?.poll_event()
    }

    /// [`ServerStream::handle_timeout`] on stream `id`; the stream becomes ready if a
    /// heartbeat is due.
    fn fire(&mut self, id: StreamId, now: Instant) {
        if let Some(stream) = self.streams.get_mut(id) {
            if stream.has_due_timer(now) {
                stream.handle_timeout(now);
                self.ready.insert(id);
            }
        }
        self.refresh_timer(id);
    }

    /// The ids of every open stream, ascending.
    pub fn ids(&self) -> Vec<StreamId> {
        let mut ids: Vec<StreamId> = self
            .streams
            .slots
            .iter()
            .enumerate()
            .filter(|(_, (_, s))| s.is_some())
            .map(|(slot, (generation, _))| StreamId::new(slot, *generation))
            .collect();
        ids.sort_unstable();
        ids
    }
}
