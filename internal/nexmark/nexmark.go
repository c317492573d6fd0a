// Package nexmark generates the events of the Nexmark benchmark's online
// auction site (persons, auctions and bids), seeded and deterministic: the
// events the Nexmark example (examples/nexmark) joins and the bench module
// (bench/) measures queries over.
package nexmark

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// The event generator follows the shape of the Nexmark generator's
// definitions (persons, auctions and bids of an online auction site):
//
//   - Event n of the stream is a person, an auction or a bid by n mod 50:
//     1 person, then 3 auctions, then 46 bids (2 %, 6 % and 92 %).
//   - Event n happens at Start + n·InterEvent: event time grows with the
//     event number, at a fixed rate.
//   - Persons and auctions get IDs from 1000 up, in order of creation.
//   - An auction's seller and a bid's bidder are existing persons, a bid's
//     auction an existing auction: most go to a "hot" one (the newest
//     whose number is a multiple of hotEvery), the rest to one of the
//     newest active persons or auctions. Nexmark may also pick an ID a
//     little ahead of the newest (one not created yet); this generator
//     never does, so every seller of an auction exists before it.
//   - Persons live in one of 6 states and 10 cities (picked
//     independently); auctions are in one of 5 categories from 10 on;
//     prices are log-uniform between 1 and 10⁶ times 100 (cents), and a
//     reserve is the initial bid plus such a price.
//
// The rows of each entity are delivered in event-time order disturbed by
// at most MaxDisorderMS (0: in event-time order): each row is delivered
// at its event time plus a random delay of up to MaxDisorderMS, so a row
// is never more than that behind a row delivered before it.
//
// The code is written from these rules, not ported; the names, cities,
// channels and string fields are this file's own.

// FirstID is the ID of the first person and of the first auction.
const FirstID = 1000

// Nexmark's proportions, out of every proportionTotal events.
const (
	personProportion  = 1
	auctionProportion = 3
	bidProportion     = 46
	proportionTotal   = personProportion + auctionProportion + bidProportion

	firstCategoryID = 10
	numCategories   = 5

	// One in hotRatio sellers, bidders and auctions is a random active
	// one; the others are the hot one (Nexmark's default ratios are 4 for
	// sellers and bidders and 2 for auctions; one ratio keeps this short).
	hotRatio = 4
	// The hot person or auction is the newest whose number (from 0) is a
	// multiple of hotEvery: it changes as new ones are created.
	hotEvery = 10
	// The random picks come from the newest numActive persons or auctions.
	numActive = 1000
)

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Ada", "Ben", "Cleo", "Dev", "Edie", "Finn", "Gus", "Hana", "Ivo", "Juno", "Kai"}
	lastNames  = []string{"Abbot", "Brandt", "Castro", "Dunn", "Eames", "Frost", "Greer", "Hale", "Irwin"}
	channels   = []string{"Search", "Social", "Mail", "App"}
)

// Config says what Generate makes. The zero value of every field but
// Events gets a default.
type Config struct {
	// Seed makes the events: one seed, one set of events.
	Seed uint64
	// Events is the number of events, of all three kinds.
	Events int
	// StartMS is the event time of the first event, in Unix ms (default
	// 2026-01-01T00:00:00Z).
	StartMS int64
	// InterEventMS is the event time between consecutive events (default
	// 10: 100 events a second, so a 10 s window holds about 20 new
	// persons, 60 new auctions and 920 bids).
	InterEventMS int64
	// MaxDisorderMS bounds how far behind the newest row of its entity a
	// row is delivered (0: rows in event-time order). It must be at most
	// the sources' out_of_orderness_ms for no row to be late.
	MaxDisorderMS int64
	// PriceLevels, when positive, draws prices from that many values
	// (100, 200, …) instead of Nexmark's log-uniform prices, so that many
	// bids share a price and a window's highest price is often tied.
	PriceLevels int
	// ExtraBytes is the length of each event's Extra field (default 0):
	// Nexmark pads its events with it to reach an average size.
	ExtraBytes int
}

// WithDefaults is c with the defaults of its zero fields.
func (c Config) WithDefaults() Config {
	c.StartMS = cmp.Or(c.StartMS, 1_767_225_600_000)
	c.InterEventMS = cmp.Or(c.InterEventMS, 10)
	return c
}

// Person is a new user of the auction site.
type Person struct {
	ID           int64  `arkflow:"id"`
	Name         string `arkflow:"name"`
	EmailAddress string `arkflow:"email_address"`
	CreditCard   string `arkflow:"credit_card"`
	City         string `arkflow:"city"`
	State        string `arkflow:"state"`
	DateTime     int64  `arkflow:"date_time"` // event time, Unix ms
	Extra        string `arkflow:"extra"`
}

// Auction is a new item for sale.
type Auction struct {
	ID          int64  `arkflow:"id"`
	ItemName    string `arkflow:"item_name"`
	Description string `arkflow:"description"`
	InitialBid  int64  `arkflow:"initial_bid"`
	Reserve     int64  `arkflow:"reserve"`
	DateTime    int64  `arkflow:"date_time"` // event time, Unix ms
	Expires     int64  `arkflow:"expires"`   // Unix ms
	Seller      int64  `arkflow:"seller"`    // a Person's ID
	Category    int64  `arkflow:"category"`
	Extra       string `arkflow:"extra"`
}

