package devstack

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Free ports for the processes tests and the bench start (a worker's
// --metrics-address) come from here up to the kernel's ephemeral range:
// no fixed port of the stack is this high, and the kernel never gives a
// connection's local end a port below the ephemeral range.
const firstFreePort = 24000

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeAddr is a loopback address (127.0.0.1:port) nothing listens on, for
// a process about to be started. A port from 127.0.0.1:0 is from the
// ephemeral range, where any outgoing connection of the suite's processes
// (to Temporal, PostgreSQL, the apiserver) may take it between the check
// and the child's bind: a worker failed to start on "address already in
// use" in a CI run, and its test read another worker's metrics there.
// FreeAddr picks at random below that range, never the same port twice in
// one process.
func FreeAddr() (string, error) {
	last := ephemeralStart() - 1
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 200 {
		port := firstFreePort + rand.IntN(last-firstFreePort+1)
		if handedOut.ports[port] {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = l.Close()
		handedOut.ports[port] = true
		return addr, nil
	}
	return "", errors.New("no free loopback port between " + strconv.Itoa(firstFreePort) + " and " + strconv.Itoa(last))
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range; Linux's default 32768).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > firstFreePort+1000 {
				return n
			}
		}
	}
	return 32768
}
