package resp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayd/delayd/engine"
)

// clientFields is the line of CLIENT LIST for the client with this id, as
// field -> value.
func clientFields(t *testing.T, admin net.Conn, br *bufio.Reader, id string) map[string]string {
	t.Helper()
	fmt.Fprintf(admin, "CLIENT LIST ID %s\r\n", id)
	head, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("CLIENT LIST: %q %v", head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	body := make([]byte, n+2)
	if _, err := io.ReadFull(br, body); err != nil {
		t.Fatal(err)
	}
	f := map[string]string{}
	for _, kv := range strings.Fields(string(body)) {
		k, v, _ := strings.Cut(kv, "=")
		f[k] = v
	}
	return f
}

// TestClientListShowsPendingOutput: a client that sends reads and does not
// read the replies shows them in CLIENT LIST's omem= (and oll=) while the
// server holds them, and 0 once it has read them.
func TestClientListShowsPendingOutput(t *testing.T) {
	_, dial := inProcess(t, engine.Options{MaxPayload: 1 << 20}, 1<<16)
	slow, slowR := dial()
	admin, adminR := dial()

	const payload = 256 << 10
	fmt.Fprintf(slow, "CLIENT ID\r\n*4\r\n$9\r\nDELAY.ADD\r\n$1\r\nq\r\n$1\r\n0\r\n$%d\r\n%s\r\n", payload, strings.Repeat("p", payload))
	idLine, _ := slowR.ReadString('\n')
	id := strings.TrimSpace(strings.TrimPrefix(idLine, ":"))
	if added, _ := slowR.ReadString('\n'); !strings.HasPrefix(added, "$") {
		t.Fatalf("CLIENT ID then DELAY.ADD: %q %q", idLine, added)
	}
	slowR.ReadString('\n')

	// 16 MiB of replies in one batch, more than the socket buffers take
	// (Linux's autotuning stops at 4 MiB sent and 6 MiB received):
	// the server's write of the batch waits for the client. (A reply the
	// client has read may still count for a moment, until the write
	// returns: hence the wait for more than one.)
	const reads = 64
	fmt.Fprint(slow, strings.Repeat("LRANGE q 0 -1\r\n", reads))
	var f map[string]string
	var omem int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f = clientFields(t, admin, adminR, id)
		omem, _ = strconv.Atoi(f["omem"])
		if omem > payload || time.Now().After(deadline) {
			break
		}
	}
	if omem <= payload || omem > reads*(payload+64) || f["oll"] == "0" || f["tot-mem"] != f["omem"] || f["obl"] != "0" {
		t.Fatalf("a client not reading %d replies: omem=%s oll=%s obl=%s tot-mem=%s; want more than one reply and at most all of them, oll > 0, obl 0, tot-mem = omem",
			reads, f["omem"], f["oll"], f["obl"], f["tot-mem"])
	}
	t.Logf("while not reading: omem=%s oll=%s", f["omem"], f["oll"])

	// It reads everything: nothing is held any more.
	if _, err := io.CopyN(io.Discard, slowR, int64(reads)*int64(len(fmt.Sprintf("*1\r\n$%d\r\n\r\n", payload))+payload)); err != nil {
		t.Fatalf("reading the replies: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f = clientFields(t, admin, adminR, id)
		if f["omem"] == "0" || time.Now().After(deadline) {
			break
		}
	}
	if f["omem"] != "0" || f["oll"] != "0" {
		t.Fatalf("after reading: omem=%s oll=%s, want 0", f["omem"], f["oll"])
	}
}
