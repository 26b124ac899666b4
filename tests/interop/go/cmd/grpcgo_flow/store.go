package main

import (
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
)

// key names one resource: its type URL and name.
type key struct{ typeURL, name string }

func (k key) String() string { return shortType(k.typeURL) + "/" + k.name }

// shortType is the last word of a type URL (Cluster, Listener, ...).
func shortType(typeURL string) string {
	for i := len(typeURL) - 1; i >= 0; i-- {
		if typeURL[i] == '.' {
			return typeURL[i+1:]
		}
	}
	return typeURL
}

// controlPlane is the management server the store feeds: our ads_server (a file and
// SIGHUP) or an in-process go-control-plane (a snapshot).
type controlPlane interface {
	// publish makes the server serve exactly these resources.
	publish(resources []resource) error
	// endStreams ends every open xDS stream, so the client reconnects.
	endStreams() error
	// address is where the client (or the tap) dials.
	address() string
	close()
}

type resource struct {
	key     key
	message proto.Message
}

// store is what the management server serves, in insertion order (as the Python dict).
type store struct {
	keys      []key
	resources map[key]proto.Message
	server    controlPlane
}

func newStore() *store { return &store{resources: map[key]proto.Message{}} }

func nameOf(typeURL string, m proto.Message) string {
	if typeURL == edsType {
		return m.(*endpointv3.ClusterLoadAssignment).GetClusterName()
	}
	return m.(interface{ GetName() string }).GetName()
}

func (s *store) set(typeURL string, m proto.Message) {
	k := key{typeURL, nameOf(typeURL, m)}
	if _, ok := s.resources[k]; !ok {
		s.keys = append(s.keys, k)
	}
	s.resources[k] = m
}

func (s *store) remove(typeURL, name string) {
	k := key{typeURL, name}
	delete(s.resources, k)
	for i, have := range s.keys {
		if have == k {
			s.keys = append(s.keys[:i:i], s.keys[i+1:]...)
			break
		}
	}
}

func (s *store) all() []resource {
	out := make([]resource, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, resource{k, s.resources[k]})
	}
	return out
}

// write publishes the store to the server.
func (s *store) write() {
	if err := s.server.publish(s.all()); err != nil {
		fail("publishing the store: %v", err)
	}
}
