package hubstore

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// With the writer's automatic checkpoint off, the checkpointer still
// copies committed writes into the database file, and the store works
// from the database file alone once they are copied.
func TestCheckpointerCopiesWAL(t *testing.T) {
	t.Parallel()
	s, clk, path := openTest(t)
	register(t, s, "n1", "b1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		crashed := filepath.Join(t.TempDir(), "db-only.db")
		copyFile(t, path, crashed) // no WAL: only what was checkpointed
		s2 := openAt(t, crashed, clk)
		_, err := s2.GetAgent(ctx, "n1")
		s2.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registration never reached the database file: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no WAL while open: %v", err)
	}
}
