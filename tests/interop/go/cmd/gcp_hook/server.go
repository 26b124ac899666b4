package main

import (
	"context"

	"google.golang.org/grpc"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionservice "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfigservice "github.com/envoyproxy/go-control-plane/ratelimit/service/ratelimit/v3"
)

// newGRPCServer registers every discovery service go-control-plane's server implements
// (ADS and the per-type services, each SotW and delta) over one cache.
func newGRPCServer(ctx context.Context, c cache.Cache) *grpc.Server {
	xds := server.NewServer(ctx, c, server.CallbackFuncs{})
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(g, xds)
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, xds)
	listenerservice.RegisterListenerDiscoveryServiceServer(g, xds)
	routeservice.RegisterRouteDiscoveryServiceServer(g, xds)
	routeservice.RegisterScopedRoutesDiscoveryServiceServer(g, xds)
	routeservice.RegisterVirtualHostDiscoveryServiceServer(g, xds)
	secretservice.RegisterSecretDiscoveryServiceServer(g, xds)
	runtimeservice.RegisterRuntimeDiscoveryServiceServer(g, xds)
	extensionservice.RegisterExtensionConfigDiscoveryServiceServer(g, xds)
	rlsconfigservice.RegisterRateLimitConfigDiscoveryServiceServer(g, xds)
	return g
}
