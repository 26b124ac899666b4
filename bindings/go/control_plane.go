package xdssansio

/*
#include <stdlib.h>
#include "xds_sansio.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/proto"
)

// ControlPlaneOptions says how to start a ControlPlane.
type ControlPlaneOptions struct {
	// Listen is where to listen; 127.0.0.1:0 (a free loopback port) when empty.
	Listen string `json:"listen,omitempty"`
	// Resources to serve first: {"resources": [Any, ...]} (canonical JSON of a
	// DiscoveryResponse).
	Resources string `json:"resources,omitempty"`
	// ResourcesPath is a file or a directory of such files (.json, .yaml, .pb).
	ResourcesPath string `json:"resources_path,omitempty"`
	// Descriptors are FileDescriptorSet files for resources in canonical JSON.
	Descriptors []string `json:"descriptors,omitempty"`
	// Faults are fault rules, one per line ("drop type=cds nth=1", "close after=3", ...;
	// docs/test-control-plane.md) every stream's responses go through.
	Faults string `json:"faults,omitempty"`
	// Seed is where the faults' random draws start: the same seed, the same faults.
	Seed uint64 `json:"seed,omitempty"`
	// Scenario is a scenario whose server lines are played in time from the start.
	Scenario string `json:"scenario,omitempty"`
}

// ControlPlane is the model's management server (ADS and every per-type service, SotW
// and delta) on a loopback port, recording every stream. Safe for concurrent use.
type ControlPlane struct {
	mu     sync.Mutex
	handle *C.XdsControlPlane
	port   int
}

// StartControlPlane starts serving.
func StartControlPlane(options ControlPlaneOptions) (*ControlPlane, error) {
	o := cString(mustJSON(options))
	defer C.free(unsafe.Pointer(o))
	var errAnswer *C.char
	handle := C.xds_control_plane_start(o, &errAnswer)
	if err := built(handle != nil, errAnswer); err != nil {
		return nil, err
	}
	p := &ControlPlane{handle: handle}
	if err := p.call("port", nil, &p.port); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *ControlPlane) call(method string, args map[string]any, out any) error {
	if args == nil {
		args = map[string]any{}
	}
	if p.handle == nil {
		return &Error{Kind: "usage", Message: "the control plane is closed"}
	}
	return call(&p.mu, func(m, a *C.char) *C.char {
		return C.xds_control_plane_call(p.handle, m, a)
	}, method, args, out)
}

// Port is the port it listens on.
func (p *ControlPlane) Port() int { return p.port }

// Address is 127.0.0.1:PORT, for a bootstrap's server_uri.
func (p *ControlPlane) Address() string { return fmt.Sprintf("127.0.0.1:%d", p.port) }

// Set adds or replaces an encoded resource of typeURL, named as its body says.
func (p *ControlPlane) Set(typeURL string, body []byte) error {
	return p.call("set", map[string]any{"type_url": typeURL, "body": body}, nil)
}

// SetResource adds or replaces a generated message (its type URL is
// type.googleapis.com/ and its full name).
func (p *ControlPlane) SetResource(m proto.Message) error {
	body, err := proto.Marshal(m)
	if err != nil {
		return &Error{Kind: "resources", Message: err.Error()}
	}
	return p.Set(TypeURL(m), body)
}

// TypeURL is a message's type URL.
func TypeURL(m proto.Message) string {
	return "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
}

// Remove removes a resource.
func (p *ControlPlane) Remove(typeURL, name string) error {
	return p.call("remove", map[string]any{"type_url": typeURL, "name": name}, nil)
}

// Replace serves exactly {"resources": [Any, ...]} from now on.
func (p *ControlPlane) Replace(resources string) error {
	return p.call("replace", map[string]any{"resources": resources}, nil)
}

// EndStreams ends every open stream (clients reconnect and resume).
func (p *ControlPlane) EndStreams() error { return p.call("end_streams", nil, nil) }

// Records is the recording so far (JSON lines, the record format).
func (p *ControlPlane) Records() (string, error) {
	var records string
	err := p.call("records", nil, &records)
	return records, err
}

// Findings are the checker's findings on the recording so far: of side ("client" or
// "server"), or of both when side is empty.
func (p *ControlPlane) Findings(side string) ([]Finding, error) {
	args := map[string]any{}
	if side != "" {
		args["side"] = side
	}
	findings := []Finding{}
	err := p.call("findings", args, &findings)
	return findings, err
}

// Stop stops serving; reads still work until Close.
func (p *ControlPlane) Stop() error { return p.call("stop", nil, nil) }

// Close stops serving and frees the control plane.
func (p *ControlPlane) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.handle != nil {
		C.xds_control_plane_free(p.handle)
		p.handle = nil
	}
}
