package main

import (
	"context"
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
)

// Fan-out: cluster 0 of the 10 000 changes; timed from the change handed to the cache to
// the wire bytes of every one of the 1 000 streams' responses. The ACKs that follow are
// fed untimed. SnapshotCache: its 1 000 watches are of one node (it keys snapshots and
// watches by node, so one SetSnapshot reaches them all: its cheapest case); the new
// snapshot is built untimed, SetSnapshot is timed. LinearCache: UpdateResource timed.

const streams = 1_000

// byName is what stream s subscribes to in the "by name" variant: the changed cluster and
// nine of its own (10s+1 .. 10s+9).
func byName(s int) []string {
	names := []string{clusterName(0)}
	for k := 1; k <= 9; k++ {
		names = append(names, clusterName(10*s+k))
	}
	return names
}

func clusterName(i int) string { return fmt.Sprintf("cluster-%05d", i) }

// fanout is one contender's fleet: its cache, its streams, how to change cluster 0.
type fanout struct {
	cache   cache.ConfigWatcher
	sotw    []*sotwStream
	delta   []*deltaStream
	change  func(c *clusterv3.Cluster) // timed
	prepare func(c *clusterv3.Cluster) // untimed, before change
	round   int
	// want is the number of resources every response must carry.
	want int
}

func newFanout(b *Bodies, kind, variant string) *fanout {
	f := &fanout{}
	switch kind {
	case "snapshot":
		sc, err := newSnapshotCache(b.Typed, "v0", variant != "sotw-names")
		must(err)
		var snap *cache.Snapshot
		f.cache = sc
		f.prepare = func(c *clusterv3.Cluster) {
			clusters := append([]*clusterv3.Cluster(nil), b.Typed...)
			clusters[0] = c
			var err error
			snap, err = cache.NewSnapshot(fmt.Sprintf("v%d", f.round), map[string][]types.Resource{cds: resourcesOf(clusters)})
			must(err)
		}
		f.change = func(*clusterv3.Cluster) { must(sc.SetSnapshot(context.Background(), node, snap)) }
	case "linear":
		lc := newLinearCache(b.Typed)
		f.cache = lc
		f.prepare = func(*clusterv3.Cluster) {}
		f.change = func(c *clusterv3.Cluster) { must(lc.UpdateResource(c.GetName(), c)) }
	}
	// Every stream's first response and ACK. For the wildcard variants only stream 0 gets
	// its first response from the cache; the others start from a copy of its state (the
	// returned resources and versions, shared read-only until their first timed response
	// replaces them), which is what each would hold after its own first response and ACK.
	var sotwFirst *sotwStream
	var deltaFirst *deltaStream
	for s := 0; s < streams; s++ {
		switch variant {
		case "sotw-wildcard", "sotw-names":
			var names []string
			if variant == "sotw-names" {
				names = byName(s)
			}
			st := newSotwStream(node, names)
			if variant == "sotw-wildcard" && sotwFirst != nil {
				st.sub.SetReturnedResources(sotwFirst.sub.ReturnedResources())
				st.last, st.lastNonce = sotwFirst.last, sotwFirst.lastNonce
			} else {
				must(st.request(f.cache))
				_, err := st.send()
				must(err)
				sotwFirst = st
			}
			must(st.ack(f.cache))
			f.sotw = append(f.sotw, st)
		case "delta":
			st := newDeltaStream(node, []string{"*"})
			if deltaFirst != nil {
				st.sub.SetReturnedResources(deltaFirst.sub.ReturnedResources())
				st.lastNonce = deltaFirst.lastNonce
			} else {
				must(st.request(f.cache, []string{"*"}))
				_, err := st.send()
				must(err)
				deltaFirst = st
			}
			must(st.ack(f.cache))
			f.delta = append(f.delta, st)
		}
	}
	switch variant {
	case "sotw-wildcard":
		f.want = len(b.Typed)
	case "sotw-names":
		f.want = 10
	case "delta":
		f.want = 1
	}
	return f
}

// run is one round: the change and every stream's response to wire bytes (timed), the
// ACKs (untimed); with check, each response is then decoded and its number of resources
// checked (untimed).
func (f *fanout) run(b *Bodies, check bool) time.Duration {
	f.round++
	c := b.Changed[f.round%2]
	f.prepare(c)
	outs := make([][]byte, 0, streams)
	d := timed(func() {
		f.change(c)
		for _, s := range f.sotw {
			out, err := s.send()
			must(err)
			outs = append(outs, out)
		}
		for _, s := range f.delta {
			out, err := s.send()
			must(err)
			outs = append(outs, out)
		}
	})
	if len(outs) != streams {
		panic(fmt.Sprintf("fan-out: %d responses, want %d", len(outs), streams))
	}
	if check {
		for _, out := range outs {
			n := 0
			if f.delta != nil {
				var r discovery.DeltaDiscoveryResponse
				must(proto.Unmarshal(out, &r))
				n = len(r.GetResources())
			} else {
				var r discovery.DiscoveryResponse
				must(proto.Unmarshal(out, &r))
				n = len(r.GetResources())
			}
			if n != f.want {
				panic(fmt.Sprintf("fan-out: a response with %d resources, want %d", n, f.want))
			}
		}
	}
	for _, s := range f.sotw {
		must(s.ack(f.cache))
	}
	for _, s := range f.delta {
		must(s.ack(f.cache))
	}
	return d
}

func runFanout(b *Bodies, iterations int) {
	for _, variant := range []string{"sotw-wildcard", "sotw-names", "delta"} {
		// No warm-up round (a SotW wildcard round of SnapshotCache takes tens of seconds
		// here): each contender's first timed round is checked after its timing.
		var contenders []Contender
		for _, kind := range []string{"snapshot", "linear"} {
			f := newFanout(b, kind, variant)
			contenders = append(contenders, Contender{kind, func() time.Duration { return f.run(b, f.round == 0) }})
		}
		rotate("fanout."+variant, iterations, contenders)
	}
}
