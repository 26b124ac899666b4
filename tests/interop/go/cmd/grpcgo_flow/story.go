package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

const nodeID = "grpc-go-interop"

// story holds what the six steps share.
type story struct {
	store  *store
	record record
	conn   *grpc.ClientConn
	csds   statusv3.ClientStatusDiscoveryServiceClient
	// ours: the server is ours, so its part of an expectation fails the run; a
	// go-control-plane's is a deviation, listed.
	ours bool
}

func (s *story) serverMust(ok bool, format string, args ...any) {
	if ok {
		return
	}
	if s.ours {
		fail(format, args...)
	}
	deviation("server (go-control-plane): "+format, args...)
}

func run(o options) {
	backend1, port1 := startBackend("B1")
	defer backend1.Stop()
	backend2, port2 := startBackend("B2")
	defer backend2.Stop()

	s := &story{store: newStore(), ours: o.server == "ads_server"}
	s.store.set(ldsType, listener())
	s.store.set(rdsType, route())
	s.store.set(cdsType, cluster(true, false))
	s.store.set(edsType, endpoints(port1))

	if s.ours {
		s.record = record{filepath.Join(o.workdir, "record.jsonl")}
		server, err := startADSServer(o.adsServer, o.descriptors, o.workdir, s.record.path, s.store.all())
		if err != nil {
			fail("%v", err)
		}
		s.store.server = server
		rep.Server = "ads_server (xds-sansio-tonic)"
	} else {
		if os.Getenv("XDS_TAP") == "" {
			fail("--server go-control-plane reads the conversation from the tap's recording: set XDS_TAP")
		}
		server, err := startGoControlPlane(nodeID, o.adsCache, s.store.all())
		if err != nil {
			fail("go-control-plane: %v", err)
		}
		s.store.server = server
		s.record = record{filepath.Join(o.workdir, "tap.jsonl")}
		rep.Server = fmt.Sprintf("go-control-plane %s (SnapshotCache ads=%v, SotW ADS)",
			moduleVersion("github.com/envoyproxy/go-control-plane"), o.adsCache)
	}
	defer s.store.server.close()
	address := s.store.server.address()
	logf("%s at %s", rep.Server, address)
	t, tapAddress := startTap(address, o.workdir)
	defer t.stop()
	if t != nil {
		address = tapAddress
		logf("the client goes through the tap at %s", address)
	}
	writeBootstrap(os.Getenv("GRPC_XDS_BOOTSTRAP"), address)

	stub, stopCSDS := startCSDS()
	defer stopCSDS()
	s.csds = stub
	conn, err := grpc.NewClient("xds:///"+target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("channel: %v", err)
	}
	defer conn.Close()
	s.conn = conn

	s.firstFetch()
	s.nack()
	s.fixAndEndpointChange(port2)
	s.clusterRemoval()
	s.listenerRemoval()
	s.reconnect()
}

func writeBootstrap(path, address string) {
	body, _ := json.MarshalIndent(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":      address,
			"channel_creds":   []any{map[string]string{"type": "insecure"}},
			"server_features": []string{"xds_v3"},
		}},
		"node": map[string]any{"id": nodeID, "cluster": "interop", "locality": map[string]string{"zone": "z"}},
	}, "", " ")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		fail("bootstrap: %v", err)
	}
}

// 1. An RPC through xDS succeeds.
func (s *story) firstFetch() {
	waitCall(s.conn, "first RPC through xDS", func(r string) bool { return r == "B1" })
	compare(s.csds, s.store, "first fetch", nil)
	logf("1. RPC through xDS: ok")
}

// 2. An invalid Cluster is NACKed with error_detail; the server holds it.
func (s *story) nack() {
	s.store.set(cdsType, cluster(false, false))
	s.store.write()
	nackAt, nack := s.record.wait("a CDS NACK", func(_ int, l recorded) bool {
		return l.Dir == "C->S" && l.typeURL() == cdsType && l.has("errorDetail")
	})
	errorDetail, _ := nack.Message["errorDetail"].(map[string]any)
	logf("2. NACK: %v", errorDetail["message"])
	if msg, _ := errorDetail["message"].(string); msg == "" {
		deviation("NACK error_detail has no message")
	}
	time.Sleep(2 * time.Second)
	resent := 0
	for i, l := range s.record.messages() {
		if i > nackAt && l.Dir == "S->C" && l.typeURL() == cdsType {
			resent++
		}
	}
	s.serverMust(resent == 0, "the server resent CDS %d times in the 2 s after the NACK", resent)
	if call(s.conn) != "B1" {
		fail("RPCs stopped working after the NACK")
	}
	cdsKey := key{cdsType, "cluster-1"}
	view := compare(s.csds, s.store, "NACK", map[key][]string{cdsKey: {"NACKED"}})
	if view[cdsKey].Error == "" {
		deviation("CSDS shows no error_state details for the NACKed cluster")
	}
	held := &clusterv3.Cluster{}
	if proto.Unmarshal(view[cdsKey].body, held) != nil || !sameResource(held, cluster(true, false)) {
		deviation("CSDS does not show the last good cluster while NACKED")
	}
	rep.Steps = append(rep.Steps, map[string]any{"step": "NACK", "error_detail": errorDetail, "resent": resent})
}

