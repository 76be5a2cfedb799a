package bootstrap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// RDBHeader is what ParseRDBHeader reads from the start of an RDB file (or of an AOF base file in RDB
// format): the format version, the auxiliary fields, and whether anything follows them.
//
// The layout is the RDB format's (Valkey source, rdb.c rdbSaveRio / rdbLoadRioWithLoadingCtx): a 9-byte magic
// "REDIS%04d" (Redis, Valkey up to 8.x) or "VALKEY%03d" (Valkey 9+), then AUX records (opcode 0xFA, two
// strings) such as valkey-ver, ctime, repl-id, repl-offset and aof-base, then the data (SELECTDB, RESIZEDB,
// FUNCTION2, module aux, ...) and EOF (0xFF).
//
// Why a parser of our own rather than valkey-check-rdb's output: the boot step needs only these first few
// hundred bytes, while valkey-check-rdb reads and verifies the whole file (minutes for a large dataset, on
// every pod start); it lives in the server image under engine-specific names (valkey-/redis-check-rdb) that
// custom images may lack, and its text output is no interface. The header's layout has been stable since
// RDB 7, and FuzzParseRDBHeader keeps garbage from panicking.
type RDBHeader struct {
	// Magic is "REDIS" or "VALKEY"; Version the number after it.
	Magic   string
	Version int
	// Aux holds every auxiliary field, by name, with integer-encoded values in decimal.
	Aux map[string]string
	// HasData is true when the first record after the aux fields is not EOF: keys, functions or module data
	// follow. An empty dataset saves only the aux fields (empty databases are skipped).
	HasData bool
}

// Position returns the replication id and offset the file records (aux fields repl-id, repl-offset,
// repl-stream-db; rdb.c rdbSaveInfoAuxFields). ok is false when the file records none, which happens for a
// primary that never had a replica (no backlog) and for every AOF base file (aof.c saves its RDB preamble
// without replication info), or when the fields are malformed. This is the same test the server applies
// before it trusts them on load (server.c loadDataFromDisk).
func (h RDBHeader) Position() (replID string, offset int64, ok bool) {
	id, off, db := h.Aux["repl-id"], h.Aux["repl-offset"], h.Aux["repl-stream-db"]
	n, err := strconv.ParseInt(off, 10, 64)
	if !validReplID(id) || db == "" || db == "-1" || err != nil || n < 0 {
		return "", 0, false
	}
	return id, n, true
}

