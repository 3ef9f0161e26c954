package commands

// Key slots, as Redis Cluster maps keys: CRC16 (the XMODEM variant of
// Redis's crc16.c: polynomial 0x1021, initial value 0, no reflection) of
// the key, or of its {hash tag}, modulo 16384. Clients compute the same
// number to pick a node, so it must match Redis bit for bit.

// Slots is the number of hash slots, as in Redis Cluster.
const Slots = 16384

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// crc16 is CRC-16/XMODEM. O(len(b)).
func crc16[K string | []byte](b K) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^b[i]]
	}
	return crc
}

// KeySlot is the hash slot of a key, as Redis's keyHashSlot: if the key
// holds a '{' followed later by a '}' with at least one byte between them,
// only the bytes between the first '{' and the first '}' after it are
// hashed, so "{user1000}.following" and "{user1000}.followers" share a
// slot; otherwise (no '{', no '}' after it, or "{}") the whole key is.
// O(len(key)).
func KeySlot[K string | []byte](key K) int {
	s := 0
	for s < len(key) && key[s] != '{' {
		s++
	}
	if s == len(key) {
		return int(crc16(key) & (Slots - 1))
	}
	e := s + 1
	for e < len(key) && key[e] != '}' {
		e++
	}
	if e == len(key) || e == s+1 {
		return int(crc16(key) & (Slots - 1))
	}
	return int(crc16(key[s+1:e]) & (Slots - 1))
}
