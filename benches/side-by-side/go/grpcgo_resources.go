package main

import (
	"fmt"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// The listener and endpoints grpc-go needs around the CDS exchange: its xDS resolver
// watches a listener, then the clusters its routes name, then each EDS cluster's
// endpoints. One route per cluster makes it watch all 10 000 Clusters.

const (
	listenerName = "bench"
	ldsType      = resource.ListenerType
	edsType      = resource.EndpointType
)

func listener(name string) (*anypb.Any, error) {
	routes := make([]*routev3.Route, clusters)
	for i := range routes {
		routes[i] = &routev3.Route{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: fmt.Sprintf("/c%d/", i)}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusterName(i)},
			}},
		}
	}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name:         "bench-routes",
			VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: routes}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		return nil, err
	}
	return anypb.New(&listenerv3.Listener{Name: name, ApiListener: &listenerv3.ApiListener{ApiListener: hcm}})
}

// endpoints are empty ClusterLoadAssignments for names (grpc-go's EDS watches answered).
func endpoints(names []string) []*anypb.Any {
	out := make([]*anypb.Any, 0, len(names))
	for _, n := range names {
		a, err := anypb.New(&endpointv3.ClusterLoadAssignment{ClusterName: n})
		must(err)
		out = append(out, a)
	}
	return out
}
