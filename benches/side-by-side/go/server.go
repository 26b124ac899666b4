package main

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
)

// Server: a wildcard CDS request to the wire bytes of the 10 000-cluster response, on a
// new stream. "fresh": the cache loaded (untimed) just before, the request the first it
// serves; "update": one cluster changed (untimed) on a cache already used, the request
// the first at that revision; "hot": a further stream at the same revision.

const node = "envoy-0"

func resourcesOf(clusters []*clusterv3.Cluster) []types.Resource {
	out := make([]types.Resource, len(clusters))
	for i, c := range clusters {
		out[i] = c
	}
	return out
}

// newSnapshotCache is an ADS SnapshotCache when ads; in ADS mode v0.14.0 answers a SotW
// request by name only if it names every resource of the node's snapshot (its `superset`
// check), so the by-name workloads use a non-ADS cache.
func newSnapshotCache(clusters []*clusterv3.Cluster, version string, ads bool) (cache.SnapshotCache, error) {
	snap, err := cache.NewSnapshot(version, map[string][]types.Resource{cds: resourcesOf(clusters)})
	if err != nil {
		return nil, err
	}
	c := cache.NewSnapshotCache(ads, cache.IDHash{}, nil)
	return c, c.SetSnapshot(context.Background(), node, snap)
}

func newLinearCache(clusters []*clusterv3.Cluster) *cache.LinearCache {
	m := make(map[string]types.Resource, len(clusters))
	for _, c := range clusters {
		m[c.GetName()] = c
	}
	return cache.NewLinearCache(cds, cache.WithInitialResources(m))
}

// wildcardSpan times one wildcard request on a new stream, to the wire bytes.
func wildcardSpan(c cache.ConfigWatcher) (time.Duration, []byte) {
	s := newSotwStream(node, nil)
	var out []byte
	var err error
	d := timed(func() {
		if err = s.request(c); err == nil {
			out, err = s.send()
		}
	})
	must(err)
	return d, out
}

// checkResponse decodes wire and checks it carries exactly bodies (any order).
func checkResponse(label string, wire []byte, bodies [][]byte) {
	var resp discovery.DiscoveryResponse
	must(proto.Unmarshal(wire, &resp))
	got := make([][]byte, 0, len(resp.GetResources()))
	for _, a := range resp.GetResources() {
		if a.GetTypeUrl() != cds {
			panic(label + ": type url " + a.GetTypeUrl())
		}
		got = append(got, a.GetValue())
	}
	want := append([][]byte(nil), bodies...)
	less := func(s [][]byte) func(i, j int) bool {
		return func(i, j int) bool { return bytes.Compare(s[i], s[j]) < 0 }
	}
	sort.Slice(got, less(got))
	sort.Slice(want, less(want))
	if len(got) != len(want) {
		panic(fmt.Sprintf("%s: %d resources, want %d", label, len(got), len(want)))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			panic(label + ": not the same bodies")
		}
	}
}

func runServer(b *Bodies, iterations int) {
	hotSnap, err := newSnapshotCache(b.clone(), "v1", true)
	must(err)
	hotLinear := newLinearCache(b.clone())
	updLinear := newLinearCache(b.clone())
	_, first := wildcardSpan(updLinear)
	checkResponse("linear, update", first, b.GoRaw)

	_, out := wildcardSpan(hotSnap)
	checkResponse("snapshot", out, b.GoRaw)
	_, out = wildcardSpan(hotLinear)
	checkResponse("linear", out, b.GoRaw)

	snapGeneration, linearGeneration := 0, 0
	interleave("server", iterations, []Contender{
		{"snapshot, fresh", func() time.Duration {
			c, err := newSnapshotCache(b.clone(), "v1", true)
			must(err)
			d, _ := wildcardSpan(c)
			return d
		}},
		{"snapshot, update", func() time.Duration {
			// A new snapshot (one cluster changed) set on the cache already used.
			snapGeneration++
			clusters := append([]*clusterv3.Cluster(nil), b.Typed...)
			clusters[0] = b.Changed[snapGeneration%2]
			snap, err := cache.NewSnapshot(fmt.Sprintf("v%d", snapGeneration+1), map[string][]types.Resource{cds: resourcesOf(clusters)})
			must(err)
			must(hotSnap.SetSnapshot(context.Background(), node, snap))
			d, _ := wildcardSpan(hotSnap)
			return d
		}},
		{"snapshot, hot", func() time.Duration {
			d, _ := wildcardSpan(hotSnap)
			return d
		}},
		{"linear, fresh", func() time.Duration {
			c := newLinearCache(b.clone())
			d, _ := wildcardSpan(c)
			return d
		}},
		{"linear, update", func() time.Duration {
			linearGeneration++
			changed := b.Changed[linearGeneration%2]
			must(updLinear.UpdateResource(changed.GetName(), changed))
			d, _ := wildcardSpan(updLinear)
			return d
		}},
		{"linear, hot", func() time.Duration {
			d, _ := wildcardSpan(hotLinear)
			return d
		}},
	})
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
