package bootstrap

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aux encodes one AUX record with raw strings.
func aux(k, v string) []byte {
	b := []byte{rdbOpcodeAux, byte(len(k))}
	b = append(b, k...)
	b = append(b, byte(len(v)))
	return append(b, v...)
}

// lzfReplID is the repl-id "abc"x13+"a" (40 hex characters) as an LZF-compressed RDB string: a literal run of
// "abc", then one back reference of 37 bytes at distance 3.
var lzfReplID = []byte{0xC3, 7, 40, 2, 'a', 'b', 'c', 0xE0, 28, 2}

func TestParseRDBHeader(t *testing.T) {
	replica, err := os.ReadFile("testdata/valkey801-replica-500keys.rdb")
	require.NoError(t, err)
	base, err := os.ReadFile("testdata/valkey801-aof-base-empty.rdb")
	require.NoError(t, err)
	lzf := append([]byte("VALKEY080"), aux("repl-stream-db", "0")...)
	lzf = append(lzf, append([]byte{rdbOpcodeAux, 7}, "repl-id"...)...)
	lzf = append(lzf, lzfReplID...)
	lzf = append(lzf, rdbOpcodeAux, 11)
	lzf = append(lzf, "repl-offset"...)
	lzf = append(lzf, 0xC1, 0x39, 0x30, 0xFE, 0) // int16 12345, then SELECTDB 0

	tests := []struct {
		name    string
		in      []byte
		magic   string
		version int
		data    bool
		replID  string
		offset  int64
	}{
		// written by valkey-server 8.0.1 as a replica at shutdown: 500 keys, its primary's replication position
		{"valkey 8.0.1 replica dump", replica, "REDIS", 11, true, "c3c44a09240cfb1058c657141063d6f843b201f3", 14915},
		// the RDB preamble of an AOF base of an empty dataset: never "data", and no replication position
		{"valkey 8.0.1 empty AOF base", base, "REDIS", 11, false, "", 0},
		{"valkey 9 magic, LZF repl-id, int16 offset", lzf, "VALKEY", 80, true, strings.Repeat("abc", 13) + "a", 12345},
		{"aux then EOF", append(append([]byte("REDIS0011"), aux("ctime", "1")...), rdbOpcodeEOF), "REDIS", 11, false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseRDBHeader(bytes.NewReader(tt.in))
			require.NoError(t, err)
			assert.Equal(t, tt.magic, h.Magic)
			assert.Equal(t, tt.version, h.Version)
			assert.Equal(t, tt.data, h.HasData)
			id, off, ok := h.Position()
			assert.Equal(t, tt.replID != "", ok)
			assert.Equal(t, tt.replID, id)
			assert.Equal(t, tt.offset, off)
		})
	}
	assert.Equal(t, "1", must(ParseRDBHeader(bytes.NewReader(base))).Aux["aof-base"])
}

func must(h RDBHeader, err error) RDBHeader {
	if err != nil {
		panic(err)
	}
	return h
}

func TestParseRDBHeaderRefusesGarbage(t *testing.T) {
	for name, in := range map[string][]byte{
		"AOF text":          []byte("*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"),
		"short":             []byte("REDIS"),
		"bad version":       []byte("REDISxxxx"),
		"truncated aux":     append([]byte("REDIS0011"), rdbOpcodeAux, 5, 'a'),
		"no record":         []byte("REDIS0011"),
		"huge string":       append([]byte("REDIS0011"), rdbOpcodeAux, 0x80, 0x7F, 0xFF, 0xFF, 0xFF),
		"bad lzf reference": append([]byte("REDIS0011"), rdbOpcodeAux, 1, 'k', 0xC3, 2, 10, 0x20, 0x50),
	} {
		_, err := ParseRDBHeader(bytes.NewReader(in))
		assert.Error(t, err, name)
	}
	_, err := ParseRDBHeader(strings.NewReader("*2\r\n$6\r\nSELECT\r\n"))
	assert.ErrorIs(t, err, ErrNotRDB)
}

// FuzzParseRDBHeader: garbage never panics, and a header that parses has a magic and a version.
func FuzzParseRDBHeader(f *testing.F) {
	for _, name := range []string{"testdata/valkey801-replica-500keys.rdb", "testdata/valkey801-aof-base-empty.rdb"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(append([]byte("VALKEY080\xfa\x07repl-id"), lzfReplID...))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := ParseRDBHeader(bytes.NewReader(in))
		if err == nil && (h.Magic == "" || h.Version < 1) {
			t.Fatalf("parsed without magic/version: %+v", h)
		}
		h.Position()
	})
}
