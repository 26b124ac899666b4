package xdssansio_test

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	xdssansio "github.com/xds-sansio/xds-sansio/bindings/go"
)

// A client that breaks a rule on a live stream is named by the control plane's findings:
// the clean verdicts of the other tests come from a recording that can convict.
func TestTheControlPlaneConvictsAClientThatAcksANonceNeverSent(t *testing.T) {
	plane, err := xdssansio.StartControlPlane(xdssansio.ControlPlaneOptions{})
	must(t, err)
	defer plane.Close()
	must(t, plane.SetResource(endpoints(1234)))
	conn, err := grpc.NewClient(plane.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	must(t, err)
	must(t, stream.Send(&discoveryv3.DiscoveryRequest{
		Node: &corev3.Node{Id: "rogue"}, TypeUrl: edsType, ResourceNames: []string{"cluster-1"},
	}))
	response, err := stream.Recv()
	must(t, err)
	if len(response.Resources) != 1 {
		t.Fatalf("expected cluster-1's endpoints, got %v", response)
	}
	// The ACK names a nonce the server never sent.
	must(t, stream.Send(&discoveryv3.DiscoveryRequest{
		TypeUrl: edsType, ResourceNames: []string{"cluster-1"},
		VersionInfo: response.VersionInfo, ResponseNonce: "never-sent",
	}))
	waitFor(t, "the rogue ACK in the recording", func() bool {
		records, err := plane.Records()
		return err == nil && len(requests(t, records)) == 2
	})
	findings, err := plane.Findings("client")
	must(t, err)
	if len(findings) != 1 || findings[0].Rule != "nonce-unknown" {
		t.Fatalf("expected nonce-unknown, got %+v", findings)
	}
	server, err := plane.Findings("server")
	must(t, err)
	if len(server) != 0 {
		t.Fatalf("the model's server broke a rule: %+v", server)
	}
}
