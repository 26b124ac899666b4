package xdssansio_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	ldsType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	rdsType = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	cdsType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	edsType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	target  = "echo.test"
	wait    = 20 * time.Second
)

func pack(t *testing.T, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
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
func listener(t *testing.T) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: "route-1",
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: pack(t, &routerv3.Router{})},
		}},
	}
	return &listenerv3.Listener{Name: target, ApiListener: &listenerv3.ApiListener{ApiListener: pack(t, hcm)}}
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

// cluster is cluster-1 over EDS; invalid, it is STATIC (gRPC NACKs it).
func cluster(valid bool) *clusterv3.Cluster {
	kind := clusterv3.Cluster_EDS
	if !valid {
		kind = clusterv3.Cluster_STATIC
	}
	return &clusterv3.Cluster{
		Name:                 "cluster-1",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: kind},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource()},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
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

const echoMethod = "/interop.Echo/Echo"

// rawCodec carries bytes as they are: the echo service has no .proto.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// backend serves /interop.Echo/Echo, answering its name, until the test ends.
func backend(t *testing.T, name string) int {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			if method, _ := grpc.MethodFromServerStream(stream); method != echoMethod {
				return status.Errorf(codes.Unimplemented, "no method %s", method)
			}
			var in []byte
			if err := stream.RecvMsg(&in); err != nil {
				return err
			}
			out := []byte(name)
			return stream.SendMsg(&out)
		}))
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().(*net.TCPAddr).Port
}

// xdsChannel is grpc-go's xDS client for xds:///echo.test, its bootstrap naming server.
func xdsChannel(t *testing.T, server, node string) *grpc.ClientConn {
	bootstrap, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":      server,
			"channel_creds":   []any{map[string]string{"type": "insecure"}},
			"server_features": []string{"xds_v3"},
		}},
		"node": map[string]any{"id": node, "locality": map[string]string{"zone": "z"}},
	})
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///"+target,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// call makes one RPC: the backend's name, or "error:CODE".
func call(conn *grpc.ClientConn) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	in, out := []byte("hi"), []byte(nil)
	if err := conn.Invoke(ctx, echoMethod, &in, &out, grpc.ForceCodec(rawCodec{})); err != nil {
		return "error:" + status.Code(err).String()
	}
	return string(out)
}

// waitFor polls until ok, failing the test after the bound.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// line is one line of a recording.
type line struct {
	Dir     string         `json:"dir"`
	Message map[string]any `json:"message"`
}

// requests are the client's requests of a recording, as JSON messages.
func requests(t *testing.T, records string) []map[string]any {
	var out []map[string]any
	for _, text := range strings.Split(strings.TrimSpace(records), "\n") {
		var l line
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			t.Fatalf("recording: %v", err)
		}
		if l.Dir == "C->S" {
			out = append(out, l.Message)
		}
	}
	return out
}
