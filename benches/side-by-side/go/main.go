// Command side-by-side-go is the Go side of benches/side-by-side/go.sh: go-control-plane
// v0.14.0 driven in process on the same Envoy Cluster bytes as the Rust side
// (`vs_go`), printing machine-readable RESULT and MEMORY lines.
//
//	side-by-side-go -bodies FILE [-iterations N] [-fanout-iterations N] server|fanout|memory|client ...
package main

import (
	"flag"
	"fmt"
	"os"
)

const clusters = 10_000

func main() {
	bodiesPath := flag.String("bodies", "", "the bodies file written by `vs_go bodies FILE`")
	iterations := flag.Int("iterations", 21, "iterations per contender (server, client)")
	fanoutIterations := flag.Int("fanout-iterations", 1, "iterations per contender (fan-out)")
	flag.StringVar(&clientPeer, "client-peer", "grpc-go", "client section: grpc-go, rust-opaque or rust-typed")
	flag.StringVar(&rustBin, "rust-bin", "target/release/vs_go", "client section: the Rust side's binary")
	flag.BoolVar(&clientFirst, "client-first", false, "client section: time each client's first response (a new client per iteration)")
	grpcgoClient := flag.Bool("grpcgo-client", false, "run as the client section's grpc-go child")
	flag.Parse()
	if *grpcgoClient {
		runGrpcGoClient()
		return
	}
	if *bodiesPath == "" {
		fmt.Fprintln(os.Stderr, "-bodies FILE is required")
		os.Exit(2)
	}
	b, err := readBodies(*bodiesPath, clusters)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, section := range flag.Args() {
		switch section {
		case "server":
			runServer(b, *iterations)
		case "fanout":
			runFanout(b, *fanoutIterations)
		case "memory":
			runMemory(b)
		case "client":
			runClient(b, *iterations)
		default:
			fmt.Fprintln(os.Stderr, "unknown section", section)
			os.Exit(2)
		}
	}
}