// validReplID reports whether id is a replication id: 40 lowercase hex characters.
func validReplID(id string) bool {
	if len(id) != 40 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ErrNotRDB is returned (wrapped) when the input does not start with an RDB magic.
var ErrNotRDB = errors.New("not an RDB file")

// The RDB opcodes and encodings ParseRDBHeader needs (rdb.h).
const (
	rdbOpcodeAux = 0xFA
	rdbOpcodeEOF = 0xFF
	rdbEncInt8   = 0
	rdbEncInt16  = 1
	rdbEncInt32  = 2
	rdbEncLZF    = 3
	// limits that keep garbage from costing memory or time: aux strings are short (repl-id is 40 bytes)
	maxAuxString = 1 << 16
	maxAuxFields = 1 << 15
)

// ParseRDBHeader reads the magic and the aux fields of an RDB stream and stops at the first other record; it
// never reads the keys. Errors name the byte offset; garbage never panics (FuzzParseRDBHeader).
func ParseRDBHeader(r io.Reader) (RDBHeader, error) {
	p := &rdbReader{r: bufio.NewReader(r)}
	var h RDBHeader
	magic := make([]byte, 9)
	if err := p.full(magic); err != nil {
		return h, fmt.Errorf("%w: %w", ErrNotRDB, err)
	}
	digits := ""
	switch {
	case string(magic[:5]) == "REDIS":
		h.Magic, digits = "REDIS", string(magic[5:])
	case string(magic[:6]) == "VALKEY":
		h.Magic, digits = "VALKEY", string(magic[6:])
	default:
		return h, fmt.Errorf("%w: magic %q", ErrNotRDB, magic)
	}
	v, err := strconv.Atoi(digits)
	if err != nil || v < 1 {
		return h, fmt.Errorf("%w: version %q", ErrNotRDB, digits)
	}
	h.Version = v
	h.Aux = map[string]string{}
	for i := 0; ; i++ {
		if i > maxAuxFields {
			return h, fmt.Errorf("rdb: more than %d aux fields", maxAuxFields)
		}
		op, err := p.byte()
		if err != nil {
			return h, fmt.Errorf("rdb: record at offset %d: %w", p.off, err)
		}
		if op != rdbOpcodeAux {
			h.HasData = op != rdbOpcodeEOF
			return h, nil
		}
		k, err := p.string()
		if err != nil {
			return h, fmt.Errorf("rdb: aux key at offset %d: %w", p.off, err)
		}
		val, err := p.string()
		if err != nil {
			return h, fmt.Errorf("rdb: aux %q at offset %d: %w", k, p.off, err)
		}
		h.Aux[k] = val
	}
}

type rdbReader struct {
	r   *bufio.Reader
	off int64
}

func (p *rdbReader) full(b []byte) error {
	n, err := io.ReadFull(p.r, b)
	p.off += int64(n)
	return err
}

func (p *rdbReader) byte() (byte, error) {
	b, err := p.r.ReadByte()
	if err == nil {
		p.off++
	}
	return b, err
}

// length reads an RDB length; encoded is true when the value is a special encoding (rdbLoadLenByRef).
func (p *rdbReader) length() (n uint64, encoded bool, err error) {
	b, err := p.byte()
	if err != nil {
		return 0, false, err
	}
	switch b >> 6 {
	case 0:
		return uint64(b & 0x3F), false, nil
	case 1:
		b2, err := p.byte()
		return uint64(b&0x3F)<<8 | uint64(b2), false, err
	case 3:
		return uint64(b & 0x3F), true, nil
	}
	switch b {
	case 0x80:
		var buf [4]byte
		err := p.full(buf[:])
		return uint64(binary.BigEndian.Uint32(buf[:])), false, err
	case 0x81:
		var buf [8]byte
		err := p.full(buf[:])
		return binary.BigEndian.Uint64(buf[:]), false, err
	}
	return 0, false, fmt.Errorf("unknown length byte 0x%02x", b)
}

// string reads an RDB string: raw, integer-encoded or LZF-compressed (rdbGenericLoadStringObject).
func (p *rdbReader) string() (string, error) {
	n, encoded, err := p.length()
	if err != nil {
		return "", err
	}
	if !encoded {
		if n > maxAuxString {
			return "", fmt.Errorf("string of %d bytes", n)
		}
		b := make([]byte, n)
		return string(b), p.full(b)
	}
	switch n {
	case rdbEncInt8:
		b, err := p.byte()
		return strconv.Itoa(int(int8(b))), err
	case rdbEncInt16:
		var b [2]byte
		err := p.full(b[:])
		return strconv.Itoa(int(int16(binary.LittleEndian.Uint16(b[:])))), err
	case rdbEncInt32:
		var b [4]byte
		err := p.full(b[:])
		return strconv.Itoa(int(int32(binary.LittleEndian.Uint32(b[:])))), err
	case rdbEncLZF:
		clen, _, err := p.length()
		if err != nil {
			return "", err
		}
		ulen, _, err := p.length()
		if err != nil {
			return "", err
		}
		if clen > maxAuxString || ulen > maxAuxString {
			return "", fmt.Errorf("compressed string of %d/%d bytes", clen, ulen)
		}
		in := make([]byte, clen)
		if err := p.full(in); err != nil {
			return "", err
		}
		out, err := lzfDecompress(in, int(ulen))
		return string(out), err
	}
	return "", fmt.Errorf("unknown string encoding %d", n)
}

// lzfDecompress expands LZF data (liblzf's lzf_d.c format, which RDB uses for strings longer than 20 bytes)
// into exactly n bytes.
func lzfDecompress(in []byte, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	for ip := 0; ip < len(in); {
		ctrl := int(in[ip])
		ip++
		if ctrl < 32 { // literal run of ctrl+1 bytes
			l := ctrl + 1
			if ip+l > len(in) || len(out)+l > n {
				return nil, errors.New("lzf: literal run past the end")
			}
			out = append(out, in[ip:ip+l]...)
			ip += l
			continue
		}
		l := ctrl >> 5 // back reference
		if l == 7 {
			if ip >= len(in) {
				return nil, errors.New("lzf: truncated length")
			}
			l += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return nil, errors.New("lzf: truncated reference")
		}
		ref := len(out) - (ctrl&0x1F)<<8 - 1 - int(in[ip])
		ip++
		l += 2
		if ref < 0 || len(out)+l > n {
			return nil, errors.New("lzf: reference out of range")
		}
		for i := 0; i < l; i++ { // byte by byte: the source may overlap the output
			out = append(out, out[ref+i])
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("lzf: %d bytes, want %d", len(out), n)
	}
	return out, nil
}
