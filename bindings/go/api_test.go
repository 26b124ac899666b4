package xdssansio_test

import (
	"errors"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	xdssansio "github.com/xds-sansio/xds-sansio/bindings/go"
)

func TestAMalformedRecordIsAnErrorNamingItsLine(t *testing.T) {
	_, err := xdssansio.Check("{\"record\":\"xds-sansio\",\"version\":1}\n{\"dir\":\"C->S\",\"message\":{}}\n{oops\n", xdssansio.CheckOptions{})
	var e *xdssansio.Error
	if !errors.As(err, &e) || e.Kind != "record" || e.Line != 3 {
		t.Fatalf("expected a record error at line 3, got %v", err)
	}
}

func TestReplayDrawsAndNamesABadLine(t *testing.T) {
	scenario := "title: Simple ACK\nmodel: both\nvariant: sotw\n\nclient subscribe EDS foo\nserver set EDS foo:a\n" +
		"C->S (V=,R={foo},N=,T=EDS)\nS->C (V=X,R={foo:a},N=A,T=EDS)\nC->S (V=X,R={foo},N=A,T=EDS) [ack]\n"
	report, err := xdssansio.Replay(scenario, "ack.xds")
	must(t, err)
	if !report.Passed || !strings.Contains(report.Diagram, "=> PASS") {
		t.Fatalf("%s", report.Diagram)
	}
	wrong, err := xdssansio.Replay(strings.Replace(scenario, "N=A,T=EDS) [ack]", "N=B,T=EDS) [ack]", 1), "x")
	must(t, err)
	if wrong.Passed {
		t.Fatal("a wrong nonce passed")
	}
	_, err = xdssansio.Replay("model: both\n\nclient frobnicate EDS foo\n", "bad")
	var e *xdssansio.Error
	if !errors.As(err, &e) || e.Kind != "scenario" || e.Line != 3 {
		t.Fatalf("expected a scenario error at line 3, got %v", err)
	}
}

// The model's client and server, stepped with go-control-plane's generated messages.
func TestTheStepperSpeaksGeneratedMessages(t *testing.T) {
	client, err := xdssansio.NewStepper(xdssansio.StepperOptions{NodeID: "n"})
	must(t, err)
	defer client.Close()
	server, err := xdssansio.NewStepper(xdssansio.StepperOptions{Role: "server"})
	must(t, err)
	defer server.Close()
	body, _ := proto.Marshal(endpoints(1234))
	_, err = server.Set(edsType, body)
	must(t, err)
	_, err = client.Subscribe(edsType, "cluster-1")
	must(t, err)
	first, err := client.Connected()
	must(t, err)
	var request discoveryv3.DiscoveryRequest
	must(t, proto.Unmarshal(first.Messages[0].Bytes, &request))
	if request.GetNode().GetId() != "n" || request.ResourceNames[0] != "cluster-1" {
		t.Fatalf("first request: %v", &request)
	}
	answer, err := server.HandleMessage(&request)
	must(t, err)
	var response discoveryv3.DiscoveryResponse
	must(t, proto.Unmarshal(answer.Messages[0].Bytes, &response))
	step, err := client.HandleMessage(&response)
	must(t, err)
	var ack discoveryv3.DiscoveryRequest
	must(t, proto.Unmarshal(step.Messages[0].Bytes, &ack))
	if ack.ResponseNonce != response.Nonce || ack.VersionInfo != response.VersionInfo {
		t.Fatalf("ack %v for %v", &ack, &response)
	}
	acked, err := server.HandleMessage(&ack)
	must(t, err)
	if !strings.Contains(strings.Join(acked.Kinds(), ","), "Acked") {
		t.Fatalf("events %v", acked.Kinds())
	}
	_, err = server.Handle([]byte{0xff, 0xff})
	var e *xdssansio.Error
	if !errors.As(err, &e) || e.Kind != "message" {
		t.Fatalf("expected a message error, got %v", err)
	}
}
