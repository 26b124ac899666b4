package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// tap is `xds-sansio tap` between the client and the server (env XDS_TAP: the binary).
type tap struct{ cmd *exec.Cmd }

// startTap returns nil without XDS_TAP; else the tap and the address the client dials.
func startTap(upstream, workdir string) (*tap, string) {
	binary := os.Getenv("XDS_TAP")
	if binary == "" {
		return nil, ""
	}
	logPath := filepath.Join(workdir, "tap.txt")
	out, err := os.Create(logPath)
	if err != nil {
		fail("tap: %v", err)
	}
	cmd := exec.Command(binary, "tap", "--listen", "127.0.0.1:0", "--upstream", upstream,
		"--record", filepath.Join(workdir, "tap.jsonl"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		fail("tap: %v", err)
	}
	t := &tap{cmd}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(logPath); err == nil {
			first, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			if strings.HasPrefix(first, "tap listening on ") {
				return t, strings.TrimRight(strings.Fields(first)[3], ",")
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.stop()
	fail("the tap did not start")
	return nil, ""
}

// stop ends the tap with SIGTERM, so it prints its closing line.
func (t *tap) stop() {
	if t == nil {
		return
	}
	_ = t.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = t.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = t.cmd.Process.Kill()
		<-done
	}
}
