package xdssansio

/*
#include <stdlib.h>
#include "xds_sansio.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"google.golang.org/protobuf/proto"
)

// StepperOptions says which model to step.
type StepperOptions struct {
	// Role is "client" (feed it responses; the default) or "server" (feed it requests).
	Role string `json:"role,omitempty"`
	// Variant is "sotw" (default) or "delta".
	Variant string `json:"variant,omitempty"`
	// PerType, a type URL, makes it a per-type stream of that type instead of ADS.
	PerType string `json:"per_type,omitempty"`
	// NodeID is the client's node id.
	NodeID string `json:"node_id,omitempty"`
}

// Message is one message the model sends: encoded, and as text.
type Message struct {
	Bytes []byte `json:"bytes"`
	Text  string `json:"text"`
}

// Event is one event of the model: its name (Upserted, Acked, ...) and all of it.
type Event struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// Step is what the model sent and its events after one input.
type Step struct {
	Messages []Message `json:"messages"`
	Events   []Event   `json:"events"`
}

// Kinds are the names of the step's events.
func (s *Step) Kinds() []string {
	kinds := make([]string, 0, len(s.Events))
	for _, e := range s.Events {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// Stepper is the model's client or server on one stream, on a virtual clock. Safe for
// concurrent use (calls are serialized).
type Stepper struct {
	mu     sync.Mutex
	handle *C.XdsStepper
}

// NewStepper makes a model client (not yet connected) or server (an empty store).
func NewStepper(options StepperOptions) (*Stepper, error) {
	o := cString(mustJSON(options))
	defer C.free(unsafe.Pointer(o))
	var errAnswer *C.char
	handle := C.xds_stepper_new(o, &errAnswer)
	if err := built(handle != nil, errAnswer); err != nil {
		return nil, err
	}
	return &Stepper{handle: handle}, nil
}

func (s *Stepper) step(method string, args map[string]any) (*Step, error) {
	if args == nil {
		args = map[string]any{}
	}
	if s.handle == nil {
		return nil, &Error{Kind: "usage", Message: "the stepper is closed"}
	}
	var step Step
	err := call(&s.mu, func(m, a *C.char) *C.char {
		return C.xds_stepper_call(s.handle, m, a)
	}, method, args, &step)
	if err != nil {
		return nil, err
	}
	return &step, nil
}

// Connected says the client's stream is up.
func (s *Stepper) Connected() (*Step, error) { return s.step("connected", nil) }

// Disconnected says the client's stream broke.
func (s *Stepper) Disconnected() (*Step, error) { return s.step("disconnected", nil) }

// Subscribe subscribes the client to names of typeURL (none: the wildcard).
func (s *Stepper) Subscribe(typeURL string, names ...string) (*Step, error) {
	if names == nil {
		names = []string{}
	}
	return s.step("subscribe", map[string]any{"type_url": typeURL, "names": names})
}

// Set adds or replaces an encoded resource in the server's store.
func (s *Stepper) Set(typeURL string, body []byte) (*Step, error) {
	return s.step("set", map[string]any{"type_url": typeURL, "body": body})
}

// Remove removes a resource from the server's store.
func (s *Stepper) Remove(typeURL, name string) (*Step, error) {
	return s.step("remove", map[string]any{"type_url": typeURL, "name": name})
}

// Handle feeds the peer's encoded message: a response to a client, a request to a server.
func (s *Stepper) Handle(message []byte) (*Step, error) {
	return s.step("handle", map[string]any{"bytes": message})
}

// HandleMessage feeds a generated message (a DiscoveryRequest, DiscoveryResponse or their
// delta forms).
func (s *Stepper) HandleMessage(m proto.Message) (*Step, error) {
	body, err := proto.Marshal(m)
	if err != nil {
		return nil, &Error{Kind: "message", Message: err.Error()}
	}
	return s.Handle(body)
}

// Advance moves the virtual clock millis forward and fires what is due.
func (s *Stepper) Advance(millis uint64) (*Step, error) {
	return s.step("advance", map[string]any{"millis": millis})
}

// Close frees the stepper.
func (s *Stepper) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handle != nil {
		C.xds_stepper_free(s.handle)
		s.handle = nil
	}
}
