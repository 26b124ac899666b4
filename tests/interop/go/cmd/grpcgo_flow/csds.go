package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"time"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds/csds"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// seen is one resource as the client reports it through CSDS.
type seen struct {
	Status        string `json:"status"`
	Version       string `json:"version"`
	Error         string `json:"error,omitempty"`
	FailedVersion string `json:"failed_version,omitempty"`
	body          []byte
}

// startCSDS serves grpc-go's CSDS service on an admin server and returns a client of it.
func startCSDS() (statusv3.ClientStatusDiscoveryServiceClient, func()) {
	service, err := csds.NewClientStatusDiscoveryServer()
	if err != nil {
		fail("CSDS: %v", err)
	}
	admin := grpc.NewServer()
	statusv3.RegisterClientStatusDiscoveryServiceServer(admin, service)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("CSDS: %v", err)
	}
	go func() { _ = admin.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("CSDS: %v", err)
	}
	return statusv3.NewClientStatusDiscoveryServiceClient(conn), func() {
		_ = conn.Close()
		admin.Stop()
		service.Close()
	}
}

func csdsView(stub statusv3.ClientStatusDiscoveryServiceClient) map[key]seen {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	response, err := stub.FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
	if err != nil {
		fail("CSDS: %v", err)
	}
	view := map[key]seen{}
	for _, config := range response.GetConfig() {
		for _, g := range config.GetGenericXdsConfigs() {
			view[key{g.GetTypeUrl(), g.GetName()}] = seen{
				Status:        g.GetClientStatus().String(),
				Version:       g.GetVersionInfo(),
				Error:         g.GetErrorState().GetDetails(),
				FailedVersion: g.GetErrorState().GetVersionInfo(),
				body:          g.GetXdsConfig().GetValue(),
			}
		}
	}
	return view
}

func summary(view map[key]seen) map[string]string {
	out := map[string]string{}
	for k, v := range view {
		out[k.String()] = v.Status
	}
	return out
}

// compare waits until the client's CSDS view matches the store: every stored resource
// ACKED with the same content, except the keys of expect (acceptable statuses, ABSENT for
// not listed).
func compare(stub statusv3.ClientStatusDiscoveryServiceClient, st *store, step string, expect map[key][]string) map[key]seen {
	deadline := time.Now().Add(stepTimeout)
	for {
		view := csdsView(stub)
		var problems []string
		keys := append([]key(nil), st.keys...)
		for k := range expect {
			if _, ok := st.resources[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			want, ok := expect[k]
			if !ok {
				want = []string{"ACKED"}
			}
			status := "ABSENT"
			got, present := view[k]
			if present {
				status = got.Status
			}
			if !contains(want, status) {
				problems = append(problems, fmt.Sprintf("%s: %s (want %v)", k, status, want))
			} else if status == "ACKED" && st.resources[k] != nil {
				held := st.resources[k].ProtoReflect().New().Interface()
				if err := proto.Unmarshal(got.body, held); err != nil || !sameResource(held, st.resources[k]) {
					problems = append(problems, fmt.Sprintf("%s: CSDS content differs from the store", k))
				}
			}
		}
		if len(problems) == 0 {
			rep.Steps = append(rep.Steps, map[string]any{"step": step, "csds": summary(view)})
			logf("CSDS after %s: %v", step, summary(view))
			return view
		}
		if time.Now().After(deadline) {
			shown := map[string]seen{}
			for k, v := range view {
				shown[k.String()] = v
			}
			fail("CSDS after %s: %v; CSDS view: %v", step, problems, shown)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sameResource compares two resources by content, the Anys inside unpacked: the server
// may encode a nested message's fields in another order than Go does (oneofs last).
func sameResource(a, b proto.Message) bool {
	ja, errA := protojson.Marshal(a)
	jb, errB := protojson.Marshal(b)
	if errA != nil || errB != nil {
		return proto.Equal(a, b)
	}
	var va, vb any
	return json.Unmarshal(ja, &va) == nil && json.Unmarshal(jb, &vb) == nil && reflect.DeepEqual(va, vb)
}
