package main

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The four resource types of the story, and the name the channel dials.
const (
	ldsType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	rdsType = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	cdsType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	edsType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	target  = "echo.test"
)

func mustPack(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// listener is an API listener whose HttpConnectionManager takes route-1 over ADS.
func listener() *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsSource(),
			RouteConfigName: "route-1",
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(&routerv3.Router{})},
		}},
	}
	return &listenerv3.Listener{
		Name:        target,
		ApiListener: &listenerv3.ApiListener{ApiListener: mustPack(hcm)},
	}
}

func route() *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: "route-1",
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "vh",
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "cluster-1"},
				}},
			}},
		}},
	}
}

// cluster is cluster-1 over EDS; invalid, it is STATIC with no endpoints (gRPC NACKs it);
// restored, it carries circuit breakers, so it differs from the one deleted.
func cluster(valid, restored bool) *clusterv3.Cluster {
	kind := clusterv3.Cluster_EDS
	if !valid {
		kind = clusterv3.Cluster_STATIC
	}
	c := &clusterv3.Cluster{
		Name:                 "cluster-1",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: kind},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource()},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
	if restored {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxRequests: wrapperspb.UInt32(1000),
		}}}
	}
	return c
}

func endpoints(port int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: "cluster-1",
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{Region: "local"},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address:       "127.0.0.1",
						PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
					}}},
				}},
			}},
		}},
	}
}
