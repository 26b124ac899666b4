package xdssansio_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc"

	xdssansio "github.com/xds-sansio/xds-sansio/bindings/go"
)

// grpc-go's xDS client resolves xds:///echo.test through the in-process control plane,
// follows an endpoint change, NACKs an invalid Cluster and ACKs its fix; the checker then
// finds no broken rule in what it sent (nor in what the model sent).
func TestGrpcGoXdsClientThroughTheControlPlaneBreaksNoRule(t *testing.T) {
	plane, port2, conn := servedChain(t, xdssansio.ControlPlaneOptions{}, "xds-sansio-go-test")
	defer plane.Close()

	waitFor(t, "an RPC to B1", func() bool { return call(conn) == "B1" })
	must(t, plane.SetResource(endpoints(port2)))
	waitFor(t, "an RPC to B2", func() bool { return call(conn) == "B2" })
	must(t, plane.SetResource(cluster(false)))
	waitFor(t, "the NACK of the STATIC Cluster", func() bool {
		for _, r := range cdsRequests(t, plane) {
			if _, nack := r["errorDetail"]; nack {
				return true
			}
		}
		return false
	})
	must(t, plane.SetResource(cluster(true)))
	waitFor(t, "the ACK of the fixed Cluster", func() bool {
		rs := cdsRequests(t, plane)
		_, nack := rs[len(rs)-1]["errorDetail"]
		return !nack
	})
	if got := call(conn); got != "B2" {
		t.Fatalf("after the fix: %s", got)
	}
	_ = conn.Close()
	must(t, plane.Stop())

	records, err := plane.Records()
	must(t, err)
	seen := map[string]bool{}
	for _, r := range requests(t, records) {
		seen[r["typeUrl"].(string)] = true
	}
	for _, typeURL := range []string{ldsType, rdsType, cdsType, edsType} {
		if !seen[typeURL] {
			t.Fatalf("the client never asked for %s", typeURL)
		}
	}
	findings, err := plane.Findings("")
	must(t, err)
	for _, f := range findings {
		t.Errorf("%s line %d: %s: %s (%s)", f.Side, f.Line, f.Rule, f.Detail, f.Passage)
	}

	// The same recording with an ACK naming a nonce never sent: the checker must find it,
	// so the clean verdict above comes from a checker able to fail.
	lines := strings.Split(strings.TrimSpace(records), "\n")
	at := -1
	for i, text := range lines {
		var entry map[string]any
		must(t, json.Unmarshal([]byte(text), &entry))
		if message, ok := entry["message"].(map[string]any); ok && entry["dir"] == "C->S" && message["responseNonce"] != nil {
			message["responseNonce"] = "never-sent"
			b, _ := json.Marshal(entry)
			lines[i], at = string(b), i+1
			break
		}
	}
	broken, err := xdssansio.Check(strings.Join(lines, "\n"), xdssansio.CheckOptions{Side: "client"})
	must(t, err)
	if len(broken) != 1 || broken[0].Rule != "nonce-unknown" || broken[0].Line != at {
		t.Fatalf("expected nonce-unknown at line %d, got %+v", at, broken)
	}
}

// servedChain starts a control plane with options serving the LDS -> RDS -> CDS -> EDS
// chain to backend B1, starts B2, and returns the plane, B2's port and grpc-go's xDS
// channel to it as node.
func servedChain(t *testing.T, options xdssansio.ControlPlaneOptions, node string) (*xdssansio.ControlPlane, int, *grpc.ClientConn) {
	plane, err := xdssansio.StartControlPlane(options)
	if err != nil {
		t.Fatal(err)
	}
	port1, port2 := backend(t, "B1"), backend(t, "B2")
	must(t, plane.SetResource(listener(t)))
	must(t, plane.SetResource(route()))
	must(t, plane.SetResource(cluster(true)))
	must(t, plane.SetResource(endpoints(port1)))
	return plane, port2, xdsChannel(t, plane.Address(), node)
}

func cdsRequests(t *testing.T, plane *xdssansio.ControlPlane) []map[string]any {
	records, err := plane.Records()
	must(t, err)
	var out []map[string]any
	for _, r := range requests(t, records) {
		if r["typeUrl"] == cdsType {
			out = append(out, r)
		}
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
