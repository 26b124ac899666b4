// Command storm is the go-control-plane side of the connection-storm benchmark: its real
// ADS server (SotW and delta) on a grpc-go server, as an operator would run it, serving
// one snapshot of 1 000 clusters to every client, whatever its node id.
//
// Protocol with the parent (the Rust benchmark): once it serves, storm prints one line,
// "listening 127.0.0.1:PORT", and nothing else to stdout. Each stdin line "tick N" sets
// snapshot version N, where cluster-0000 carries tick N. Stdin EOF stops the server
// (not gracefully: clients may hold streams open) and exits 0; any other line, or any
// error, goes to stderr with exit status 2.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

const (
	clusters    = 1000
	clusterSize = 150 // proto.Marshal size of every cluster; the Rust side serves the same
	nodeKey     = "storm"
	maxTick     = 99_999_999 // the most "t%08d-" holds in 9 bytes (keeping clusterSize)
)

// stormHash maps every node to one cache key: clients use various node ids, and all
// must get the same snapshot.
type stormHash struct{}

func (stormHash) ID(*corev3.Node) string { return nodeKey }

// cluster i at tick: a 12-byte name and a 132-byte alt_stat_name (field 28, so a two-byte
// tag), which marshal to exactly clusterSize bytes.
func cluster(i int, tick uint64) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:        fmt.Sprintf("cluster-%04d", i),
		AltStatName: fmt.Sprintf("t%08d-", tick) + strings.Repeat("x", 122),
	}
}

// storm owns the cache; the 999 clusters that never change are built once and shared by
// every snapshot, so a tick costs one new cluster and the snapshot's own index.
type storm struct {
	cache  cache.SnapshotCache
	static []types.Resource // clusters 1..999 at tick 0
}

func newStorm() *storm {
	s := &storm{cache: cache.NewSnapshotCache(true, stormHash{}, nil)}
	for i := 1; i < clusters; i++ {
		s.static = append(s.static, cluster(i, 0))
	}
	return s
}

// set makes version tick the snapshot of every node: cluster-0000 at tick, the rest at 0.
func (s *storm) set(ctx context.Context, tick uint64) error {
	if tick > maxTick {
		return fmt.Errorf("tick %d exceeds %d", tick, maxTick)
	}
	first := cluster(0, tick)
	if n := proto.Size(first); n != clusterSize {
		return fmt.Errorf("cluster-0000 marshals to %d bytes, not %d", n, clusterSize)
	}
	res := append([]types.Resource{first}, s.static...)
	snap, err := cache.NewSnapshot(strconv.FormatUint(tick, 10), map[resource.Type][]types.Resource{resource.ClusterType: res})
	if err != nil {
		return err
	}
	if err := snap.Consistent(); err != nil {
		return fmt.Errorf("inconsistent snapshot: %w", err)
	}
	return s.cache.SetSnapshot(ctx, nodeKey, snap)
}

// handle runs one stdin line.
func (s *storm) handle(ctx context.Context, line string) error {
	arg, ok := strings.CutPrefix(line, "tick ")
	if !ok {
		return fmt.Errorf("unexpected line %q (want \"tick N\")", line)
	}
	tick, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		return fmt.Errorf("unexpected line %q: %w", line, err)
	}
	return s.set(ctx, tick)
}

// run serves until stdin ends (nil) or a line is wrong (its error). It is main without
// the process: tests drive it through pipes.
func run(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newStorm()
	if err := s.set(ctx, 0); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// Clients multiplex 100 streams per connection: never refuse one. All else default.
	gs := grpc.NewServer(grpc.MaxConcurrentStreams(1 << 20))
	discovery.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, s.cache, nil))
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	defer gs.Stop() // also on a wrong line, for in-process callers

	// os.Stdout is unbuffered: the line is out once Fprintf returns.
	if _, err := fmt.Fprintf(stdout, "listening %s\n", lis.Addr()); err != nil {
		return err
	}
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done(): // run returned
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		select {
		case line := <-lines:
			if err := s.handle(ctx, line); err != nil {
				return err
			}
		case err := <-readErr: // EOF (nil) or a read error
			if err != nil {
				return err
			}
			gs.Stop()
			// Serve returns nil once stopped, or ErrServerStopped if Stop came first.
			if err := <-served; !errors.Is(err, grpc.ErrServerStopped) {
				return err
			}
			return nil
		case err := <-served: // Serve failed by itself: clients can no longer connect
			return fmt.Errorf("grpc server: %w", err)
		}
	}
}

func main() {
	if err := run(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(2)
	}
}
