package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// recorded is one message line of a recording (docs/record-format.md).
type recorded struct {
	Dir     string         `json:"dir"`
	Stream  json.Number    `json:"stream"`
	Message map[string]any `json:"message"`
}

func (l recorded) str(field string) string {
	s, _ := l.Message[field].(string)
	return s
}

func (l recorded) has(field string) bool {
	_, ok := l.Message[field]
	return ok
}

func (l recorded) typeURL() string { return l.str("typeUrl") }

func (l recorded) resources() []any {
	r, _ := l.Message["resources"].([]any)
	return r
}

// record reads a recording as it grows: ads_server's own (--record) or the tap's.
type record struct{ path string }

// messages are the message lines so far. The writer appends while we read, so a last line
// without its newline is still being written and waits for the next read; a complete line
// that does not parse fails the run.
func (r record) messages() []recorded {
	text, err := os.ReadFile(r.path)
	if err != nil {
		return nil
	}
	complete := text[:bytes.LastIndexByte(text, '\n')+1]
	var out []recorded
	for number, raw := range bytes.Split(complete, []byte("\n")) {
		line := bytes.TrimSpace(raw)
		if len(line) == 0 {
			continue
		}
		var l recorded
		if err := json.Unmarshal(line, &l); err != nil {
			fail("%s line %d is not JSON: %v", r.path, number+1, err)
		}
		if l.Dir != "" {
			out = append(out, l)
		}
	}
	return out
}

// settled waits until the client answered (ACK or NACK) the last response of every
// stream and type.
func (r record) settled() {
	deadline := time.Now().Add(stepTimeout)
	for {
		open := map[string]string{}
		for _, l := range r.messages() {
			k := l.Stream.String() + " " + l.typeURL()
			if l.Dir == "S->C" {
				open[k] = l.str("nonce")
			} else if nonce, ok := open[k]; ok && nonce == l.str("responseNonce") {
				delete(open, k)
			}
		}
		if len(open) == 0 {
			return
		}
		if time.Now().After(deadline) {
			fail("responses left unanswered: %v", open)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wait returns the first message (and its index) that satisfies pred.
func (r record) wait(what string, pred func(i int, l recorded) bool) (int, recorded) {
	deadline := time.Now().Add(stepTimeout)
	for {
		for i, l := range r.messages() {
			if pred(i, l) {
				return i, l
			}
		}
		if time.Now().After(deadline) {
			fail("timed out waiting in the record for: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (l recorded) String() string {
	b, _ := json.Marshal(l.Message)
	return fmt.Sprintf("%s stream %s %s", l.Dir, l.Stream, b)
}
