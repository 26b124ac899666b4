// gzip_ads: grpc-go 1.85.0's gRPC transport with gzip against our ads_server (built with
// the gzip feature, run with --compress gzip). grpc-go's xDS client has no compression
// option, so this opens the ADS stream itself: a CDS request for the Clusters of the
// resources file, sent gzip-compressed; the response must come back gzip-compressed
// (the response header's grpc-encoding, and the message decompressed by gzip) and decode
// to those Clusters; the ACK must reach the server (its --record). With --expect-refused the server runs without --compress
// and the compressed request must be refused with UNIMPLEMENTED.
//
// usage: gzip_ads --server ADDR --resources FILE [--record FILE] [--expect-refused]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

const (
	cdsType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	node    = "client"
	timeout = 20 * time.Second
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[gzip_ads] FAILED: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) { fmt.Printf("[gzip_ads] "+format+"\n", args...) }

func main() {
	server := flag.String("server", "", "the ads_server's address (127.0.0.1:PORT)")
	resources := flag.String("resources", "", "the resources file the server serves")
	record := flag.String("record", "", "the server's --record file, to see the ACK arrive")
	expectRefused := flag.Bool("expect-refused", false, "the server does not accept gzip")
	flag.Parse()
	if *server == "" || *resources == "" {
		fail("usage: gzip_ads --server ADDR --resources FILE [--record FILE] [--expect-refused]")
	}
	expected := clustersOf(*resources)

	counter := installCountingGzip()
	headers := &headerEncodings{}
	conn, err := grpc.NewClient(*server, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(headers))
	if err != nil {
		fail("dial %s: %v", *server, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	stream, err := ads.StreamAggregatedResources(ctx, grpc.UseCompressor(gzip.Name))
	if err != nil {
		fail("open the ADS stream: %v", err)
	}
	names := sortedKeys(expected)
	request := &discoveryv3.DiscoveryRequest{
		Node: &corev3.Node{Id: node}, TypeUrl: cdsType, ResourceNames: names,
	}
	if err := stream.Send(request); err != nil {
		if err != io.EOF {
			fail("send the CDS request: %v", err)
		}
		// The server ended the stream before the request went out (a refusal can come
		// that early): its status is what Recv returns.
		_, err = stream.Recv()
		if *expectRefused {
			refused(err)
			return
		}
		fail("the server ended the stream before the request: %v", err)
	}
	if counter.compressed.Load() != 1 {
		fail("the request was not compressed by gzip (%d compressions)", counter.compressed.Load())
	}
	logf("1. CDS request for %v sent gzip-compressed", names)
	response, err := stream.Recv()
	if *expectRefused {
		refused(err)
		return
	}
	if err != nil {
		fail("receive the CDS response: %v", err)
	}
	if got := headers.list(); len(got) != 1 || got[0] != gzip.Name {
		fail("the response header's grpc-encoding is %q, not gzip", got)
	}
	if counter.decompressed.Load() != 1 {
		fail("the response message was not gzip-compressed (%d decompressions)", counter.decompressed.Load())
	}
	logf("2. response V=%s N=%s arrived gzip-compressed (grpc-encoding gzip, message decompressed by gzip)",
		response.VersionInfo, response.Nonce)
	sameClusters(response, expected)
	logf("3. it decodes to the %d Clusters of %s", len(expected), *resources)

	ack := &discoveryv3.DiscoveryRequest{
		TypeUrl: cdsType, ResourceNames: names,
		VersionInfo: response.VersionInfo, ResponseNonce: response.Nonce,
	}
	if err := stream.Send(ack); err != nil {
		fail("send the ACK: %v", err)
	}
	if *record != "" {
		waitForACK(*record, response.Nonce)
		logf("4. the server recorded the gzip-compressed ACK (nonce %s)", response.Nonce)
	}
	if err := stream.CloseSend(); err != nil {
		fail("close: %v", err)
	}
}

// refused checks that a gzip request to a server that does not accept gzip ends the
// stream with UNIMPLEMENTED (the gRPC compression spec's answer to an unsupported
// grpc-encoding).
func refused(err error) {
	if err == nil {
		fail("the server answered a gzip-compressed request it should not accept")
	}
	st := status.Convert(err)
	if st.Code() != codes.Unimplemented {
		fail("expected UNIMPLEMENTED for an unaccepted grpc-encoding, got %v: %s", st.Code(), st.Message())
	}
	logf("2. refused as expected: %v: %s", st.Code(), st.Message())
}

// clustersOf reads the Clusters of a resources file (ads_server's format: an Any in
// canonical JSON, bare or under "resource").
func clustersOf(path string) map[string]*clusterv3.Cluster {
	text, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	var file struct {
		Resources []json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(text, &file); err != nil {
		fail("%s: %v", path, err)
	}
	out := map[string]*clusterv3.Cluster{}
	for _, raw := range file.Resources {
		var wrapped struct {
			Type     string          `json:"@type"`
			Resource json.RawMessage `json:"resource"`
		}
		_ = json.Unmarshal(raw, &wrapped)
		if wrapped.Resource != nil {
			raw = wrapped.Resource
			_ = json.Unmarshal(raw, &wrapped)
		}
		if wrapped.Type != cdsType {
			continue
		}
		var item anypb.Any
		if err := protojson.Unmarshal(raw, &item); err != nil {
			fail("%s: a Cluster: %v", path, err)
		}
		cluster := &clusterv3.Cluster{}
		if err := item.UnmarshalTo(cluster); err != nil {
			fail("%s: %v", path, err)
		}
		out[cluster.Name] = cluster
	}
	if len(out) == 0 {
		fail("%s holds no Cluster", path)
	}
	return out
}

func sameClusters(response *discoveryv3.DiscoveryResponse, expected map[string]*clusterv3.Cluster) {
	if response.TypeUrl != cdsType {
		fail("the response's type is %s", response.TypeUrl)
	}
	got := map[string]bool{}
	for _, item := range response.Resources {
		cluster := &clusterv3.Cluster{}
		if err := item.UnmarshalTo(cluster); err != nil {
			fail("a resource is not a Cluster: %v", err)
		}
		want, ok := expected[cluster.Name]
		if !ok || !proto.Equal(cluster, want) {
			fail("cluster %s differs from the file's: got %v", cluster.Name, cluster)
		}
		got[cluster.Name] = true
	}
	if len(got) != len(expected) {
		fail("got clusters %v, want %v", sortedKeys(got), sortedKeys(expected))
	}
}

// waitForACK waits until the server's recording holds a CDS request that ACKs nonce.
func waitForACK(path, nonce string) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		text, _ := os.ReadFile(path)
		for _, line := range bytes.Split(text, []byte("\n")) {
			var l struct {
				Dir     string         `json:"dir"`
				Message map[string]any `json:"message"`
			}
			if json.Unmarshal(line, &l) != nil || l.Dir != "C->S" {
				continue
			}
			_, nack := l.Message["errorDetail"]
			if l.Message["typeUrl"] == cdsType && l.Message["responseNonce"] == nonce && !nack {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	fail("the server's record %s shows no ACK of nonce %s", path, nonce)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
