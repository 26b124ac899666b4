// v2_server serves the envoy.api.v2 xDS API (ADS and the per-type CDS and EDS services,
// SotW) from go-control-plane v0.9.7's v2 SnapshotCache: two Clusters and one
// ClusterLoadAssignment for one node. SIGHUP switches to a second snapshot in which
// cluster c2's connect timeout changes. go-control-plane dropped the v2 server and cache
// after v0.9.7 (v0.9.9 still has the v2 protos, not pkg/cache/v2 nor pkg/server/v2).
//
// Usage: v2_server [--listen 127.0.0.1:0] [--node client]; the first stdout line is
// "listening on ADDR", each request and response is logged on stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	api "github.com/envoyproxy/go-control-plane/envoy/api/v2"
	core "github.com/envoyproxy/go-control-plane/envoy/api/v2/core"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/api/v2/endpoint"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v2"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v2"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v2"
	"github.com/golang/protobuf/ptypes"
	"google.golang.org/grpc"
)

// edsCluster is a v2 Cluster whose endpoints come from EDS under its own name.
func edsCluster(name string, timeout time.Duration) *api.Cluster {
	return &api.Cluster{
		Name:                 name,
		ConnectTimeout:       ptypes.DurationProto(timeout),
		ClusterDiscoveryType: &api.Cluster_Type{Type: api.Cluster_EDS},
		EdsClusterConfig: &api.Cluster_EdsClusterConfig{
			EdsConfig: &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}},
		},
	}
}

func assignment(cluster string, port uint32) *api.ClusterLoadAssignment {
	address := &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Address:       "127.0.0.1",
		PortSpecifier: &core.SocketAddress_PortValue{PortValue: port},
	}}}
	return &api.ClusterLoadAssignment{
		ClusterName: cluster,
		Endpoints: []*endpoint.LocalityLbEndpoints{{
			LbEndpoints: []*endpoint.LbEndpoint{{
				HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: address}},
			}},
		}},
	}
}

// snapshot is version 1 (c2 times out after 1s) or 2 (after 2s); c1 and the endpoints stay.
func snapshot(version int) cache.Snapshot {
	clusters := []types.Resource{
		edsCluster("c1", time.Second),
		edsCluster("c2", time.Duration(version)*time.Second),
	}
	endpoints := []types.Resource{assignment("c1", 8080)}
	return cache.NewSnapshot(fmt.Sprint(version), endpoints, clusters, nil, nil, nil, nil)
}

// logCallbacks prints every request and response on stderr, one line each.
func logCallbacks() server.CallbackFuncs {
	return server.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, typeURL string) error {
			log.Printf("[stream %d] open %q", id, typeURL)
			return nil
		},
		StreamRequestFunc: func(id int64, r *api.DiscoveryRequest) error {
			log.Printf("[stream %d] <- %s V=%q N=%q R=%v nack=%v", id, r.TypeUrl, r.VersionInfo,
				r.ResponseNonce, r.ResourceNames, r.ErrorDetail != nil)
			return nil
		},
		StreamResponseFunc: func(id int64, _ *api.DiscoveryRequest, r *api.DiscoveryResponse) {
			log.Printf("[stream %d] -> %s V=%q N=%q (%d resources)", id, r.TypeUrl, r.VersionInfo,
				r.Nonce, len(r.Resources))
		},
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	node := flag.String("node", "client", "the node id the snapshots are for")
	flag.Parse()

	// ads=false: answer each request as it comes (per-type streams ask for EDS names
	// without ADS's all-or-nothing wait).
	snapshots := cache.NewSnapshotCache(false, cache.IDHash{}, nil)
	if err := snapshots.SetSnapshot(*node, snapshot(1)); err != nil {
		log.Fatal(err)
	}
	xds := server.NewServer(context.Background(), snapshots, logCallbacks())
	grpcServer := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(grpcServer, xds)
	api.RegisterClusterDiscoveryServiceServer(grpcServer, xds)
	api.RegisterEndpointDiscoveryServiceServer(grpcServer, xds)

	// The handler before the listener: a SIGHUP sent once "listening" shows is never lost.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %s\n", listener.Addr())
	go func() {
		version := 1
		for range hup {
			version++
			if err := snapshots.SetSnapshot(*node, snapshot(version)); err != nil {
				log.Fatal(err)
			}
			log.Printf("SIGHUP: snapshot version %d", version)
		}
	}()
	log.Fatal(grpcServer.Serve(listener))
}
