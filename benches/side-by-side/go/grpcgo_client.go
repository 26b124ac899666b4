package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver and its xDS client
)

// runGrpcGoClient is the child process of the client section: a gRPC channel to
// xds:///bench, i.e. grpc-go's xDS resolver and client, against the ADS server its
// bootstrap names (grpc-go reads GRPC_XDS_BOOTSTRAP_CONFIG when it starts: the parent
// sets it, see bootstrapFor).
// The listener it gets routes to all 10 000 clusters, so it watches every one of them.
func runGrpcGoClient() {
	cc, err := grpc.NewClient("xds:///"+listenerName, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(err)
	cc.Connect()
	// Lives until the parent ends (it is killed then), bounded in time and in memory: a
	// grpc-go client orphaned with its 10 000 watches once grew past 20 GB here.
	deadline := time.Now().Add(20 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.Sys > 6<<30 {
			fmt.Fprintf(os.Stderr, "grpc-go client: %d MB of memory, exiting\n", m.Sys>>20)
			os.Exit(3)
		}
	}
}

func bootstrapFor(addr string) string {
	return fmt.Sprintf(`{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}],"server_features":["xds_v3"]}],"node":{"id":"grpc-go-bench"}}`, addr)
}
