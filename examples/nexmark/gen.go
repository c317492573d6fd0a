package main

import (
	"cmp"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// The events come from the Nexmark generator the bench module uses too
// (internal/nexmark); this example delivers them out of order by up to
// defaultMaxDisorderMS unless told otherwise.
type (
	Config  = nexmark.Config
	Events  = nexmark.Events
	Person  = nexmark.Person
	Auction = nexmark.Auction
	Bid     = nexmark.Bid
)

// defaultMaxDisorderMS is the example's disorder: its sources allow more.
const defaultMaxDisorderMS = 1000

// Generate makes cfg.Events events (nexmark.Generate), delivered out of
// order by up to defaultMaxDisorderMS when cfg does not say.
func Generate(cfg Config) *Events {
	cfg.MaxDisorderMS = cmp.Or(cfg.MaxDisorderMS, defaultMaxDisorderMS)
	return nexmark.Generate(cfg)
}

// The Arrow schemas of the three sources. Event times are timestamps in
// ms, named date_time as in Nexmark's tables.
var (
	tsMS = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}

	personSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "email_address", Type: arrow.BinaryTypes.String},
		{Name: "credit_card", Type: arrow.BinaryTypes.String},
		{Name: "city", Type: arrow.BinaryTypes.String},
		{Name: "state", Type: arrow.BinaryTypes.String},
		{Name: "date_time", Type: tsMS},
	}, nil)

	auctionSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "item_name", Type: arrow.BinaryTypes.String},
		{Name: "description", Type: arrow.BinaryTypes.String},
		{Name: "initial_bid", Type: arrow.PrimitiveTypes.Int64},
		{Name: "reserve", Type: arrow.PrimitiveTypes.Int64},
		{Name: "date_time", Type: tsMS},
		{Name: "expires", Type: tsMS},
		{Name: "seller", Type: arrow.PrimitiveTypes.Int64},
		{Name: "category", Type: arrow.PrimitiveTypes.Int64},
	}, nil)

	bidSchema = arrow.NewSchema([]arrow.Field{
		{Name: "auction", Type: arrow.PrimitiveTypes.Int64},
		{Name: "bidder", Type: arrow.PrimitiveTypes.Int64},
		{Name: "price", Type: arrow.PrimitiveTypes.Int64},
		{Name: "channel", Type: arrow.BinaryTypes.String},
		{Name: "url", Type: arrow.BinaryTypes.String},
		{Name: "date_time", Type: tsMS},
	}, nil)
)

// Layout says how rows become a source's input: row i of an entity goes
// to partition i mod Partitions, which is cut into batches of BatchSize
// rows.
type Layout struct {
	Partitions int // default 1
	BatchSize  int // default 64
}

func (l Layout) withDefaults() Layout {
	l.Partitions = max(l.Partitions, 1)
	l.BatchSize = cmp.Or(l.BatchSize, 64)
	return l
}

// personBatches are the persons as Arrow record batches, per partition.
func personBatches(e *Events, l Layout) [][]arrow.RecordBatch {
	return toBatches(e.Persons, personSchema, l, func(b *array.RecordBuilder, p Person) {
		b.Field(0).(*array.Int64Builder).Append(p.ID)
		b.Field(1).(*array.StringBuilder).Append(p.Name)
		b.Field(2).(*array.StringBuilder).Append(p.EmailAddress)
		b.Field(3).(*array.StringBuilder).Append(p.CreditCard)
		b.Field(4).(*array.StringBuilder).Append(p.City)
		b.Field(5).(*array.StringBuilder).Append(p.State)
		b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(p.DateTime))
	})
}

// auctionBatches are the auctions as Arrow record batches, per partition.
func auctionBatches(e *Events, l Layout) [][]arrow.RecordBatch {
	return toBatches(e.Auctions, auctionSchema, l, func(b *array.RecordBuilder, a Auction) {
		b.Field(0).(*array.Int64Builder).Append(a.ID)
		b.Field(1).(*array.StringBuilder).Append(a.ItemName)
		b.Field(2).(*array.StringBuilder).Append(a.Description)
		b.Field(3).(*array.Int64Builder).Append(a.InitialBid)
		b.Field(4).(*array.Int64Builder).Append(a.Reserve)
		b.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(a.DateTime))
		b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(a.Expires))
		b.Field(7).(*array.Int64Builder).Append(a.Seller)
		b.Field(8).(*array.Int64Builder).Append(a.Category)
	})
}

// bidBatches are the bids as Arrow record batches, per partition.
func bidBatches(e *Events, l Layout) [][]arrow.RecordBatch {
	return toBatches(e.Bids, bidSchema, l, func(b *array.RecordBuilder, x Bid) {
		b.Field(0).(*array.Int64Builder).Append(x.Auction)
		b.Field(1).(*array.Int64Builder).Append(x.Bidder)
		b.Field(2).(*array.Int64Builder).Append(x.Price)
		b.Field(3).(*array.StringBuilder).Append(x.Channel)
		b.Field(4).(*array.StringBuilder).Append(x.URL)
		b.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(x.DateTime))
	})
}

func toBatches[T any](rows []T, schema *arrow.Schema, l Layout, add func(*array.RecordBuilder, T)) [][]arrow.RecordBatch {
	l = l.withDefaults()
	parts := make([][]T, l.Partitions)
	for i, r := range rows {
		parts[i%l.Partitions] = append(parts[i%l.Partitions], r)
	}
	out := make([][]arrow.RecordBatch, l.Partitions)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for p, rs := range parts {
		for lo := 0; lo < len(rs); lo += l.BatchSize {
			for _, r := range rs[lo:min(lo+l.BatchSize, len(rs))] {
				add(b, r)
			}
			out[p] = append(out[p], b.NewRecordBatch())
		}
	}
	return out
}
