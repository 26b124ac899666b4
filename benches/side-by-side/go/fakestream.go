package main

import (
	"context"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/metadata"
)

// An in-process gRPC server stream for go-control-plane's server: requests come from a
// channel, responses are marshalled (what gRPC's codec does) and only their nonce kept.
// It lets the memory section run go-control-plane's real per-stream server code.

type fakeBase struct{ ctx context.Context }

func (fakeBase) SetHeader(metadata.MD) error  { return nil }
func (fakeBase) SendHeader(metadata.MD) error { return nil }
func (fakeBase) SetTrailer(metadata.MD)       {}
func (f fakeBase) Context() context.Context   { return f.ctx }
func (fakeBase) SendMsg(any) error            { return nil }
func (fakeBase) RecvMsg(any) error            { return nil }

type fakeSotw struct {
	fakeBase
	in  chan *discovery.DiscoveryRequest
	out chan *discovery.DiscoveryResponse
}

func newFakeSotw(ctx context.Context) *fakeSotw {
	return &fakeSotw{fakeBase{ctx}, make(chan *discovery.DiscoveryRequest), make(chan *discovery.DiscoveryResponse, 1)}
}

func (f *fakeSotw) Recv() (*discovery.DiscoveryRequest, error) {
	select {
	case r := <-f.in:
		return r, nil
	case <-f.ctx.Done():
		return nil, f.ctx.Err()
	}
}

func (f *fakeSotw) Send(r *discovery.DiscoveryResponse) error {
	if _, err := marshal(r); err != nil {
		return err
	}
	// Only what an ACK needs is handed on; the response itself is the cache's.
	f.out <- &discovery.DiscoveryResponse{VersionInfo: r.GetVersionInfo(), Nonce: r.GetNonce()}
	return nil
}

type fakeDelta struct {
	fakeBase
	in  chan *discovery.DeltaDiscoveryRequest
	out chan string
}

func newFakeDelta(ctx context.Context) *fakeDelta {
	return &fakeDelta{fakeBase{ctx}, make(chan *discovery.DeltaDiscoveryRequest), make(chan string, 1)}
}

func (f *fakeDelta) Recv() (*discovery.DeltaDiscoveryRequest, error) {
	select {
	case r := <-f.in:
		return r, nil
	case <-f.ctx.Done():
		return nil, f.ctx.Err()
	}
}

func (f *fakeDelta) Send(r *discovery.DeltaDiscoveryResponse) error {
	if _, err := marshal(r); err != nil {
		return err
	}
	f.out <- r.GetNonce()
	return nil
}
