package main

import (
	"errors"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/config"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/proto"
)

// What go-control-plane's SotW and delta servers (pkg/server/sotw/v3, delta/v3) do per
// request and per response, minus the gRPC transport: the per-type subscription, the
// watch on the cache with the server's multiplexed channel, and on each response the
// DiscoveryResponse built from the cache's response, a stream nonce, the returned
// resources recorded in the subscription, and the proto.Marshal gRPC's codec does.

const cds = resource.ClusterType

var opts = config.NewOpts()

var errNoResponse = errors.New("the cache did not answer")

// sotwStream is one ADS stream's CDS state as the SotW server keeps it.
type sotwStream struct {
	node  *corev3.Node
	sub   stream.Subscription
	ch    chan cache.Response
	nonce int64
	// last is the version of the last response (what an ACK carries).
	last      string
	lastNonce string
}

func newSotwStream(node string, names []string) *sotwStream {
	return &sotwStream{
		node: &corev3.Node{Id: node},
		sub:  stream.NewSotwSubscription(names, opts.IsLegacyWildcardActive(cds)),
		ch:   make(chan cache.Response, types.UnknownType),
	}
}

// request opens the stream's first watch (the first request).
func (s *sotwStream) request(c cache.ConfigWatcher) error {
	req := &discovery.DiscoveryRequest{Node: s.node, TypeUrl: cds, ResourceNames: subscribedNames(s.sub)}
	_, err := c.CreateWatch(req, s.sub, s.ch)
	return err
}

// ack re-arms the watch as the server does on an ACK: subscription updated, new watch.
func (s *sotwStream) ack(c cache.ConfigWatcher) error {
	req := &discovery.DiscoveryRequest{
		Node: s.node, TypeUrl: cds, VersionInfo: s.last, ResponseNonce: s.lastNonce,
		ResourceNames: subscribedNames(s.sub),
	}
	s.sub.SetResourceSubscription(req.GetResourceNames())
	_, err := c.CreateWatch(req, s.sub, s.ch)
	return err
}

// send takes the pending response, if any, and returns its wire bytes.
func (s *sotwStream) send() ([]byte, error) {
	var res cache.Response
	select {
	case res = <-s.ch:
	default:
		return nil, errNoResponse
	}
	out, err := res.GetDiscoveryResponse()
	if err != nil {
		return nil, err
	}
	s.nonce++
	out.Nonce = strconv.FormatInt(s.nonce, 10)
	s.sub.SetReturnedResources(res.GetReturnedResources())
	s.last, s.lastNonce = out.GetVersionInfo(), out.Nonce
	return proto.Marshal(out)
}

func subscribedNames(sub stream.Subscription) []string {
	if sub.IsWildcard() {
		return nil
	}
	names := make([]string, 0, len(sub.SubscribedResources()))
	for n := range sub.SubscribedResources() {
		names = append(names, n)
	}
	return names
}

// deltaStream is one delta ADS stream's CDS state as the delta server keeps it.
type deltaStream struct {
	node      *corev3.Node
	sub       stream.Subscription
	ch        chan cache.DeltaResponse
	nonce     int64
	lastNonce string
	cancel    func()
}

func newDeltaStream(node string, names []string) *deltaStream {
	return &deltaStream{
		node: &corev3.Node{Id: node},
		sub:  stream.NewDeltaSubscription(names, nil, nil, opts.IsLegacyWildcardActive(cds)),
		ch:   make(chan cache.DeltaResponse, types.UnknownType),
	}
}

func (s *deltaStream) request(c cache.ConfigWatcher, names []string) error {
	req := &discovery.DeltaDiscoveryRequest{Node: s.node, TypeUrl: cds, ResourceNamesSubscribe: names}
	var err error
	s.cancel, err = c.CreateDeltaWatch(req, s.sub, s.ch)
	return err
}

func (s *deltaStream) ack(c cache.ConfigWatcher) error {
	if s.cancel != nil {
		s.cancel()
	}
	req := &discovery.DeltaDiscoveryRequest{Node: s.node, TypeUrl: cds, ResponseNonce: s.lastNonce}
	s.sub.UpdateResourceSubscriptions(nil, nil)
	var err error
	s.cancel, err = c.CreateDeltaWatch(req, s.sub, s.ch)
	return err
}

func (s *deltaStream) send() ([]byte, error) {
	var res cache.DeltaResponse
	select {
	case res = <-s.ch:
	default:
		return nil, errNoResponse
	}
	out, err := res.GetDeltaDiscoveryResponse()
	if err != nil {
		return nil, err
	}
	s.nonce++
	out.Nonce = strconv.FormatInt(s.nonce, 10)
	s.lastNonce = out.Nonce
	s.sub.SetReturnedResources(res.GetNextVersionMap())
	return proto.Marshal(out)
}
