package runner

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestRunStoppedDuringPreflight: a stop asked for while the storage check
// waits on a store that does not answer is a clean stop (nil, exit 0), not
// a storage failure, and it does not wait for the check's deadline.
func TestRunStoppedDuringPreflight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		time.Sleep(100 * time.Millisecond) // let the client's conn goroutines see the close
	}()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	cfg := testConfig([]string{"127.0.0.1:1"}, t.TempDir())
	cfg.Storage.URL = "s3://hole?endpoint=http://" + ln.Addr().String() + "&use_path_style=true&region=us-east-1"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := testLogger(t)
	go func() { done <- Run(ctx, cfg, log, Options{}) }()
	select {
	case <-accepted: // the check is waiting on the store
	case <-time.After(30 * time.Second):
		t.Fatal("the preflight never connected")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after a stop during the preflight", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
}
