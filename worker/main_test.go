package worker_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/resp"
)

// delaydAddr is a delayd served in this test process (engine, dispatcher
// and RESP server, no log on disk), for the examples and the tests that
// need a server but no process of their own. The tests that kill
// processes and clusters are in integration_test (worker_lib_test.go).
var delaydAddr string

func TestMain(m *testing.M) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := resp.Listen(resp.Options{Addr: "127.0.0.1:0",
		Dispatcher: commands.New(commands.Options{Engine: eng, Log: zerolog.Nop()}), Log: zerolog.Nop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go srv.Serve()
	delaydAddr = srv.Addr().String()
	code := m.Run()
	srv.Close(0)
	eng.Close()
	os.Exit(code)
}
