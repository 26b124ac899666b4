package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/protobuf/proto"
)

// Memory: live heap (runtime.MemStats.HeapAlloc after two GCs) around each structure.
// Streams are go-control-plane's real server (serverv3.NewServer) on in-process streams
// (fakestream.go), so a stream holds exactly what its server keeps per stream: the
// handler and receive goroutines, the stream wrapper, the per-type watch and
// subscription, the multiplexed response channel, the last request (with the node), and
// the cache's watch. Goroutine stacks are not heap: printed apart (StackInuse).

const memStreams = 10_000

func marshal(m proto.Message) ([]byte, error) { return proto.Marshal(m) }

func live() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

// waitFor polls until cond holds, for at most a minute.
func waitFor(what string, cond func() bool) {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			panic("timed out waiting for " + what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type memCache struct {
	label   string
	cache   cache.Cache
	watches func() int // open SotW watches
	deltas  func() int // open delta watches
}

func memCaches(b *Bodies) []memCache {
	// Not ADS: streams subscribe by name (see newSnapshotCache).
	sc, err := newSnapshotCache(b.Typed, "v1", false)
	must(err)
	lc := newLinearCache(b.Typed)
	return []memCache{
		{"snapshot", sc,
			func() int { return sc.GetStatusInfo(node).GetNumWatches() },
			func() int { return sc.GetStatusInfo(node).GetNumDeltaWatches() }},
		{"linear", lc, lc.NumCacheWatches, lc.NumCacheWatches},
	}
}

// sotwStreams opens memStreams SotW ADS streams on c, stream s subscribed to cluster s,
// each answered and ACKed, its watch open again; cancel ends them.
func sotwStreams(c memCache) (cancel func()) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, c.cache, nil)
	for s := 0; s < memStreams; s++ {
		f := newFakeSotw(ctx)
		go func() { _ = srv.StreamAggregatedResources(f) }()
		names := []string{clusterName(s)}
		f.in <- &discovery.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: cds, ResourceNames: names}
		r := <-f.out
		f.in <- &discovery.DiscoveryRequest{TypeUrl: cds, ResourceNames: names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}
	}
	waitFor("the SotW watches", func() bool { return c.watches() == memStreams })
	return cancel
}

// deltaStreams opens memStreams delta ADS streams, stream s subscribed to k clusters
// (s, s+1, ... modulo 10 000), each answered and ACKed.
func deltaStreams(c memCache, k int) (cancel func()) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, c.cache, nil)
	for s := 0; s < memStreams; s++ {
		f := newFakeDelta(ctx)
		go func() { _ = srv.DeltaAggregatedResources(f) }()
		names := make([]string, k)
		for j := range names {
			names[j] = clusterName((s + j) % clusters)
		}
		f.in <- &discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: cds, ResourceNamesSubscribe: names}
		nonce := <-f.out
		f.in <- &discovery.DeltaDiscoveryRequest{TypeUrl: cds, ResponseNonce: nonce}
	}
	waitFor("the delta watches", func() bool { return c.deltas() == memStreams })
	return cancel
}

// fakeOverhead is what memStreams idle fake streams and their goroutine (the one that
// runs the handler) cost alone: subtracted from the streams' figures.
func fakeOverhead() (heap, stack float64) {
	h0, s0 := live()
	ctx, cancel := context.WithCancel(context.Background())
	fs := make([]*fakeSotw, memStreams)
	for i := range fs {
		fs[i] = newFakeSotw(ctx)
		go func() { _, _ = fs[i].Recv() }()
	}
	h1, s1 := live()
	runtime.KeepAlive(fs)
	cancel()
	return float64(int64(h1-h0)) / memStreams, float64(int64(s1-s0)) / memStreams
}

func runMemory(b *Bodies) {
	// SnapshotCache's streams hold ~0.66 MB each (see the report): keep the heap near
	// what is live while they are built, on a machine others share.
	debug.SetMemoryLimit(10 << 30)
	fh, fs := fakeOverhead()
	fmt.Printf("# fake stream alone: %.0f B heap, %.0f B stack per stream (subtracted)\n", fh, fs)
	for _, c := range memCaches(b) {
		h0, s0 := live()
		done := sotwStreams(c)
		h1, s1 := live()
		memory("memory.stream", c.label, float64(h1-h0)/memStreams-fh,
			fmt.Sprintf("+%.0f B goroutine stacks", float64(s1-s0)/memStreams-fs))
		done()
	}
	for _, c := range memCaches(b) {
		var per [2]float64
		for i, k := range []int{1, 21} {
			h0, _ := live()
			done := deltaStreams(c, k)
			h1, _ := live()
			per[i] = float64(h1-h0) / memStreams
			done()
			waitFor("the streams to end", func() bool { return c.deltas() == 0 })
		}
		memory("memory.tracked", c.label, (per[1]-per[0])/20,
			fmt.Sprintf("delta stream: %.0f B at 1 resource, %.0f B at 21", per[0]-fh, per[1]-fh))
	}
	// Stored: the typed clusters handed in count (the cache keeps them).
	h0, _ := live()
	sc, err := newSnapshotCache(b.clone(), "v1", true)
	must(err)
	h1, _ := live()
	memory("memory.stored", "snapshot", float64(h1-h0)/clusters, "typed Clusters + snapshot")
	runtime.KeepAlive(sc)
	sc = nil
	h0, _ = live()
	lc := newLinearCache(b.clone())
	h1, _ = live()
	_, _ = wildcardSpan(lc)
	h2, _ := live()
	memory("memory.stored", "linear", float64(h1-h0)/clusters,
		fmt.Sprintf("after a wildcard response (bodies marshalled and kept): %.0f B", float64(h2-h0)/clusters))
	runtime.KeepAlive(lc)
}
