package aof

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
)

const (
	// Version is the format version written in the header of new logs.
	Version = 1

	// HeaderSize is the size of the file header: magic and version.
	HeaderSize = 8

	// RecordHeaderSize is the size of the frame before each payload: the
	// payload length and the CRC-32C.
	RecordHeaderSize = 8

	// MaxRecordSize caps a payload: 64 MiB for a job's payload plus 64 KiB
	// for what the engine puts around it. A length above it in a file is
	// damage, so a flipped bit cannot make Replay allocate gigabytes.
	MaxRecordSize = 64<<20 + 64<<10
)

// magic opens every log file. Reading it as text in a hex dump is the point.
var magic = [4]byte{'D', 'L', 'Y', 'D'}

// castagnoli is CRC-32C: hardware-accelerated on amd64 and arm64, and better
// at catching burst errors than the IEEE polynomial.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileHeader returns the 8 header bytes of a version-1 log.
func fileHeader() []byte {
	h := make([]byte, HeaderSize)
	copy(h, magic[:])
	binary.LittleEndian.PutUint32(h[4:], Version)
	return h
}

// recordCRC is the checksum stored in a record: CRC-32C over the 4 length
// bytes, then the payload. O(len(payload)).
func recordCRC(lenBytes, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, lenBytes), castagnoli, payload)
}

// appendRecord appends the framed payload to dst. O(len(payload)).
func appendRecord(dst, payload []byte) []byte {
	dst = slices.Grow(dst, RecordHeaderSize+len(payload))
	n := len(dst)
	dst = dst[:n+RecordHeaderSize]
	binary.LittleEndian.PutUint32(dst[n:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[n+4:], recordCRC(dst[n:n+4], payload))
	return append(dst, payload...)
}
