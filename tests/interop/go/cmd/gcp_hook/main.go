// gcp_hook is `xds-sansio conform server`'s hook (docs/conform.md, "The hook") in front of
// go-control-plane v0.14.0: a control socket that starts, feeds and stops a gRPC server
// serving go-control-plane's discovery services from a SnapshotCache or from LinearCaches.
//
//	gcp_hook --cache snapshot|linear --control ADDR --listen ADDR
//
// `start`: a fresh server on --listen with an empty cache (the previous one is stopped).
// `publish`: the operations change the cache as one revision (see store.go, caches.go).
// `stop`: the server is shut down, its streams closed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
)

func main() {
	kind := flag.String("cache", "snapshot", "snapshot (SnapshotCache) or linear (one LinearCache per type behind a MuxCache)")
	control := flag.String("control", "", "the control socket's HOST:PORT")
	listen := flag.String("listen", "", "the discovery server's HOST:PORT")
	flag.Parse()
	if *control == "" || *listen == "" || (*kind != "snapshot" && *kind != "linear") {
		fmt.Fprintln(os.Stderr, "usage: gcp_hook --cache snapshot|linear --control ADDR --listen ADDR")
		os.Exit(2)
	}
	socket, err := net.Listen("tcp", *control)
	if err != nil {
		log.Fatalf("--control: %v", err)
	}
	fmt.Printf("hook listening on %s, the server on %s (%s cache)\n", socket.Addr(), *listen, *kind)
	h := &hook{kind: *kind, listen: *listen}
	for {
		conn, err := socket.Accept()
		if err != nil {
			continue
		}
		serveControl(h, conn)
		// conform is gone: nothing keeps serving for it.
		h.stop()
	}
}

// serveControl answers one line per event: `ok` or the reason it failed.
func serveControl(h *hook, conn net.Conn) {
	defer conn.Close()
	lines := bufio.NewScanner(conn)
	lines.Buffer(make([]byte, 1<<20), 64<<20)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if line == "" {
			continue
		}
		var ev event
		answer := "ok"
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			answer = "not JSON: " + err.Error()
		} else if err := h.handle(&ev); err != nil {
			answer = strings.ReplaceAll(err.Error(), "\n", " ")
		}
		fmt.Printf("%s -> %s\n", ev.Hook, answer)
		if _, err := fmt.Fprintf(conn, "%s\n", answer); err != nil {
			return
		}
	}
}
