// Package ack tracks acknowledgements through the job graph.
//
// A source batch enters the graph with a Node holding one reference. Every
// operator that splits the batch (key-group routing, fan-out to several
// edges) takes more references; every part that reaches its end (written by
// a sink, filtered away, or folded into state) releases one. When the last
// reference goes, the node completes: its callback runs once with nil, or
// with the first error any part reported. A node derived from several parents
// (a window result built from many input batches) releases each parent when
// it completes.
//
// Nodes are safe for concurrent use. A nil *Node is a valid node that does
// nothing, for batches with nobody to tell.
package ack

import (
	"sync"
	"sync/atomic"
)

// Node is a reference-counted acknowledgement.
type Node struct {
	refs    atomic.Int64
	errOnce sync.Once
	err     error
	done    func(error)
	parents []*Node
}

// New returns a node with one reference that calls done when it completes.
// done may be nil.
func New(done func(error)) *Node {
	n := &Node{done: done}
	n.refs.Store(1)
	return n
}

// Derive returns a node with one reference whose completion releases one
// reference of each parent, passing on its error. The caller gives the new
// node the references it held on the parents.
func Derive(parents ...*Node) *Node {
	ps := make([]*Node, 0, len(parents))
	for _, p := range parents {
		if p != nil {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	if len(ps) == 1 {
		return ps[0]
	}
	n := &Node{parents: ps}
	n.refs.Store(1)
	return n
}

// Retain adds k references.
func (n *Node) Retain(k int) {
	if n == nil || k == 0 {
		return
	}
	if n.refs.Add(int64(k)) <= int64(k) {
		panic("ack: Retain on a completed node")
	}
}

// Release drops one reference. A non-nil err marks the node failed; the
// first error wins. The last release completes the node.
func (n *Node) Release(err error) {
	if n == nil {
		return
	}
	if err != nil {
		n.errOnce.Do(func() { n.err = err })
	}
	switch r := n.refs.Add(-1); {
	case r > 0:
		return
	case r < 0:
		panic("ack: Release of a completed node")
	}
	// refs reached zero: every Release happened before this point, so the
	// error (if any) is visible.
	var final error
	n.errOnce.Do(func() {})
	final = n.err
	if n.done != nil {
		n.done(final)
	}
	for _, p := range n.parents {
		p.Release(final)
	}
}

// Pending reports the number of references still held (for tests and
// metrics).
func (n *Node) Pending() int64 {
	if n == nil {
		return 0
	}
	return n.refs.Load()
}
