package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

// goControlPlane is go-control-plane's SotW server over a SnapshotCache, in process: every
// publication is a new snapshot (one version for every type) of the client's node.
type goControlPlane struct {
	mu      sync.Mutex
	node    string
	cache   cachev3.SnapshotCache
	xds     serverv3.Server
	grpc    *grpc.Server
	addr    string
	version int
}

func startGoControlPlane(node string, ads bool, initial []resource) (*goControlPlane, error) {
	g := &goControlPlane{node: node, cache: cachev3.NewSnapshotCache(ads, cachev3.IDHash{}, nil)}
	g.xds = serverv3.NewServer(context.Background(), g.cache, nil)
	if err := g.publish(initial); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g.addr = lis.Addr().String()
	g.serve(lis)
	return g, nil
}

func (g *goControlPlane) serve(lis net.Listener) {
	g.grpc = grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g.grpc, g.xds)
	go func(s *grpc.Server) { _ = s.Serve(lis) }(g.grpc)
}

func (g *goControlPlane) publish(resources []resource) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	byType := map[string][]types.Resource{}
	for _, r := range resources {
		byType[r.key.typeURL] = append(byType[r.key.typeURL], r.message)
	}
	g.version++
	snapshot, err := cachev3.NewSnapshot(strconv.Itoa(g.version), byType)
	if err != nil {
		return err
	}
	return g.cache.SetSnapshot(context.Background(), g.node, snapshot)
}

// endStreams has no counterpart in go-control-plane: the gRPC server is stopped (every
// connection closed) and a new one serves the same cache on the same port.
func (g *goControlPlane) endStreams() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.grpc.Stop()
	lis, err := net.Listen("tcp", g.addr)
	if err != nil {
		return fmt.Errorf("listening again on %s: %w", g.addr, err)
	}
	g.serve(lis)
	return nil
}

func (g *goControlPlane) address() string { return g.addr }

func (g *goControlPlane) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.grpc.Stop()
}
