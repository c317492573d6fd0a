package nats

import "strings"

// ackInfo is what the source needs of a JetStream message's metadata.
type ackInfo struct {
	streamSeq uint64
	pending   uint64
	tsNanos   uint64
}

// parseAckReply reads the metadata the server puts in a JetStream
// message's reply subject, without allocating (jetstream's Metadata
// allocates per message, on the source's hot path):
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>…]
//
// the first form with 9 tokens, the second with 11 or more, as nats.go
// reads them. A numeric token that is not all digits reads as 0, as in
// nats.go. ok is false for anything else.
func parseAckReply(reply string) (info ackInfo, ok bool) {
	rest, found := strings.CutPrefix(reply, "$JS.ACK.")
	if !found {
		return ackInfo{}, false
	}
	n := strings.Count(reply, ".") + 1
	switch {
	case n == 9:
	case n >= 11:
		// Skip the domain and the account hash.
		for i := 0; i < 2; i++ {
			_, rest, _ = strings.Cut(rest, ".")
		}
	default:
		return ackInfo{}, false
	}
	// stream, consumer, delivered, sseq, cseq, tm, pending
	var tok [7]string
	for i := range tok {
		tok[i], rest, _ = strings.Cut(rest, ".")
	}
	return ackInfo{streamSeq: parseNum(tok[3]), tsNanos: parseNum(tok[5]), pending: parseNum(tok[6])}, true
}

// parseNum reads a decimal number; anything but digits (or nothing) is 0.
func parseNum(s string) uint64 {
	if s == "" {
		return 0
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}
