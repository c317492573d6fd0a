package redis

import (
	"context"
	"encoding/json"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// LookupConfig is ArkFlow's redis temporary: where to look values up by
// key, for the tables a Stream's sql processor joins (temporary_list).
type LookupConfig struct {
	// Mode is the server, as for the input and output. Required.
	Mode Mode `json:"mode"`
	// RedisType is {type: string} (values of string keys, MGET) or
	// {type: list} (every element of list keys, LRANGE). Required.
	RedisType struct {
		Type string `json:"type"`
	} `json:"redis_type"`
	// TLS configures rediss:// connections.
	TLS *TLS `json:"tls,omitempty"`
}

// Lookup fetches the values of keys from Redis. Its methods are safe for
// concurrent use once Connect has returned.
type Lookup struct {
	cfg    LookupConfig
	client goredis.UniversalClient
}

// NewLookup checks cfg, naming the field at fault; it does no I/O.
func NewLookup(cfg LookupConfig) (*Lookup, error) {
	var f connectors.Fields
	checkMode(&f, &cfg.Mode)
	switch cfg.RedisType.Type {
	case "string", "list":
	case "":
		f.Add("redis_type.type", "is required: string or list")
	default:
		f.Add("redis_type.type", "must be string or list (got %q)", cfg.RedisType.Type)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return &Lookup{cfg: cfg}, nil
}

// DecodeLookupConfig decodes a temporary's keys strictly (unknown keys
// are errors) and checks them.
func DecodeLookupConfig(raw json.RawMessage) (*Lookup, error) {
	var cfg LookupConfig
	if err := connectors.DecodeConfig(raw, &cfg); err != nil {
		return nil, err
	}
	return NewLookup(cfg)
}

// Connect opens the connection and checks the server answers.
func (l *Lookup) Connect(ctx context.Context) error {
	c, err := dial(ctx, l.cfg.Mode, l.cfg.TLS, "arkflow:lookup")
	if err != nil {
		return err
	}
	l.client = c
	return nil
}

// Get returns the values of keys: for string keys each key's value
// (missing keys give none), for list keys every element of each list in
// order.
func (l *Lookup) Get(ctx context.Context, keys []string) ([][]byte, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var out [][]byte
	if l.cfg.RedisType.Type == "string" {
		vals, err := l.client.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, fmt.Errorf("redis: MGET: %w", err)
		}
		for _, v := range vals {
			if s, ok := v.(string); ok {
				out = append(out, []byte(s))
			}
		}
		return out, nil
	}
	pipe := l.client.Pipeline()
	cmds := make([]*goredis.StringSliceCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.LRange(ctx, k, 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redis: LRANGE: %w", err)
	}
	for _, c := range cmds {
		for _, s := range c.Val() {
			out = append(out, []byte(s))
		}
	}
	return out, nil
}

// Close closes the connection.
func (l *Lookup) Close() error {
	if l.client == nil {
		return nil
	}
	return l.client.Close()
}
