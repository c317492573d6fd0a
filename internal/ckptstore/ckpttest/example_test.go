package ckpttest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore/ckpttest"
)

// A store whose LATEST pointer cannot be written: the write fails with
// ErrInjected and never reaches the real store, until Heal.
func ExampleFaultStore() {
	dir, _ := os.MkdirTemp("", "ckpttest-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := ckptstore.OpenStore(ctx, "file://"+dir, ckptstore.StoreOptions{})
	if err != nil {
		panic(err)
	}
	f := ckpttest.NewFaultStore(store)
	var s ckptstore.Store = f // hand f to ckptstore.NewCatalog or the code under test

	f.FailKey(ckpttest.OpPut, "/LATEST", nil)
	err = s.Put(ctx, "orders/LATEST", strings.NewReader("7"), 1)
	fmt.Println("injected:", errors.Is(err, ckpttest.ErrInjected))
	_, err = store.Get(ctx, "orders/LATEST")
	fmt.Println("reached the store:", !errors.Is(err, ckptstore.ErrNotFound))

	f.Heal()
	fmt.Println("after Heal:", s.Put(ctx, "orders/LATEST", strings.NewReader("7"), 1))
	fmt.Println("puts:", f.Calls(ckpttest.OpPut))
	// Output:
	// injected: true
	// reached the store: false
	// after Heal: <nil>
	// puts: 2
}