// Bid is a bid on an auction: Price in cents.
type Bid struct {
	Auction  int64  `arkflow:"auction"` // an Auction's ID
	Bidder   int64  `arkflow:"bidder"`  // a Person's ID
	Price    int64  `arkflow:"price"`
	Channel  string `arkflow:"channel"`
	URL      string `arkflow:"url"`
	DateTime int64  `arkflow:"date_time"` // event time, Unix ms
	Extra    string `arkflow:"extra"`
}

// Events are the generated events of each kind, in delivery order.
type Events struct {
	Persons  []Person
	Auctions []Auction
	Bids     []Bid
}

// gen is the generator's state while it makes the events in order.
type gen struct {
	cfg      Config
	rng      *rand.Rand
	persons  int64 // persons created so far
	auctions int64
}

// Generate makes cfg.Events events, deterministically from cfg.Seed.
func Generate(cfg Config) *Events {
	cfg = cfg.WithDefaults()
	g := &gen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e65786d61726b))}
	var ev Events
	// Delivery times (event time plus a delay), beside each row.
	var pAt, aAt, bAt []int64
	for n := int64(0); n < int64(cfg.Events); n++ {
		ts := cfg.StartMS + n*cfg.InterEventMS
		at := ts
		if cfg.MaxDisorderMS > 0 {
			at += g.rng.Int64N(cfg.MaxDisorderMS + 1)
		}
		switch rem := n % proportionTotal; {
		case rem < personProportion:
			ev.Persons = append(ev.Persons, g.person(ts))
			pAt = append(pAt, at)
		case rem < personProportion+auctionProportion:
			ev.Auctions = append(ev.Auctions, g.auction(ts))
			aAt = append(aAt, at)
		default:
			ev.Bids = append(ev.Bids, g.bid(ts))
			bAt = append(bAt, at)
		}
	}
	if cfg.MaxDisorderMS > 0 {
		ev.Persons = deliveryOrder(ev.Persons, pAt)
		ev.Auctions = deliveryOrder(ev.Auctions, aAt)
		ev.Bids = deliveryOrder(ev.Bids, bAt)
	}
	return &ev
}

// deliveryOrder sorts rows by their delivery time (stably: rows are in
// event-time order before).
func deliveryOrder[T any](rows []T, at []int64) []T {
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(at[a], at[b]) })
	out := make([]T, len(rows))
	for i, j := range idx {
		out[i] = rows[j]
	}
	return out
}

func (g *gen) person(ts int64) Person {
	id := FirstID + g.persons
	g.persons++
	last := g.pick(lastNames)
	return Person{
		ID:           id,
		Name:         g.pick(firstNames) + " " + last,
		EmailAddress: fmt.Sprintf("%s%d@%s.com", strings.ToLower(last), id, g.word(5)),
		CreditCard:   fmt.Sprintf("%04d %04d %04d %04d", g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000)),
		City:         g.pick(usCities),
		State:        g.pick(usStates),
		DateTime:     ts,
		Extra:        g.word(g.cfg.ExtraBytes),
	}
}

func (g *gen) auction(ts int64) Auction {
	id := FirstID + g.auctions
	g.auctions++
	initial := g.price()
	return Auction{
		ID:          id,
		ItemName:    g.word(8),
		Description: g.word(6) + " " + g.word(10),
		InitialBid:  initial,
		Reserve:     initial + g.price(),
		DateTime:    ts,
		Expires:     ts + 10_000 + g.rng.Int64N(110_000), // open 10 s to 2 min
		Seller:      FirstID + g.existing(g.persons),
		Category:    firstCategoryID + g.rng.Int64N(numCategories),
		Extra:       g.word(g.cfg.ExtraBytes),
	}
}

func (g *gen) bid(ts int64) Bid {
	return Bid{
		Auction:  FirstID + g.existing(g.auctions),
		Bidder:   FirstID + g.existing(g.persons),
		Price:    g.price(),
		Channel:  g.pick(channels),
		URL:      "https://auctions.example/item?q=" + g.word(6),
		DateTime: ts,
		Extra:    g.word(g.cfg.ExtraBytes),
	}
}

// existing picks the number (from 0) of one of the n created so far: the
// hot one, or one of the newest numActive.
func (g *gen) existing(n int64) int64 {
	if n == 0 {
		// Event 0 is a person and events 1–3 auctions, so every bid and
		// auction has a person and every bid an auction before it.
		panic("nexmark: no person or auction created yet")
	}
	if g.rng.IntN(hotRatio) > 0 {
		return (n - 1) / hotEvery * hotEvery
	}
	active := min(n, numActive)
	return n - active + g.rng.Int64N(active)
}

// price is Nexmark's price: 10^(6u)·100 for u uniform in [0, 1), rounded;
// or, with PriceLevels, one of PriceLevels multiples of 100.
func (g *gen) price() int64 {
	if g.cfg.PriceLevels > 0 {
		return 100 * (1 + g.rng.Int64N(int64(g.cfg.PriceLevels)))
	}
	return int64(math.Round(math.Pow(10, g.rng.Float64()*6) * 100))
}

func (g *gen) pick(from []string) string { return from[g.rng.IntN(len(from))] }

// word is n random lowercase letters.
func (g *gen) word(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + g.rng.IntN(26))
	}
	return string(b)
}
