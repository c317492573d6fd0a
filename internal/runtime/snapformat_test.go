package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/crc64nvme"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// rewriteSnapshots rewrites every state object of checkpoint id in the
// local store as form: "v1" as builds before snapshot format 2 wrote it
// (the header's format_version 1, the trailer a SHA-256 of the bytes
// before it), "v3" with a format version no build writes yet; and reseals
// the manifest with each object's new size and checksum, a CRC-64/NVME,
// or a SHA-256 (sum "sha256", as builds before CRC-64 recorded it).
func rewriteSnapshots(t *testing.T, store, id, form, sum string) {
	t.Helper()
	dir := filepath.Join(store, "ck", "checkpoints", id)
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ckptstore.DecodeManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range m.StateSnapshots {
		path := filepath.Join(store, filepath.FromSlash(s.URI))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		hlen := binary.BigEndian.Uint32(data[8:])
		hdr := string(data[12 : 12+hlen])
		if !strings.Contains(hdr, `"format_version":2`) {
			t.Fatalf("%s: header %s", s.URI, hdr)
		}
		out := append([]byte(nil), data[:12]...)
		switch form {
		case "v1":
			out = append(out, strings.Replace(hdr, `"format_version":2`, `"format_version":1`, 1)...)
			out = append(out, data[12+hlen:len(data)-8]...) // up to the trailer's CRC
			body := out[:len(out)-9]                        // before the trailer
			h := sha256.Sum256(body)
			out = append(out, h[:]...)
		case "v3":
			out = append(out, strings.Replace(hdr, `"format_version":2`, `"format_version":3`, 1)...)
			out = append(out, data[12+hlen:]...)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		m.StateSnapshots[i].Bytes = int64(len(out))
		if sum == "sha256" {
			h := sha256.Sum256(out)
			m.StateSnapshots[i].Checksum = "sha256:" + hex.EncodeToString(h[:])
		} else {
			m.StateSnapshots[i].Checksum = fmt.Sprintf("crc64nvme:%016x", crc64nvme.Checksum(out))
		}
	}
	if err := m.Seal(); err != nil {
		t.Fatal(err)
	}
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), enc, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Checkpoints of builds before snapshot format 2 (a SHA-256 in each state
// object's trailer; the manifest recording a CRC-64 of the object, or a
// SHA-256 before that) restore in this build on both backends: the job
// resumes from the newest with its state. A state object of a format
// newer than the build reads fails the start with ErrSnapshotVersion
// instead of falling back past it to the older checkpoint, and the
// checkpoint's objects stay as they were.
func TestCheckpointSnapshotFormats(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"badger", "memory"} {
		for _, c := range []struct{ form, sum string }{{"v1", "crc64"}, {"v1", "sha256"}, {"v3", "crc64"}} {
			t.Run(fmt.Sprintf("%s/%s-%s", backend, c.form, c.sum), func(t *testing.T) {
				t.Parallel()
				hist := &history{}
				store := t.TempDir()
				block := func() string {
					if backend == "badger" {
						return fmt.Sprintf(`"state":{"backend":"badger","path":%q}`, t.TempDir())
					}
					return `"state":{"backend":"memory"}`
				}
				id1, id2 := twoCheckpoints(t, ckptSpec(store, block(), 1, false), hist)
				rewriteSnapshots(t, store, id1, c.form, c.sum)
				rewriteSnapshots(t, store, id2, c.form, c.sum)
				objs, _ := filepath.Glob(filepath.Join(store, "ck", "checkpoints", "*", "state", "*.snap"))
				before := map[string][]byte{}
				for _, o := range objs {
					before[o], _ = os.ReadFile(o)
				}

				r2, err := startCkpt(t, ckptSpec(store, block(), 1, false), Options{}, hist)
				if c.form == "v3" {
					if err == nil {
						r2.stop()
						t.Fatalf("a newer snapshot format restored: %+v", r2.rt.CheckpointStatus())
					}
					if !errors.Is(err, statestore.ErrSnapshotVersion) || errors.Is(err, ckptstore.ErrCorrupt) || !strings.Contains(err.Error(), "newer build") {
						t.Fatalf("start with a newer snapshot format: %v", err)
					}
					for _, o := range objs {
						if now, _ := os.ReadFile(o); !bytes.Equal(now, before[o]) {
							t.Fatalf("%s changed", o)
						}
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if st := r2.rt.CheckpointStatus(); st.Restored != "checkpoint "+id2 || !st.Recovery.Done || st.Recovery.KeysRestored == 0 {
					t.Fatalf("recovery %+v, want checkpoint %s", st, id2)
				}
				r2.feed(1, []string{"ann"}, []int64{2})
				if got := r2.totals(); got["ann"] != 10 {
					t.Fatalf("ann's total after the restore: %v, want 10 (8 restored + 2)", got)
				}
				r2.stop()
			})
		}
	}
}
