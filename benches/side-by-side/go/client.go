package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Client: a 10 000-cluster CDS response applied, bytes to ACK, over loopback. grpc-go's
// xDS client lives under google.golang.org/grpc/internal/xds/clients in v1.85.0, which
// no other module may import, so every client runs in a child process against this ADS
// server on 127.0.0.1, and the span is this server's: from handing the response to
// grpc-go's server (which encodes it) to reading the client's ACK of it. Every response
// carries all 10 000 clusters, alternating between two generations (alt_stat_name
// -g1/-g2), so every cluster changes every time; one untimed warm-up response first.
// Between responses the server waits until the client has been quiet for 200 ms (and
// answers grpc-go's EDS requests, untimed), so no other work overlaps a span.

const quiet = 200 * time.Millisecond

type adsServer struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	streams chan adsStream
}

type adsStream struct {
	send func(*discovery.DiscoveryResponse) error
	reqs <-chan *discovery.DiscoveryRequest
	done chan struct{}
}

func (s *adsServer) StreamAggregatedResources(st discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	reqs := make(chan *discovery.DiscoveryRequest, 1024)
	go func() {
		defer close(reqs)
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			reqs <- r
		}
	}()
	done := make(chan struct{})
	s.streams <- adsStream{st.Send, reqs, done}
	select {
	case <-done:
	case <-st.Context().Done():
	}
	return nil
}

// generations are the two full states sent alternately: the bodies as read, and the same
// clusters with alt_stat_name "-g2".
func generations(b *Bodies) [2][]*anypb.Any {
	var gens [2][]*anypb.Any
	for i, c := range b.Typed {
		g2 := proto.Clone(c).(*clusterv3.Cluster)
		g2.AltStatName = c.GetName() + "-g2"
		raw2, err := proto.Marshal(g2)
		must(err)
		gens[0] = append(gens[0], &anypb.Any{TypeUrl: cds, Value: b.Raw[i]})
		gens[1] = append(gens[1], &anypb.Any{TypeUrl: cds, Value: raw2})
	}
	return gens
}

type driver struct {
	st      adsStream
	pid     int // the client's process
	nonce   int
	eds     []string // the EDS names last requested and not yet answered
	edsDone bool
}

// next returns the next request, within the deadline.
func (d *driver) next(timeout time.Duration) (*discovery.DiscoveryRequest, error) {
	select {
	case r, ok := <-d.st.reqs:
		if !ok {
			return nil, errors.New("the client closed its stream")
		}
		if debugClient {
			fmt.Fprintf(os.Stderr, "request %s names=%d version=%q nonce=%q error=%v\n", r.GetTypeUrl(), len(r.GetResourceNames()), r.GetVersionInfo(), r.GetResponseNonce(), r.GetErrorDetail())
		}
		return r, nil
	case <-time.After(timeout):
		return nil, errTimeout
	}
}

var errTimeout = errors.New("timeout")

// debugClient (XDS_BENCH_DEBUG=1) prints every request the server reads.
var debugClient = os.Getenv("XDS_BENCH_DEBUG") == "1"

func (d *driver) respond(typeURL, version string, resources []*anypb.Any) (string, error) {
	d.nonce++
	nonce := fmt.Sprintf("n%d", d.nonce)
	return nonce, d.st.send(&discovery.DiscoveryResponse{VersionInfo: version, Resources: resources, TypeUrl: typeURL, Nonce: nonce})
}

// handle answers what is not the measured exchange: LDS (grpc-go's listener and route),
// EDS (remembered, answered between spans); it returns true on a CDS request that covers
// every cluster (wildcard, or all 10 000 names).
func (d *driver) handle(r *discovery.DiscoveryRequest) (bool, error) {
	switch r.GetTypeUrl() {
	case ldsType:
		if len(r.GetResourceNames()) > 0 && r.GetResponseNonce() == "" {
			l, err := listener(r.GetResourceNames()[0])
			if err != nil {
				return false, err
			}
			_, err = d.respond(ldsType, "1", []*anypb.Any{l})
			return false, err
		}
	case edsType:
		// O(1): grpc-go sends thousands of these, and an ACK queued behind them must be
		// read promptly. Any request without a nonce, or a NACK, is answered again.
		if r.GetResponseNonce() == "" || r.GetErrorDetail() != nil {
			d.eds = r.GetResourceNames()
			d.edsDone = false
		}
	case cds:
		n := len(r.GetResourceNames())
		return n == 0 || n == clusters, nil
	}
	return false, nil
}

