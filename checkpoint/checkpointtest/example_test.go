package checkpointtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/checkpoint/checkpointtest"
)

// A store whose LATEST pointer cannot be written: the write fails with
// ErrInjected and never reaches the real store, until Heal.
func ExampleFaultStore() {
	dir, _ := os.MkdirTemp("", "checkpointtest-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := checkpoint.OpenStore(ctx, "file://"+dir, checkpoint.StoreOptions{})
	if err != nil {
		panic(err)
	}
	f := checkpointtest.NewFaultStore(store)
	var s checkpoint.Store = f // hand f to checkpoint.NewCatalog or the code under test

	f.FailKey(checkpointtest.OpPut, "/LATEST", nil)
	err = s.Put(ctx, "orders/LATEST", strings.NewReader("7"), 1)
	fmt.Println("injected:", errors.Is(err, checkpointtest.ErrInjected))
	_, err = store.Get(ctx, "orders/LATEST")
	fmt.Println("reached the store:", !errors.Is(err, checkpoint.ErrNotFound))

	f.Heal()
	fmt.Println("after Heal:", s.Put(ctx, "orders/LATEST", strings.NewReader("7"), 1))
	fmt.Println("puts:", f.Calls(checkpointtest.OpPut))
	// Output:
	// injected: true
	// reached the store: false
	// after Heal: <nil>
	// puts: 2
}
