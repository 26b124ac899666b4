package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
)

// Bodies are the Envoy Clusters the Rust harness wrote (`vs_go bodies FILE`): the 10 000
// clusters at generation 1, then cluster 0 at generations 2 and 3 (the fan-out's changes).
type Bodies struct {
	// Raw are the bytes as the Rust side encodes them (prost writes fields in .proto
	// declaration order: alt_stat_name, field 28, second).
	Raw [][]byte
	// GoRaw are the same messages as Go's proto.Marshal encodes them (field-number order):
	// the same length, the same fields, what go-control-plane serves.
	GoRaw   [][]byte
	Typed   []*clusterv3.Cluster
	Changed [2]*clusterv3.Cluster
	// ChangedRaw are the encoded bodies of Changed.
	ChangedRaw [2][]byte
}

// readBodies reads the length-delimited file (u32 little-endian length, then the bytes)
// and decodes every body into a typed Cluster, checked to encode back to the same
// message (decoded again, proto.Equal) of the same length: both sides serve the same
// Clusters, in their own field order.
func readBodies(path string, n int) (*Bodies, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := bytes.NewReader(data)
	var raw [][]byte
	for {
		var size uint32
		if err := binary.Read(r, binary.LittleEndian, &size); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		raw = append(raw, b)
	}
	if len(raw) != n+2 {
		return nil, fmt.Errorf("%s: %d bodies, want %d", path, len(raw), n+2)
	}
	typed := make([]*clusterv3.Cluster, len(raw))
	goRaw := make([][]byte, len(raw))
	for i, b := range raw {
		c := &clusterv3.Cluster{}
		if err := proto.Unmarshal(b, c); err != nil {
			return nil, fmt.Errorf("body %d: %w", i, err)
		}
		again, err := proto.Marshal(c)
		if err != nil {
			return nil, err
		}
		back := &clusterv3.Cluster{}
		if err := proto.Unmarshal(again, back); err != nil {
			return nil, err
		}
		if len(again) != len(b) || !proto.Equal(back, c) {
			return nil, fmt.Errorf("body %d does not encode back to the same message", i)
		}
		typed[i], goRaw[i] = c, again
	}
	return &Bodies{
		Raw:        raw[:n],
		GoRaw:      goRaw[:n],
		Typed:      typed[:n],
		Changed:    [2]*clusterv3.Cluster{typed[n], typed[n+1]},
		ChangedRaw: [2][]byte{raw[n], raw[n+1]},
	}, nil
}

// clone returns fresh typed clusters (a cache keeps what it is handed).
func (b *Bodies) clone() []*clusterv3.Cluster {
	out := make([]*clusterv3.Cluster, len(b.Typed))
	for i, c := range b.Typed {
		out[i] = proto.Clone(c).(*clusterv3.Cluster)
	}
	return out
}
