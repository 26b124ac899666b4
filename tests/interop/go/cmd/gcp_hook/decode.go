package main

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	// The messages go-control-plane serves, registered for protoregistry.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	_ "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// served tells whether go-control-plane's caches have a place for the type.
func served(typeURL string) bool {
	return cache.GetResponseType(typeURL) != types.UnknownType
}

// decode turns a body into its type's Envoy message: go-control-plane's caches hold
// proto messages and encode them again when they answer, so the bytes must survive.
func decode(typeURL, name string, body []byte) (types.Resource, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
	if err != nil {
		return nil, fmt.Errorf("go-control-plane does not serve %s (%v)", typeURL, err)
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(body, msg); err != nil {
		return nil, fmt.Errorf("go-control-plane stores typed resources: %s's body is not a %s (%v); give real bodies with --bodies", name, mt.Descriptor().FullName(), err)
	}
	again, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if !bytes.Equal(again, body) {
		// The same message, other bytes: e.g. Go's encoder writes a oneof's field after
		// the others, where conform's writes fields in number order.
		return nil, fmt.Errorf("go-control-plane stores typed resources: %s's body comes out of its encoder as other bytes (Go's field order: a oneof's field last); give bodies in that order with --bodies", name)
	}
	return msg, nil
}
