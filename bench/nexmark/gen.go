// Package nexmark generates the events of the Nexmark benchmark (persons,
// auctions and bids of an online auction site) as Go structs,
// deterministically from a seed, for the queries of package queries.
//
// The generator follows Nexmark's rules, written here from their
// description (no code is ported):
//
//   - Event n of the stream is a person, an auction or a bid by n mod 50:
//     1 person, then 3 auctions, then 46 bids.
//   - Event n happens at StartMS + n·InterEventMS: event time grows at a
//     fixed rate, and the events come out in event-time order.
//   - Persons and auctions get IDs from 1000 up, in order of creation.
//   - An auction's seller and a bid's bidder are existing persons, a bid's
//     auction an existing auction: three in four go to the "hot" one (the
//     newest whose number is a multiple of 10), the rest to one of the
//     newest 1000.
//   - Prices are log-uniform between 1 and 10⁶ dollars, in cents.
package nexmark

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
)

// Nexmark's proportions, out of every proportionTotal events.
const (
	personProportion  = 1
	auctionProportion = 3
	bidProportion     = 46
	proportionTotal   = personProportion + auctionProportion + bidProportion

	// FirstID is the ID of the first person and of the first auction.
	FirstID         = 1000
	firstCategoryID = 10
	numCategories   = 5

	// One in hotRatio picks is a random active person or auction, the
	// others the hot one.
	hotRatio = 4
	// The hot person or auction is the newest whose number is a multiple
	// of hotEvery, so it moves on as new ones are created.
	hotEvery = 10
	// Random picks come from the newest numActive.
	numActive = 1000
)

var (
	states   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	cities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	names    = []string{"Ada", "Ben", "Cleo", "Dev", "Edie", "Finn", "Gus", "Hana", "Ivo", "Juno", "Kai"}
	channels = []string{"Google", "Facebook", "Baidu", "Apple"}
)

// Config says what Generate makes. Zero fields but Events take defaults.
type Config struct {
	// Seed makes the events: one seed, one set of events.
	Seed uint64
	// Events is the number of events of all three kinds.
	Events int
	// StartMS is the event time of event 0, Unix ms (default
	// 2026-01-01T00:00:00Z).
	StartMS int64
	// InterEventMS is the event time between consecutive events (default
	// 10: 100 events a second, about 920 bids in a 10 s window).
	InterEventMS int64
	// ExtraBytes is the length of each event's Extra field (default 0):
	// Nexmark pads its events with it to reach an average size.
	ExtraBytes int
}

func (c Config) withDefaults() Config {
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

// Bid is a bid on an auction: Price in cents, DateTime its event time in
// Unix ms.
type Bid struct {
	Auction  int64  `arkflow:"auction"` // an Auction's ID
	Bidder   int64  `arkflow:"bidder"`  // a Person's ID
	Price    int64  `arkflow:"price"`
	Channel  string `arkflow:"channel"`
	URL      string `arkflow:"url"`
	DateTime int64  `arkflow:"date_time"`
	Extra    string `arkflow:"extra"`
}

// Events are the generated events of each kind, each in event-time order.
type Events struct {
	Persons  []Person
	Auctions []Auction
	Bids     []Bid
}

// gen is the generator's state while it makes the events in order.
type gen struct {
	cfg      Config
	rng      *rand.Rand
	persons  int64 // created so far
	auctions int64
}

// Generate makes cfg.Events events, the same ones for the same Config.
func Generate(cfg Config) *Events {
	cfg = cfg.withDefaults()
	g := &gen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e65786d61726b))}
	ev := &Events{Bids: make([]Bid, 0, cfg.Events/proportionTotal*bidProportion+bidProportion)}
	for n := int64(0); n < int64(cfg.Events); n++ {
		ts := cfg.StartMS + n*cfg.InterEventMS
		switch rem := n % proportionTotal; {
		case rem < personProportion:
			ev.Persons = append(ev.Persons, g.person(ts))
		case rem < personProportion+auctionProportion:
			ev.Auctions = append(ev.Auctions, g.auction(ts))
		default:
			ev.Bids = append(ev.Bids, g.bid(ts))
		}
	}
	return ev
}

func (g *gen) person(ts int64) Person {
	id := FirstID + g.persons
	g.persons++
	name := g.pick(names)
	return Person{
		ID:           id,
		Name:         name + " " + g.word(6),
		EmailAddress: fmt.Sprintf("%s%d@%s.com", name, id, g.word(5)),
		CreditCard:   fmt.Sprintf("%04d %04d %04d %04d", g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000)),
		City:         g.pick(cities),
		State:        g.pick(states),
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
		Expires:     ts + 10_000 + g.rng.Int64N(110_000),
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

// existing picks the number (from 0) of one of the n created so far.
// Event 0 is a person and events 1–3 auctions, so n > 0 for every bid and
// auction.
func (g *gen) existing(n int64) int64 {
	if g.rng.IntN(hotRatio) > 0 {
		return (n - 1) / hotEvery * hotEvery
	}
	active := min(n, numActive)
	return n - active + g.rng.Int64N(active)
}

// price is 10^(6u)·100 cents for u uniform in [0, 1), rounded.
func (g *gen) price() int64 {
	return int64(math.Round(math.Pow(10, g.rng.Float64()*6) * 100))
}

func (g *gen) pick(from []string) string { return from[g.rng.IntN(len(from))] }

// word is n random lowercase letters.
func (g *gen) word(n int) string {
	if n == 0 {
		return ""
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + g.rng.IntN(26))
	}
	return string(b)
}
