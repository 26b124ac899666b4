package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
)

// event is one control line (docs/conform.md, "The hook").
type event struct {
	Hook string `json:"hook"`
	Ops  []op   `json:"ops"`
}

type op struct {
	Op      string   `json:"op"`
	TypeURL string   `json:"type_url"`
	Name    string   `json:"name"`
	Body    string   `json:"body"`
	Version *string  `json:"version"`
	TTLMs   *int64   `json:"ttl_ms"`
	Aliases []string `json:"aliases"`
}

// backend is one of go-control-plane's caches as the hook feeds it.
type backend interface {
	// apply makes one revision of the store the cache's state; touched are the types
	// the publication's operations named.
	apply(ctx context.Context, s *store, touched map[string]bool) error
}

type running struct {
	grpc    *grpc.Server
	cache   backend
	cancel  context.CancelFunc
	stopped chan struct{}
}

type hook struct {
	kind    string
	listen  string
	store   *store
	running *running
}

func (h *hook) handle(ev *event) error {
	switch ev.Hook {
	case "start":
		h.stop()
		h.store = newStore()
		r, err := h.serve()
		if err != nil {
			return err
		}
		h.running = r
		return nil
	case "publish":
		return h.publish(ev.Ops)
	case "stop":
		h.stop()
		return nil
	default:
		return fmt.Errorf("this peer does not do %q", ev.Hook)
	}
}

func (h *hook) serve() (*running, error) {
	ctx, cancel := context.WithCancel(context.Background())
	var cache backend
	var srv *grpc.Server
	switch h.kind {
	case "snapshot":
		c := newSnapshotBackend(ctx)
		cache, srv = c, newGRPCServer(ctx, c.cache)
	default:
		c := newLinearBackend()
		cache, srv = c, newGRPCServer(ctx, c.mux)
	}
	lis, err := net.Listen("tcp", h.listen)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("listen on %s: %w", h.listen, err)
	}
	r := &running{grpc: srv, cache: cache, cancel: cancel, stopped: make(chan struct{})}
	go func() {
		defer close(r.stopped)
		_ = srv.Serve(lis)
	}()
	return r, nil
}

func (h *hook) stop() {
	r := h.running
	if r == nil {
		return
	}
	h.running = nil
	// Stop, not GracefulStop: discovery streams never end on their own.
	r.grpc.Stop()
	r.cancel()
	select {
	case <-r.stopped:
	case <-time.After(3 * time.Second):
	}
}

func (h *hook) publish(ops []op) error {
	if h.running == nil {
		return errors.New("no scenario started")
	}
	if h.kind == "linear" {
		for _, o := range ops {
			if o.TTLMs != nil {
				return errors.New("a LinearCache has no TTLs")
			}
		}
	}
	touched, err := h.store.apply(ops)
	if err != nil {
		return err
	}
	return h.running.cache.apply(context.Background(), h.store, touched)
}
