package workflow

import (
	"context"
	"testing"
	"time"
)

// TestMemoryCacheEvictsOldestSet: a key removed (invalidated or expired)
// stayed in the eviction order, and setting it again appended it a second
// time: the next eviction reached its stale position first and dropped
// the entry just set, keeping an older one. A key set again while live
// kept its first position and was dropped as the oldest. The entry set
// longest ago is the one dropped.
func TestMemoryCacheEvictsOldestSet(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		before func(c *MemoryCache) // a was set, then b; now a again
	}{
		{"invalidated", func(c *MemoryCache) { _ = c.Invalidate(ctx, "tag-a") }},
		{"expired", func(c *MemoryCache) {
			c.Clock.(*fakeClock).Advance(2 * time.Minute)
			if _, ok, _ := c.Get(ctx, "a"); ok {
				t.Fatal("a outlived its TTL")
			}
		}},
		{"live", func(*MemoryCache) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewMemoryCache(newFakeClock())
			c.MaxEntries = 2
			_ = c.Set(ctx, "a", "tag-a", 1, time.Minute)
			tc.before(c)
			_ = c.Set(ctx, "b", "tag-b", 2, time.Hour)
			_ = c.Set(ctx, "a", "tag-a", 3, time.Hour)
			_ = c.Set(ctx, "c", "tag-c", 4, time.Hour) // one too many: b, set longest ago, goes
			for key, want := range map[string]bool{"a": true, "b": false, "c": true} {
				if _, ok, _ := c.Get(ctx, key); ok != want {
					t.Errorf("%s cached %v; want %v (a set again after b, then c, with room for two)", key, ok, want)
				}
			}
			if n := len(c.entries); n != 2 {
				t.Errorf("%d entries; want 2", n)
			}
		})
	}
}
