package valkeytest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartSeesAnotherProcessOnItsPort: another process (here this test binary, as another test binary's
// server would) holds the port first. The new server answers no connection and exits at start, but a dial to
// the port succeeds: start must report the taken port, not success (CI 2026-12-05: a Sentinel "started" on
// another process's port, and the test's next dial was refused once that process went).
func TestStartSeesAnotherProcessOnItsPort(t *testing.T) {
	Require(t, Default)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	assert.True(t, ListensOn(os.Getpid(), port), "this process holds the port")

	p := &Proc{t: t, Engine: Default, Port: port, Dir: t.TempDir()}
	p.ConfPath = filepath.Join(p.Dir, "valkey.conf")
	writeFile(t, p.ConfPath, "port "+strconv.Itoa(port)+"\nbind 127.0.0.1\ndir "+p.Dir+"\nlogfile \"\"\n")
	err = p.start()
	require.ErrorIs(t, err, errPortTaken, "the server could not bind, though a dial to its port succeeds")
	assert.False(t, p.Running())

	s := StartServer(t, Default, ServerConfig{})
	assert.True(t, ListensOn(s.Pid(), s.Port), "a started server holds its port")
	assert.False(t, ListensOn(s.Pid(), port), "and not another process's")
}
