package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// What a release gives back of what a lease holds: all but Keep, or, with
// Only (what one deploy took, issue 35.2), only those of them.
func TestAReleaseGivesBackOnlyWhatItNames(t *testing.T) {
	held := []string{"a.example.com", "b.example.com", "c.example.com"}
	for _, tc := range []struct {
		name string
		in   ReleaseInput
		want []string
	}{
		{"everything", ReleaseInput{}, held},
		{"all but the kept", ReleaseInput{Keep: []string{"b.example.com"}}, []string{"a.example.com", "c.example.com"}},
		{"only what the deploy took", ReleaseInput{Only: []string{"c.example.com", "d.example.com"}}, []string{"c.example.com"}},
		{"only what it took, not the kept", ReleaseInput{Keep: []string{"c.example.com"}, Only: []string{"c.example.com"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.in.dropped(held)) })
	}
}
