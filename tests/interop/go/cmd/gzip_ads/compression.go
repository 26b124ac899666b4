package main

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/stats"
)

// countingGzip stands in for grpc-go's gzip compressor under the same name and counts
// what went through it: a message compressed or decompressed by gzip, not a header's
// promise. grpc-go keeps grpc-encoding out of stream.Header() (a reserved header), so the
// response's encoding is read from the stats handler below.
type countingGzip struct {
	encoding.Compressor
	compressed, decompressed atomic.Int64
}

func (c *countingGzip) Compress(w io.Writer) (io.WriteCloser, error) {
	c.compressed.Add(1)
	return c.Compressor.Compress(w)
}

func (c *countingGzip) Decompress(r io.Reader) (io.Reader, error) {
	c.decompressed.Add(1)
	return c.Compressor.Decompress(r)
}

// installCountingGzip wraps the registered gzip compressor (registered by importing
// grpc's encoding/gzip) and registers the wrapper in its place.
func installCountingGzip() *countingGzip {
	c := &countingGzip{Compressor: encoding.GetCompressor(gzip.Name)}
	encoding.RegisterCompressor(c)
	return c
}

// headerEncodings is a client stats handler that keeps the grpc-encoding of each response
// header (stats.InHeader.Compression).
type headerEncodings struct {
	mu        sync.Mutex
	encodings []string
}

func (h *headerEncodings) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}

func (h *headerEncodings) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InHeader); ok && in.Client {
		h.mu.Lock()
		h.encodings = append(h.encodings, in.Compression)
		h.mu.Unlock()
	}
}

func (h *headerEncodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (h *headerEncodings) HandleConn(context.Context, stats.ConnStats) {}

func (h *headerEncodings) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.encodings...)
}
