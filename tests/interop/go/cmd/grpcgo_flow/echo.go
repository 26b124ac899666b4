package main

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const echoMethod = "/interop.Echo/Echo"

// rawCodec carries the messages' bytes as they are: the echo service has no .proto.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// startBackend serves /interop.Echo/Echo, answering its own name.
func startBackend(name string) (*grpc.Server, int) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("backend %s: %v", name, err)
	}
	s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			if method, _ := grpc.MethodFromServerStream(stream); method != echoMethod {
				return status.Errorf(codes.Unimplemented, "no method %s", method)
			}
			var in []byte
			if err := stream.RecvMsg(&in); err != nil {
				return err
			}
			out := []byte(name)
			return stream.SendMsg(&out)
		}))
	go func() { _ = s.Serve(lis) }()
	return s, lis.Addr().(*net.TCPAddr).Port
}

// call makes one RPC: the backend's name, or "error:CODE".
func call(conn *grpc.ClientConn) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	in, out := []byte("hi"), []byte(nil)
	if err := conn.Invoke(ctx, echoMethod, &in, &out, grpc.ForceCodec(rawCodec{})); err != nil {
		return "error:" + status.Code(err).String()
	}
	return string(out)
}

func waitCall(conn *grpc.ClientConn, what string, pred func(string) bool) string {
	deadline := time.Now().Add(stepTimeout)
	result := ""
	for time.Now().Before(deadline) {
		if result = call(conn); pred(result) {
			return result
		}
		time.Sleep(100 * time.Millisecond)
	}
	fail("timed out waiting for RPCs: %s (last result %s)", what, result)
	return ""
}
