package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// adsServer is our examples/ads_server: it serves a JSON resources file, reloaded on
// SIGHUP; SIGUSR1 ends its streams.
type adsServer struct {
	cmd  *exec.Cmd
	file string
	addr string
}

func startADSServer(binary, descriptors, workdir, record string, initial []resource) (*adsServer, error) {
	s := &adsServer{file: filepath.Join(workdir, "resources.json")}
	if err := s.writeFile(initial); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(workdir, "ads_server.log"))
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(binary, "--listen", "127.0.0.1:0", "--resources", s.file,
		"--descriptors", descriptors, "--record", record, "--verbose")
	s.cmd.Stderr = logFile
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, "listening on ") {
			s.close()
			return nil, fmt.Errorf("ads_server did not start: %q", line)
		}
		fields := strings.Fields(line)
		s.addr = fields[len(fields)-1]
	case <-time.After(10 * time.Second):
		s.close()
		return nil, fmt.Errorf("ads_server did not say where it listens within 10 s")
	}
	return s, nil
}

// writeFile writes {"resources": [canonical JSON of each Any]} atomically.
func (s *adsServer) writeFile(resources []resource) error {
	items := make([]json.RawMessage, 0, len(resources))
	for _, r := range resources {
		a, err := anypb.New(r.message)
		if err != nil {
			return err
		}
		b, err := protojson.Marshal(a)
		if err != nil {
			return err
		}
		items = append(items, b)
	}
	body, err := json.MarshalIndent(map[string][]json.RawMessage{"resources": items}, "", " ")
	if err != nil {
		return err
	}
	tmp := s.file + ".tmp"
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.file)
}

func (s *adsServer) publish(resources []resource) error {
	if err := s.writeFile(resources); err != nil {
		return err
	}
	return s.cmd.Process.Signal(syscall.SIGHUP)
}

func (s *adsServer) endStreams() error { return s.cmd.Process.Signal(syscall.SIGUSR1) }

func (s *adsServer) address() string { return s.addr }

func (s *adsServer) close() {
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}
