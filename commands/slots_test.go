package commands

import "testing"

func TestCRC16IsXMODEM(t *testing.T) {
	// The check value of CRC-16/XMODEM, and the one in Redis's crc16.c.
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
}

// The slots Redis 7's CLUSTER KEYSLOT answers for the same keys.
func TestKeySlotMatchesRedis(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"foo", 12182},
		{"bar", 5061},
		{"123456789", 12739},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},    // "{}" is empty: the whole key is hashed
		{"foo{{bar}}zap", 4015}, // the tag is "{bar", between the first { and the next }
		{"{bar", 4015},
		{"foo{bar}{zap}", 5061}, // only the first tag counts: "bar"
		{"", 0},
		{"{}", 15257},
		{"a{b", 13340}, // no } after the {: the whole key
		{"}a{", 11710},
		{"jobs:email", 8904},
		{"{jobs}:dlq", 9631},
	} {
		if got := KeySlot(tc.key); got != tc.slot {
			t.Errorf("KeySlot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
		if got := KeySlot([]byte(tc.key)); got != tc.slot {
			t.Errorf("KeySlot([]byte(%q)) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

func BenchmarkKeySlot(b *testing.B) {
	key := []byte("jobs:email:{tenant42}")
	for b.Loop() {
		KeySlot(key)
	}
}
