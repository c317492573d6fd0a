package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// Keyed is the state of one key while an operator processes a batch: what
// user code reads and writes through Value and Map. Writes are staged in
// the batch's epoch and commit when its output is acknowledged; reads see
// them at once. A Process operator gets one per row from
// arkflow.ProcessContext.State; it is valid until the function returns.
type Keyed struct{ k *statestore.Keyed }

func init() {
	statestore.Public = func(k *statestore.Keyed) any { return &Keyed{k: k} }
}

// Key returns the key's bytes (the key column's value as the engine
// encodes it).
func (k *Keyed) Key() []byte { return k.k.Key() }

// Value is a single value of type T per key, named so that several can
// live side by side. T is encoded in binary for integers, floats, bools,
// strings and []byte, and as JSON otherwise.
type Value[T any] struct{ ns string }

// NewValue declares a keyed value.
func NewValue[T any](name string) Value[T] { return Value[T]{ns: "value:" + name} }

// Get returns the key's value, and whether it has one (an expired value
// has none).
func (v Value[T]) Get(k *Keyed) (T, bool, error) {
	var zero T
	b, ok, err := k.k.Get(v.ns, k.k.Key())
	if err != nil || !ok {
		return zero, false, err
	}
	x, err := decode[T](b)
	if err != nil {
		return zero, false, fmt.Errorf("state %s: %w", v.ns, err)
	}
	return x, true, nil
}

// Set stores the key's value, with the operator's default TTL.
func (v Value[T]) Set(k *Keyed, x T) error {
	return v.SetTTL(k, x, k.k.DefaultTTL())
}

// SetTTL stores the key's value, gone after ttl (0: never).
func (v Value[T]) SetTTL(k *Keyed, x T, ttl time.Duration) error {
	b, err := encode(x)
	if err != nil {
		return fmt.Errorf("state %s: %w", v.ns, err)
	}
	if err := k.k.Put(v.ns, k.k.Key(), b, ttl); err != nil {
		return fmt.Errorf("state %s: %w", v.ns, err)
	}
	return nil
}

// Clear removes the key's value. It panics on a read-only handle (one a
// query returned: arkflow's Job.QueryState), which no operator gets.
func (v Value[T]) Clear(k *Keyed) {
	if err := k.k.Delete(v.ns, k.k.Key()); err != nil {
		panic(fmt.Sprintf("state %s: %v", v.ns, err))
	}
}

// Map is a map from K to V per key.
type Map[K comparable, V any] struct{ ns string }

// NewMap declares a keyed map.
func NewMap[K comparable, V any](name string) Map[K, V] { return Map[K, V]{ns: "map:" + name} }

func (m Map[K, V]) entryKey(k *Keyed, key K) ([]byte, error) {
	kb, err := encode(key)
	if err != nil {
		return nil, err
	}
	return append(m.prefix(k), kb...), nil
}

func (m Map[K, V]) prefix(k *Keyed) []byte {
	key := k.k.Key()
	p := binary.BigEndian.AppendUint32(nil, uint32(len(key)))
	return append(p, key...)
}

// Get returns the value under key.
func (m Map[K, V]) Get(k *Keyed, key K) (V, bool, error) {
	var zero V
	ek, err := m.entryKey(k, key)
	if err != nil {
		return zero, false, fmt.Errorf("state %s: %w", m.ns, err)
	}
	b, ok, err := k.k.Get(m.ns, ek)
	if err != nil || !ok {
		return zero, false, err
	}
	x, err := decode[V](b)
	if err != nil {
		return zero, false, fmt.Errorf("state %s: %w", m.ns, err)
	}
	return x, true, nil
}

// Put stores v under key, with the operator's default TTL.
func (m Map[K, V]) Put(k *Keyed, key K, v V) error {
	ek, err := m.entryKey(k, key)
	if err != nil {
		return fmt.Errorf("state %s: %w", m.ns, err)
	}
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("state %s: %w", m.ns, err)
	}
	if err := k.k.Put(m.ns, ek, b, k.k.DefaultTTL()); err != nil {
		return fmt.Errorf("state %s: %w", m.ns, err)
	}
	return nil
}

// Delete removes key.
func (m Map[K, V]) Delete(k *Keyed, key K) error {
	ek, err := m.entryKey(k, key)
	if err != nil {
		return fmt.Errorf("state %s: %w", m.ns, err)
	}
	if err := k.k.Delete(m.ns, ek); err != nil {
		return fmt.Errorf("state %s: %w", m.ns, err)
	}
	return nil
}

// Range calls fn for every entry of the key's map (staged writes
// included), in key-byte order, until fn returns false.
func (m Map[K, V]) Range(k *Keyed, fn func(K, V) bool) error {
	prefix := m.prefix(k)
	var out error
	err := k.k.ScanPrefix(m.ns, prefix, func(user, value []byte) bool {
		key, err := decode[K](user[len(prefix):])
		if err == nil {
			var v V
			v, err = decode[V](value)
			if err == nil {
				return fn(key, v)
			}
		}
		out = fmt.Errorf("state %s: %w", m.ns, err)
		return false
	})
	if err != nil {
		return err
	}
	return out
}

// encode writes basic types in binary (order-preserving for integers, so
// map keys sort numerically) and anything else as JSON.
func encode[T any](x T) ([]byte, error) {
	switch v := any(x).(type) {
	case string:
		return []byte(v), nil
	case []byte:
		return append([]byte(nil), v...), nil
	case bool:
		if v {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case int:
		return binary.BigEndian.AppendUint64(nil, uint64(v)^(1<<63)), nil
	case int64:
		return binary.BigEndian.AppendUint64(nil, uint64(v)^(1<<63)), nil
	case int32:
		return binary.BigEndian.AppendUint64(nil, uint64(int64(v))^(1<<63)), nil
	case uint64:
		return binary.BigEndian.AppendUint64(nil, v), nil
	case float64:
		return binary.BigEndian.AppendUint64(nil, math.Float64bits(v)), nil
	}
	return json.Marshal(x)
}

func decode[T any](b []byte) (T, error) {
	var x T
	switch p := any(&x).(type) {
	case *string:
		*p = string(b)
	case *[]byte:
		*p = append([]byte(nil), b...)
	case *bool:
		if len(b) != 1 {
			return x, fmt.Errorf("bool value of %d bytes", len(b))
		}
		*p = b[0] == 1
	case *int, *int64, *int32, *uint64, *float64:
		if len(b) != 8 {
			return x, fmt.Errorf("8-byte value of %d bytes", len(b))
		}
		u := binary.BigEndian.Uint64(b)
		switch q := p.(type) {
		case *int:
			*q = int(int64(u ^ (1 << 63)))
		case *int64:
			*q = int64(u ^ (1 << 63))
		case *int32:
			*q = int32(int64(u ^ (1 << 63)))
		case *uint64:
			*q = u
		case *float64:
			*q = math.Float64frombits(u)
		}
	default:
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&x); err != nil {
			return x, fmt.Errorf("decoding %T: %w", x, err)
		}
	}
	return x, nil
}
