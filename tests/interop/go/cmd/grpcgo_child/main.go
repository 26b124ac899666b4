// Command grpcgo_child: one grpc-go xDS client for tests/interop/grpc_hook/hook.py
// (--peer go), speaking child.py's protocol: it reads `ready`, `watch TYPE_URL NAME` and
// `unwatch TYPE_URL NAME` on stdin and answers `ok` to each line. GRPC_XDS_BOOTSTRAP is
// set by the hook; grpc-go's XdsClient is one per process, so a process is a client.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver
)

func main() {
	channels := map[string]*grpc.ClientConn{}
	defer func() {
		for _, conn := range channels {
			_ = conn.Close()
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		words := strings.Fields(in.Text())
		answer := "ok"
		switch {
		case len(words) >= 2 && words[0] == "watch":
			// The channel watches the listener NAME once it leaves idle.
			name := words[len(words)-1]
			if _, ok := channels[name]; ok {
				break
			}
			conn, err := grpc.NewClient("xds:///"+name, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				answer = "channel to xds:///" + name + ": " + strings.ReplaceAll(err.Error(), "\n", " ")
				break
			}
			conn.Connect()
			channels[name] = conn
		case len(words) >= 2 && words[0] == "unwatch":
			name := words[len(words)-1]
			if conn, ok := channels[name]; ok {
				_ = conn.Close()
				delete(channels, name)
			}
		}
		fmt.Println(answer)
	}
}