// settle waits until the client has been quiet for 200 ms (no request, and under 10 ms
// of CPU: grpc-go processes an update long after its ACK), then answers its EDS
// subscription if that changed (grpc-go subscribes to its 10 000 EDS names one request at
// a time: answering each would be 10 000 growing responses), and waits again.
func (d *driver) settle() error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		cpu := cpuTime(d.pid)
		r, err := d.next(quiet)
		if errors.Is(err, errTimeout) {
			if len(d.eds) == 0 || d.edsDone {
				// Quiet on the wire and idle: under 10 ms of CPU in the last 200 ms.
				if cpuTime(d.pid)-cpu < 10*time.Millisecond {
					return nil
				}
				continue
			}
			d.edsDone = true
			if _, err := d.respond(edsType, "1", endpoints(d.eds)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if _, err := d.handle(r); err != nil {
			return err
		}
	}
	return errors.New("the client never went quiet")
}

// exchange sends one full CDS state and times until its ACK.
func (d *driver) exchange(version string, resources []*anypb.Any) (time.Duration, error) {
	start := time.Now()
	nonce, err := d.respond(cds, version, resources)
	if err != nil {
		return 0, err
	}
	for {
		r, err := d.next(2 * time.Minute)
		if err != nil {
			return 0, err
		}
		if r.GetTypeUrl() == cds && r.GetResponseNonce() == nonce {
			elapsed := time.Since(start)
			if r.GetErrorDetail() != nil || r.GetVersionInfo() != version {
				return 0, fmt.Errorf("not an ACK of %s: %v", version, r)
			}
			return elapsed, nil
		}
		if _, err := d.handle(r); err != nil {
			return 0, err
		}
	}
}

// runClient serves one client per -client-first (first: the client's first response,
// a new client process each time) or one client for all iterations (otherwise: later
// responses, every cluster changed), and prints its RESULT line.
func runClient(b *Bodies, iterations int) {
	gens := generations(b)
	var samples []float64
	figure := "client"
	if clientFirst {
		figure = "client.first"
		for i := 0; i < iterations; i++ {
			samples = append(samples, serveClient(gens, 0)...)
		}
	} else {
		samples = serveClient(gens, iterations)
	}
	sort.Float64s(samples)
	fmt.Printf("RESULT\t%s\t%s\t%.9f\t%.9f\t%.9f\n", figure, clientPeer, samples[len(samples)/2], samples[len(samples)/4], samples[len(samples)*3/4])
}

// serveClient starts a client, waits for its CDS subscription to cover every cluster,
// and times its first response and then `later` more; with later = 0 it returns the
// first's time, otherwise the later ones'.
func serveClient(gens [2][]*anypb.Any, later int) []float64 {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	srv := grpc.NewServer(grpc.MaxSendMsgSize(64 << 20))
	ads := &adsServer{streams: make(chan adsStream, 1)}
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, ads)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	label, child := startPeer(lis.Addr().String())
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	}()
	var st adsStream
	select {
	case st = <-ads.streams:
	case <-time.After(2 * time.Minute):
		panic("client: no stream from " + label)
	}
	defer close(st.done)
	d := &driver{st: st, pid: child.Process.Pid}
	// Until the client's CDS subscription covers every cluster.
	for ready := false; !ready; {
		r, err := d.next(2 * time.Minute)
		must(err)
		ready, err = d.handle(r)
		must(err)
	}
	var samples []float64
	for i := 0; i <= later; i++ {
		must(d.settle())
		t, err := d.exchange(fmt.Sprintf("v%d", i+1), gens[i%2])
		must(err)
		if later == 0 || i > 0 {
			samples = append(samples, t.Seconds())
		}
	}
	return samples
}

// The client to serve, from -client-peer: "grpc-go" (this binary in grpcgo-client mode)
// or "rust-opaque" / "rust-typed" (vs_go client, its path from -rust-bin).
var clientPeer, rustBin string

// clientFirst (-client-first) times each client's first response only.
var clientFirst bool

func startPeer(addr string) (string, *exec.Cmd) {
	var cmd *exec.Cmd
	switch clientPeer {
	case "grpc-go":
		self, err := os.Executable()
		must(err)
		cmd = exec.Command(self, "-grpcgo-client")
		cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP_CONFIG="+bootstrapFor(addr))
	case "rust-opaque":
		cmd = exec.Command(rustBin, "client", "--client-addr", addr)
	case "rust-typed":
		cmd = exec.Command(rustBin, "client", "--client-addr", addr, "--typed")
	default:
		panic("-client-peer grpc-go|rust-opaque|rust-typed")
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// The child dies with this process, whatever ends it (a timeout included).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(cmd.Start())
	return clientPeer, cmd
}

// cpuTime is the user + system CPU time of process pid so far (/proc/PID/stat, in clock
// ticks of 10 ms), zero when unreadable.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which ends with the last ')'): utime is the 12th.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
