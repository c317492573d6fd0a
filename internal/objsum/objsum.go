// Package objsum names the checksums of checkpoint state objects, as
// they appear in a manifest's state_snapshots[].checksum:
//
//   - "crc64nvme:" and 16 hex digits: CRC-64/NVME of every byte of the
//     object, what checkpoints record (the default full-object checksum of
//     Amazon S3; minio/crc64nvme, about 9× the speed of SHA-256 here);
//   - "sha256:" and 64 hex digits: SHA-256, what checkpoints recorded
//     before; still verified.
//
// The checksum guards a state object against damage and against being
// another (valid) object than the one the manifest names. It is not a
// signature: the manifest's own checksum is ArkFlow's FNV-1.
package objsum

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"

	"github.com/minio/crc64nvme"
)

// Prefixes of the two checksums.
const (
	CRC64NVME = "crc64nvme:"
	SHA256    = "sha256:"
)

// New returns a hash for the algorithm of checksum, and its prefix; ok is
// false for a checksum that names neither (or is malformed).
func New(checksum string) (h hash.Hash, prefix string, ok bool) {
	switch {
	case strings.HasPrefix(checksum, CRC64NVME) && validHex(checksum[len(CRC64NVME):], 16):
		return crc64nvme.New(), CRC64NVME, true
	case strings.HasPrefix(checksum, SHA256) && validHex(checksum[len(SHA256):], 64):
		return sha256.New(), SHA256, true
	}
	return nil, "", false
}

// NewCRC64 returns the hash checkpoints record.
func NewCRC64() hash.Hash { return crc64nvme.New() }

// Format returns prefix and the hex of sum.
func Format(prefix string, sum []byte) string { return prefix + hex.EncodeToString(sum) }

// Valid reports whether checksum is one of the two, well formed.
func Valid(checksum string) bool {
	_, _, ok := New(checksum)
	return ok
}

func validHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
