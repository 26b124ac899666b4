package main

import (
	"context"
	"strconv"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/log"
)

// node is the node id conform's requests name.
const node = "client"

// heartbeat is how often the SnapshotCache re-sends resources that have a TTL.
const heartbeat = time.Second

// snapshotBackend: the whole store becomes one new snapshot of node `client` per
// publication, with one version per type, which is what an application of
// go-control-plane does (build a snapshot, SetSnapshot).
type snapshotBackend struct {
	cache cache.SnapshotCache
}

func newSnapshotBackend(ctx context.Context) *snapshotBackend {
	// ads=false: with true the cache holds back an answer until every name the request
	// asks for exists (its aid to Envoy's ordering), which the protocol does not ask.
	return &snapshotBackend{cache.NewSnapshotCacheWithHeartbeating(ctx, false, cache.IDHash{}, quiet{}, heartbeat)}
}

func (b *snapshotBackend) apply(ctx context.Context, s *store, _ map[string]bool) error {
	snap := &cache.Snapshot{}
	for typeURL := range s.published {
		items := map[string]types.ResourceWithTTL{}
		for name, r := range s.resources[typeURL] {
			items[name] = types.ResourceWithTTL{Resource: r.msg, TTL: r.ttl}
		}
		snap.Resources[cache.GetResponseType(typeURL)] = cache.Resources{
			Version: strconv.FormatUint(s.typeVersions[typeURL], 10),
			Items:   items,
		}
	}
	return b.cache.SetSnapshot(ctx, node, snap)
}

// linearBackend: one LinearCache per type behind a MuxCache that routes by type URL; a
// publication becomes one UpdateResources per type it touched.
type linearBackend struct {
	mux    *cache.MuxCache
	linear map[string]*cache.LinearCache
}

func newLinearBackend() *linearBackend {
	b := &linearBackend{linear: map[string]*cache.LinearCache{}}
	caches := map[string]cache.Cache{}
	for t := types.ResponseType(0); t < types.UnknownType; t++ {
		typeURL, err := cache.GetResponseTypeURL(t)
		if err != nil {
			continue
		}
		b.linear[typeURL] = cache.NewLinearCache(typeURL, cache.WithLogger(quiet{}))
		caches[typeURL] = b.linear[typeURL]
	}
	b.mux = &cache.MuxCache{
		Classify:      func(r *cache.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cache.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        caches,
	}
	return b
}

func (b *linearBackend) apply(_ context.Context, s *store, touched map[string]bool) error {
	for typeURL := range touched {
		updates := map[string]types.Resource{}
		for _, name := range s.updated[typeURL] {
			updates[name] = s.resources[typeURL][name].msg
		}
		if len(updates) == 0 && len(s.removed[typeURL]) == 0 {
			// `publish` alone: a LinearCache serves its type from its creation.
			continue
		}
		if err := b.linear[typeURL].UpdateResources(updates, s.removed[typeURL]); err != nil {
			return err
		}
	}
	return nil
}

// quiet drops the caches' debug and info lines; warnings and errors go to stderr.
type quiet struct{}

func (quiet) Debugf(string, ...interface{}) {}
func (quiet) Infof(string, ...interface{})  {}
func (quiet) Warnf(format string, args ...interface{}) {
	log.NewDefaultLogger().Warnf(format, args...)
}
func (quiet) Errorf(format string, args ...interface{}) {
	log.NewDefaultLogger().Errorf(format, args...)
}
