// Package xdssansio gives Go tests the xDS model of xds-sansio in-process, over its C ABI
// (bindings/ffi, header include/xds_sansio.h): the conformance checker over a recorded
// conversation, scenario replay, a scripted control plane on a loopback port whose
// findings are the checker's on what the client under test did, and a model stepper.
// Every rule is the Rust model's; this package moves JSON across. Failures are *Error
// values naming the line of a malformed record or scenario.
//
// Link: build the native library (cd bindings && cargo build -p xds-sansio-ffi) and give
// its directory to cgo: CGO_LDFLAGS=-L<target>/debug go test ./...
package xdssansio

/*
#cgo CFLAGS: -I${SRCDIR}/../ffi/include
#cgo LDFLAGS: -l:libxds_sansio_ffi.a -lm -ldl -lpthread
#include <stdlib.h>
#include "xds_sansio.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"sync"
	"unsafe"
)

// Error is a failure on the native side: Kind is record, scenario, resources, message,
// usage, io or internal; Line is the 1-based line of the input (0 when it has none).
type Error struct {
	Kind    string `json:"kind"`
	Line    int    `json:"line"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("xds-sansio: %s: line %d: %s", e.Kind, e.Line, e.Message)
	}
	return fmt.Sprintf("xds-sansio: %s: %s", e.Kind, e.Message)
}

// Finding is one broken rule: its id, the side that broke it, the recording's line, what
// was wrong, and the protocol passage the rule comes from.
type Finding struct {
	Rule    string `json:"rule"`
	Side    string `json:"side"`
	Line    int    `json:"line"`
	Detail  string `json:"detail"`
	Passage string `json:"passage"`
}

// cString is a C copy of s; free it with C.free.
func cString(s string) *C.char { return C.CString(s) }

// take reads and frees a string the library returned.
func take(answer *C.char) string {
	defer C.xds_string_free(answer)
	return C.GoString(answer)
}

// decode reads an answer, {"ok": ...} into out or {"error": ...} as an *Error.
func decode(answer string, out any) error {
	var envelope struct {
		Ok    json.RawMessage `json:"ok"`
		Error *Error          `json:"error"`
	}
	if err := json.Unmarshal([]byte(answer), &envelope); err != nil {
		return &Error{Kind: "internal", Message: "unreadable answer: " + err.Error()}
	}
	if envelope.Error != nil {
		return envelope.Error
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(envelope.Ok, out); err != nil {
		return &Error{Kind: "internal", Message: "unreadable answer: " + err.Error()}
	}
	return nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// CheckOptions says how to read and judge a recording.
type CheckOptions struct {
	// Side is "client" or "server"; both when empty.
	Side string `json:"side,omitempty"`
	// Variant of lines that do not say theirs: "sotw" (default) or "delta".
	Variant string `json:"variant,omitempty"`
	// Descriptors are FileDescriptorSet files, for recordings that write resources as
	// canonical JSON (protojson).
	Descriptors []string `json:"descriptors,omitempty"`
}

// Check returns the checker's findings on a recorded conversation (JSON lines, the
// record format of docs/record-format.md).
func Check(records string, options CheckOptions) ([]Finding, error) {
	r, o := cString(records), cString(mustJSON(options))
	defer C.free(unsafe.Pointer(r))
	defer C.free(unsafe.Pointer(o))
	findings := []Finding{}
	err := decode(take(C.xds_check(r, o)), &findings)
	return findings, err
}

// Line is one line of a replayed scenario.
type Line struct {
	Line   int     `json:"line"`
	Source string  `json:"source"`
	Actual *string `json:"actual"`
	Ok     bool    `json:"ok"`
	Error  *string `json:"error"`
	Note   *string `json:"note"`
}

// Report is a replayed scenario with its two-column diagram.
type Report struct {
	Title    string  `json:"title"`
	Passed   bool    `json:"passed"`
	Lines    []Line  `json:"lines"`
	Trailing *string `json:"trailing"`
	Diagram  string  `json:"diagram"`
}

// Replay replays a scenario (docs/scenario-language.md) on the model. A line that does
// not parse is an *Error naming it; a line that fails is in the report.
func Replay(scenario, name string) (*Report, error) {
	s, n := cString(scenario), cString(name)
	defer C.free(unsafe.Pointer(s))
	defer C.free(unsafe.Pointer(n))
	var report Report
	if err := decode(take(C.xds_replay(s, n)), &report); err != nil {
		return nil, err
	}
	return &report, nil
}

// built turns a constructor's error out-parameter into an *Error.
func built(ok bool, errAnswer *C.char) error {
	if ok {
		return nil
	}
	if errAnswer == nil {
		return &Error{Kind: "internal", Message: "no object and no error"}
	}
	return decode(take(errAnswer), nil)
}

// call runs a method of an object by name, serialized by mu.
func call(mu *sync.Mutex, invoke func(m, a *C.char) *C.char, method string, args any, out any) error {
	mu.Lock()
	defer mu.Unlock()
	m, a := cString(method), cString(mustJSON(args))
	defer C.free(unsafe.Pointer(m))
	defer C.free(unsafe.Pointer(a))
	return decode(take(invoke(m, a)), out)
}
