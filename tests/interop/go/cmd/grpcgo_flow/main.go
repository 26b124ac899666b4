// Command grpcgo_flow: grpc-go's xDS client against a management server, the story of
// tests/interop/grpc_python/xds_flow.py (issue 8) ported to Go.
//
// Two echo backends, a management server on 127.0.0.1 and a gRPC channel to
// xds:///echo.test whose bootstrap (GRPC_XDS_BOOTSTRAP) names it. The store serves a
// Listener (API listener, RDS over ADS), a RouteConfiguration, a Cluster (EDS over ADS)
// and a ClusterLoadAssignment; the story then walks six steps, reading the client's view
// through CSDS (google.golang.org/grpc/xds/csds) after each and comparing it with the
// store. Every wait is bounded. Writes WORKDIR/report.json (steps, deviations, result) and
// exits non-zero on a failed expectation.
//
// The server is our ads_server (a JSON resources file, SIGHUP to reload, SIGUSR1 to end
// the streams, --record) or, with --server go-control-plane, go-control-plane's SotW
// server over a SnapshotCache in this process (a snapshot per store write; the gRPC
// server restarted on its port to end the streams). With XDS_TAP (the xds-sansio
// binary), `xds-sansio tap` sits between the client and the server, recording to
// WORKDIR/tap.jsonl; go-control-plane's conversation is read from that recording.
//
// usage: grpcgo_flow ADS_SERVER DESCRIPTORS WORKDIR
//
//	grpcgo_flow --server go-control-plane [--ads-cache=false] WORKDIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver and the xDS balancers
)

const stepTimeout = 20 * time.Second

// report is report.json, the shape of xds_flow.py's.
type report struct {
	Peer       string           `json:"peer"`
	Server     string           `json:"server"`
	Steps      []map[string]any `json:"steps"`
	Deviations []string         `json:"deviations"`
	Failure    string           `json:"failure,omitempty"`
	Result     string           `json:"result"`
}

var rep = report{Peer: "grpc-go " + grpc.Version, Steps: []map[string]any{}, Deviations: []string{}}

// failure is a failed expectation: it ends the story (recovered in main).
type failure struct{ message string }

func fail(format string, args ...any) {
	message := fmt.Sprintf(format, args...)
	rep.Failure = message
	panic(failure{message})
}

func logf(format string, args ...any) {
	fmt.Printf("[grpc-go] "+format+"\n", args...)
}

func deviation(format string, args ...any) {
	rep.Deviations = append(rep.Deviations, fmt.Sprintf(format, args...))
}

type options struct {
	server      string // "ads_server" or "go-control-plane"
	adsCache    bool   // go-control-plane's SnapshotCache(ads, ...)
	adsServer   string
	descriptors string
	workdir     string
}

func parseArgs() options {
	var o options
	flag.StringVar(&o.server, "server", "ads_server", "ads_server (ours) or go-control-plane")
	flag.BoolVar(&o.adsCache, "ads-cache", true, "go-control-plane: NewSnapshotCache(ads=...)")
	flag.Parse()
	args := flag.Args()
	switch {
	case o.server == "ads_server" && len(args) == 3:
		o.adsServer, o.descriptors, o.workdir = args[0], args[1], args[2]
	case o.server == "go-control-plane" && len(args) == 1:
		o.workdir = args[0]
	default:
		fmt.Fprintln(os.Stderr, "usage: grpcgo_flow ADS_SERVER DESCRIPTORS WORKDIR\n"+
			"       grpcgo_flow --server go-control-plane [--ads-cache=false] WORKDIR")
		os.Exit(2)
	}
	return o
}

// withBootstrap re-executes the program with GRPC_XDS_BOOTSTRAP naming WORKDIR's
// bootstrap: grpc-go reads the variable when it starts, the file when the first channel
// resolves (written by then, once the server's address is known).
func withBootstrap(path string) {
	if os.Getenv("GRPC_XDS_BOOTSTRAP") == path {
		return
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env := append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+path)
	err = syscall.Exec(self, os.Args, env)
	fmt.Fprintln(os.Stderr, "re-executing with GRPC_XDS_BOOTSTRAP:", err)
	os.Exit(1)
}

// moduleVersion is the version of a module this program was built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				return dep.Version
			}
		}
	}
	return "(unknown version)"
}

func main() {
	o := parseArgs()
	if err := os.MkdirAll(o.workdir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workdir, _ := filepath.Abs(o.workdir)
	o.workdir = workdir
	withBootstrap(filepath.Join(workdir, "bootstrap.json"))

	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				f, ok := r.(failure)
				if !ok {
					f = failure{fmt.Sprint(r)}
					rep.Failure = f.message
				}
				rep.Result = "FAILED: " + f.message
				code = 1
			}
		}()
		run(o)
		rep.Result = "passed"
	}()
	body, _ := json.MarshalIndent(rep, "", " ")
	_ = os.WriteFile(filepath.Join(workdir, "report.json"), body, 0o644)
	logf("report: %s", body)
	os.Exit(code)
}
