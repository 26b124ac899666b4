package xdssansio_test

import (
	"testing"

	xdssansio "github.com/xds-sansio/xds-sansio/bindings/go"
)

// grpc-go's xDS client against the test control plane's faults: its first stream is
// refused, every endpoint response comes twice, and the first NACKed Cluster is sent
// again. It still resolves, follows a change, NACKs the resent Cluster too, ACKs the fix,
// and breaks no rule of the client's side.
func TestGrpcGoXdsClientThroughAFaultyControlPlaneBreaksNoRule(t *testing.T) {
	plane, port2, conn := servedChain(t, xdssansio.ControlPlaneOptions{
		Faults: "refuse status=UNAVAILABLE stream=1\n" +
			"duplicate type=eds\n" +
			"resend-nacked type=cds nth=1\n",
		Seed: 11,
	}, "xds-sansio-go-faults")
	defer plane.Close()

	waitFor(t, "an RPC to B1 after the refused stream", func() bool { return call(conn) == "B1" })
	must(t, plane.SetResource(endpoints(port2)))
	waitFor(t, "an RPC to B2", func() bool { return call(conn) == "B2" })
	must(t, plane.SetResource(cluster(false)))
	waitFor(t, "two NACKs of the STATIC Cluster (it was sent again)", func() bool {
		nacks := 0
		for _, r := range cdsRequests(t, plane) {
			if _, nack := r["errorDetail"]; nack {
				nacks++
			}
		}
		return nacks >= 2
	})
	if got := call(conn); got != "B2" {
		t.Fatalf("after the NACKs: %s", got)
	}
	must(t, plane.SetResource(cluster(true)))
	waitFor(t, "the ACK of the fixed Cluster", func() bool {
		rs := cdsRequests(t, plane)
		_, nack := rs[len(rs)-1]["errorDetail"]
		return !nack
	})
	_ = conn.Close()
	must(t, plane.Stop())
	findings, err := plane.Findings("client")
	must(t, err)
	for _, f := range findings {
		t.Errorf("%s line %d: %s: %s (%s)", f.Side, f.Line, f.Rule, f.Detail, f.Passage)
	}
}