// 3. Fix the cluster; an endpoint change takes effect.
func (s *story) fixAndEndpointChange(port2 int) {
	s.store.set(cdsType, cluster(true, false))
	s.store.write()
	compare(s.csds, s.store, "cluster fixed", nil)
	s.store.set(edsType, endpoints(port2))
	s.store.write()
	waitCall(s.conn, "endpoint change to B2", func(r string) bool { return r == "B2" })
	compare(s.csds, s.store, "endpoint change", nil)
	logf("3. endpoint change: ok")
}

// emptyResponse waits for a response of the type without resources (a removal).
func (s *story) emptyResponse(what, typeURL string) {
	s.record.wait(what, func(_ int, l recorded) bool {
		return l.Dir == "S->C" && l.typeURL() == typeURL && len(l.resources()) == 0
	})
}

// 4. Cluster removal and restore.
func (s *story) clusterRemoval() {
	s.store.remove(cdsType, "cluster-1")
	s.store.write()
	s.emptyResponse("a CDS response without cluster-1", cdsType)
	compare(s.csds, s.store, "cluster removal", map[key][]string{
		{cdsType, "cluster-1"}: {"DOES_NOT_EXIST", "ABSENT"},
		// No cluster, no interest in its endpoints.
		{edsType, "cluster-1"}: {"ACKED", "ABSENT"},
	})
	time.Sleep(time.Second)
	after := call(s.conn)
	rep.Steps = append(rep.Steps, map[string]any{"step": "cluster removal", "rpc": after})
	if after == "B2" {
		deviation("after the Cluster is removed RPCs still reach the old endpoints " +
			"(deletion ignored, as gRFC A88 allows without fail_on_data_errors)")
	}
	s.store.set(cdsType, cluster(true, true))
	s.store.write()
	waitCall(s.conn, "RPCs after the cluster is restored", func(r string) bool { return r == "B2" })
	compare(s.csds, s.store, "cluster restore", nil)
	logf("4. cluster removal/restore: ok (RPC during removal: %s)", after)
}

// 5. Listener removal and restore.
func (s *story) listenerRemoval() {
	s.store.remove(ldsType, target)
	s.store.write()
	s.emptyResponse("an LDS response without the listener", ldsType)
	compare(s.csds, s.store, "listener removal", map[key][]string{
		{ldsType, target}: {"DOES_NOT_EXIST", "ABSENT"},
		// No listener, no interest in what it referred to.
		{rdsType, "route-1"}:   {"ACKED", "ABSENT"},
		{cdsType, "cluster-1"}: {"ACKED", "ABSENT"},
		{edsType, "cluster-1"}: {"ACKED", "ABSENT"},
	})
	time.Sleep(time.Second)
	after := call(s.conn)
	rep.Steps = append(rep.Steps, map[string]any{"step": "listener removal", "rpc": after})
	if after == "B2" {
		deviation("after the Listener is removed RPCs still work (deletion ignored)")
	}
	restored := listener()
	restored.StatPrefix = "restored"
	s.store.set(ldsType, restored)
	s.store.write()
	waitCall(s.conn, "RPCs after the listener is restored", func(r string) bool { return r == "B2" })
	compare(s.csds, s.store, "listener restore", nil)
	logf("5. listener removal/restore: ok (RPC during removal: %s)", after)
}

// 6. The server ends the stream; the client reconnects with its last versions.
func (s *story) reconnect() {
	s.record.settled()
	last := map[string]string{}
	streams := map[string]bool{}
	for _, l := range s.record.messages() {
		streams[l.Stream.String()] = true
		if l.Dir == "C->S" && !l.has("errorDetail") && l.str("versionInfo") != "" {
			last[l.typeURL()] = l.str("versionInfo")
		}
	}
	if err := s.store.server.endStreams(); err != nil {
		fail("ending the streams: %v", err)
	}
	s.record.wait("requests on a new stream", func(_ int, l recorded) bool {
		return !streams[l.Stream.String()] && l.Dir == "C->S"
	})
	time.Sleep(time.Second)
	first := map[string]string{}
	for _, l := range s.record.messages() {
		if !streams[l.Stream.String()] && l.Dir == "C->S" {
			if _, ok := first[l.typeURL()]; !ok {
				first[l.typeURL()] = l.str("versionInfo")
			}
		}
	}
	rep.Steps = append(rep.Steps, map[string]any{"step": "reconnect", "held": last, "first_requests": first})
	for typeURL, version := range last {
		if got, ok := first[typeURL]; !ok || got != version {
			deviation("after reconnect the first %s request carries version %q, not the last ACKed %q",
				shortType(typeURL), got, version)
		}
	}
	if call(s.conn) != "B2" {
		fail("RPCs broke across the reconnect")
	}
	compare(s.csds, s.store, "reconnect", nil)
	short := map[string]string{}
	for typeURL, version := range first {
		short[shortType(typeURL)] = version
	}
	logf("6. reconnect with last versions: %v", short)
}
