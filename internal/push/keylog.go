package push

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/arkflow-rs/arkflow-go/internal/corruption"
	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
)

// Sum identifies an idempotency key: the first 16 bytes of its SHA-256.
// The seen-set and its file hold sums, not keys, so that a key of any
// length costs the same memory; a cryptographic hash, so that no client
// can make its key collide with another's and have that one's row taken
// for a duplicate. The zero Sum stands for "no key".
type Sum [16]byte

// SumOf returns the sum of a non-empty key, never the zero Sum.
func SumOf(key string) Sum {
	h := sha256.Sum256([]byte(key))
	var s Sum
	copy(s[:], h[:])
	if s == (Sum{}) {
		s[15] = 1 // the zero Sum means "no key"
	}
	return s
}

// The key log is the file a seen-set keeps its sums in beside the WAL. It
// is a magic header followed by records, each a batch of sums:
//
//	magic   "AFKEYS\x00\x01"
//	record  count uint32 LE | crc uint32 LE (CRC-32C of count and sums) | count × 16 bytes
//
// Records are appended, each with one write and an fsync, so a crash can
// tear only the last one (a power loss before its fsync); a record that
// does not check is that torn tail, and the file is read up to it. The
// file is created, and compacted, whole: written beside, fsynced and
// renamed over (fsutil.WriteFile), so its header is never torn.
const keyMagic = "AFKEYS\x00\x01"

// maxRecordSums bounds a record's count, so that a damaged count is not
// taken for a huge record.
const maxRecordSums = 1 << 24

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendKeyRecord appends a record of sums to b.
func appendKeyRecord(b []byte, sums []Sum) []byte {
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(sums)))
	at := len(b)
	b = append(b, hdr[:]...)
	for _, s := range sums {
		b = append(b, s[:]...)
	}
	crc := crc32.Update(crc32.Checksum(b[at:at+4], castagnoli), castagnoli, b[at+8:])
	binary.LittleEndian.PutUint32(b[at+4:at+8], crc)
	return b
}

// encodeKeyFile returns a whole key log holding sums, in order.
func encodeKeyFile(sums []Sum) []byte {
	b := make([]byte, 0, len(keyMagic)+8+16*len(sums))
	b = append(b, keyMagic...)
	if len(sums) > 0 {
		b = appendKeyRecord(b, sums)
	}
	return b
}

// decodeKeyFile reads a key log: the sums of its records in order, and the
// length of the part that checks (less than len(b) after a torn append).
// An empty file holds nothing; one without the header is not a key log,
// an error matching corruption.Err.
func decodeKeyFile(b []byte) (sums []Sum, good int, err error) {
	if len(b) == 0 {
		return nil, 0, nil
	}
	if len(b) < len(keyMagic) || string(b[:len(keyMagic)]) != keyMagic {
		return nil, 0, corruption.Mark(errors.New("not an idempotency key log (its header is missing)"))
	}
	good = len(keyMagic)
	for rest := b[good:]; len(rest) >= 8; rest = b[good:] {
		n := binary.LittleEndian.Uint32(rest[:4])
		if n == 0 || n > maxRecordSums || uint64(len(rest)-8) < uint64(n)*16 {
			break
		}
		body := rest[8 : 8+int(n)*16]
		crc := crc32.Update(crc32.Checksum(rest[:4], castagnoli), castagnoli, body)
		if crc != binary.LittleEndian.Uint32(rest[4:8]) {
			break
		}
		for i := 0; i < len(body); i += 16 {
			sums = append(sums, Sum(body[i:i+16]))
		}
		good += 8 + len(body)
	}
	return sums, good, nil
}

// readKeyFile reads the key log at path (none: nothing). A torn tail is
// cut off, by rewriting the file whole, so that later appends follow the
// part that checks.
func readKeyFile(path string) (sums []Sum, cut int, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	sums, good, err := decodeKeyFile(b)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	if good < len(b) {
		if err := writeKeyFile(path, sums); err != nil {
			return nil, 0, err
		}
	}
	return sums, len(b) - good, nil
}

// writeKeyFile makes path hold sums, atomically.
func writeKeyFile(path string, sums []Sum) error {
	return fsutil.WriteFile(filepath.Dir(path), filepath.Base(path), encodeKeyFile(sums))
}

// appendKeyFile appends a record of sums to the key log at path, which
// exists, and fsyncs it. A failed append may leave a torn record: the
// caller then rewrites the file whole before appending again.
func appendKeyFile(path string, sums []Sum) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(appendKeyRecord(nil, sums))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
