package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// TestClusterBytes pins the wire layout the Rust side of the benchmark also serves.
func TestClusterBytes(t *testing.T) {
	b, err := proto.Marshal(cluster(7, 7))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != clusterSize {
		t.Fatalf("%d bytes, want %d", len(b), clusterSize)
	}
	if b[0] != 0x0a || b[1] != 12 || string(b[2:14]) != "cluster-0007" {
		t.Errorf("name field: % x", b[:14])
	}
	if !bytes.Equal(b[14:16], []byte{0xe2, 0x01}) {
		t.Errorf("alt_stat_name tag: % x", b[14:16])
	}
	if !bytes.Equal(b[16:18], []byte{0x84, 0x01}) { // varint 132
		t.Errorf("alt_stat_name length: % x", b[16:18])
	}
	if !strings.HasPrefix(string(b[18:]), "t00000007-") || len(b[18:]) != 132 {
		t.Errorf("alt_stat_name: %q", b[18:])
	}
}

// start runs run in-process on pipes; it returns the server's address, the stdin to
// write lines to, and a function that closes stdin and checks that run returned nil.
func start(t *testing.T) (addr string, stdin io.Writer, stop func()) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(context.Background(), inR, outW)
		outW.CloseWithError(err) // unblocks the read below if run failed early
		done <- err
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no listening line: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "listening ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	return addr, inW, func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
}

func dial(t *testing.T, addr string) discovery.AggregatedDiscoveryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return discovery.NewAggregatedDiscoveryServiceClient(cc)
}

func TestSotw(t *testing.T) {
	addr, stdin, stop := start(t)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := dial(t, addr).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "anything"}, TypeUrl: resource.ClusterType}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetResources()) != clusters || r.GetVersionInfo() != "0" {
		t.Fatalf("first response: %d resources, version %q", len(r.GetResources()), r.GetVersionInfo())
	}
	ack := &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}
	if err := st.Send(ack); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "tick 3\n"); err != nil {
		t.Fatal(err)
	}
	r, err = st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetResources()) != clusters || r.GetVersionInfo() != "3" {
		t.Fatalf("second response: %d resources, version %q", len(r.GetResources()), r.GetVersionInfo())
	}
	found := false
	for _, a := range r.GetResources() {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if c.GetName() == "cluster-0000" {
			found = true
			if !strings.HasPrefix(c.GetAltStatName(), "t00000003-") {
				t.Errorf("cluster-0000 alt_stat_name %q", c.GetAltStatName())
			}
		}
	}
	if !found {
		t.Error("no cluster-0000")
	}
}

func TestDeltaWildcard(t *testing.T) {
	addr, _, stop := start(t)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := dial(t, addr).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "other-node"}, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}}
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetResources()) != clusters {
		t.Fatalf("%d resources, want %d", len(r.GetResources()), clusters)
	}
}

// TestBadLine: a line other than "tick N" is an error (main exits 2 on it).
func TestBadLine(t *testing.T) {
	for _, line := range []string{"tock 1", "tick", "tick -1", "tick x", "tick 100000000"} {
		if err := newStorm().handle(context.Background(), line); err == nil {
			t.Errorf("%q accepted", line)
		}
	}
}

// TestImmediateEOF: stdin may end before Serve has even started; that is still exit 0.
func TestImmediateEOF(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), strings.NewReader(""), &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.HasPrefix(out.String(), "listening 127.0.0.1:") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("stdout %q", out.String())
	}
}
