package integration

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CLIENT REPLY OFF, SKIP and ON, as Redis: OFF drops every reply until ON
// (whose OK is sent), SKIP the next command's, and a blocking pop's reply
// is dropped too, whether it pops at once or after a wait.
func TestClientReply(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	send := func(cmds ...string) {
		var b strings.Builder
		for _, cmd := range cmds {
			f := strings.Fields(cmd)
			b.WriteString("*" + strconv.Itoa(len(f)) + "\r\n")
			for _, a := range f {
				b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
			}
		}
		if _, err := nc.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	send("CLIENT REPLY OFF", "PING", "DELAY.ADD q 0 x", "RPUSH q y", "CLIENT REPLY SKIP", "PING", "CLIENT REPLY ON", "PING",
		"CLIENT REPLY SKIP", "PING a", "PING b",
		"CLIENT REPLY SKIP", "BLPOP q 1", "LLEN q",
		"CLIENT REPLY SKIP", "BLPOP empty 0.05", "PING c",
		"CLIENT REPLY SKIP", "CLIENT REPLY ON", "CLIENT REPLY maybe", "QUIT")
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(bufio.NewReader(nc))
	if err != nil {
		t.Fatal(err)
	}
	want := "+OK\r\n+PONG\r\n" + "$1\r\nb\r\n" + ":1\r\n" + "$1\r\nc\r\n" + "+OK\r\n-ERR syntax error\r\n+OK\r\n"
	if string(got) != want {
		t.Fatalf("replies %q, want %q", got, want)
	}
}
