package reserve

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"strings"
)

// Pool is the range declared IPs are allocated from, e.g. 10.200.0.0/24.
//
// The network address (the first of the prefix) and the broadcast address
// (the last) are never handed out. Prefixes without room for them — an IPv4
// /31 or /32 (RFC 3021), an IPv6 /127 or /128 — hand out every address.
type Pool struct {
	CIDR netip.Prefix
}

// Validate reports whether the pool is usable.
func (p Pool) Validate() error {
	if !p.CIDR.IsValid() {
		return errors.New("no valid IP pool configured (want a CIDR such as 10.200.0.0/24)")
	}
	if p.CIDR.Addr().Zone() != "" {
		return fmt.Errorf("IP pool %s: zoned addresses cannot be reserved", p.CIDR)
	}
	return nil
}

// bounds are the first and last usable addresses.
func (p Pool) bounds() (first, last netip.Addr, ok bool) {
	if p.Validate() != nil {
		return netip.Addr{}, netip.Addr{}, false
	}
	prefix := p.CIDR.Masked()
	first, last = prefix.Addr(), lastAddr(prefix)
	if prefix.Addr().BitLen()-prefix.Bits() >= 2 {
		first, last = first.Next(), last.Prev()
	}
	return first, last, true
}

// lastAddr is the highest address of prefix (all host bits set).
func lastAddr(prefix netip.Prefix) netip.Addr {
	b := prefix.Masked().Addr().AsSlice()
	for i := prefix.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Contains reports whether a is an address the pool hands out.
func (p Pool) Contains(a netip.Addr) bool {
	first, last, ok := p.bounds()
	if !ok || a.BitLen() != first.BitLen() || a.Zone() != "" {
		return false
	}
	return first.Compare(a) <= 0 && a.Compare(last) <= 0
}

// Addrs yields the addresses the pool hands out, lowest first.
func (p Pool) Addrs() iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		first, last, ok := p.bounds()
		if !ok {
			return
		}
		for a := first; a.IsValid() && a.Compare(last) <= 0; a = a.Next() {
			if !yield(a) {
				return
			}
		}
	}
}

// objectName is the name of the IPReservation of a: an IPv4 address as it
// is ("10.200.0.5"); an IPv6 address fully expanded with '-' for ':'
// ("fd00-0000-…-0001"), as ':' is not allowed in object names.
func objectName(a netip.Addr) string {
	if a.Is4() {
		return a.String()
	}
	return strings.ReplaceAll(a.StringExpanded(), ":", "-")
}
