package xdssansio_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	xdssansio "github.com/xds-sansio/xds-sansio/bindings/go"
)

// recorder writes go-control-plane's view of each stream in the record format
// (docs/record-format.md), messages as base64 of their binary encoding.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) add(dir string, stream int64, m proto.Message) {
	body, err := proto.Marshal(m)
	if err != nil {
		return
	}
	line, _ := json.Marshal(map[string]any{
		"dir": dir, "stream": stream, "variant": "sotw",
		"binary": base64.StdEncoding.EncodeToString(body),
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, string(line))
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// A conversation that is none of ours: grpc-go's xDS client and go-control-plane's
// SnapshotCache server, recorded through go-control-plane's callbacks, is checked by
// the model's checker: both sides, every line.
func TestGoControlPlaneConversationIsChecked(t *testing.T) {
	const node = "xds-sansio-go-gcp"
	rec := &recorder{}
	callbacks := serverv3.CallbackFuncs{
		StreamRequestFunc: func(id int64, req *discoveryv3.DiscoveryRequest) error {
			rec.add("C->S", id, req)
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			rec.add("S->C", id, resp)
		},
	}
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	port1, port2 := backend(t, "B1"), backend(t, "B2")
	publish := func(version string, port int) {
		snapshot, err := cachev3.NewSnapshot(version, map[string][]types.Resource{
			ldsType: {listener(t)}, rdsType: {route()}, cdsType: {cluster(true)}, edsType: {endpoints(port)},
		})
		must(t, err)
		must(t, cache.SetSnapshot(context.Background(), node, snapshot))
	}
	publish("1", port1)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	server := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(server, serverv3.NewServer(context.Background(), cache, callbacks))
	go func() { _ = server.Serve(lis) }()
	defer server.Stop()

	conn := xdsChannel(t, lis.Addr().String(), node)
	waitFor(t, "an RPC to B1", func() bool { return call(conn) == "B1" })
	publish("2", port2)
	waitFor(t, "an RPC to B2", func() bool { return call(conn) == "B2" })
	_ = conn.Close()
	server.Stop()

	records := rec.text()
	if n := len(requests(t, records)); n < 8 {
		t.Fatalf("only %d requests recorded: %s", n, records)
	}
	findings, err := xdssansio.Check(records, xdssansio.CheckOptions{})
	must(t, err)
	for _, f := range findings {
		t.Errorf("%s line %d: %s: %s (%s)", f.Side, f.Line, f.Rule, f.Detail, f.Passage)
	}
	compareWithTheModelClient(t, node, records)
}

// compareWithTheModelClient steps the model's client through the same conversation: it
// subscribes to what grpc-go subscribed to, when grpc-go did, and is handed every response
// go-control-plane sent. Each response must be answered alike by both clients: an ACK of
// the same version, or a NACK by both.
func compareWithTheModelClient(t *testing.T, node, records string) {
	model, err := xdssansio.NewStepper(xdssansio.StepperOptions{NodeID: node})
	must(t, err)
	defer model.Close()
	_, err = model.Connected()
	must(t, err)
	subscribed := map[string]map[string]bool{}
	real := map[string]*discoveryv3.DiscoveryRequest{}   // response nonce -> grpc-go's answer
	theirs := map[string]*discoveryv3.DiscoveryRequest{} // response nonce -> the model's answer
	for _, text := range strings.Split(records, "\n") {
		var entry struct {
			Dir    string `json:"dir"`
			Binary []byte `json:"binary"`
		}
		must(t, json.Unmarshal([]byte(text), &entry))
		if entry.Dir == "C->S" {
			var request discoveryv3.DiscoveryRequest
			must(t, proto.Unmarshal(entry.Binary, &request))
			if subscribed[request.TypeUrl] == nil {
				subscribed[request.TypeUrl] = map[string]bool{}
			}
			var added []string
			for _, name := range request.ResourceNames {
				if !subscribed[request.TypeUrl][name] {
					subscribed[request.TypeUrl][name] = true
					added = append(added, name)
				}
			}
			if len(added) > 0 {
				_, err := model.Subscribe(request.TypeUrl, added...)
				must(t, err)
			}
			if _, seen := real[request.ResponseNonce]; request.ResponseNonce != "" && !seen {
				real[request.ResponseNonce] = &request
			}
			continue
		}
		var response discoveryv3.DiscoveryResponse
		must(t, proto.Unmarshal(entry.Binary, &response))
		step, err := model.HandleMessage(&response)
		must(t, err)
		for _, m := range step.Messages {
			var request discoveryv3.DiscoveryRequest
			must(t, proto.Unmarshal(m.Bytes, &request))
			if request.ResponseNonce == response.Nonce {
				theirs[response.Nonce] = &request
			}
		}
	}
	if len(real) < 4 {
		t.Fatalf("grpc-go answered only %d responses", len(real))
	}
	for nonce, answer := range real {
		model, ok := theirs[nonce]
		switch {
		case !ok:
			t.Errorf("response %s: grpc-go answered (version %q), the model did not", nonce, answer.VersionInfo)
		case model.VersionInfo != answer.VersionInfo || (model.ErrorDetail == nil) != (answer.ErrorDetail == nil):
			t.Errorf("response %s: grpc-go answered version %q (error %v), the model %q (error %v)",
				nonce, answer.VersionInfo, answer.ErrorDetail, model.VersionInfo, model.ErrorDetail)
		}
	}
	if !t.Failed() {
		t.Logf("grpc-go and the model answered %d responses of go-control-plane alike", len(real))
	}
}
